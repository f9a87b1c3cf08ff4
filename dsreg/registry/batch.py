"""Many objects written together (``dsreg add``), crash-safe at one durability barrier.

Objects are staged under ``tmp/stage-…/ab/cdef…`` with no fsync each. ``commit`` then

1. calls ``syncfs`` once: every staged byte is on disk before any name in ``files/`` refers
   to it;
2. moves the objects into ``files/`` without ever replacing one: a whole staged shard folder
   is renamed into place when ``files/blake3/ab`` does not exist yet (a new registry), else each
   object is renamed with ``RENAME_NOREPLACE`` (or linked, where that is missing);
3. calls ``syncfs`` again: the names are durable before a manifest or ref can name them.

So ``files/`` never holds bytes that a crash could tear, an existing object is never rewritten,
and a caller that writes manifests and refs after ``commit`` never points at content a crash
could lose. docs/benchmarks.md has the argument and the figures.

While staging, bytes go to disk early: ``put_files`` starts each object's write-back as it is
written and drops its pages once written back (``_Behind``); objects staged one at a time
(downloads) are flushed by a background thread. Neither replaces the barrier.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import stat
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import blake3

from dsreg.errors import StorageError
from dsreg.registry.digest import ALGORITHM, PREFIX
from dsreg.registry.forkpool import map_chunks

if TYPE_CHECKING:
    from dsreg.registry.store import ObjectStore

R = TypeVar("R")

__all__ = ["STAGE_PREFIX", "ObjectBatch", "hash_files", "hash_path", "sync_filesystem"]

# Staging folders under tmp/: one per batch; a crash can leave one behind for gc to remove.
STAGE_PREFIX = "stage-"
_CHUNK = 1 << 20
# Files per task handed to a worker: one task per file costs more than small files do.
_CHUNK_FILES = 128
# Small files are read whole (one read, hashed, written); larger ones are streamed.
_SMALL = 16 << 20
_READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
# First read of a file whose size is not known (checkout's verification).
_GUESS = 64 << 10

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_RD = os.O_RDONLY | _CLOEXEC
_WR_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC
# Background flushes (see ObjectBatch._written): at most every quarter second, once this many
# bytes wait.
_FLUSH_BYTES = 32 << 20
_FLUSH_EVERY = 0.25
_FLUSHER_LOCK = threading.Lock()
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


class ObjectBatch:
    """Stage objects (``put_file``, from any number of threads), then ``commit``. Leaving the
    ``with`` block removes the staging folder and anything still in it."""

    __slots__ = (
        "_dir",
        "_files",
        "_flusher",
        "_shards",
        "_staged",
        "_stop",
        "_store",
        "_unflushed",
    )

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._files = os.fspath(store.files / ALGORITHM)
        # Shards that exist now: an object in any other can only come from a concurrent add,
        # and install() tolerates that, so no stat is spent on it (a new registry has none).
        try:
            self._shards = frozenset(os.listdir(self._files))
        except FileNotFoundError:
            self._shards = frozenset()
        # Sharded like files/: creating files in one folder of tens of thousands of entries is
        # several times slower than in 256 small ones.
        self._dir = f"{os.fspath(store.tmp)}/{STAGE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.makedirs(self._dir)
            for i in range(256):
                os.mkdir(f"{self._dir}/{i:02x}")
        except OSError as e:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise StorageError(f"cannot write to {store.tmp}: {e.strerror}") from e
        # (staging path, hex digest); list.append is atomic, so worker threads share it.
        self._staged: list[tuple[str, str]] = []
        # Bytes staged since the last background flush (approximate: threads add unlocked).
        self._unflushed = 0
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None

    def __enter__(self) -> ObjectBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        """Hash a file's bytes and stage them unless the store holds them; return the digest.

        The bytes staged are the bytes hashed (one read), so a file changing under us can never
        land under another content's digest.
        """
        digest, staged, n, _size = self._put_file(path, size_hint)
        if staged is not None:
            self._adopt([staged], n)
        return digest

    def put_files(
        self,
        paths: Sequence[str],
        sizes: Sequence[int],
        report: Callable[[int], None],
        *,
        expect: Sequence[str] | None = None,
        jobs: int | None = None,
        meanwhile: Callable[[], None] | None = None,
        on_chunk: Callable[[int, list[str]], None] | None = None,
    ) -> tuple[list[str], int]:
        """``put_file`` for many files at once, in parallel: in ``jobs`` (default: one per CPU)
        forked worker processes when there are enough files (see ``forkpool``), else in
        threads. ``report(done)`` after each chunk. With ``expect``, a file is staged only if
        it hashes to ``expect[i]``. Returns each file's digest, in the order of ``paths``, and
        the bytes read. ``meanwhile()`` runs in this process while the workers work, and
        ``on_chunk(lo, digests)`` as each chunk's digests arrive."""

        def work(lo: int, hi: int) -> tuple[list[str], list[tuple[str, str]], int, int]:
            digests: list[str] = []
            staged: list[tuple[str, str]] = []
            new_bytes = read = 0
            # Objects staged in this chunk whose write-back has started (see _Behind).
            behind = _Behind()
            with behind:
                for k in range(lo, hi):
                    want = None if expect is None else expect[k]
                    digest, entry, n, size = self._put_file(paths[k], sizes[k], want, behind)
                    digests.append(digest)
                    read += size
                    if entry is not None:
                        staged.append(entry)
                        new_bytes += n
                behind.finish()
            # Bytes written back already need no background flush.
            return digests, staged, new_bytes - behind.bytes, read

        total_read = 0

        def take(r: tuple[list[str], list[tuple[str, str]], int, int]) -> list[str]:
            nonlocal total_read
            digests, staged, new_bytes, read = r
            self._adopt(staged, new_bytes)
            total_read += read
            return digests

        out = _digests_by_chunk(
            work, len(paths), take, report, jobs=jobs, meanwhile=meanwhile, on_chunk=on_chunk
        )
        return out, total_read

    def _put_file(
        self, path: str, size_hint: int, expect: str | None = None, behind: _Behind | None = None
    ) -> tuple[str, tuple[str, str] | None, int, int]:
        """The digest; what was staged (``(path, hex)``, or None) and its size; the file's
        size. Touches no shared state: it runs in worker threads and processes alike."""
        try:
            fd = os.open(path, _RD)
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror}") from e
        try:
            data = _read_small(fd, size_hint)
            if data is None:
                return self._stage_stream(fd, path, expect)
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror}") from e
        finally:
            os.close(fd)
        hexd = blake3.blake3(data, max_threads=1).hexdigest()
        if self._has(hexd) or (expect is not None and PREFIX + hexd != expect):
            return PREFIX + hexd, None, 0, len(data)
        staged = self._stage(hexd, data, behind)
        return PREFIX + hexd, staged, len(data) if staged is not None else 0, len(data)

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        """Stage ``data`` unless the store holds it; return its digest. With ``expect`` (a
        verified download), bytes hashing to anything else are not staged: the caller sees the
        digest they do hash to."""
        hexd = blake3.blake3(data, max_threads=1).hexdigest()
        if expect is not None and PREFIX + hexd != expect:
            return PREFIX + hexd
        if not self._has(hexd):
            staged = self._stage(hexd, data)
            if staged is not None:
                self._adopt([staged], len(data))
        return PREFIX + hexd

    def _has(self, hexd: str) -> bool:
        if hexd[:2] not in self._shards:
            return False
        try:
            os.stat(f"{self._files}/{hexd[:2]}/{hexd[2:]}")
        except OSError:
            return False
        return True

    def _stage(
        self, hexd: str, data: bytes, behind: _Behind | None = None
    ) -> tuple[str, str] | None:
        path = f"{self._dir}/{hexd[:2]}/{hexd[2:]}"
        try:
            fd = os.open(path, _WR_NEW, _READ_ONLY)
        except FileExistsError:
            return None  # the same bytes, staged by this batch from another file
        except OSError as e:
            raise StorageError(f"cannot write to {self._store.tmp}: {e.strerror}") from e
        try:
            _write_all(fd, data)
        except OSError as e:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise StorageError(f"cannot stage object {hexd[:12]}: {e.strerror}") from e
        if behind is None or not behind.keep(fd, len(data)):
            os.close(fd)
        return path, hexd

    def _stage_stream(
        self, fd: int, src: str, expect: str | None = None
    ) -> tuple[str, tuple[str, str] | None, int, int]:
        os.lseek(fd, 0, os.SEEK_SET)
        hasher = blake3.blake3(max_threads=1)
        path = f"{self._dir}/stream-{secrets.token_hex(8)}"
        out = os.open(path, _WR_NEW, _READ_ONLY)
        try:
            while chunk := os.read(fd, _CHUNK):
                hasher.update(chunk)
                _write_all(out, chunk)
        except OSError as e:
            os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise StorageError(f"cannot store {src}: {e.strerror}") from e
        os.close(out)
        hexd = hasher.hexdigest()
        size = os.stat(path).st_size
        if self._has(hexd) or (expect is not None and PREFIX + hexd != expect):
            os.unlink(path)
            return PREFIX + hexd, None, 0, size
        return PREFIX + hexd, (path, hexd), size, size

    def _adopt(self, staged: list[tuple[str, str]], n: int) -> None:
        # list.extend is atomic: worker threads (remote downloads) share the list.
        self._staged.extend(staged)
        self._written(n)

    def _written(self, n: int) -> None:
        # Staged bytes go to disk in the background while files are still being read, so the
        # barrier in commit() finds little left to write. Only durability moves earlier.
        self._unflushed += n
        if self._flusher is None and self._unflushed >= _FLUSH_BYTES:
            with _FLUSHER_LOCK:
                if self._flusher is None:
                    self._flusher = threading.Thread(
                        target=self._flush_loop, name="dsreg-flush", daemon=True
                    )
                    self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._stop.wait(_FLUSH_EVERY):
            if self._unflushed >= _FLUSH_BYTES:
                self._unflushed = 0
                with contextlib.suppress(OSError):
                    sync_filesystem(self._store.tmp)

    def _stop_flusher(self) -> None:
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        # Ready for more: a batch may be committed in waves.
        self._flusher = None
        self._stop = threading.Event()
        self._unflushed = 0

    def commit(self) -> int:
        """Make the staged objects durable and install them; return how many were new."""
        self._stop_flusher()
        staged, self._staged = self._staged, []
        if not staged:
            return 0
        try:
            sync_filesystem(self._store.tmp)
            os.makedirs(self._files, exist_ok=True)
            installed = 0
            by_shard: dict[str, list[tuple[str, str]]] = {}
            loose: list[tuple[str, str]] = []  # streamed objects, staged outside the shards
            for path, hexd in staged:
                if path.startswith(self._dir + "/stream-"):
                    loose.append((path, hexd))
                else:
                    by_shard.setdefault(hexd[:2], []).append((path, hexd))
            for shard, items in by_shard.items():
                if _rename_dir_if_absent(f"{self._dir}/{shard}", f"{self._files}/{shard}"):
                    installed += len(items)
                    # An empty one in its place: a batch may stage and commit again.
                    os.mkdir(f"{self._dir}/{shard}")
                else:
                    loose.extend(items)
            if loose:
                for shard in {h[:2] for _p, h in loose}:
                    os.makedirs(f"{self._files}/{shard}", exist_ok=True)
                with contextlib.closing(
                    map_chunks(
                        lambda lo, hi: self._install(loose[lo:hi]),
                        len(loose),
                        chunk=512,
                    )
                ) as results:
                    installed += sum(n for _lo, n in results)
            sync_filesystem(self._store.files)
            self._shards = frozenset(os.listdir(self._files))
        except OSError as e:
            self._staged = staged
            raise StorageError(f"cannot install objects into {self._files}: {e.strerror}") from e
        return installed

    def _install(self, chunk: list[tuple[str, str]]) -> int:
        n = 0
        for path, hexd in chunk:
            n += _move_noreplace(path, f"{self._files}/{hexd[:2]}/{hexd[2:]}")
        return n

    def discard(self) -> None:
        """Remove the staging folder and whatever is still staged in it."""
        self._stop_flusher()
        self._staged = []
        shutil.rmtree(self._dir, ignore_errors=True)


