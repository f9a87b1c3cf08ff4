"""Eight writers of every kind at once on one registry, with gc running meanwhile
(docs/concepts.md, "Guarantees").

Each round copies a prepared registry and starts, within a millisecond of each other: two adds
of the same tree to the same tag, an add of another tree (sharing payloads with the first),
three ``tag``s of three different revisions to one new name, an ``overlay import-votes`` and a
``detect`` (each tagging its overlay), and a ``gc --prune-log-older-than now`` that starts at a
random moment among them (so it has garbage to remove: a moved tag's old revision). Afterwards:

- every process ended by itself, with exit 0, or exit 1 and an ``Error:`` message (never a
  traceback or another status); exactly one of the racing tags won, the others were refused
  because the tag exists; no other writer was refused;
- ``dsreg verify`` passes; every reported success is visible: its tag names the reported
  revision, which opens with the expected rows;
- the log holds exactly one tag line per tag written (two adds of the same content to one tag
  write it once), and none for a refused tag.

``DSREG_CONCURRENT_ROUNDS`` sets the rounds (default 4).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg import Registry

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("DSREG_CONCURRENT_ROUNDS", "4"))
SEED = 808
REPO = Path(dsreg.__file__).resolve().parents[1]
N = 20_000  # rows of the label-only dataset
K = 5  # its classes

# Import dsreg, say so, wait for the go file (and a delay of our own), then run the command.
WAIT_THEN_RUN = (
    "import os, sys, time\n"
    "from dsreg.cli import main\n"
    "import numpy, pyarrow, pyarrow.parquet\n"
    "open(sys.argv[2], 'w').close()\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.0005)\n"
    "time.sleep(float(sys.argv[3]))\n"
    "main(sys.argv[4:])\n"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _dsreg(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from dsreg.cli import main; main(sys.argv[1:])", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc


def _tree(root: Path, members: range, rng: np.random.Generator) -> Path:
    for i in members:
        p = root / f"class{i % 4}" / f"f{i:05d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f"payload {i} ".encode() + rng.bytes(100 + i % 300))
    return root


def _votes(path: Path, labels: np.ndarray, rng: np.random.Generator, n: int) -> Path:
    records = []
    for i in sorted(int(v) for v in rng.choice(len(labels), n, replace=False)):
        given = int(labels[i])
        records.append(
            {
                "id": i,
                "given_original_label": given,
                "our_guessed_label": (given + 1) % K,
                "mturk": {"given": int(rng.integers(0, 6)), "guessed": int(rng.integers(0, 6))},
            }
        )
    path.write_text(json.dumps(records))
    return path


def _probs(path: Path, labels: np.ndarray, rng: np.random.Generator) -> Path:
    raw = rng.random((len(labels), K)) + np.eye(K)[labels] * 1.5
    np.save(path, raw / raw.sum(axis=1, keepdims=True))
    return path


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A registry holding lab@original, lab@validated, lab@detected and a moved tag (garbage
    for gc), and the inputs of the writers."""
    base = tmp_path_factory.mktemp("concurrent")
    rng = np.random.default_rng(SEED)
    labels = rng.integers(0, K, N)
    np.save(base / "labels.npy", labels)
    inp = {
        "base": base,
        "labels": base / "labels.npy",
        "votes_a": _votes(base / "votes_a.json", labels, rng, 300),
        "votes_b": _votes(base / "votes_b.json", labels, rng, 500),
        "probs_a": _probs(base / "probs_a.npy", labels, rng),
        "probs_b": _probs(base / "probs_b.npy", labels, rng),
        "tree_a": _tree(base / "tree_a", range(0, 600), rng),
        "tree_b": _tree(base / "tree_b", range(300, 900), rng),
        "old_1": _tree(base / "old_1", range(1000, 1400), rng),
        "old_2": _tree(base / "old_2", range(1400, 1410), rng),
    }
    home = base / "home"
    home.mkdir()
    steps = [
        ("init",),
        ("add", "lab", "--labels", str(inp["labels"]), "--tag", "original"),
        ("overlay", "import-votes", "lab@original", str(inp["votes_a"]), "--tag", "validated"),
        ("detect", "lab@original", "--pred-probs", str(inp["probs_a"]), "--tag", "detected"),
        ("add", "old", str(inp["old_1"]), "--tag", "t"),
        ("add", "old", str(inp["old_2"]), "--tag", "t", "--force"),
    ]
    for step in steps:
        res = _dsreg(*step, cwd=home)
        assert res.returncode == 0, (step, res.stderr)
    inp["registry"] = home / ".dsreg"
    return inp


@dataclass(frozen=True)
class Writer:
    name: str
    args: tuple[str, ...]
    tag: tuple[str, str] | None  # the tag it writes when it succeeds
    rows: int | None  # rows of the tagged revision


