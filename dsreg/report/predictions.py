"""Model predictions, read and lined up with a snapshot's rows (docs/queries.md, "eval").

Accepted: a ``.npy`` array aligned with the snapshot's rows (``n`` class indices, or ``n x k``
probabilities); a Parquet or CSV table (or an Arrow table / pandas DataFrame) with ``row`` or
``example_id`` and either ``pred`` (class index or class name) or one probability column per
class, named by the class name; a ``model`` column splits one table into several models.

What comes out, per model, is where each row's label ranks among the model's classes (0: the
model's top-1): for the snapshot's label at every row, and for the suggested label at every row an
overlay names. Any view's top-k accuracy is then a count over those ranks, so the predictions are
read once, streaming, whatever the number of views.

This module reads; the records (:class:`PredictionsSource`, :class:`Target`, :class:`Ranks`,
re-exported here) and the ranking of a chunk are :mod:`dsreg.report.ranks`'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsreg._util.inputs import INPUT_BYTES, input_file, read_input, shown_all
from dsreg._util.lazy import lazy_imports
from dsreg.errors import InputPathError, PredictionsError
from dsreg.formats import lmeval
from dsreg.formats.inputfiles import (
    CSV_BLOCK,
    check_digit_cells,
    csv_error,
    open_npy,
    out_of_range,
    refuse_duplicate_columns,
)
from dsreg.formats.questions.answers import normalize_answer
from dsreg.formats.tables import as_numpy
from dsreg.objects.hashing import hash_bytes, hash_file
from dsreg.registry.results import load_predictions
from dsreg.registry.tables import examples_parquet, read_examples
from dsreg.report.ranks import PredictionsSource, RankAccumulator, Ranks, Target, describe

if TYPE_CHECKING:
    from dsreg.registry.folder import Registry
    from dsreg.registry.reader import Resolved
    from dsreg.registry.results import ResultRecord

# Imported when first called: a command reading a table seldom needs it (0.1 s to import).
with lazy_imports():
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

__all__ = [
    "PREDICTION_FORMATS",
    "AlignedPredictions",
    "Predictions",
    "PredictionsSource",
    "Ranks",
    "Target",
    "array_digest",
    "lm_eval_predictions",
    "read_predictions",
    "recorded_predictions",
    "row_texts",
]

# One chunk of probabilities holds about this many values (8 Mi float64 = 64 MiB).
_CHUNK_VALUES = 1 << 23
_CHUNK_ROWS = 1 << 22
_THREADS = min(4, os.cpu_count() or 1)
_MODEL = "model"

Predictions: TypeAlias = Any  # a path, a numpy array, an Arrow table or a pandas DataFrame
Batch: TypeAlias = pa.Table | pa.RecordBatch
#: How predictions are given (``--predictions-format``): dsreg's own inputs (above), or the
#: samples file of ``lm_eval --log_samples`` (``formats.lmeval``).
PREDICTION_FORMATS: tuple[str, ...] = ("dsreg", "lm-eval")
# A question set's metadata columns a samples file's docs are matched with.
_TEXT_COLUMNS = ("question", "choices")


@dataclass(frozen=True, slots=True, kw_only=True)
class AlignedPredictions:
    """Predictions another tool wrote per item, read and aligned with a snapshot's rows:
    ``predictions`` (class indices, row i predicts row i), the file they came from, the BLAKE3
    of its bytes (what a recorded result keeps as its ``source`` and ``cite --model`` cites)
    and its format."""

    predictions: np.ndarray
    file: str | None
    digest: str
    format: str


# -- arrays ---------------------------------------------------------------------------------------


def _each(fn: Callable[[slice], None], chunks: list[slice]) -> None:
    """``fn`` over row-aligned chunks, on every core: the chunks are disjoint slices and numpy
    works on them without the GIL. The first chunk's error is the one raised."""
    if len(chunks) <= 1 or _THREADS == 1:
        for c in chunks:
            fn(c)
        return
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        for _ in pool.map(fn, chunks):
            pass