def _read_small(fd: int, size_hint: int) -> bytes | None:
    """All of a file's bytes if it holds at most ``_SMALL`` (else None). The first read asks for
    one byte more than the size seen when scanning (without one, for 64 KiB: most payloads are
    smaller, and an ``fstat`` costs as much as a read); getting exactly the scanned size is the
    end of the file, so the usual cost is one read."""
    first = min(size_hint, _SMALL) + 1 if size_hint > 0 else _GUESS
    data = os.read(fd, first)
    if len(data) == size_hint < first:
        # As many bytes as the scan saw, and no more when more were asked for: the end of the
        # file (a short read means the end, on any local file system; the size agreeing is
        # the check for those where it might not), so no second read is needed.
        return data
    if not data:
        return data
    # A small second read: asking for a large one would allocate that much for nothing.
    more = os.read(fd, 4096)
    if not more:
        return data
    parts = [data, more]
    total = len(data) + len(more)
    while total <= _SMALL:
        more = os.read(fd, _CHUNK)
        if not more:
            return b"".join(parts)
        parts.append(more)
        total += len(more)
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def hash_files(
    paths: Sequence[str],
    sizes: Sequence[int],
    report: Callable[[int], None],
    *,
    meanwhile: Callable[[], None] | None = None,
    on_chunk: Callable[[int, list[str]], None] | None = None,
) -> list[str]:
    """Each file's digest, read in parallel (worker processes when there are many files, as
    ``ObjectBatch.put_files``); ``report(done)`` after each chunk."""

    def work(lo: int, hi: int) -> list[str]:
        got = []
        for k in range(lo, hi):
            try:
                got.append(hash_path(paths[k], size_hint=sizes[k]))
            except OSError as e:
                raise StorageError(f"cannot read {paths[k]}: {e.strerror}") from e
        return got

    return _digests_by_chunk(
        work, len(paths), lambda digests: digests, report, meanwhile=meanwhile, on_chunk=on_chunk
    )


