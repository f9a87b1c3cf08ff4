"""A published re-annotation file read as records, each with the place a message names it by
(docs/questions.md, "Files as published"): CSV, JSON Lines or Parquet.

A release's CSV files are not tidy: some separate their columns with ``;``, one is not UTF-8,
columns come in several orders, some have trailing unnamed columns. A CSV is decoded as UTF-8
(a byte-order mark dropped) and, where that fails, as Windows-1252 (which decodes nearly every
byte), else Latin-1; the record of the import says which. Its separator is the one of ``,``,
``;`` and tab that its header line holds most often, outside quotes. Columns are read by name;
one without a name holds nothing dsreg reads and is skipped. A record with more fields than
the header has names is refused by its line: its separators or quotes are not the header's.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsreg._util.inputs import INPUT_BYTES, input_file, read_input, shown
from dsreg._util.jsonread import loads_lines
from dsreg._util.lazy import lazy_imports
from dsreg.errors import RelabelingError
from dsreg.formats.inputfiles import refuse_duplicate_columns

with lazy_imports():
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = ["ENCODINGS", "PublishedFile", "Record", "read_published"]

# Tried in this order; the first that decodes the whole file is used.
ENCODINGS = ("utf-8", "cp1252", "latin-1")
_SEPARATORS = (",", ";", "\t")


@dataclass(frozen=True, slots=True)
class Record:
    """One record of the file: ``where`` names it in a message (``line 12`` of a CSV or JSON
    Lines file, the line its record starts on; ``row 3`` of a Parquet file), ``values`` its
    cells by column name."""

    where: str
    values: dict[str, Any]

    def text(self, column: str) -> str:
        """The cell as text, trimmed: ``""`` for an empty or absent cell."""
        value = self.values.get(column)
        if value is None:
            return ""
        return value.strip() if isinstance(value, str) else str(value).strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedFile:
    """A file's records and how it was read: ``encoding`` and ``separator`` (a CSV's; None for
    JSON Lines and Parquet), ``columns`` in the file's order."""

    path: Path
    columns: tuple[str, ...]
    records: tuple[Record, ...]
    encoding: str | None = None
    separator: str | None = None

    def refuse(self, record: Record | None, message: str) -> RelabelingError:
        """The refusal of ``message`` about ``record`` (None: the file as a whole), naming the
        file and the record's place."""
        where = f" {record.where}" if record is not None else ""
        return RelabelingError(f"{self.path}{where}: {message}")


def read_published(path: Path, *, what: str) -> PublishedFile:
    """``path``'s records: ``.csv``/``.tsv``/``.txt``, ``.jsonl``/``.ndjson`` or ``.parquet``."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _parquet(path, what)
    named = f"{what} {str(path)!r}"
    data = read_input(path, what=named, max_bytes=INPUT_BYTES, error=RelabelingError)
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl(path, data)
    if suffix in (".csv", ".tsv", ".txt"):
        return _csv(path, data)
    raise RelabelingError(
        f"{what} {str(path)!r} has an unknown type {path.suffix!r}; use .csv, .jsonl or .parquet"
    )


def _decoded(data: bytes) -> tuple[str, str]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for encoding in ENCODINGS:
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes every byte")


def _separator(header: str) -> str:
    """The separator the header line holds most often outside quotes (``,`` on a tie)."""
    counts = dict.fromkeys(_SEPARATORS, 0)
    quoted = False
    for ch in header:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in counts:
            counts[ch] += 1
    return max(_SEPARATORS, key=lambda s: counts[s])


def _csv(path: Path, data: bytes) -> PublishedFile:
    text, encoding = _decoded(data)
    first = text.split("\n", 1)[0]
    separator = _separator(first)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator, strict=True)
    records = []
    try:
        header = next(reader, None)
        if header is None:
            raise RelabelingError(f"{path} is empty; a re-annotation file has a header line")
        names = [h.strip() for h in header]
        if len(names) == 1:
            raise RelabelingError(
                f"{path} line 1: the header is one column, {shown(names[0])}: its columns are "
                "separated by none of ',', ';' or tab; save the file as CSV"
            )
        named = [n for n in names if n]
        refuse_duplicate_columns(named, what=f"{path} line 1", error=RelabelingError)
        start = reader.line_num + 1
        for cells in reader:
            where = f"line {start}"
            start = reader.line_num + 1
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(names):
                raise RelabelingError(
                    f"{path} {where}: {len(cells)} fields, but the header (line 1) names "
                    f"{len(names)} columns separated by {separator!r}; quote the cells that "
                    "hold the separator, or save the file with one separator throughout"
                )
            values = {n: c for n, c in zip(names, cells, strict=False) if n}
            records.append(Record(where, values))
    except csv.Error as e:
        raise RelabelingError(
            f"{path} line {reader.line_num}: not CSV dsreg can read ({e}); save it with "
            "quoted cells and one separator (',', ';' or tab)"
        ) from e
    columns = tuple(named)
    return PublishedFile(
        path=path, columns=columns, records=tuple(records), encoding=encoding, separator=separator
    )


def _jsonl(path: Path, data: bytes) -> PublishedFile:
    text, encoding = _decoded(data)
    records = []
    columns: dict[str, None] = {}
    hint = "; give one JSON object a line"
    for i, value in loads_lines(text, what=str(path), error=RelabelingError, hint=hint):
        if not isinstance(value, dict):
            raise RelabelingError(
                f"{path} line {i}: {shown(value)} is not a JSON object; give one object a line"
            )
        columns.update(dict.fromkeys(value))
        records.append(Record(f"line {i}", value))
    return PublishedFile(
        path=path, columns=tuple(columns), records=tuple(records), encoding=encoding
    )


def _parquet(path: Path, what: str) -> PublishedFile:
    input_file(path, what=f"{what} {str(path)!r}")
    try:
        table = pq.ParquetFile(path).read(use_pandas_metadata=False)
    except (pa.ArrowException, OSError) as e:
        raise RelabelingError(f"cannot read {what} {str(path)!r}: {e}") from e
    rows = table.to_pylist()
    return PublishedFile(
        path=path,
        columns=tuple(table.column_names),
        records=tuple(Record(f"row {i}", r) for i, r in enumerate(rows)),
    )
