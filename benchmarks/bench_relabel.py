"""Relabelings: importing ImageNet-ReaL and CIFAR-10H files and scoring against them,
against the plain scripts a user would write instead (timm's ``real_labels.py`` does the ReaL
part in a Python loop).

    python benchmarks/bench_relabel.py              # 50,000-row ReaL file, 10,000 x 10 counts
    python benchmarks/bench_relabel.py --reps 3

Generated (seeded) in a temporary folder:

- an ImageNet-like label-only snapshot of 50,000 rows, 1,000 classes, its example ids
  ``val/n…/ILSVRC2012_val_XXXXXXXX.JPEG`` sorted by class folder (so rows are matched by file
  name, not by position), a ``real.json`` of 50,000 lists in file order (76 % the given label
  alone, 10 % two labels with it, 5 % one other label, 4 % two others, 5 % empty) and one
  model's predicted labels (``.npy``, 80 % right);
- a CIFAR-like snapshot of 10,000 rows, 10 classes, a 10,000 x 10 ``counts.npy`` of 50 raters
  per row and one model's probabilities (``.npy``).

Measured, each the real command line in a fresh process (wall clock, median of ``--reps``), so
interpreter start-up and imports count:

- ``dsreg overlay import-labels SPEC real.json --format real`` (matching, the rule, checks
  against the snapshot, the canonical Parquet, the overlay manifest, the ref log) vs a script
  that reads ``real.json`` and applies the ReaL rule in a Python loop (no storage);
- the same for ``counts.npy --format counts`` vs numpy computing the verdicts;
- ``dsreg eval SPEC preds.npy --json`` on the ReaL revision (five views, set accuracy) vs the
  timm-style loop (``json.load``, then ``pred in labels`` per row: ReaL accuracy alone); and on
  the CIFAR-10H revision with probabilities (majority accuracy, expected agreement, cross-entropy)
  vs numpy computing those three.

Targets (the ``Target`` declarations below; docs/benchmarks.md): each dsreg command under 1 s.
The ratios are for information: the baselines store nothing and compute one figure. Every run
checks that dsreg and the baseline agree.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DSREG, PYTHON, TOOL_ENV, Checks, Target, machine

IMPORT_REAL = Target("import-labels real (50,000 rows), wall", "<", 1, "s")
IMPORT_COUNTS = Target("import-labels counts (10,000 x 10), wall", "<", 1, "s")
EVAL_REAL = Target("eval, ReaL revision (50,000 rows), wall", "<", 1, "s")
EVAL_COUNTS = Target("eval, CIFAR-10H revision (10,000 x 10 probs), wall", "<", 1, "s")

REAL_LOOP = r"""
import json, sys, numpy as np
real = json.load(open(sys.argv[1]))
given = np.load(sys.argv[2]).tolist()
out = []
for g, labels in zip(given, real):
    if not labels: out.append("neither")
    elif g in labels: out.append("non_error")
    elif len(labels) == 1: out.append("correctable")
    else: out.append("multi_label")
print(json.dumps({v: out.count(v) for v in ("non_error", "correctable", "multi_label", "neither")}))
"""

REAL_ACC = r"""
import json, sys, numpy as np
real = json.load(open(sys.argv[1]))
pred = np.load(sys.argv[2]).tolist()
hits = [p in labels for p, labels in zip(pred, real) if labels]
print(json.dumps({"set_accuracy": sum(hits) / len(hits), "rows": len(hits)}))
"""

COUNTS_NUMPY = r"""
import json, sys, numpy as np
c = np.load(sys.argv[1]); given = np.load(sys.argv[2]); t = float(sys.argv[3])
share = c / c.sum(1, keepdims=True)
n = len(c); g = share[np.arange(n), given]
o = share.copy(); o[np.arange(n), given] = -1
best = o.max(1)
print(json.dumps({"non_error": int((g >= t).sum()),
                  "correctable": int(((g < t) & (best >= t)).sum())}))
"""

HUMAN_NUMPY = r"""
import json, sys, numpy as np
c = np.load(sys.argv[1]); p = np.load(sys.argv[2])
total = c.sum(1); pred = p.argmax(1); n = len(c)
q = p / p.sum(1, keepdims=True)
print(json.dumps({"majority_accuracy": float((pred == c.argmax(1)).mean()),
                  "expected_agreement": float((c[np.arange(n), pred] / total).mean()),
                  "cross_entropy": float(-(c / total[:, None]
                                           * np.log(np.maximum(q, 1e-12))).sum(1).mean())}))
"""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process, stdout): on a shared machine the CPU time
    says what the command costs, the wall clock what it cost this time."""
    env = {**os.environ, **TOOL_ENV}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:5]} exited {proc.returncode}:\n{proc.stderr}")
    return seconds, cpu, proc.stdout


