"""``dsreg checkout``: a revision's view as files, plus a pin file ``.dsreg.json``.

ImageFolder sets come back in their layout, each file under its (possibly corrected) class's
folder, so an unchanged ImageFolder loader reads the view's labels. Table sets with payloads
come back at their example ids; label-only sets as ``labels.csv``. Switching a folder from one
revision to another touches only the files that differ. Every object is re-hashed before it is
linked or copied: corrupt bytes are never served.

A checkout is two steps: ``dsreg.ops.checkout_plan.plan`` compares the folder with the target
and refuses before anything in it is touched; ``apply`` (here) executes the plan: verify the
objects, remove stale files, link or copy, write the pin last. ``checkout`` runs both under the
folder's lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from dsreg._util.fs import write_atomic
from dsreg._util.parallel import map_chunks
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, DsregError, StorageError
from dsreg.objects.digest import object_relpath, short
from dsreg.objects.hashing import hash_file, hash_path
from dsreg.ops.checkout_plan import (
    LABELS_CSV,
    PIN,
    CheckoutPlan,
    LinkType,
    check_folder,
    plan,
    read_pin,
)
from dsreg.repo.registry import Registry, Resolved
from dsreg.views.dataset import Dataset

__all__ = [
    "LABELS_CSV",
    "PIN",
    "CheckoutPlan",
    "CheckoutResult",
    "LinkType",
    "apply",
    "checkout",
    "plan",
    "read_pin",
]

_FICLONE = 0x40049409
_JOBS = max(4, min(32, (os.cpu_count() or 1) * 4))
# Files per task handed to a worker thread (one future per small file costs more than it does).
_CHUNK = 256
T = TypeVar("T")
_Todo: TypeAlias = Sequence[tuple[str, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckoutResult:
    revision: str
    path: str
    files: int
    added: int
    removed: int
    unchanged: int
    link: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "path": self.path,
            "files": self.files,
            "added": self.added,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "link": self.link,
        }


def checkout(
    reg: Registry,
    resolved: Resolved,
    target: Path,
    *,
    link: LinkType = "hardlink",
    progress: ProgressHook = no_progress,
) -> CheckoutResult:
    """Materialise ``resolved`` at ``target``; switch an existing checkout incrementally."""
    ds = Dataset(reg, resolved)
    target = target.absolute()
    check_folder(target)
    # The one thing done before the plan: the lock is taken on the folder itself, so a new one
    # is created (empty) first.
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot create {target}: {e.strerror}") from e
    with _locked(target):
        # Planned under the lock: another checkout of this folder cannot change it in between.
        return apply(reg, plan(ds, target, link=link), progress=progress)


def apply(
    reg: Registry, planned: CheckoutPlan, *, progress: ProgressHook = no_progress
) -> CheckoutResult:
    """Carry out a plan (made by ``plan`` under the folder's lock, which ``checkout`` holds).

    Objects are re-hashed before they are placed; a lazily cloned registry fetches (verified)
    what it lacks from the default remote. A refusal here (a corrupt or missing object) leaves
    the folder as it was, or, if it was empty, empty again. The pin is written last.
    """
    target, link, todo = planned.target, planned.link, planned.place
    files = os.fspath(reg.store.files)
    root = os.fspath(target)
    if planned.fresh and link in ("hardlink", "symlink"):
        # An empty folder: each object is re-hashed and linked straight to its name (a link
        # appears whole) in one pass per file; a refusal empties the folder again.
        _make_dirs(target, planned.dirs)
        try:
            _verify_and_link(reg, files, root, todo, link, progress)
        except BaseException:
            _empty(target)
            raise
    else:
        # Every object to be placed is re-hashed before the folder is touched: corrupt bytes
        # are never served, and a refused checkout leaves the folder as it was.
        _verify_objects(reg, todo, progress)
        for rel in planned.remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target / rel)
        _make_dirs(target, planned.dirs)
        put = _linker(link)

        def work(lo: int, hi: int) -> tuple[int, list[tuple[str, str]]]:
            for rel, blob in todo[lo:hi]:
                src = _object_path(files, blob)
                dst = f"{root}/{rel}"
                if not (os.path.lexists(dst) and _same(Path(dst), Path(src), link, blob)):
                    _place(put, Path(src), Path(dst))
            return hi - lo, []

        try:
            _in_pool(work, len(todo), progress, "checking out")
        except DsregError:
            raise  # an OSError too (errors.py), and already said
        except OSError as e:
            raise StorageError(f"checkout into {target} failed: {e}") from e
    if not planned.fresh:
        _prune_empty_dirs(target)
    if planned.labels_csv is not None:
        _write_atomic(target / LABELS_CSV, planned.labels_csv)
    _write_atomic(target / PIN, planned.pin)
    return CheckoutResult(
        revision=planned.revision,
        path=str(target),
        files=planned.files,
        added=len(todo),
        removed=planned.removed,
        unchanged=planned.files - len(todo),
        link=link,
    )


@contextlib.contextmanager
def _locked(target: Path) -> Any:
    fd = os.open(target, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _make_dirs(target: Path, dirs: Sequence[str]) -> None:
    for d in dirs:
        try:
            os.makedirs(target / d, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create {target / d}: {e.strerror}") from e


def _empty(target: Path) -> None:
    """Remove everything a refused checkout put into a folder that was empty before it."""
    for e in os.scandir(target):
        if e.is_dir(follow_symlinks=False):
            shutil.rmtree(e.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(e.path)


def _verify_and_link(
    reg: Registry,
    files: str,
    root: str,
    todo: _Todo,
    link: LinkType,
    progress: ProgressHook,
) -> None:
    """Re-hash each object and link it to its name, in workers; objects the store lacks are
    fetched (verified) from the default remote afterwards, re-hashed, and linked."""
    make = os.link if link == "hardlink" else os.symlink

    def work(lo: int, hi: int) -> tuple[int, list[tuple[str, str]]]:
        absent = []
        for rel, blob in todo[lo:hi]:
            src = _object_path(files, blob)
            try:
                got = hash_path(src)
            except FileNotFoundError:
                absent.append((rel, blob))
                continue
            if got != blob:
                raise _corrupt(blob, rel)
            dst = f"{root}/{rel}"
            try:
                make(src, dst)
            except FileExistsError:  # appeared meanwhile: replaced, as in a switch
                _place(_linker(link), Path(src), Path(dst))
        return hi - lo, absent

    try:
        deferred = _in_pool(work, len(todo), progress, "checking out")
    except DsregError:
        raise  # an OSError too (errors.py), and already said
    except OSError as e:
        raise StorageError(f"checkout into {root} failed: {e}") from e
    if deferred:
        _verify_objects(reg, deferred, progress)
        for rel, blob in deferred:
            src = _object_path(files, blob)
            _place(_linker(link), Path(src), Path(f"{root}/{rel}"))


def _in_pool(
    work: Callable[[int, int], tuple[int, list[T]]], n: int, progress: ProgressHook, task: str
) -> list[T]:
    """``work(lo, hi)`` for each chunk of ``n`` items: in worker processes when there are many
    (reading and linking small files is kernel work that threads barely overlap), else in
    threads; queued chunks are dropped on the first failure. Each chunk answers how many items
    it did and a list of leftovers (objects absent from the store); returns them all."""
    leftovers: list[T] = []
    done = 0
    with contextlib.closing(map_chunks(work, n, chunk=_CHUNK, threads=_JOBS)) as results:
        for _lo, (k, rest) in results:
            leftovers.extend(rest)
            done += k
            progress(task, done, n)
    return leftovers


def _object_path(files: str, blob: str) -> str:
    """Where object ``blob`` lives under the store's ``files/`` (a string: cheaper per file)."""
    return f"{files}/{object_relpath(blob)}"


def _corrupt(blob: str, rel: str) -> CorruptObjectError:
    return CorruptObjectError(
        f"object {short(blob)} for {rel} is corrupt; it was not checked out: run "
        "'dsreg verify', then 'dsreg pull' or re-add"
    )


def _verify_objects(reg: Registry, todo: _Todo, progress: ProgressHook) -> None:
    """Re-hash each distinct object ``todo`` needs; fetch absent ones from the default remote
    (verified) or fail clearly; refuse a corrupt one, naming a file that would have held it."""
    first: dict[str, str] = {}
    for rel, blob in todo:
        if blob not in first:
            first[blob] = rel
    files = os.fspath(reg.store.files)
    absent = _hash_objects(files, list(first), first, progress)
    if absent:
        from dsreg.remote.transfer import fetch_missing

        fetch_missing(reg, absent, progress=progress)
        # Fetched objects were verified on arrival; a second look costs little and keeps the
        # rule simple: nothing is linked that was not hashed here.
        still = _hash_objects(files, absent, first, no_progress)
        if still:
            raise CorruptObjectError(
                f"object {short(still[0])} for {first[still[0]]} is missing; it was not "
                "checked out: run 'dsreg verify', then 'dsreg pull' or re-add"
            )


def _hash_objects(
    files: str, blobs: list[str], first: dict[str, str], progress: ProgressHook
) -> list[str]:
    """Re-hash objects (in workers); return the absent ones, raise on a corrupt one."""

    def work(lo: int, hi: int) -> tuple[int, list[str]]:
        absent = []
        for blob in blobs[lo:hi]:
            try:
                got = hash_path(_object_path(files, blob))
            except FileNotFoundError:
                absent.append(blob)
                continue
            if got != blob:
                raise _corrupt(blob, first[blob])
        return hi - lo, absent

    try:
        return _in_pool(work, len(blobs), progress, "verifying")
    except DsregError:
        raise  # an OSError too (errors.py), and already said
    except OSError as e:
        raise StorageError(f"cannot read objects in {files}: {e}") from e


def _same(dst: Path, src: Path, link: LinkType, blob: str) -> bool:
    a, b = dst.lstat(), src.stat()
    same_inode = (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)
    if link == "hardlink":
        return same_inode
    if link == "symlink":
        return stat.S_ISLNK(a.st_mode) and os.readlink(dst) == str(src)
    # A copy must be the user's own file: a hard link left from an earlier checkout would let
    # an edit of the "copy" corrupt the store.
    return not same_inode and stat.S_ISREG(a.st_mode) and hash_file(dst) == blob


def _linker(link: LinkType) -> Callable[[Path, Path], None]:
    if link == "hardlink":
        return lambda src, dst: os.link(src, dst)
    if link == "symlink":
        return lambda src, dst: os.symlink(src, dst)
    if link == "copy":
        return lambda src, dst: _copy(src, dst)
    return _reflink


def _copy(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)


def _reflink(src: Path, dst: Path) -> None:
    with open(src, "rb") as s, open(dst, "wb") as d:
        try:
            fcntl.ioctl(d.fileno(), _FICLONE, s.fileno())
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY):
                # No copy-on-write here: a plain copy, as DVC's "reflink,copy" does.
                shutil.copyfileobj(s, d, 1 << 20)
            else:
                raise
    os.chmod(dst, 0o644)


def _place(put: Callable[[Path, Path], None], src: Path, dst: Path) -> None:
    """Put ``src`` at ``dst`` via a temporary name in the same folder: never a partial file."""
    tmp = dst.with_name(f".{dst.name}.dsreg-tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        put(src, tmp)
        os.replace(tmp, dst)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if e.errno == errno.EXDEV:
            raise StorageError(
                f"cannot hard-link across file systems ({src} -> {dst}); "
                "use --link copy, symlink or reflink"
            ) from e
        raise


def _prune_empty_dirs(root: Path) -> None:
    for dirpath, _dirs, _files in os.walk(root, topdown=False):
        p = Path(dirpath)
        if p != root:
            with contextlib.suppress(OSError):
                p.rmdir()


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        write_atomic(path, data)
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e.strerror}") from e
