"""``dsreg leaderboard --tasks`` against the plain numpy loop a user would write.

    python benchmarks/bench_multitask.py --workdir DIR            # 57 tasks x 100 models
    python benchmarks/bench_multitask.py --tasks 10 --models 20   # a quicker run

The set (generated once into ``--workdir``, reused while its parameters match): 57 label-only
tasks of 100 to 1,600 rows each (four classes, an MMLU-sized spread), each re-annotated by an
overlay that corrects 3% of its rows (tagged ``redux``), and 100 models recorded on every task
(``dsreg.record``: label predictions, each model right on 30-90% of the rows).

Measured: the whole command, ``dsreg leaderboard --tasks t00,...,t56 --resamples 1000 --json``,
in a fresh subprocess: it reads and checks 5,700 recorded results, scores each task's models on
its latest tag's original and corrected labels, and aggregates them (mean score, mean win rate,
Borda count), each with a bootstrap interval over items from 1,000 resamples of every task's
rows, plus the stability report. Target: under 10 s and 1 GB (the process tree's peak PSS).

The baseline is the loop a user writes with every task's correctness matrix already in memory
(reading and scoring the predictions is free for it): per resample and task, draw the task's
rows with replacement and count each model's correct rows, then the three aggregates. It runs a
few resamples and is extrapolated linearly (its iterations are identical); its point aggregates
(no resampling) must equal dsreg's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DSREG, PYTHON, REPO, TOOL_ENV, machine, mark_generated, measure, reused

sys.path.insert(0, str(REPO))

TARGET_SECONDS = 10.0
TARGET_MIB = 1000.0
VIEWS = ("original", "corrected")

# The user's loop, over the correctness matrices each task's views give (``{t}_{v}.npy``: a
# (models, rows) boolean matrix of the rows in the view).
BASELINE = r"""
import json, sys, time
import numpy as np
work, tasks, resamples, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
views = ("original", "corrected")

def aggregate(correct, rows):
    # correct: (tasks, models) counts; rows: (tasks,). Mean score, mean win rate, Borda.
    score = (correct / rows[:, None]).mean(axis=0)
    m = correct.shape[1]
    beat = (correct[:, :, None] > correct[:, None, :]).sum(axis=2)
    tied = (correct[:, :, None] == correct[:, None, :]).sum(axis=2) - 1
    points = beat + tied / 2
    return score, (points / (m - 1)).mean(axis=0), points.sum(axis=0)

out, rng = {}, np.random.default_rng(seed)
for v in views:
    mats = [np.load(f"{work}/matrices/{t:02d}_{v}.npy") for t in range(tasks)]
    counts = np.array([x.sum(axis=1) for x in mats])
    point = aggregate(counts, np.array([x.shape[1] for x in mats], float))
    t0 = time.perf_counter()
    for r in range(resamples):
        counts, rows = [], []
        for x in mats:
            idx = rng.integers(0, x.shape[1], x.shape[1])
            counts.append(x[:, idx].sum(axis=1))
            rows.append(len(idx))
        aggregate(np.array(counts), np.array(rows, float))
    out[v] = {"point": [a.tolist() for a in point], "loop": time.perf_counter() - t0}
