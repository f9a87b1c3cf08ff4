"""Votes CSV in, corrections out: the column-by-column import (#15). The record-by-record
parser, whose messages name the lines at fault, is ``votes_lines``.

``csv_votes`` reads the file with Arrow a block at a time (``pyarrow.csv.open_csv``), checks every
rule of ``parse_csv`` and of the matching in ``votes`` on each block's columns, and
keeps only what the corrections need (the ids, and the labels and counts as int32), never the
file's seven string columns whole. Ids are matched to rows by a DuckDB hash join of the votes'
ids against the snapshot's examples table, read by DuckDB's own Parquet reader (row groups on
every thread, spilling under a memory cap): 50 million ids are never decoded into Python or
Arrow at once. It builds the corrections table the record-by-record path builds, value for
value (so the overlay digest is the same). It answers for files that pass every check, and
refuses, in the record reader's words, label cells that are not classes and records that do not
fit the snapshot; on anything else it does not accept it returns None, and the caller runs the
record-by-record path (``import_votes``), whose messages name the lines at fault.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dsreg.formats.arrays import from_numpy, string_array
from dsreg.formats.corrections import CORRECTIONS_SCHEMA, COUNT_FIELDS, VOTES_TYPE
from dsreg.formats.tables import as_numpy
from dsreg.overlays.votes_base import (
    DIGITS,
    INT32_MAX,
    SHOWN,
    VoteImport,
    VoteSnapshot,
    describe_label,
    refuse_label_mismatch,
    refuse_twice,
    refuse_unknown_ids,
    refuse_unknown_labels,
)
from dsreg.overlays.votes_lines import CSV_COLUMNS, csv_label

__all__ = ["csv_votes"]

_COLUMNS: Final = CSV_COLUMNS
_COUNTS: Final = ("given", "guessed", "both", "neither")
_VERDICTS: Final = ("non_error", "correctable", "multi_label", "neither", "non_agreement")
# The CSV is read in blocks of this many bytes (about 400,000 votes of the usual width).
_BLOCK: Final = 16 << 20
# DuckDB's cap for the join: the hash table of 5 million votes' ids fits in it; beyond, it spills
# to a temporary folder that is removed afterwards. Two threads at most on a shared machine
# would leave cores idle on a bigger one: up to four.
_MEMORY_LIMIT: Final = "768MB"
_THREADS: Final = max(1, min(4, os.cpu_count() or 1))
# A label column with more distinct cells than this goes the record-by-record way (a column of
# labels has about as many as the classes, spelt one way or two).
_DISTINCT: Final = 1 << 16

Examples = Callable[[], "Path | pa.Table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Block:
    """What one block of the votes file contributes: the ids and the values as numbers."""

    ids: pa.Array
    given_label: np.ndarray
    suggested: np.ndarray
    has_suggested: np.ndarray
    counts: dict[str, np.ndarray]
    present: dict[str, np.ndarray]
    # Label cells that are not classes: how many, and the first ``SHOWN`` as the record reader
    # words them, (record, 0 for given_label or 1 for suggested_label, why). Records are
    # numbered in the block, then (``_read``) in the file.
    unknown_count: int = 0
    unknown: tuple[tuple[int, int, str], ...] = ()


def csv_votes(
    path: Path,
    *,
    threshold: int,
    examples: Examples,
    classes: tuple[str, ...],
    dataset: str,
) -> VoteImport | None:
    """A votes CSV imported column by column, or None when the file needs ``import_votes``'s
    record-by-record path (anything unusual in the file itself: its messages name the lines).

    ``examples()`` gives the snapshot's ``example_id`` and ``label`` columns in row order: the
    path of a verified Parquet file, or an Arrow table; it is called only once the votes
    themselves pass. A file that reads cleanly but does not fit the snapshot (an unknown id,
    an example voted twice, a given label that differs from the snapshot's) is refused here,
    with the record-by-record reader's message word for word: the lines it names are found by
    one streaming pass over the file, so a refusal holds no more than an import does.

    Raises
    ------
    VotesError
        Label cells that are not classes (refused before the snapshot is read), an unknown
        example id, an example voted twice, or a given label that is not the snapshot's.
    """
    # The classes as the record reader looks labels up (exact, without case, by index).
    snapshot = VoteSnapshot.build(
        dataset, pa.chunked_array([], pa.string()), np.empty(0, dtype=np.int64), classes
    )
    fast = _read(path, snapshot)
    if fast is None:
        return None
    # parse_csv refuses labels that are not classes before any id is matched: so here, before
    # the snapshot is read. False: the lines cannot be named (the other path).
    if fast.unknown_count and not _refuse_labels(path, fast, snapshot):
        return None
    source = examples()
    joined = _join(fast.ids, source)
    if joined is None:
        return None  # a snapshot id at two rows: the other path's message says which
    rows, labels = joined
    unknown = np.flatnonzero(rows < 0)
    order = np.argsort(rows, kind="stable")  # fast on rows sorted already
    by_row = rows[order]
    again = np.flatnonzero(by_row[1:] == by_row[:-1]) + 1 if not len(unknown) else unknown[:0]
    wrong = np.flatnonzero(labels != fast.given_label) if not len(again) else again[:0]
    if len(unknown) or len(again) or len(wrong):
        n = source.num_rows if isinstance(source, pa.Table) else _parquet_rows(source)
        if not _refuse(path, fast, rows, labels, order, unknown, again, wrong, dataset, n, classes):
            return None
    in_order = len(rows) < 2 or bool((rows[1:] > rows[:-1]).all())
    table, per_verdict, raters = _corrections(fast, rows, None if in_order else order, threshold)
    return VoteImport(
        table=table,
        summary={
            "checked": table.num_rows,
            "errors": table.num_rows - per_verdict["non_error"],
            **per_verdict,
        },
        params={"format": "csv", "threshold": threshold, "raters": raters},
        inputs={},
        joined_labels=labels if in_order else labels[order],
    )


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def _refuse(
    path: Path,
    fast: _Block,
    rows: np.ndarray,
    labels: np.ndarray,
    order: np.ndarray,
    unknown: np.ndarray,
    again: np.ndarray,
    wrong: np.ndarray,
    dataset: str,
    n: int,
    classes: tuple[str, ...],
) -> bool:
    """Raise the record-by-record reader's refusal for the first kind of problem found:
    ``unknown`` records (file order), ``again`` (positions in ``order`` whose row the position
    before it already holds), ``wrong`` labels (file order). False when the lines to name cannot
    be told apart by the streaming pass (the caller then takes the record-by-record path)."""
    if len(unknown):
        lines = _lines(path, unknown[:SHOWN], fast.ids)
        if lines is None:
            return False
        shown = [f"{lines[i]} (tried {_id(fast, i)!r})" for i in unknown[:SHOWN].tolist()]
        refuse_unknown_ids(path, shown, dataset, n, count=len(unknown))
    if len(again):
        # ``order`` sorts the rows stably, so the record before each repeat in ``order`` is
        # either the first record voting on that row or another repeat of it.
        starts = np.ones(len(order), dtype=bool)
        starts[again] = False
        first_at = order[np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))]
        repeats = order[again]
        by_file = np.argsort(repeats, kind="stable")[:SHOWN]
        pairs = [(int(first_at[again[j]]), int(repeats[j])) for j in by_file.tolist()]
        lines = _lines(path, np.array(sorted({i for p in pairs for i in p})), fast.ids)
        if lines is None:
            return False
        shown = [
            f"row {int(rows[b])} ({_id(fast, b)!r}) by {lines[a]} and {lines[b]}" for a, b in pairs
        ]
        refuse_twice(path, shown, count=len(again))
    if len(wrong):
        lines = _lines(path, wrong[:SHOWN], fast.ids)
        if lines is None:
            return False
        shown = [
            f"{lines[i]} -> row {int(rows[i])} ({_id(fast, i)!r}): file says "
            f"{describe_label(classes, int(fast.given_label[i]))}, snapshot says "
            f"{describe_label(classes, int(labels[i]))}"
            for i in wrong[:SHOWN].tolist()
        ]
        refuse_label_mismatch(path, shown, dataset, count=len(wrong))
    return False


def _refuse_labels(path: Path, fast: _Block, snapshot: VoteSnapshot) -> bool:
    """Raise the record reader's refusal of label cells that are not classes: every one
    counted, the first ``SHOWN`` named by line, in file order (a record's given label before
    its suggested one). False when the lines cannot be named: the whole file is read by
    Python's csv reader first, as ``parse_csv`` reads it, so a syntax error anywhere (which it
    would report instead) sends the file the other way."""
    shown = fast.unknown
    lines = _lines(path, np.array(sorted({r for r, _c, _w in shown})), fast.ids, whole=True)
    if lines is None:
        return False
    column = ("given", "suggested")
    problems = [f"{lines[r]}: {column[c]} label {why}" for r, c, why in shown]
    refuse_unknown_labels(path, problems, snapshot, count=fast.unknown_count)
    return False


def _id(fast: _Block, i: int) -> str:
    return str(fast.ids[i].as_py())


def _lines(
    path: Path, records: np.ndarray, ids: pa.Array, *, whole: bool = False
) -> dict[int, str] | None:
    """How the record-by-record reader names each of ``records`` (indices in file order):
    ``line N ('id')``, found by one streaming pass of Python's csv reader that stops after the
    last of them (with ``whole``, at the end of the file: a syntax error anywhere is None). None
    if a record's id there is not the one the columnar reader read."""
    want = set(records.tolist())
    if not want:
        return {}
    last = max(want)
    out: dict[int, str] = {}
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = [name.strip() for name in next(reader)]
            col = header.index("example_id")
            i = 0
            for line in reader:
                if not any(cell.strip() for cell in line):
                    continue
                if i in want:
                    if len(line) != len(header) or line[col].strip() != ids[i].as_py():
                        return None
                    out[i] = f"line {reader.line_num} ({line[col].strip()!r})"
                    if i == last and not whole:
                        break
                i += 1
    except (OSError, UnicodeDecodeError, csv.Error, StopIteration, ValueError):
        return None
    return out if len(out) == len(want) else None