def _from_array(arr: np.ndarray, target: Target, source: PredictionsSource) -> Ranks:
    n, k = target.n, target.k
    what = describe(source)
    if arr.ndim == 1 and arr.dtype.kind in "iuUSO":
        if len(arr) != n:
            raise PredictionsError(
                f"{what} hold {len(arr)} labels, but the snapshot has {n} rows: an array must "
                "be aligned with the snapshot's rows (row i predicts row i); for a subset, use a "
                "table with a 'row' or 'example_id' column"
            )
        acc = RankAccumulator(target, replace(source, kind="labels"))

        def labels(rows: slice) -> None:
            part = np.asarray(arr[rows])
            pred = _class_indices(
                part if part.dtype.kind in "iu" else pa.array(part), target, what, rows.start
            )
            acc.add_labels(pred, rows)

        _each(labels, target.row_chunks(_CHUNK_ROWS))
        return acc.ranks()
    if arr.ndim == 2 and arr.dtype.kind in "iu" and 0 < arr.shape[1] < k:
        if len(arr) != n:
            raise PredictionsError(
                f"{what} hold top-{arr.shape[1]} classes of {len(arr)} rows, but the snapshot "
                f"has {n} rows: an array must be aligned with the snapshot's rows"
            )
        top = RankAccumulator(target, replace(source, kind="topk"))
        _each(
            lambda rows: top.add_topk(np.asarray(arr[rows]), rows), target.row_chunks(_CHUNK_ROWS)
        )
        return top.ranks()
    if arr.ndim == 2 and arr.dtype.kind in "fiu":
        if arr.shape != (n, k):
            raise PredictionsError(
                f"{what} are an array of shape {arr.shape}; probabilities must be "
                f"(rows, classes) = ({n}, {k}), aligned with the snapshot's rows and with the "
                "classes in the snapshot's order"
            )
        probs = RankAccumulator(target, replace(source, kind="probabilities"))
        step = _step(True, k)
        _each(
            lambda rows: probs.add_probs(np.asarray(arr[rows], dtype=np.float64), rows),
            [slice(a, min(n, a + step)) for a in range(0, n, step)],
        )
        return probs.ranks()
    raise PredictionsError(
        f"{what} are a {arr.dtype} array of shape {arr.shape}; expected {n} class indices "
        f"(1-D integers), ({n}, m) top-m class indices (m < {k}, best first) or ({n}, {k}) "
        "probabilities"
    )


def _class_indices(
    col: pa.Array | np.ndarray, target: Target, what: str, offset: int
) -> np.ndarray:
    """Class indices from integers (checked against k) or class names (looked up); an
    exact-answer set's answers as ``_answer_classes`` reads them."""
    k = target.k
    if isinstance(col, pa.Array) and col.null_count:
        raise PredictionsError(f"{what}: {col.null_count} predictions are empty")
    if isinstance(col, pa.Array) and target.normalization is not None:
        return _answer_classes(col, target, what)
    if isinstance(col, np.ndarray) or pa.types.is_integer(col.type):
        pred = col if isinstance(col, np.ndarray) else as_numpy(col)
        bad = out_of_range(pred, k)
        if bad is not None:
            raise PredictionsError(
                f"{what}: {bad.total} predicted classes are outside [0, {k}), first {bad.first} "
                f"(at rows {[r + offset for r in bad.at]}); "
                "predict a class index or a class name of the snapshot"
            )
        return pred
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        idx = pc.index_in(col, value_set=pa.array(target.classes, pa.string()))
        if idx.null_count:
            unknown = pc.unique(col.filter(pc.is_null(idx))).to_pylist()
            raise PredictionsError(
                f"{what}: {idx.null_count} predictions name a class the snapshot does not have, "
                f"first {shown_all(unknown[:5])}; its classes are {list(target.classes[:10])}"
                + (" …" if k > 10 else "")
            )
        return as_numpy(idx)
    raise PredictionsError(
        f"{what}: the 'pred' column has type {col.type}; give class indices or class names"
    )


