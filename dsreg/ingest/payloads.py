"""Payload files into the store: the stat cache, then reading, hashing and staging in parallel.

Light on purpose (no numpy, no pyarrow): ``dsreg add`` of a tree forks its workers from here
before those are imported, and imports them while the workers run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dsreg._util.parallel import Behind
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, StorageError
from dsreg.ingest import treescan
from dsreg.objects.batch import ObjectBatch, Staged, hash_files
from dsreg.registry.folder import Registry
from dsreg.registry.trust import StagedRecords

__all__ = ["Payload", "StoredPayloads", "store_missing", "store_payloads", "tree_payloads"]


class Payload(NamedTuple):
    """A file to store: where it is now, and what ``os.stat`` said of it.

    ``path`` may be a plain string: a scan makes one per file, and a ``Path`` costs more (so
    does a dataclass: this is a tuple).
    """

    path: Path | str
    size: int
    inode: int
    mtime_ns: int
    ctime_ns: int = 0


def tree_payloads(scan: treescan.TreeScan) -> list[Payload | None]:
    """One payload per file of a tree scan, in its order."""
    return list(map(Payload, scan.paths(), scan.sizes, scan.inodes, scan.mtimes, scan.ctimes))


def _common_prefix(keys: list[str]) -> str:
    # The common prefix of a set of strings is that of its least and greatest members.
    lo, hi = min(keys), max(keys)
    n = 0
    for a, b in zip(lo, hi, strict=False):
        if a != b:
            break
        n += 1
    return lo[:n]


@dataclass(frozen=True, slots=True)
class _Files:
    """The payloads that are files: ``keys[j]`` is the absolute path of ``payloads[rows[j]]``
    as a string (the stat cache's key, and cheaper to open than a ``Path``)."""

    payloads: Sequence[Payload | None]
    rows: list[int]
    keys: list[str]

    @classmethod
    def of(cls, payloads: Sequence[Payload | None]) -> _Files:
        rows = [i for i, p in enumerate(payloads) if p is not None]
        cwd = os.getcwd()
        base = cwd if cwd.endswith("/") else cwd + "/"
        paths = [os.fspath(payloads[i].path) for i in rows]  # type: ignore[union-attr]
        # What os.path.join(cwd, p) gives, without its cost per file.
        return cls(payloads, rows, [p if p.startswith("/") else base + p for p in paths])

    def payload(self, j: int) -> Payload:
        p = self.payloads[self.rows[j]]
        assert p is not None
        return p


class StoredPayloads(NamedTuple):
    """Each payload's digest (``None`` for a row without one), and how many objects were new."""

    digests: list[str | None]
    new: int


def store_payloads(
    reg: Registry,
    payloads: Sequence[Payload | None],
    *,
    write: bool,
    progress: ProgressHook,
    meanwhile: Callable[[], None] | None = None,
) -> StoredPayloads:
    """Hash (and with ``write``, store) every payload; return the digests and how many objects
    were new. Unchanged files (same path, inode, size, mtime as in the stat cache) are not read;
    the rest are read once each, in parallel across files, one thread per file."""
    out: list[str | None] = [None] * len(payloads)
    files = _Files.of(payloads)
    if not files.rows:
        return StoredPayloads(out, 0)
    # Files changed this close to now may change again without their stat changing: their
    # digests are used but not remembered (see treescan.RACY_NS).
    trust_before = time.time_ns() - treescan.RACY_NS
    todo = _from_stat_cache(reg, files, out)
    damaged: dict[str, str] = {}
    if write:
        # A cached digest says what the file holds, not that the store still has it intact
        # (gc, or a damaged registry being repaired by adding again): files whose objects are
        # missing are read and stored; objects stored with another size than the file's, or
        # found corrupt before, are replaced from the file (``_replace_damaged``).
        todo_set = set(todo)
        cached = [(j, i) for j, i in enumerate(files.rows) if j not in todo_set]
        gone, damaged = _damaged(reg, files, out, cached)
        if gone:
            todo = sorted({*todo, *(j for j, i in enumerate(files.rows) if out[i] in gone)})
    new = 0
    with reg.state.writer() as put:
        remember = _StatRows(put, files, todo, trust_before)
        if todo:
            got, new = _read_todo(reg, files, todo, write, progress, meanwhile, remember)
            for j, digest in zip(todo, got, strict=True):
                out[files.rows[j]] = digest
            # Objects that were already stored under a digest just computed: trusted no more
            # than cached ones. When every distinct digest was new (a first add), the batch
            # wrote each object from its file just now: nothing to check, no stat per file.
            if write and new < len(set(got)):
                computed = [(j, files.rows[j]) for j in todo]
                damaged.update(_damaged(reg, files, out, computed)[1])
        remember.flush()
    new += _replace_damaged(reg, damaged)
    return StoredPayloads(out, new)


def _from_stat_cache(reg: Registry, files: _Files, out: list[str | None]) -> list[int]:
    """Fill ``out`` with the digests the stat cache holds for unchanged files; the files
    (indices into ``files.keys``) left to read."""
    cache = reg.state.lookup(_common_prefix(files.keys))
    todo: list[int] = []
    payloads = files.payloads
    for j, (i, key) in enumerate(zip(files.rows, files.keys, strict=True)):
        p = payloads[i]
        assert p is not None
        hit = cache.get(key)
        if hit is not None and hit == (p.inode, p.size, p.mtime_ns, p.ctime_ns, hit.digest):
            out[i] = hit.digest
        else:
            todo.append(j)
    return todo


class _StatRows:
    """The stat-cache rows of the files just read, written while the workers still work (the
    parent waits for them anyway), a few thousand at a time, each batch its own short
    transaction. Files changed at or after ``trust_before`` are left out."""

    def __init__(
        self,
        put: Callable[[list[tuple[str, int, int, int, int, str]]], None],
        files: _Files,
        todo: list[int],
        trust_before: int,
    ) -> None:
        self._put = put
        self._files = files
        self._todo = todo
        self._trust_before = trust_before
        self._fresh: list[tuple[str, int, int, int, int, str]] = []

    def __call__(self, lo: int, digests: list[str]) -> None:
        """Remember the digests of ``todo[lo:lo + len(digests)]``."""
        payloads, rows = self._files.payloads, self._files.rows
        for t, digest in enumerate(digests):
            j = self._todo[lo + t]
            p = payloads[rows[j]]
            assert p is not None
            if p.mtime_ns < self._trust_before and p.ctime_ns < self._trust_before:
                self._fresh.append(
                    (self._files.keys[j], p.inode, p.size, p.mtime_ns, p.ctime_ns, digest)
                )
        if len(self._fresh) >= 4096:
            self.flush()

    def flush(self) -> None:
        self._put(self._fresh)
        self._fresh = []


def _read_todo(
    reg: Registry,
    files: _Files,
    todo: list[int],
    write: bool,
    progress: ProgressHook,
    meanwhile: Callable[[], None] | None,
    remember: _StatRows,
) -> tuple[list[str], int]:
    """Read the files ``todo`` names (and with ``write``, store them): their digests and how
    many objects were new. The state is written on a thread of its own as the chunks arrive:
    this thread goes on reading the workers' answers, so no worker waits on a full pipe while
    a transaction commits."""
    sizes = [files.payload(j).size for j in todo]
    behind = Behind()
    with (
        reg.store.batch() if write else contextlib.nullcontext() as batch,
        StagedRecords(reg) as vouch,
    ):
        try:
            got, new = _read_files(
                [files.keys[j] for j in todo],
                sizes,
                batch,
                progress,
                "adding" if write else "hashing",
                meanwhile=meanwhile,
                on_chunk=lambda lo, digests: behind(remember, lo, digests),
                on_staged=lambda entries: behind(vouch.staged, entries),
            )
        finally:
            behind.close()
        if batch is not None:
            # Trust records (``dsreg.registry.trust``): the batch wrote each object from
            # the bytes it hashed, so the first checkout after an add need not read
            # them. Most were written as the objects were staged.
            vouch.finish(batch.installed)
    return got, new


def store_missing(
    reg: Registry, payloads: Sequence[Payload | None], digests: Sequence[str | None]
) -> int:
    """Store the payloads whose objects are absent, after a pass that only hashed them; refuse
    if a file no longer holds the bytes that were hashed."""
    files = _Files.of(payloads)
    gone, damaged = _damaged(reg, files, digests, list(enumerate(files.rows)))
    repaired = _replace_damaged(reg, damaged)
    if not gone:
        return repaired
    todo = [j for j, i in enumerate(files.rows) if digests[i] in gone]
    sizes = [files.payload(j).size for j in todo]
    with reg.store.batch() as batch, StagedRecords(reg) as vouch:
        got, new = _read_files(
            [files.keys[j] for j in todo],
            sizes,
            batch,
            no_progress,
            "adding",
            on_staged=vouch.staged,
        )
        vouch.finish(batch.installed)
        for j, digest in zip(todo, got, strict=True):
            if digest != digests[files.rows[j]]:
                raise StorageError(
                    f"{files.keys[j]} changed while it was being added; nothing was tagged: "
                    "add again"
                )
    return new + repaired


def _damaged(
    reg: Registry,
    files: _Files,
    digests: Sequence[str | None],
    which: list[tuple[int, int]],
) -> tuple[set[str], dict[str, str]]:
    """Of the files ``which`` names (``(j, row)``: ``files.keys[j]`` is the path of payload
    ``row``, whose digest is ``digests[row]``): the digests whose objects are missing, and those
    whose objects are damaged, each with a file holding its bytes: stored with another size
    than the file's (then re-hashed) or marked corrupt by an earlier read (``dsreg verify``, a
    checkout). One ``stat`` per object; an object of the right size that nothing found
    corrupt is trusted."""
    sizes: dict[str, int] = {}
    paths: dict[str, str] = {}
    for j, i in which:
        d, p = digests[i], files.payloads[i]
        if d is not None and p is not None:
            sizes[d] = p.size
            paths[d] = files.keys[j]
    missing, corrupt = reg.store.stat_check(sizes)
    corrupt |= reg.store.marked_corrupt() & sizes.keys()
    return missing, {d: paths[d] for d in corrupt}


def _replace_damaged(reg: Registry, damaged: dict[str, str]) -> int:
    """Replace each damaged object from a file holding its bytes; how many were replaced."""
    n = 0
    for digest, path in sorted(damaged.items()):
        try:
            n += int(reg.store.replace_corrupt(digest, Path(path)))
        except CorruptObjectError as e:
            raise StorageError(
                f"{path} changed while it was being added; nothing was tagged: add again"
            ) from e
    return n


def _read_files(
    paths: list[str],
    sizes: list[int],
    batch: ObjectBatch | None,
    progress: ProgressHook,
    task: str,
    *,
    meanwhile: Callable[[], None] | None = None,
    on_chunk: Callable[[int, list[str]], None] | None = None,
    on_staged: Callable[[list[Staged]], None] | None = None,
) -> tuple[list[str], int]:
    """Each file's digest (read in parallel: worker processes for many files, else threads);
    with ``batch``, its bytes are staged and installed too (``on_staged``: as
    ``ObjectBatch.put_files``). Returns the digests and how many objects were new."""

    def report(done: int) -> None:
        progress(task, done, len(paths))

    if batch is None:
        return hash_files(paths, sizes, report, meanwhile=meanwhile, on_chunk=on_chunk), 0
    out, _read = batch.put_files(
        paths, sizes, report, meanwhile=meanwhile, on_chunk=on_chunk, on_staged=on_staged
    )
    return out, batch.commit()
