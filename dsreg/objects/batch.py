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
could lose. docs/concepts.md has the argument ("An add never names bytes a crash could
lose").

While staging, a background thread flushes what was staged (``syncfs`` every tenth of a second
while bytes wait), so the barrier finds little left to write; ``put_files`` then drops the
pages of objects a completed flush has written from the page cache (drop-behind, see
``ObjectBatch._drop_behind``). Every ``syncfs`` of a batch goes through one descriptor opened
before its first write, so a write-back error is reported once, to the batch, whichever flush
meets it, and ``commit`` refuses to install anything after one.
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import os
import shutil
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from dsreg._util.fs import (
    CHUNK,
    RD,
    READ_ONLY,
    WR_NEW,
    move_noreplace,
    read_small,
    rename_dir_if_absent,
    syncfs,
    write_all,
)
from dsreg._util.parallel import map_chunks
from dsreg._util.readahead import ReadAhead
from dsreg.errors import StorageError
from dsreg.objects.digest import ALGORITHM, PREFIX, layout
from dsreg.objects.hashing import Hasher, hash_hex, hash_path

R = TypeVar("R")
# An object's (inode, size, mtime_ns, ctime_ns, nlink) right after this batch wrote it.
Stat = tuple[int, int, int, int, int]
# A staged object: where it is staged, its hex digest, its stat when written (None for one
# staged outside the shards, whose own rename into place changes its ctime).
Staged = tuple[str, str, Stat | None]

__all__ = ["STAGE_PREFIX", "ObjectBatch", "Staged", "hash_files"]

# Staging folders under tmp/: one per batch; a crash can leave one behind for gc to remove.
STAGE_PREFIX = "stage-"
# Files per task handed to a worker: one task per file costs more than small files do.
_CHUNK_FILES = 128

# Background flushes (see ObjectBatch._written): at most every tenth of a second, once this many
# bytes wait.
_FLUSH_BYTES = 8 << 20
_FLUSH_EVERY = 0.1
_DROP = getattr(os, "POSIX_FADV_DONTNEED", None) if hasattr(os, "posix_fadvise") else None
_FLUSHER_LOCK = threading.Lock()


class ObjectBatch:
    """Stage objects (``put_file``, from any number of threads), then ``commit``. Leaving the
    ``with`` block removes the staging folder and anything still in it."""

    __slots__ = (
        "_behind",
        "_behind_lock",
        "_dir",
        "_files",
        "_flush_error",
        "_flusher",
        "_flushes",
        "_installed",
        "_shards",
        "_staged",
        "_stop",
        "_sync_fd",
        "_tmp",
        "_unflushed",
    )

    def __init__(self, files: Path, tmp: Path) -> None:
        """Objects go to ``files`` (a store's ``files/`` folder), staged under ``tmp``."""
        self._tmp = tmp
        self._files = os.fspath(files / ALGORITHM)
        # Shards that exist now: an object in any other can only come from a concurrent add,
        # and install() tolerates that, so no stat is spent on it (a new registry has none).
        try:
            self._shards = frozenset(os.listdir(self._files))
        except FileNotFoundError:
            self._shards = frozenset()
        # Sharded like files/: creating files in one folder of tens of thousands of entries is
        # several times slower than in 256 small ones. A shard's folder is made when its first
        # object is staged (``_stage``).
        self._dir = f"{os.fspath(tmp)}/{STAGE_PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
        try:
            # A push that ends removes the remote's tmp/ once it is empty: between makedirs
            # creating tmp/ and creating the stage folder in it, another push may remove it
            # again (ENOENT). Once the stage folder exists, tmp/ is not empty and stays.
            for attempt in range(8):
                try:
                    os.makedirs(self._dir)
                    break
                except FileNotFoundError:
                    if attempt == 7:
                        raise
            # Every syncfs of this batch goes through this descriptor, opened before anything is
            # written: syncfs reports a write-back error to each descriptor open when it
            # happened, once (errseq), so no flush can consume an error the barrier needs.
            self._sync_fd = os.open(tmp, RD)
        except OSError as e:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise StorageError(f"cannot write to {tmp}: {e.strerror}") from e
        # (staging path, hex digest); list.append is atomic, so worker threads share it.
        self._staged: list[Staged] = []
        # Bytes staged since the last background flush (approximate: threads add unlocked).
        self._unflushed = 0
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._flush_error: OSError | None = None
        # How many background flushes have completed: shared memory, so that forked workers
        # see it too (MAP_SHARED); only the flusher thread writes it.
        self._flushes = mmap.mmap(-1, 8)
        # Chunks staged and not yet dropped from the page cache: (flushes when staged, paths).
        # Each worker process has its own copy; threads share this one (under the lock).
        self._behind: collections.deque[tuple[int, list[str]]] = collections.deque()
        self._behind_lock = threading.Lock()
        # The objects the last ``commit`` installed (its own bytes, not another add's): hex
        # digest -> stat when written, still theirs (a shard folder renamed into place changes
        # no file's ctime), or None (renamed one by one: stat them again). The add records them
        # (``dsreg.registry.trust``).
        self._installed: dict[str, Stat | None] = {}

    @property
    def installed(self) -> dict[str, Stat | None]:
        """The objects the last ``commit`` installed: hex digest -> their stat when written, if
        installing did not change it, else None."""
        return self._installed

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
        on_staged: Callable[[list[Staged]], None] | None = None,
    ) -> tuple[list[str], int]:
        """``put_file`` for many files at once, in parallel: in ``jobs`` (default: one per CPU)
        forked worker processes when there are enough files (see ``forkpool``), else in
        threads. ``report(done)`` after each chunk. With ``expect``, a file is staged only if
        it hashes to ``expect[i]``. Returns each file's digest, in the order of ``paths``, and
        the bytes read. ``meanwhile()`` runs in this process while the workers work,
        ``on_chunk(lo, digests)`` as each chunk's digests arrive, and ``on_staged(entries)``
        with what each chunk staged (``(path, hex, stat when written)``)."""

        def work(lo: int, hi: int) -> tuple[list[str], list[Staged], int, int]:
            digests: list[str] = []
            staged: list[Staged] = []
            new_bytes = read = 0
            with ReadAhead(paths, lo, hi) as ahead:
                for k in range(lo, hi):
                    want = None if expect is None else expect[k]
                    fd = ahead.take(k)
                    digest, entry, n, size = self._put_file(paths[k], sizes[k], want, fd)
                    digests.append(digest)
                    read += size
                    if entry is not None:
                        staged.append(entry)
                        new_bytes += n
            self._drop_behind([entry[0] for entry in staged])
            return digests, staged, new_bytes, read

        total_read = 0

        def take(r: tuple[list[str], list[Staged], int, int]) -> list[str]:
            nonlocal total_read
            digests, staged, new_bytes, read = r
            self._adopt(staged, new_bytes)
            total_read += read
            if on_staged is not None and staged:
                on_staged(staged)
            return digests

        out = _digests_by_chunk(
            work, len(paths), take, report, jobs=jobs, meanwhile=meanwhile, on_chunk=on_chunk
        )
        return out, total_read

    def _put_file(
        self, path: str, size_hint: int, expect: str | None = None, fd: int | None = None
    ) -> tuple[str, Staged | None, int, int]:
        """The digest; what was staged (``(path, hex)``, or None) and its size; the file's
        size. ``fd``: the file opened already (``ReadAhead``), closed here. Touches no shared
        state: it runs in worker threads and processes alike."""
        if fd is None:
            try:
                fd = os.open(path, RD)
            except OSError as e:
                raise StorageError(f"cannot read {path}: {e.strerror}") from e
        try:
            data = read_small(fd, size_hint)
            if data is None:
                return self._stage_stream(fd, path, expect)
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror}") from e
        finally:
            os.close(fd)
        digest, staged = self._hash_and_stage(data, expect)
        return digest, staged, len(data) if staged is not None else 0, len(data)

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        """Stage ``data`` unless the store holds it; return its digest. With ``expect`` (a
        verified download), bytes hashing to anything else are not staged: the caller sees the
        digest they do hash to."""
        digest, staged = self._hash_and_stage(data, expect)
        if staged is not None:
            self._adopt([staged], len(data))
        return digest

    def _hash_and_stage(self, data: bytes, expect: str | None) -> tuple[str, Staged | None]:
        """The digest of ``data``, and what was staged: nothing if it is not ``expect`` (when
        given) or the store holds it already."""
        hexd = hash_hex(data)
        if (expect is not None and PREFIX + hexd != expect) or self._has(hexd):
            return PREFIX + hexd, None
        return PREFIX + hexd, self._stage(hexd, data)

    def _has(self, hexd: str) -> bool:
        shard, name = layout(hexd)
        if shard not in self._shards:
            return False
        try:
            os.stat(f"{self._files}/{shard}/{name}")
        except OSError:
            return False
        return True

    def _stage(self, hexd: str, data: bytes) -> Staged | None:
        shard, name = layout(hexd)
        path = f"{self._dir}/{shard}/{name}"
        try:
            try:
                fd = os.open(path, WR_NEW, READ_ONLY)
            except FileNotFoundError:
                # The shard's first object (threads and workers may race here: the folder
                # exists either way). The staging folder itself exists: __init__ made it.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(f"{self._dir}/{shard}")
                fd = os.open(path, WR_NEW, READ_ONLY)
        except FileExistsError:
            return None  # the same bytes, staged by this batch from another file
        except OSError as e:
            raise StorageError(f"cannot write to {self._tmp}: {e.strerror}") from e
        try:
            write_all(fd, data)
        except OSError as e:
            _remove_unfinished(fd, path)
            raise StorageError(f"cannot stage object {hexd[:12]}: {e.strerror}") from e
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return path, hexd, (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)

    def _stage_stream(
        self, fd: int, src: str, expect: str | None = None
    ) -> tuple[str, Staged | None, int, int]:
        os.lseek(fd, 0, os.SEEK_SET)
        hasher = Hasher()
        path = f"{self._dir}/stream-{os.urandom(8).hex()}"
        out = os.open(path, WR_NEW, READ_ONLY)
        try:
            while chunk := os.read(fd, CHUNK):
                hasher.update(chunk)
                write_all(out, chunk)
        except OSError as e:
            _remove_unfinished(out, path)
            raise StorageError(f"cannot store {src}: {e.strerror}") from e
        os.close(out)
        hexd = hasher.hexdigest()
        size = os.stat(path).st_size
        if self._has(hexd) or (expect is not None and PREFIX + hexd != expect):
            os.unlink(path)
            return PREFIX + hexd, None, 0, size
        return PREFIX + hexd, (path, hexd, None), size, size

    def _adopt(self, staged: list[Staged], n: int) -> None:
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
                try:
                    syncfs(self._sync_fd)
                except OSError as e:
                    # commit() refuses after this; flushing on changes nothing.
                    self._flush_error = self._flush_error or e
                    return
                struct.pack_into("q", self._flushes, 0, self._flushed() + 1)

    def _flushed(self) -> int:
        return int(struct.unpack_from("q", self._flushes)[0])

    def _drop_behind(self, paths: list[str]) -> None:
        """Drop-behind: an add writes tens of thousands of objects that nothing reads soon, so
        once a background flush that began after they were staged has completed (two flushes
        later: the one running meanwhile may have started before), their pages leave the page
        cache (``POSIX_FADV_DONTNEED``), as ``dd oflag=nocache`` or a database's bulk-write
        ring does. An add then holds a few tenths of a second of the store's pages, not a
        second copy of the dataset beside the user's tree, and writes into the pages it just
        freed. Only pages change: durability is the barrier's. Where the kernel keeps a page
        (still dirty, or not dropped at all) nothing is lost but memory."""
        if _DROP is None:
            return
        with self._behind_lock:
            self._behind.append((self._flushed(), paths))
            ready: list[str] = []
            done = self._flushed()
            while self._behind and self._behind[0][0] + 2 <= done:
                ready.extend(self._behind.popleft()[1])
        for path in ready:
            try:
                fd = os.open(path, RD)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, _DROP)
            except OSError:
                pass
            finally:
                os.close(fd)

    def _stop_flusher(self) -> None:
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        # Ready for more: a batch may be committed in waves.
        self._flusher = None
        self._stop = threading.Event()
        self._unflushed = 0
        with self._behind_lock:
            self._behind.clear()

    def commit(self) -> int:
        """Make the staged objects durable and install them; return how many were new."""
        self._stop_flusher()
        staged, self._staged = self._staged, []
        self._installed = {}
        if not staged:
            return 0
        try:
            if self._flush_error is not None:
                raise self._flush_error
            syncfs(self._sync_fd)
            os.makedirs(self._files, exist_ok=True)
            installed: dict[str, Stat | None] = {}
            by_shard: dict[str, list[Staged]] = {}
            loose: list[Staged] = []  # streamed objects, staged outside the shards
            for entry in staged:
                if entry[0].startswith(self._dir + "/stream-"):
                    loose.append(entry)
                else:
                    by_shard.setdefault(layout(entry[1])[0], []).append(entry)
            for shard, items in by_shard.items():
                if rename_dir_if_absent(f"{self._dir}/{shard}", f"{self._files}/{shard}"):
                    # The next object staged in this shard (a batch may stage and commit
                    # again) makes its folder anew.
                    installed.update((h, st) for _p, h, st in items)
                else:
                    loose.extend(items)
            if loose:
                for shard in {layout(h)[0] for _p, h, _st in loose}:
                    os.makedirs(f"{self._files}/{shard}", exist_ok=True)
                with contextlib.closing(
                    map_chunks(
                        lambda lo, hi: self._install(loose[lo:hi]),
                        len(loose),
                        chunk=512,
                    )
                ) as results:
                    for _lo, moved in results:
                        installed.update((h, None) for h in moved)
            syncfs(self._sync_fd)  # the same file system: the names are durable
            self._shards = frozenset(os.listdir(self._files))
        except OSError as e:
            self._staged = staged
            raise StorageError(f"cannot install objects into {self._files}: {e.strerror}") from e
        self._installed = installed
        return len(installed)

    def _install(self, chunk: list[Staged]) -> list[str]:
        moved = []
        for path, hexd, _st in chunk:
            shard, name = layout(hexd)
            if move_noreplace(path, f"{self._files}/{shard}/{name}"):
                moved.append(hexd)
        return moved

    def discard(self) -> None:
        """Remove the staging folder and whatever is still staged in it."""
        self._stop_flusher()
        self._staged = []
        shutil.rmtree(self._dir, ignore_errors=True)
        if self._sync_fd >= 0:
            os.close(self._sync_fd)
            self._sync_fd = -1


def _remove_unfinished(fd: int, path: str) -> None:
    """Close and remove a staged file whose writing failed, so that no partial object stays in
    the staging folder. Best effort: the write's error is what the caller reports."""
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(path)


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