def _answer_classes(col: pa.Array, target: Target, what: str) -> np.ndarray:
    """An exact-answer set's predicted answers (text, or numbers taken as their text) as
    classes: each normalised by the set's rule (``target.normalization``) and looked up among
    its classes. An answer the set has no class for is a wrong answer (-1), not an error: a
    model may answer anything (docs/questions.md, "Evaluating")."""
    assert target.normalization is not None
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        try:
            col = pc.cast(col, pa.string())
        except pa.ArrowException as e:
            raise PredictionsError(
                f"{what}: the 'pred' column has type {col.type}; give the answers as text"
            ) from e
    distinct = pc.unique(col)
    index = {c: i for i, c in enumerate(target.classes)}
    codes = np.array(
        [index.get(normalize_answer(v, target.normalization), -1) for v in distinct.to_pylist()],
        dtype=np.int64,
    )
    return codes[as_numpy(pc.index_in(col, value_set=distinct)).astype(np.int64)]


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
        bad = out_of_range(pos, n)
        if bad is not None:
            raise PredictionsError(
                f"{what}: {bad.total} rows are outside the snapshot's [0, {n}), first {bad.first}"
            )
        if "example_id" in names:
            want = target.example_ids().take(pa.array(pos))
            got = pc.cast(table.column("example_id"), pa.string())
            diff = np.flatnonzero(~as_numpy(pc.fill_null(pc.equal(want, got), False)))
            if len(diff):
                first = [(int(pos[i]), got[int(i)].as_py()) for i in diff[:3]]
                raise PredictionsError(
                    f"{what}: {len(diff)} rows name an example_id that is not the snapshot's at "
                    f"that row, first (row, example_id) {shown_all(first)}; the predictions are "
                    "misaligned"
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
                f"{shown_all(unknown[:5].to_pylist())}"
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
    what = describe(source)
    probs_cols = _value_columns(names, target, what)
    kind = "labels" if probs_cols is None else "probabilities"
    acc = RankAccumulator(target, replace(source, kind=kind))
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
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(block_size=CSV_BLOCK), convert_options=opts
        )
        table.column_names  # noqa: B018 - decoded here: a CSV header need not be UTF-8
    except (pa.ArrowException, OSError) as e:
        raise PredictionsError(f"cannot read {what}: {csv_error(e, block=CSV_BLOCK)}") from e
    except UnicodeDecodeError as e:
        raise PredictionsError(
            f"{what} has a column name that is not UTF-8 text ({e.reason} at byte {e.start}); "
            "save the file as UTF-8"
        ) from e
    refuse_duplicate_columns(table.column_names, what=what, error=PredictionsError)
    # CSV cells are text: a 'pred' of digits is a class index, anything else a class name.
    if "pred" in table.column_names:
        col = table.column("pred")
        as_int = pc.match_substring_regex(col, r"^-?[0-9]+$")
        if col.null_count == 0 and pc.all(as_int).as_py():
            check_digit_cells(col, what=f"{what} (pred)", error=PredictionsError)
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
    refuse_duplicate_columns(names, what=what, error=PredictionsError)
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


