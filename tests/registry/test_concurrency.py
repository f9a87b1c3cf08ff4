"""Processes at once: concurrent adds, and an add killed half-way (SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dsreg
from dsreg import Registry

Run = Callable[..., subprocess.CompletedProcess[str]]
Env = Callable[[], dict[str, str]]

# Import dsreg, say so, wait for the go file, then run the command line: the processes start
# their adds within a millisecond of each other.
WAIT_THEN_RUN = (
    "import os, sys, time\n"
    "from dsreg.cli import main\n"
    "open(sys.argv[2], 'w').close()\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.0005)\n"
    "main(sys.argv[3:])\n"
)


def _payload(i: int) -> bytes:
    return (f"payload {i} ".encode() * 64)[: 200 + (i * 37) % 900]


def _tree(root: Path, members: list[int]) -> Path:
    for i in members:
        p = root / f"class{i % 4}" / f"file{i:04d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_payload(i))
    return root


def test_four_processes_adding_overlapping_trees_at_once(
    tmp_path: Path, run_dsreg: Run, dsreg_env: Env
) -> None:
    assert run_dsreg("init", cwd=tmp_path).returncode == 0
    common = list(range(300))
    trees = [
        _tree(tmp_path / f"tree{k}", common + list(range(300 + 40 * k, 340 + 40 * k)))
        for k in range(3)
    ]
    trees.append(trees[0])  # the same tree twice: the very same objects, written at once
    targets = [("shared", "t0"), ("shared", "t1"), ("second", "original"), ("third", "original")]
    go = tmp_path / "go"
    procs = []
    for k, (tree, (ds, tag)) in enumerate(zip(trees, targets, strict=True)):
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WAIT_THEN_RUN, str(go), str(tmp_path / f"ready{k}"),
                 "add", ds, str(tree), "--tag", tag, "--json"],
                cwd=tmp_path, env=dsreg_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True,
            )
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{k}").exists() for k in range(4)):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    added = [json.loads(out) for out, _ in results]

    check = run_dsreg("verify", "--json", cwd=tmp_path)
    assert check.returncode == 0, check.stdout
    assert json.loads(check.stdout)["ok"]
    reg = Registry(tmp_path / ".dsreg")
    for (ds, tag), tree, res in zip(targets, trees, added, strict=True):
        opened = dsreg.open(f"{ds}@{tag}", registry=reg)
        assert opened.digest == res["revision"]
        assert {e.example_id: e.read_bytes() for e in opened} == {
            p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*.bin")
        }
    # Every payload once: 420 distinct files, whoever wrote it first.
    blobs = {d for d in reg.store if not reg.is_manifest(d)}
    assert len(blobs) == 420 + 3  # payloads + one examples table per distinct tree
    # Both tags of 'shared' are logged, none lost to the other's append.
    assert sorted(e.tag for e in dsreg.log("shared", registry=reg)) == ["t0", "t1"]


def _count_files(d: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(d)) if d.is_dir() else 0


def test_an_add_killed_half_way_leaves_no_partial_object_or_ref(
    tmp_path: Path, run_dsreg: Run, dsreg_env: Env
) -> None:
    assert run_dsreg("init", cwd=tmp_path).returncode == 0
    tree = tmp_path / "big"
    for c in range(6):
        (tree / f"c{c}").mkdir(parents=True)
        for i in range(350):
            (tree / f"c{c}" / f"{i}.bin").write_bytes(os.urandom(4096))
    reg_root = tmp_path / ".dsreg"
    proc = subprocess.Popen(
        [sys.executable, "-c", WAIT_THEN_RUN, str(tmp_path / "go"), str(tmp_path / "ready"),
         "add", "big", str(tree), "--tag", "original"],
        cwd=tmp_path, env=dsreg_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline
            time.sleep(0.005)
        (tmp_path / "go").touch()
        # Kill once a few hundred objects are in place: the add is well under way.
        while _count_files(reg_root / "files") < 300:
            assert proc.poll() is None, "the add finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    stored = _count_files(reg_root / "files")
    assert 300 <= stored < 2100 + 3
    # No ref, no log line: the dataset does not exist for anyone.
    assert not (reg_root / "refs" / "big").exists()
    ls = run_dsreg("ls", "--json", cwd=tmp_path)
    assert json.loads(ls.stdout) == []
    # Every object in the store is whole: each hashes to its name.
    check = run_dsreg("verify", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr

    again = run_dsreg("add", "big", str(tree), "--tag", "original", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows"] == 2100
    assert run_dsreg("verify", cwd=tmp_path).returncode == 0
    ds = dsreg.open("big@original", registry=reg_root)
    for i in range(0, 2100, 97):
        assert ds[i].read_bytes() == (tree / ds[i].example_id).read_bytes()


def test_gc_during_an_add_never_removes_what_the_add_is_about_to_tag(
    tmp_path: Path, run_dsreg: Run, dsreg_env: Env
) -> None:
    assert run_dsreg("init", cwd=tmp_path).returncode == 0
    tree = _tree(tmp_path / "tree", list(range(1200)))
    reg = Registry(tmp_path / ".dsreg")
    proc = subprocess.Popen(
        [sys.executable, "-c", WAIT_THEN_RUN, str(tmp_path / "go"), str(tmp_path / "ready"),
         "add", "ds", str(tree), "--tag", "original"],
        cwd=tmp_path, env=dsreg_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline
        time.sleep(0.005)
    (tmp_path / "go").touch()
    while _count_files(reg.root / "files") < 50:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    # Objects are in the store, no ref reaches them yet: gc must wait for the add, not take them.
    while proc.poll() is None:
        dsreg.gc(registry=reg)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    dsreg.gc(registry=reg)
    ds = dsreg.open("ds@original", registry=reg)
    assert {e.example_id: e.read_bytes() for e in ds} == {
        p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*.bin")
    }
