"""A votes CSV read column by column into `VoteColumns`: the one reader of the CSV format.

The file is read with Arrow a block (16 MiB) at a time (``pyarrow.csv.open_csv``, parsed as
Python's csv module parses it: quotes, doubled quotes, line breaks inside quotes), and every
rule of the format is checked on each block's columns: cells are stripped of white space as
``str.strip`` strips it, blank lines are skipped, ids are non-empty, labels are classes (by
name, by name without case when only one class matches, or by index; ambiguous otherwise),
counts are whole numbers, ``given`` is present, ``guessed`` goes with a suggested label. Only
the ids and the labels and counts as numbers are kept, never the file's seven text columns
whole, and no Python object per record.

A file that breaks a rule is refused in the words of the record-by-record checks
(``refusals.py``), which run only then and name the lines at fault. Labels that are not classes
in a file that is otherwise well formed are counted here, every one, and only their lines are
looked up (one pass of Python's csv reader, which would report a syntax error first).
"""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dsreg.formats.arrays import from_numpy, string_array
from dsreg.formats.tables import as_numpy
from dsreg.overlays.votes.model import (
    COUNT_COLUMNS,
    CSV_COLUMNS,
    INT32_MAX,
    SHOWN,
    Classes,
    Count,
    KeyRoute,
    VoteColumns,
)
from dsreg.overlays.votes.refusals import UnknownLabel, refuse_labels, refuse_unreadable

__all__ = ["read_csv_votes"]

# The CSV is read in blocks of this many bytes (about 400,000 votes of the usual width).
_BLOCK: Final = 16 << 20
# The place of a digit in a cell of at most nine.
_PLACES: Final = 10 ** np.arange(9, dtype=np.int64)


class _Refused(Exception):
    """A rule of the format is broken somewhere in the file: the line-by-line checks say where."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Votes:
    """What a block of the file (or the whole file) holds, checked: ids, labels and counts as
    numbers, and the label cells that are not classes (the first `SHOWN` of them named)."""

    ids: pa.Array
    given: np.ndarray
    suggested: np.ndarray
    has_suggested: np.ndarray
    counts: dict[str, Count]
    unknown_count: int
    unknown: tuple[UnknownLabel, ...]


def read_csv_votes(path: Path, classes: Classes, *, dataset: str) -> VoteColumns:
    """Every record of a votes CSV, checked and read into columns; ``path`` is a regular file
    (the caller checks it, before it hashes the file).

    Raises
    ------
    VotesError
        The file is not UTF-8 text, is empty or is not CSV, has another header, or a line
        breaks a rule (the first such line named); labels that are not classes (all counted,
        the first five named by line); no votes.
    InputPathError
        The file cannot be read.
    """
    why: str | None = None
    try:
        votes = _read(path, classes)
    except _Refused as refused:
        why = str(refused)
    if why is not None:
        refuse_unreadable(path, classes, dataset=dataset, why=why)
    if votes.unknown_count:
        count = votes.unknown_count
        refuse_labels(path, votes.unknown, votes.ids, classes, count=count, dataset=dataset)
    return VoteColumns(
        routes=(KeyRoute(keys=votes.ids),),
        given=votes.given.astype(np.int32),
        suggested=votes.suggested.astype(np.int32),
        has_suggested=votes.has_suggested,
        counts=votes.counts,
    )


def _read(path: Path, classes: Classes) -> _Votes:
    """Every block of the file checked and reduced to numbers, joined."""
    header = _header(path)
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(encoding="utf8", block_size=_BLOCK),
            parse_options=pacsv.ParseOptions(
                newlines_in_values=True, invalid_row_handler=_skip_blank
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(header, pa.string()),
                strings_can_be_null=False,
                null_values=[],
            ),
        )
        if reader.schema.names != list(header) or any(
            t != pa.string() for t in reader.schema.types
        ):
            raise _Refused("Arrow reads another header than Python's csv module")
        blocks: list[_Votes] = []
        # Each block is checked on a second thread while the reader parses the next (Arrow's
        # kernels release the GIL); a few blocks in flight at most.
        with ThreadPoolExecutor(2) as pool:
            ahead: deque[Future[_Votes]] = deque()
            for batch in reader:
                ahead.append(pool.submit(_block, batch, header, classes))
                while len(ahead) > 2:
                    blocks.append(ahead.popleft().result())
            blocks.extend(f.result() for f in ahead)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise _Refused(str(exc)) from exc
    if not any(len(b.ids) for b in blocks):
        raise _Refused("no votes")
    return _concat(blocks)


def _header(path: Path) -> dict[str, str]:
    """The header's cells as they are, each mapped to the column it names once stripped."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            cells = next(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error, StopIteration) as exc:
        raise _Refused(f"no header: {exc}") from exc
    names = [cell.strip() for cell in cells]
    if sorted(names) != sorted(CSV_COLUMNS):
        raise _Refused(f"header {cells}")
    return dict(zip(cells, names, strict=True))


