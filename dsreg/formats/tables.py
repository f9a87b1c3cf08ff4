"""The examples table: Parquet, one row per example, row i is position i.

Columns: ``example_id`` (string, unique), ``label`` (int32 index into the snapshot's classes),
``blob`` (payload digest, null for label-only sets), ``size`` (payload bytes, null likewise), then
the source's metadata columns. The bytes are written with fixed settings so that the same table
gives the same digest; ``tests/golden`` pins them.
"""

from __future__ import annotations

import collections
import concurrent.futures
import io
import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsreg._util.lazy import lazy_imports
from dsreg.errors import DatasetFormatError, ManifestError
from dsreg.formats.arrays import from_numpy, null_array
from dsreg.formats.corrections import COUNT_FIELDS
from dsreg.formats.parquet_footer import MAGIC, RowGroupJoiner, strip_created_by
from dsreg.objects.digest import short

# Imported when first called: a command reading a table seldom needs it (0.1 s to import).
with lazy_imports():
    import pyarrow.compute as pc

__all__ = [
    "BASE_COLUMNS",
    "RESERVED",
    "RESERVED_PREFIX",
    "ROW_GROUP",
    "VIEW_COLUMNS",
    "CanonicalWriter",
    "as_numpy",
    "base_schema",
    "check_metadata_names",
    "fold_case",
    "from_numpy",
    "parquet_bytes",
    "read_parquet_bytes",
    "served_metadata",
]

BASE_COLUMNS = ("example_id", "label", "blob", "size")
# The columns a view serves before the metadata columns (docs/queries.md, "Columns").
VIEW_COLUMNS = (
    "row",
    "example_id",
    "label",
    "label_name",
    "given_label",
    "verdict",
    "blob",
    "size",
    "suggested_label",
    "suggested_label_name",
    "score",
    *(f"votes_{f}" for f in COUNT_FIELDS),
)
# Names a metadata column may not take, compared as DuckDB compares identifiers (ASCII letters
# without case): the fixed and the view's columns, the names corrections tables and reports put
# beside them, and the column DuckDB numbers a Parquet file's rows in, which a view reads.
RESERVED = frozenset((*BASE_COLUMNS, *VIEW_COLUMNS, "labels", "label_counts", "file_row_number"))
# dsreg names its own relations in SQL with this prefix; no metadata column may start with it.
RESERVED_PREFIX = "__dsreg"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# Row groups of 256 Ki rows: DuckDB scans them in parallel and a chunked reader stays bounded.
ROW_GROUP = 1 << 18


def base_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("example_id", pa.string(), nullable=False),
            pa.field("label", pa.int32(), nullable=False),
            pa.field("blob", pa.string()),
            pa.field("size", pa.int64()),
        ]
    )


# The writer settings of every canonical table (fixed: they are part of every table's digest).
_SETTINGS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "store_schema": False,
    "version": "2.6",
    "data_page_version": "1.0",
}


def parquet_bytes(table: pa.Table) -> bytes:
    """The canonical Parquet bytes of a table (fixed writer settings, no pandas/arrow metadata).

    A table of several row groups is encoded a group at a time on several threads
    (``CanonicalWriter``), each group the table's slice as one writer would slice it: the same
    bytes as one writer's, in a fraction of the time on more than one core."""
    table = table.replace_schema_metadata(None)
    if table.num_rows > ROW_GROUP:
        out = io.BytesIO()
        writer = CanonicalWriter(out, table.schema)
        try:
            for lo in range(0, table.num_rows, ROW_GROUP):
                writer.write(table.slice(lo, ROW_GROUP))
        except BaseException:
            writer.abort()
            raise
        writer.close()
        return out.getvalue()
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=ROW_GROUP, **_SETTINGS)
    # The footer's created_by names the pyarrow release: without it, the same table gets the
    # same digest whichever pyarrow wrote it (as long as the encoding itself is unchanged).
    return strip_created_by(buf.getvalue())


class _Sink(Protocol):
    def write(self, data: bytes | memoryview, /) -> int: ...


# The bytes of row groups CanonicalWriter holds while they are encoded (beyond the first).
IN_FLIGHT = 256 << 20


def _encode_group(group: pa.Table, schema: pa.Schema) -> pa.Buffer:
    """One row group as a Parquet file of its own (``parquet_join`` joins them)."""
    out = pa.BufferOutputStream()
    with pq.ParquetWriter(out, schema, **_SETTINGS) as writer:
        writer.write_table(group, row_group_size=ROW_GROUP)
    return out.getvalue()