def _digests_by_chunk(
    work: Callable[[int, int], R],
    n: int,
    take: Callable[[R], list[str]],
    report: Callable[[int], None],
    *,
    jobs: int | None = None,
    meanwhile: Callable[[], None] | None = None,
    on_chunk: Callable[[int, list[str]], None] | None = None,
) -> list[str]:
    """``work`` over chunks of ``n`` files (``map_chunks``); ``take`` turns each chunk's answer
    into its digests (and keeps what else it carries). The digests, in file order."""
    out: list[str] = [""] * n
    done = 0
    with contextlib.closing(
        map_chunks(work, n, chunk=_CHUNK_FILES, jobs=jobs, meanwhile=meanwhile)
    ) as results:
        for lo, answer in results:
            digests = take(answer)
            out[lo : lo + len(digests)] = digests
            if on_chunk is not None:
                on_chunk(lo, digests)
            done += len(digests)
            report(done)
    return out


def hash_path(path: str, *, size_hint: int = 0) -> str:
    """The digest of a file's bytes (one read for small files, streamed for large ones)."""
    fd = os.open(path, _RD)
    try:
        data = _read_small(fd, size_hint)
        if data is not None:
            return PREFIX + blake3.blake3(data, max_threads=1).hexdigest()
        os.lseek(fd, 0, os.SEEK_SET)
        hasher = blake3.blake3(max_threads=1)
        while chunk := os.read(fd, _CHUNK):
            hasher.update(chunk)
        return PREFIX + hasher.hexdigest()
    finally:
        os.close(fd)


