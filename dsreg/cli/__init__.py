"""The ``dsreg`` command: thin (parse, one library call, render).

Each command is built from the library function it calls (``_command.py``), and only the
command being run is imported and built: the table below names every command, and ``dsreg
--help`` builds them all to list them. ``dsreg --version`` answers before any of that.

``DsregError`` is caught here, once: ``Error: …`` on stderr, exit status 1.
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TextIO

# Before anything imports numpy: its OpenBLAS would start a thread per CPU that spins while
# idle, taking CPU from dsreg's own worker processes; no command needs threaded BLAS (the
# detector and the reports are element-wise and reductions). A user's setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from dsreg._util.lazy import lazy_imports
from dsreg._version import __version__
from dsreg.cli._common import printable, say
from dsreg.errors import DsregError, YankedWarning

# click, and every command's module, imported when a command is run (``--version`` needs none).
with lazy_imports():
    import click

    import dsreg.cli._command as _command
    from dsreg.cli import audit, core, marks, overlays, query, remotes, results, reviewing

if TYPE_CHECKING:
    from dsreg.cli._command import Command, LazyGroup

__all__ = ["main", "root_group"]

HELP = "A versioned registry for ML evaluation sets."


class Subgroup(NamedTuple):
    """A group of commands under one name (``dsreg overlay ...``)."""

    help: str
    commands: dict[str, Callable[[], Command]]


# Every command, in the order `dsreg --help` lists them: a name and where its command is.
COMMANDS: dict[str, Callable[[], Command] | Subgroup] = {
    "init": lambda: core.init,
    "add": lambda: core.add,
    "ls": lambda: core.ls,
    "show": lambda: core.show,
    "log": lambda: core.log,
    "tag": lambda: core.tag,
    "yank": lambda: marks.yank,
    "retire": lambda: marks.retire,
    "checkout": lambda: core.checkout,
    "verify": lambda: core.verify,
    "gc": lambda: core.gc,
    "detect": lambda: overlays.detect,
    "sql": lambda: query.sql,
    "eval": lambda: query.eval_,
    "diff": lambda: query.diff,
    "cite": lambda: query.cite,
    "export": lambda: query.export,
    "leaderboard": lambda: results.leaderboard,
    "gap": lambda: results.gap,
    "push": lambda: remotes.push,
    "publish": lambda: remotes.publish,
    "pull": lambda: remotes.pull,
    "clone": lambda: remotes.clone,
    "import-dvc": lambda: remotes.import_dvc,
    "review": lambda: reviewing.review,
    "overlay": Subgroup(
        "Label-correction overlays: list, show, export; import votes, relabelings, corrections.",
        {
            "import-votes": lambda: overlays.import_votes,
            "import-labels": lambda: overlays.import_labels,
            "export": lambda: overlays.export,
            "ls": lambda: overlays.ls,
            "show": lambda: overlays.show,
        },
    ),
    "remote": Subgroup(
        "Manage remotes: any URL a DVC remote accepts (a folder, s3://, gs://, ssh://, …).",
        {
            "add": lambda: remotes.remote_add,
            "ls": lambda: remotes.remote_ls,
            "remove": lambda: remotes.remote_remove,
        },
    ),
    "audit": Subgroup(
        "Audit a test set: duplicates within it and contamination from other datasets.",
        {"duplicates": lambda: audit.duplicates},
    ),
}


def _version() -> str:
    # A literal in dsreg/_version.py: nothing heavy is imported.
    return f"dsreg {__version__}\n"


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        sys.stdout.write(_version())
        ctx.exit()


def root_group() -> LazyGroup:
    """The ``dsreg`` group: its commands are built when asked for."""
    entries = {
        name: _command.LazyGroup(name, e.help, e.commands) if isinstance(e, Subgroup) else e
        for name, e in COMMANDS.items()
    }
    version = click.Option(
        ["--version", "-V"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_print_version,
        help="Print dsreg's version and exit.",
    )
    return _command.LazyGroup("dsreg", HELP, entries, params=[version])


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A yank or a retirement told as one line on stderr; other warnings as Python shows them."""
    if issubclass(category, YankedWarning):
        say(f"Warning: {message}")
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``dsreg`` script."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["--version"], ["-V"]):
        sys.stdout.write(_version())
        return
    if argv is None:
        # The process ends with the command. Python's last garbage collection at exit would
        # traverse and free every object the command's imports made (numpy's, pyarrow's,
        # dsreg's: hundreds of thousands, a tenth of a second or more) just before the process
        # ends; frozen, they go with the process. Nothing else of the exit changes: atexit
        # handlers and weakref finalizers (temporary folders, locks) run all the same.
        atexit.register(gc.freeze)
    from dsreg.api.options import on_command_line

    try:
        with warnings.catch_warnings(), on_command_line():
            # A yank is told once per resolve, as one line, whatever the filters say.
            warnings.simplefilter("always", YankedWarning)
            warnings.showwarning = _show_warning
            code = root_group().main(args=args, prog_name="dsreg", standalone_mode=False)
    except DsregError as e:
        # A message may quote anything (a path, a value from a file): through the sanitiser.
        say(f"Error: {e}")
        sys.exit(1)
    except click.Abort:
        sys.stderr.write("Aborted.\n")
        sys.exit(130)
    except click.ClickException as e:
        # Usage errors are bad input too: the same exit status 1, a message that names the value
        # (which click quotes with repr; the usage line and hint are sanitised all the same).
        shown = io.StringIO()
        e.show(file=shown)
        sys.stderr.write(printable(shown.getvalue(), keep="\n"))
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    # Without standalone mode, click returns the code of a ``ctx.exit(code)`` instead of exiting.
    if isinstance(code, int) and code:
        sys.exit(code)
