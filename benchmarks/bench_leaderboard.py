"""``dsreg leaderboard`` against the plain numpy bootstrap loop a user would write.

    python benchmarks/bench_leaderboard.py                      # both cases, full size
    python benchmarks/bench_leaderboard.py --case wide          # 100 models x 50,000 rows
    python benchmarks/bench_leaderboard.py --case tall --rows 5000000   # a quicker tall run

Two cases, each a label-only snapshot (added through the command line, ``dsreg add --labels``)
with a validated overlay correcting a share of its rows, tagged ``corrected-v1``, and models
recorded on it (``dsreg.record``: label predictions aligned with the rows, each model right on
60-90 % of the rows):

- **wide**: 100 models x 50,000 rows, 4 views (original, cleaned, corrected, honeypot), 1,000
  bootstrap resamples. Target: ``dsreg leaderboard`` under 5 s.
- **tall**: 10 models x 50,000,000 rows, 4 views, 200 resamples. Target: under 120 s and 2 GiB
  peak memory (the process tree's peak PSS).

Measured: the whole command, ``dsreg leaderboard bench --revisions corrected-v1 --resamples R
--json``, in a fresh subprocess (reading every recorded model's predictions, ranking them on the
revision's labels, the patterns, intervals, rank intervals and every pair's test). The baseline
is the loop a user writes with the label vectors of each view and the predictions already in
memory (what it costs to get them is not counted): per resample, draw ``n`` row indices, and per
view, each model's accuracy on the drawn rows of the view, then the ranks. It runs a few
resamples and is extrapolated linearly to ``R`` (it is a loop of identical iterations); its
rank intervals are not compared (another random stream), its point accuracies are, with
dsreg's.
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
from _common import (
    DSREG,
    PYTHON,
    REPO,
    TOOL_ENV,
    Checks,
    Target,
    machine,
    mark_generated,
    measure,
    reused,
)

sys.path.insert(0, str(REPO))

VIEWS = ("original", "cleaned", "corrected", "honeypot")
WIDE = Target("wide: dsreg leaderboard, wall", "<", 5, "s")
TALL = Target("tall: dsreg leaderboard, wall", "<", 120, "s")
TALL_MEMORY = Target("tall: dsreg leaderboard, peak memory (process tree PSS)", "<", 2048, "MiB")
CASES: dict[str, dict[str, Any]] = {
    "wide": {"models": 100, "rows": 50_000, "resamples": 1000, "time": WIDE, "memory": None},
    "tall": {"models": 10, "rows": 50_000_000, "resamples": 200, "time": TALL,
             "memory": TALL_MEMORY},
}  # fmt: skip

# The user's loop: labels of each view (-1 where the row is not in it) and the predictions.
BASELINE = r"""
import json, sys, time
import numpy as np
work, resamples, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
views = np.load(f"{work}/views.npy", mmap_mode="r")     # (V, n) int32, -1: not in the view
preds = np.load(f"{work}/preds.npy", mmap_mode="r")     # (M, n) int32
n = views.shape[1]
rng = np.random.default_rng(seed)
point, t0 = [], time.perf_counter()
for v in range(len(views)):
    lab = np.asarray(views[v])
    member = lab >= 0
    correct = np.asarray(preds) == lab                  # (M, n): right on a row of the view
    point.append((int(member.sum()), correct.sum(axis=1).tolist()))
    del correct
setup = time.perf_counter() - t0
t0 = time.perf_counter()
for r in range(resamples):
    idx = rng.integers(0, n, n)
    for v in range(len(views)):
        lab = np.asarray(views[v])[idx]
        member = lab >= 0
        acc = (np.asarray(preds)[:, idx] == lab).sum(axis=1) / max(1, int(member.sum()))
        ranks = 1 + (acc[None, :] > acc[:, None]).sum(axis=1)
