"""``dsreg checkout``: a revision's view as files, plus a pin file ``.dsreg.json``.

ImageFolder sets come back in their layout, each file under its (possibly corrected) class's
folder, so an unchanged ImageFolder loader reads the view's labels. Table sets with payloads
come back at their example ids; label-only sets as ``labels.csv``. Switching a folder from one
revision to another touches only the files that differ. Every object is re-hashed before it is
linked or copied: corrupt bytes are never served.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import json
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from dsreg._util.fs import write_atomic
from dsreg._util.parallel import map_chunks
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, DsregError, InputPathError, StorageError
from dsreg.model.canonical import parse_json
from dsreg.model.schemas import validate
from dsreg.objects.digest import is_digest, object_relpath, short
from dsreg.objects.hashing import hash_file, hash_path
from dsreg.repo.registry import Registry, Resolved
from dsreg.repo.tables import read_examples
from dsreg.views.dataset import Dataset

__all__ = ["PIN", "CheckoutResult", "LinkType", "checkout", "read_pin"]

PIN = ".dsreg.json"
LABELS_CSV = "labels.csv"
LinkType: TypeAlias = Literal["hardlink", "symlink", "copy", "reflink"]
_FICLONE = 0x40049409
_JOBS = max(4, min(32, (os.cpu_count() or 1) * 4))
# Files per task handed to a worker thread (one future per small file costs more than it does).
_CHUNK = 256
T = TypeVar("T")
_ALL_DIGESTS = re.compile(r"(?:blake3:[0-9a-f]{64}\n)*blake3:[0-9a-f]{64}")


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


def read_pin(target: Path) -> dict[str, Any] | None:
    try:
        data = (target / PIN).read_bytes()
    except FileNotFoundError:
        return None
    pin = parse_json(data, what=str(target / PIN))
    validate(pin, "pin", what=str(target / PIN))
    assert isinstance(pin, dict)
    return pin


def _layout(ds: Dataset) -> str:
    kind = ds.snapshot.source.get("kind")
    # A tree imported from elsewhere (kind "dvc") records the layout it was scanned as.
    if kind == "imagefolder" or ds.snapshot.source.get("layout") == "imagefolder":
        return "imagefolder"
    return "files" if ds.snapshot.source.get("files") else "labels"


def file_map(ds: Dataset) -> dict[str, str]:
    """``{relative path: blob digest}`` of a revision's checkout."""
    layout = _layout(ds)
    if layout == "labels":
        return {}
    # The view's rows and labels, and three columns of the examples table: building the full
    # labels() table costs more than the checkout of a small set.
    ex = read_examples(ds.registry, ds.snapshot, columns=["example_id", "label", "blob"])
    ids = ex.column("example_id").to_pylist()
    blobs = ex.column("blob").to_pylist()
    if ds.view == "original":
        # Every row with its given label, whatever the overlays say (DESIGN.md, "Views"): no
        # need to merge them.
        labels = ex.column("label").to_pylist()
    else:
        v = ds.view_rows()
        rows = v.rows.tolist()
        ids = [ids[r] for r in rows]
        blobs = [blobs[r] for r in rows]
        labels = v.label.tolist()
    if layout == "files":
        return dict(zip(ids, blobs, strict=True))
    classes = ds.classes
    names = [classes[k] for k in labels]
    out: dict[str, str] = {}
    moved: list[tuple[str, str, str, str]] = []
    for eid, blob, name in zip(ids, blobs, names, strict=True):
        first, _, rest = eid.partition("/")
        if first == name:
            out[eid] = blob
        else:
            moved.append((first, rest, name, blob))
    # Relabelled files go last, so a file that keeps its class always keeps its path (and a
    # switch leaves it alone); one whose name its new class already holds is told apart by the
    # class it came from.
    for first, rest, name, blob in moved:
        path = f"{name}/{rest}"
        k = 0
        while path in out:
            k += 1
            path = f"{name}/{first}__{rest.replace('/', '__')}" + (f"~{k}" if k > 1 else "")
        out[path] = blob
    return out


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
    old_pin = None
    if target.exists():
        if not target.is_dir():
            raise InputPathError(f"{target} exists and is not a folder; choose another path")
        old_pin = read_pin(target)
        if old_pin is None and any(target.iterdir()):
            raise InputPathError(
                f"{target} is not empty and holds no {PIN}; check out into an empty or new folder"
            )
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot create {target}: {e.strerror}") from e
    with _locked(target):
        return _switch(reg, ds, target, old_pin, link, progress)


