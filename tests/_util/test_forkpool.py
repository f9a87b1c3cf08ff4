"""Worker processes for many small files: same results as one process, failures surface whole."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dsreg
from dsreg import CorruptObjectError, InputPathError, StorageError
from dsreg._util import parallel as forkpool
from dsreg._util.parallel import fork_map, map_chunks

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are used on Linux only"
)


def _children() -> set[int]:
    """The processes whose parent is this one, running or exited and not yet reaped (Linux)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return found


@pytest.fixture(autouse=True)
def _earlier_children() -> Iterator[None]:
    """The children other tests left running (a loader's workers, say): not this pool's."""
    global _BEFORE
    _BEFORE = _children()
    yield


_BEFORE: set[int] = set()


def _no_children_left() -> bool:
    """Every worker the pool started is reaped: no child but those the test began with."""
    return not (_children() - _BEFORE)


def test_every_task_runs_once_in_a_worker_and_comes_back() -> None:
    parent = os.getpid()
    got = dict(fork_map(lambda k: (k * k, os.getpid()), 300, jobs=2))
    assert sorted(got) == list(range(300))
    assert all(v[0] == k * k for k, v in got.items())
    pids = {v[1] for v in got.values()}
    assert parent not in pids and 1 <= len(pids) <= 2
    assert _no_children_left()


def test_chunks_cover_the_range_in_workers_and_in_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    def work(lo: int, hi: int) -> list[int]:
        return list(range(lo, hi))

    monkeypatch.setattr(forkpool, "FORK_MIN", 1)
    forked = sorted(x for _lo, part in map_chunks(work, 1000, chunk=7) for x in part)
    monkeypatch.setenv("DSREG_JOBS", "1")
    threaded = sorted(x for _lo, part in map_chunks(work, 1000, chunk=7) for x in part)
    assert forked == threaded == list(range(1000))


def test_a_failing_task_raises_its_error_and_stops_every_worker() -> None:
    def task(k: int) -> int:
        if k == 57:
            raise InputPathError("file 57 is unsafe; rename it")
        return k

    with pytest.raises(InputPathError, match="file 57 is unsafe"):
        for _ in fork_map(task, 200, jobs=2):
            pass
    assert _no_children_left()


def test_an_error_that_cannot_travel_is_described() -> None:
    class Odd(Exception):
        def __init__(self, a: int, b: int) -> None:  # not picklable from its args
            super().__init__(f"{a}/{b}")

    def task(k: int) -> int:
        raise Odd(1, 2)

    with pytest.raises(StorageError, match="a worker process failed: Odd: 1/2"):
        list(fork_map(task, 4, jobs=2))
    assert _no_children_left()


def test_a_worker_killed_mid_way_is_an_error_not_a_short_answer() -> None:
    def task(k: int) -> int:
        if k == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        return k

    with pytest.raises(StorageError, match=r"worker process ended early .*run the command again"):
        list(fork_map(task, 40, jobs=2))
    assert _no_children_left()


