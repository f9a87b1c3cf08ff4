"""The staging batch behind ``dsreg add`` and fetches: what a user of the registry would notice."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import dsreg
from dsreg import Registry, StorageError
from dsreg.objects import batch as batch_mod
from dsreg.objects.batch import STAGE_PREFIX


def _stage_dirs(reg: Registry) -> list[str]:
    return [e for e in os.listdir(reg.store.tmp) if e.startswith(STAGE_PREFIX)]


def test_a_batch_committed_in_waves_stores_every_object(
    make_registry: Callable[..., Registry],
) -> None:
    # The first commit moves whole new shards into files/; later waves stage into the same
    # shards again (a fetch commits in waves).
    reg = make_registry()
    blobs = [os.urandom(64 + i) for i in range(600)]
    with reg.store.batch() as batch:
        first = [batch.put_bytes(b) for b in blobs[:300]]
        assert batch.commit() == 300
        second = [batch.put_bytes(b) for b in blobs[300:]]
        again = [batch.put_bytes(b) for b in blobs[:10]]
        assert batch.commit() == 300
    assert again == first[:10]
    for digest, data in zip(first + second, blobs, strict=True):
        assert reg.store.read_bytes(digest) == data
    assert _stage_dirs(reg) == []


def test_installed_objects_are_read_only_and_files_are_deduplicated(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a", "b", "c"):
        (src / name).write_bytes(b"the same bytes")
    (src / "d").write_bytes(b"other bytes")
    with reg.store.batch() as batch:
        digests = [batch.put_file(str(src / n)) for n in "abcd"]
        assert batch.commit() == 2
    assert len(set(digests)) == 2
    for d in set(digests):
        mode = reg.store.path(d).stat().st_mode
        assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def test_an_uncommitted_batch_leaves_nothing_behind(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    before = set(reg.store)
    with pytest.raises(StorageError), reg.store.batch() as batch:
        batch.put_bytes(b"staged, never committed")
        batch.put_file(str(tmp_path / "no-such-file"))
    assert set(reg.store) == before
    assert _stage_dirs(reg) == []


def test_gc_removes_a_stale_staging_folder_and_spares_a_fresh_one(
    make_registry: Callable[..., Registry],
) -> None:
    # What a killed add leaves: its staging folder, with objects never installed.
    reg = make_registry()
    stale, fresh = reg.store.tmp / f"{STAGE_PREFIX}1-old", reg.store.tmp / f"{STAGE_PREFIX}2-new"
    for d in (stale, fresh):
        (d / "ab").mkdir(parents=True)
        (d / "ab" / ("c" * 62)).write_bytes(b"staged")
    hours_ago = time.time() - 2 * 3600
    os.utime(stale, (hours_ago, hours_ago))
    dsreg.gc(registry=reg)
    assert not stale.exists() and fresh.exists()


def _resident_pages(path: Path) -> int:
    """How many of ``path``'s pages are in the page cache (``mincore`` over a mapping of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    libc.mmap.argtypes += [ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec)


def _drops_pages(folder: Path) -> bool:
    """Whether this file system lets written pages go once written back (tmpfs does not)."""
    probe = folder / "probe"
    probe.write_bytes(os.urandom(64 << 10))
    fd = os.open(probe, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    dropped = _resident_pages(probe) == 0
    probe.unlink()
    return dropped


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="drop-behind is Linux only")
@pytest.mark.parametrize("jobs", [1, 2])
def test_an_add_does_not_keep_a_second_copy_of_the_data_in_memory(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    jobs: int,
) -> None:
    # Drop-behind: once a background flush has written them, the store's pages leave the page
    # cache, so adding a dataset as large as memory does not evict the user's own working set.
    reg = make_registry()
    if not _drops_pages(reg.store.tmp):
        pytest.skip("this file system keeps written pages in memory (tmpfs?)")
    # Flush every millisecond, and let each chunk wait (up to 5 s) for the two flushes that make
    # the chunk before it droppable, so that the test does not depend on this machine's speed.
    monkeypatch.setattr(batch_mod, "_FLUSH_EVERY", 0.001)
    monkeypatch.setattr(batch_mod, "_FLUSH_BYTES", 0)
    real = batch_mod.ObjectBatch._drop_behind

    def paced(self: batch_mod.ObjectBatch, paths: list[str]) -> None:
        if self._behind:
            deadline = time.monotonic() + 5
            while self._flushed() < self._behind[-1][0] + 2 and time.monotonic() < deadline:
                time.sleep(0.001)
        real(self, paths)

    monkeypatch.setattr(batch_mod.ObjectBatch, "_drop_behind", paced)
    src = tmp_path / "src"
    src.mkdir()
    paths = []
    for i in range(2304):  # 18 chunks: enough for worker processes (forkpool.FORK_MIN)
        p = src / f"{i}.bin"
        p.write_bytes(os.urandom(12 << 10))
        paths.append(str(p))
    with reg.store.batch() as batch:
        batch._written(0)  # the flusher runs from the start (with no bytes to wait for)
        digests, read = batch.put_files(
            paths, [12 << 10] * len(paths), lambda done: None, jobs=jobs
        )
        assert batch.commit() == len(paths)
    assert read == len(paths) * (12 << 10)
    resident = [_resident_pages(reg.store.path(d)) for d in digests]
    # All but the last chunk each worker staged (its flushes come after it) are dropped.
    assert sum(1 for r in resident if r) <= jobs * 128
    for d, p in zip(digests, paths, strict=True):
        assert reg.store.read_bytes(d) == Path(p).read_bytes()


