"""A 50-million-row label-only set end to end, each step beside DuckDB doing the same work.

    python benchmarks/bench_scale.py                         # 50,000,000 rows, 5,000,000 votes
    python benchmarks/bench_scale.py --rows 5000000 --reps 1  # a quick run while developing
    python benchmarks/bench_scale.py --through import-votes   # the add and import-votes only

The set (generated once into ``--workdir`` with numpy and pyarrow, and reused): ``base.parquet``
of ``example_id`` ("0"…"n-1") and ``label`` (``--classes`` classes, seeded), ``classes.txt``, and
``votes.csv``: a tenth of the rows voted on (``example_id,given_label,suggested_label,given,
guessed,both,neither``, five raters; a third non-errors, the rest mixed).

Each step is a fresh process (wall clock, peak RSS from ``/usr/bin/time``), the two tools
alternating, medians of ``--reps``:

- ``dsreg add bench --table base.parquet`` into a new registry, against DuckDB's
  ``COPY (SELECT example_id, label FROM read_parquet(base)) TO … (FORMAT parquet)``;
- ``dsreg overlay import-votes bench@original votes.csv --format csv``, against DuckDB reading
  the CSV, joining it to the examples on ``example_id``, applying the verdict rule and writing
  the result as Parquet;
- ``dsreg tag`` of the corrected view over the votes' overlay (a manifest: no per-row work);
- ``dsreg.open("bench@corrected").labels()`` (the whole view as a table);
- ``Dataset.iter_batches(65536)`` over every row (peak RSS);
- ``dsreg checkout bench@corrected DIR`` (``labels.csv``), against DuckDB's
  ``COPY (SELECT … FROM read_parquet(examples)) TO 'labels.csv'``.

Targets (the ``Target`` declarations below; docs/benchmarks.md): add <= 1x DuckDB and < 1.5 GiB;
import-votes <= 1x DuckDB and < 1.5 GiB; tag < 0.3 s; labels() < 5 s; iter_batches < 1 GiB;
checkout <= 2x DuckDB's COPY. A step left out by ``--through`` is not checked. Exit status 0
only if every target passes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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

ADD = Target("dsreg add --table / DuckDB read + write Parquet", "<=", 1)
ADD_MEMORY = Target("add peak RSS", "<", 1536, "MiB")
IMPORT_VOTES = Target("dsreg overlay import-votes / DuckDB read CSV + join + write", "<=", 1)
IMPORT_VOTES_MEMORY = Target("import-votes peak RSS", "<", 1536, "MiB")
TAG = Target("dsreg tag --view corrected", "<", 0.3, "s")
LABELS = Target("dsreg.open(...).labels()", "<", 5, "s")
ITER_BATCHES_MEMORY = Target("iter_batches peak RSS", "<", 1024, "MiB")
CHECKOUT = Target("dsreg checkout (labels.csv) / DuckDB COPY TO labels.csv", "<=", 2)

DUCK_COPY = r"""
import sys, duckdb
con = duckdb.connect(); con.execute("SET enable_progress_bar = false")
con.execute(f"COPY (SELECT example_id, label FROM read_parquet('{sys.argv[1]}')) "
            f"TO '{sys.argv[2]}' (FORMAT parquet, COMPRESSION zstd)")
"""
DUCK_VOTES = r"""
import sys, duckdb
con = duckdb.connect(); con.execute("SET enable_progress_bar = false")
con.execute(f'''COPY (
  SELECT e.row, v.example_id, e.label AS given_label, v.suggested_label,
    CASE WHEN v.given >= 3 THEN 'non_error' WHEN v.guessed >= 3 THEN 'correctable'
         WHEN v.both >= 3 THEN 'multi_label' WHEN v.neither >= 3 THEN 'neither'
         ELSE 'non_agreement' END AS verdict,
    {{'given': v.given, 'guessed': v.guessed, 'both': v.both, 'neither': v.neither}} AS votes
  FROM read_csv('{sys.argv[2]}') AS v
  JOIN (SELECT example_id, label, file_row_number AS row
        FROM read_parquet('{sys.argv[1]}', file_row_number = true)) AS e
    ON e.example_id = v.example_id
  WHERE e.label = v.given_label
  ORDER BY e.row
) TO '{sys.argv[3]}' (FORMAT parquet, COMPRESSION zstd)''')
"""
DUCK_CSV = r"""
import sys, duckdb
con = duckdb.connect(); con.execute("SET enable_progress_bar = false")
con.execute(f"COPY (SELECT file_row_number AS row, example_id, label, 'c' || label AS label_name, "
            f"label AS given_label, NULL AS verdict FROM read_parquet('{sys.argv[1]}', "
            f"file_row_number = true)) TO '{sys.argv[2]}' (HEADER, DELIMITER ',')")
