"""BLAKE3-256 digests as text: written ``blake3:`` + 64 lowercase hex, shown as 12, typed as >= 6,
and the object layout they map to. Hashing itself is in ``hashing.py``."""

from __future__ import annotations

import re

from dsreg.errors import InvalidSpecError

__all__ = [
    "ALGORITHM",
    "MIN_PREFIX",
    "PREFIX",
    "SHORT",
    "digest_at",
    "format_digest",
    "hex_of",
    "is_digest",
    "layout",
    "object_relpath",
    "object_relpaths",
    "short",
]

ALGORITHM = "blake3"
PREFIX = "blake3:"
SHORT = 12
MIN_PREFIX = 6
_FULL = re.compile(r"^blake3:[0-9a-f]{64}$")


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


def layout(hexd: str) -> tuple[str, str]:
    """THE object layout (dvc-data's, ``hash_name="blake3"``): an object's 64 hex characters as
    its shard folder and file name under ``files/blake3/``. Every path to an object, in a
    registry or on a remote, is made from this split; nothing else slices a digest."""
    return hexd[:2], hexd[2:]


def object_relpath(digest: str) -> str:
    """``blake3/ab/cdef…``: a full digest's place under ``files/`` (dvc-data's layout)."""
    shard, name = layout(hex_of(digest))
    return f"{ALGORITHM}/{shard}/{name}"


def object_relpaths(digests: list[str]) -> list[str]:
    """``object_relpath`` of each of ``digests``, which the caller has checked to be full
    digests (a checkout checks a whole table's at once): the same layout, without a pattern
    match per digest."""
    cut = len(PREFIX)
    return [f"{ALGORITHM}/{shard}/{name}" for shard, name in (layout(d[cut:]) for d in digests)]


def digest_at(shard: str, name: str) -> str:
    """The digest of the object stored as ``files/blake3/<shard>/<name>`` (``layout``'s inverse)."""
    return PREFIX + shard + name
