"""What every command shares: options, the registry lookup, output, progress bars."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.repo.registry import Registry

RegistryOpt = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        envvar="DSREG_REGISTRY",
        help="Registry folder (default: .dsreg here or above, else $DSREG_HOME).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]

CONTEXT = {"help_option_names": ["-h", "--help"]}


def registry(path: Path | None) -> Registry:
    return Registry.find(path)


def command_line() -> str:
    """The command as typed, for the ref log."""
    return shlex.join(["dsreg", *sys.argv[1:]])


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def out(text: str = "") -> None:
    """Data: stdout."""
    sys.stdout.write(text + "\n")


def say(text: str) -> None:
    """Messages: stderr."""
    sys.stderr.write(text + "\n")


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


@contextmanager
def progress_bar() -> Iterator[ProgressHook]:
    """A rich progress bar on a terminal (stderr); nothing when piped."""
    if not sys.stderr.isatty():
        yield no_progress
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
        console=__import__("rich.console").console.Console(stderr=True),
    ) as bar:
        tasks: dict[str, Any] = {}

        def hook(task: str, done: int, total: int) -> None:
            if task not in tasks:
                tasks[task] = bar.add_task(task, total=total)
            bar.update(tasks[task], completed=done, total=total)

        yield hook
