"""kill -9 at a random moment of a checkout switch (the guarantee "A checkout
folder holds exactly one revision's view" in docs/concepts.md).

A switch of a few thousand small files (every one replaced, so the work runs in forked
workers) is started in a fresh process and killed with SIGKILL at a moment drawn from a seeded
generator, once it has begun to touch the folder (its journal exists). Then a checkout of
another revision runs here: the folder must hold exactly that revision's view, its pin, no
journal and no temporary file. ``DSREG_CHECKOUT_KILL_ROUNDS`` sets the rounds (default 3).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg.ops.checkout.apply import JOURNAL, PIN, checkout
from dsreg.overlays.write import corrections_table, write_overlay
from dsreg.registry.reader import LocalReader

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("DSREG_CHECKOUT_KILL_ROUNDS", "3"))
SEED = 1111
REPO = Path(dsreg.__file__).resolve().parents[1]
FILES = 2200
# The child imports what checkout needs and says so; the kill lands in the checkout's own work.
CHILD = """
import sys
import dsreg
from dsreg.ops.checkout.apply import checkout
from dsreg.registry.reader import LocalReader
reg = dsreg.Registry.find(sys.argv[1])
resolved = LocalReader(reg).revision(sys.argv[2])
print("ready", flush=True)
checkout(resolved, __import__("pathlib").Path(sys.argv[3]), link=sys.argv[4])
"""


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.name != PIN and (p.is_file() or p.is_symlink())
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """ds@a and ds@b: the same paths (but a few) with different bytes in every file; and
    ds@a-corrected, where 300 files of a move to another class."""
    tmp = tmp_path_factory.mktemp("kill")
    reg = dsreg.init(registry=tmp / "reg")
    for tag in ("a", "b"):
        for i in range(FILES):
            p = tmp / tag / f"c{i % 8}" / f"{i}{'-b' if tag == 'b' and i % 97 == 0 else ''}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f"{tag} {i} ".encode() * 3)
        dsreg.add("ds", tmp / tag, tag=tag, registry=reg)
    ds = dsreg.open("ds@a", registry=reg)
    rows = np.arange(0, 300 * 7, 7)
    table = corrections_table(
        rows=rows,
        example_ids=[ds[int(r)].example_id for r in rows],
        given_label=np.array([ds[int(r)].label for r in rows]),
        suggested_label=np.array([(ds[int(r)].label + 3) % 8 for r in rows]),
        verdict=["suspected"] * len(rows),
        score=np.full(len(rows), 0.01),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    snap = LocalReader(reg).revision("ds@a").revision.snapshot
    ov = write_overlay(reg, base=snap, kind="detected", table=table, producer=producer)
    dsreg.tag("ds@a-corrected", "ds@a", overlays=[ov], view="corrected", registry=reg)
    corrected = tmp / "view-corrected"
    checkout(LocalReader(reg).revision("ds@a-corrected"), corrected, link="symlink")
    views = {
        "ds@a": files_of(tmp / "a"),
        "ds@b": files_of(tmp / "b"),
        "ds@a-corrected": files_of(corrected),
    }
    yield {"tmp": tmp, "reg": reg, "views": views}


def test_a_switch_killed_at_a_random_moment_is_finished_by_the_next_checkout(
    world: dict[str, Any],
) -> None:
    reg = world["reg"]
    rng = random.Random(SEED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    landed = 0
    for k in range(ROUNDS):
        first, second = rng.sample(["ds@a", "ds@b", "ds@a-corrected"], 2)
        then = rng.choice(["ds@a", "ds@b", "ds@a-corrected"])
        links = [rng.choice(["hardlink", "copy", "reflink", "symlink"]) for _ in range(3)]
        target = world["tmp"] / f"round-{k}"
        shutil.rmtree(target, ignore_errors=True)
        checkout(LocalReader(reg).revision(first), target, link=links[0])  # type: ignore[arg-type]
        with subprocess.Popen(
            [sys.executable, "-c", CHILD, str(reg.root), second, str(target), links[1]],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
            deadline = time.monotonic() + 30
            while not (target / JOURNAL).exists() and child.poll() is None:
                assert time.monotonic() < deadline, "the switch never began"
                time.sleep(0.001)
            time.sleep(rng.uniform(0, 0.5))
            if child.poll() is None:
                landed += 1
            # Popen.kill signals only a child not reaped yet: one that finished in the sleep
            # was reaped by poll(), and os.kill on its pid raised ProcessLookupError.
            child.kill()
            child.wait()
        checkout(LocalReader(reg).revision(then), target, link=links[2])  # type: ignore[arg-type]
        assert files_of(target) == world["views"][then], (k, first, second, then, links)
        pin = json.loads((target / PIN).read_text())
        assert pin["revision"] == LocalReader(reg).revision(then).digest
        assert not (target / JOURNAL).exists()
        assert not [p for p in target.rglob(".dsreg-*")]
    print(f"{ROUNDS} rounds, {landed} kills landed during the switch")
    assert landed > 0