def _read(path: Path, snapshot: VoteSnapshot) -> _Block | None:
    """Every block of the file checked and reduced to numbers, joined; None for anything the
    record-by-record path must judge."""
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(encoding="utf8", block_size=_BLOCK),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(_COLUMNS, pa.string()),
                strings_can_be_null=False,
                null_values=[],
            ),
        )
    except (pa.ArrowException, OSError, UnicodeDecodeError):
        return None
    names = reader.schema.names
    if names and names[0].startswith("\ufeff"):
        return None
    if sorted(names) != sorted(_COLUMNS):
        return None
    blocks: list[_Block | None] = []
    # Each block is checked on a second thread while the reader parses the next (Arrow's
    # kernels release the GIL); a few blocks in flight at most.
    with ThreadPoolExecutor(2) as pool:
        ahead: deque[Future[_Block | None]] = deque()
        try:
            for batch in reader:
                if batch.num_rows:
                    ahead.append(pool.submit(_block, batch, snapshot))
                while len(ahead) > 2:
                    blocks.append(ahead.popleft().result())
            blocks.extend(f.result() for f in ahead)
        except (pa.ArrowException, OSError, UnicodeDecodeError):
            return None
    if any(b is None for b in blocks):
        return None
    done = [b for b in blocks if b is not None]
    if not done:
        return None
    unknown: list[tuple[int, int, str]] = []
    start = 0
    for b in done:
        unknown.extend((start + r, c, why) for r, c, why in b.unknown)
        start += len(b.ids)
    return _Block(
        unknown_count=sum(b.unknown_count for b in done),
        unknown=tuple(unknown[:SHOWN]),
        ids=pa.concat_arrays([b.ids for b in done]),
        given_label=np.concatenate([b.given_label for b in done]),
        suggested=np.concatenate([b.suggested for b in done]),
        has_suggested=np.concatenate([b.has_suggested for b in done]),
        counts={k: np.concatenate([b.counts[k] for b in done]) for k in _COUNTS},
        present={k: np.concatenate([b.present[k] for b in done]) for k in _COUNTS},
    )


