"""``dsreg add`` of a label-only source, streamed (``stream.py``): one pass reads, checks,
writes and hashes the examples table a row group at a time; nothing is installed (and the tag
not moved) until every check has passed.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsreg.errors import DatasetFormatError
from dsreg.formats.manifests import Revision, Snapshot
from dsreg.formats.names import pair_lookalikes
from dsreg.formats.tables import ROW_GROUP, CanonicalWriter, as_numpy, base_schema, from_numpy
from dsreg.ingest.result import AddResult, AddTarget, check_names, refuse_moved_tag
from dsreg.ingest.snapshot import tag_snapshot
from dsreg.ingest.stream import StreamSource, Validation, null_columns
from dsreg.registry.folder import Registry

__all__ = ["add_stream"]

_INT32_MAX = (1 << 31) - 1
# Row groups read ahead, and checked behind, the one being written: a few groups of slack
# between the threads (a label-only group of 256 Ki rows is a few MB), so that one thread
# waiting for a core does not stall the others on a busy machine. A source whose groups are
# larger than WIDE bytes (many metadata columns) is read one group ahead only.
AHEAD = 3
WIDE = 64 << 20
# Row groups whose ids are checked (and hashed by DuckDB) in one call.
HASHED_TOGETHER = 4


def add_stream(
    reg: Registry, target: AddTarget, src: StreamSource, *, allow_lookalike_ids: bool = False
) -> AddResult:
    """Store a label-only ``src`` as a snapshot of the target's dataset; point its tag at it.
    (It takes no progress hook: the rows stream by faster than a bar would be drawn.)"""
    check_names(target.dataset, target.tag)
    classes = _classes(src)
    schema = base_schema()
    for name in src.metadata:
        schema = schema.append(src.schema.field(name))
    v = _validation(src, classes, allow_lookalike_ids)
    hasher = _IdHasher() if src.id_column or src.ids is not None else None
    with reg.lock():
        existing = target.existing(reg)
        with reg.store.writer() as out:
            writer = CanonicalWriter(out, schema)
            try:
                _write_groups(src, _Sink(writer, schema, classes, v, hasher))
            except BaseException:
                writer.abort()
                raise
            writer.close()
            out.flush()
            v.finish_ids(lambda cand: _repeats(out.path, cand, hasher, v.spellings))
            snap = Snapshot(
                dataset=target.dataset,
                examples=out.peek(),
                rows=v.rows,
                classes=v.finish_labels(),
                source=target.provenance(src.provenance),
            )
            refuse_moved_tag(target, existing, Revision(snapshot=reg.digest_of(snap)).digest)
            out.commit()
        tagged = tag_snapshot(reg, target, snap)
    return tagged.result(target, snap, files=0, new_objects=0, size=0)


def _classes(src: StreamSource) -> tuple[str, ...] | None:
    """The class names: as given, or (text labels without them) the labels' sorted values.
    Refuses labels that are neither integers nor text."""
    label_type = src.schema.field(src.label_column).type
    if not (pa.types.is_integer(label_type) or _is_text(label_type)):
        raise DatasetFormatError(
            f"{src.what} has labels of type {label_type}; use integers (class indices) or "
            "class names"
        )
    if src.classes is None and _is_text(label_type):
        return _label_names(src)
    return src.classes


def _validation(
    src: StreamSource, classes: tuple[str, ...] | None, allow_lookalike_ids: bool
) -> Validation:
    """The checks of the rows as they stream by, with the words their errors use."""
    if src.id_column:
        id_name, hint = repr(src.id_column), f"the {src.id_column!r} column must be unique"
    else:
        id_name, hint = "example id", f"the ids of {src.ids_what} must be unique"
    return Validation(
        what=src.what,
        id_name=id_name,
        unique_hint=hint,
        classes=classes,
        allow_lookalikes=allow_lookalike_ids,
        ids_what=src.ids_what,
    )


@dataclass(frozen=True, slots=True)
class _Sink:
    """Where the row groups go: the staged table's writer and schema, the class names text
    labels are looked up in, the checks, and the id hasher (``None``: ids are row numbers)."""

    writer: CanonicalWriter
    schema: pa.Schema
    classes: tuple[str, ...] | None
    v: Validation
    hasher: _IdHasher | None

    def write(self, src: StreamSource, group: pa.Table, ids: pa.Array) -> None:
        """Write one row group of ``src`` as rows of the examples table: ids, labels, metadata."""
        n = len(group)
        labels = _labels(group.column(src.label_column), self.classes, self.v, self.v.rows)
        blob, size = null_columns(n)
        meta = [group.column(c) for c in src.metadata]
        self.writer.write(
            pa.Table.from_arrays([ids, labels, blob, size, *meta], schema=self.schema)
        )
        self.v.rows += n


def _write_groups(src: StreamSource, sink: _Sink) -> None:
    """Read, check and write the source a row group at a time: the next groups read on one
    thread, the ids of this one checked on another while it is written (Arrow, DuckDB and the
    Parquet writer release the GIL), one group at a time, in order."""
    ids_left = _Rebatch(src.ids()) if src.ids is not None else None
    checking = ThreadPoolExecutor(1)
    reading = ThreadPoolExecutor(1)
    pending: deque[Future[None]] = deque()
    held: list[pa.Array] = []  # ids of groups not yet handed to the checks

    def check(last: bool) -> None:
        if sink.hasher is None or not held or (len(held) < HASHED_TOGETHER and not last):
            return
        while len(pending) >= AHEAD:
            pending.popleft().result()
        pending.append(checking.submit(sink.v.ids, held.copy(), sink.hasher))
        held.clear()

    try:
        for group in _prefetch(_groups(src.pieces(None)), reading):
            ids = _group_ids(src, group, sink.v.rows, ids_left)
            held.append(ids)
            check(last=False)
            sink.write(src, group, ids)
        check(last=True)
        if ids_left is not None:
            extra = ids_left.rest()
            if extra:
                _length_mismatch(src, sink.v.rows + extra, sink.v.rows)
        while pending:
            pending.popleft().result()
    finally:
        checking.shutdown(wait=True)
        reading.shutdown(wait=True, cancel_futures=True)


def _group_ids(
    src: StreamSource, group: pa.Table, start: int, ids_left: _Rebatch | None
) -> pa.Array:
    """The ids of the row group that starts at row ``start``: the id column's, the --ids
    file's next ones, or the row numbers."""
    n = len(group)
    if src.id_column is not None:
        ids = _id_text(group.column(src.id_column), src)
        if ids.null_count:
            nulls = sum(p.column(0).null_count for p in src.pieces([src.id_column]))
            raise DatasetFormatError(f"{src.what}: {nulls} rows have no {src.id_column!r}")
        return ids
    if ids_left is not None:
        ids = ids_left.take(n)
        if len(ids) < n:
            _length_mismatch(src, start + len(ids), _labels_total(src))
        return ids
    return pc.cast(from_numpy(np.arange(start, start + n), pa.int64()), pa.string())


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _label_names(src: StreamSource) -> tuple[str, ...]:
    """Without --classes, text labels name the classes in sorted order (a pass over the
    label column alone: a few distinct values per batch)."""
    seen: set[str] = set()
    for piece in src.pieces([src.label_column]):
        seen.update(v for v in pc.unique(piece.column(0)).to_pylist() if v is not None)
    return tuple(sorted(seen))


