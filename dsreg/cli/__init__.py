"""The ``dsreg`` command: typer app; thin (parse, one library call, render).

``DsregError`` is caught here, once: ``Error: …`` on stderr, exit status 1.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Annotated

# Before anything imports numpy: its OpenBLAS would start a thread per CPU that spins while
# idle, taking CPU from dsreg's own worker processes; no command needs threaded BLAS (the
# detector and the reports are element-wise and reductions). A user's setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

# typer 0.28 carries its own copy of click (``typer._click``): its usage errors are not
# ``click.ClickException``, and typer.Abort and typer.Exit are typer's own classes.
from typer._click.exceptions import ClickException
from typer.main import get_command_name

from dsreg.cli import audit, core, overlays, query, remotes, reviewing
from dsreg.cli._common import CONTEXT, say
from dsreg.cli._text import printable
from dsreg.errors import DsregError

app = typer.Typer(
    name="dsreg",
    help="A versioned registry for ML evaluation sets.",
    context_settings=CONTEXT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        # dsreg.__version__ is a literal in dsreg/_version.py: nothing heavy is imported.
        import dsreg

        sys.stdout.write(f"dsreg {dsreg.__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print dsreg's version and exit.",
        ),
    ] = False,
) -> None:
    """A versioned registry for ML evaluation sets."""


core.register(app)
overlays.register(app)
query.register(app)
remotes.register(app)
reviewing.register(app)
audit.register(app)


def _group() -> None:
    """A versioned registry for ML evaluation sets."""


@contextlib.contextmanager
def _only_the_command(args: list[str]) -> Iterator[None]:
    """While running ``dsreg NAME ...``, register only NAME: typer turns every registered
    command into a click command on each run (about 20 ms for dsreg's twenty, from their
    signatures), though one is run. The callback keeps the app a group (typer makes an app
    of one command that command). Anything else (``-h``, an unknown name) sees every command."""
    name = args[0] if args else "-"
    commands = [
        c
        for c in app.registered_commands
        if c.callback is not None and (c.name or get_command_name(c.callback.__name__)) == name
    ]
    groups = [g for g in app.registered_groups if g.name == name]
    if name.startswith("-") or len(commands) + len(groups) != 1:
        yield
        return
    saved = app.registered_commands, app.registered_groups, app.registered_callback
    app.registered_commands, app.registered_groups = commands, groups
    app.callback()(_group)
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups, app.registered_callback = saved


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``dsreg`` script."""
    try:
        with _only_the_command(sys.argv[1:] if argv is None else argv):
            code = app(args=argv, prog_name="dsreg", standalone_mode=False)
    except DsregError as e:
        # A message may quote anything (a path, a value from a file): through the sanitiser.
        say(f"Error: {e}")
        sys.exit(1)
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except ClickException as e:
        # Usage errors are bad input too: the same exit status 1, a message that names the value
        # (which click quotes with repr; the usage line and hint are sanitised all the same).
        shown = io.StringIO()
        e.show(file=shown)
        sys.stderr.write(printable(shown.getvalue(), keep="\n"))
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    # Without standalone mode, click returns a command's typer.Exit(code) instead of exiting.
    if isinstance(code, int) and code:
        sys.exit(code)


__all__ = ["app", "main"]
