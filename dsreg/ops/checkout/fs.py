"""Files inside a checkout folder, reached without following a link.

A checkout writes and removes only below its folder. Its paths are checked twice before this
module sees them (example ids and class names when a table is read, every destination in
``plan``), but a folder inside the checkout can still be replaced by a symbolic link
to somewhere else, by its user or by another program, between the plan and the work. So every
operation here goes through folder descriptors: each part of a path is opened relative to its
parent with ``O_NOFOLLOW`` (``openat``), and the file itself is linked, created, renamed,
removed or read relative to that descriptor (``linkat``, ``renameat``, ``unlinkat``). A link or
a file where a folder is needed is refused with ``InputPathError``; nothing is followed.

Temporary names (a file is written under one, then renamed over its name, so no reader sees a
partial file) are short and random (``.dsreg-`` and 10 hex characters), never the file's own
name plus a suffix: a name of 250 bytes stays within NAME_MAX (255) however it is placed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from dsreg._util.fs import CHUNK, RD, SMALL, read_small, write_all
from dsreg.errors import DsregError, InputPathError, StorageError
from dsreg.objects.hashing import hash_bytes, hash_fd

__all__ = [
    "TMP_PREFIX",
    "Cloner",
    "Copied",
    "Dirs",
    "Putter",
    "ancestors",
    "clean_leftovers",
    "copy_checked",
    "empty_folder",
    "explain_cross_device",
    "is_tmp_name",
    "locked",
    "not_a_folder",
    "open_folder",
    "place",
    "prune",
    "putter",
    "same",
    "unlink",
]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FICLONE = 0x40049409
# Errors of FICLONE that mean "no copy-on-write here": copy instead (DVC's "reflink,copy").
_NO_CLONE = (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EPERM)
TMP_PREFIX = ".dsreg-"
_TMP = re.compile(r"\.dsreg-[0-9a-f]{10}")
# Folder descriptors one ``Dirs`` keeps open at a time: a checkout runs up to 32 threads, each
# with its own, well below the usual limit of 1024 open files.
_KEEP = 16

Putter = Callable[[str, int, str], None]


def tmp_name() -> str:
    """A fresh temporary name: 17 bytes, whatever the name it stands in for."""
    return TMP_PREFIX + secrets.token_hex(5)


def is_tmp_name(name: str) -> bool:
    return _TMP.fullmatch(name) is not None


@contextlib.contextmanager
def locked(target: Path) -> Iterator[bool]:
    """Create ``target`` if missing and hold its lock; yields whether this call created it.
    The lock is on the folder's inode: if the folder was removed or replaced while this one
    waited (another checkout made it, was refused and removed it), it starts again."""
    for _ in range(100):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(target)
                created = True
            except FileExistsError:
                created = False
            fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise StorageError(f"cannot create {target}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(target)
            except FileNotFoundError:
                continue
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                yield created
                return
        finally:
            os.close(fd)
    raise StorageError(f"{target} keeps being removed or replaced; check out again")


@contextlib.contextmanager
def open_folder(path: str | Path) -> Iterator[int]:
    """A descriptor of folder ``path``, closed after the block: the checkout folder itself (a
    link naming it is the user's choice and is followed; links inside it never are), or the
    store's ``files/``, which objects are linked from by relative paths."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise StorageError(f"cannot open {path}: {e.strerror}") from e
    try:
        yield fd
    finally:
        os.close(fd)


def not_a_folder(root: str, rel: str) -> InputPathError:
    return InputPathError(
        f"{root}/{rel} is a symbolic link or a file where the checkout has a folder; a "
        "checkout never follows a link inside its folder: replace it with a folder (or "
        "remove it) and check out again",
        path=f"{root}/{rel}",
    )


class Dirs:
    """Descriptors of folders below a checkout's root, each opened relative to its parent with
    ``O_NOFOLLOW``. Use one per thread or chunk of work: it closes what it opened (at most
    ``_KEEP`` at a time), never the root's descriptor, which the caller owns."""

    __slots__ = ("_fds", "root", "root_fd")

    def __init__(self, root: str, root_fd: int) -> None:
        self.root = root
        self.root_fd = root_fd
        self._fds: dict[str, int] = {}

    def __enter__(self) -> Dirs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def fd(self, rel_dir: str, *, create: bool = False) -> int | None:
        """The descriptor of folder ``rel_dir`` ("" is the root); ``None`` if it does not exist
        (with ``create``, it is made). Valid until the next call."""
        if not rel_dir:
            return self.root_fd
        fd = self._fds.get(rel_dir)
        if fd is not None:
            return fd
        parent, _, name = rel_dir.rpartition("/")
        pfd = self.fd(parent, create=create)
        if pfd is None:
            return None
        fd = self._open(pfd, name, rel_dir, create)
        if fd is not None:
            # The parent was used already: closing it (with the others) here is safe.
            if len(self._fds) >= _KEEP:
                self.close()
            self._fds[rel_dir] = fd
        return fd

    def at(self, rel: str) -> tuple[int, str] | None:
        """``(folder descriptor, name)`` of path ``rel``; ``None`` if its folder is absent."""
        folder, _, name = rel.rpartition("/")
        fd = self.fd(folder)
        return None if fd is None else (fd, name)

    def entry(self, rel: str) -> tuple[int, str]:
        """``(folder descriptor, name)`` of path ``rel``, its folders made where missing."""
        folder, _, name = rel.rpartition("/")
        fd = self.fd(folder, create=True)
        assert fd is not None  # made where missing
        return fd, name

    def _open(self, pfd: int, name: str, rel: str, create: bool) -> int | None:
        try:
            return os.open(name, _DIR, dir_fd=pfd)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise not_a_folder(self.root, rel) from None
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=pfd)
        try:
            return os.open(name, _DIR, dir_fd=pfd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise not_a_folder(self.root, rel) from None
            raise


def ancestors(paths: Iterable[str]) -> list[str]:
    """Every folder above ``paths`` (not the root), parents before children."""
    out: set[str] = set()
    for p in paths:
        d = p.rpartition("/")[0]
        while d and d not in out:
            out.add(d)
            d = d.rpartition("/")[0]
    return sorted(out)


# -- putting an object at a name ----------------------------------------------------------------
def putter(link: str) -> Putter:
    """``put(src, dir_fd, name)``: create ``name`` (which must not exist) from object ``src``."""
    if link == "hardlink":
        return lambda src, fd, name: os.link(src, name, dst_dir_fd=fd)
    if link == "symlink":
        return lambda src, fd, name: os.symlink(src, name, dir_fd=fd)
    clone = Cloner() if link == "reflink" else None

    def put(src: str, fd: int, name: str) -> None:
        sfd = os.open(src, RD)
        try:
            _create(fd, name, lambda dfd: _fill(dfd, sfd, clone))
        finally:
            os.close(sfd)

    return put


class Cloner:
    """FICLONE (copy-on-write) until the file system says it has none; then plain copies. One
    per checkout (or worker): the first refusal saves the call for every other file."""

    __slots__ = ("works",)

    def __init__(self) -> None:
        self.works = True

    def clone(self, dfd: int, sfd: int) -> bool:
        if not self.works:
            return False
        try:
            fcntl.ioctl(dfd, _FICLONE, sfd)
        except OSError as e:
            if e.errno in _NO_CLONE:
                self.works = False
                return False
            raise
        return True


def _create(fd: int, name: str, fill: Callable[[int], None]) -> None:
    """Create ``name`` (``O_EXCL``, never through a link), fill it, mode 0644; on any failure
    the partial file is removed."""
    dfd = os.open(name, _NEW, 0o644, dir_fd=fd)
    try:
        fill(dfd)
        os.fchmod(dfd, 0o644)
    except BaseException:
        os.close(dfd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
        raise
    os.close(dfd)


def _fill(dfd: int, sfd: int, clone: Cloner | None) -> None:
    if clone is not None and clone.clone(dfd, sfd):
        return
    off = 0
    while True:
        try:
            n = os.sendfile(dfd, sfd, off, 1 << 30)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS) or off:
                raise
            break  # no sendfile between these files: read and write
        if n == 0:
            return
        off += n
    os.lseek(sfd, 0, os.SEEK_SET)
    while chunk := os.read(sfd, CHUNK):
        write_all(dfd, chunk)


class Copied(NamedTuple):
    """What ``copy_checked`` found: the digest the object's bytes have (``None``: the object is
    absent), and its stat taken before it was read (``None`` unless the digest is the one
    expected and the copy was made)."""

    digest: str | None
    stat: os.stat_result | None


def copy_checked(src: str, blob: str, fd: int, name: str, clone: Cloner | None) -> Copied:
    """Copy (or, with ``clone``, clone) object ``src`` to a new ``name``, re-hashing it on the
    way: one read of the object for a small file. If its bytes do not hash to ``blob``, nothing
    is created: the caller refuses it. The stat returned is what a trust record of it holds."""
    try:
        sfd = os.open(src, RD)
    except FileNotFoundError:
        return Copied(None, None)
    try:
        st = os.fstat(sfd)
        size = st.st_size
        data = read_small(sfd, size) if size <= SMALL else None
        got = hash_bytes(data) if data is not None else hash_fd(sfd, size_hint=size)
        if got != blob:
            return Copied(got, None)

        def fill(dfd: int) -> None:
            if clone is not None and clone.clone(dfd, sfd):
                return
            if data is not None:
                write_all(dfd, data)
            else:
                _fill(dfd, sfd, None)

        _create(fd, name, fill)
        return Copied(got, st)
    finally:
        os.close(sfd)


def place(put: Putter, src: str, fd: int, name: str) -> None:
    """Put ``src`` at ``name`` under a temporary name first, then rename it over ``name``: a
    reader never sees a partial file, and an interrupted one leaves only a temporary name."""
    for _ in range(16):
        tmp = tmp_name()
        try:
            put(src, fd, tmp)
            break
        except FileExistsError:
            continue  # that random name is taken (a leftover): draw another
    else:
        raise StorageError(f"cannot find a free temporary name beside {name}")
    try:
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


def same(fd: int, name: str, src: str, link: str, blob: str) -> bool:
    """Whether ``name`` already is what ``link`` would make of object ``src``."""
    try:
        a = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    b = os.stat(src)
    same_inode = (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)
    if link == "hardlink":
        return same_inode
    if link == "symlink":
        return stat.S_ISLNK(a.st_mode) and os.readlink(name, dir_fd=fd) == src
    # A copy must be the user's own file: a hard link left from an earlier checkout would let
    # an edit of the "copy" corrupt the store.
    if same_inode or not stat.S_ISREG(a.st_mode):
        return False
    hfd = os.open(name, RD | os.O_NOFOLLOW, dir_fd=fd)
    try:
        return hash_fd(hfd, size_hint=a.st_size) == blob
    finally:
        os.close(hfd)


def unlink(dirs: Dirs, rel: str) -> None:
    """Remove file ``rel`` if it is there (a link is removed, never followed)."""
    found = dirs.at(rel)
    if found is None:
        return
    fd, name = found
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=fd)


