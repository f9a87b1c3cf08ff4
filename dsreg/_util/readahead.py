"""Read-ahead for many small files read one after the other (``dsreg add`` of a tree that is
not in the page cache).

A worker that opens, reads and hashes one small file at a time keeps one read in flight on the
disk: it waits for each file's pages, then hashes them while the disk idles. ``ReadAhead`` opens
the next few files of the worker's list ahead of it and asks the kernel to read them
(``POSIX_FADV_WILLNEED``, which starts the reads and returns), so while the worker hashes one
file the disk is already reading the next ones: the disk's latency overlaps the hashing and
its queue holds several requests, as a virtual or network disk needs to reach its throughput.
The worker then reads each file through the descriptor opened ahead: no extra ``open``.

Only pages are asked for: what is read, hashed and stored is exactly what the worker reads
through the descriptor, as without read-ahead. A file that cannot be opened ahead is opened
again in its turn, where the error is said; running short of descriptors (``EMFILE``) stops
the read-ahead, not the work.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
from collections.abc import Sequence

from dsreg._util.fs import RD

__all__ = ["WINDOW", "ReadAhead"]

# Files opened and advised ahead of the one being read: enough requests in the disk's queue
# for a virtual or network disk to reach its throughput on cold files; more ahead gains
# nothing once the queue is that deep. A worker's chunk of files (128 in ``dsreg add``)
# bounds it too.
WINDOW = 128
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None) if hasattr(os, "posix_fadvise") else None


def _window() -> int:
    """``WINDOW``, fewer where descriptors are scarce: at most a 64th of the process's limit
    per reader (threads share it), none without ``posix_fadvise``. A soft limit too low for
    ``WINDOW`` (1,024 is common) is raised towards the hard one first, as far as
    ``64 * WINDOW``: only this process and its children see it."""
    if _WILLNEED is None:
        return 0
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 0
    if soft != resource.RLIM_INFINITY and soft < 64 * WINDOW:
        want = 64 * WINDOW if hard == resource.RLIM_INFINITY else min(hard, 64 * WINDOW)
        if want > soft:
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
    if soft == resource.RLIM_INFINITY:
        return WINDOW
    return max(0, min(WINDOW, soft // 64))


class ReadAhead:
    """Descriptors of ``paths[lo:hi]``, each opened (and its reading started) up to ``window``
    files before ``take`` asks for it. Use as a context manager: leaving closes whatever was
    opened and not taken."""

    __slots__ = ("_ahead", "_hi", "_next", "_paths", "_window")

    def __init__(
        self, paths: Sequence[str], lo: int, hi: int, *, window: int | None = None
    ) -> None:
        self._paths = paths
        self._hi = hi
        self._next = lo
        self._window = _window() if window is None else window
        self._ahead: collections.deque[tuple[int, int]] = collections.deque()

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        while self._ahead:
            with contextlib.suppress(OSError):
                os.close(self._ahead.popleft()[1])

    def take(self, k: int) -> int | None:
        """A descriptor of ``paths[k]`` (the caller closes it), opened ahead, or None when it
        was not (the caller opens it and sees any error itself). Files are taken in order."""
        if self._window:
            self._fill(k + self._window)
        ahead = self._ahead
        while ahead and ahead[0][0] < k:
            with contextlib.suppress(OSError):
                os.close(ahead.popleft()[1])
        if ahead and ahead[0][0] == k:
            return ahead.popleft()[1]
        return None

    def _fill(self, upto: int) -> None:
        assert _WILLNEED is not None
        end = min(upto + 1, self._hi)
        while self._next < end:
            k = self._next
            self._next += 1
            try:
                fd = os.open(self._paths[k], RD)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    self._window = 0  # leave the descriptors to the work itself
                    return
                continue  # opened again in its turn, where the error is said
            with contextlib.suppress(OSError):
                os.posix_fadvise(fd, 0, 0, _WILLNEED)
            self._ahead.append((k, fd))
