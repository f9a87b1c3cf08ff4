"""``dsreg sql``: a query's rows written as a text table, CSV, JSON or Parquet, streamed in
record batches (bounded memory, except the text table, which aligns its columns)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any

import pyarrow as pa

from dsreg._util.choices import check_choice
from dsreg._util.fs import replacing
from dsreg.errors import DsregError, StorageError
from dsreg.registry.reader import Reader
from dsreg.views.sql import Connection

__all__ = ["SQL_FORMATS", "text_table", "write_query"]

SQL_FORMATS = ("table", "csv", "json", "parquet")
_BINARY = ("csv", "parquet")  # pyarrow's writers write bytes


def write_query(
    reader: Reader,
    query: str,
    output: str | os.PathLike[str] | IO[Any],
    *,
    format: str | None = None,
    allow_files: bool = False,
) -> int:
    """Run ``query`` and write its rows to ``output`` (a path, or a text or binary stream) in
    ``format`` (default: the path's suffix if a format's, else ``table``); return how many rows
    were written. The query is read-only unless ``allow_files`` (``dsreg.views.sql``); the
    revisions it names are read through ``reader``."""
    if format is None:
        suffix = os.path.splitext(output)[1][1:] if isinstance(output, str | os.PathLike) else ""
        format = suffix if suffix in _BINARY or suffix == "json" else "table"
    check_choice(format, SQL_FORMATS, option="--format")
    with Connection(reader, allow_files=allow_files) as con:
        schema, batches = con.batches(query)
        if isinstance(output, str | os.PathLike):
            # Beside it, then renamed over it: a failing query or an interrupted write leaves
            # no partial file, and an existing one whole.
            try:
                with replacing(output, text=format not in _BINARY) as f:
                    return _write(format, schema, batches, f)
            except DsregError:
                raise  # the query's own error (a corrupt object is an OSError too)
            except OSError as e:
                raise StorageError(f"cannot write {output}: {e.strerror}", path=str(output)) from e
        return _write_stream(format, schema, batches, output)


def _write_stream(fmt: str, schema: pa.Schema, batches: Iterator[Any], stream: IO[Any]) -> int:
    text = isinstance(stream, io.TextIOBase) or hasattr(stream, "encoding")
    if fmt in _BINARY and text:
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            # A text stream without bytes below it (a notebook's, a test's StringIO).
            buf = io.BytesIO()
            n = _write(fmt, schema, batches, buf)
            stream.write(buf.getvalue().decode("utf-8", errors="replace"))
            return n
        stream.flush()  # what the text layer holds goes first
        stream = buffer
    elif fmt not in _BINARY and not text:
        wrapper = io.TextIOWrapper(stream, encoding="utf-8", write_through=True)
        try:
            return _write(fmt, schema, batches, wrapper)
        finally:
            wrapper.detach()  # the caller's stream stays open
    n = _write(fmt, schema, batches, stream)
    stream.flush()
    return n


def _write(fmt: str, schema: pa.Schema, batches: Iterator[Any], stream: IO[Any]) -> int:
    n = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(stream, schema) as w:
            for b in batches:
                w.write_batch(b)
                n += b.num_rows
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(stream, schema) as w:
            for b in batches:
                w.write_batch(b)
                n += b.num_rows
    elif fmt == "json":
        stream.write("[")
        for b in batches:
            for r in b.to_pylist():
                stream.write(("\n  " if not n else ",\n  ") + json.dumps(r, default=str))
                n += 1
        stream.write("\n]\n" if n else "]\n")
    else:
        rows = [
            ["NULL" if v is None else str(v) for v in r.values()]
            for b in batches
            for r in b.to_pylist()
        ]
        stream.write(text_table(rows, list(schema.names)) + "\n")
        n = len(rows)
    return n


def text_table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """Columns aligned by spaces, a header line first; trailing spaces stripped."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)
