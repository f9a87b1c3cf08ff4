"""Text for a terminal: what data holds is shown, never obeyed.

Class names, example ids, metadata cells, log fields, remote URLs and the messages quoting them
are anyone's text: a ``--classes`` file, a folder name, a CSV cell, a snapshot cloned from
someone's remote. Written raw, an escape sequence in them could set the terminal's title,
rewrite the screen or write the clipboard (OSC 52) of whoever runs the command. So every line
the CLI writes for reading goes through ``printable``, the one sanitiser: each character a
terminal could act on is written as its escape (``\\x1b``, ``\\x9b``, ``\\u202e``), visible and
inert. ``--json`` output goes through ``json_safe`` instead: the same characters as JSON's own
``\\u`` escapes, so the text is exact once parsed.

A backslash is left as it is: the text output is for reading (a name that holds the four
characters ``\\x1b`` reads like one that holds ESC); ``--json`` tells them apart.
"""

from __future__ import annotations

import io
import re
import sys
from typing import IO

__all__ = ["SafeStream", "json_safe", "printable", "write_file_format"]

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