@contextlib.contextmanager
def _locked(target: Path) -> Any:
    fd = os.open(target, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _switch(
    reg: Registry,
    ds: Dataset,
    target: Path,
    old_pin: dict[str, Any] | None,
    link: LinkType,
    progress: ProgressHook,
) -> CheckoutResult:
    new = file_map(ds)
    old: dict[str, str] = {}
    relink = False
    if old_pin is not None:
        try:
            old = file_map(Dataset(reg, reg.resolve(old_pin["revision"])))
        except DsregError as e:
            # Without the old revision dsreg cannot tell its files from the user's own: refuse
            # rather than delete anything it did not put there.
            raise InputPathError(
                f"{target} holds revision {short(old_pin['revision'])}, which this registry "
                f"cannot read ({e}); pull that revision first, or check out into a new folder"
            ) from e
        # Another link type: every file is placed again (a copy must not stay a store link).
        relink = old_pin.get("link") != link
    # An empty folder (no pin) holds nothing to compare or replace: each file is linked
    # straight to its name (a link appears whole), skipping the checks a switch needs.
    fresh = old_pin is None
    todo = (
        list(new.items())
        if fresh
        else [
            (p, b)
            for p, b in new.items()
            if relink or old.get(p) != b or not os.path.lexists(target / p)
        ]
    )
    files = os.fspath(reg.store.files)
    root = os.fspath(target)
    _check_digests(todo)
    if fresh and link in ("hardlink", "symlink"):
        # An empty folder: each object is re-hashed and linked straight to its name (a link
        # appears whole) in one pass per file; a refusal empties the folder again.
        _make_dirs(target, todo)
        try:
            _verify_and_link(reg, files, root, todo, link, progress)
        except BaseException:
            _empty(target)
            raise
        stale: list[str] = []
    else:
        # Every object to be placed is re-hashed before the folder is touched: corrupt bytes
        # are never served, and a refused checkout leaves the folder as it was. A lazily
        # cloned registry fetches (verified) what it lacks from the default remote.
        _verify_objects(reg, todo, progress)
        stale = [p for p, b in old.items() if new.get(p) != b]
        for rel in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target / rel)
        _make_dirs(target, todo)
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
        except OSError as e:
            raise StorageError(f"checkout into {target} failed: {e}") from e
    if not fresh:
        _prune_empty_dirs(target)
    layout = _layout(ds)
    if layout == "labels":
        _write_atomic(target / LABELS_CSV, _labels_csv(ds))
    pin = {
        "schema": "dsreg/pin/1",
        "revision": ds.digest,
        "dataset": ds.name,
        "spec": ds.resolved.spec,
        "snapshot": ds.snapshot_digest,
        "view": ds.view,
        "layout": layout,
        "link": link,
        "files": len(new),
    }
    validate(pin, "pin", what="pin file")
    _write_atomic(target / PIN, (json.dumps(pin, indent=2, sort_keys=True) + "\n").encode())
    return CheckoutResult(
        revision=ds.digest,
        path=str(target),
        files=len(new),
        added=len(todo),
        removed=len([p for p in stale if p not in new]),
        unchanged=len(new) - len(todo),
        link=link,
    )


def _check_digests(todo: list[tuple[str, str]]) -> None:
    """Refuse an examples table naming something other than a digest (one pattern match over
    all of them; the per-entry check only runs to name the culprit)."""
    blobs = {b for _r, b in todo}
    if blobs and _ALL_DIGESTS.fullmatch("\n".join(blobs)):
        return
    for rel, blob in todo:
        if not is_digest(blob):
            raise CorruptObjectError(f"the examples table names {blob!r} for {rel}: not a digest")


def _make_dirs(target: Path, todo: list[tuple[str, str]]) -> None:
    for d in sorted({rel.rpartition("/")[0] for rel, _b in todo} - {""}):
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
    todo: list[tuple[str, str]],
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


def _verify_objects(reg: Registry, todo: list[tuple[str, str]], progress: ProgressHook) -> None:
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


def _labels_csv(ds: Dataset) -> bytes:
    t = ds.labels()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["row", "example_id", "label", "label_name", "given_label", "verdict"])
    cols = [
        t.column(c).to_pylist()
        for c in ("row", "example_id", "label", "label_name", "given_label", "verdict")
    ]
    for r in zip(*cols, strict=True):
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue().encode()


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        write_atomic(path, data)
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e.strerror}") from e
