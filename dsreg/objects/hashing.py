"""BLAKE3-256, the one hash (docs/formats.md, "Digests and canonical bytes"): the only module
that calls ``blake3``.

Digests are ``blake3:`` + 64 lowercase hex. A file is hashed on one thread: files are hashed many
at a time across worker processes (``dsreg._util.parallel``), so one file never fans out over
the cores its neighbours need. The one exception is a caller hashing a single large input with
nothing beside it (``hash_file(..., threads=0)``: a probability matrix of gigabytes), where
BLAKE3's own tree-parallel hashing uses the idle cores; the digest is the same either way.
"""

from __future__ import annotations

import os
import stat
import threading

import blake3

from dsreg._util.fs import CHUNK, RD, read_small

__all__ = [
    "FileDigest",
    "Hasher",
    "HashingStopped",
    "hash_bytes",
    "hash_fd",
    "hash_file",
    "hash_hex",
    "hash_path",
    "start_file_digest",
]

PREFIX = "blake3:"


class Hasher:
    """Incremental hashing: ``update`` with bytes as they stream by, then ``digest``."""

    __slots__ = ("_h",)

    def __init__(self, *, threads: int = 1) -> None:
        self._h = blake3.blake3(max_threads=blake3.blake3.AUTO if threads == 0 else threads)

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._h.update(data)

    def hexdigest(self) -> str:
        return str(self._h.hexdigest())

    def digest(self) -> str:
        return PREFIX + self.hexdigest()


def hash_hex(data: bytes | bytearray | memoryview) -> str:
    """The 64 hex characters of ``data``'s digest."""
    return str(blake3.blake3(data, max_threads=1).hexdigest())


def hash_bytes(data: bytes | bytearray | memoryview) -> str:
    """The digest of ``data``: ``blake3:`` + 64 lowercase hex."""
    return PREFIX + hash_hex(data)


def hash_fd(fd: int, *, size_hint: int = 0) -> str:
    """The digest of an open file's bytes from its current offset: one read for a small file
    (``size_hint`` is the size a scan saw), streamed in 1 MiB chunks otherwise."""
    data = read_small(fd, size_hint)
    if data is not None:
        return hash_bytes(data)
    os.lseek(fd, 0, os.SEEK_SET)
    h = Hasher()
    while chunk := os.read(fd, CHUNK):
        h.update(chunk)
    return h.digest()


def hash_path(path: str, *, size_hint: int = 0) -> str:
    """The digest of a file's bytes (``hash_fd`` on it); ``OSError`` propagates."""
    fd = os.open(path, RD)
    try:
        return hash_fd(fd, size_hint=size_hint)
    finally:
        os.close(fd)


class HashingStopped(Exception):
    """``hash_file`` was asked to stop before the end of the file."""


def hash_file(
    path: str | os.PathLike[str], *, threads: int = 1, stop: threading.Event | None = None
) -> str:
    """The digest of a file's bytes, read in 1 MiB chunks (bounded memory for any size);
    ``threads=0`` lets BLAKE3 use every core for one large file (see the module's note).
    ``stop``: checked before each chunk, ``HashingStopped`` once it is set (a digest taken on
    another thread that is no longer wanted)."""
    h = Hasher(threads=threads)
    # Larger reads when BLAKE3 fans out: each update must span enough chunks for its threads.
    size = CHUNK if threads == 1 else 8 * CHUNK
    with open(path, "rb") as f:
        while chunk := f.read(size):
            if stop is not None and stop.is_set():
                raise HashingStopped(os.fspath(path))
            h.update(chunk)
    return h.digest()


class FileDigest:
    """``hash_file(path)`` on a thread of its own, begun when made: a caller that will want a
    large input's digest starts it before work that keeps one core busy (importing, reading
    other inputs), so that the hash runs on an idle core instead of beside later work that
    uses them all.

    :meth:`result` waits for the digest; :meth:`stop` abandons it (the thread stops before its
    next read). A file that could not be read leaves no digest (``result`` returns None) and
    no error: whoever reads the file reports that in its own words. The thread is a daemon,
    so an abandoned digest never holds up the interpreter's exit.
    """

    __slots__ = ("_digest", "_path", "_stop", "_thread")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._digest: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dsreg-digest", daemon=True)
        self._thread.start()

    @property
    def path(self) -> str:
        return self._path

    def _run(self) -> None:
        try:
            self._digest = hash_file(self._path, stop=self._stop)
        except (OSError, HashingStopped):
            self._digest = None

    def result(self) -> str | None:
        """The file's digest (``blake3:`` + hex), or None if it was stopped or unreadable."""
        self._thread.join()
        return self._digest

    def stop(self) -> None:
        """Abandon the digest and wait until the thread has let go of the file."""
        self._stop.set()
        self._thread.join()


def start_file_digest(path: str | os.PathLike[str]) -> FileDigest | None:
    """A :class:`FileDigest` of ``path`` begun now, if it is a regular file; None otherwise (a
    named pipe must not be read by anyone but the reader that checks it; a missing file is
    that reader's to report)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except (OSError, ValueError):
        return None
    return FileDigest(path)
