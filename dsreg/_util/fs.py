"""File-system plumbing: whole-file writes a reader never sees half done, reads sized for
hashing, and the Linux calls Python does not wrap (syncfs, renameat2 without replacing)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from dsreg._util.lazy import lazy_imports

# Only syncfs and renameat2 (a batch's barrier and moves) call into libc; only a write makes a
# temporary file (a command that reads, or a tag that names what it named already, makes none).
with lazy_imports():
    import ctypes
    import tempfile

__all__ = [
    "CHUNK",
    "RD",
    "READ_ONLY",
    "SMALL",
    "WR_NEW",
    "link_noreplace",
    "move_noreplace",
    "read_small",
    "rename_dir_if_absent",
    "replacing",
    "sync_filesystem",
    "syncfs",
    "write_all",
    "write_atomic",
]

CHUNK = 1 << 20
# Small files are read whole (one read, hashed, written); larger ones are streamed.
SMALL = 16 << 20
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
# First read of a file whose size is not known (checkout's verification).
_GUESS = 64 << 10
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
RD = os.O_RDONLY | _CLOEXEC
WR_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | Iterable[bytes | memoryview],
    *,
    mode: int = 0o644,
) -> None:
    """Write ``data`` (bytes, or chunks of them written as they come) at ``path``: a temporary
    file in the same folder, fsynced, then renamed over ``path``, so readers see the old bytes
    or the new ones, never a partial file.

    The folder is created if missing. ``OSError`` propagates: each caller names its own failure.
    """
    folder = os.path.dirname(os.fspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes | bytearray | memoryview):
                f.write(data)
            else:
                for chunk in data:
                    f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        # Only a write that did not land leaves a temporary file to remove. After the rename
        # there is none, and a failing unlink must not turn a written file into an error.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """fsync ``folder`` itself, so that what was renamed or created in it survives a crash."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(
    path: str | os.PathLike[str], data: bytes | Iterable[bytes | memoryview], *, mode: int = 0o644
) -> None:
    """:func:`write_atomic`, then its folder fsynced: once this returns, the new bytes are what
    ``path`` holds after a crash too. ``OSError`` propagates, as there."""
    write_atomic(path, data, mode=mode)
    fsync_folder(os.path.dirname(os.fspath(path)) or ".")


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], *, text: bool = False) -> Iterator[IO[Any]]:
    """A file to write a user's output ``path`` through: a temporary file beside it (same
    folder, a name starting ``.<name>.``), fsynced and renamed over ``path`` when the block
    ends normally, removed when it raises. A reader, or an interrupted or failed write,
    never sees a partial ``path``, and an existing one stays whole until the new one is.

    The file gets the mode ``open()`` would give a new file (0666 less the umask). A path that
    is a symbolic link has its target replaced (the link stays); one that is not a regular file
    (``/dev/stdout``, a pipe) is written in place, as there is nothing to replace.
    ``OSError`` propagates: each caller names its own failure."""
    target = os.path.realpath(path)
    try:
        special = not stat.S_ISREG(os.stat(target).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with open(target, "w" if text else "wb", **_text(text)) as f:
            yield f
        return
    folder, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w" if text else "wb", **_text(text)) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _text(text: bool) -> dict[str, Any]:
    return {"encoding": "utf-8"} if text else {}


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_small(fd: int, size_hint: int) -> bytes | None:
    """All of a file's bytes if it holds at most ``SMALL`` (else None). The first read asks for
    one byte more than the size seen when scanning (without one, for 64 KiB: most payloads are
    smaller, and an ``fstat`` costs as much as a read); getting exactly the scanned size is the
    end of the file, so the usual cost is one read."""
    first = min(size_hint, SMALL) + 1 if size_hint > 0 else _GUESS
    data = os.read(fd, first)
    if len(data) == size_hint < first:
        # As many bytes as the scan saw, and no more when more were asked for: the end of the
        # file (a short read means the end, on any local file system; the size agreeing is
        # the check for those where it might not), so no second read is needed.
        return data
    if not data:
        return data
    # A small second read: asking for a large one would allocate that much for nothing.
    more = os.read(fd, 4096)
    if not more:
        return data
    parts = [data, more]
    total = len(data) + len(more)
    while total <= SMALL:
        more = os.read(fd, CHUNK)
        if not more:
            return b"".join(parts)
        parts.append(more)
        total += len(more)
    return None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- Linux system calls Python does not wrap (ctypes; portable fallbacks elsewhere) ----------
_LIBC: Any = None
_LIBC_LOADED = False


def _libc() -> Any:
    global _LIBC, _LIBC_LOADED
    if not _LIBC_LOADED:
        _LIBC_LOADED = True
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError):
                _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def sync_filesystem(path: Path) -> None:
    """Make every completed write on ``path``'s file system durable: ``syncfs(2)`` on Linux (one
    barrier instead of an fsync per file), ``sync(2)`` elsewhere. Reports a write-back error
    that happened while ``path`` was open here (so: open it before writing, as ``ObjectBatch``
    does, to hear of every error)."""
    fd = os.open(path, RD)
    try:
        syncfs(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, os.fspath(path)) from None
    finally:
        os.close(fd)


def syncfs(fd: int) -> None:
    fn = getattr(_libc(), "syncfs", None)
    if fn is None:
        os.sync()
        return
    if fn(ctypes.c_int(fd)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def rename_dir_if_absent(src: str, dst: str) -> bool:
    """Move a whole staged shard into place when ``files/`` has no such shard yet."""
    if os.path.lexists(dst):
        return False
    try:
        os.rename(src, dst)
    except OSError as e:
        # Another writer made the shard meanwhile: fall back to moving objects one by one.
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            return False
        raise
    return True


def move_noreplace(src: str, dst: str) -> int:
    """Move a staged object into place unless the object exists; 1 if it was new."""
    fn = getattr(_libc(), "renameat2", None)
    if fn is not None:
        r = fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        if r == 0:
            return 1
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            os.unlink(src)
            return 0
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), dst)
    return link_noreplace(src, dst)


def link_noreplace(src: str, dst: str) -> int:
    new = 1
    try:
        os.link(src, dst)
    except FileExistsError:
        new = 0
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            raise
        # File systems without hard links: rename can replace, so only do it if still absent.
        if os.path.exists(dst):
            new = 0
        else:
            os.replace(src, dst)
            return new
    with contextlib.suppress(FileNotFoundError):
        os.unlink(src)
    return new
