"""Start-up of the command line: ``dsreg --version`` against the import of the CLI library
alone, and a ``dsreg tag`` against a minimal typer app doing nothing.

    python benchmarks/bench_startup.py                # 15 rounds
    python benchmarks/bench_startup.py --rounds 31

Each round runs, in a fresh process each and in an order that turns from one round to the
next, ``python -c "import typer"`` (what any typer command line pays before it does anything),
a minimal typer app (one command with a ``tag``'s arguments and options, parsed, nothing done:
what the smallest typer command line pays), ``dsreg --version`` and ``dsreg tag pets@clean
pets@original --view cleaned --force`` (a tag of a view of a six-file set: it resolves a
revision and reads its manifests; the round not counted writes the revision and the tag, so the
rounds measured find the tag in place and write nothing). ``dsreg`` is the script beside the
interpreter (else ``python -m dsreg``), run from this checkout. Printed side by side: the median
wall and CPU (user + system) seconds of each, and each dsreg command's ratio to its baseline,
taken round by round (so a drift of the machine's speed cancels) and the median of those.

Targets (``VERSION`` and ``TAG`` below; docs/benchmarks.md): ``dsreg --version`` within 1.5x
the typer import and ``dsreg tag`` within 1.5x the minimal typer app, on CPU time, which a
machine others are using disturbs far less than wall time (printed beside it). Exit status 0
only if both pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from _common import PYTHON, TOOL_ENV, Checks, Measurement, Target, machine, measure, run_tool

_SCRIPT = Path(PYTHON).with_name("dsreg")
DSREG = [str(_SCRIPT)] if _SCRIPT.exists() else [PYTHON, "-m", "dsreg"]
IMPORT = "import typer"
# The smallest typer command line with a tag's arguments and options: parsed, nothing done.
APP = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def tag(name: str, source: str, view: str = "", force: bool = False, registry: str = "") -> None:
    pass
app()
"""
TAG_ARGS = ["pets@clean", "pets@original", "--view", "cleaned", "--force"]
TYPER_IMPORT, TYPER_APP = f'python -c "{IMPORT}"', "a minimal typer app (tag's options)"
VERSION = Target("CPU time: dsreg --version / import typer", "<=", 1.5)
TAG = Target("CPU time: dsreg tag (a view) / a minimal typer app", "<=", 1.5)


def commands(registry: Path) -> dict[str, list[str]]:
    """The commands measured, by the name printed; the baselines first."""
    reg = ["--registry", str(registry)]
    return {
        TYPER_IMPORT: [PYTHON, "-c", IMPORT],
        TYPER_APP: [PYTHON, "-c", APP, *TAG_ARGS, *reg],
        "dsreg --version": [*DSREG, "--version"],
        "dsreg tag (a view)": [*DSREG, "tag", *TAG_ARGS, *reg],
    }


# Each dsreg command and the baseline it is held to.
BASELINES = {"dsreg --version": IMPORT, "dsreg tag (a view)": APP}


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


def report(runs: dict[str, list[Measurement]], checks: Checks) -> None:
    """Print the figures side by side; check each dsreg command against its baseline."""
    baseline = {"dsreg --version": (TYPER_IMPORT, VERSION), "dsreg tag (a view)": (TYPER_APP, TAG)}
    print(f"{'command':<36} {'wall s':>8} {'cpu s':>8} {'wall ratio':>11} {'cpu ratio':>10}")
    for name, ms in runs.items():
        wall = statistics.median(m.seconds for m in ms)
        cpu = statistics.median(m.cpu_seconds or 0.0 for m in ms)
        against = runs[baseline[name][0]] if name in baseline else ms
        wall_ratio, cpu_ratio = ratio(ms, against, cpu=False), ratio(ms, against, cpu=True)
        print(f"{name:<36} {wall:8.3f} {cpu:8.3f} {wall_ratio:10.2f}x {cpu_ratio:9.2f}x")
    for name, (base, target) in baseline.items():
        wall_ratio = ratio(runs[name], runs[base], cpu=False)
        checks.check(target, ratio(runs[name], runs[base], cpu=True), f"(wall {wall_ratio:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    args = parser.parse_args(argv)
    checks = Checks("bench_startup")
    print(f"machine: {machine()}")
    print(f"dsreg: {' '.join(DSREG)}; typer {version('typer')}, click {version('click')}")
    print(f"{args.rounds} rounds, medians")
    with tempfile.TemporaryDirectory(prefix="dsreg-startup-") as tmp:
        work = Path(tmp)
        cmds = commands(make_registry(work))
        report(rounds(cmds, args.rounds, work), checks)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
