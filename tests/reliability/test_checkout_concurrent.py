"""Two checkouts of one folder at once (the guarantee "A checkout folder holds
exactly one revision's view" in docs/concepts.md).

Two processes check out different revisions (with different link types) into the same new
folder, released together by a barrier, round after round. Each folder must end as exactly one
of the two views, with the pin naming that one, and no journal: the folder is created, then
locked, and everything that reads it (pin, journal, files) is read under the lock.
``DSREG_CHECKOUT_RACE_ROUNDS`` sets the rounds (default 16).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dsreg
from dsreg.ops.checkout.apply import JOURNAL, PIN
from dsreg.registry.reader import LocalReader

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("DSREG_CHECKOUT_RACE_ROUNDS", "16"))
REPO = Path(dsreg.__file__).resolve().parents[1]
WORKER = """
import sys, time
from pathlib import Path
import dsreg
from dsreg.ops.checkout.apply import checkout
from dsreg.registry.reader import LocalReader
root, spec, me, other, rounds, link = sys.argv[1:7]
reg = dsreg.Registry.find(Path(root) / "reg")
resolved = LocalReader(reg).revision(spec)
sync = Path(root) / "sync"
for k in range(int(rounds)):
    (sync / f"{k}-{me}").touch()
    while not (sync / f"{k}-{other}").exists():
        time.sleep(0.0005)
    checkout(resolved, Path(root) / f"round-{k}", link=link)
"""


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.name != PIN and (p.is_file() or p.is_symlink())
    }


def test_two_checkouts_into_one_new_folder_leave_exactly_one_view(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    views = {}
    tags = {}
    for tag in ("a", "b"):
        tree = tmp_path / f"tree-{tag}"
        for i in range(300):
            # The same paths in both (and a few of each's own), different bytes in half.
            name = f"c{i % 5}/{i}{'-' + tag if i % 50 == 0 else ''}.bin"
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(f"{tag if i % 2 else 'same'} {i}".encode())
        dsreg.add("ds", tree, tag=tag, registry=reg)
        views[LocalReader(reg).revision(f"ds@{tag}").digest] = files_of(tree)
        tags[LocalReader(reg).revision(f"ds@{tag}").digest] = tag
    (tmp_path / "sync").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), spec, me, other, str(ROUNDS), link],
            env=env,
        )
        for spec, me, other, link in (("ds@a", "1", "2", "copy"), ("ds@b", "2", "1", "hardlink"))
    ]
    for w in workers:
        assert w.wait(timeout=300) == 0
    won = []
    for k in range(ROUNDS):
        folder = tmp_path / f"round-{k}"
        pin = json.loads((folder / PIN).read_text())
        assert pin["revision"] in views
        assert files_of(folder) == views[pin["revision"]], k
        assert not (folder / JOURNAL).exists()
        won.append(tags[pin["revision"]])
    print(f"{ROUNDS} rounds; ended as ds@a in {won.count('a')}, as ds@b in {won.count('b')}")