print(json.dumps(out))
"""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, **TOOL_ENV}


def generate(work: Path, *, tasks: int, models: int, seed: int) -> None:
    """The registry with its tasks and recorded models, and the baseline's matrices; reused
    if the parameters match."""
    params = {"tasks": tasks, "models": models, "seed": seed}
    if reused(work, params):
        return
    (work / "matrices").mkdir()
    import pyarrow as pa
    import pyarrow.parquet as pq

    import dsreg
    from dsreg.formats.corrections import corrections_table
    from dsreg.overlays.write import write_overlay

    rng = np.random.default_rng(seed)
    reg = dsreg.init(registry=work / "reg")
    producer = {"name": "bench_multitask", "version": "1", "params": {}, "inputs": {}}
    sizes = np.linspace(100, 1600, tasks).astype(int)
    skills = 0.3 + 0.6 * np.arange(models) / max(1, models - 1)
    for t, n in enumerate(sizes):
        name = f"t{t:02d}"
        labels = rng.integers(0, 4, n).astype(np.int32)
        ids = [f"{name}-{i}" for i in range(n)]
        path = work / f"{name}.parquet"
        pq.write_table(pa.table({"example_id": ids, "label": labels}), path)
        snap = dsreg.add(name, table=path, classes=list("abcd"), tag="original",
                         registry=reg).snapshot  # fmt: skip
        rows = np.sort(rng.choice(n, max(1, n * 3 // 100), replace=False))
        sug = (labels[rows] + 1) % 4
        table = corrections_table(
            rows=rows, example_ids=[ids[r] for r in rows], given_label=labels[rows],
            suggested_label=sug, verdict=["correctable"] * len(rows),
        )  # fmt: skip
        ov = write_overlay(reg, base=snap, kind="validated", table=table, producer=producer)
        dsreg.tag(f"{name}@redux", f"{name}@original", overlays=[ov], view="corrected",
                  registry=reg)  # fmt: skip
        corrected = labels.copy()
        corrected[rows] = sug
        right = rng.random((models, n)) < (skills[:, None] + rng.normal(0, 0.05, (models, 1)))
        preds = np.where(right, labels, rng.integers(0, 4, (models, n))).astype(np.int32)
        for m in range(models):
            dsreg.record(f"{name}@original", preds[m], model=f"m{m:03d}", registry=reg)
        np.save(work / "matrices" / f"{t:02d}_original.npy", preds == labels)
        np.save(work / "matrices" / f"{t:02d}_corrected.npy", preds == corrected)
        say(f"  task {name}: {n} rows, {models} models recorded")
    mark_generated(work, params)


def _agree(board: dict[str, Any], base: dict[str, Any], models: int) -> bool:
    """dsreg's point aggregates equal the loop's on both views (to the 6 decimals its JSON
    writes)."""
    names = [f"m{m:03d}" for m in range(models)]
    for vb in board["boards"]:
        got = {m["model"]: m for m in vb["models"]}
        score, rate, borda = base[vb["view"]]["point"]
        for i, name in enumerate(names):
            g = got[name]
            if not (
                abs(g["score"] - score[i]) < 1e-6
                and abs(g["win_rate"] - rate[i]) < 1e-6
                and abs(g["borda"] - borda[i]) < 1e-6
            ):
                return False
    return True


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tasks", type=int, default=57)
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3, help="runs of dsreg leaderboard (median)")
    ap.add_argument("--baseline-resamples", type=int, default=5, help="resamples the loop runs")
    ap.add_argument("--workdir", type=Path, help="where the set is generated (kept, reused)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = ap.parse_args(argv)
    work = (args.workdir or Path(tempfile.gettempdir())) / (
        f"dsreg-bench-multitask-{args.tasks}x{args.models}"
    )
    t0 = time.perf_counter()
    generate(work, tasks=args.tasks, models=args.models, seed=0)
    say(f"set ready in {time.perf_counter() - t0:.1f} s")
    tasks = ",".join(f"t{t:02d}" for t in range(args.tasks))
    cmd = [*DSREG, "leaderboard", "--tasks", tasks, "--resamples", str(args.resamples),
           "--json", "--registry", str(work / "reg")]  # fmt: skip
    runs = []
    for rep in range(args.reps):
        say(f"dsreg leaderboard --tasks, run {rep + 1}/{args.reps}")
        runs.append(measure(cmd, env=TOOL_ENV))
    board = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                      env=_env()).stdout)  # fmt: skip
    base_r = max(1, min(args.resamples, args.baseline_resamples))
    say(f"the numpy loop, {base_r} resamples")
    proc = subprocess.run(
        [PYTHON, "-c", BASELINE, str(work), str(args.tasks), str(base_r), "0"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    base = json.loads(proc.stdout)
    agree = _agree(board, base, args.models)
    seconds = sorted(r.seconds for r in runs)[len(runs) // 2]
    cpu = sorted(r.cpu_seconds or 0.0 for r in runs)[len(runs) // 2]
    mib = sorted(r.memory_mib for r in runs)[len(runs) // 2]
    loop = sum(base[v]["loop"] for v in VIEWS) * args.resamples / base_r
    ok = agree and seconds < TARGET_SECONDS and mib < TARGET_MIB
    commit = _commit()
    print(f"dsreg leaderboard --tasks vs a numpy loop; commit {commit}; machine: {machine()}")
    print(
        f"  {args.tasks} tasks x {args.models} models, {len(VIEWS)} views, {args.resamples} "
        f"resamples: {seconds:.2f} s wall, {cpu:.2f} s CPU, peak {mib:.0f} MiB (target "
        f"< {TARGET_SECONDS:g} s, < {TARGET_MIB:g} MiB); numpy loop {loop:.1f} s "
        f"({loop / seconds:.1f}x, extrapolated from {base_r}); aggregates agree: {agree}"
        f"  {'PASS' if ok else 'FAIL'}"
    )
    if args.json:
        result = {
            "commit": commit, "machine": machine(), "tasks": args.tasks, "models": args.models,
            "resamples": args.resamples, "seconds": round(seconds, 3), "cpu_seconds": cpu,
            "peak_tree_pss_mib": round(mib, 1), "runs": [r.to_dict() for r in runs],
            "baseline_seconds": round(loop, 1), "agree": agree, "pass": ok,
        }  # fmt: skip
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