def _prefetch(groups: Iterator[pa.Table], pool: ThreadPoolExecutor) -> Iterator[pa.Table]:
    """``groups``, the next ones read on another thread while this one is written (reading and
    decoding the source releases the GIL): ``AHEAD`` groups ahead (one for a wide source), in
    order (one thread)."""
    ahead = deque([pool.submit(next, groups, None)])
    depth = AHEAD
    while True:
        group = ahead.popleft().result()
        if group is None:
            return
        if group.nbytes > WIDE:
            depth = 1
        while len(ahead) < depth:
            ahead.append(pool.submit(next, groups, None))
        yield group


def _groups(pieces: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The source's pieces as row groups of ``ROW_GROUP`` rows (the last one shorter), each
    column chunked as the slice of the whole table would be."""
    held: list[pa.Table] = []
    have = 0
    for piece in pieces:
        held.append(piece)
        have += len(piece)
        while have >= ROW_GROUP:
            table = pa.concat_tables(held)
            yield table.slice(0, ROW_GROUP)
            rest = table.slice(ROW_GROUP)
            held = [rest] if len(rest) else []
            have = len(rest)
    if have:
        yield pa.concat_tables(held)


class _Rebatch:
    """Arrays of any lengths taken ``n`` values at a time (the ids of an --ids file)."""

    def __init__(self, arrays: Iterator[pa.Array]) -> None:
        self._it = arrays
        self._held: list[pa.Array] = []
        self._have = 0

    def take(self, n: int) -> pa.Array:
        while self._have < n:
            nxt = next(self._it, None)
            if nxt is None:
                break
            self._held.append(nxt)
            self._have += len(nxt)
        whole = pa.concat_arrays(self._held) if self._held else pa.array([], pa.string())
        out, rest = whole.slice(0, n), whole.slice(n)
        self._held = [rest] if len(rest) else []
        self._have = len(rest)
        return pa.concat_arrays([out]) if len(out) else out

    def rest(self) -> int:
        return self._have + sum(len(a) for a in self._it)


def _labels_total(src: StreamSource) -> int:
    return sum(len(p) for p in src.pieces([src.label_column]))


def _length_mismatch(src: StreamSource, n_ids: int, n_labels: int) -> None:
    raise DatasetFormatError(
        f"{src.ids_what} holds {n_ids:,} ids for the {n_labels:,} labels of {src.what}; give "
        "one id per label, in row order"
    )


def _id_text(col: pa.ChunkedArray, src: StreamSource) -> pa.Array:
    try:
        text = pc.cast(col if _is_text(col.type) else pc.cast(col, pa.string()), pa.string())
        # One chunk is taken as it is (combine_chunks would copy it).
        return text.chunk(0) if text.num_chunks == 1 else text.combine_chunks()
    except pa.ArrowException as e:
        raise DatasetFormatError(
            f"{src.what}: column {src.id_column!r} holds {col.type} values that are not text "
            f"({e}); example ids must be strings or integers"
        ) from e


def _labels(
    col: pa.ChunkedArray, classes: tuple[str, ...] | None, v: Validation, start: int
) -> pa.Array:
    v.null_labels += col.null_count
    if _is_text(col.type):
        assert classes is not None
        idx = pc.index_in(col, value_set=pa.array(classes, type=pa.string()))
        missing = pc.and_(pc.is_null(idx), pc.is_valid(col))
        if pc.any(missing).as_py():
            v.unknown.update(pc.unique(col.filter(missing)).to_pylist())
        arr = as_numpy(idx, fill=0).astype(np.int64)
    else:
        k = len(classes) if classes is not None else _INT32_MAX
        if len(col) and not col.null_count:
            lo_hi = pc.min_max(col).as_py()
            if lo_hi["min"] >= 0 and lo_hi["max"] < min(k, _INT32_MAX):
                # Every label in range (the usual case): one cast, no numpy copies.
                v.label_max = max(v.label_max, lo_hi["max"])
                return pc.cast(col, pa.int32()).combine_chunks()
        arr = as_numpy(col, fill=0).astype(np.int64, copy=False)
        v.int_labels(arr, start)
    return from_numpy(arr, pa.int32())


class _IdHasher:
    """One 64-bit hash per id (DuckDB's ``hash``), for the uniqueness check: 8 bytes a row.

    DuckDB is imported and connected on the first call, on the thread that checks the ids:
    a fifth of a second that the first row groups are read and encoded beside."""

    def __init__(self) -> None:
        self._con: Any = None

    def __call__(self, ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if self._con is None:
            import duckdb

            self._con = duckdb.connect()
        table = pa.Table.from_arrays([ids], names=["x"])
        self._con.register("__dsreg_ids", table)
        try:
            got: Any = self._con.sql("SELECT hash(x) AS h FROM __dsreg_ids").fetchnumpy()["h"]
        finally:
            self._con.unregister("__dsreg_ids")
        return np.asarray(got, dtype=np.uint64)


def _repeats(
    path: Any,
    candidates: np.ndarray,
    hasher: _IdHasher | None,
    spellings: Callable[[pa.Array], pa.Array],
) -> tuple[list[str], list[tuple[str, str]]]:
    """Among the staged table's rows whose spellings' hashes are ``candidates``, the ids that
    truly occur more than once (sorted) and the lookalikes, as ``names.lookalike_ids`` gives
    them: spellings compared as text (two different spellings may share a hash)."""
    assert hasher is not None
    hits: list[tuple[str, str]] = []
    for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP, columns=["example_id"]):
        ids = batch.column(0)
        keys = spellings(ids)
        hit = np.isin(hasher(keys), candidates)
        if hit.any():
            mask = from_numpy(hit, pa.bool_())
            hits += zip(keys.filter(mask).to_pylist(), ids.filter(mask).to_pylist(), strict=True)
    counts = Counter(i for _, i in hits)
    return sorted(k for k, c in counts.items() if c > 1), pair_lookalikes(hits)