print(json.dumps({"point": point, "setup": setup, "loop": time.perf_counter() - t0}))
"""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def generate(work: Path, *, models: int, rows: int, corrections: int, seed: int) -> None:
    """The registry with its recorded models, and the baseline's arrays; reused if the
    parameters match."""
    params = {"models": models, "rows": rows, "corrections": corrections, "seed": seed}
    if reused(work, params):
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    import dsreg
    from dsreg.formats.corrections import corrections_table
    from dsreg.overlays.write import write_overlay
    from dsreg.registry.folder import Registry
    from dsreg.registry.reader import LocalReader

    classes = 100
    rng = np.random.default_rng(seed)
    say(f"generating {rows:,} rows, {models} models, {corrections:,} corrections …")
    labels = rng.integers(0, classes, rows, dtype=np.int32)
    np.save(work / "labels.npy", labels)
    (work / "classes.txt").write_text("".join(f"class{i:03d}\n" for i in range(classes)))
    reg_dir = str(work / "reg")
    subprocess.run([*DSREG, "init", "--registry", reg_dir], check=True, capture_output=True)
    add = [*DSREG, "add", "bench", "--labels", str(work / "labels.npy"), "--classes",
           str(work / "classes.txt"), "--tag", "original", "--registry", reg_dir]  # fmt: skip
    subprocess.run(add, check=True, capture_output=True, env={**_env()})
    (work / "labels.npy").unlink()
    reg = Registry(work / "reg")
    snap = LocalReader(reg).revision("bench@original").revision.snapshot
    crow = np.sort(rng.choice(rows, corrections, replace=False))
    kind = rng.integers(0, 3, corrections)  # non_error, correctable, removed (neither)
    verdict = np.asarray(["non_error", "correctable", "neither"])[kind]
    sug = np.where(kind == 1, (labels[crow] + rng.integers(1, classes, corrections)) % classes, -1)
    table = corrections_table(
        rows=crow,
        example_ids=pc.cast(pa.array(crow), pa.string()),
        given_label=labels[crow],
        suggested_label=sug.astype(np.int64),
        verdict=pa.array(verdict.astype(object), pa.string()),
    )
    producer = {"name": "bench_leaderboard", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=snap, kind="validated", table=table, producer=producer)
    dsreg.tag("bench@corrected-v1", "bench@original", overlays=[ov], view="corrected", registry=reg)
    # The baseline's label vectors: the views of the revision, -1 where a row is not in one.
    views = np.empty((len(VIEWS), rows), dtype=np.int32)
    corrected = labels.copy()
    corrected[crow[kind == 1]] = sug[kind == 1]
    views[0] = labels
    views[1] = labels
    views[1][crow[kind != 0]] = -1
    views[2] = corrected
    views[2][crow[kind == 2]] = -1
    views[3] = -1
    views[3][crow[kind == 1]] = sug[kind == 1]
    np.save(work / "views.npy", views)
    del views
    preds = np.lib.format.open_memmap(
        work / "preds.npy", mode="w+", dtype=np.int32, shape=(models, rows)
    )
    for m in range(models):
        skill = 0.6 + 0.3 * m / max(1, models - 1)
        pred = np.where(rng.random(rows) < skill, corrected, rng.integers(0, classes, rows))
        preds[m] = pred
        dsreg.record("bench@original", preds[m].copy(), model=f"m{m:03d}", registry=reg)
    preds.flush()
    del preds
    mark_generated(work, params)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, **TOOL_ENV}


def run_case(name: str, args: argparse.Namespace) -> dict[str, Any]:
    case = dict(CASES[name])
    if args.rows is not None:
        case["rows"] = args.rows
    rows, models, resamples = case["rows"], case["models"], case["resamples"]
    corrections = max(1, rows // 100)
    work = (args.workdir or Path(tempfile.gettempdir())) / f"dsreg-bench-board-{name}-{rows}"
    t0 = time.perf_counter()
    generate(work, models=models, rows=rows, corrections=corrections, seed=0)
    say(f"{name}: set ready in {time.perf_counter() - t0:.1f} s")
    cmd = [*DSREG, "leaderboard", "bench", "--revisions", "corrected-v1", "--resamples",
           str(resamples), "--json", "--registry", str(work / "reg")]  # fmt: skip
    runs = []
    for rep in range(args.reps):
        say(f"{name}: dsreg leaderboard, run {rep + 1}/{args.reps}")
        runs.append(measure(cmd, env=TOOL_ENV))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=_env()).stdout
    board = json.loads(out)
    base_r = max(1, min(resamples, args.baseline_resamples))
    say(f"{name}: the numpy loop, {base_r} resamples")
    proc = subprocess.run(
        [PYTHON, "-c", BASELINE, str(work), str(base_r), "0"],
        check=True,
        capture_output=True,
        text=True,
    )
    base = json.loads(proc.stdout)
    agree = _agree(board, base)
    seconds = sorted(r.seconds for r in runs)[len(runs) // 2]
    mib = sorted(r.memory_mib for r in runs)[len(runs) // 2]
    base_seconds = base["setup"] + base["loop"] * resamples / base_r
    return {
        "case": name,
        "models": models,
        "rows": rows,
        "views": len(VIEWS),
        "resamples": resamples,
        "corrections": corrections,
        "seconds": round(seconds, 2),
        "peak_tree_pss_mib": round(mib, 1),
        "cpu_seconds": [r.cpu_seconds for r in runs],
        "baseline_seconds": round(base_seconds, 1),
        "baseline_measured_resamples": base_r,
        "speedup": round(base_seconds / seconds, 1),
        "agree": agree,
    }


def _agree(board: dict[str, Any], base: dict[str, Any]) -> bool:
    """dsreg's rows and correct counts per view equal the loop's point estimates."""
    rev = board["revisions"][0]
    for v, (rows, correct) in zip(VIEWS, base["point"], strict=True):
        if rev["rows"][v] != rows:
            return False
        got = [rev["scores"][m][v]["correct"] for m in sorted(rev["scores"])]
        if got != correct:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--case", choices=[*CASES, "both"], default="both")
    ap.add_argument("--rows", type=int, help="rows (default: the case's)")
    ap.add_argument("--reps", type=int, default=3, help="runs of dsreg leaderboard (median)")
    ap.add_argument(
        "--baseline-resamples", type=int, default=20, help="resamples the loop runs (20)"
    )
    ap.add_argument("--workdir", type=Path, help="where the sets are generated (kept, reused)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = ap.parse_args(argv)
    names = list(CASES) if args.case == "both" else [args.case]
    checks = Checks("bench_leaderboard")
    results = [run_case(n, args) for n in names]
    print(f"dsreg leaderboard vs a numpy bootstrap loop; machine: {machine()}")
    for r in results:
        print(
            f"  {r['case']}: {r['models']} models x {r['rows']:,} rows x {r['views']} views, "
            f"{r['resamples']} resamples: {r['seconds']:.2f} s, peak "
            f"{r['peak_tree_pss_mib']:.0f} MiB; numpy loop {r['baseline_seconds']:.1f} s "
            f"({r['speedup']}x)"
        )
    for r in results:
        case = CASES[r["case"]]
        checks.holds(f"{r['case']}: the counts agree with the loop's", r["agree"])
        checks.check(case["time"], r["seconds"])
        if case["memory"] is not None:
            checks.check(case["memory"], r["peak_tree_pss_mib"])
    if args.json:
        args.json.write_text(
            json.dumps({"machine": machine(), "cases": results, **checks.to_dict()}, indent=2)
            + "\n"
        )
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
