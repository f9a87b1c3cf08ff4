"""Scan an ImageFolder tree: one ``lstat`` per file, plain lists, nothing imported but ``os``.

The scan is all a re-add of an unchanged tree needs (see ``TreeScan.fingerprint``), so it stays
lean: no ``Path`` or record object per file, and the id checks that ``check_example_id`` does
for arbitrary ids reduce here to one test per file name (a name from a directory listing has no
``/`` and is never ``.``, ``..`` or empty) plus one per folder.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from dsreg._util.parallel import forking, map_chunks
from dsreg.errors import DatasetFormatError, InputPathError
from dsreg.objects.hashing import Hasher

__all__ = ["RACY_NS", "TreeScan", "encodes_utf8", "scan_tree"]

# A file whose mtime or ctime is this close to the scan (or later) may still change within the
# same timestamp tick without its stat changing (git's "racy clean" problem): its digest is not
# cached, and a scan holding one is not remembered. Two seconds covers the coarsest common
# timestamps (FAT's); ext4 and XFS tick in nanoseconds to milliseconds.
RACY_NS = 2_000_000_000
# Trees with at least this many class folders are scanned by worker processes, this many
# folders to a task.
_FORK_MIN_CLASSES = 64
_CLASSES_PER_TASK = 16
# Bump when what the fingerprint covers changes: old fingerprints then simply miss.
_FINGERPRINT_FORMAT = b"dsreg/treescan/1\n"


@dataclass(slots=True, kw_only=True)
class TreeScan:
    """Every file of an ImageFolder tree, in order: ``ids[i]`` (relative path), ``labels[i]``
    (class index), and what ``stat`` said of it; ``paths()`` gives absolute paths."""

    root: str
    classes: tuple[str, ...]
    ids: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    inodes: list[int] = field(default_factory=list)
    mtimes: list[int] = field(default_factory=list)
    ctimes: list[int] = field(default_factory=list)
    # time.time_ns() when the scan began.
    started: int = 0
    # The worker processes' answers, in file order, as they sent them: (ids joined by NUL,
    # then the columns labels, sizes, inodes, mtimes, ctimes as 64-bit arrays; file count).
    # The fingerprint hashes these bytes instead of packing the lists again.
    parts: list[tuple[bytes, bytes, int]] = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def paths(self) -> list[str]:
        """Each file's absolute path (the link's own path, for a followed symbolic link)."""
        base = self.root.rstrip("/") + "/"
        return [base + i for i in self.ids]

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    def racy(self) -> bool:
        """Whether some file changed too recently for its stat to vouch for its content."""
        limit = self.started - RACY_NS
        return bool(self.ids) and (max(self.mtimes) >= limit or max(self.ctimes) >= limit)

    def fingerprint(self, dataset: str, version: str) -> str:
        """A digest of everything a snapshot of this tree depends on, as far as ``stat`` can
        tell: the dataset name, the tree's location, the classes, and each file's id, class,
        inode, size, mtime and ctime (ctime cannot be set back by ``touch`` or ``rsync``).

        Equal fingerprints mean an unchanged tree, unless a file changed without any of these
        changing, which ``racy`` rules out for files not changed within the last two seconds.
        ``version`` (dsreg's) is included so that a new release never trusts an old answer.
        """
        h = Hasher()
        h.update(_FINGERPRINT_FORMAT)
        for part in (version, dataset, self.root, *self.classes):
            h.update(part.encode("utf-8", "surrogateescape") + b"\0")
        if self.parts and sum(k for _i, _p, k in self.parts) == len(self.ids):
            # The same bytes as below, from the workers' packed answers.
            for n, (ids, _packed, _k) in enumerate(self.parts):
                h.update(b"\0" + ids if n else ids)
            h.update(b"\n")
            for j in (0, 2, 1, 3, 4):  # labels, inodes, sizes, mtimes, ctimes
                for _ids, packed, k in self.parts:
                    h.update(memoryview(packed)[j * k * 8 : (j + 1) * k * 8])
            return h.hexdigest()
        # The same bytes as joining each id's encoding with NUL, in one call.
        h.update("\0".join(self.ids).encode("utf-8", "surrogateescape") + b"\n")
        for col in (self.labels, self.inodes, self.sizes, self.mtimes, self.ctimes):
            h.update(array("q", col).tobytes())
        return h.hexdigest()


def scan_tree(root: Path) -> TreeScan:
    """One folder per class (sorted by name, as torchvision's ImageFolder), files below it.

    Example ids are paths relative to ``root``. Hidden entries (``.name``) are skipped;
    symbolic links are followed when they stay inside the tree and refused when they leave it.
    """
    started = time.time_ns()
    if not os.path.exists(root):
        raise InputPathError(f"folder {str(root)!r} does not exist; check the path")
    if not os.path.isdir(root):
        raise InputPathError(
            f"{str(root)!r} is not a folder; give an ImageFolder tree, or --labels / --table"
        )
    top = os.path.abspath(root)
    real_root = os.path.realpath(top)
    try:
        with os.scandir(top) as it:
            entries = {e.name: e for e in it if not e.name.startswith(".") and e.is_dir()}
    except OSError as err:
        raise InputPathError(f"cannot read folder {top!r}: {err.strerror}") from err
    classes = tuple(sorted(entries))
    if not classes:
        raise DatasetFormatError(
            f"{str(root)!r} has no class folders; an ImageFolder tree has one folder per class"
        )
    scan = TreeScan(root=top, classes=classes, started=started)
    if forking(len(classes), threshold=_FORK_MIN_CLASSES):
        _scan_in_workers(scan, top, real_root, entries)
    else:
        for ci, cls in enumerate(classes):
            _scan_class(scan, top, real_root, ci, entries[cls].is_symlink())
        _utf8_ids(scan.ids, top)
    return scan


def _utf8_ids(ids: list[str], top: str) -> bytes:
    """The ids joined by NUL as UTF-8; a file or folder name that is not valid UTF-8 (which
    ``os`` hands over as surrogate escapes) is refused: ids are stored as UTF-8 strings, in
    Parquet and JSON alike, and a name that cannot be written back the same is no id."""
    try:
        return "\0".join(ids).encode("utf-8")
    except UnicodeEncodeError:
        bad = next(i for i in ids if not i.isascii() and not encodes_utf8(i))
        raw = os.fsencode(f"{top}/{bad}")
        raise DatasetFormatError(
            f"the name {raw!r} is not valid UTF-8; rename it (for example with "
            "'convmv -f latin1 -t utf8') and add the tree again"
        ) from None


def encodes_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8: False when it holds a lone surrogate (a name
    ``os`` decoded with surrogate escapes, a JSON ``"\\ud800"`` escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scan_class(scan: TreeScan, top: str, real_root: str, ci: int, is_link: bool) -> None:
    cls = scan.classes[ci]
    if is_link:
        _check_inside(f"{top}/{cls}", real_root, cls, what="folder")
    if _walk_class(scan, top, real_root, cls, ci) == 0:
        raise DatasetFormatError(
            f"class folder {f'{top}/{cls}'!r} has no files; remove it or add its examples"
        )


def _scan_in_workers(
    scan: TreeScan, top: str, real_root: str, entries: dict[str, os.DirEntry[str]]
) -> None:
    """Scan runs of class folders in worker processes (listing and ``lstat`` are system calls
    that one process cannot overlap) and join their answers in class order. A worker sends its
    columns packed (ids joined by NUL, integers as 64-bit arrays): pickling 50,000 small
    Python objects would cost more than the scan saves."""
    n = len(scan.classes)
    links = [entries[c].is_symlink() for c in scan.classes]

    def work(lo: int, hi: int) -> tuple[bytes, bytes]:
        part = TreeScan(root=top, classes=scan.classes)
        for ci in range(lo, hi):
            _scan_class(part, top, real_root, ci, links[ci])
        ids = _utf8_ids(part.ids, top)
        cols = [part.labels, part.sizes, part.inodes, part.mtimes, part.ctimes]
        return ids, b"".join(array("q", c).tobytes() for c in cols)

    parts: dict[int, tuple[bytes, bytes]] = {}
    with contextlib.closing(
        map_chunks(work, n, chunk=_CLASSES_PER_TASK, threshold=_FORK_MIN_CLASSES)
    ) as results:
        for lo, part in results:
            parts[lo] = part
    columns = (scan.labels, scan.sizes, scan.inodes, scan.mtimes, scan.ctimes)
    for lo in sorted(parts):
        ids, packed = parts[lo]
        if not ids:
            continue  # cannot happen (every class has a file), but an empty join is not [""]
        names = ids.decode("utf-8", "surrogateescape").split("\0")
        scan.ids.extend(names)
        values = array("q")
        values.frombytes(packed)
        k = len(names)
        scan.parts.append((ids, packed, k))
        for j, col in enumerate(columns):
            col.extend(values[j * k : (j + 1) * k])


def _walk_class(scan: TreeScan, top: str, real_root: str, cls: str, ci: int) -> int:
    """Append the files below one class folder, depth first, names sorted; return how many."""
    ids, labels = scan.ids, scan.labels
    sizes, inodes, mtimes, ctimes = scan.sizes, scan.inodes, scan.mtimes, scan.ctimes
    found = 0
    pending = [cls]
    while pending:
        rel_dir = pending.pop()
        _check_id_part(rel_dir)
        base = f"{top}/{rel_dir}"
        try:
            with os.scandir(base) as it:
                listing = {e.name: e for e in it if not e.name.startswith(".")}
        except OSError as err:
            raise InputPathError(f"cannot read folder {base!r}: {err.strerror}") from err
        subdirs = []
        for name in sorted(listing):
            e = listing[name]
            if e.is_dir(follow_symlinks=False):
                subdirs.append(name)
                continue
            if "\\" in name:
                _unsafe(f"{rel_dir}/{name}")
            rel = f"{rel_dir}/{name}"
            full = f"{base}/{name}"
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as err:
                raise InputPathError(f"cannot read {full!r}: {err.strerror}") from err
            if not stat.S_ISREG(st.st_mode):
                if not stat.S_ISLNK(st.st_mode):
                    continue  # fifos, sockets, devices: not examples
                followed = _follow_inside(full, real_root, rel)
                if followed is None or not stat.S_ISREG(followed.st_mode):
                    continue
                st = followed
            ids.append(rel)
            labels.append(ci)
            sizes.append(st.st_size)
            inodes.append(st.st_ino)
            mtimes.append(st.st_mtime_ns)
            ctimes.append(st.st_ctime_ns)
            found += 1
        # Depth first, in name order: push in reverse so the smallest name is walked next.
        pending.extend(f"{rel_dir}/{d}" for d in reversed(subdirs))
    return found


def _check_id_part(rel_dir: str) -> None:
    if "\\" in rel_dir or "\0" in rel_dir:
        _unsafe(rel_dir)


def _unsafe(rel: str) -> None:
    raise InputPathError(
        f"file name {rel!r} is unsafe: ids are relative POSIX paths without '..', '.', "
        "a leading '/' or backslashes; rename it in the source"
    )


def _check_inside(full: str, real_root: str, rel: str, *, what: str) -> str:
    target = os.path.realpath(full)
    if target != real_root and not target.startswith(real_root.rstrip("/") + "/"):
        raise InputPathError(
            f"{what} {rel!r} is a symbolic link to {target!r}, outside the tree; "
            f"copy its files into the tree or remove the link"
        )
    return target


def _follow_inside(full: str, real_root: str, rel: str) -> os.stat_result | None:
    """What a symbolic link leads to: None for a folder (links to folders are not walked, as
    ``os.walk`` does not), an error for a link out of the tree or a broken one."""
    try:
        st: os.stat_result | None = os.stat(full)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        return None
    _check_inside(full, real_root, rel, what="file")
    if st is None:
        raise InputPathError(f"{rel!r} is a broken symbolic link; fix or remove it")
    return st