class CanonicalWriter:
    """``parquet_bytes`` of a table given a row group at a time, into ``sink.write``.

    ``write(group)`` takes exactly ``ROW_GROUP`` rows (fewer only for the last group); the
    bytes equal ``parquet_bytes`` of the whole table when each group's columns are chunked as
    that table's slices would be (Parquet page boundaries follow Arrow chunk boundaries).

    The encoder (pyarrow's, one thread per file) is most of the cost of writing a table. It runs
    off the caller's thread, so the caller prepares the next group meanwhile, on ``threads``
    threads (default: the cores, at most 4), each group a file of its own, joined in order
    (``model.parquet_join``: the same bytes as one writer's). At most ``threads + 1`` groups are
    held at a time, and while more than one is, at most ``IN_FLIGHT`` bytes of them (a wide
    table's groups are encoded fewer at a time)."""

    def __init__(self, sink: _Sink, schema: pa.Schema, *, threads: int | None = None) -> None:
        self._sink = sink
        self._schema = schema.remove_metadata()
        threads = threads or max(1, min(4, os.cpu_count() or 1))
        self._threads = threads
        self._pool = concurrent.futures.ThreadPoolExecutor(threads)
        self._pending: collections.deque[concurrent.futures.Future[pa.Buffer]] = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()
        self._joiner = RowGroupJoiner()
        self._last = False
        self.rows = 0

    def write(self, group: pa.Table) -> None:
        if self._last or len(group) > ROW_GROUP:
            raise ValueError("row groups of ROW_GROUP rows, only the last one shorter")
        self._last = len(group) < ROW_GROUP
        table = group.replace_schema_metadata(None)
        self._pending.append(self._pool.submit(_encode_group, table, self._schema))
        self._sizes.append(table.nbytes)
        self.rows += len(group)
        while len(self._pending) > self._threads or (
            len(self._pending) > 1 and sum(self._sizes) > IN_FLIGHT
        ):
            self._sizes.popleft()
            self._put(self._pending.popleft().result())

    def _put(self, part: pa.Buffer) -> None:
        if not self._joiner.groups:
            self._sink.write(MAGIC)
        self._sink.write(self._joiner.add(part))

    def abort(self) -> None:
        """Give up: stop encoding, with nothing more reaching the sink."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=True)

    def close(self) -> None:
        """Write the groups still encoding and the footer (without ``created_by``, as
        ``parquet_bytes``)."""
        try:
            while self._pending:
                self._put(self._pending.popleft().result())
        finally:
            self._pool.shutdown(wait=True)
        if not self._joiner.groups:  # no rows: one writer's file without row groups
            out = pa.BufferOutputStream()
            pq.ParquetWriter(out, self._schema, **_SETTINGS).close()
            self._sink.write(strip_created_by(out.getvalue().to_pybytes()))
            return
        self._sink.write(strip_created_by(self._joiner.footer()))


def read_parquet_bytes(
    data: bytes, *, digest: str, columns: Sequence[str] | None = None
) -> pa.Table:
    """Parse Parquet bytes already verified against ``digest``."""
    # ParquetFile, not read_table: the dataset machinery behind read_table imports pandas,
    # which costs a checkout more than reading the table does.
    # Decoded in this thread only (no pre-buffering, no Arrow pool threads): ``data`` is a
    # Python object, and an Arrow worker that drops the last reference to it must take the GIL.
    # At interpreter exit that kills the worker inside a C++ destructor: "terminate called
    # without an active exception" (tests/reliability/test_stress_abort.py runs it under load).
    try:
        table = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).read(
            columns=list(columns) if columns else None,
            use_threads=False,
            use_pandas_metadata=False,
        )
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"table {short(digest)} is not readable Parquet: {e}") from e
    return _with_columns(table, columns, digest)


def read_parquet_mapped(
    data: pa.Buffer,
    *,
    digest: str,
    columns: Sequence[str] | None = None,
    keep: np.ndarray | None = None,
) -> pa.Table:
    """Parse Parquet held in an Arrow buffer already verified against ``digest`` (a memory
    map of the object: ``repo.tables.read_examples``), decoding its columns on Arrow's
    threads. Unlike ``read_parquet_bytes`` no Python object backs the bytes, so a worker
    dropping its reference never needs the GIL (the reason that one decodes on one thread).

    ``keep`` (a boolean per row of the file): only those rows, each row group filtered as
    it is decoded, so the whole file's columns are never held beside the rows kept (a view
    of 50 million rows that removes a few: 0.5 GB of ids decoded once, not twice)."""
    cols = list(columns) if columns else None
    try:
        meta = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).metadata
        groups = meta.num_row_groups
        # Arrow decodes a file's columns in parallel but a column's row groups one after
        # another, and one column (the ids) is most of the work: runs of row groups are
        # decoded side by side instead, each by its own reader over the same buffer.
        workers = max(1, min(os.cpu_count() or 1, groups))
        cuts = [groups * i // workers for i in range(workers + 1)]

        if keep is not None and len(keep) != meta.num_rows:
            raise ManifestError(
                f"table {short(digest)} has {meta.num_rows} rows; {len(keep)} were selected"
            )
        starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(groups)])

        def run(lo: int, hi: int) -> pa.Table:
            pf = pq.ParquetFile(pa.BufferReader(data), metadata=meta, pre_buffer=False)
            if keep is None:
                return pf.read_row_groups(
                    range(lo, hi), columns=cols, use_threads=True, use_pandas_metadata=False
                )
            parts = []
            for g in range(lo, hi):
                mask = keep[starts[g] : starts[g + 1]]
                part = pf.read_row_group(g, columns=cols, use_threads=True)
                parts.append(part if mask.all() else part.filter(from_numpy(mask, pa.bool_())))
            return pa.concat_tables(parts) if parts else pf.schema_arrow.empty_table()

        # A column whose every chunk's statistics count only nulls (a label-only set's blob
        # and size) is not decoded: its nulls are made over zeroed pages (model.arrays).
        schema = meta.schema.to_arrow_schema()
        empty = _all_null(meta, schema) & set(cols if cols is not None else schema.names)
        if empty:
            cols = [c for c in (cols if cols is not None else schema.names) if c not in empty]
        if workers == 1:
            table = run(0, groups)
        else:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                parts = list(pool.map(run, cuts[:-1], cuts[1:]))
            table = pa.concat_tables(parts)
        if empty:
            n = meta.num_rows if keep is None else int(np.count_nonzero(keep))
            wanted = [
                c
                for c in (list(columns) if columns else schema.names)
                if c in empty or c in table.column_names
            ]
            fields = [table.schema.field(c) if c not in empty else schema.field(c) for c in wanted]
            table = pa.Table.from_arrays(
                [
                    null_array(schema.field(c).type, n) if c in empty else table.column(c)
                    for c in wanted
                ],
                schema=pa.schema(fields, metadata=table.schema.metadata),
            )
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"table {short(digest)} is not readable Parquet: {e}") from e
    return _with_columns(table, columns, digest)


def _with_columns(table: pa.Table, columns: Sequence[str] | None, digest: str) -> pa.Table:
    """``table``, refused if it lacks a column the caller asked for."""
    absent = [c for c in columns or () if c not in table.column_names]
    if absent:
        raise ManifestError(f"table {short(digest)} has no column {absent[0]!r}")
    return table


def _all_null(meta: pq.FileMetaData, schema: pa.Schema) -> set[str]:
    """Top-level flat columns whose statistics, in every row group, count as many nulls as
    the group has rows (only such a column: none when statistics are absent)."""
    flat = {f.name for f in schema if not pa.types.is_nested(f.type)}
    if not meta.num_row_groups:
        return set()
    out = set(flat)
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        for i in range(rg.num_columns):
            c = rg.column(i)
            name = c.path_in_schema
            if name not in out:
                continue
            st = c.statistics
            if st is None or not st.has_null_count or st.null_count != rg.num_rows:
                out.discard(name)
    return out


def fold_case(name: str) -> str:
    """``name`` as DuckDB matches identifiers: ASCII letters lowered, every other kept."""
    return name.translate(_ASCII_LOWER)


def _reserved(name: str) -> bool:
    folded = fold_case(name)
    return folded in RESERVED or folded.startswith(RESERVED_PREFIX)


def check_metadata_names(names: Sequence[str], *, what: str) -> None:
    """Refuse metadata columns a view could not serve as themselves: a name of ``RESERVED`` or
    starting with ``RESERVED_PREFIX``, or two names DuckDB takes for one (``Split``, ``split``)."""
    clash = [n for n in names if _reserved(n)]
    if clash:
        raise DatasetFormatError(
            f"{what} has metadata columns {clash} whose names dsreg's views use (reserved: "
            f"{', '.join(sorted(RESERVED))} and any name starting with {RESERVED_PREFIX!r}, "
            "in any case); rename them"
        )
    seen: dict[str, str] = {}
    for n in names:
        other = seen.setdefault(fold_case(n), n)
        if other != n:
            raise DatasetFormatError(
                f"{what} has metadata columns {other!r} and {n!r}, which SQL takes for one "
                "column (it matches names without case); rename one"
            )


def served_metadata(names: Sequence[str]) -> list[str]:
    """The metadata columns of an examples table (``names``: all its columns) that a view serves,
    in order: every column but the fixed ones, less any whose name a view column or dsreg's
    own SQL takes, or an earlier column takes without case. ``dsreg add`` refuses such names
    (``check_metadata_names``); a table made otherwise keeps them, unserved, so that no
    metadata column can change the rows, labels or columns a view serves."""
    seen: set[str] = set()
    out = []
    for n in names:
        folded = fold_case(n)
        if _reserved(n) or folded in seen:
            continue
        seen.add(folded)
        out.append(n)
    return out


def check_examples(table: pa.Table, *, classes: Sequence[str]) -> None:
    """Refuse an examples table that breaks the data model (before anything is written)."""
    names = table.column_names
    if tuple(names[:4]) != BASE_COLUMNS:
        raise DatasetFormatError(f"examples table must start with {BASE_COLUMNS}, got {names[:4]}")
    check_metadata_names(names[4:], what="the examples table")
    ids = table.column("example_id")
    if ids.null_count:
        raise DatasetFormatError(f"{ids.null_count} example ids are empty; every example needs one")
    counts = pc.value_counts(ids)
    # Only Arrow-side checks on the common path: a Python scalar in a compute call makes
    # pyarrow import pandas, which costs an add more time and memory than the checks.
    if len(counts) != len(ids):
        dup = counts.filter(pc.greater(counts.field("counts"), 1))
        first = [v.as_py() for v in dup.field("values")[:5]]
        raise DatasetFormatError(
            f"{len(dup)} example ids occur more than once, first {first}; "
            "example ids must be unique"
        )
    labels = table.column("label")
    if labels.null_count:
        raise DatasetFormatError(f"{labels.null_count} examples have no label")
    if len(table):
        lo_hi = pc.min_max(labels).as_py()
        if lo_hi["min"] < 0 or lo_hi["max"] >= len(classes):
            bad = pc.or_(pc.less(labels, 0), pc.greater_equal(labels, len(classes)))
            vals = labels.filter(bad)
            rows = pc.indices_nonzero(bad)
            where = f" at rows {rows[:5].to_pylist()}"
            raise DatasetFormatError(
                f"{len(vals)} labels are out of range [0, {len(classes)}), first "
                f"{vals[:5].to_pylist()}{where}; give a --classes file naming every class"
            )


def as_numpy(col: pa.Array | pa.ChunkedArray, *, fill: int | None = None) -> np.ndarray:
    """A numeric or boolean column as numpy; nulls become ``fill`` (given for nullable columns).

    pyarrow's own ``to_numpy``, ``pa.array`` and ``pa.scalar`` import pandas (a third of a second
    at start-up, for a command that takes two), so null-free numeric buffers are viewed
    directly and nulls are filled in numpy."""
    if isinstance(col, pa.ChunkedArray):
        # No chunks at all (an empty result): combine_chunks would import pandas.
        if col.num_chunks == 0:
            col = pa.nulls(0, col.type)
        else:
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    t = col.type
    if pa.types.is_boolean(t):
        return as_numpy(pc.cast(col, pa.int8()), fill=fill).astype(bool)
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)) or (col.null_count and fill is None):
        return np.asarray(col.to_numpy(zero_copy_only=False))
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    if not len(col):
        return np.empty(0, dtype)
    values = np.frombuffer(
        col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * dtype.itemsize
    )
    if not col.null_count:
        return values
    valid = np.unpackbits(np.frombuffer(col.buffers()[0], dtype=np.uint8), bitorder="little")[
        col.offset : col.offset + len(col)
    ].astype(bool)
    return np.where(valid, values, fill if fill is not None else 0)
