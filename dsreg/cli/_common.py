"""What every command shares: options, output, progress bars."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeAlias

import typer

# The library finds the registry (``Registry.find``: --registry, else $DSREG_REGISTRY, else
# .dsreg here or above, else $DSREG_HOME), in the one place a Python caller's is found too, so
# the option reads no environment variable itself; its help still names it, as click would.
RegistryOpt = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="Registry folder (default: .dsreg here or above, else $DSREG_HOME).  "
        "[env var: DSREG_REGISTRY]",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
# A reading command's remote: no registry is needed with a URL (the per-user cache holds what
# is fetched; docs/remotes.md, "Reading a remote").
ReadRemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--remote",
        "-r",
        help="Read from this remote: a remote's name, or a URL or folder (no registry needed: "
        "objects go to the per-user cache, $DSREG_CACHE).",
        show_default=False,
    ),
]

CONTEXT = {"help_option_names": ["-h", "--help"]}

Hook: TypeAlias = Callable[[str, int, int], None]


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


def short(digest: str) -> str:
    """A digest as shown: its first 12 hex characters."""
    return digest.partition(":")[2][:12] if ":" in digest else digest[:12]


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


@contextmanager
def progress_bar() -> Iterator[Hook | None]:
    """A rich progress bar on a terminal (stderr); none (``None``) when piped."""
    if not sys.stderr.isatty():
        yield None
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


@contextmanager
def lazy_progress_bar() -> Iterator[Hook]:
    """``progress_bar()``, opened at the first report: a push or pull with nothing to transfer
    reports nothing, and so never loads the progress bar's library (rich) on a terminal."""
    lock = threading.Lock()
    with ExitStack() as stack:
        bar: list[Hook | None] = []

        def hook(task: str, done: int, total: int) -> None:
            with lock:
                if not bar:
                    bar.append(stack.enter_context(progress_bar()))
                if bar[0] is not None:
                    bar[0](task, done, total)

        yield hook