@pytest.fixture
def many(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file operation of a size worth workers goes to workers, however small the test."""
    monkeypatch.setattr(forkpool, "FORK_MIN", 1)


def test_add_and_checkout_in_workers_match_one_process(
    many: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    make_imagefolder: Callable[..., Path],
) -> None:
    tree = make_imagefolder(classes=4, per_class=40)
    # A duplicate across classes: two workers may stage the same object at once.
    (tree / "class3" / "dup.bin").write_bytes((tree / "class0" / "img000.bin").read_bytes())
    forked_reg = dsreg.init(registry=tmp_path / "forked")
    forked = dsreg.add("ds", tree, tag="v1", registry=forked_reg)
    monkeypatch.setenv("DSREG_JOBS", "1")
    single_reg = dsreg.init(registry=tmp_path / "single")
    single = dsreg.add("ds", tree, tag="v1", registry=single_reg)
    monkeypatch.delenv("DSREG_JOBS")
    assert forked.revision == single.revision and forked.new_objects == single.new_objects == 160
    assert set(forked_reg.store) == set(single_reg.store)
    assert dsreg.verify(registry=forked_reg).ok

    out = tmp_path / "out"
    res = dsreg.checkout("ds@v1", out, link="hardlink", registry=forked_reg)
    assert res.files == 161
    for rel in ("class0/img000.bin", "class3/dup.bin", "class2/img039.bin"):
        assert (out / rel).read_bytes() == (tree / rel).read_bytes()


def test_a_corrupt_object_found_by_a_worker_is_refused(
    many: None,
    tmp_path: Path,
    make_imagefolder: Callable[..., Path],
    flip_byte: Callable[..., None],
) -> None:
    tree = make_imagefolder(classes=2, per_class=30)
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("ds", tree, tag="v1", registry=reg)
    blob = dsreg.open("ds@v1", registry=reg)[17].blob
    assert blob is not None
    flip_byte(reg, blob, at=0)
    out = tmp_path / "out"
    with pytest.raises(CorruptObjectError, match="is corrupt; it was not checked out"):
        dsreg.checkout("ds@v1", out, link="hardlink", registry=reg)
    assert not any(out.rglob("*.bin"))  # refused before the folder was touched
    assert _no_children_left()


def test_a_push_to_a_folder_in_workers_publishes_every_object_and_no_damaged_one(
    many: None, tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> None:
    tree = make_imagefolder(classes=3, per_class=40)
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("ds", tree, tag="v1", registry=reg)
    dsreg.remote_add("origin", str(tmp_path / "remote"), default=True, registry=reg)
    sent = dsreg.push(registry=reg)
    assert sent.sent == 120 + 3  # payloads, examples table, snapshot, revision
    assert (
        sent.bytes
        == sum(f.stat().st_size for f in tree.rglob("*.bin"))
        + sum(reg.store.path(d).stat().st_size for d in reg.store if reg.is_manifest(d))
        + reg.store.path(dsreg.open("ds@v1", registry=reg).snapshot.examples).stat().st_size
    )

    lab = dsreg.init(registry=tmp_path / "lab")
    dsreg.remote_add("origin", str(tmp_path / "remote"), default=True, registry=lab)
    dsreg.pull(["ds@v1"], registry=lab)
    ds = dsreg.open("ds@v1", registry=lab)
    for i in range(0, 120, 7):
        assert ds[i].read_bytes() == (tree / ds[i].example_id).read_bytes()

    # A damaged local object is refused, never published under its name.
    tree2 = make_imagefolder("tree2", classes=3, per_class=40, seed=5)
    dsreg.add("ds", tree2, tag="v2", registry=reg)
    blob = dsreg.open("ds@v2", registry=reg)[33].blob
    assert blob is not None
    p = reg.store.path(blob)
    os.chmod(p, 0o644)
    p.write_bytes(b"not what it was")
    with pytest.raises(CorruptObjectError, match=blob.removeprefix("blake3:")[:12]):
        dsreg.push(["ds@v2"], registry=reg)
    remote_obj = tmp_path / "remote" / "files" / "blake3" / blob[7:9] / blob[9:]
    assert not remote_obj.exists()
    assert _no_children_left()


def test_a_lazy_clone_checks_out_in_workers_fetching_what_it_lacks(
    many: None, tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> None:
    tree = make_imagefolder(classes=3, per_class=30)
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("ds", tree, tag="v1", registry=reg)
    dsreg.remote_add("origin", str(tmp_path / "remote"), default=True, registry=reg)
    dsreg.push(registry=reg)
    dsreg.clone(str(tmp_path / "remote"), tmp_path / "lab")
    out = tmp_path / "out"
    res = dsreg.checkout("ds@v1", out, link="hardlink", registry=tmp_path / "lab")
    assert res.files == 90
    got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.bin")}
    assert got == {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*.bin")}
    assert _no_children_left()
