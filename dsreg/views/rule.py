"""The view rule (docs/concepts.md, "The view rule"): overlays applied in order, then filtered
and relabelled.

- ``original``: every row, given labels.
- ``cleaned``: rows whose verdict is an error (anything but ``non_error``) removed; labels as given.
- ``corrected``: ``correctable`` and ``suspected`` rows take the suggested label; other error rows
  are removed.
- ``honeypot``: only the ``correctable`` rows, with the corrected label.
- ``decontaminated``: every row but those an audit found (``duplicate``, ``contaminated``);
  labels as given. The audit's verdicts are no label errors: the other views keep such rows.
- ``multilabel``: every row but ``neither``, labelled as in ``corrected``, with ``labels``: the
  ``labels`` list of the last overlay naming the row when it has one; else, for a
  ``multi_label`` row with a suggested label (a votes overlay's "both fit"), the given and the
  suggested label, ascending and once each; else the served label alone.

The rule is implemented three times, side by side in this package:

- here, in numpy over every row of the snapshot: the reference, and what ``Dataset`` serves
  (``dsreg.open``, ``checkout``);
- ``dsreg.views.sql``: in DuckDB SQL, a view over the stored Parquet objects (``dsreg.connect``,
  ``dsreg query``, ``Dataset.sql``);
- ``dsreg.views.sparse``: on the rows overlays name only, with work in the size of the
  corrections (``dsreg eval``, ``dsreg diff``).

``tests/views/test_rule_parity.py`` holds the three equal (rows, labels, given labels and
verdicts) on random snapshots and random stacks of overlays, for every verdict and every view: a
change to the rule changes all three.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.formats.arrays import from_numpy, null_array, scattered, string_array
from dsreg.formats.corrections import COUNT_FIELDS
from dsreg.formats.manifests import AUDIT_VERDICTS, VERDICTS, View
from dsreg.formats.tables import as_numpy

__all__ = [
    "LIST_TYPE",
    "RATED",
    "Merged",
    "ViewRows",
    "apply_view",
    "carried",
    "dense_counts",
    "kept_values",
    "label_lists",
    "merge_overlays",
    "review_columns",
    "scatter_lists",
    "served_lists",
    "view_mask",
]

_CODE = {v: i + 1 for i, v in enumerate(VERDICTS)}


_VERDICT_ARRAY = string_array(VERDICTS)  # code i + 1 is VERDICTS[i]; 0: no overlay names the row
_NEITHER, _MULTI_LABEL = _CODE["neither"], _CODE["multi_label"]


def _lut(test: Callable[[str | None], bool]) -> np.ndarray:
    """A boolean per verdict code (0: no overlay names the row, i + 1: ``VERDICTS[i]``)."""
    return np.array([test(None), *(test(name) for name in VERDICTS)], dtype=bool)


_NOT_ERROR = _lut(lambda name: name in (None, "non_error", "unreviewed", *AUDIT_VERDICTS))
_NOT_AUDITED = _lut(lambda name: name not in AUDIT_VERDICTS)
_RELABEL = _lut(lambda name: name in ("correctable", "suspected"))
_IS_CORRECTABLE = _lut(lambda name: name == "correctable")
_NOT_NEITHER = _lut(lambda name: name != "neither")


@dataclass(frozen=True, slots=True, kw_only=True)
class Merged:
    """Per snapshot row: the verdict code and suggested label of the last overlay naming it."""

    verdict: np.ndarray  # uint8, n; 0 where no overlay names the row
    suggested: np.ndarray  # int16 (int32 past 32,767 classes), n; -1 where none
    set_index: np.ndarray | None = None  # int64, n: index into ``sets``; -1 where no list
    sets: pa.ListArray | None = None  # the ``labels`` lists of every overlay, concatenated


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewRows:
    """The rows a view serves, in snapshot order."""

    rows: np.ndarray  # int64 positions in the snapshot
    label: np.ndarray  # int32, the label the view serves
    given_label: np.ndarray  # int32, the snapshot's label
    verdict: pa.Array  # dictionary<int8, string>, null where no overlay names the row
    labels: pa.ListArray | None = None  # multilabel: every label that fits, per served row


def merge_overlays(n: int, corrections: Sequence[pa.Table]) -> Merged:
    """Fold corrections tables in order; for a row named by several, the later one wins.

    ``set_index`` (8 bytes a row) is allocated only when some overlay holds ``labels`` lists:
    ``None`` otherwise, which ``apply_view`` reads as "no row has a list"."""
    verdict = np.zeros(n, dtype=np.uint8)
    sugs = [as_numpy(t.column("suggested_label"), fill=-1) for t in corrections]
    # int16 when every suggestion fits (fewer than 32,768 classes): 2 bytes a row, not 4.
    wide = any(len(x) and int(x.max()) > np.iinfo(np.int16).max for x in sugs)
    suggested = np.full(n, -1, dtype=np.int32 if wide else np.int16)
    any_lists = any("labels" in t.column_names for t in corrections)
    set_index = np.full(n, -1, dtype=np.int64) if any_lists else None
    sets: list[pa.Array] = []
    offset = 0
    for table, sug in zip(corrections, sugs, strict=True):
        rows = as_numpy(table.column("row"))
        # index_in maps verdict strings to codes in C; a name outside VERDICTS comes back null.
        idx = pc.index_in(table.column("verdict"), value_set=_VERDICT_ARRAY)
        if idx.null_count:
            bad = table.column("verdict").filter(pc.is_null(idx))[0].as_py()
            raise ValueError(f"unknown verdict {bad!r}")
        codes = as_numpy(idx).astype(np.uint8) + 1
        verdict[rows] = codes
        suggested[rows] = sug
        if set_index is None:
            continue
        # The later overlay wins the row's list too: one without a list clears it.
        set_index[rows] = -1
        if "labels" in table.column_names:
            col = table.column("labels").combine_chunks().cast(pa.list_(pa.int32()))
            has = as_numpy(col.is_valid())
            set_index[rows[has]] = offset + np.arange(len(col))[has]
            sets.append(col)
            offset += len(col)
    merged_sets = pa.concat_arrays(sets) if sets else None
    return Merged(verdict=verdict, suggested=suggested, set_index=set_index, sets=merged_sets)


def label_lists(
    label: np.ndarray,
    index: np.ndarray | None,
    sets: pa.ListArray | None,
    second: np.ndarray | None = None,
) -> pa.ListArray:
    """Per row: ``sets[index]`` where ``index >= 0``; else, where ``second >= 0``, the pair
    ``label``, ``second`` ascending and once each (``[3, 5]``; ``[4]`` when both are 4); else
    ``[label]``. Vectorised, no per-row Python (the multilabel view's ``labels`` column).
    ``index=None``: no row has a list of its own (with no ``second`` either, each row's list is
    its label alone, built without an index the size of the rows)."""
    label = np.asarray(label, dtype=np.int32)
    if index is None and second is None:
        offsets = np.arange(len(label) + 1, dtype=np.int32)
        return pa.ListArray.from_arrays(
            from_numpy(offsets, pa.int32()), from_numpy(label, pa.int32())
        )
    if index is None:
        index = np.full(len(label), -1, np.int64)
    index = np.asarray(index, dtype=np.int64)
    m = len(label)
    has = index >= 0
    listed = np.flatnonzero(has)
    if len(listed) and (sets is None or not len(sets)):
        raise ValueError("label_lists: an index into no lists")
    lengths = np.ones(m, dtype=np.int64)
    flat, offs = np.empty(0, np.int32), np.zeros(1, np.int64)
    if len(listed) and sets is not None:
        # The raw values and offsets (a null list's slot is never indexed).
        offs = as_numpy(sets.offsets).astype(np.int64)
        flat = as_numpy(sets.values.slice(offs[0], offs[-1] - offs[0])).astype(np.int32)
        offs = offs - offs[0]
        lengths[listed] = offs[index[listed] + 1] - offs[index[listed]]
    # No second label: ``other`` is the label itself, and no row is a pair.
    other = label if second is None else np.asarray(second, dtype=np.int32)
    paired = np.flatnonzero(~has & (other >= 0) & (other != label))
    lengths[paired] = 2
    out_offs = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offs[1:])
    first = out_offs[:-1]
    values = np.empty(int(out_offs[-1]), dtype=np.int32)
    # Rows without a list: their label first (the lower of a pair), a pair's higher second.
    alone = np.flatnonzero(~has)
    values[first[alone]] = label[alone]
    if len(paired):
        lo = np.minimum(label[paired], other[paired])
        hi = np.maximum(label[paired], other[paired])
        values[first[paired]] = lo
        values[first[paired] + 1] = hi
    if len(listed):
        lens = lengths[listed]
        within = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(lens) - lens, lens
        )
        src = np.repeat(offs[index[listed]], lens) + within
        values[np.repeat(first[listed], lens) + within] = flat[src]
    return pa.ListArray.from_arrays(
        from_numpy(out_offs, pa.int32()), from_numpy(values, pa.int32())
    )


def view_mask(view: View, merged: Merged) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``view`` keeps and the rows it relabels (booleans per snapshot row), from the
    merged overlays alone: a reader may read only the kept rows' labels (``apply_view``'s
    ``kept_labels``)."""
    v = merged.verdict
    # Masks by lookup on the verdict codes, combined in place: a few bytes a row in all (at
    # 50 million rows each temporary mask is 50 MB of fresh pages).
    relabel = _RELABEL[v]
    np.logical_and(relabel, merged.suggested >= 0, out=relabel)
    if view == "original":
        keep = np.ones(len(v), dtype=bool)
    elif view == "cleaned":
        keep = _NOT_ERROR[v]
    elif view == "corrected":
        keep = _NOT_ERROR[v]
        np.logical_or(keep, relabel, out=keep)
    elif view == "honeypot":
        keep = _IS_CORRECTABLE[v]
        np.logical_and(keep, merged.suggested >= 0, out=keep)
    elif view == "multilabel":
        keep = _NOT_NEITHER[v]
    elif view == "decontaminated":
        keep = _NOT_AUDITED[v]
    else:  # pragma: no cover - View is a closed Literal, checked by the schema
        raise ValueError(view)
    return keep, relabel


def kept_values(col: pa.ChunkedArray, keep: np.ndarray) -> np.ndarray:
    """An integer column's values at the rows ``keep`` marks, as int32, taken chunk by chunk
    into one array: a column read in many chunks (a row group each) is never combined first
    (at 50 million rows a 200 MB copy)."""
    out = np.empty(int(np.count_nonzero(keep)), dtype=np.int32)
    at = start = 0
    for chunk in col.chunks:
        values = as_numpy(chunk)
        m = keep[start : start + len(chunk)]
        start += len(chunk)
        k = int(np.count_nonzero(m))
        np.compress(m, values, out=out[at : at + k])
        at += k
    if start != len(keep):
        raise ValueError(f"a column of {start} rows for a mask of {len(keep)}")
    return out


def apply_view(
    view: View,
    labels: np.ndarray | None,
    merged: Merged,
    *,
    mask: tuple[np.ndarray, np.ndarray] | None = None,
    kept_labels: np.ndarray | None = None,
) -> ViewRows:
    """The rows and labels of ``view`` over a snapshot's ``labels`` and its merged overlays.

    ``mask``: ``view_mask(view, merged)`` made already. ``kept_labels`` (instead of
    ``labels``): the snapshot's labels at the kept rows only, in order (``kept_values``)."""
    v = merged.verdict
    keep, relabel = mask if mask is not None else view_mask(view, merged)
    # Every row kept (the original view; a corrected view that only relabels): no gathers.
    every = bool(keep.all())
    rows = np.arange(len(v), dtype=np.int64) if every else np.flatnonzero(keep)
    rows = rows.astype(np.int64, copy=False)
    if kept_labels is not None:
        if len(kept_labels) != len(rows):
            raise ValueError(f"{len(kept_labels)} labels read for a view of {len(rows)} rows")
        given = np.asarray(kept_labels).astype(np.int32, copy=False)
    elif labels is None:
        raise ValueError("apply_view needs labels or kept_labels")
    else:
        given = np.asarray(labels if every else labels[rows]).astype(np.int32, copy=every)
    label = given.copy()
    if view in ("corrected", "honeypot", "multilabel"):
        r = np.flatnonzero(relabel if every else relabel[rows])
        label[r] = merged.suggested[rows[r]]
    # Code - 1 as int8 (0, no overlay, becomes -1), in place on the gathered copy.
    codes = (v.copy() if every else v[rows]).view(np.int8)
    codes -= 1
    # Dictionary-encoded (as stored): no per-row Python strings, a byte per row.
    verdict = pa.DictionaryArray.from_arrays(
        from_numpy(codes, pa.int8(), valid=codes >= 0), _VERDICT_ARRAY
    )
    lists = None
    if view == "multilabel":
        index = None
        if merged.set_index is not None:
            index = merged.set_index if every else merged.set_index[rows]
        # A multi_label row without a list of its own: the given and the suggested label (the
        # raters said both fit; a votes overlay stores the pair as verdict and suggestion).
        # Such a row is never relabelled, so its served label is the given one.
        pair = (v if every else v[rows]) == _MULTI_LABEL
        if index is not None:
            pair &= index < 0
        second = None
        if pair.any():
            second = np.where(pair, merged.suggested if every else merged.suggested[rows], -1)
        lists = label_lists(label, index, merged.sets, second)
    return ViewRows(rows=rows, label=label, given_label=given, verdict=verdict, labels=lists)


def _named(
    rows: np.ndarray, corrections: Sequence[pa.Table]
) -> tuple[np.ndarray, list[tuple[int, np.ndarray, np.ndarray]]]:
    """The served positions some overlay names (sorted) and, per table, the positions it wins
    (the last table naming a row) with its own row indices there: (positions, [(table,
    positions, indices)]). Work in the size of the corrections."""
    n = len(rows)
    pos_parts: list[np.ndarray] = []
    src_parts: list[np.ndarray] = []
    at_parts: list[np.ndarray] = []
    for t, table in enumerate(corrections):
        named = as_numpy(table.column("row"))
        if not len(named) or not n:
            continue
        # Both sorted: each named row's place among the served rows, if it is served.
        pos = np.searchsorted(rows, named)
        hit = pos < n
        hit[hit] = rows[pos[hit]] == named[hit]
        pos_parts.append(pos[hit])
        src_parts.append(np.full(int(hit.sum()), t, dtype=np.int32))
        at_parts.append(np.flatnonzero(hit))
    if not pos_parts:
        return np.empty(0, np.int64), []
    if len(pos_parts) == 1:  # one table: its positions are sorted and unique already
        return pos_parts[0], [(int(src_parts[0][0]) if len(src_parts[0]) else 0, pos_parts[0],
                               at_parts[0])]  # fmt: skip
    pos = np.concatenate(pos_parts)
    src = np.concatenate(src_parts)
    at = np.concatenate(at_parts)
    # Stable sort by position: a position's entries stay in table order, the last one wins.
    order = np.argsort(pos, kind="stable")
    pos, src, at = pos[order], src[order], at[order]
    last = np.ones(len(pos), dtype=bool)
    last[:-1] = pos[1:] != pos[:-1]
    pos, src, at = pos[last], src[last], at[last]
    wins = [(t, pos[src == t], at[src == t]) for t in np.unique(src).tolist()]
    return pos, wins


def _bitmap(n: int, at: np.ndarray) -> pa.Buffer:
    """Arrow validity bits for ``n`` slots, set at positions ``at``."""
    bits = np.zeros(n, dtype=bool)
    bits[at] = True
    return pa.py_buffer(np.packbits(bits, bitorder="little"))


def review_columns(
    rows: np.ndarray, corrections: Sequence[pa.Table], classes: Sequence[str]
) -> dict[str, pa.Array]:
    """What a reviewer needs of the served ``rows`` (sorted snapshot positions): the suggested
    label, its name, the score and the vote counts of the last overlay naming each row, null
    where no overlay names it (or that overlay holds none). The values are gathered for the
    named rows only (work in the size of the corrections) and scattered into null columns
    the length of ``rows``."""
    n = len(rows)
    pos, wins = _named(rows, corrections)
    fields: dict[str, tuple[pa.DataType, list[np.ndarray], list[np.ndarray]]] = {
        name: (type_, [], [])
        for name, type_ in (
            ("suggested_label", pa.int32()),
            ("score", pa.float64()),
            *((f"votes_{f}", pa.int32()) for f in COUNT_FIELDS),
        )
    }

    def gather(name: str, col: pa.ChunkedArray | pa.Array) -> None:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        type_, values, oks = fields[name]
        values.append(as_numpy(col.cast(type_), fill=0))
        oks.append(as_numpy(col.is_valid()))

    order: list[np.ndarray] = []
    for t, where, idx in wins:
        table = corrections[t]
        take = from_numpy(idx, pa.int64())
        order.append(where)
        gather("suggested_label", table.column("suggested_label").take(take))
        gather("score", table.column("score").take(take))
        struct = table.column("votes").take(take).combine_chunks()
        # flatten: a null struct (a detected overlay's row) has null counts.
        flat = struct.flatten()
        for f in COUNT_FIELDS:
            gather(f"votes_{f}", flat[struct.type.get_field_index(f)])
    # Back in position order (each table's positions are sorted; the tables interleave).
    perm = None
    if len(order) > 1:
        perm = np.argsort(np.concatenate(order), kind="stable")
    # Each column is its few values scattered into zeroed pages the length of the rows (the
    # rows no overlay names cost nothing to fill); the names are a dictionary over the classes
    # sharing the suggested labels' buffer. One validity bitmap serves every column whose
    # values are all present (the usual case), null exactly where no overlay names the row.
    named: pa.Buffer | None = None
    out: dict[str, pa.Array] = {}
    for name, (type_, values, oks) in fields.items():
        v = np.concatenate(values) if values else np.empty(0)
        ok = np.concatenate(oks) if oks else np.empty(0, bool)
        if perm is not None:
            v, ok = v[perm], ok[perm]
        if not ok.any():
            out[name] = null_array(type_, n)
        elif ok.all():
            if named is None:
                named = _bitmap(n, pos)
            out[name] = scattered(n, pos, v, type_, bitmap=named)
        else:
            out[name] = scattered(n, pos[ok], v[ok], type_, bitmap=_bitmap(n, pos[ok]))
        if name == "suggested_label":
            out["suggested_label_name"] = pa.DictionaryArray.from_arrays(
                out[name], string_array(classes)
            )
    return out


# -- what the raters said: label sets and counts ------------------------------------------------

#: The relabelings' columns (corrections version 2) a view serves when the revision carries
#: them: ``labels`` (the label set) and ``label_counts`` (the raters' counts per class).
RATED = ("labels", "label_counts")
LIST_TYPE = pa.list_(pa.int32())


def carried(corrections: Sequence[pa.Table]) -> tuple[str, ...]:
    """The ``RATED`` columns some corrections table holds a list in (not null): the columns
    the revision's views serve besides today's (the multilabel view serves ``labels`` always).
    A revision whose overlays hold none keeps its columns as they were."""
    return tuple(
        name
        for name in RATED
        if any(
            name in t.column_names and t.column(name).null_count < t.num_rows for t in corrections
        )
    )


def _one(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)
    return col


def dense_counts(col: pa.Array | pa.ChunkedArray, k: int) -> pa.ListArray:
    """Stored ``label_counts`` (a ``{label, count}`` per class counted) as lists of ``k``
    counts in class order (CIFAR-10H's row; 0 for a class nobody chose), null where null."""
    col = _one(col)
    m = len(col)
    valid = as_numpy(col.is_valid())
    lens = as_numpy(pc.list_value_length(col), fill=0).astype(np.int64)
    flat = pc.list_flatten(col)
    dense = np.zeros((m, k), dtype=np.int32)
    if len(flat):
        at = np.repeat(np.arange(m, dtype=np.int64), lens)
        dense[at, as_numpy(pc.struct_field(flat, "label"))] = as_numpy(
            pc.struct_field(flat, "count")
        )
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.where(valid, k, 0), out=offsets[1:])
    return pa.ListArray.from_arrays(
        from_numpy(offsets, pa.int32()),
        from_numpy(dense[valid].ravel(), pa.int32()),
        mask=from_numpy(~valid, pa.bool_()),
    )