def _block(batch: pa.RecordBatch, snapshot: VoteSnapshot) -> _Block | None:
    """One block's columns checked by every rule of ``parse_csv``; None on the first doubt."""
    cols = {name: batch.column(name) for name in _COLUMNS}
    if any(col.null_count for col in cols.values()):
        return None
    # Ids with spaces around them go the other path, which strips them (label cells are read
    # stripped, as it reads them; a count is taken only as ASCII digits).
    ids = cols["example_id"]
    if not pc.all(pc.equal(pc.utf8_trim_whitespace(ids), ids)).as_py():
        return None
    if pc.min(pc.binary_length(cols["example_id"])).as_py() == 0:
        return None
    read = _labels(cols["given_label"], snapshot)
    if read is None:
        return None
    given_label, bad_given = read
    has_sug = pc.greater(pc.binary_length(cols["suggested_label"]), _int(0))
    all_sug = pc.all(has_sug).as_py()
    sug_cells = cols["suggested_label"]
    read = _labels(sug_cells if all_sug else pc.if_else(has_sug, sug_cells, _text("0")), snapshot)
    if read is None:
        return None
    sug, bad_sug = read
    has_sug_np = as_numpy(has_sug)
    if not has_sug_np[bad_sug].all():
        return None  # the "0" standing in for an empty cell is no class here: the other path
    # Only the first few are worded, by the record reader's own csv_label; the rest counted.
    first = sorted(
        [(int(r), 0) for r in bad_given[:SHOWN]] + [(int(r), 1) for r in bad_sug[:SHOWN]]
    )[:SHOWN]
    label_cols = (cols["given_label"], cols["suggested_label"])
    unknown = tuple(
        (r, c, str(csv_label(snapshot, label_cols[c][r].as_py().strip()))) for r, c in first
    )
    counts: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    for name in _COUNTS:
        got = _count(cols[name])
        if got is None:
            return None
        counts[name], present[name] = got
    if not present["given"].all():
        return None
    if (~has_sug_np & (counts["guessed"] > 0)).any() or (has_sug_np & ~present["guessed"]).any():
        return None
    return _Block(
        unknown_count=len(bad_given) + len(bad_sug),
        unknown=unknown,
        ids=cols["example_id"],
        given_label=given_label.astype(np.int32),
        suggested=sug.astype(np.int32),
        has_suggested=has_sug_np,
        counts={k: v.astype(np.int32) for k, v in counts.items()},
        present=present,
    )