def _skip_blank(row: pacsv.InvalidRow) -> str:
    """A line of another number of fields is skipped if it is blank, as Python's csv module
    reads it (white space, or commas between nothing); any other is refused."""
    try:
        cells = next(csv.reader([row.text]), [])
    except csv.Error:
        return "error"
    return "error" if any(cell.strip() for cell in cells) else "skip"


def _concat(blocks: list[_Votes]) -> _Votes:
    """The blocks as one, their records numbered in the file."""
    unknown: list[UnknownLabel] = []
    start = 0
    for b in blocks:
        unknown.extend(u._replace(record=start + u.record) for u in b.unknown)
        start += len(b.ids)
    return _Votes(
        ids=pa.concat_arrays([b.ids for b in blocks]),
        given=np.concatenate([b.given for b in blocks]),
        suggested=np.concatenate([b.suggested for b in blocks]),
        has_suggested=np.concatenate([b.has_suggested for b in blocks]),
        counts={
            name: Count(
                values=np.concatenate([b.counts[name].values for b in blocks]),
                present=np.concatenate([b.counts[name].present for b in blocks]),
            )
            for name in COUNT_COLUMNS
        },
        unknown_count=sum(b.unknown_count for b in blocks),
        unknown=tuple(unknown[:SHOWN]),
    )


def _block(batch: pa.RecordBatch, header: Mapping[str, str], classes: Classes) -> _Votes:
    """One block's columns checked by every rule of the format; `_Refused` on the first
    broken one."""
    cells = {name: _stripped(batch.column(raw)) for raw, name in header.items()}
    cells = _without_blank_lines(cells)
    ids = cells["example_id"]
    if len(ids) and pc.min(pc.binary_length(ids)).as_py() == 0:
        raise _Refused("a line has no example_id")
    counts = {name: _count(cells[name], name) for name in COUNT_COLUMNS}
    if not counts["given"].present.all():
        raise _Refused("a line has no 'given' count")
    suggested_cells = cells["suggested_label"]
    has_suggested = as_numpy(pc.greater(pc.binary_length(suggested_cells), _int(0)))
    guessed = counts["guessed"]
    if (~has_suggested & (guessed.values > 0)).any():
        raise _Refused("a line counts votes for the suggested label but names none")
    if (has_suggested & ~guessed.present).any():
        raise _Refused("a line names a suggested label but has no 'guessed' count")
    given, bad_given = _labels(cells["given_label"], classes)
    if not has_suggested.all():
        # A stand-in for the empty cells, whose reading is not used.
        present = from_numpy(has_suggested, pa.bool_())
        suggested_cells = pc.if_else(present, suggested_cells, _text("0"))
    suggested, bad_suggested = _labels(suggested_cells, classes)
    bad_suggested = bad_suggested[has_suggested[bad_suggested]]
    # Only the first few are worded; the rest are counted.
    found: list[tuple[int, str]] = [(int(r), "given") for r in bad_given[:SHOWN]]
    found += [(int(r), "suggested") for r in bad_suggested[:SHOWN]]
    # A line's given label before its suggested one.
    first = sorted(found, key=lambda f: (f[0], f[1] != "given"))[:SHOWN]
    column = {"given": cells["given_label"], "suggested": cells["suggested_label"]}
    return _Votes(
        ids=ids,
        given=given,
        suggested=suggested,
        has_suggested=has_suggested,
        counts=counts,
        unknown_count=len(bad_given) + len(bad_suggested),
        unknown=tuple(
            UnknownLabel(r, c, str(classes.cell(column[c][r].as_py()))) for r, c in first
        ),
    )


def _stripped(cells: pa.Array) -> pa.Array:
    """Cells stripped of white space as ``str.strip`` strips it (Arrow's Unicode white space is
    Python's, character for character). A cell longer than Python's csv module reads is
    refused, as the record-by-record checks refuse it. Cells whose bytes are all printable
    ASCII other than the space hold none: most columns, left as they are."""
    limit = csv.field_size_limit()
    if (
        len(cells)
        and pc.max(pc.binary_length(cells)).as_py() > limit
        and pc.max(pc.utf8_length(cells)).as_py() > limit
    ):
        raise _Refused(f"a cell longer than {limit:,} characters")
    data = cells.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    if not raw.size or (raw.min() > 0x20 and raw.max() < 0x80):
        return cells
    return pc.utf8_trim_whitespace(cells)


