"""The ``dsreg`` command: typer app; thin (parse, one library call, render).

``DsregError`` is caught here, once: ``Error: …`` on stderr, exit status 1.
"""

from __future__ import annotations

import os
import sys

# Before anything imports numpy: its OpenBLAS would start a thread per CPU that spins while
# idle, taking CPU from dsreg's own worker processes; no command needs threaded BLAS (the
# detector and the reports are element-wise and reductions). A user's setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

# typer 0.28 carries its own copy of click (``typer._click``): its usage errors are not
# ``click.ClickException``, and typer.Abort and typer.Exit are typer's own classes.
from typer._click.exceptions import ClickException

from dsreg.cli import core, overlays, query, remotes
from dsreg.cli._common import CONTEXT
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
core.register(app)
overlays.register(app)
query.register(app)
remotes.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``dsreg`` script."""
    try:
        code = app(args=argv, prog_name="dsreg", standalone_mode=False)
    except DsregError as e:
        sys.stderr.write(f"Error: {e}\n")
        sys.exit(1)
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except ClickException as e:
        # Usage errors are bad input too: the same exit status 1, a message that names the value.
        e.show()
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    # Without standalone mode, click returns a command's typer.Exit(code) instead of exiting.
    if isinstance(code, int) and code:
        sys.exit(code)


__all__ = ["app", "main"]