def prune(dirs: Dirs, removed: Iterable[str]) -> None:
    """Remove the folders above ``removed`` that are empty now, deepest first (a folder of the
    user's own elsewhere in the checkout is left alone)."""
    for d in sorted(ancestors(removed), key=lambda d: d.count("/"), reverse=True):
        parent, _, name = d.rpartition("/")
        try:
            pfd = dirs.fd(parent)
        except InputPathError:
            continue
        if pfd is not None:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=pfd)


def clean_leftovers(dirs: Dirs, folders: Iterable[str]) -> None:
    """Remove temporary files an interrupted checkout left in ``folders`` ("" is the root)."""
    for d in folders:
        fd = dirs.fd(d)
        if fd is None:
            continue
        for name in os.listdir(fd):
            if is_tmp_name(name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)


@contextlib.contextmanager
def explain_cross_device(link: str) -> Iterator[None]:
    """A hard link across file systems, said with the way out; other errors pass as they are
    (a link inside the folder, a corrupt object and a worker's error are said already)."""
    try:
        yield
    except OSError as e:
        if e.errno == errno.EXDEV and link == "hardlink" and not isinstance(e, DsregError):
            raise StorageError(
                "cannot hard-link across file systems (the registry and the checkout folder are "
                "on different ones); use --link reflink, copy or symlink"
            ) from e
        raise


def empty_folder(root_fd: int, *, last: str) -> None:
    """Remove everything in the root, ``last`` last: what a failed checkout into an empty
    folder put there (``rmtree`` through descriptors: a link is removed, never followed)."""
    for name in os.listdir(root_fd):
        if name == last:
            continue
        try:
            st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=root_fd)
            else:
                os.unlink(name, dir_fd=root_fd)
        except FileNotFoundError:
            continue
    with contextlib.suppress(FileNotFoundError):
        os.unlink(last, dir_fd=root_fd)
