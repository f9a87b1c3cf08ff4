"""Files a user names as input (labels, votes, relabelings, tables, probabilities, predictions):
refused by name unless they are regular files, and read whole only up to a size.

A named pipe, a device such as ``/dev/zero``, a socket or a folder given as an input file would
make a reader wait for a writer or read forever. Each is refused with what it is before anything
opens it for reading; a regular file is opened without waiting (``O_NONBLOCK``, which changes
nothing for one) and checked again through its descriptor, so what is read is what was checked.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Iterable

from dsreg.errors import DsregError, InputPathError

__all__ = ["INPUT_BYTES", "input_file", "read_input", "shown", "shown_all"]

# An input file read whole: a votes file (the label-errors release's largest is 2 MB; five
# million review votes about 1 GB), ImageNet-ReaL's real.json (1 MB), an ids or classes file.
# Parsed, JSON takes about five times its size in memory; more belongs in a CSV, read in blocks.
INPUT_BYTES = 2 << 30

# A value a message names is cut to this many characters of its repr.
_SHOWN = 120

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_OPEN = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _check(st: os.stat_result, path: str, what: str) -> os.stat_result:
    if not stat.S_ISREG(st.st_mode):
        raise InputPathError(
            f"{what} is {_kind(st.st_mode)}, not a regular file; dsreg reads input files whole, "
            "so save the data to a file and give its path",
            path=path,
        )
    return st


def input_file(path: str | os.PathLike[str], *, what: str) -> os.stat_result:
    """The ``stat`` of an input file (links followed), or ``InputPathError`` naming ``what`` (the
    file, as the message names it: ``"votes file 'v.json'"``) when it does not exist or is not a
    regular file. Nothing is opened: a named pipe is not waited on."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError) as e:
        raise InputPathError(f"{what} does not exist; check the path", path=p) from e
    except OSError as e:
        raise InputPathError(
            f"cannot read {what}: {e.strerror or e}; check the path", path=p
        ) from e
    return _check(st, p, what)


def read_input(
    path: str | os.PathLike[str],
    *,
    what: str,
    max_bytes: int,
    error: Callable[[str], DsregError],
    hint: str = "",
) -> bytes:
    """The bytes of an input file read whole: ``InputPathError`` as :func:`input_file` says, and
    ``error`` (the caller's kind of refusal, its message ending in ``hint``) for a file of more
    than ``max_bytes``, checked before anything is read."""
    p = os.fspath(path)
    input_file(p, what=what)
    try:
        fd = os.open(p, _OPEN)
    except OSError as e:
        raise InputPathError(
            f"cannot read {what}: {e.strerror or e}; check the path", path=p
        ) from e
    try:
        size = _check(os.fstat(fd), p, what).st_size
        if size > max_bytes:
            raise error(f"{what} is {size:,} bytes, more than the {max_bytes:,} dsreg reads{hint}")
        data = _read(fd, size, max_bytes, p, what)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise error(f"{what} grew past {max_bytes:,} bytes while dsreg read it{hint}")
    return data


def _read(fd: int, size: int, limit: int, path: str, what: str) -> bytes:
    """The file's bytes in one buffer of its size (``size`` from its ``stat``); a file that grew
    since is read on, up to one byte past ``limit``."""
    try:
        with open(fd, "rb", closefd=False) as f:
            data = f.read(size + 1)
            if len(data) > size:
                data += f.read(limit + 1 - len(data))
    except OSError as e:
        raise InputPathError(f"cannot read {what}: {e.strerror or e}", path=path) from e
    return data


def shown(value: object) -> str:
    """A value from an input file as a one-line message names it: its ``repr``, cut to 120
    characters; an integer of more than 20 digits by its sign and number of digits (Python
    will not even turn one of 4,300 into text)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        size = abs(value)
        digits = math.floor((size.bit_length() - 1) * math.log10(2)) + 1  # off by one at most
        digits += size >= 10**digits
        return f"{'a negative' if value < 0 else 'an'} integer of {digits:,} digits"
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 1]}… ({len(text):,} characters)"


def shown_all(values: Iterable[object]) -> str:
    """Values as a message lists them, each as :func:`shown` names it: ``[1, 'dog…']``."""
    return f"[{', '.join(shown(v) for v in values)}]"
