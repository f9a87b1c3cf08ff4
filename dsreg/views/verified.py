"""Stored objects hashed once per process before a view reads them: a corrupt object raises
``CorruptObjectError`` and is never served, and an unchanged one is not hashed twice."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

from dsreg.errors import DsregError, StorageError
from dsreg.formats.manifests import Revision
from dsreg.registry.folder import Registry

__all__ = ["forget_verified", "prehash_revision", "verified_object"]


class _StatKey(NamedTuple):
    """What identifies a file's bytes without reading them: any write moves its mtime, and
    setting the mtime back moves its ctime."""

    path: str
    inode: int
    mtime_ns: int
    ctime_ns: int
    size: int


_VERIFIED: dict[_StatKey, str] = {}
# One lock per file being hashed: a second reader of the same file (a read while
# ``prehash_revision`` hashes it) waits for the first hash instead of hashing it again.
_HASHING: dict[_StatKey, threading.Lock] = {}
_LOCK = threading.Lock()


def _stat_key(path: Path) -> _StatKey:
    st = os.stat(path)
    return _StatKey(str(path), st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def verified_object(reg: Registry, digest: str) -> Path:
    """The path of a stored object whose bytes hash to ``digest``; hashed once per process.

    The cache key is ``(path, inode, mtime, ctime, size)``: an object replaced or rewritten in
    place is hashed again. Raises ``CorruptObjectError`` for wrong bytes,
    ``ObjectNotFoundError`` for a missing object.
    """
    path = reg.store.path(digest)
    try:
        key = _stat_key(path)
    except FileNotFoundError:
        return reg.store.verified_path(digest)  # raises ObjectNotFoundError with the advice
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e.strerror}") from e
    with _LOCK:
        if _VERIFIED.get(key) == digest:
            return path
        hashing = _HASHING.setdefault(key, threading.Lock())
    with hashing:
        with _LOCK:
            if _VERIFIED.get(key) == digest:
                return path
        try:
            reg.store.verified_path(digest)
            # Cache only if the file did not change while it was hashed.
            if _stat_key(path) == key:
                with _LOCK:
                    _VERIFIED[key] = digest
        finally:
            with _LOCK:  # a reader still waiting holds the lock it found
                _HASHING.pop(key, None)
    return path


def prehash_revision(reg: Registry, revision: Revision) -> None:
    """Hash the tables a view of ``revision`` reads (its examples table, its overlays'
    corrections) on a thread now, into the cache ``verified_object`` answers from: a command
    that reads the labels of a large set starts this before it loads its numerical libraries,
    which hold one core for a few tenths of a second while the other is free. Anything wrong
    is left for ``verified_object`` to find again where it is read and reported (a corrupt
    object is never cached)."""

    def run() -> None:
        try:
            digests = [reg.snapshot(revision.snapshot).examples]
            digests += [reg.overlay(d).corrections for d in revision.overlays]
            for digest in digests:
                if reg.store.path(digest).is_file():
                    verified_object(reg, digest)
        except (DsregError, OSError):
            return

    threading.Thread(target=run, name="dsreg-prehash").start()


def forget_verified() -> None:
    """Drop the process's cache of hashed objects (tests; after repairing a store)."""
    with _LOCK:
        _VERIFIED.clear()
        _HASHING.clear()
