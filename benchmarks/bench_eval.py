"""``dsreg eval`` against a plain DuckDB hash join on ``example_id``, over the same Parquet files.

    python benchmarks/bench_eval.py                        # 50,000,000 rows, 345 classes
    python benchmarks/bench_eval.py --rows 1000000 --reps 2

The set: a label-only snapshot of ``--rows`` examples over ``--classes`` classes (ids "0"…"n-1",
added as a user adds it, ``dsreg add --labels labels.npy --classes classes.txt`` through the
command line, its time printed), a validated overlay of
``--corrections`` rows (a third ``non_error``, a third ``correctable`` with a suggested label, a
third removed: ``multi_label``, ``neither``, ``non_agreement``), and one model's predictions of
every row (80 % right on the given label; on correctable rows, 70 % predict the suggested label).

Measured, each in a fresh subprocess (wall clock, peak RSS):

- ``dsreg eval ds@corrected-v1 preds.npy --views original,cleaned,corrected --json`` (the
  predictions row-aligned, as ``.npy``): the three accuracies with everything eval computes
  beside them (Wilson intervals, rank intervals, the label card); the same with ``--ci
  bootstrap`` (percentile intervals from 1,000 resamples of the rows' patterns); and, for
  information, with a Parquet of ``row, pred``;
- the baseline: DuckDB computing the same three accuracies in one query, joining the examples,
  the predictions (``example_id, pred`` Parquet) and the corrections on ``example_id``.

Targets (``EVAL_*`` below; docs/benchmarks.md): ``dsreg eval`` on the row-aligned ``.npy``, with
Wilson's and with bootstrap intervals, at least 10x faster than the baseline with at most half
its peak RSS, at the default 50,000,000 rows (a smaller run shows them: start-up is most of
it there). Every run must agree on every count. Exit status 0 only if every target passes. The
generated set is kept in ``--workdir`` and reused by later runs with the same parameters.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    DSREG,
    PYTHON,
    REPO,
    Checks,
    Measurement,
    Series,
    Target,
    machine,
    mark_generated,
    reused,
)

sys.path.insert(0, str(REPO))

VIEWS = ("original", "cleaned", "corrected")
NPY, BOOT, PARQUET = (
    "dsreg eval (.npy)",
    "dsreg eval (.npy, --ci bootstrap)",
    "dsreg eval (Parquet)",
)
JOIN = "duckdb hash join on example_id"
EVAL_SPEED = Target("wall time: DuckDB join / dsreg eval (.npy)", ">=", 10)
EVAL_MEMORY = Target("peak RSS: dsreg eval (.npy) / DuckDB join", "<=", 0.5)
EVAL_SPEED_BOOTSTRAP = Target("wall time: DuckDB join / dsreg eval --ci bootstrap", ">=", 10)
EVAL_MEMORY_BOOTSTRAP = Target("peak RSS: dsreg eval --ci bootstrap / DuckDB join", "<=", 0.5)
BASELINE = r"""
import json, sys, duckdb
import dsreg
examples, corrections, preds = sys.argv[1:4]
con = duckdb.connect()
con.execute('SET enable_progress_bar = false')
row = con.execute(f'''
WITH j AS (
  SELECT e.label AS given, c.verdict AS v, c.suggested_label AS s, p.pred
  FROM read_parquet('{examples}') AS e
  JOIN read_parquet('{preds}') AS p ON p.example_id = e.example_id
  LEFT JOIN read_parquet('{corrections}') AS c ON c.example_id = e.example_id
)
SELECT
  count(*),
  count(*) FILTER (WHERE pred = given),
  count(*) FILTER (WHERE v IS NULL OR v = 'non_error'),
  count(*) FILTER (WHERE (v IS NULL OR v = 'non_error') AND pred = given),
  count(*) FILTER (WHERE v IS NULL OR v = 'non_error'
                   OR (v IN ('correctable', 'suspected') AND s IS NOT NULL)),
  count(*) FILTER (WHERE ((v IS NULL OR v = 'non_error') AND pred = given)
                   OR (v IN ('correctable', 'suspected') AND s IS NOT NULL AND pred = s))
FROM j
''').fetchone()
names = ("original", "cleaned", "corrected")
print(json.dumps({n: {"rows": row[2 * i], "correct": row[2 * i + 1]} for i, n in enumerate(names)}))
"""


def generate(work: Path, *, rows: int, classes: int, corrections: int, seed: int) -> dict[str, Any]:
    """The registry, the overlay and the predictions files; reused if the parameters match."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import dsreg
    from dsreg.formats.corrections import corrections_table
    from dsreg.overlays.write import write_overlay
    from dsreg.registry.folder import Registry
    from dsreg.registry.reader import LocalReader

    params = {"rows": rows, "classes": classes, "corrections": corrections, "seed": seed}
    if reused(work, params):
        return json.loads((work / "set.json").read_text())  # type: ignore[no-any-return]
    rng = np.random.default_rng(seed)
    say(f"generating {rows:,} examples, {classes} classes, {corrections:,} corrections …")
    labels = rng.integers(0, classes, rows, dtype=np.int32)
    ids = pc.cast(pa.array(np.arange(rows, dtype=np.int64)), pa.string())
    names = tuple(f"class{i:03d}" for i in range(classes))
    # Built as a user builds it: 'dsreg add --labels' through the command line, which
    # streams the canonical examples Parquet a row group at a time.
    np.save(work / "labels.npy", labels)
    (work / "classes.txt").write_text("".join(f"{c}\n" for c in names))
    import subprocess
    import time

    subprocess.run(
        [*DSREG, "init", "--registry", str(work / "reg")], check=True, capture_output=True
    )
    t0 = time.perf_counter()
    subprocess.run(
        [
            *DSREG,
            "add",
            "bench",
            "--labels",
            str(work / "labels.npy"),
            "--classes",
            str(work / "classes.txt"),
            "--tag",
            "original",
            "--registry",
            str(work / "reg"),
        ],
        check=True,
        capture_output=True,
    )
    say(f"dsreg add --labels ({rows:,} rows, through the CLI): {time.perf_counter() - t0:.1f} s")
    (work / "labels.npy").unlink()
    reg = Registry(work / "reg")
    snap_digest = LocalReader(reg).revision("bench@original").revision.snapshot

    crow = np.sort(rng.choice(rows, corrections, replace=False))
    kind = rng.integers(0, 3, corrections)  # 0 non_error, 1 correctable, 2 removed
    removed = np.asarray(["multi_label", "neither", "non_agreement"])[
        rng.integers(0, 3, corrections)
    ]
    verdict = np.where(kind == 0, "non_error", np.where(kind == 1, "correctable", removed))
    given = labels[crow]
    sug = np.where(kind == 1, (given + rng.integers(1, classes, corrections)) % classes, -1).astype(
        np.int64
    )
    ct = corrections_table(
        rows=crow,
        example_ids=pc.cast(pa.array(crow), pa.string()),
        given_label=given,
        suggested_label=sug,
        verdict=pa.array(verdict.astype(object), pa.string()),
    )
    ov = write_overlay(
        reg,
        base=snap_digest,
        kind="validated",
        table=ct,
        producer={"name": "bench_eval", "version": "1", "params": {"seed": seed}, "inputs": {}},
    )
    dsreg.tag("bench@corrected-v1", "bench@original", overlays=[ov], view="corrected", registry=reg)

    pred = labels.copy()
    wrong = rng.random(rows) < 0.2
    pred[wrong] = rng.integers(0, classes, int(wrong.sum()), dtype=np.int32)
    fix = (kind == 1) & (rng.random(corrections) < 0.7)
    pred[crow[fix]] = sug[fix]
    np.save(work / "preds.npy", pred)
    pq.write_table(
        pa.table({"row": pa.array(np.arange(rows, dtype=np.int64)), "pred": pa.array(pred)}),
        work / "preds.parquet",
    )
    pq.write_table(
        pa.table({"example_id": ids, "pred": pa.array(pred)}), work / "preds-ids.parquet"
    )
    info = {
        "registry": str(reg.root),
        "examples": str(reg.store.path(reg.snapshot(snap_digest).examples)),
        "corrections": str(reg.store.path(reg.overlay(ov).corrections)),
    }
    (work / "set.json").write_text(json.dumps(info))
    mark_generated(work, params)
    return info