"""
LABELS = r"""
import sys, time, dsreg
t = time.perf_counter()
ds = dsreg.open(sys.argv[1], registry=sys.argv[2])
table = ds.labels()
print(len(table), round(time.perf_counter() - t, 3))
"""
BATCHES = r"""
import sys, dsreg
ds = dsreg.open(sys.argv[1], registry=sys.argv[2])
n = sum(len(b) for b in ds.iter_batches(65536))
assert n == len(ds), (n, len(ds))
print(n)
"""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def generate(work: Path, *, rows: int, classes: int, votes: int, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    params = {"rows": rows, "classes": classes, "votes": votes, "seed": seed}
    if reused(work, params):
        return
    say(f"generating {rows:,} rows, {classes} classes, {votes:,} votes …")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, rows, dtype=np.int32)
    with pq.ParquetWriter(
        work / "base.parquet", pa.schema([("example_id", pa.string()), ("label", pa.int32())])
    ) as w:
        for lo in range(0, rows, 1 << 22):
            hi = min(rows, lo + (1 << 22))
            ids = pc.cast(pa.array(np.arange(lo, hi)), pa.string())
            w.write_table(pa.table({"example_id": ids, "label": labels[lo:hi]}))
    (work / "classes.txt").write_text("".join(f"c{i}\n" for i in range(classes)))
    voted = np.sort(rng.choice(rows, votes, replace=False))
    given = rng.integers(0, 6, votes)
    guessed = 5 - given
    sug = (labels[voted] + rng.integers(1, classes, votes)) % classes
    table = pa.table(
        {
            "example_id": pc.cast(pa.array(voted), pa.string()),
            "given_label": pa.array(labels[voted]),
            "suggested_label": pa.array(sug),
            "given": pa.array(given),
            "guessed": pa.array(guessed),
            "both": pa.array(np.zeros(votes, dtype=np.int64)),
            "neither": pa.array(np.zeros(votes, dtype=np.int64)),
        }
    )
    pacsv.write_csv(
        table, work / "votes.csv", write_options=pacsv.WriteOptions(quoting_style="none")
    )
    mark_generated(work, params)


def run(cmd: list[str], *, cwd: Path | None = None) -> tuple[Measurement, str]:
    subprocess.run(["sync"], check=False)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "%M %U %S", "-o", rss.name, *cmd],
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:6]} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        kib, user, sys_ = rss.read().strip().splitlines()[-1].split()
    m = Measurement(
        seconds=seconds, peak_rss_mib=int(kib) / 1024, cpu_seconds=float(user) + float(sys_)
    )
    return m, proc.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000_000, help="examples (50,000,000)")
    ap.add_argument("--classes", type=int, default=345, help="classes (345)")
    ap.add_argument("--votes", type=int, help="voted rows (default: a tenth of --rows)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (3)")
    ap.add_argument("--workdir", type=Path, help="where the set is generated (kept, reused)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    ap.add_argument(
        "--through",
        choices=["add", "import-votes", "all"],
        default="all",
        help="stop each repetition after this step (all); the add always runs, the rest need it",
    )
    args = ap.parse_args(argv)
    votes = args.votes if args.votes is not None else args.rows // 10
    work = args.workdir or Path(tempfile.gettempdir()) / f"dsreg-bench-scale-{args.rows}"
    generate(work, rows=args.rows, classes=args.classes, votes=votes, seed=0)
    base, csv_votes = work / "base.parquet", work / "votes.csv"
    runs_dir = work / "runs"
    shutil.rmtree(runs_dir, ignore_errors=True)
    runs_dir.mkdir()
    s: dict[str, Series] = {}

    def rec(name: str, m: Measurement) -> None:
        s.setdefault(name, Series(name=name)).runs.append(m)
        say(f"  {name:<34} {m.seconds:8.2f} s  {m.peak_rss_mib:8.0f} MiB")

    reg = ""
    for rep in range(args.reps):
        say(f"rep {rep + 1}/{args.reps}")
        reg = str(runs_dir / f"reg{rep}")
        subprocess.run([*DSREG, "init", "--registry", reg], check=True, capture_output=True)
        pair = [
            (
                "dsreg add --table",
                [
                    *DSREG,
                    "add",
                    "bench",
                    "--table",
                    str(base),
                    "--classes",
                    str(work / "classes.txt"),
                    "--tag",
                    "original",
                    "--registry",
                    reg,
                ],
            ),
            (
                "duckdb read + write Parquet",
                [PYTHON, "-c", DUCK_COPY, str(base), str(runs_dir / f"copy{rep}.parquet")],
            ),
        ]
        for name, cmd in pair if rep % 2 == 0 else pair[::-1]:
            rec(name, run(cmd)[0])
        if args.through == "add":
            continue
        examples = _examples_path(reg)
        pair = [
            (
                "dsreg overlay import-votes",
                [
                    *DSREG,
                    "overlay",
                    "import-votes",
                    "bench@original",
                    str(csv_votes),
                    "--format",
                    "csv",
                    "--json",
                    "--registry",
                    reg,
                ],
            ),
            (
                "duckdb read CSV + join + write",
                [
                    PYTHON,
                    "-c",
                    DUCK_VOTES,
                    examples,
                    str(csv_votes),
                    str(runs_dir / f"votes{rep}.parquet"),
                ],
            ),
        ]
        out = ""
        for name, cmd in pair if rep % 2 == 0 else pair[::-1]:
            m, o = run(cmd)
            rec(name, m)
            out = o or out
        if args.through == "import-votes":
            continue
        overlay = json.loads(out)["overlay"]
        rec(
            "dsreg tag --view corrected",
            run(
                [
                    *DSREG,
                    "tag",
                    "bench@corrected",
                    "bench@original",
                    "--overlay",
                    overlay,
                    "--view",
                    "corrected",
                    "--registry",
                    reg,
                ]
            )[0],
        )
        rec("dsreg.open(...).labels()", run([PYTHON, "-c", LABELS, "bench@corrected", reg])[0])
        rec("Dataset.iter_batches(65536)", run([PYTHON, "-c", BATCHES, "bench@corrected", reg])[0])
        pair = [
            (
                "dsreg checkout (labels.csv)",
                [
                    *DSREG,
                    "checkout",
                    "bench@corrected",
                    str(runs_dir / f"co{rep}"),
                    "--registry",
                    reg,
                ],
            ),
            (
                "duckdb COPY TO labels.csv",
                [PYTHON, "-c", DUCK_CSV, examples, str(runs_dir / f"labels{rep}.csv")],
            ),
        ]
        for name, cmd in pair if rep % 2 == 0 else pair[::-1]:
            rec(name, run(cmd)[0])
        # For information (no target): show, diff and verify of the registry holding the set.
        for name, cmd in (
            ("dsreg show (info)", [*DSREG, "show", "bench@corrected", "--registry", reg]),
            ("dsreg diff (info)", [*DSREG, "diff", "bench@original", "bench@corrected",
                                   "--registry", reg]),
            ("dsreg verify (info)", [*DSREG, "verify", "--registry", reg]),
        ):  # fmt: skip
            rec(name, run(cmd)[0])
    return _report(s, args, votes)


def _examples_path(reg: str) -> str:
    out = subprocess.run(
        [
            PYTHON,
            "-c",
            "import sys, dsreg; ds = dsreg.open('bench@original', registry=sys.argv[1]);"
            " print(ds.registry.store.path(ds.snapshot.examples))",
            reg,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _report(s: dict[str, Series], args: argparse.Namespace, votes: int) -> int:
    print(
        f"bench_scale: {args.rows:,} rows, {args.classes} classes, {votes:,} votes, "
        f"median of {args.reps}"
    )
    print(f"machine: {machine()}")
    for x in s.values():
        runs = ", ".join(f"{m.seconds:.2f}" for m in x.runs)
        print(
            f"  {x.name:<34} {x.seconds:8.2f} s ({x.cpu_seconds or 0:6.2f} s CPU)   "
            f"peak RSS {x.peak_rss_mib:8.0f} MiB   runs {runs}"
        )
    checks = Checks("bench_scale")

    def ratio(target: Target, a: str, b: str) -> None:
        if a not in s or b not in s:
            return  # a step left out by --through
        cpu = (s[a].cpu_seconds or 0) / (s[b].cpu_seconds or 1)
        checks.check(target, s[a].seconds / s[b].seconds, f"(CPU time {cpu:.2f}x)")

    def peak(target: Target, name: str) -> None:
        if name in s:
            checks.check(target, s[name].peak_rss_mib)

    def wall(target: Target, name: str) -> None:
        if name in s:
            checks.check(target, s[name].seconds)

    ratio(ADD, "dsreg add --table", "duckdb read + write Parquet")
    peak(ADD_MEMORY, "dsreg add --table")
    ratio(IMPORT_VOTES, "dsreg overlay import-votes", "duckdb read CSV + join + write")
    peak(IMPORT_VOTES_MEMORY, "dsreg overlay import-votes")
    wall(TAG, "dsreg tag --view corrected")
    wall(LABELS, "dsreg.open(...).labels()")
    peak(ITER_BATCHES_MEMORY, "Dataset.iter_batches(65536)")
    ratio(CHECKOUT, "dsreg checkout (labels.csv)", "duckdb COPY TO labels.csv")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": args.rows,
                    "classes": args.classes,
                    "votes": votes,
                    "machine": machine(),
                    "series": [x.to_dict() for x in s.values()],
                    **checks.to_dict(),
                },
                indent=2,
            )
            + "\n"
        )
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