def generate(work: Path, seed: int) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n, k = 50_000, 1000
    labels = rng.integers(0, k, n)
    ids = [f"val/n{labels[i]:08d}/ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(n)]
    order = sorted(range(n), key=lambda i: ids[i])  # ImageFolder order: by class folder
    pq.write_table(
        pa.table(
            {"example_id": [ids[i] for i in order], "label": pa.array(labels[order], pa.int32())}
        ),
        work / "inval.parquet",
    )
    (work / "inval-classes.txt").write_text("\n".join(f"c{i:04d}" for i in range(k)) + "\n")
    kind = rng.choice(5, n, p=[0.76, 0.10, 0.05, 0.04, 0.05])
    other = (labels + rng.integers(1, k, n)) % k
    third = (labels + rng.integers(1, k, n)) % k
    real: list[list[int]] = []
    for g, kd, o, t in zip(
        labels.tolist(), kind.tolist(), other.tolist(), third.tolist(), strict=True
    ):
        real.append(
            [g] if kd == 0 else sorted({g, o}) if kd == 1 else [o] if kd == 2
            else sorted({o, t}) if kd == 3 else []
        )  # fmt: skip
    (work / "real.json").write_text(json.dumps(real))
    np.save(work / "inval-given.npy", labels)  # in file order, for the baseline
    pred = np.where(rng.random(n) < 0.8, labels, rng.integers(0, k, n))
    np.save(work / "inval-pred-fileorder.npy", pred)
    np.save(work / "inval-pred.npy", pred[order])  # row-aligned with the snapshot
    # CIFAR-10H-like
    m, c = 10_000, 10
    clab = rng.integers(0, c, m)
    np.save(work / "c10.npy", clab.astype(np.int32))
    (work / "c10-classes.txt").write_text("\n".join(f"k{i}" for i in range(c)) + "\n")
    p_true = rng.dirichlet(np.full(c, 0.3), m)
    p_true[np.arange(m), clab] += 2.0
    p_true /= p_true.sum(1, keepdims=True)
    counts = np.stack([rng.multinomial(50, row) for row in p_true])
    np.save(work / "counts.npy", counts)
    np.save(work / "c10-probs.npy", rng.dirichlet(np.ones(c), m) * 0.5 + np.eye(c)[clab] * 0.5)
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    say(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate(work, args.seed)
        reg = ["--registry", str(work / "reg")]
        run([*DSREG, "init", *reg], work)
        run([*DSREG, "add", "inval", "--table", str(work / "inval.parquet"), "--classes",
             str(work / "inval-classes.txt"), "--tag", "v1", *reg], work)  # fmt: skip
        run([*DSREG, "add", "c10", "--labels", str(work / "c10.npy"), "--classes",
             str(work / "c10-classes.txt"), "--tag", "v1", *reg], work)  # fmt: skip
        cases = [
            (
                IMPORT_REAL,
                [
                    *DSREG,
                    "overlay",
                    "import-labels",
                    "inval@v1",
                    str(work / "real.json"),
                    "--format",
                    "real",
                    "--json",
                    *reg,
                ],
                [PYTHON, "-c", REAL_LOOP, str(work / "real.json"), str(work / "inval-given.npy")],
                "Python loop over real.json",
            ),
            (
                IMPORT_COUNTS,
                [
                    *DSREG,
                    "overlay",
                    "import-labels",
                    "c10@v1",
                    str(work / "counts.npy"),
                    "--format",
                    "counts",
                    "--json",
                    *reg,
                ],
                [
                    PYTHON,
                    "-c",
                    COUNTS_NUMPY,
                    str(work / "counts.npy"),
                    str(work / "c10.npy"),
                    "0.5",
                ],
                "numpy verdicts",
            ),
        ]
        say("tagging the revisions eval scores …")
        out = run(cases[0][1], work)[2]
        real_ov = json.loads(out)["overlay"]
        out = run(cases[1][1], work)[2]
        c10_ov = json.loads(out)["overlay"]
        run([*DSREG, "tag", "inval@real", "inval@v1", "--overlay", real_ov, "--view",
             "multilabel", *reg], work)  # fmt: skip
        run([*DSREG, "tag", "c10@h", "c10@v1", "--overlay", c10_ov, *reg], work)
        cases += [
            (
                EVAL_REAL,
                [*DSREG, "eval", "inval@real", str(work / "inval-pred.npy"), "--json", *reg],
                [
                    PYTHON,
                    "-c",
                    REAL_ACC,
                    str(work / "real.json"),
                    str(work / "inval-pred-fileorder.npy"),
                ],
                "timm-style loop (ReaL accuracy)",
            ),
            (
                EVAL_COUNTS,
                [*DSREG, "eval", "c10@h", str(work / "c10-probs.npy"), "--json", *reg],
                [PYTHON, "-c", HUMAN_NUMPY, str(work / "counts.npy"), str(work / "c10-probs.npy")],
                "numpy (three figures)",
            ),
        ]
        checks = Checks("bench_relabel")
        results = []
        print(
            f"{'case':<46} {'dsreg wall':>10} {'cpu':>6} {'baseline wall':>13} {'cpu':>6}"
            "  wall ratio"
        )
        for target, cmd, base, base_name in cases:
            label = target.name.removesuffix(", wall")
            ours, ours_cpu, theirs, theirs_cpu = [], [], [], []
            for _ in range(args.reps):
                t, c, out_d = run(cmd, work)
                ours.append(t)
                ours_cpu.append(c)
                t, c, out_b = run(base, work)
                theirs.append(t)
                theirs_cpu.append(c)
            _agree(label, json.loads(out_d), json.loads(out_b))
            a, b = statistics.median(ours), statistics.median(theirs)
            ac, bc = statistics.median(ours_cpu), statistics.median(theirs_cpu)
            print(
                f"{label:<46} {a:9.3f}s {ac:5.2f}s {b:12.3f}s {bc:5.2f}s  {b / a:9.2f}x  "
                f"(baseline: {base_name})"
            )
            results.append((target, a))
    for target, seconds in results:
        checks.check(target, seconds)
    return checks.finish()


def _agree(label: str, ours: dict, theirs: dict) -> None:
    """dsreg and the baseline must compute the same figures."""
    if "summary" in ours:
        for key, value in theirs.items():
            assert ours["summary"][key] == value, (label, key, ours["summary"][key], value)
        return
    m = ours["models"][0]
    for key, value in theirs.items():
        if key == "rows":
            assert m["set_rows"] == value, (label, m["set_rows"], value)
        else:
            assert abs(m[key] - value) < 1e-5, (label, key, m[key], value)


if __name__ == "__main__":
    sys.exit(main())
