"""gc racing a fetch (``pull``, ``pull SPEC``, ``dsreg.open(remote=)``, ``clone``): what a fetch
brought is unreachable until its tags are written, so gc must not run in between. The fetch holds
the registry's lock from before it looks at what is missing until its tags are written; gc takes
it exclusive and waits (docs/concepts.md, "Guarantees"). Checked two ways: gc started at every
point of a fetch (each call that downloads objects, hypothesis choosing which), and a gc process
looping over registries while fetches run, many times."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import reachable
from dsreg.registry.refs import RefStore
from dsreg.remote import fetch as fetching

REPO = Path(dsreg.__file__).resolve().parents[1]
OPS = ("pull", "pull-spec", "open", "clone")


def _tree(root: Path, key: str, classes: int, per_class: int) -> Path:
    for c in range(classes):
        for i in range(per_class):
            p = root / f"c{c}" / f"{i:03d}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(hashlib.sha256(f"{key}/{c}/{i}".encode()).digest() * (1 + i % 5))
    return root


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder remote with pets@v1, pets@fixed (an overlay: more waves to fetch) and cars@v1:
    42 payloads fetched in a staging batch, 6 fetched one by one."""
    import numpy as np

    from dsreg.overlays.write import corrections_table, write_overlay

    tmp = tmp_path_factory.mktemp("gc-race")
    reg = Registry.init(tmp / "source")
    res = dsreg.add("pets", _tree(tmp / "pets", "pets", 3, 14), tag="v1", registry=reg)
    dsreg.add("cars", _tree(tmp / "cars", "cars", 2, 3), tag="v1", registry=reg)
    table = corrections_table(
        rows=np.array([1]),
        example_ids=["c0/001.bin"],
        given_label=np.array([0]),
        suggested_label=np.array([2]),
        verdict=["suspected"],
        score=np.array([0.01]),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)
    dsreg.tag("pets@fixed", "pets@v1", overlays=[ov], view="corrected", registry=reg)
    dsreg.push(remote=str(tmp / "remote"), registry=reg)
    return tmp / "remote"


def _run(op: str, remote: Path, root: Path) -> None:
    """One fetch into the registry at ``root`` (which ``clone`` creates)."""
    if op == "clone":
        dsreg.clone(str(remote), root)
        return
    Registry.init(root)
    if op == "pull":
        dsreg.pull(remote=str(remote), registry=root)
    elif op == "pull-spec":
        dsreg.pull(["pets@fixed"], remote=str(remote), registry=root)
    else:
        assert len(dsreg.open("pets@fixed", remote=str(remote), registry=root)) == 42


def _assert_whole(root: Path, *, payloads: bool) -> int:
    """Every local tag's revision is whole here (with payloads unless lazily cloned), and verify
    agrees; the number of tags."""
    reg = Registry(root)
    tags = list(reg.refs.all())
    assert tags
    for ds, tag, d in tags:
        seen, problems = reachable(reg, [d], tables=payloads)
        assert not problems, (ds, tag, problems)
        lost = reg.store.missing(seen)
        assert not lost, f"{ds}@{tag} names {len(lost)} missing objects"
    if payloads:
        assert dsreg.verify(registry=root).ok
    return len(tags)


@settings(
    max_examples=24,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(op=st.sampled_from(OPS), at=st.integers(0, 5), wait=st.sampled_from([0.0, 0.05, 0.3]))
def test_a_gc_started_at_any_point_of_a_fetch_removes_nothing_it_brought(
    remote: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    op: str,
    at: int,
    wait: float,
) -> None:
    root = tmp_path_factory.mktemp("fetch") / "reg"
    original = fetching.receive
    calls: list[int] = []
    gcs: list[threading.Thread] = []
    outcome: list[Any] = []

    def gc(reg_root: Path) -> None:
        try:
            outcome.append(dsreg.gc(registry=reg_root))
        except BaseException as e:  # reported below, not lost in the thread
            outcome.append(e)

    def fetch(rs: Any, digests: Any, sink: Any, scratch: Path, **kw: Any) -> Any:
        rep = original(rs, digests, sink, scratch, **kw)
        calls.append(len(digests))
        if len(calls) - 1 == at:
            # The downloads of this call are in (staged or stored); run gc now, in another
            # thread, and give it time to do harm before the fetch goes on.
            t = threading.Thread(target=gc, args=(Path(scratch).parent,))
            t.start()
            t.join(wait)
            gcs.append(t)
        return rep

    with monkeypatch.context() as m:
        m.setattr(fetching, "receive", fetch)
        _run(op, remote, root)
    for t in gcs:
        t.join(30)
        assert not t.is_alive(), "gc never got the lock after the fetch ended"
    assert all(not isinstance(o, BaseException) for o in outcome), outcome
    _assert_whole(root, payloads=op != "clone")


_GC_LOOP = """
import glob, os, sys
import dsreg
regs, stop = sys.argv[1], sys.argv[2]
runs = 0
while not os.path.exists(stop):
    for marker in sorted(glob.glob(os.path.join(regs, "*", "config.toml"))):
        try:
            dsreg.gc(registry=os.path.dirname(marker))
            runs += 1
        except DsregError as e:
            sys.stderr.write(f"gc failed: {e}\\n")
print(runs)
"""


@pytest.mark.slow
def test_fetches_racing_a_gc_process_end_whole(remote: Path, tmp_path: Path) -> None:
    """A gc process loops over every registry while this process fetches into new ones, each
    operation in turn, for a bounded time: no fetch fails, no tag names a missing object, gc
    never fails, and gc did run (the race was there to lose)."""
    regs = tmp_path / "regs"
    regs.mkdir()
    stop = tmp_path / "stop"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    gc = subprocess.Popen(
        [sys.executable, "-c", _GC_LOOP, str(regs), str(stop)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    done = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline or done < len(OPS):
            op = OPS[done % len(OPS)]
            root = regs / f"r{done:03d}"
            _run(op, remote, root)
            _assert_whole(root, payloads=op != "clone")
            done += 1
    finally:
        stop.touch()
        out, err = gc.communicate(timeout=60)
    assert gc.returncode == 0, err
    assert "gc failed" not in err, err
    assert int(out.strip()) > done, "gc hardly ran: the race was not exercised"


def test_a_pull_holds_the_lock_until_its_tags_are_written(
    remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism, directly: from the first download to the last tag written (downloads,
    the walk's reads between them, tag writes), an exclusive lock (gc's) cannot be taken."""
    import fcntl

    root = tmp_path / "reg"
    Registry.init(root)
    seen: list[bool] = []

    def exclusive_free() -> bool:
        fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    original_fetch = fetching.receive
    original_set = RefStore.set

    def fetch(*a: Any, **kw: Any) -> Any:
        seen.append(exclusive_free())
        return original_fetch(*a, **kw)

    def set_tag(self: Any, *a: Any, **kw: Any) -> Any:
        seen.append(exclusive_free())
        return original_set(self, *a, **kw)

    original_manifest = Registry.manifest

    def manifest(self: Registry, digest: str) -> Any:
        # The walk reads what a wave brought between two downloads.
        if self.root == root:
            seen.append(exclusive_free())
        return original_manifest(self, digest)

    monkeypatch.setattr(fetching, "receive", fetch)
    monkeypatch.setattr(RefStore, "set", set_tag)
    monkeypatch.setattr(Registry, "manifest", manifest)
    dsreg.pull(remote=str(remote), registry=root)
    assert len(seen) >= 6 and not any(seen), seen
    assert exclusive_free()  # and released at the end
