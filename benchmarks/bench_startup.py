"""Start-up of the command line: ``dsreg --version`` against the import of typer, and a
``dsreg tag`` against a minimal typer app, the command line a user would otherwise write.

    python benchmarks/bench_startup.py                # 15 rounds
    python benchmarks/bench_startup.py --rounds 31

Each round runs, in a fresh process each and in an order that turns from one round to the
next, four commands:

- ``python -c "import typer"``: what any typer command line pays before it does anything;
- a minimal typer app of one command with two arguments and one option, run with its three
  values (``app.py a b --view cleaned``): typer's own cost of building and parsing a command;
- ``dsreg --version``;
- ``dsreg tag pets@clean pets@original --view cleaned --force`` (a tag of a view of a six-file
  set: it resolves a revision and reads its manifests; the round not counted writes the
  revision and the tag, so the rounds measured find the tag in place and write nothing).

``dsreg`` is the script beside the interpreter (else ``python -m dsreg``), run from this
checkout; typer is the one installed beside it (dsreg does not use it: its command line is
click's). Printed side by side: the median wall and CPU (user + system) seconds of each, and
each dsreg command's ratio to its baseline (``--version`` to the typer import, ``tag`` to the
minimal app), taken round by round (so a drift of the machine's speed cancels) and the median
of those.

Target (docs/benchmarks.md): each ratio within 1.5x, on CPU time, which a machine others are
using disturbs far less than wall time (printed beside it). Exit status 0 only if both pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from _common import PYTHON, TOOL_ENV, Measurement, machine, measure, run_tool

TARGET = 1.5
_SCRIPT = Path(PYTHON).with_name("dsreg")
DSREG = [str(_SCRIPT)] if _SCRIPT.exists() else [PYTHON, "-m", "dsreg"]
IMPORT = 'python -c "import typer"'
APP = "typer app (2 args, 1 option)"
# The minimal typer app: one command of two arguments and one option.
APP_SOURCE = """\
import typer

app = typer.Typer(add_completion=False)


@app.command()
def tag(new: str, source: str, view: str = typer.Option(None, help="The view.")) -> None:
    pass


app()
"""


def commands(registry: Path, app: Path) -> dict[str, list[str]]:
    """The commands measured, by the name printed: each baseline, then the dsreg commands."""
    return {
        IMPORT: [PYTHON, "-c", "import typer"],
        APP: [PYTHON, str(app), "pets@clean", "pets@original", "--view", "cleaned"],
        "dsreg --version": [*DSREG, "--version"],
        "dsreg tag (a view)": [
            *DSREG,
            "tag",
            "pets@clean",
            "pets@original",
            "--view",
            "cleaned",
            "--force",
            "--registry",
            str(registry),
        ],
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


def report(runs: dict[str, list[Measurement]]) -> bool:
    """Print the figures side by side; whether every dsreg command meets the target."""
    print(f"{'command':<30} {'wall s':>7} {'cpu s':>7}   {'against':<30} {'wall':>6} {'cpu':>6}")
    ok = True
    for name, ms in runs.items():
        wall = statistics.median(m.seconds for m in ms)
        cpu = statistics.median(m.cpu_seconds or 0.0 for m in ms)
        line = f"{name:<30} {wall:7.3f} {cpu:7.3f}"
        base = BASELINES.get(name)
        if base is not None:
            wall_ratio, cpu_ratio = ratio(ms, runs[base], cpu=False), ratio(ms, runs[base], True)
            passed = cpu_ratio <= TARGET
            ok = ok and passed
            line += (
                f"   {base:<30} {wall_ratio:5.2f}x {cpu_ratio:5.2f}x"
                f"  (target cpu <= {TARGET:g}x)  {'PASS' if passed else 'FAIL'}"
            )
        print(line)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    print(f"dsreg: {' '.join(DSREG)}; typer {version('typer')}, click {version('click')}")
    print(f"{args.rounds} rounds, medians")
    with tempfile.TemporaryDirectory(prefix="dsreg-startup-") as tmp:
        work = Path(tmp)
        app = work / "app.py"
        app.write_text(APP_SOURCE)
        cmds = commands(make_registry(work), app)
        ok = report(rounds(cmds, args.rounds, work))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
