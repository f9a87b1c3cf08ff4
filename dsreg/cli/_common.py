"""What every command shares: what it writes to a terminal, and its progress bars.

What data holds is shown, never obeyed. Class names, example ids, metadata cells, log fields,
remote URLs and the messages quoting them are anyone's text: a ``--classes`` file, a folder
name, a CSV cell, a snapshot cloned from someone's remote. Written raw, an escape sequence in
them could set the terminal's title, rewrite the screen or write the clipboard (OSC 52) of
whoever runs the command. So every line the CLI writes for reading goes through ``printable``,
the one sanitiser: each character a terminal could act on is written as its escape (``\\x1b``,
``\\x9b``, ``\\u202e``), visible and inert. ``--json`` output goes through ``json_safe``
instead: the same characters as JSON's own ``\\u`` escapes, so the text is exact once parsed.

A backslash is left as it is: the text output is for reading (a name that holds the four
characters ``\\x1b`` reads like one that holds ESC); ``--json`` tells them apart.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, TYPE_CHECKING, Any, TypeAlias, TypeVar

from dsreg._util.lazy import lazy_imports

# The progress bar's library, imported when a bar is first drawn (on a terminal).
with lazy_imports():
    from rich import console as rich_console
    from rich import markup as rich_markup
    from rich import progress as rich_progress

if TYPE_CHECKING:
    from dsreg.api import AuditResult, OverlayResult

Hook: TypeAlias = Callable[[str, int, int], None]
_R = TypeVar("_R")


# -- the one sanitiser ----------------------------------------------------------------------
# What a terminal may act on rather than show: the C0 controls (ESC begins every escape
# sequence; CR and BS overwrite what is shown), DEL, the C1 controls (CSI, OSC, DCS and the rest
# as single characters), the line and paragraph separators, the bidirectional embeddings,
# overrides and isolates (which reorder what is shown), and lone surrogates (a file name that is
# not UTF-8, decoded by Python; no terminal encoding can write them).
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _python_escape(c: str) -> str:
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def printable(text: str, keep: str = "") -> str:
    """``text`` with every character of ``UNSAFE`` but those in ``keep`` written as its Python
    escape (``\\x1b``, ``\\u202e``): safe to write to a terminal. A value inside a line keeps
    nothing (a newline in a class name must not start a line of its own); a whole message keeps
    ``"\\n"``."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(lambda m: m[0] if m[0] in keep else _python_escape(m[0]), text)