class _Behind:
    """Write-behind and drop-behind for one chunk of staged objects (Linux).

    An add writes tens of thousands of objects that nothing reads soon after. Each one's
    write-back starts as soon as it is written (``sync_file_range(WRITE)``); at the end of the
    chunk (``finish``) the worker waits for the chunk's write-back to complete and drops those
    pages from the page cache (``POSIX_FADV_DONTNEED``), as ``dd oflag=nocache`` or a
    database's bulk-write ring does. So the pages the next chunk writes into are the ones just
    freed: an add of any size holds a few chunks of the store's pages, not a second copy of
    the whole dataset beside the user's own, and the barrier in ``commit`` finds the bytes
    already written. Only the page cache and the timing of write-back change: durability is
    still ``commit``'s ``syncfs`` (a write-back error surfaces here or there)."""

    __slots__ = ("bytes", "fds")

    def __init__(self) -> None:
        self.fds: list[int] = []
        self.bytes = 0  # bytes whose write-back this chunk waited for

    def keep(self, fd: int, n: int) -> bool:
        """Start ``fd``'s write-back and keep it for ``finish``; False where that is not
        available (the caller closes ``fd``)."""
        fn = _sync_file_range()
        if fn is None or fn(fd, 0, 0, _SFR_WRITE) != 0:
            return False
        self.fds.append(fd)
        self.bytes += n
        return True

    def finish(self) -> None:
        """Wait for the kept objects' write-back, drop their pages, close them."""
        fn = _sync_file_range()
        fds, self.fds = self.fds, []
        failed = 0
        try:
            for fd in fds:
                if fn(fd, 0, 0, _SFR_WAIT_WRITE_WAIT) != 0:
                    failed = failed or ctypes.get_errno()
                else:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            for fd in fds:
                os.close(fd)
        if failed:
            raise StorageError(f"cannot write staged objects: {os.strerror(failed)}")

    def __enter__(self) -> _Behind:
        return self

    def __exit__(self, *exc: object) -> None:
        # On an error: close what is still open (the staging folder goes with the batch).
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