def array_digest(arr: np.ndarray) -> str:
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
        if isinstance(obj, AlignedPredictions):
            src = PredictionsSource(
                model=model, file=obj.file, digest=obj.digest, format=obj.format, kind=""
            )
            yield _from_array(obj.predictions, target, src)
            continue
        table = _as_table(obj)
        if isinstance(obj, np.ndarray):
            src = PredictionsSource(
                model=model, file=None, digest=array_digest(obj), format="array", kind=""
            )
            yield _from_array(obj, target, src)
            continue
        if table is not None:
            what = f"the table of model {model!r}"
            refuse_duplicate_columns(table.column_names, what=what, error=PredictionsError)
            src = PredictionsSource(model=model, file=None, digest=None, format="table", kind="")
            yield from _table_models(table, target, src)
            continue
        if not isinstance(obj, str | os.PathLike):
            raise PredictionsError(
                f"predictions of model {model!r} are a {type(obj).__name__}; give a path, a numpy "
                "array, an Arrow table or a pandas DataFrame"
            )
        path = Path(obj)
        input_file(path, what=f"predictions file {str(path)!r}")
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
            hint = "; save predictions with numpy.save"
            yield _from_array(
                open_npy(path, what=what, error=PredictionsError, hint=hint), target, src
            )
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
    for name, part in _split_models(table, describe(src)):
        yield _from_batches(
            [part],
            part.column_names,
            target,
            replace(src, model=name, kind=""),
        )


def recorded_predictions(reg: Registry, record: ResultRecord) -> AlignedPredictions:
    """A recorded result's predictions as ``read_predictions`` takes them: the stored array
    (re-hashed as it is read), named by the digest of the predictions as given, which the
    record keeps (no digest is computed again)."""
    return AlignedPredictions(
        predictions=load_predictions(reg, record),
        file=None,
        digest=record.given,
        format="recorded",
    )


# -- other tools' per-item output -----------------------------------------------------------------


def row_texts(resolved: Resolved) -> lmeval.RowTexts:
    """Each row's question text and choices, from the snapshot's ``question`` and ``choices``
    metadata columns (text, and a list of texts); ``PredictionsError`` naming what to register
    when the set has none."""
    reg = resolved.registry
    snap = reg.snapshot(resolved.revision.snapshot)
    data, pf = examples_parquet(reg, snap)
    schema = pf.schema_arrow
    missing = [c for c in _TEXT_COLUMNS if c not in schema.names]
    kinds = (pa.types.is_string, pa.types.is_large_string)
    lists = (pa.types.is_list, pa.types.is_large_list)
    if missing or not (
        any(k(schema.field("question").type) for k in kinds)
        and any(k(schema.field("choices").type) for k in lists)
    ):
        raise PredictionsError(
            f"{resolved.spec}'s rows carry no question text and choices (metadata columns "
            "'question', text, and 'choices', a list of texts) to align lm-eval samples with; "
            "register the question set with them ('dsreg add NAME --table FILE --id-column ID "
            "--label-column ANSWER')"
        )
    table = read_examples(reg, snap, columns=list(_TEXT_COLUMNS), data=data)
    questions = table.column("question").to_pylist()
    choices = table.column("choices").to_pylist()
    empty = next((r for r, q in enumerate(questions) if q is None or choices[r] is None), None)
    if empty is not None:
        raise PredictionsError(
            f"{resolved.spec}: row {empty} has no question text or choices; every row of a "
            "question set needs both"
        )
    return lmeval.RowTexts(questions=questions, choices=choices)


def lm_eval_predictions(
    resolved: Resolved, path: str | os.PathLike[str], texts: lmeval.RowTexts
) -> AlignedPredictions:
    """The answers of an lm-evaluation-harness samples file (``lm_eval --log_samples``),
    aligned with ``resolved``'s rows through each row's question text and choices (``texts``):
    each row's chosen answer position, its class. The digest is of the bytes read."""
    what = f"samples file {str(path)!r}"
    hint = "; give the samples_<task>_<date>.jsonl of lm_eval --log_samples"
    data = read_input(path, what=what, max_bytes=INPUT_BYTES, error=PredictionsError, hint=hint)
    samples = lmeval.parse_samples(data, what=what)
    rows = lmeval.align(samples, texts, what=what)
    classes = len(resolved.registry.snapshot(resolved.revision.snapshot).classes)
    return AlignedPredictions(
        predictions=lmeval.answers(samples, rows, classes=classes, what=what),
        file=str(path),
        digest=hash_bytes(data),
        format="lm-eval",
    )