@pytest.mark.parametrize("where", ["barrier", "background flush"])
def test_a_write_back_error_aborts_the_batch_and_installs_nothing(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    # What syncfs reports when the disk fails to write staged bytes: in commit's barrier, or
    # in a background flush (after which the barrier itself succeeds: the error was reported
    # once, to that flush, and the batch must remember it).
    calls = 0

    def failing(fd: int) -> None:
        nonlocal calls
        calls += 1
        if where == "barrier" or calls == 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(batch_mod, "syncfs", failing)
    monkeypatch.setattr(batch_mod, "_FLUSH_EVERY", 0.001)
    monkeypatch.setattr(batch_mod, "_FLUSH_BYTES", 1)
    reg = make_registry()
    before = set(reg.store)
    src = tmp_path / "src"
    src.mkdir()
    paths = []
    for i in range(20):
        (src / f"{i}.bin").write_bytes(os.urandom(100 + i))
        paths.append(str(src / f"{i}.bin"))
    with pytest.raises(StorageError, match="Input/output error"), reg.store.batch() as b:
        b.put_files(paths, [100 + i for i in range(20)], lambda done: None, jobs=1)
        deadline = time.monotonic() + 5
        while where != "barrier" and calls == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        b.commit()
    assert calls >= 1
    assert set(reg.store) == before
    assert _stage_dirs(reg) == []


@pytest.mark.parametrize("workers", [False, True])
@pytest.mark.parametrize("window", [0, 1, 32])
def test_read_ahead_changes_no_digest_and_no_refusal(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workers: bool,
    window: int,
) -> None:
    """An add opens files ahead of the one it hashes (``_util.readahead``): however far ahead
    (none, one, 32), in threads or worker processes, the revision's digest and every object's
    bytes are the same."""
    import dsreg._util.parallel as parallel
    import dsreg._util.readahead as readahead

    monkeypatch.setattr(readahead, "WINDOW", window)
    if workers:
        monkeypatch.setattr(parallel, "FORK_MIN", 1)
        monkeypatch.setenv("DSREG_JOBS", "2")
    tree = tmp_path / "tree"
    for c in range(3):
        (tree / f"c{c}").mkdir(parents=True)
        for i in range(150):
            (tree / f"c{c}" / f"{i}.bin").write_bytes(bytes([c, i % 256]) * (50 + i))
    reg = make_registry()
    added = dsreg.add("ra", tree, tag="v1", registry=reg)
    # The digest of this tree with no read-ahead at all, in one process.
    monkeypatch.setattr(readahead, "WINDOW", 0)
    monkeypatch.setenv("DSREG_JOBS", "1")
    plain = dsreg.add("ra", tree, tag="v2", registry=make_registry())
    assert added.revision == plain.revision
    for e in dsreg.open("ra@v1", registry=reg):
        assert e.blob is not None
        assert reg.store.path(e.blob).read_bytes() == (tree / e.path).read_bytes()


def test_read_ahead_raises_a_low_descriptor_limit(tmp_path: Path) -> None:
    """With the common soft limit of 1,024 descriptors (or less), read-ahead would keep only a
    64th of it in flight per worker: it raises the soft limit towards the hard one first, for
    this process only, and keeps its full window."""
    import subprocess

    code = (
        "import resource\n"
        "from dsreg._util import readahead\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "w = readahead._window()\n"
        "now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]\n"
        "print(w, now, hard)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split()
    window, soft, hard = (int(x) for x in out)
    from dsreg._util import readahead

    if hard == -1 or hard >= 64 * readahead.WINDOW:
        assert (window, soft) == (readahead.WINDOW, 64 * readahead.WINDOW)
    else:  # a hard limit below what the window wants: as far as it goes
        assert soft == hard and window == min(readahead.WINDOW, hard // 64)
