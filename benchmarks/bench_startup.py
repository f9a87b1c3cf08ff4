"""Start-up of the command line: ``dsreg --version`` and a ``dsreg tag`` against the import of
the CLI library alone.

    python benchmarks/bench_startup.py                # 15 rounds
    python benchmarks/bench_startup.py --rounds 31

Each round runs, in a fresh process each and in an order that turns from one round to the
next, ``python -c "import typer"`` (what any typer command line pays before it does anything),
``dsreg --version`` and ``dsreg tag pets@clean pets@original --view cleaned --force`` (a tag of
a view of a six-file set: it resolves a revision and reads its manifests; the round not counted
writes the revision and the tag, so the rounds measured find the tag in place and write nothing).
``dsreg`` is the script beside the interpreter (else ``python -m dsreg``), run from this
checkout. Printed side by side: the median wall and CPU (user + system) seconds of each, and
its ratio to the typer import, taken round by round (so a drift of the machine's speed cancels)
and the median of those.

Target (docs/benchmarks.md): each dsreg command within 1.5x the typer import, on CPU time,
which a machine others are using disturbs far less than wall time (printed beside it). Exit
status 0 only if both pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import PYTHON, TOOL_ENV, Measurement, machine, measure, run_tool

TARGET = 1.5
_SCRIPT = Path(PYTHON).with_name("dsreg")
DSREG = [str(_SCRIPT)] if _SCRIPT.exists() else [PYTHON, "-m", "dsreg"]
BASELINE = "import typer"


def commands(registry: Path) -> dict[str, list[str]]:
    """The commands measured, by the name printed; the baseline first."""
    reg = ["--registry", str(registry)]
    return {
        f'python -c "{BASELINE}"': [PYTHON, "-c", BASELINE],
        "dsreg --version": [*DSREG, "--version"],
        "dsreg tag (a view)": [
            *DSREG,
            "tag",
            "pets@clean",
            "pets@original",
            "--view",
            "cleaned",
            "--force",
            *reg,
        ],
    }


def make_registry(work: Path) -> Path:
    """A registry holding ``pets@original``, six small files in two classes."""
    for label in ("cat", "dog"):
        (work / "tree" / label).mkdir(parents=True)
        for i in range(3):
            (work / "tree" / label / f"{i}.png").write_bytes(f"{label} {i}".encode())
    registry = work / "registry"
    reg = ["--registry", str(registry)]
    run_tool([*DSREG, "init", *reg], work)
    run_tool([*DSREG, "add", "pets", "tree", "--tag", "original", *reg], work)
    return registry


def rounds(cmds: dict[str, list[str]], n: int, work: Path) -> dict[str, list[Measurement]]:
    """``n`` measured rounds after one not counted; each round starts one command later."""
    names = list(cmds)
    runs: dict[str, list[Measurement]] = {name: [] for name in names}
    for r in range(n + 1):
        turn = names[r % len(names) :] + names[: r % len(names)]
        for name in turn:
            m = measure(cmds[name], cwd=work, env=TOOL_ENV, sample_memory=False)
            if r:
                runs[name].append(m)
    return runs


def ratio(runs: Sequence[Measurement], base: Sequence[Measurement], cpu: bool) -> float:
    """The median over rounds of this command's figure over the baseline's in that round."""
    return statistics.median(
        (a.cpu_seconds or 0.0) / (b.cpu_seconds or 1e-3) if cpu else a.seconds / b.seconds
        for a, b in zip(runs, base, strict=True)
    )


def report(runs: dict[str, list[Measurement]]) -> bool:
    """Print the figures side by side; whether every dsreg command meets the target."""
    base_name = next(iter(runs))
    base = runs[base_name]
    print(f"{'command':<28} {'wall s':>8} {'cpu s':>8} {'wall/typer':>11} {'cpu/typer':>10}")
    ok = True
    for name, ms in runs.items():
        wall = statistics.median(m.seconds for m in ms)
        cpu = statistics.median(m.cpu_seconds or 0.0 for m in ms)
        wall_ratio, cpu_ratio = ratio(ms, base, cpu=False), ratio(ms, base, cpu=True)
        verdict = ""
        if name != base_name:
            passed = cpu_ratio <= TARGET
            ok = ok and passed
            verdict = f"  (target cpu <= {TARGET:g}x)  {'PASS' if passed else 'FAIL'}"
        print(f"{name:<28} {wall:8.3f} {cpu:8.3f} {wall_ratio:10.2f}x {cpu_ratio:9.2f}x{verdict}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    print(f"dsreg: {' '.join(DSREG)}; {args.rounds} rounds, medians")
    with tempfile.TemporaryDirectory(prefix="dsreg-startup-") as tmp:
        work = Path(tmp)
        cmds = commands(make_registry(work))
        ok = report(rounds(cmds, args.rounds, work))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