def _join(ids: pa.Array, examples: Path | pa.Table) -> tuple[np.ndarray, np.ndarray] | None:
    """The snapshot row and label of each voted id (-1 for an unknown id), by a DuckDB hash join
    built on the votes and probed by the snapshot's rows; None if an id names two rows."""
    import duckdb

    spill = tempfile.mkdtemp(prefix="dsreg-votes-")
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET memory_limit = '{_MEMORY_LIMIT}'")
        con.execute(f"SET threads = {_THREADS}")
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET temp_directory = ?", [spill])
        votes = pa.table({"i": from_numpy(np.arange(len(ids)), pa.int64()), "example_id": ids})
        con.register("__dsreg_votes", votes)
        if isinstance(examples, pa.Table):
            rows = from_numpy(np.arange(examples.num_rows), pa.int64())
            con.register("__dsreg_examples", examples.append_column("row", rows))
            source = "SELECT example_id, label, row FROM __dsreg_examples"
            params: list[Any] = []
        else:
            source = (
                "SELECT example_id, label, file_row_number AS row "
                "FROM read_parquet(?, file_row_number = true)"
            )
            params = [str(examples)]
        got = con.execute(
            f"SELECT v.i, e.row, e.label FROM __dsreg_votes AS v JOIN ({source}) AS e "
            "ON e.example_id = v.example_id",
            params,
        ).fetchnumpy()
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    at = np.asarray(got["i"], dtype=np.int64)
    if len(at) > len(ids) or (len(at) and np.bincount(at, minlength=len(ids)).max() > 1):
        return None  # a snapshot id at two rows: the record-by-record path's message says which
    rows = np.full(len(ids), -1, dtype=np.int64)
    labels = np.full(len(ids), -1, dtype=np.int64)
    rows[at] = np.asarray(got["row"], dtype=np.int64)
    labels[at] = np.asarray(got["label"], dtype=np.int64)
    return rows, labels


