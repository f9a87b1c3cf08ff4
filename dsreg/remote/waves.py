"""How transfers are paced: objects put into a store one by one when they are few and staged
and committed in doubling waves when they are many, work handed to threads in chunks, small
files read whole. Shared by both directions: pushes to a folder remote and fetches into a
registry (``objects.py``, ``fetch.py``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, TypeVar

from dsreg._util.parallel import map_chunks
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.objects.batch import ObjectBatch

if TYPE_CHECKING:
    from dsreg.objects.store import ObjectStore

__all__ = ["FEW", "WAVE", "WHOLE", "parallel", "put_objects", "read_whole", "staged_waves"]

# Work is handed to the pool in chunks: one future per object costs more than a small copy.
_PER_TASK = 64
# Objects up to this size are read whole, hashed once and staged from memory.
WHOLE = 16 << 20
# Objects are staged and committed in waves of this many: an interrupted transfer keeps what
# its committed waves moved, and a wave's commit overlaps the next wave's transfers.
WAVE = 8192
_FIRST_WAVE = 1024
# Up to this many objects are put one by one (each fsynced on its own), without a staging batch.
FEW = 32
_RD = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)

T = TypeVar("T")
R = TypeVar("R")


def read_whole(path: str, limit: int) -> bytes | None:
    """A file's bytes if it holds at most ``limit`` (else None, and nothing read)."""
    fd = os.open(path, _RD)
    try:
        return _read_fd(fd, limit)
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int) -> bytes | None:
    """All of an open file's bytes if it holds at most ``limit`` (else None, nothing read). One
    read sized from fstat: no over-sized buffer per call."""
    size = os.fstat(fd).st_size
    if size > limit:
        return None
    data = os.read(fd, size + 1)
    if len(data) <= size:
        return data  # a regular file read short of size + 1 is at its end
    parts = [data]
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def put_objects(
    store: ObjectStore,
    items: Sequence[T],
    *,
    one_by_one: Callable[[Sequence[T]], R],
    staged: Callable[[ObjectBatch, Sequence[T], int], R],
) -> list[R]:
    """Objects into ``store``, as a push to a folder and a fetch into a registry both put
    them: up to ``FEW`` by ``one_by_one(items)`` (a few objects do not pay for a staging
    batch), more by ``staged`` in waves (``staged_waves``)."""
    if len(items) <= FEW:
        return [one_by_one(items)]
    return staged_waves(store, items, staged)


def staged_waves(
    store: ObjectStore,
    items: Sequence[T],
    stage: Callable[[ObjectBatch, Sequence[T], int], R],
) -> list[R]:
    """``stage(batch, items[i:j], i)`` for each wave, each into its own staging batch of
    ``store``; a wave's commit (two ``syncfs`` barriers and the moves into ``files/``) runs while
    the next wave stages. Waves double from ``_FIRST_WAVE`` up to ``WAVE`` objects, so the first
    objects land early. What was committed stays if a later wave fails or the process dies."""
    out: list[R] = []
    with ThreadPoolExecutor(1) as committer, contextlib.ExitStack() as batches:
        pending: Future[int] | None = None
        try:
            i, size = 0, min(_FIRST_WAVE, WAVE)
            while i < len(items):
                batch = batches.enter_context(store.batch())
                out.append(stage(batch, items[i : i + size], i))
                if pending is not None:
                    pending.result()
                pending = committer.submit(batch.commit)
                i, size = i + size, min(size * 2, WAVE)
            if pending is not None:
                pending.result()
        finally:
            if pending is not None:
                wait([pending])  # a batch is never discarded while it commits
    return out


def parallel(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    jobs: int,
    task: str,
    progress: ProgressHook = no_progress,
) -> list[R]:
    """``[fn(x) for x in items]`` on ``jobs`` threads (transfers wait on the network or the
    disk, so they stay in threads: ``map_chunks`` never forks for one job), in chunks; the
    first exception stops the chunks not yet started and is raised."""
    total = len(items)
    parts: dict[int, list[R]] = {}
    done = 0
    with contextlib.closing(
        map_chunks(
            lambda lo, hi: [fn(x) for x in items[lo:hi]],
            total,
            chunk=_PER_TASK,
            jobs=1,
            threads=max(1, jobs),
        )
    ) as results:
        for lo, part in results:
            parts[lo] = part
            done += len(part)
            progress(task, done, total)
    return [r for lo in sorted(parts) for r in parts[lo]]