def scatter_lists(n: int, at: np.ndarray, lists: pa.Array) -> pa.ListArray:
    """``n`` list slots holding ``lists[i]`` at position ``at[i]`` (sorted), null elsewhere."""
    lists = _one(lists)
    valid = np.zeros(n, dtype=bool)
    valid[at] = as_numpy(lists.is_valid())
    lengths = np.zeros(n, dtype=np.int64)
    lengths[at] = as_numpy(pc.list_value_length(lists), fill=0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pc.list_flatten(lists).cast(pa.int32())
    return pa.ListArray.from_arrays(
        from_numpy(offsets, pa.int32()), values, mask=from_numpy(~valid, pa.bool_())
    )


def served_lists(
    rows: np.ndarray, corrections: Sequence[pa.Table], name: str, k: int
) -> pa.ListArray:
    """``name`` (one of ``RATED``) of the last overlay naming each served row (sorted snapshot
    positions), as the review columns are taken: null where no overlay names the row or that
    overlay holds none. ``label_counts`` come dense (``dense_counts``); label sets as stored.
    Work in the size of the corrections."""
    pos, wins = _named(rows, corrections)
    parts: list[pa.Array] = []
    order: list[np.ndarray] = []
    for t, where, idx in wins:
        table = corrections[t]
        if name in table.column_names:
            col = _one(table.column(name).take(from_numpy(idx, pa.int64())))
            parts.append(dense_counts(col, k) if name == "label_counts" else col.cast(LIST_TYPE))
        else:
            parts.append(pa.nulls(len(idx), LIST_TYPE))
        order.append(where)
    if not parts:
        return scatter_lists(len(rows), np.empty(0, np.int64), pa.array([], LIST_TYPE))
    lists = pa.concat_arrays(parts)
    if len(order) > 1:
        # Back in position order (each table's positions are sorted; the tables interleave).
        lists = lists.take(from_numpy(np.argsort(np.concatenate(order), kind="stable"), pa.int64()))
    return scatter_lists(len(rows), pos, lists)
