"""BLAKE3-256 digests: written ``blake3:`` + 64 lowercase hex, shown as 12, typed as >= 6."""

from __future__ import annotations

import os
import re
from pathlib import Path

import blake3

from dsreg.errors import InvalidSpecError

__all__ = [
    "ALGORITHM",
    "MIN_PREFIX",
    "PREFIX",
    "SHORT",
    "format_digest",
    "hash_bytes",
    "hash_file",
    "hex_of",
    "is_digest",
    "short",
]

ALGORITHM = "blake3"
PREFIX = "blake3:"
SHORT = 12
MIN_PREFIX = 6
_FULL = re.compile(r"^blake3:[0-9a-f]{64}$")
_CHUNK = 1 << 20
# One thread per file: files are hashed in parallel across a pool, so a file never fans out.
_MAX_THREADS = 1


def hash_bytes(data: bytes | bytearray | memoryview) -> str:
    """The digest of ``data``: ``blake3:`` + 64 lowercase hex."""
    return PREFIX + blake3.blake3(data, max_threads=_MAX_THREADS).hexdigest()


def hash_file(path: str | os.PathLike[str]) -> str:
    """The digest of a file's bytes, read in 1 MiB chunks (bounded memory for any size)."""
    hasher = blake3.blake3(max_threads=_MAX_THREADS)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            hasher.update(chunk)
    return PREFIX + hasher.hexdigest()


def is_digest(text: str) -> bool:
    """Whether ``text`` is a full digest, ``blake3:`` + 64 lowercase hex."""
    # fullmatch, not match: "$" also matches before a trailing newline.
    return bool(_FULL.fullmatch(text))


def format_digest(text: str) -> str:
    """Check a full digest and return it; raise ``InvalidSpecError`` naming it otherwise."""
    if not is_digest(text):
        raise InvalidSpecError(
            f"{text!r} is not a digest: expected 'blake3:' followed by 64 lowercase hex characters"
        )
    return text


def hex_of(digest: str) -> str:
    """The 64 hex characters of a full digest."""
    return format_digest(digest)[len(PREFIX) :]


def short(digest: str) -> str:
    """The 12-character form shown to people."""
    return hex_of(digest)[:SHORT]


def object_relpath(digest: str) -> Path:
    """``blake3/ab/cdef…``: the object's place under ``files/`` (dvc-data's layout)."""
    h = hex_of(digest)
    return Path(ALGORITHM, h[:2], h[2:])
