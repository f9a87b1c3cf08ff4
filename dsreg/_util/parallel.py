"""Work on many small files in forked worker processes, one per CPU.

Reading, hashing, creating and linking tens of thousands of small files is bound by the kernel
and by per-file Python work that holds the GIL: threads in one process barely overlap, while
processes each hold a GIL of their own and run side by side on the cores. ``fork_map`` runs
``fn(k)`` for each task ``k`` in ``jobs`` forked children and hands each result back to the
parent as it arrives.

The children inherit everything the parent computed (file lists, the staging folder), so only
task numbers go out (one shared pipe: whichever child is free takes the next task, so a child
slowed by other load on the machine does not hold the rest back) and pickled results come back
(a pipe per child). A child runs only ``fn`` and system calls; it never touches the parent's
locks, threads or open files beyond those, and it dies with the parent (``PR_SET_PDEATHSIG``):
a ``dsreg add`` killed with SIGKILL leaves no worker writing behind it.

Where ``fork`` is missing or unsafe (not Linux), or the work is small, the tasks run in the
calling process instead: the same results in the same order of arrival guarantees (none).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import os
import pickle
import queue
import selectors
import signal
import struct
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from dsreg.errors import DsregError, StorageError

__all__ = ["Behind", "default_jobs", "fork_map", "forking", "gc_paused", "map_chunks"]

R = TypeVar("R")

# Fewer items than this are worked on in threads: forking workers costs a few milliseconds.
FORK_MIN = 2048
# Task numbers go out through one pipe, written whole before the children start, so its
# capacity bounds the number of tasks (callers size their chunks to stay below).
MAX_TASKS = 8192
_TASK = struct.Struct("<I")
_HEAD = struct.Struct("<IQ")  # task number (or _ERROR), payload length
_ERROR = 0xFFFFFFFF
_PR_SET_PDEATHSIG = 1
# Set while a process is a worker: nested fork_map calls run inline there.
_IN_WORKER = False
# Pipe ends of every fork_map running in this process (two threads may each run one): a worker
# closes those of the others, so it never holds a pipe another fork_map waits to see closed.
_PIPES: set[int] = set()
_PIPES_LOCK = threading.Lock()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for one bulk step of a command (an add, a checkout).
    Such a step allocates a tuple or two per file, none of them in a cycle, and each
    allocation count past the collector's threshold makes it walk every object the process
    holds, again and again, for nothing. The step is bounded, so what
    cycles it makes wait for the collector's next run after it; nested steps leave it off
    until the outermost ends, and one that found it off leaves it off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Behind:
    """Calls run one after the other on a thread of their own, in the order made: what the
    parent of ``fork_map``'s workers does with each answer that need not hold up the next (an
    add writes the state of each chunk's files). The thread starts with the first call, so it
    is never forked (workers are forked before any answer arrives). ``close()`` waits for every
    call, then raises the first error one raised (the calls after it are skipped)."""

    __slots__ = ("_error", "_queue", "_thread")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __call__(self, fn: Callable[..., None], *args: Any) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dsreg-behind", daemon=True)
            self._thread.start()
        self._queue.put((fn, args))

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is None:
                try:
                    item[0](*item[1])
                except BaseException as e:  # raised by close(), in the caller's thread
                    self._error = e


def default_jobs() -> int:
    """``$DSREG_JOBS`` if set to a whole number, else one worker per CPU this process may run
    on (at most 32)."""
    env = os.environ.get("DSREG_JOBS", "")
    if env.isdigit() and int(env) >= 1:
        return min(64, int(env))
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(32, n))


def forking(n_items: int, *, threshold: int | None = None, jobs: int | None = None) -> bool:
    """Whether work on ``n_items`` is worth worker processes here: Linux (fork is safe there for
    code that only makes system calls), more than one CPU, at least ``threshold`` (default
    ``FORK_MIN``) items, and not already inside a worker. ``DSREG_JOBS=1`` turns workers off."""
    if threshold is None:
        threshold = FORK_MIN
    if _IN_WORKER or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if os.environ.get("DSREG_JOBS", "") in ("0", "1"):
        return False
    return (jobs if jobs is not None else default_jobs()) > 1 and n_items >= threshold


def map_chunks(
    work: Callable[[int, int], R],
    n: int,
    *,
    chunk: int,
    threshold: int | None = None,
    threads: int | None = None,
    jobs: int | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Generator[tuple[int, R], None, None]:
    """``(lo, work(lo, hi))`` for consecutive chunks ``[lo, hi)`` covering ``range(n)``: in
    ``jobs`` (default: one per CPU) forked workers when ``forking(n, threshold=threshold)``,
    else in a pool of ``threads`` (default ``jobs``, at least 2) threads. ``work`` must return
    everything the caller needs: in a worker, what it changes in memory stays there. Chunks
    arrive in the order they finish. Close the iterator (``contextlib.closing``) if you may
    leave it early. ``meanwhile()`` (best effort: its errors are ignored) runs in this process
    while workers work, in a thread; with no workers, first."""
    if n <= 0:
        return
    if forking(n, threshold=threshold, jobs=jobs):
        size = max(chunk, -(-n // MAX_TASKS))
        starts = range(0, n, size)

        def task(k: int) -> R:
            return work(starts[k], min(starts[k] + size, n))

        with contextlib.closing(
            fork_map(task, len(starts), jobs=jobs, meanwhile=meanwhile)
        ) as results:
            for k, r in results:
                yield starts[k], r
        return
    # Imported here: concurrent.futures brings logging with it, and commands that fork (or map
    # nothing) need neither.
    from concurrent.futures import ThreadPoolExecutor

    if meanwhile is not None:
        _quietly(meanwhile)
    starts = range(0, n, chunk)
    with ThreadPoolExecutor(max_workers=threads or max(2, jobs or default_jobs())) as pool:
        try:
            futures = pool.map(lambda lo: work(lo, min(lo + chunk, n)), starts)
            yield from zip(starts, futures, strict=True)
        except BaseException:
            # One chunk failed (or the caller left, or Ctrl-C): do not start the queued ones.
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _quietly(fn: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        fn()


def fork_map(
    fn: Callable[[int], Any],
    n_tasks: int,
    *,
    jobs: int | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Generator[tuple[int, Any], None, None]:
    """``(k, fn(k))`` for each task ``k`` in ``range(n_tasks)``, computed in forked workers, in
    the order they finish. An exception in ``fn`` is raised here (a ``DsregError`` as itself,
    anything else as a ``StorageError`` naming it), after every worker has been stopped.

    Run it to completion or close it: leaving early (an exception in the caller, Ctrl-C)
    kills and reaps the workers.
    """
    if n_tasks > MAX_TASKS:
        raise ValueError(f"fork_map takes at most {MAX_TASKS} tasks, got {n_tasks}")
    if n_tasks == 0:
        return
    n_jobs = max(1, min(jobs if jobs is not None else default_jobs(), n_tasks))
    task_r, task_w = os.pipe()
    try:
        os.write(task_w, b"".join(_TASK.pack(k) for k in range(n_tasks)))
    finally:
        os.close(task_w)
    workers: dict[int, int] = {}  # result pipe fd -> pid
    side: threading.Thread | None = None
    finished = False
    try:
        for _ in range(n_jobs):
            with _PIPES_LOCK:
                res_r, res_w = os.pipe()
                _roomy(res_w)
                _PIPES.update((res_r, res_w, task_r))
                pid = os.fork()
                if pid == 0:  # pragma: no cover - runs in the child (coverage cannot see it)
                    for fd in _PIPES - {task_r, res_w}:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                    _child(fn, task_r, res_w)
                os.close(res_w)
                _PIPES.discard(res_w)
            workers[res_r] = pid
        with _PIPES_LOCK:
            os.close(task_r)
            _PIPES.discard(task_r)
        task_r = -1
        if meanwhile is not None:
            # Started after the forks: a worker never inherits a half-done import.
            side = threading.Thread(target=_quietly, args=(meanwhile,), daemon=True)
            side.start()
        yield from _collect(workers, n_tasks)
        if side is not None:
            side.join()
        finished = True
    finally:
        with _PIPES_LOCK:
            if task_r >= 0:
                os.close(task_r)
                _PIPES.discard(task_r)
            _PIPES.difference_update(workers)
        _stop(workers, kill=not finished)


# Bytes a worker's result pipe holds before the worker waits for the parent to read (Linux's
# default is 64 KiB, two chunks' answers: a parent busy for a moment, writing the state of the
# chunks before, would stop both workers).
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def _roomy(fd: int) -> None:
    """A pipe's capacity raised towards ``_PIPE_BYTES`` (as far as the system allows)."""
    size = _PIPE_BYTES
    while size > 1 << 16:
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
            return
        except OSError:  # above /proc/sys/fs/pipe-max-size, or the user's pipe quota
            size //= 2


