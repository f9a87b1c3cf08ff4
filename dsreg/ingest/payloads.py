"""Payload files into the store: the stat cache, then reading, hashing and staging in parallel.

Light on purpose (no numpy, no pyarrow): ``dsreg add`` of a tree forks its workers from here
before those are imported, and imports them while the workers run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from dsreg._util.parallel import Behind
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, StorageError
from dsreg.ingest import treescan
from dsreg.objects.batch import ObjectBatch, Staged, hash_files
from dsreg.registry.folder import Registry
from dsreg.registry.trust import StagedRecords

__all__ = ["Payload", "store_missing", "store_payloads", "tree_payloads"]


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


def _paths(payloads: Sequence[Payload | None]) -> tuple[list[int], list[str]]:
    """The rows that have a payload, and their absolute paths as strings (the stat cache's keys,
    and cheaper to open than ``Path`` objects)."""
    rows = [i for i, p in enumerate(payloads) if p is not None]
    cwd = os.getcwd()
    base = cwd if cwd.endswith("/") else cwd + "/"
    paths = [os.fspath(payloads[i].path) for i in rows]  # type: ignore[union-attr]
    # What os.path.join(cwd, p) gives, without its cost per file.
    return rows, [p if p.startswith("/") else base + p for p in paths]


def store_payloads(
    reg: Registry,
    payloads: Sequence[Payload | None],
    *,
    write: bool,
    progress: ProgressHook,
    meanwhile: Callable[[], None] | None = None,
) -> tuple[list[str | None], int]:
    """Hash (and with ``write``, store) every payload; return the digests and how many objects
    were new. Unchanged files (same path, inode, size, mtime as in the stat cache) are not read;
    the rest are read once each, in parallel across files, one thread per file."""
    out: list[str | None] = [None] * len(payloads)
    rows, keys = _paths(payloads)
    if not rows:
        return out, 0
    # Files changed this close to now may change again without their stat changing: their
    # digests are used but not remembered (see treescan.RACY_NS).
    trust_before = time.time_ns() - treescan.RACY_NS
    cache = reg.state.lookup(_common_prefix(keys))
    todo: list[int] = []
    for j, i in enumerate(rows):
        p = payloads[i]
        assert p is not None
        hit = cache.get(keys[j])
        if hit is not None and hit[:4] == (p.inode, p.size, p.mtime_ns, p.ctime_ns):
            out[i] = hit[4]
        else:
            todo.append(j)
    del cache
    damaged: dict[str, str] = {}
    if write:
        # A cached digest says what the file holds, not that the store still has it intact
        # (gc, or a damaged registry being repaired by adding again): files whose objects are
        # missing are read and stored; objects stored with another size than the file's, or
        # found corrupt before, are replaced from the file (``_replace_damaged``).
        todo_set = set(todo)
        gone, damaged = _damaged(
            reg, payloads, out, [(j, i) for j, i in enumerate(rows) if j not in todo_set], keys
        )
        if gone:
            todo = sorted({*todo, *(j for j, i in enumerate(rows) if out[i] in gone)})
    new = 0
    # Stat-cache rows are written while the workers still work (the parent waits for them
    # anyway), a few thousand at a time, each batch its own short transaction.
    fresh: list[tuple[str, int, int, int, int, str]] = []
    writer = contextlib.ExitStack()
    put = writer.enter_context(reg.state.writer())

    def remember(lo: int, digests: list[str]) -> None:
        for t, digest in enumerate(digests):
            j = todo[lo + t]
            p = payloads[rows[j]]
            assert p is not None
            if p.mtime_ns < trust_before and p.ctime_ns < trust_before:
                fresh.append((keys[j], p.inode, p.size, p.mtime_ns, p.ctime_ns, digest))
        if len(fresh) >= 4096:
            put(fresh)
            fresh.clear()

    # The state is written on a thread of its own as the chunks arrive: this thread goes on
    # reading the workers' answers, so no worker waits on a full pipe while a transaction
    # commits.
    behind = Behind()
    with writer:
        if todo:
            sizes = [payloads[rows[j]].size for j in todo]  # type: ignore[union-attr]
            with (
                reg.store.batch() if write else contextlib.nullcontext() as batch,
                StagedRecords(reg) as vouch,
            ):
                try:
                    got, new = _read_files(
                        [keys[j] for j in todo],
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
            for j, digest in zip(todo, got, strict=True):
                out[rows[j]] = digest
            # Objects that were already stored under a digest just computed: trusted no more
            # than cached ones. When every distinct digest was new (a first add), the batch
            # wrote each object from its file just now: nothing to check, no stat per file.
            if write and new < len({got[k] for k in range(len(todo))}):
                computed = [(j, rows[j]) for j in todo]
                damaged.update(_damaged(reg, payloads, out, computed, keys)[1])
        put(fresh)
    new += _replace_damaged(reg, damaged)
    return out, new


def store_missing(
    reg: Registry, payloads: Sequence[Payload | None], digests: Sequence[str | None]
) -> int:
    """Store the payloads whose objects are absent, after a pass that only hashed them; refuse
    if a file no longer holds the bytes that were hashed."""
    rows, keys = _paths(payloads)
    gone, damaged = _damaged(reg, payloads, digests, list(enumerate(rows)), keys)
    repaired = _replace_damaged(reg, damaged)
    if not gone:
        return repaired
    todo = [j for j, i in enumerate(rows) if digests[i] in gone]
    sizes = [payloads[rows[j]].size for j in todo]  # type: ignore[union-attr]
    with reg.store.batch() as batch, StagedRecords(reg) as vouch:
        got, new = _read_files(
            [keys[j] for j in todo], sizes, batch, no_progress, "adding", on_staged=vouch.staged
        )
        vouch.finish(batch.installed)
        for j, digest in zip(todo, got, strict=True):
            if digest != digests[rows[j]]:
                raise StorageError(
                    f"{keys[j]} changed while it was being added; nothing was tagged: add again"
                )
    return new + repaired


def _damaged(
    reg: Registry,
    payloads: Sequence[Payload | None],
    digests: Sequence[str | None],
    which: list[tuple[int, int]],
    keys: list[str],
) -> tuple[set[str], dict[str, str]]:
    """Of the files ``which`` names (``(j, row)``: ``keys[j]`` is the path of payload ``row``,
    whose digest is ``digests[row]``): the digests whose objects are missing, and those whose
    objects are damaged, each with a file holding its bytes: stored with another size than
    the file's (then re-hashed) or marked corrupt by an earlier read (``dsreg verify``, a
    checkout). One ``stat`` per object; an object of the right size that nothing found
    corrupt is trusted."""
    sizes: dict[str, int] = {}
    paths: dict[str, str] = {}
    for j, i in which:
        d, p = digests[i], payloads[i]
        if d is not None and p is not None:
            sizes[d] = p.size
            paths[d] = keys[j]
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
