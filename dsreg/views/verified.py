"""Stored objects hashed once per process before a view reads them: a corrupt object raises
``CorruptObjectError`` and is never served, and an unchanged one is not hashed twice."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

from dsreg.errors import StorageError
from dsreg.registry.folder import Registry

__all__ = ["forget_verified", "verified_object"]


class _StatKey(NamedTuple):
    """What identifies a file's bytes without reading them: any write moves its mtime, and
    setting the mtime back moves its ctime."""

    path: str
    inode: int
    mtime_ns: int
    ctime_ns: int
    size: int


_VERIFIED: dict[_StatKey, str] = {}
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
    reg.store.verified_path(digest)
    # Cache only if the file did not change while it was hashed.
    if _stat_key(path) == key:
        with _LOCK:
            _VERIFIED[key] = digest
    return path


def forget_verified() -> None:
    """Drop the process's cache of hashed objects (tests; after repairing a store)."""
    with _LOCK:
        _VERIFIED.clear()
