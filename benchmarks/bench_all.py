"""Every benchmark with targets, one after another (what ``make bench`` runs), each in a process
of its own that prints its figures, the commit it measured and each target's PASS or FAIL; then
the list of those that missed a target. Exit status 1 if any missed one (or did not run to the
end), after all of them have run.

    python benchmarks/bench_all.py              # all of them: hours
    python benchmarks/bench_all.py eval startup  # those whose command line holds a word given

The leaderboard's tall case (10 models x 50,000,000 rows) is left out: its numpy baseline takes
hours for one resample; run it by hand (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, REPO, commit

RUNS: tuple[tuple[str, ...], ...] = (
    ("bench_core.py",),
    ("bench_detector.py", "compare"),
    ("bench_eval.py",),
    ("bench_remotes.py",),
    ("bench_scale.py",),
    ("bench_startup.py",),
    ("bench_relabel.py",),
    ("bench_review.py",),
    ("bench_leaderboard.py", "--case", "wide"),
    ("bench_audit.py", "scale"),
    ("bench_audit.py", "reaudit"),
)


def run_all(runs: Sequence[Sequence[str]], folder: Path) -> int:
    """Run each script of ``folder`` with its arguments, all of them whatever each one's exit
    status; 1 if any exited otherwise than 0."""
    at = commit()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    missed = []
    for run in runs:
        line = " ".join(run)
        print(f"\n== {folder.name}/{line} (commit {at})", flush=True)
        start = time.perf_counter()
        code = subprocess.run([PYTHON, str(folder / run[0]), *run[1:]], env=env).returncode
        took = time.perf_counter() - start
        print(f"== {folder.name}/{line}: exit status {code} after {took:.0f} s", flush=True)
        if code != 0:
            missed.append(line)
    print(f"\nbenchmarks at commit {at}: {len(runs) - len(missed)} of {len(runs)} met every target")
    for line in missed:
        print(f"  MISSED a target (or did not finish): {folder.name}/{line}")
    return 1 if missed else 0


def main(argv: list[str]) -> int:
    runs = [r for r in RUNS if not argv or any(w in " ".join(r) for w in argv)]
    if not runs:
        print(f"no benchmark matches {argv}; they are: {[' '.join(r) for r in RUNS]}")
        return 1
    return run_all(runs, Path(__file__).resolve().parent)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
