"""Model predictions, read and lined up with a snapshot's rows (docs/queries.md, "eval").

Accepted: a ``.npy`` array aligned with the snapshot's rows (``n`` class indices, or ``n x k``
probabilities); a Parquet or CSV table (or an Arrow table / pandas DataFrame) with ``row`` or
``example_id`` and either ``pred`` (class index or class name) or one probability column per
class, named by the class name; a ``model`` column splits one table into several models.

What comes out, per model, is where each row's label ranks among the model's classes (0: the
model's top-1): for the snapshot's label at every row, and for the suggested label at every row an
overlay names. Any view's top-k accuracy is then a count over those ranks, so the predictions are
read once, streaming, whatever the number of views.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from tokenize import TokenError
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dsreg.errors import InputPathError, PredictionsError
from dsreg.model.tables import as_numpy
from dsreg.objects.hashing import hash_bytes, hash_file

__all__ = ["Predictions", "PredictionsSource", "Ranks", "Target", "read_predictions"]

# One chunk of probabilities holds about this many values (8 Mi float64 = 64 MiB).
_CHUNK_VALUES = 1 << 23
_CHUNK_ROWS = 1 << 22
_THREADS = min(4, os.cpu_count() or 1)
_MODEL = "model"

Predictions: TypeAlias = Any  # a path, a numpy array, an Arrow table or a pandas DataFrame
Batch: TypeAlias = pa.Table | pa.RecordBatch


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictionsSource:
    """Where one model's predictions came from: the file as given and its BLAKE3 digest."""

    model: str
    file: str | None
    digest: str | None
    format: str
    kind: str  # "labels" or "probabilities"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "digest": self.digest,
            "format": self.format,
            "kind": self.kind,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What predictions are lined up with: a snapshot's labels and the rows overlays name."""

    labels: np.ndarray  # int32 (n,)
    classes: tuple[str, ...]
    cand_rows: np.ndarray  # int64, sorted: rows some overlay names with a suggested label
    cand_suggested: np.ndarray  # int32, the suggested label at cand_rows
    example_ids: Callable[[], pa.Array]  # the snapshot's ids, read only when needed
    # Rows overlays give label sets or rater counts (sorted): the model's top-1 is kept there;
    # the counts, flattened (entry e: count_value[e] raters chose count_label[e] at
    # extra_rows[count_parent[e]], sorted by parent), give each row's cross-entropy.
    extra_rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    count_parent: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    count_label: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    count_value: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))

    @property
    def n(self) -> int:
        return len(self.labels)

    @property
    def k(self) -> int:
        return len(self.classes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranks:
    """One model's ranks: ``given[i]`` of the snapshot's label at row i, ``suggested[j]`` of the
    suggested label at ``Target.cand_rows[j]``; -1 where the model predicted nothing. From
    predicted labels (not probabilities) a rank is 0 (right) or 1 (not first): top-1 only."""

    source: PredictionsSource
    given: np.ndarray
    suggested: np.ndarray
    top1: np.ndarray | None = None  # int32 at Target.extra_rows: the predicted class, -1 none
    # float64 at Target.extra_rows: cross-entropy of the probabilities against the raters'
    # distribution (nan where the row has no counts); None for predicted labels
    xent: np.ndarray | None = None


# Probabilities below this are taken as this in a cross-entropy (a model that gives a class
# the raters chose probability 0 would otherwise score infinity).
EPS = 1e-12


class _Acc:
    """Ranks of one model, filled chunk by chunk."""

    def __init__(self, target: Target, source: PredictionsSource) -> None:
        self.t = target
        self.source = source
        dtype = np.int16 if target.k < np.iinfo(np.int16).max else np.int32
        self.given = np.full(target.n, -1, dtype=dtype)
        self.suggested = np.full(len(target.cand_rows), -1, dtype=dtype)
        m = len(target.extra_rows)
        self.top1 = np.full(m, -1, dtype=np.int32)
        self.xent = np.full(m, np.nan) if m else None
        self.has_probs = False

    def ranks(self) -> Ranks:
        return Ranks(
            source=self.source,
            given=self.given,
            suggested=self.suggested,
            top1=self.top1 if len(self.top1) else None,
            xent=self.xent if self.has_probs else None,
        )

    def _extras(self, pos: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into extra_rows, offsets in the chunk) of the chunk's extra rows."""
        rows = self.t.extra_rows
        if not len(rows):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        if isinstance(pos, slice):
            lo, hi = np.searchsorted(rows, [pos.start, pos.stop])
            return np.arange(lo, hi), rows[lo:hi] - pos.start
        ei = np.searchsorted(rows, pos)
        ok = ei < len(rows)
        ok[ok] = rows[ei[ok]] == pos[ok]
        return ei[ok], np.flatnonzero(ok)

    def _cross_entropy(self, probs: np.ndarray, ei: np.ndarray, off: np.ndarray) -> None:
        """Per extra row of the chunk that has counts: -sum_c p_raters(c) log q(c), with the
        model's probabilities q normalised per row and clipped at ``EPS``."""
        t = self.t
        if not len(ei) or not len(t.count_parent) or self.xent is None:
            return
        where = np.full(len(t.extra_rows), -1, dtype=np.int64)
        where[ei] = off
        lo, hi = np.searchsorted(t.count_parent, [ei.min(), ei.max() + 1])
        parent = t.count_parent[lo:hi]
        at = where[parent]
        ok = at >= 0
        parent, at = parent[ok], at[ok]
        label, value = t.count_label[lo:hi][ok], t.count_value[lo:hi][ok]
        q = probs[at, label] / probs[at].sum(axis=1)
        total = np.bincount(parent, weights=value, minlength=len(t.extra_rows))
        part = np.bincount(
            parent, weights=value * np.log(np.maximum(q, EPS)), minlength=len(t.extra_rows)
        )
        rated = np.unique(parent)
        rated = rated[total[rated] > 0]
        self.xent[rated] = -part[rated] / total[rated]

    def _candidates(self, pos: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into cand_rows, offsets in the chunk) of the chunk's candidate rows."""
        cand = self.t.cand_rows
        if isinstance(pos, slice):
            lo, hi = np.searchsorted(cand, [pos.start, pos.stop])
            return np.arange(lo, hi), cand[lo:hi] - pos.start
        if not len(cand):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        ci = np.searchsorted(cand, pos)
        ok = ci < len(cand)
        ok[ok] = cand[ci[ok]] == pos[ok]
        return ci[ok], np.flatnonzero(ok)

    def _fresh(self, pos: slice | np.ndarray) -> None:
        seen = np.asarray(self.given[pos]) >= 0
        dups = _dups(pos) if isinstance(pos, np.ndarray) else np.empty(0, np.int64)
        if seen.any() or len(dups):
            rows = np.arange(pos.start, pos.stop) if isinstance(pos, slice) else pos
            first = rows[seen] if seen.any() else dups
            raise PredictionsError(
                f"{_name(self.source)} predicts some rows more than once, first rows "
                f"{first[:5].tolist()}; give one prediction per row"
            )

    def add_labels(self, pred: np.ndarray, pos: slice | np.ndarray) -> None:
        # A predicted label ranks the true one 0 (right) or "not first" (1): top-1 only.
        self._fresh(pos)
        self.given[pos] = pred != self.t.labels[pos]
        ei, off = self._extras(pos)
        if len(ei):
            self.top1[ei] = pred[off]
        ci, off = self._candidates(pos)
        if len(ci):
            sug = self.t.cand_suggested[ci]
            self.suggested[ci] = np.where(sug < 0, -1, pred[off] != sug)

    def add_probs(self, probs: np.ndarray, pos: slice | np.ndarray) -> None:
        self._fresh(pos)
        if not np.isfinite(probs).all():
            bad = np.flatnonzero(~np.isfinite(probs).all(axis=1))
            rows = np.arange(pos.start, pos.stop)[bad] if isinstance(pos, slice) else pos[bad]
            raise PredictionsError(
                f"{_name(self.source)} has {len(bad)} rows with NaN or infinite probabilities, "
                f"first rows {rows[:5].tolist()}"
            )
        self.given[pos] = _rank_of(probs, self.t.labels[pos])
        self.has_probs = True
        ei, off = self._extras(pos)
        if len(ei):
            self.top1[ei] = np.argmax(probs[off], axis=1)
            self._cross_entropy(probs, ei, off)
        ci, off = self._candidates(pos)
        if len(ci):
            sug = self.t.cand_suggested[ci]
            has = sug >= 0
            r = np.full(len(ci), -1, dtype=self.suggested.dtype)
            r[has] = _rank_of(probs[off[has]], sug[has])
            self.suggested[ci] = r


def _rank_of(probs: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Where ``label`` ranks in each row of ``probs`` when classes are sorted by descending
    probability, ties broken by class index (as ``argmax`` does): 0 is the top-1."""
    m, k = probs.shape
    mine = probs[np.arange(m), label][:, None]
    higher = np.count_nonzero(probs > mine, axis=1)
    ties_before = np.count_nonzero((probs == mine) & (np.arange(k) < label[:, None]), axis=1)
    return np.asarray(higher + ties_before)


def _dups(rows: np.ndarray) -> np.ndarray:
    """The rows that occur more than once, sorted (a sort, not a hash: fast on millions)."""
    s = np.sort(rows)
    d = s[1:][s[1:] == s[:-1]]
    return np.asarray(d[np.r_[True, d[1:] != d[:-1]]]) if len(d) else d


def _name(source: PredictionsSource) -> str:
    where = f" ({source.file})" if source.file else ""
    return f"predictions of model {source.model!r}{where}"


# -- arrays ---------------------------------------------------------------------------------------


def _each(fn: Callable[[slice], None], n: int, step: int) -> None:
    """``fn`` over the row-aligned chunks of ``range(n)``, on every core: the chunks are disjoint
    slices and numpy works on them without the GIL. The first chunk's error is the one raised."""
    chunks = [slice(a, min(n, a + step)) for a in range(0, n, step)]
    if len(chunks) <= 1 or _THREADS == 1:
        for c in chunks:
            fn(c)
        return
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        for _ in pool.map(fn, chunks):
            pass


def _from_array(arr: np.ndarray, target: Target, source: PredictionsSource) -> Ranks:
    n, k = target.n, target.k
    what = _name(source)
    if arr.ndim == 1 and arr.dtype.kind in "iuUSO":
        if len(arr) != n:
            raise PredictionsError(
                f"{what} hold {len(arr)} labels, but the snapshot has {n} rows: an array must "
                "be aligned with the snapshot's rows (row i predicts row i); for a subset, use a "
                "table with a 'row' or 'example_id' column"
            )
        acc = _Acc(target, _with_kind(source, "labels"))

        def labels(rows: slice) -> None:
            part = np.asarray(arr[rows])
            pred = _class_indices(
                part if part.dtype.kind in "iu" else pa.array(part), target, what, rows.start
            )
            acc.add_labels(pred, rows)

        _each(labels, n, _CHUNK_ROWS)
        return acc.ranks()
    if arr.ndim == 2 and arr.dtype.kind in "fiu":
        if arr.shape != (n, k):
            raise PredictionsError(
                f"{what} are an array of shape {arr.shape}; probabilities must be "
                f"(rows, classes) = ({n}, {k}), aligned with the snapshot's rows and with the "
                "classes in the snapshot's order"
            )
        probs = _Acc(target, _with_kind(source, "probabilities"))
        _each(
            lambda rows: probs.add_probs(np.asarray(arr[rows], dtype=np.float64), rows),
            n,
            _step(True, k),
        )
        return probs.ranks()
    raise PredictionsError(
        f"{what} are a {arr.dtype} array of shape {arr.shape}; expected {n} class indices "
        f"(1-D integers) or ({n}, {k}) probabilities"
    )


def _class_indices(
    col: pa.Array | np.ndarray, target: Target, what: str, offset: int
) -> np.ndarray:
    """Class indices from integers (checked against k) or class names (looked up)."""
    k = target.k
    if isinstance(col, pa.Array) and col.null_count:
        raise PredictionsError(f"{what}: {col.null_count} predictions are empty")
    if isinstance(col, np.ndarray) or pa.types.is_integer(col.type):
        pred = col if isinstance(col, np.ndarray) else as_numpy(col)
        bad = np.flatnonzero((pred < 0) | (pred >= k))
        if len(bad):
            raise PredictionsError(
                f"{what}: {len(bad)} predicted classes are outside [0, {k}), first "
                f"{pred[bad[:5]].tolist()} (at rows {(bad[:5] + offset).tolist()}); "
                "predict a class index or a class name of the snapshot"
            )
        return pred
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        idx = pc.index_in(col, value_set=pa.array(target.classes, pa.string()))
        if idx.null_count:
            unknown = pc.unique(col.filter(pc.is_null(idx))).to_pylist()
            raise PredictionsError(
                f"{what}: {idx.null_count} predictions name a class the snapshot does not have, "
                f"first {unknown[:5]}; its classes are {list(target.classes[:10])}"
                + (" …" if k > 10 else "")
            )
        return as_numpy(idx)
    raise PredictionsError(
        f"{what}: the 'pred' column has type {col.type}; give class indices or class names"
    )


def _with_kind(source: PredictionsSource, kind: str) -> PredictionsSource:
    return PredictionsSource(
        model=source.model, file=source.file, digest=source.digest, format=source.format, kind=kind
    )


# -- tables ---------------------------------------------------------------------------------------


def _positions(table: Batch, target: Target, what: str) -> np.ndarray:
    """The snapshot row of each table row, from ``row`` (checked against ``example_id`` when
    both are given) or from ``example_id``."""
    n = target.n
    names = table.column_names
    if "row" in names:
        col = table.column("row")
        if not pa.types.is_integer(col.type) or col.null_count:
            raise PredictionsError(f"{what}: the 'row' column must hold integers, no empty cells")
        pos = as_numpy(col).astype(np.int64, copy=False)
        bad = np.flatnonzero((pos < 0) | (pos >= n))
        if len(bad):
            raise PredictionsError(
                f"{what}: {len(bad)} rows are outside the snapshot's [0, {n}), first "
                f"{pos[bad[:5]].tolist()}"
            )
        if "example_id" in names:
            want = target.example_ids().take(pa.array(pos))
            got = pc.cast(table.column("example_id"), pa.string())
            diff = np.flatnonzero(~as_numpy(pc.fill_null(pc.equal(want, got), False)))
            if len(diff):
                first = [(int(pos[i]), got[int(i)].as_py()) for i in diff[:3]]
                raise PredictionsError(
                    f"{what}: {len(diff)} rows name an example_id that is not the snapshot's at "
                    f"that row, first (row, example_id) {first}; the predictions are misaligned"
                )
        return pos
    if "example_id" in names:
        ids = pc.cast(table.column("example_id"), pa.string())
        known = target.example_ids()
        if len(ids) == len(known) and _as_chunked(ids).equals(pa.chunked_array([known])):
            # Ids in the snapshot's own order (predictions written in dataset order): no
            # lookup of millions of strings is needed.
            return np.arange(len(known), dtype=np.int64)
        idx = pc.index_in(ids, value_set=known)
        if idx.null_count:
            unknown = ids.filter(pc.is_null(idx))
            raise PredictionsError(
                f"{what}: {idx.null_count} example ids are not in the snapshot, first "
                f"{unknown[:5].to_pylist()}"
            )
        return as_numpy(idx).astype(np.int64, copy=False)
    raise PredictionsError(
        f"{what} has columns {names[:10]}: a table needs a 'row' or an 'example_id' column "
        "(or give a .npy array aligned with the snapshot's rows)"
    )


def _as_chunked(col: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])


def _value_columns(names: Sequence[str], target: Target, what: str) -> list[str] | None:
    """The class-probability columns in class order, or None to use ``pred``."""
    have = set(names)
    if all(c in have for c in target.classes):
        return list(target.classes)
    if "pred" in have:
        return None
    missing = [c for c in target.classes if c not in have]
    raise PredictionsError(
        f"{what} has columns {list(names)[:10]}: give a 'pred' column (class index or name), "
        f"or one probability column per class named by the class; missing classes "
        f"{missing[:5]}" + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    )


def _step(probs: bool, k: int) -> int:
    return max(1, _CHUNK_VALUES // max(k, 1)) if probs else _CHUNK_ROWS


def _from_batches(
    batches: Iterable[Batch], names: Sequence[str], target: Target, source: PredictionsSource
) -> Ranks:
    """One model's ranks from a table given as batches (a whole table is one batch)."""
    what = _name(source)
    probs_cols = _value_columns(names, target, what)
    kind = "labels" if probs_cols is None else "probabilities"
    acc = _Acc(target, _with_kind(source, kind))
    step = _step(probs_cols is not None, target.k)
    offset = 0
    for batch in batches:
        pos_all = _positions(batch, target, what)
        for start in range(0, batch.num_rows, step):
            stop = min(batch.num_rows, start + step)
            pos_arr = pos_all[start:stop]
            pos: slice | np.ndarray = pos_arr
            # Row-aligned chunks (the common case) take the slice path: no searches, no copies.
            # Strictly increasing over a span of exactly len - 1 means contiguous.
            span = len(pos_arr) and pos_arr[-1] - pos_arr[0] == len(pos_arr) - 1
            if span and (pos_arr[1:] > pos_arr[:-1]).all():
                pos = slice(int(pos_arr[0]), int(pos_arr[-1]) + 1)
            part = batch.slice(start, stop - start)
            if probs_cols is None:
                pred = _class_indices(_array(part.column("pred")), target, what, offset + start)
                acc.add_labels(pred, pos)
            else:
                acc.add_probs(_matrix(part, probs_cols, what), pos)
        offset += batch.num_rows
    return acc.ranks()


def _array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _matrix(part: Batch, columns: Sequence[str], what: str) -> np.ndarray:
    mat = np.empty((part.num_rows, len(columns)), dtype=np.float64)
    for j, c in enumerate(columns):
        col = part.column(c)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            raise PredictionsError(f"{what}: probability column {c!r} has type {col.type}")
        if col.null_count:
            raise PredictionsError(f"{what}: probability column {c!r} has empty cells")
        mat[:, j] = as_numpy(col)
    return mat


def _read_table(path: Path, what: str) -> pa.Table:
    try:
        opts = pacsv.ConvertOptions(
            column_types={"example_id": pa.string(), _MODEL: pa.string(), "pred": pa.string()}
        )
        table = pacsv.read_csv(path, convert_options=opts)
        table.column_names  # noqa: B018 - decoded here: a CSV header need not be UTF-8
    except (pa.ArrowException, OSError) as e:
        raise PredictionsError(f"cannot read {what}: {e}") from e
    except UnicodeDecodeError as e:
        raise PredictionsError(
            f"{what} has a column name that is not UTF-8 text ({e.reason} at byte {e.start}); "
            "save the file as UTF-8"
        ) from e
    # CSV cells are text: a 'pred' of digits is a class index, anything else a class name.
    if "pred" in table.column_names:
        col = table.column("pred")
        as_int = pc.match_substring_regex(col, r"^-?[0-9]+$")
        if col.null_count == 0 and pc.all(as_int).as_py():
            i = table.column_names.index("pred")
            table = table.set_column(i, "pred", pc.cast(col, pa.int64()))
    return table


def _parquet(path: Path, target: Target, what: str) -> tuple[list[str], Iterator[Batch]]:
    """The columns dsreg reads and the file as batches: streamed when keyed by ``row`` (bounded
    memory), whole when ids must be looked up or a ``model`` column splits it."""
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
        raise PredictionsError(f"cannot read {what}: {e}") from e
    wanted = {"row", "example_id", "pred", _MODEL, *target.classes}
    cols = [c for c in names if c in wanted]

    def batches() -> Iterator[Batch]:
        try:
            if _MODEL in cols or "row" not in cols:
                yield pf.read(columns=cols)
            else:
                probs = "pred" not in cols
                yield from pf.iter_batches(batch_size=_step(probs, target.k), columns=cols)
        except (pa.ArrowException, OSError) as e:
            raise PredictionsError(f"cannot read {what}: {e}") from e

    return cols, batches()


def _split_models(table: pa.Table, what: str) -> list[tuple[str, pa.Table]]:
    col = table.column(_MODEL)
    if col.null_count:
        raise PredictionsError(f"{what}: {col.null_count} rows have an empty 'model'")
    col = pc.cast(col, pa.string())
    out = []
    for name in pc.unique(col).to_pylist():
        out.append((str(name), table.filter(pc.equal(col, name)).drop_columns([_MODEL])))
    return out


# -- entry ----------------------------------------------------------------------------------------


def _array_digest(arr: np.ndarray) -> str:
    """The digest of the array's ``.npy`` bytes: the same as of the file ``np.save`` writes."""
    import io

    buf = io.BytesIO()
    np.save(buf, np.asarray(arr), allow_pickle=False)
    return hash_bytes(buf.getbuffer())


def _as_table(obj: Any) -> pa.Table | None:
    if isinstance(obj, pa.Table):
        return obj
    if type(obj).__name__ == "DataFrame" and hasattr(obj, "columns"):
        try:
            return pa.Table.from_pandas(obj, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise PredictionsError(f"cannot read a DataFrame of predictions: {e}") from e
    return None


def read_predictions(
    target: Target,
    inputs: Sequence[tuple[str, Predictions]],
    *,
    digest_of: Callable[[Path], str] = hash_file,
) -> Iterator[Ranks]:
    """Each model's ranks, one model at a time (so memory holds one model's arrays).
    ``digest_of`` gives a predictions file's digest (a caller may have hashed it already)."""
    for model, obj in inputs:
        table = _as_table(obj)
        if isinstance(obj, np.ndarray):
            src = PredictionsSource(
                model=model, file=None, digest=_array_digest(obj), format="array", kind=""
            )
            yield _from_array(obj, target, src)
            continue
        if table is not None:
            src = PredictionsSource(model=model, file=None, digest=None, format="table", kind="")
            yield from _table_models(table, target, src)
            continue
        if not isinstance(obj, str | os.PathLike):
            raise PredictionsError(
                f"predictions of model {model!r} are a {type(obj).__name__}; give a path, a numpy "
                "array, an Arrow table or a pandas DataFrame"
            )
        path = Path(obj)
        if not path.is_file():
            raise InputPathError(f"predictions file {str(path)!r} does not exist")
        suffix = path.suffix.lower()
        if suffix not in (".npy", ".parquet", ".csv"):
            raise PredictionsError(
                f"predictions file {str(path)!r} has an unknown type {suffix!r}; "
                "use .npy, .parquet or .csv"
            )
        try:
            digest = digest_of(path)
        except OSError as e:
            raise InputPathError(f"cannot read predictions file {str(path)!r}: {e.strerror}") from e
        src = PredictionsSource(
            model=model, file=str(obj), digest=digest, format=suffix[1:], kind=""
        )
        what = f"predictions file {str(path)!r}"
        if suffix == ".npy":
            try:
                arr = np.load(path, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError, EOFError, SyntaxError, TokenError) as e:
                # EOFError: an empty or truncated file; SyntaxError and TokenError: a damaged
                # header (numpy tokenizes a version 1 or 2 header again).
                why = f"its header is damaged ({e.args[0]})" if isinstance(e, TokenError) else e
                raise PredictionsError(
                    f"cannot read {what} as a .npy array: {why}; save predictions with numpy.save"
                ) from e
            yield _from_array(arr, target, src)
        elif suffix == ".parquet":
            cols, batches = _parquet(path, target, what)
            if _MODEL in cols:
                yield from _table_models(next(batches), target, src)
            else:
                yield _from_batches(batches, cols, target, src)
        else:
            yield from _table_models(_read_table(path, what), target, src)


def _table_models(table: pa.Table, target: Target, src: PredictionsSource) -> Iterator[Ranks]:
    if _MODEL not in table.column_names:
        yield _from_batches([table], table.column_names, target, src)
        return
    for name, part in _split_models(table, _name(src)):
        yield _from_batches(
            [part],
            part.column_names,
            target,
            PredictionsSource(
                model=name, file=src.file, digest=src.digest, format=src.format, kind=""
            ),
        )