def _writers(inp: dict[str, Path]) -> list[Writer]:
    return [
        Writer(
            "add-a1", ("add", "x", str(inp["tree_a"]), "--tag", "a1", "--json"), ("x", "a1"), 600
        ),
        Writer(
            "add-a1-again",
            ("add", "x", str(inp["tree_a"]), "--tag", "a1", "--json"),
            ("x", "a1"),
            600,
        ),
        Writer("add-b", ("add", "y", str(inp["tree_b"]), "--tag", "b", "--json"), ("y", "b"), 600),
        Writer("tag-original", ("tag", "lab@race", "lab@original", "--json"), ("lab", "race"), N),
        Writer(
            "tag-validated", ("tag", "lab@race", "lab@validated", "--json"), ("lab", "race"), None
        ),
        Writer(
            "tag-detected", ("tag", "lab@race", "lab@detected", "--json"), ("lab", "race"), None
        ),
        Writer(
            "import-votes",
            (
                "overlay",
                "import-votes",
                "lab@original",
                str(inp["votes_b"]),
                "--tag",
                "votes2",
                "--json",
            ),
            ("lab", "votes2"),
            None,
        ),
        Writer(
            "detect",
            (
                "detect",
                "lab@original",
                "--pred-probs",
                str(inp["probs_b"]),
                "--tag",
                "det2",
                "--json",
            ),
            ("lab", "det2"),
            None,
        ),
        Writer("gc", ("gc", "--prune-log-older-than", "now", "--json"), None, None),
    ]


RACE = ("tag-original", "tag-validated", "tag-detected")


def _tag_lines(reg: Path, since: dict[str, int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each dataset's tag lines (after its first ``since[dataset]`` ones)."""
    out = {}
    for log in sorted((reg / "logs").glob("*.jsonl")):
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        tags = [e for e in lines if e.get("event") == "tag"]
        out[log.stem] = tags[(since or {}).get(log.stem, 0) :]
    return out


def _round(inp: dict[str, Path], where: Path, rng: random.Random) -> dict[str, int]:
    home = where / "home"
    shutil.copytree(inp["registry"].parent, home, symlinks=True)
    reg = home / ".dsreg"
    before = _tag_lines(reg)
    writers = _writers(inp)
    go = where / "go"
    procs = []
    for w in writers:
        delay = rng.uniform(0.0, 1.5) if w.name == "gc" else rng.uniform(0.0, 0.02)
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WAIT_THEN_RUN,
                    str(go),
                    str(where / f"ready-{w.name}"),
                    f"{delay:.4f}",
                    *w.args,
                ],
                cwd=home,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    try:
        deadline = time.monotonic() + 240
        while not all((where / f"ready-{w.name}").exists() for w in writers):
            assert time.monotonic() < deadline, "the writers never became ready"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.005)
        go.touch()
        results = {
            w.name: (p, *p.communicate(timeout=300)) for w, p in zip(writers, procs, strict=True)
        }
    finally:
        for p in procs:  # only on failure: every writer must end by itself
            if p.poll() is None:
                p.kill()
                p.communicate()

    # Every exit is 0, or 1 with a clear message.
    for name, (p, _, err) in results.items():
        assert "Traceback" not in err, (name, err)
        assert p.returncode in (0, 1), (name, p.returncode, err)
        if p.returncode == 1:
            assert err.startswith("Error: "), (name, err)
    won = [n for n in RACE if results[n][0].returncode == 0]
    assert len(won) == 1, {n: results[n][2] for n in RACE}
    for n in RACE:
        if n not in won:
            assert "lab@race exists" in results[n][2], results[n][2]
    for w in writers:
        if w.name not in RACE:
            assert results[w.name][0].returncode == 0, (w.name, results[w.name][2])

    check = _dsreg("verify", "--json", cwd=home)
    assert check.returncode == 0, check.stdout + check.stderr
    registry = Registry(reg)

    # Every reported success is visible: its tag names what it reported, and opens.
    tags = {(t.dataset, t.tag): t.revision for t in dsreg.ls(registry=registry)}
    written: dict[tuple[str, str], str] = {}
    for w in writers:
        p, out, _ = results[w.name]
        if p.returncode != 0 or w.tag is None:
            continue
        res = json.loads(out)
        revision = res.get("tagged") or res["revision"]
        assert tags.get(w.tag) == revision, (w.name, w.tag, tags.get(w.tag), revision)
        assert written.setdefault(w.tag, revision) == revision, w.name
        opened = dsreg.open(f"{w.tag[0]}@{w.tag[1]}", registry=registry)
        assert opened.digest == revision
        if w.rows is not None:
            assert len(opened) == w.rows, w.name
        else:
            assert 0 < len(opened) <= N, w.name
    # The untouched tags are still there, and open.
    for spec in ("lab@original", "lab@validated", "lab@detected", "old@t"):
        dsreg.open(spec, registry=registry).labels()

    # One log line per tag written, none for a refusal.
    new = _tag_lines(reg, {ds: len(lines) for ds, lines in before.items()})
    by_tag: dict[tuple[str, str], list[str]] = {}
    for e in (e for lines in new.values() for e in lines):
        by_tag.setdefault((e["dataset"], e["tag"]), []).append(e["new"])
    assert by_tag == {t: [rev] for t, rev in written.items()}, by_tag
    # gc removed the moved tag's old tree (400 payloads), and nothing anyone reported.
    removed = json.loads(results["gc"][1])["removed"]
    assert len(removed) >= 400, removed
    assert not set(removed) & set(written.values())
    shutil.rmtree(where)
    return {"race_won_by": RACE.index(won[0]), "gc_removed": len(removed)}


def test_eight_writers_of_every_kind_and_gc_at_once(
    pristine: dict[str, Path], tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    winners, removed = [], []
    for r in range(ROUNDS):
        where = tmp_path / f"round{r}"
        where.mkdir()
        stats = _round(pristine, where, rng)
        winners.append(RACE[stats["race_won_by"]])
        removed.append(stats["gc_removed"])
    print(
        f"\nconcurrent writers: {ROUNDS} rounds of {len(_writers(pristine))} processes; "
        f"the tag race won by {winners}; gc removed {removed} objects"
    )
