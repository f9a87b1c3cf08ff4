"""The staging batch behind ``dsreg add`` and fetches: what a user of the registry would notice."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dsreg.errors import StorageError
from dsreg.registry.maintenance import collect_garbage
from dsreg.registry.registry import Registry
from dsreg.registry.store import STAGE_PREFIX


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
    collect_garbage(reg)
    assert not stale.exists() and fresh.exists()