def _without_blank_lines(cells: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """The cells without the lines whose cells are all empty (blank lines are skipped; a
    blank line has an empty id, so most blocks are not looked at twice)."""
    ids = cells["example_id"]
    if not len(ids) or pc.min(pc.binary_length(ids)).as_py() > 0:
        return cells
    blank = np.ones(len(ids), dtype=bool)
    for column in cells.values():
        blank &= as_numpy(pc.binary_length(column)) == 0
    if not blank.any():
        return cells
    keep = from_numpy(~blank, pa.bool_())
    return {name: column.filter(keep) for name, column in cells.items()}


def _digits(cells: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """Each cell as the whole number its ASCII digits write (an empty cell: 0), and each
    cell's length; None unless every cell is at most nine digits and nothing else (the
    callers' general path decides those). Read from the bytes directly, in numpy (whose
    arrays go back to the system when freed, before the join needs the memory): cells of
    one length as rows of a matrix, others each digit weighted by its place and summed."""
    if cells.null_count or not pa.types.is_string(cells.type):
        return None
    _, offsets_buffer, data_buffer = cells.buffers()
    ends = np.frombuffer(offsets_buffer, dtype=np.int32, count=cells.offset + len(cells) + 1)
    ends = ends[cells.offset :]
    lengths = np.diff(ends)
    longest = int(lengths.max()) if len(lengths) else 0
    if longest > 9:
        return None
    lo, hi = int(ends[0]), int(ends[-1])
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8, count=hi - lo, offset=lo)
        if hi > lo
        else np.empty(0, dtype=np.uint8)
    )
    if data.size and (data.min() < ord("0") or data.max() > ord("9")):
        return None
    digits = data.astype(np.int64) - ord("0")
    if not longest:  # no cells, or every one empty
        return np.zeros(len(cells), dtype=np.int64), lengths
    if longest == int(lengths.min()):
        return digits.reshape(len(cells), longest) @ _PLACES[longest - 1 :: -1], lengths
    # Each digit times its place in its cell, summed per cell (exact: below 10**9 < 2**53).
    cell = np.repeat(np.arange(len(cells)), lengths)
    place = np.repeat(ends[1:] - lo, lengths) - 1 - np.arange(len(digits))
    values = np.bincount(cell, weights=digits * _PLACES[place], minlength=len(cells))
    return values.astype(np.int64), lengths


def _labels(cells: pa.Array, classes: Classes) -> tuple[np.ndarray, np.ndarray]:
    """Class indices of label cells, read by the format's rule (``Classes.cell``), -1 where a
    cell is no class; and the positions of those cells."""
    # ASCII digits, one to nine of them: read from the bytes (``_digits``) when every cell is.
    read = _digits(cells)
    if read is not None and (not len(cells) or read[1].min() > 0):
        digits = True
    else:
        read = None
        test = pc.and_(pc.ascii_is_decimal(cells), pc.less_equal(pc.binary_length(cells), _int(9)))
        digits = bool(pc.all(test).as_py())
    if digits and not classes.any_name_is_an_index():
        # Every cell reads as an index and no class name does: no cell can be ambiguous.
        index = read[0] if read is not None else as_numpy(pc.cast(cells, pa.int64()))
        bad = np.flatnonzero(index >= len(classes.names))
        if len(bad):
            index = index.copy()
            index[bad] = -1
        return index, bad
    # Otherwise each distinct cell once, in Python (a column of labels has few distinct ones).
    encoded = pc.dictionary_encode(cells)
    found = [classes.cell(cell) for cell in encoded.dictionary.to_pylist()]
    by_code = np.array([-1 if isinstance(f, str) else f for f in found], dtype=np.int64)
    index = by_code[as_numpy(encoded.indices).astype(np.int64)]
    return index, np.flatnonzero(index < 0)


def _count(cells: pa.Array, name: str) -> Count:
    """Whole-number cells of count ``name`` (an empty cell: absent); `_Refused` on any other."""
    read = _digits(cells)
    if read is not None:  # every cell empty or at most nine digits: the usual file
        values, lengths = read
        return Count(values=values.astype(np.int32), present=lengths > 0)
    lengths = pc.binary_length(cells)
    if len(cells) and pc.max(lengths).as_py() > 10:
        raise _Refused(f"a {name} count of more than ten characters")
    present = pc.greater(lengths, _int(0))
    if pc.all(present).as_py():
        whole = pc.all(pc.ascii_is_decimal(cells)).as_py()
    else:
        whole = pc.all(pc.or_(pc.invert(present), pc.ascii_is_decimal(cells))).as_py()
        cells = pc.if_else(present, cells, _text("0"))
    if not whole:
        raise _Refused(f"a {name} count that is not a whole number")
    values = as_numpy(pc.cast(cells, pa.int64()))
    if len(values) and values.max() > INT32_MAX:
        raise _Refused(f"a {name} count past the largest int32")
    return Count(values=values.astype(np.int32), present=as_numpy(present))


def _int(value: int) -> pa.Scalar:
    """An int32 scalar made from a numpy buffer: ``pa.scalar`` and Python numbers handed to
    compute functions make pyarrow import pandas (0.2 s of every import; formats/arrays.py)."""
    return from_numpy(np.array([value]), pa.int32())[0]


def _text(value: str) -> pa.Scalar:
    """A string scalar made without ``pa.scalar`` (see ``_int``)."""
    return string_array([value])[0]