def _child(fn: Callable[[int], Any], task_r: int, res_w: int) -> None:  # pragma: no cover
    global _IN_WORKER
    _IN_WORKER = True
    # A worker lives for one fork_map and runs only ``fn``: the cyclic collector would walk
    # (and so copy, page by page) the parent's inherited objects for nothing.
    gc.disable()
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _die_with_parent()
        while True:
            raw = os.read(task_r, _TASK.size)
            if not raw:
                break
            (k,) = _TASK.unpack(raw)
            try:
                data = pickle.dumps(fn(k), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as e:
                _send(res_w, _ERROR, pickle.dumps(_portable(e), protocol=pickle.HIGHEST_PROTOCOL))
                status = 1
                break
            _send(res_w, k, data)
    except BaseException:
        status = 1
    finally:
        # Never return into the parent's code: no atexit handlers, no flushing of buffers
        # the parent also holds.
        os._exit(status)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before the line above took effect
        os._exit(1)


def _portable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling (dsreg's own errors do), else a StorageError naming it."""
    if isinstance(e, DsregError | OSError):
        try:
            pickle.loads(pickle.dumps(e))
            return e
        except Exception:  # any failure to round-trip: describe it instead
            pass
    return StorageError(f"a worker process failed: {type(e).__name__}: {e}")


def _send(fd: int, k: int, data: bytes) -> None:  # pragma: no cover - runs in the child
    view = memoryview(_HEAD.pack(k, len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _collect(workers: dict[int, int], n_tasks: int) -> Generator[tuple[int, Any], None, None]:
    bufs = {fd: bytearray() for fd in workers}
    done = 0
    with selectors.DefaultSelector() as sel:
        for fd in workers:
            sel.register(fd, selectors.EVENT_READ)
        open_fds = set(workers)
        while open_fds:
            for key, _ in sel.select():
                fd = int(key.fd)
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = bufs[fd]
                buf += chunk
                while len(buf) >= _HEAD.size:
                    k, n = _HEAD.unpack_from(buf)
                    if len(buf) < _HEAD.size + n:
                        break
                    payload = bytes(buf[_HEAD.size : _HEAD.size + n])
                    del buf[: _HEAD.size + n]
                    if k == _ERROR:
                        raise pickle.loads(payload)
                    done += 1
                    yield k, pickle.loads(payload)
    if done != n_tasks:
        raise StorageError(
            f"a worker process ended early ({done} of {n_tasks} tasks done); nothing was "
            "installed: run the command again"
        )


def _stop(workers: dict[int, int], *, kill: bool) -> None:
    """Reap every worker, killing them first when the caller left early or failed."""
    for fd, pid in workers.items():
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            if kill:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
