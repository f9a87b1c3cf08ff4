"""The one JSON reader: every JSON document dsreg parses (manifests, pin files and journals, ref
and votes log lines, a remote's log and lock files, votes files, ImageNet-ReaL label lists, ids
files, review requests) goes through :func:`loads`, which refuses a document too large or nested
too deeply before Python's parser sees it, with one line naming the document.

Why a bound on depth: the standard library's parser recurses once per ``[`` or ``{``, so a
document of 100,000 ``[`` (100 KB, stored under its right digest by a hostile remote or left by a
damaged disk) ends in a ``RecursionError`` wherever it is read. The limit,
:data:`MAX_DEPTH`, is nine times the deepest document dsreg writes or reads (a manifest's producer
parameters or a JSON Schema nest at most seven levels; a votes record three) and far below the
interpreter's recursion limit, so the walks that follow a parse (schema checks, canonical bytes)
stay far from it as well.

Why bounds on size, per use (``max_bytes``: the sizes named below, and ``inputs.INPUT_BYTES``, 2
GiB, for a user's input files): the parsed values take
several times the bytes of the document, so a document larger than any real one of its kind is
refused before it is read, with what to do instead.

The depth check is a scan at the speed of ``bytes`` methods, not a parse: a document with at most
:data:`MAX_DEPTH` brackets passes on counting them (every manifest and log line); otherwise
strings are set aside (escapes first, then each ``"..."``) and the brackets left are matched,
innermost pairs first, one pass per level: a fraction of what the parse itself costs.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final

from dsreg._util.inputs import INPUT_BYTES, read_input
from dsreg.errors import DsregError

__all__ = [
    "LINE_BYTES",
    "MANIFEST_BYTES",
    "MAX_DEPTH",
    "json_problem",
    "load_file",
    "loads",
    "loads_lines",
    "read_line",
]

MAX_DEPTH: Final = 64
# A manifest, a checkout's pin file or journal, a schema: a snapshot manifest holds its class
# names, so a million classes of 30 characters make about 32 MiB of it.
MANIFEST_BYTES: Final = 256 << 20
# One line of a log (a tag move records the command line, at most the 2 MiB of arguments Linux
# passes a program), one votes log record, a lock file's holder.
LINE_BYTES: Final = 8 << 20

# Brackets become parentheses, quotes stay, everything else goes: what the depth scan reads.
_TO_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_OTHERS = bytes(c for c in range(256) if c not in b'[]{}"')
_SIGN = bytes.maketrans(b"()", b"\x01\xff")  # +1 and -1 as signed bytes


def _deeper(data: bytes | str, limit: int) -> bool:
    """Whether a document's brackets (outside its strings) nest more than ``limit`` deep."""
    if isinstance(data, str):
        if data.count("[") + data.count("{") <= limit:
            return False
        data = data.encode("utf-8", "surrogatepass")
    elif data.count(b"[") + data.count(b"{") <= limit:
        return False
    if b"\\" in data:
        # An escaped backslash, then an escaped quote: neither opens nor closes a string.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = data.translate(_TO_BRACKETS, _OTHERS)
    if b'"' in s:
        # Quotes alternate, opening and closing strings: dropping two adjacent ones keeps that
        # (an empty string goes, or two strings merge), then what lies between pairs is a string.
        s = s.replace(b'""', b"")
        if b'"' in s:
            s = b"".join(s.split(b'"')[::2])
    rest = s
    for _ in range(limit):
        inner = rest.replace(b"()", b"")  # every innermost pair: one level a pass
        if len(inner) == len(rest) or not inner:
            rest = inner
            break
        rest = inner
    if not rest:
        return False
    # Unbalanced (a document cut short, or hostile), or deeper: count levels exactly.
    return any(level > limit for level in accumulate(array("b", s.translate(_SIGN))))


def json_problem(data: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``data`` is not parsed (``"JSON nested deeper than 64 levels"``, or its size), or None.
    A size is of bytes, or of characters for text."""
    if len(data) > max_bytes:
        return f"{len(data):,} bytes, more than the {max_bytes:,} dsreg reads"
    if _deeper(data, max_depth):
        return f"JSON nested deeper than {max_depth} levels"
    return None


def loads(
    data: bytes | str,
    *,
    what: str,
    error: Callable[[str], DsregError],
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    parse_int: Callable[[str], Any] | None = None,
    hint: str = "",
) -> Any:
    """Parse a JSON document, or raise ``error`` (the caller's kind of refusal) with one line:
    ``what`` (the document: ``"object 1a2b3c4d5e6f"``, ``"votes file 'v.json'"``), what is wrong
    with it, and ``hint`` (what to do). ``max_bytes`` is one of the sizes above."""
    problem = json_problem(data, max_bytes=max_bytes, max_depth=max_depth)
    if problem is not None:
        raise error(f"{what}: {problem}{hint}")
    try:
        return json.loads(data, parse_int=parse_int)
    except json.JSONDecodeError as e:
        where = f"at line {e.lineno}, column {e.colno}"
        raise error(f"{what} is not valid JSON: {e.msg} {where}{hint}") from e
    except UnicodeDecodeError as e:
        raise error(f"{what} is not UTF-8 text (byte {e.start}){hint}") from e
    except ValueError as e:
        # An integer of more digits than Python converts (sys.get_int_max_str_digits); its
        # advice to raise that limit is not the user's to follow.
        raise error(f"{what} is not valid JSON: {str(e).split(';')[0]}{hint}") from e
    except RecursionError as e:  # not after the depth check, unless a caller's stack is deep
        raise error(f"{what}: JSON nested too deeply for this call{hint}") from e


def load_file(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: Callable[[str], DsregError],
    max_bytes: int = INPUT_BYTES,
    hint: str = "",
) -> Any:
    """An input file's JSON (``_util.inputs``: refused unless a regular file of at most
    ``max_bytes``), read as :func:`loads` reads. ``what`` names the file and its path."""
    data = read_input(path, what=what, max_bytes=max_bytes, error=error, hint=hint)
    return loads(data, what=what, error=error, max_bytes=max_bytes, hint=hint)


def loads_lines(
    text: str, *, what: str, error: Callable[[str], DsregError], hint: str = ""
) -> list[tuple[int, Any]]:
    """A JSON Lines document (an input file's text): ``(line number, value)`` for each line
    that is not blank, each parsed as :func:`loads` parses (``LINE_BYTES`` a line); the first
    line that does not parse is refused as ``error`` naming ``what`` and its line number."""
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            where = f"{what} line {i}"
            out.append((i, loads(line, what=where, error=error, max_bytes=LINE_BYTES, hint=hint)))
    return out


def read_line(line: bytes) -> tuple[Any, str | None]:
    """One line of a JSON-lines log (a registry's or a remote's): ``(value, None)``, or
    ``(None, why it holds none)`` for the report of damaged lines, never an error."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text (a torn character?)"
    problem = json_problem(line, max_bytes=LINE_BYTES)
    if problem is not None:
        return None, problem
    try:
        return loads(text, what="line", error=_NotJSON, max_bytes=LINE_BYTES), None
    except _NotJSON:
        return None, "not JSON"


class _NotJSON(DsregError):
    """A log line that does not parse: reported, never raised past ``read_line``."""
