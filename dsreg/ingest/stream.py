"""Label-only sources (``--labels F [--ids F]``, ``--table F`` without ``--files``) read, checked,
written and hashed a row group at a time, in bounded memory.

A 50-million-row label file never becomes Python lists: each batch of rows is checked (ids safe
and present, labels within the classes), written as the next row group of the canonical
examples table and hashed on the way into the store's staging file, in one pass. Uniqueness of
the ids is kept as one 64-bit hash per row (8 bytes a row): each row group's hashes sorted and
split by their top 8 bits as it streams by, each of those 256 ranges checked on its own at the
end (on both cores, never one copy of them all: 32 bits of each hash sorted, the few that repeat
compared whole); rows whose hashes collide are compared as strings, from the staged table,
before anything is installed.
The table's bytes are those the whole-table writer gave (``tests/golden``, "sources"): the
source is read in the batches ``pq.read_table`` and ``pacsv.read_csv`` made, and the fixed
columns are one chunk per row group, as the whole table's slices were.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dsreg._util.inputs import input_file, shown_all
from dsreg._util.jsonread import load_file
from dsreg.errors import DatasetFormatError
from dsreg.formats.arrays import first_unsafe, id_spellings
from dsreg.formats.inputfiles import csv_error, refuse_duplicate_columns
from dsreg.formats.names import lookalike_error
from dsreg.formats.tables import ROW_GROUP, base_schema, check_metadata_names, from_numpy
from dsreg.ingest.sources import MAX_INFERRED_CLASSES, check_example_id, map_label_npy, table_errors
from dsreg.ingest.treescan import encodes_utf8

__all__ = ["StreamSource", "Validation", "labels_stream", "read_ids", "table_stream"]

# pq.read_table's batches (the dataset scanner's default): a source's metadata columns are
# chunked as the whole-table reader chunked them, which the table's bytes depend on.
READ_BATCH = 1 << 17
# ids.txt is read this many bytes at a time.
IDS_BLOCK = 1 << 24
# The ids' hashes are kept in 256 ranges of their top 8 bits (a range of 50 million ids is
# 200,000 hashes: sorted in the CPU's caches), each range checked on its own at the end.
_RANGE_BITS = 8
_RANGE_STARTS = np.arange(1, 1 << _RANGE_BITS, dtype=np.uint64) << np.uint64(64 - _RANGE_BITS)
# Within a range, the 32 bits below the range's are sorted first (half the bytes of the whole
# hash, and twice the values per vector instruction); only hashes whose 32 bits repeat are
# compared whole. Unique ids repeat 32 of 40 bits about n**2 / 2**41 times: a few per range.
_KEY_SHIFT = np.uint64(64 - _RANGE_BITS - 32)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSource:
    """A label-only source read in pieces: ``pieces()`` yields tables of the columns
    ``id_column`` (absent: ids come from ``ids`` or are the row numbers), ``label_column`` and
    the metadata columns, chunked as the whole-table reader would have."""

    path: Path
    what: str
    id_column: str | None
    label_column: str
    classes: tuple[str, ...] | None
    schema: pa.Schema
    pieces: Callable[[list[str] | None], Iterator[pa.Table]]
    ids: Callable[[], Iterator[pa.Array]] | None = None
    ids_what: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def metadata(self) -> list[str]:
        return [n for n in self.schema.names if n not in (self.id_column, self.label_column)]


Pieces = Callable[[list[str] | None], Iterator[pa.Table]]


def _parquet_pieces(path: Path, only: list[str] | None, what: str) -> Pieces:
    def pieces(columns: list[str] | None) -> Iterator[pa.Table]:
        columns = columns or only
        try:
            pf = pq.ParquetFile(path)
            # A file of ids and labels alone, or those columns of it, is read a row group of
            # the examples table at a time: both columns are made one chunk a group, so their
            # chunks do not reach the bytes, and a single chunk of ids is not copied again.
            width = len(columns) if columns else len(pf.schema_arrow)
            batch = READ_BATCH if width > 2 else ROW_GROUP
            for i in range(pf.num_row_groups):
                for b in pf.iter_batches(batch_size=batch, row_groups=[i], columns=columns):
                    yield pa.Table.from_batches([b])
        except (pa.ArrowException, OSError) as e:
            raise DatasetFormatError(f"cannot read {what} {str(path)!r}: {e}") from e

    return pieces


def _csv_pieces(path: Path, only: list[str] | None, what: str) -> Pieces:
    opts = pacsv.ParseOptions(delimiter="\t" if path.suffix.lower() == ".tsv" else ",")

    def pieces(columns: list[str] | None) -> Iterator[pa.Table]:
        columns = columns or only
        conv = pacsv.ConvertOptions(include_columns=columns) if columns else None
        try:
            reader = pacsv.open_csv(path, parse_options=opts, convert_options=conv)
            for b in reader:
                yield pa.Table.from_batches([b])
        except pa.ArrowInvalid as e:
            if "conversion error" not in str(e):
                raise DatasetFormatError(f"cannot read {what} {str(path)!r}: {csv_error(e)}") from e
            # A later block holds values the first block's type cannot (a text cell in a
            # column of numbers): the whole-file reader infers the type again over all rows,
            # so for this file only, read it whole as before (not bounded in memory).
            try:
                table = pacsv.read_csv(path, parse_options=opts, convert_options=conv)
            except (pa.ArrowException, OSError) as e2:
                raise DatasetFormatError(
                    f"cannot read {what} {str(path)!r}: {csv_error(e2)}"
                ) from e2
            yield table
        except (pa.ArrowException, OSError) as e:
            raise DatasetFormatError(f"cannot read {what} {str(path)!r}: {csv_error(e)}") from e

    return pieces


def _open(path: Path, what: str, columns: list[str] | None) -> tuple[pa.Schema, Any]:
    input_file(path, what=f"{what} {str(path)!r}")
    suffix = path.suffix.lower()
    with table_errors(path, what):
        if suffix == ".parquet":
            schema = pq.read_schema(path)
            if columns:
                schema = pa.schema([schema.field(c) for c in columns])
            _ = schema.names  # decoded here: a column name need not be UTF-8
            return schema, _parquet_pieces(path, columns, what)
        if suffix in (".csv", ".tsv", ".txt"):
            opts = pacsv.ParseOptions(delimiter="\t" if suffix == ".tsv" else ",")
            conv = pacsv.ConvertOptions(include_columns=columns) if columns else None
            schema = pacsv.open_csv(path, parse_options=opts, convert_options=conv).schema
            _ = schema.names
            return schema, _csv_pieces(path, columns, what)
    raise DatasetFormatError(
        f"{what} {str(path)!r} has an unknown type {path.suffix!r}; use .parquet or .csv"
    )


def _check_columns(names: Sequence[str], path: Path, what: str) -> None:
    refuse_duplicate_columns(names, what=f"{what} {str(path)!r}", error=DatasetFormatError)


def table_stream(
    path: Path, *, id_column: str, label_column: str, classes: Sequence[str] | None
) -> StreamSource:
    """``--table F`` without ``--files``: the checks of ``sources.scan_table`` that need only
    the schema, now; the rest while streaming."""
    if id_column == label_column:
        raise DatasetFormatError(
            f"--id-column and --label-column both name column {id_column!r}; the example ids "
            "and the labels must be two columns"
        )
    schema, pieces = _open(path, "table", None)
    what = f"table {str(path)!r}"
    _check_columns(schema.names, path, "table")
    for col, flag in ((id_column, "--id-column"), (label_column, "--label-column")):
        if col not in schema.names:
            raise DatasetFormatError(
                f"{what} has no column {col!r} ({flag}); its columns are {schema.names}"
            )
    meta = [n for n in schema.names if n not in (id_column, label_column)]
    check_metadata_names(meta, what=what)
    return StreamSource(
        path=path,
        what=what,
        id_column=id_column,
        label_column=label_column,
        classes=tuple(classes) if classes is not None else None,
        schema=schema,
        pieces=pieces,
        provenance={
            "kind": "table",
            "id_column": id_column,
            "label_column": label_column,
            "files": False,
        },
    )


def labels_stream(
    path: Path, *, classes: Sequence[str] | None, ids: Path | None = None
) -> StreamSource:
    """``--labels F`` (``.npy``, or CSV/Parquet with one column or ``label``), ids the row
    numbers or, with ``ids``, read from ``ids.txt`` (one per line) or ``ids.json`` (a list)."""
    what = f"labels file {str(path)!r}"
    input_file(path, what=what)
    if path.suffix.lower() == ".npy":
        schema, pieces, fmt = _npy(path, what)
    else:
        schema, _ = _open(path, "labels file", None)
        _check_columns(schema.names, path, "labels file")
        if "label" in schema.names:
            col = "label"
        elif len(schema.names) == 1:
            col = schema.names[0]
        else:
            raise DatasetFormatError(
                f"{what} has columns {schema.names}; give one column, or one named 'label'"
            )
        schema, pieces = _open(path, "labels file", [col])
        fmt = path.suffix.lower().lstrip(".")
    provenance: dict[str, Any] = {"kind": "labels", "format": fmt}
    id_reader = None
    if ids is not None:
        id_reader = read_ids(ids)
        provenance["ids"] = ids.suffix.lower().lstrip(".")
    return StreamSource(
        path=path,
        what=what,
        id_column=None,
        label_column=schema.names[0],
        classes=tuple(classes) if classes is not None else None,
        schema=schema,
        pieces=pieces,
        ids=id_reader,
        ids_what=f"ids file {str(ids)!r}" if ids is not None else "",
        provenance=provenance,
    )


def _npy(path: Path, what: str) -> tuple[pa.Schema, Pieces, str]:
    # Mapped: the labels are read a row group at a time.
    arr = map_label_npy(path, what)

    def pieces(columns: list[str] | None) -> Iterator[pa.Table]:
        for lo in range(0, len(arr), ROW_GROUP):
            chunk = np.asarray(arr[lo : lo + ROW_GROUP], dtype=np.int64)
            yield pa.Table.from_arrays([from_numpy(chunk, pa.int64())], names=["label"])

    return pa.schema([pa.field("label", pa.int64())]), pieces, "npy"


def read_ids(path: Path) -> Callable[[], Iterator[pa.Array]]:
    """Example ids in row order: ``.txt`` one per line (streamed), ``.json`` a list of strings
    (parsed whole: JSON has no streaming form in the standard library; use .txt for tens of
    millions of rows)."""
    what = f"ids file {str(path)!r}"
    input_file(path, what=what)
    suffix = path.suffix.lower()
    if suffix == ".json":
        values = load_file(
            path,
            what=what,
            error=DatasetFormatError,
            hint="; give a JSON list of strings, or a .txt file of one id per line",
        )
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise DatasetFormatError(
                f"{what} must hold a JSON list of strings (the example ids in row order)"
            )

        def from_json() -> Iterator[pa.Array]:
            for lo in range(0, len(values), ROW_GROUP):
                chunk = values[lo : lo + ROW_GROUP]
                try:
                    ids = pa.array(chunk, type=pa.string())
                except UnicodeEncodeError:
                    # A "\ud800" escape JSON allows: a lone surrogate, which no UTF-8 holds.
                    bad = next(v for v in chunk if not encodes_utf8(v))
                    raise DatasetFormatError(
                        f"{what} holds the id {bad!a}, with a lone surrogate (half of a "
                        "UTF-16 pair) that is no character; write the ids as Unicode text"
                    ) from None
                yield ids

        return from_json
    if suffix != ".txt":
        raise DatasetFormatError(
            f"{what} has an unknown type {path.suffix!r}; use .txt (one id per line) or .json "
            "(a list of strings)"
        )

    def from_txt() -> Iterator[pa.Array]:
        rest = b""
        with open(path, "rb") as f:
            while True:
                block = f.read(IDS_BLOCK)
                data = rest + block
                if not block:
                    if data:
                        yield _lines(data if not data.endswith(b"\n") else data[:-1], what)
                    return
                cut = data.rfind(b"\n")
                if cut < 0:
                    rest = data
                    continue
                yield _lines(data[:cut], what)
                rest = data[cut + 1 :]

    return from_txt


def _lines(data: bytes, what: str) -> pa.Array:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DatasetFormatError(
            f"{what} is not UTF-8 text ({e.reason}); save the ids as UTF-8, one per line"
        ) from e
    lines = pc.split_pattern(pa.array([text], type=pa.large_string()), "\n").flatten()
    return pc.cast(pc.replace_substring_regex(lines, "\r$", ""), pa.string())


@dataclass(slots=True)
class Validation:
    """What the checks found while the rows streamed by (raised in ``finish``, in the order
    the whole-table checks ran: ids present, ids safe, ids unique, labels)."""

    what: str
    id_name: str
    unique_hint: str
    classes: tuple[str, ...] | None
    # Ids are unique in their spelling (``names.id_spelling``) unless lookalikes are allowed;
    # ``ids_what`` names the ids' own file, if they have one.
    allow_lookalikes: bool = False
    ids_what: str = ""
    rows: int = 0
    null_ids: int = 0
    unsafe: str | None = None
    hashes: list[list[np.ndarray]] = field(
        default_factory=lambda: [[] for _ in range(len(_RANGE_STARTS) + 1)]
    )
    label_max: int = -1
    bad_labels: int = 0
    bad_first: list[int] = field(default_factory=list)
    bad_rows: list[int] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)
    null_labels: int = 0

    def ids(
        self, groups: Sequence[pa.Array], hasher: Callable[[pa.ChunkedArray], np.ndarray]
    ) -> None:
        """Check the ids of consecutive row groups, in order: nulls counted, the first unsafe
        id kept, their spellings hashed in one call (a call costs a few milliseconds of its
        own) and kept a group at a time, sorted and split by the hashes' top bits."""
        for ids in groups:
            self.null_ids += ids.null_count
            if self.unsafe is None:
                self.unsafe = first_unsafe(ids)
        hashes = hasher(pa.chunked_array([self.spellings(ids) for ids in groups], pa.string()))
        start = 0
        for ids in groups:
            h = hashes[start : start + len(ids)]
            start += len(ids)
            h.sort()
            cuts = [0, *np.searchsorted(h, _RANGE_STARTS).tolist(), len(h)]
            for held, lo, hi in zip(self.hashes, cuts, cuts[1:], strict=False):
                if hi > lo:
                    held.append(h[lo:hi])

    def spellings(self, ids: pa.Array) -> pa.Array:
        """What uniqueness is checked on: each id's spelling, or the id if lookalikes are
        allowed. Identical ids have one spelling, so one check finds both."""
        return ids if self.allow_lookalikes else id_spellings(ids)

    def int_labels(self, arr: np.ndarray, start: int) -> None:
        k = len(self.classes) if self.classes is not None else None
        if len(arr):
            self.label_max = max(self.label_max, int(arr.max()))
        bad_mask = (arr < 0) if k is None else ((arr < 0) | (arr >= k))
        bad = np.flatnonzero(bad_mask)
        if len(bad):
            self.bad_labels += len(bad)
            room = 5 - len(self.bad_first)
            self.bad_first += arr[bad[:room]].tolist()
            self.bad_rows += (bad[:room] + start).tolist()

    def finish_ids(
        self, repeats: Callable[[np.ndarray], tuple[list[str], list[tuple[str, str]]]]
    ) -> None:
        """Raise what the checks found; ``repeats(hashes)`` finds, among the rows whose
        spellings have one of those hashes, the ids that occur more than once (sorted) and
        the lookalikes (``names.lookalike_ids``), reported after them."""
        if self.null_ids:
            raise DatasetFormatError(f"{self.what}: {self.null_ids} rows have no {self.id_name}")
        if self.unsafe is not None:
            check_example_id(self.unsafe)
        ranges, self.hashes = self.hashes, []
        with ThreadPoolExecutor(2) as pool:  # numpy sorts without the GIL
            repeated = [r for r in pool.map(_repeated, ranges) if len(r)]
        if repeated:
            dup, lookalikes = repeats(np.concatenate(repeated))
            if dup:
                raise DatasetFormatError(
                    f"{self.what}: {len(dup)} example ids occur more than once, first "
                    f"{shown_all(dup[:5])}; {self.unique_hint}"
                )
            if lookalikes:
                raise lookalike_error(self.ids_what or self.what, lookalikes)

    def finish_labels(self) -> tuple[str, ...]:
        """The class names (given, or inferred as ``sources._labels_to_index`` infers them)."""
        if self.null_labels:
            raise DatasetFormatError(
                f"{self.null_labels} rows of {self.what} have no label; label every row"
            )
        if self.rows == 0:
            raise DatasetFormatError(
                f"{self.what} holds no labels; a test set needs at least one row"
            )
        if self.unknown:
            unknown = sorted(self.unknown)
            raise DatasetFormatError(
                f"{self.what} has {len(unknown)} labels that name no class, first "
                f"{shown_all(unknown[:5])}; add them to the --classes file"
            )
        names = self.classes
        if names is None:
            k = self.label_max + 1
            if k > max(self.rows, MAX_INFERRED_CLASSES):
                raise DatasetFormatError(
                    f"{self.what}: the largest label is {k - 1}, so without a classes file it "
                    f"would name {k:,} classes for {self.rows:,} rows; give --classes FILE "
                    "naming every class (one per line), or check the labels"
                )
            names = tuple(str(i) for i in range(k))
        if self.bad_labels:
            raise DatasetFormatError(
                f"{self.what}: {self.bad_labels} labels are out of range [0, {len(names)}), "
                f"first {self.bad_first} at rows {self.bad_rows}; "
                "give a --classes file naming every class"
            )
        return names


def _repeated(parts: list[np.ndarray]) -> np.ndarray:
    """The hashes found more than once in ``parts`` (one range's), sorted and unique: their
    32 bits below the range's sorted and compared first, then the few hashes whose 32 bits
    repeat compared whole."""
    if not parts:
        return np.empty(0, dtype=np.uint64)
    h = np.concatenate(parts)
    parts.clear()
    keys = (h >> _KEY_SHIFT).astype(np.uint32)
    ordered = np.sort(keys)
    again = ordered[1:][ordered[1:] == ordered[:-1]]
    if not len(again):
        return np.empty(0, dtype=np.uint64)
    h = np.sort(h[np.isin(keys, again)])
    return np.unique(h[1:][h[1:] == h[:-1]])


@functools.lru_cache(maxsize=2)
def null_columns(n: int) -> tuple[pa.Array, pa.Array]:
    """The ``blob`` and ``size`` columns of ``n`` label-only rows (Arrow arrays are immutable:
    every full row group shares one pair, not 3 MB of nulls filled again for each)."""
    schema = base_schema()
    return pa.nulls(n, schema.field("blob").type), pa.nulls(n, schema.field("size").type)