# -- Linux system calls Python does not wrap (ctypes; portable fallbacks elsewhere) ----------
_LIBC: Any = None
_LIBC_LOADED = False
_SFR: Any = None
_SFR_LOADED = False
# sync_file_range(2) flags: start write-back; wait for it before and after starting it.
_SFR_WRITE = 2
_SFR_WAIT_WRITE_WAIT = 1 | 2 | 4


def _libc() -> Any:
    global _LIBC, _LIBC_LOADED
    if not _LIBC_LOADED:
        _LIBC_LOADED = True
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError):
                _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _sync_file_range() -> Any:
    """``sync_file_range(2)`` (Linux), typed for 64-bit offsets; None elsewhere."""
    global _SFR, _SFR_LOADED
    if not _SFR_LOADED:
        fn = getattr(_libc(), "sync_file_range", None)
        if fn is not None and hasattr(os, "posix_fadvise"):
            fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _SFR = fn
        _SFR_LOADED = True
    return _SFR


def sync_filesystem(path: Path) -> None:
    """Make every completed write on ``path``'s file system durable: ``syncfs(2)`` on Linux (one
    barrier instead of an fsync per file), ``sync(2)`` elsewhere."""
    fn = getattr(_libc(), "syncfs", None)
    if fn is None:
        os.sync()
        return
    fd = os.open(path, _RD)
    try:
        if fn(ctypes.c_int(fd)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), os.fspath(path))
    finally:
        os.close(fd)


def _rename_dir_if_absent(src: str, dst: str) -> bool:
    """Move a whole staged shard into place when ``files/`` has no such shard yet."""
    if os.path.lexists(dst):
        return False
    try:
        os.rename(src, dst)
    except OSError as e:
        # Another writer made the shard meanwhile: fall back to moving objects one by one.
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            return False
        raise
    return True


def _move_noreplace(src: str, dst: str) -> int:
    """Move a staged object into place unless the object exists; 1 if it was new."""
    fn = getattr(_libc(), "renameat2", None)
    if fn is not None:
        r = fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        if r == 0:
            return 1
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            os.unlink(src)
            return 0
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), dst)
    return _link_noreplace(src, dst)


def _link_noreplace(src: str, dst: str) -> int:
    new = 1
    try:
        os.link(src, dst)
    except FileExistsError:
        new = 0
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            raise
        # File systems without hard links: rename can replace, so only do it if still absent.
        if os.path.exists(dst):
            new = 0
        else:
            os.replace(src, dst)
            return new
    with contextlib.suppress(FileNotFoundError):
        os.unlink(src)
    return new
