"""What every importer shares to read a user's array and table files within bounds: the one
reader of ``.npy`` files, the check of a table's column names, the check of integer cells
before they are converted, the search for class or row numbers outside their range, the
wording of Arrow's CSV errors, and the checks that put a model's predictions in the form a
recorded result stores (class indices or probabilities aligned with a snapshot's rows).

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

from dsreg._util.inputs import input_file, shown, shown_all
from dsreg._util.lazy import lazy_imports
from dsreg.errors import DsregError, PredictionsError

# Imported when first called: a command reading a table seldom needs it (0.1 s to import).
with lazy_imports():
    import pyarrow.compute as pc

__all__ = [
    "CSV_BLOCK",
    "INT64_DIGITS",
    "OutOfRange",
    "aligned_predictions",
    "check_digit_cells",
    "check_probabilities",
    "csv_error",
    "open_npy",
    "out_of_range",
    "refuse_duplicate_columns",
    "topk_faults",
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
    if not len(values) or (values.min() >= 0 and values.max() < k):
        return None  # two passes without a temporary: the common case
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


# -- a model's predictions, in the form a recorded result stores ---------------------------------
def aligned_predictions(arr: Any, *, rows: int, classes: list[str], what: str) -> np.ndarray:
    """``arr`` checked and put in the form a result stores: ``rows`` class indices (int32,
    from indices or class names) or ``(rows, len(classes))`` probabilities (finite, not
    negative, each row summing above 0; float32 stays float32, other types become float64).
    ``PredictionsError`` naming ``what`` and the first offending value otherwise."""
    a = np.asarray(arr)
    k = len(classes)
    if a.ndim == 1:
        if len(a) != rows:
            raise PredictionsError(
                f"{what} hold {len(a)} labels, but the snapshot has {rows} rows: record "
                "predictions aligned with the snapshot's rows (row i predicts row i)"
            )
        if a.dtype.kind in "US":
            return _names_to_indices(a, classes, what)
        if a.dtype.kind not in "iu":
            raise PredictionsError(f"{what} are {a.dtype} labels; give class indices or names")
        bad = out_of_range(a, k)
        if bad is not None:
            raise PredictionsError(
                f"{what}: {bad.total} labels are outside [0, {k}), first {bad.first[0]} at row "
                f"{bad.at[0]}; the snapshot has {k} classes"
            )
        return np.ascontiguousarray(a, dtype="<i4")
    if a.ndim == 2 and a.dtype.kind in "iu" and 0 < a.shape[1] < k:
        return _top_classes(a, rows=rows, k=k, what=what)
    if a.ndim == 2 and a.dtype.kind in "fiu":
        if a.shape != (rows, k):
            raise PredictionsError(
                f"{what} are probabilities of shape {a.shape}; a result needs (rows, classes) "
                f"= ({rows}, {k}), aligned with the snapshot's rows and classes"
            )
        p = np.ascontiguousarray(a, dtype="<f4" if a.dtype == np.float32 else "<f8")
        check_probabilities(p, what)
        return p
    raise PredictionsError(
        f"{what} are a {a.dtype} array of shape {a.shape}; expected {rows} class indices, "
        f"({rows}, m) top-m class indices (m < {k}, best first) or ({rows}, {k}) probabilities"
    )


def topk_faults(a: np.ndarray, k: int) -> tuple[tuple[np.ndarray, str], ...]:
    """The rows of top-m class indices ``a`` that name a class outside ``[0, k)``, then those
    that name a class twice, each with how a refusal says it: what eval and a record refuse."""
    out = np.flatnonzero(((a < 0) | (a >= k)).any(axis=1))
    ordered = np.sort(a, axis=1)
    twice = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    return (out, f"a class outside [0, {k})"), (twice, "a class twice")


def _top_classes(a: np.ndarray, *, rows: int, k: int, what: str) -> np.ndarray:
    """``(rows, m)`` top-m class indices (m < k), each row m different classes, best first."""
    if len(a) != rows:
        raise PredictionsError(
            f"{what} hold top-{a.shape[1]} classes of {len(a)} rows, but the snapshot has {rows} "
            "rows: record predictions aligned with the snapshot's rows (row i predicts row i)"
        )
    for bad, why in topk_faults(a, k):
        if len(bad):
            raise PredictionsError(
                f"{what}: {len(bad)} rows name {why}, first row {int(bad[0])} "
                f"({a[bad[0]][:5].tolist()}); each row lists m different class indices of the "
                "snapshot, best first"
            )
    return np.ascontiguousarray(a, dtype="<i4")


def check_probabilities(p: np.ndarray, what: str) -> None:
    """Refuse (``PredictionsError`` naming ``what``) probabilities with a NaN, infinite or
    negative value or an all-zero row, a slice of rows at a time."""
    step = max(1, (1 << 22) // max(1, p.shape[1]))
    for start in range(0, len(p), step):
        part = p[start : start + step]
        finite = np.isfinite(part).all(axis=1)
        bad = np.flatnonzero(~finite | (part < 0).any(axis=1) | ~(part.sum(axis=1) > 0))
        if len(bad):
            row = start + int(bad[0])
            values = ", ".join(f"{x:.4g}" for x in p[row][:5].tolist())
            why = "NaN or infinite" if not finite[bad[0]] else "negative or all-zero"
            raise PredictionsError(
                f"{what}: row {row} holds {why} probabilities ({values}"
                f"{', …' if p.shape[1] > 5 else ''}); give finite, non-negative probabilities"
            )


def _names_to_indices(a: np.ndarray, classes: list[str], what: str) -> np.ndarray:
    names, inverse = np.unique(a, return_inverse=True)
    index = {c: i for i, c in enumerate(classes)}
    unknown = [str(x) for x in names.tolist() if str(x) not in index]
    if unknown:
        raise PredictionsError(
            f"{what}: {len(unknown)} predicted names are not classes of the snapshot, first "
            f"{unknown[0]!r}"
        )
    lookup = np.array([index[str(x)] for x in names.tolist()], dtype="<i4")
    return np.ascontiguousarray(lookup[inverse.ravel()])