def _corrections(
    fast: _Block, rows: np.ndarray, order: np.ndarray | None, threshold: int
) -> tuple[pa.Table, dict[str, int], int | None]:
    """The corrections table sorted by row (``order`` sorts ``rows``; None when they are sorted
    already, as in a file written in row order), the count of each verdict, the raters per
    record."""

    def by_row(values: np.ndarray) -> np.ndarray:
        return values if order is None else values[order]

    t = threshold
    g, q, b, n = (fast.counts[k] for k in _COUNTS)
    # The rule's first match wins: the codes are set from the last test to the first.
    verdict_code = np.full(len(rows), 4, dtype=np.int8)
    for code, count in ((3, n), (2, b), (1, q), (0, g)):
        verdict_code[count >= t] = code
    fields = []
    for name in COUNT_FIELDS:
        if name in fast.counts:
            values, valid = by_row(fast.counts[name]), by_row(fast.present[name])
            fields.append(from_numpy(values, pa.int32(), valid=valid))
        else:
            fields.append(pa.nulls(len(rows), pa.int32()))
    votes = pa.StructArray.from_arrays(fields, fields=list(VOTES_TYPE))
    m = len(rows)
    ids = fast.ids if order is None else pc.take(fast.ids, from_numpy(order, pa.int64()))
    out = pa.Table.from_arrays(
        [
            from_numpy(by_row(rows), pa.int64()),
            ids,
            from_numpy(by_row(fast.given_label), pa.int32()),
            from_numpy(by_row(fast.suggested), pa.int32(), valid=by_row(fast.has_suggested)),
            pc.take(string_array(_VERDICTS), from_numpy(by_row(verdict_code), pa.int8())),
            pa.nulls(m, pa.float64()),
            votes,
        ],
        schema=CORRECTIONS_SCHEMA,
    )
    per = np.bincount(verdict_code, minlength=5)
    summary = {v: int(c) for v, c in zip(_VERDICTS, per, strict=True)}
    # np.unique of 5 million totals: seconds (numpy hashes them); a min and a max instead.
    totals = g.astype(np.int64) + q + b + n
    same = len(totals) > 0 and totals.min() == totals.max() != 0
    raters = int(totals[0]) if same else None
    return out, summary, raters


def _labels(cells: pa.Array, snapshot: VoteSnapshot) -> tuple[np.ndarray, np.ndarray] | None:
    """Class indices of label cells, read by the record reader's own rule (``csv_label`` of the
    cell stripped: an exact name, the only name matching without case, or an index; agreeing
    when a cell is both), and the positions of the cells it does not accept (ambiguous, not a
    class; their index is -1). None when there are too many distinct cells to look up."""
    classes = snapshot.classes
    # ASCII digits, one to nine of them (``ascii_is_decimal`` is false on an empty cell).
    digits = pc.and_(pc.ascii_is_decimal(cells), pc.less_equal(pc.binary_length(cells), _int(9)))
    if pc.all(digits).as_py() and not any(_is_index(c) for c in classes):
        # Every cell reads as an index and no class name does: no cell can be ambiguous.
        index = as_numpy(pc.cast(cells, pa.int64()))
        bad = np.flatnonzero(index >= len(classes))
        if len(bad):
            index = index.copy()
            index[bad] = -1
        return index, bad
    # Otherwise each distinct cell once, in Python (a column of labels has few distinct ones).
    encoded = pc.dictionary_encode(cells)
    if len(encoded.dictionary) > _DISTINCT:
        return None
    found = [csv_label(snapshot, cell.strip()) for cell in encoded.dictionary.to_pylist()]
    codes = as_numpy(encoded.indices).astype(np.int64)
    index = np.array([-1 if isinstance(f, str) else f for f in found], dtype=np.int64)[codes]
    return index, np.flatnonzero(index < 0)


def _int(value: int) -> pa.Scalar:
    """An int32 scalar made from a numpy buffer: ``pa.scalar`` and Python numbers handed to
    compute functions make pyarrow import pandas (0.2 s of every import; formats/arrays.py)."""
    return from_numpy(np.array([value]), pa.int32())[0]


def _text(value: str) -> pa.Scalar:
    """A string scalar made without ``pa.scalar`` (see ``_int``)."""
    return string_array([value])[0]


def _is_index(name: str) -> bool:
    """Whether a class name also reads as a class index (``parse_csv``'s ambiguity)."""
    return bool(DIGITS.fullmatch(name))


def _count(cells: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """Whole-number cells (empty: absent) as int64 values and a presence mask."""
    lengths = pc.binary_length(cells)
    if len(cells) and pc.max(lengths).as_py() > 10:
        return None
    present = pc.greater(lengths, _int(0))
    if pc.all(present).as_py():
        if not pc.all(pc.ascii_is_decimal(cells)).as_py():
            return None
        values = as_numpy(pc.cast(cells, pa.int64()))
    else:
        if not pc.all(pc.or_(pc.invert(present), pc.ascii_is_decimal(cells))).as_py():
            return None
        values = as_numpy(pc.cast(pc.if_else(present, cells, _text("0")), pa.int64()))
    if len(values) and values.max() > INT32_MAX:
        return None
    return values, as_numpy(present)
