"""``Dataset.iter_batches``: a view streamed as Arrow record batches, in bounded memory.

The snapshot's examples table is read a batch at a time from its verified bytes, and the view
rule (``views.rule.apply_view``, the reference) is applied to each batch with the overlays
merged for that batch's rows only (``views.rule.merge_overlays``'s fold, later overlays
winning, done per batch from the corrections tables' sorted rows): positionally, with no
per-row Python object. What stays in memory for the whole pass is the compressed examples
object and the corrections, never an array the size of the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.errors import InvalidInputError, ManifestError
from dsreg.formats.arrays import string_array
from dsreg.formats.manifests import VERDICTS, Snapshot, View
from dsreg.formats.tables import as_numpy, from_numpy, served_metadata
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.tables import check_example_columns, examples_parquet
from dsreg.views.rule import Merged, apply_view, carried, served_lists

__all__ = ["iter_view_batches"]


def iter_view_batches(
    reg: Registry,
    snap: Snapshot,
    corrections: Sequence[pa.Table],
    view: View,
    *,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """The rows ``view`` serves, in snapshot order, as record batches of at most
    ``batch_size`` rows: ``row, example_id, label, label_name, given_label, verdict, blob,
    size``, ``labels`` (multilabel view, or carried by an overlay), ``label_counts`` (carried),
    then the served metadata columns."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be a whole number >= 1; got {batch_size!r}")
    named = [
        _Named.of(t, offset) for t, offset in zip(corrections, _offsets(corrections), strict=True)
    ]
    sets = _sets(corrections)
    names = string_array(snap.classes)
    # The label sets and raters' counts the overlays carry (the multilabel view's own
    # ``labels`` comes from the rule): the last overlay naming each row's, as ``labels()``.
    rated = [n for n in carried(corrections) if not (n == "labels" and view == "multilabel")]
    _data, pf = examples_parquet(reg, snap)
    what = f"examples table {short(snap.examples)} of {snap.dataset!r}"
    try:
        meta = served_metadata(pf.schema_arrow.names)
        start = 0
        for batch in pf.iter_batches(batch_size=batch_size, use_threads=False):
            n = batch.num_rows
            # The checks every reader of an examples table makes (ids, blobs, labels), batch
            # by batch: a hostile table is refused before any of its rows is served.
            check_example_columns(batch, snap)
            labels = as_numpy(batch.column("label")).astype(np.int32, copy=False)
            part = _merge_slice(named, sets, start, n)
            v = apply_view(view, labels, part)
            pick = _picker(v.rows, n)
            label = from_numpy(v.label, pa.int32())
            cols: dict[str, pa.Array] = {
                "row": from_numpy(v.rows + start, pa.int64()),
                "example_id": pick(batch.column("example_id")),
                "label": label,
                # Dictionaries over the classes and the verdicts, as in ``labels()``.
                "label_name": pa.DictionaryArray.from_arrays(label, names),
                "given_label": from_numpy(v.given_label, pa.int32()),
                "verdict": v.verdict,
                "blob": pick(batch.column("blob")),
                "size": pick(batch.column("size")),
            }
            if v.labels is not None:
                cols["labels"] = v.labels
            if rated:  # each table's rows in this batch only (sorted: a slice, no copy)
                near = [
                    t.slice(int(lo), int(hi - lo))
                    for t, nm in zip(corrections, named, strict=True)
                    for lo, hi in [np.searchsorted(nm.rows, [start, start + n])]
                ]
                for name in rated:
                    cols[name] = served_lists(v.rows + start, near, name, len(snap.classes))
            for name in meta:
                cols[name] = pick(batch.column(name))
            start += n
            if len(v.rows):
                yield pa.RecordBatch.from_pydict(cols)
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"{what} is not readable Parquet: {e}") from e


def _picker(rows: np.ndarray, n: int) -> Callable[[pa.Array], pa.Array]:
    """How a batch's columns become the view's: as they are when it serves every row (most
    batches of most views), else through a boolean filter (it copies runs of rows, cheaper
    than a gather by position; ``rows`` is sorted)."""
    if len(rows) == n:
        return lambda col: col
    keep = np.zeros(n, dtype=bool)
    keep[rows] = True
    mask = from_numpy(keep, pa.bool_())
    return lambda col: col.filter(mask)


class _Named:
    """One corrections table as the fold needs it: sorted rows, verdict codes (as
    ``merge_overlays`` numbers them: ``VERDICTS`` index + 1), suggested labels (-1: none) and
    each row's index into the concatenated label lists (-1: none)."""

    __slots__ = ("codes", "rows", "set_index", "sug")

    def __init__(
        self, rows: np.ndarray, codes: np.ndarray, sug: np.ndarray, set_index: np.ndarray
    ) -> None:
        self.rows, self.codes, self.sug, self.set_index = rows, codes, sug, set_index

    @classmethod
    def of(cls, table: pa.Table, offset: int) -> _Named:
        rows = as_numpy(table.column("row")).astype(np.int64)
        idx = pc.index_in(table.column("verdict"), value_set=string_array(VERDICTS))
        if idx.null_count:
            bad = table.column("verdict").filter(pc.is_null(idx))[0].as_py()
            raise ValueError(f"unknown verdict {bad!r}")
        codes = (as_numpy(idx).astype(np.int64) + 1).astype(np.uint8)
        sug = as_numpy(table.column("suggested_label"), fill=-1).astype(np.int32)
        set_index = np.full(len(rows), -1, dtype=np.int64)
        if "labels" in table.column_names:
            has = as_numpy(pc.is_valid(table.column("labels"))).astype(bool)
            set_index[has] = offset + np.flatnonzero(has)
        return cls(rows, codes, sug, set_index)


def _offsets(corrections: Sequence[pa.Table]) -> list[int]:
    out, at = [], 0
    for t in corrections:
        out.append(at)
        if "labels" in t.column_names:
            at += t.num_rows
    return out


def _sets(corrections: Sequence[pa.Table]) -> pa.ListArray | None:
    lists = [
        t.column("labels").combine_chunks().cast(pa.list_(pa.int32()))
        for t in corrections
        if "labels" in t.column_names
    ]
    return pa.concat_arrays(lists) if lists else None


def _merge_slice(named: Sequence[_Named], sets: pa.ListArray | None, start: int, n: int) -> Merged:
    """``merge_overlays`` restricted to rows ``start .. start + n``."""
    verdict = np.zeros(n, dtype=np.uint8)
    suggested = np.full(n, -1, dtype=np.int32)
    set_index = np.full(n, -1, dtype=np.int64)
    for t in named:
        lo, hi = np.searchsorted(t.rows, [start, start + n])
        at = t.rows[lo:hi] - start
        verdict[at] = t.codes[lo:hi]
        suggested[at] = t.sug[lo:hi]
        set_index[at] = t.set_index[lo:hi]
    return Merged(verdict=verdict, suggested=suggested, set_index=set_index, sets=sets)