def json_safe(text: str) -> str:
    """JSON text with every character of ``UNSAFE`` inside its strings written as a ``\\u``
    escape: the same JSON once parsed. (JSON escapes C0 controls itself, but may leave DEL, C1,
    bidirectional controls and lone surrogates raw.) The newlines of indented JSON stay."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(lambda m: m[0] if m[0] == "\n" else f"\\u{ord(m[0]):04x}", text)


class SafeStream(io.TextIOBase):
    """A text stream writing to ``target`` through ``printable`` (keeping newlines and tabs),
    or through ``json_safe`` with ``json``: for a file format the library writes to stdout.
    It has no ``buffer``: a writer of bytes writes into memory, then here."""

    encoding = "utf-8"

    def __init__(self, target: IO[str], *, json: bool = False) -> None:
        super().__init__()
        self._target = target
        self._json = json

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self._target.write(json_safe(s) if self._json else printable(s, keep="\n\t"))
        return len(s)

    def flush(self) -> None:
        self._target.flush()


def write_file_format(text: str) -> None:
    """Write a file format's ``text`` (a citation, a CSV) to stdout: exactly when stdout is a
    file or a pipe (``dsreg cite X > ref.bib`` is the entry as stored), through ``printable``
    (newlines and tabs kept) when it is a terminal."""
    sys.stdout.write(printable(text, keep="\n\t") if sys.stdout.isatty() else text)


# -- what a command writes --------------------------------------------------------------------
def command_line() -> str:
    """The command as typed, for the ref log."""
    return shlex.join(["dsreg", *sys.argv[1:]])


def emit_json(data: Any) -> None:
    """``--json``: exact once parsed, and nothing in it a terminal would act on."""
    write_json(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def json_shown(res: Any, *, json: bool) -> bool:
    """With ``--json``, ``res.to_dict()`` on stdout; True then, as the command has no more to
    print."""
    if json:
        emit_json(res.to_dict())
    return json


def write_json(text: str) -> None:
    """JSON text made elsewhere (``json_safe``) to stdout."""
    sys.stdout.write(json_safe(text))


# Every line goes through the sanitiser, whatever it quotes: a value that a command forgot to
# pass through ``printable`` still cannot reach the terminal raw. (A value inside a line is
# passed through ``printable`` as well, so that a newline in it cannot start a line of its own.)
def out(text: str = "") -> None:
    """Data: stdout (newlines and tabs kept, every other control character escaped)."""
    sys.stdout.write(printable(text, keep="\n\t") + "\n")


def say(text: str) -> None:
    """Messages: stderr (as ``out``)."""
    sys.stderr.write(printable(text, keep="\n\t") + "\n")


def short(digest: str) -> str:
    """A digest as shown: its first 12 hex characters."""
    return digest.partition(":")[2][:12] if ":" in digest else digest[:12]


def overlay_made(res: OverlayResult | AuditResult, *, json: bool, **extra: Any) -> bool:
    """What every command that made an overlay says first: the tag it set, if any, on stderr;
    with ``--json``, the overlay, the revision the tag names (null without one) and ``extra``
    on stdout. True when that is all there is to print (``--json``)."""
    t = res.tagged
    if t is not None:
        say(f"Tagged {t.dataset}@{t.tag} -> {short(t.revision)} [{t.view}]")
    if json:
        emit_json({**res.to_dict(), "tagged": t.revision if t else None, **extra})
    return json


def table(rows: list[list[str]], headers: list[str]) -> str:
    """Columns aligned by spaces, a header line first; each cell through ``printable`` (a
    newline or tab in a value is escaped, not a line or column of its own)."""
    headers = [printable(str(h)) for h in headers]
    rows = [[printable(str(c)) for c in r] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


# Seconds between two progress lines when stderr is not a terminal (a log, CI): often enough
# to show a long step is alive, rarely enough not to flood the log. The variable is for tests.
PROGRESS_INTERVAL = 5.0


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("DSREG_PROGRESS_INTERVAL", PROGRESS_INTERVAL)))
    except ValueError:
        return PROGRESS_INTERVAL


def progress_lines(interval: float | None = None) -> Hook:
    """A hook that writes a line on stderr at most every ``interval`` seconds (the latest
    report: ``task: done/total (pct%, elapsed)``), and a last line for a task that finishes
    after one was written. A step shorter than ``interval`` writes nothing."""
    every = _interval() if interval is None else interval
    lock = threading.Lock()
    start = time.monotonic()
    last = [start]
    shown: set[str] = set()

    def hook(task: str, done: int, total: int) -> None:
        now = time.monotonic()
        with lock:
            finished = total > 0 and done >= total and task in shown
            if not finished and now - last[0] < every:
                return
            last[0] = now
            if finished:
                shown.discard(task)
            else:
                shown.add(task)
            pct = f"{100 * done // total}%, " if total > 0 else ""
            sys.stderr.write(f"{printable(task)}: {done:,}/{total:,} ({pct}{now - start:.0f}s)\n")
            sys.stderr.flush()

    return hook


@contextmanager
def progress_bar(*, quiet: bool = False) -> Iterator[Hook | None]:
    """A rich progress bar on a terminal (stderr); when stderr is not a terminal, a line every
    few seconds (``progress_lines``); nothing (``None``) with ``quiet``."""
    if quiet:
        yield None
        return
    if not sys.stderr.isatty():
        yield progress_lines()
        return
    with rich_progress.Progress(
        "[progress.description]{task.description}",
        rich_progress.BarColumn(),
        rich_progress.MofNCompleteColumn(),
        rich_progress.TimeRemainingColumn(),
        transient=True,
        console=rich_console.Console(stderr=True),
    ) as bar:
        tasks: dict[str, Any] = {}

        def hook(task: str, done: int, total: int) -> None:
            if task not in tasks:
                # The description is rich markup: a "[bold]" in it is shown, not obeyed.
                tasks[task] = bar.add_task(rich_markup.escape(printable(task)), total=total)
            bar.update(tasks[task], completed=done, total=total)

        yield hook


@contextmanager
def lazy_progress_bar(*, quiet: bool = False) -> Iterator[Hook]:
    """``progress_bar()``, opened at the first report: a push or pull with nothing to transfer
    reports nothing, and so never loads the progress bar's library (rich) on a terminal."""
    lock = threading.Lock()
    with ExitStack() as stack:
        bar: list[Hook | None] = []

        def hook(task: str, done: int, total: int) -> None:
            with lock:
                if not bar:
                    bar.append(stack.enter_context(progress_bar(quiet=quiet)))
                if bar[0] is not None:
                    bar[0](task, done, total)

        yield hook


def logged_run(
    call: Callable[..., _R], *args: Any, quiet: bool, lazy_bar: bool = False, **options: Any
) -> _R:
    """``call(*args, **options)`` for a command that writes to a registry: with a progress bar
    (``lazy_progress_bar`` with ``lazy_bar``; none with ``quiet``) as its ``progress``, and this
    command line as the ``command`` the registry's log records."""
    bar = lazy_progress_bar if lazy_bar else progress_bar
    with bar(quiet=quiet) as hook:
        return call(*args, progress=hook, command=command_line(), **options)
