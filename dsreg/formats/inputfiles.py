"""What every importer shares to read a user's array and table files within bounds: the one
reader of ``.npy`` files, the check of a table's column names, the check of integer cells
before they are converted, the search for class or row numbers outside their range, and the
wording of Arrow's CSV errors.

A ``.npy`` header is read and checked against the file's size before anything is mapped or
allocated: a header claiming 300,000,000 x 10 float64 values over 3,000 x 10 of data (a file cut
short, or a lie) is refused by name, never given 22 GiB. The array is then memory-mapped, read
only: numpy maps what the header says, a reader copies what it needs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from tokenize import TokenError
from typing import IO, Any, Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg._util.inputs import input_file, shown, shown_all
from dsreg.errors import DsregError

__all__ = [
    "CSV_BLOCK",
    "INT64_DIGITS",
    "OutOfRange",
    "check_digit_cells",
    "csv_error",
    "open_npy",
    "out_of_range",
    "refuse_duplicate_columns",
]

# The block Arrow's CSV reader parses at once, for importers whose result does not depend on
# how the file was cut into blocks (corrections, predictions): a line may be up to this long.
# (``dsreg add`` keeps Arrow's 1 MiB: the examples table's bytes follow its blocks.)
CSV_BLOCK: Final = 16 << 20
_ARROW_BLOCK: Final = 1 << 20
# Decimal digits an int64 always holds (9,223,372,036,854,775,807 has 19).
INT64_DIGITS: Final = 18

Error = Callable[[str], DsregError]


def _header(f: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]] | None:
    """The shape and dtype a version 1 or 2 header states (numpy's own readers, which check its
    form); None for version 3, which numpy's mapping checks alone."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _order, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _order, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        return None
    return shape, dtype


def open_npy(
    path: Path, *, what: str, error: Error, hint: str, private: bool = False
) -> np.ndarray:
    """A ``.npy`` file memory-mapped read-only, once it is a regular file (``InputPathError``
    otherwise) whose header fits its size; anything else is ``error`` naming ``what`` (the file
    and its path), ending in ``hint`` (what to do).

    ``private``: mapped copy-on-write instead (numpy's ``mmap_mode="c"``), so the array is
    writeable though nothing ever reaches the file. Some numpy functions copy a read-only
    array whole before working on it (``argmax`` does); a reader that only reads gives them
    a writeable one, and no page is ever copied."""
    st = input_file(path, what=what)
    try:
        with open(path, "rb") as f:
            header = _header(f)
            offset = f.tell()
        if header is not None:
            shape, dtype = header
            need = math.prod(shape) * dtype.itemsize
            if need > st.st_size - offset:
                dims = " x ".join(f"{d:,}" for d in shape) or "a scalar"
                raise error(
                    f"{what}: its header says {dims} {dtype} values ({need:,} bytes), but the "
                    f"file holds {max(0, st.st_size - offset):,} bytes of data; it is cut short "
                    f"or its header is wrong{hint}"
                )
        arr: np.ndarray = np.load(path, mmap_mode="c" if private else "r", allow_pickle=False)
    except DsregError:
        raise
    except (OSError, ValueError, EOFError, SyntaxError, TokenError) as e:
        # EOFError: an empty or truncated file ("No data left in file"); SyntaxError and
        # TokenError: a damaged header (numpy tokenizes a version 1 or 2 header again).
        why = f"its header is damaged: {e.args[0]}" if isinstance(e, TokenError) else str(e)
        raise error(f"{what} is not a readable .npy array ({why}){hint}") from e
    return arr


def refuse_duplicate_columns(names: Sequence[str], *, what: str, error: Error) -> None:
    """Refuse a table with two columns of one name (Arrow keeps both; which one a name means
    would be a guess)."""
    twice = sorted(n for n, c in Counter(names).items() if c > 1)
    if twice:
        raise error(
            f"{what} has columns named {shown_all(twice[:5])} more than once; give "
            "every column its own name"
        )


def check_digit_cells(
    cells: pa.Array | pa.ChunkedArray, *, what: str, error: Error, digits: int = INT64_DIGITS
) -> None:
    """Refuse cells of more than ``digits`` characters before they are cast to integers (which
    would overflow): the first such cell is named."""
    if not len(cells):
        return
    long = pc.greater(pc.utf8_length(cells), digits)
    if pc.any(long).as_py():
        first = pc.filter(cells, long)[0].as_py()
        raise error(
            f"{what} holds {shown(first)}, a number of more than {digits} digits; no row, "
            "class or count is that large"
        )


class OutOfRange(NamedTuple):
    """The values of an integer array outside ``[0, k)``: how many, and the first five of them
    with their positions, for a refusal to name."""

    total: int
    first: list[int]
    at: list[int]


def out_of_range(values: np.ndarray, k: int) -> OutOfRange | None:
    """The values outside ``[0, k)`` (class indices, row numbers), ``None`` when all are in."""
    bad = np.flatnonzero((values < 0) | (values >= k))
    if not len(bad):
        return None
    return OutOfRange(len(bad), values[bad[:5]].tolist(), bad[:5].tolist())


def csv_error(e: BaseException, *, block: int = _ARROW_BLOCK) -> str:
    """Arrow's CSV error as a message says it: a line longer than the reader's block is named
    with the limit (Arrow asks to raise a setting the user cannot reach)."""
    text = str(e)
    if "straddling object" in text or "straddles" in text:
        return (
            f"a line is longer than {block:,} bytes, the most dsreg reads of one CSV line; "
            "shorten it (keep long text out of the file)"
        )
    return text
