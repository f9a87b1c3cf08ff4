"""Whole-file writes that a reader never sees half done."""

from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` at ``path``: a temporary file in the same folder, fsynced, then renamed
    over ``path``, so readers see the old bytes or the new ones, never a partial file.

    The folder is created if missing. ``OSError`` propagates: each caller names its own failure.
    """
    folder = os.path.dirname(os.fspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
