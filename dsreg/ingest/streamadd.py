"""``dsreg add`` of a label-only source, streamed (``stream.py``): one pass reads, checks,
writes and hashes the examples table a row group at a time; nothing is installed (and the tag
not moved) until every check has passed.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DatasetFormatError
from dsreg.formats.manifests import Revision, Snapshot
from dsreg.formats.names import pair_lookalikes
from dsreg.formats.tables import ROW_GROUP, CanonicalWriter, as_numpy, base_schema, from_numpy
from dsreg.ingest.result import AddResult, check_names, is_dry, refuse_tag
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


def add_stream(
    reg: Registry,
    dataset: str,
    src: StreamSource,
    *,
    tag: str | None,
    force: bool = False,
    progress: ProgressHook = no_progress,
    command: str = "",
    extra_provenance: dict[str, object] | None = None,
    allow_lookalike_ids: bool = False,
) -> AddResult:
    """Store a label-only ``src`` as a snapshot of ``dataset``; point ``dataset@tag`` at it.
    (``progress`` is not called: the rows stream by faster than a bar would be drawn.)"""
    del progress
    check_names(dataset, tag)
    label_type = src.schema.field(src.label_column).type
    if not (pa.types.is_integer(label_type) or _is_text(label_type)):
        raise DatasetFormatError(
            f"{src.what} has labels of type {label_type}; use integers (class indices) or "
            "class names"
        )
    classes = src.classes
    if classes is None and _is_text(label_type):
        classes = _label_names(src)
    schema = base_schema()
    for name in src.metadata:
        schema = schema.append(src.schema.field(name))
    if src.id_column:
        id_name, hint = repr(src.id_column), f"the {src.id_column!r} column must be unique"
    else:
        id_name, hint = "example id", f"the ids of {src.ids_what} must be unique"
    v = Validation(
        what=src.what,
        id_name=id_name,
        unique_hint=hint,
        classes=classes,
        allow_lookalikes=allow_lookalike_ids,
        ids_what=src.ids_what,
    )
    hasher = _IdHasher() if src.id_column or src.ids is not None else None
    with reg.lock():
        existing = reg.refs.get(dataset, tag) if tag is not None else None
        with reg.store.writer() as out:
            writer = CanonicalWriter(out, schema)
            ids_left = _Rebatch(src.ids()) if src.ids is not None else None
            pool = ThreadPoolExecutor(1)
            pool_read = ThreadPoolExecutor(1)
            pending: deque[Future[None]] = deque()
            try:
                for group in _prefetch(_groups(src.pieces(None)), pool_read):
                    n = len(group)
                    start = v.rows
                    if src.id_column is not None:
                        ids = _id_text(group.column(src.id_column), src)
                        if ids.null_count:
                            nulls = sum(p.column(0).null_count for p in src.pieces([src.id_column]))
                            raise DatasetFormatError(
                                f"{src.what}: {nulls} rows have no {src.id_column!r}"
                            )
                    elif ids_left is not None:
                        ids = ids_left.take(n)
                        if len(ids) < n:
                            _length_mismatch(src, start + len(ids), _labels_total(src))
                    else:
                        ids = pc.cast(
                            from_numpy(np.arange(start, start + n), pa.int64()), pa.string()
                        )
                    while len(pending) >= AHEAD:
                        pending.popleft().result()
                    if hasher is not None:
                        # Checked on another thread while this group is written (Arrow, DuckDB
                        # and the Parquet writer release the GIL); one group at a time, in order.
                        pending.append(pool.submit(v.ids, ids, hasher))
                    labels = _labels(group.column(src.label_column), classes, v, start)
                    blob, size = null_columns(n)
                    meta = [group.column(c) for c in src.metadata]
                    writer.write(
                        pa.Table.from_arrays([ids, labels, blob, size, *meta], schema=schema)
                    )
                    v.rows += n
                if ids_left is not None:
                    extra = ids_left.rest()
                    if extra:
                        _length_mismatch(src, v.rows + extra, v.rows)
                while pending:
                    pending.popleft().result()
            except BaseException:
                writer.abort()
                raise
            finally:
                pool.shutdown(wait=True)
                pool_read.shutdown(wait=True, cancel_futures=True)
            writer.close()
            out.flush()
            v.finish_ids(lambda cand: _repeats(out.path, cand, hasher, v.spellings))
            names = v.finish_labels()
            examples = out.peek()
            snap = Snapshot(
                dataset=dataset,
                examples=examples,
                rows=v.rows,
                classes=names,
                source={**src.provenance, **(extra_provenance or {})},
            )
            rev = Revision(snapshot=reg.digest_of(snap))
            if is_dry(existing, force) and existing != rev.digest:
                assert existing is not None and tag is not None
                refuse_tag(dataset, tag, existing, rev.digest)
            out.commit()
        snap_digest = reg.put_manifest(snap)
        rev_digest = reg.put_manifest(rev)
        previous = None
        if tag is not None:
            previous = reg.refs.set(dataset, tag, rev_digest, force=force, command=command)
    return AddResult(
        dataset=dataset,
        tag=tag,
        revision=rev_digest,
        snapshot=snap_digest,
        examples=examples,
        rows=v.rows,
        classes=names,
        files=0,
        new_objects=0,
        bytes=0,
        previous=previous,
    )


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
        text = col if _is_text(col.type) else pc.cast(col, pa.string())
        return pc.cast(text, pa.string()).combine_chunks()
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
    """One 64-bit hash per id (DuckDB's ``hash``), for the uniqueness check: 8 bytes a row."""

    def __init__(self) -> None:
        import duckdb

        self._con = duckdb.connect()

    def __call__(self, ids: pa.Array) -> np.ndarray:
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