def _measure(cmd: list[str]) -> tuple[Measurement, str]:
    """As ``_common.measure`` (wall clock, peak RSS by /usr/bin/time, CPU time of the reaped
    child), keeping stdout: the counts each tool computed, to check that they agree."""
    import os
    import resource
    import subprocess
    import time

    def children_cpu() -> float:
        u = resource.getrusage(resource.RUSAGE_CHILDREN)
        return u.ru_utime + u.ru_stime

    os.sync()
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        before = children_cpu()
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True
        )
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}:\n{proc.stderr}")
        kib = int(rss.read().strip().splitlines()[-1])
    m = Measurement(seconds=seconds, peak_rss_mib=kib / 1024, cpu_seconds=children_cpu() - before)
    return m, proc.stdout


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000_000, help="examples (50,000,000)")
    ap.add_argument("--classes", type=int, default=345, help="classes (345)")
    ap.add_argument("--corrections", type=int, help="overlay rows (default: a tenth of --rows)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (3)")
    ap.add_argument("--workdir", type=Path, help="where the set is generated (kept, reused)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = ap.parse_args(argv)
    corrections = args.corrections if args.corrections is not None else args.rows // 10
    work = args.workdir or Path(tempfile.gettempdir()) / f"dsreg-bench-eval-{args.rows}"
    info = generate(work, rows=args.rows, classes=args.classes, corrections=corrections, seed=0)
    reg = info["registry"]
    views = ",".join(VIEWS)
    eval_npy = [
        *DSREG, "eval", "bench@corrected-v1", str(work / "preds.npy"),
        "--views", views, "--json", "--registry", reg,
    ]  # fmt: skip
    runs: dict[str, list[str]] = {
        NPY: eval_npy,
        BOOT: [*eval_npy, "--ci", "bootstrap"],
        PARQUET: [
            *DSREG, "eval", "bench@corrected-v1", str(work / "preds.parquet"),
            "--views", views, "--json", "--registry", reg,
        ],
        JOIN: [
            PYTHON, "-c", BASELINE, info["examples"], info["corrections"],
            str(work / "preds-ids.parquet"),
        ],
    }  # fmt: skip
    series = {name: Series(name=name) for name in runs}
    answers: dict[str, dict[str, Any]] = {}
    order = list(runs)
    for rep in range(args.reps):
        for name in order if rep % 2 == 0 else order[::-1]:
            say(f"rep {rep + 1}/{args.reps}: {name}")
            m, out = _measure(runs[name])
            series[name].runs.append(m)
            answers[name] = _counts(json.loads(out))
    base = answers[JOIN]
    agree = all(a == base for a in answers.values())
    return _report(series, answers, agree, args, corrections)


def _counts(doc: dict[str, Any]) -> dict[str, Any]:
    """{view: (rows, correct)} from dsreg's report or the baseline's output."""
    if "models" in doc:
        s = doc["models"][0]["scores"]
        return {v: (s[v]["rows"], s[v]["correct"]["top1"]) for v in VIEWS}
    return {v: (doc[v]["rows"], doc[v]["correct"]) for v in VIEWS}


def _report(
    series: dict[str, Series],
    answers: dict[str, dict[str, Any]],
    agree: bool,
    args: argparse.Namespace,
    corrections: int,
) -> int:
    checks = Checks("bench_eval")
    base = series[JOIN]
    print(
        f"dsreg eval vs DuckDB hash join: {args.rows:,} rows, {args.classes} classes, "
        f"{corrections:,} corrections, median of {args.reps}"
    )
    print(f"machine: {machine()}")
    for s in series.values():
        runs = ", ".join(f"{m.seconds:.2f}" for m in s.runs)
        print(
            f"  {s.name:<36} {s.seconds:8.2f} s ({s.cpu_seconds or 0:6.2f} s CPU)   "
            f"peak RSS {s.peak_rss_mib:8.1f} MiB   runs {runs}"
        )
    for v in VIEWS:
        rows, correct = answers[NPY][v]
        print(f"  {v:<10} {correct:,} / {rows:,} = {correct / rows:.6f}")
    checks.holds("every run gives the same counts", agree)
    # The targets are on row-aligned predictions (.npy, the aligned format); the Parquet variant
    # (decoding a 'row' column of n int64 first) is shown for information.
    for name, speed, memory in ((NPY, EVAL_SPEED, EVAL_MEMORY),
                                (BOOT, EVAL_SPEED_BOOTSTRAP, EVAL_MEMORY_BOOTSTRAP)):  # fmt: skip
        s = series[name]
        cpu = (base.cpu_seconds or 0) / (s.cpu_seconds or 1)
        checks.check(
            speed,
            base.seconds / s.seconds,
            f"{s.seconds:.2f} s vs {base.seconds:.2f} s (CPU time {cpu:.1f}x)",
        )
        checks.check(
            memory,
            s.peak_rss_mib / base.peak_rss_mib,
            f"{s.peak_rss_mib:,.0f} vs {base.peak_rss_mib:,.0f} MiB",
        )
    pq_s = series[PARQUET]
    print(
        f"  (info) wall time: DuckDB join / {PARQUET}: {base.seconds / pq_s.seconds:.1f}x  "
        f"{pq_s.seconds:.2f} s, {pq_s.peak_rss_mib:,.0f} MiB"
    )
    if args.json:
        result = {
            "rows": args.rows,
            "classes": args.classes,
            "corrections": corrections,
            "machine": machine(),
            "series": [s.to_dict() for s in series.values()],
            **checks.to_dict(),
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
