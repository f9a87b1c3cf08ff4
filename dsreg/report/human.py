"""Scores against label sets and raters' counts (``dsreg eval``, docs/relabelings.md): the rows
whose last overlay gives ``labels`` or ``label_counts``, and each model's majority accuracy,
expected agreement and cross-entropy against the raters there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dsreg.errors import PredictionsError
from dsreg.formats.tables import as_numpy
from dsreg.report.ranks import Ranks
from dsreg.views.sparse import Named

__all__ = ["HumanScore", "SetTarget", "human_score", "set_target"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HumanScore:
    """One model against the raters' distributions (overlays with ``label_counts``), over the
    ``rows`` that carry counts: accuracy against the majority label (the most chosen class,
    the lowest index on a tie), expected agreement with a random rater (the mean share of
    raters who chose the predicted class), and the mean cross-entropy of the model's
    probabilities against the raters' distribution (None for predicted labels)."""

    rows: int
    majority_correct: int
    majority_accuracy: float | None
    expected_agreement: float | None
    cross_entropy: float | None
    rank: int | None = None  # by majority accuracy


@dataclass(frozen=True, slots=True, kw_only=True)
class SetTarget:
    """The rows with label sets or counts (``Target.extra_rows``), every overlay's ``labels``
    lists (``lists``), and per counted row its raters' total and majority label."""

    rows: np.ndarray
    lists: pa.ListArray | None
    counted: np.ndarray  # positions in ``rows`` that carry counts (total > 0)
    total: np.ndarray  # float64 raters, per counted row
    majority: np.ndarray  # int64 majority label, per counted row
    share: Any  # (counted index, label) -> share of raters: a scipy-free sparse lookup
    # The counts, flattened: entry e says value[e] raters chose label[e] at rows[parent[e]].
    parent: np.ndarray
    label: np.ndarray
    value: np.ndarray


def set_target(merged: Named, k: int) -> SetTarget:
    """The rows whose last overlay gives a label set or raters' counts, and those counts."""
    none = np.empty(0, np.int64)
    si = merged.set_index if len(merged.set_index) == len(merged.named) else none
    ci = merged.count_index if len(merged.count_index) == len(merged.named) else none
    has_set = si >= 0 if len(si) else np.zeros(len(merged.named), bool)
    has_cnt = ci >= 0 if len(ci) else np.zeros(len(merged.named), bool)
    extra = has_set | has_cnt
    rows = merged.named[extra]
    # The winning rows' counts, flattened: entry e is at extra position parent[e].
    parent, label, value = none, none, np.empty(0, np.float64)
    if merged.counts is not None and has_cnt.any():
        pos = np.flatnonzero(has_cnt[extra])
        idx = ci[extra][pos]
        offsets = as_numpy(merged.counts.offsets).astype(np.int64)
        items = merged.counts.values
        labels_all = as_numpy(items.field("label")).astype(np.int64)
        counts_all = as_numpy(items.field("count")).astype(np.float64)
        start, lengths = offsets[idx], offsets[idx + 1] - offsets[idx]
        within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        at = np.repeat(start, lengths) + within
        parent = np.repeat(pos, lengths).astype(np.int64)
        label, value = labels_all[at], counts_all[at]
    total = np.bincount(parent, weights=value, minlength=len(rows))
    counted = np.flatnonzero(total > 0)
    # Majority: the most chosen label of each row, the lowest index on a tie.
    order = np.lexsort((label, -value, parent))
    first = np.ones(len(order), dtype=bool)
    first[1:] = parent[order][1:] != parent[order][:-1]
    majority = np.full(len(rows), -1, dtype=np.int64)
    majority[parent[order][first]] = label[order][first]
    keys = parent * k + label
    by_key = np.argsort(keys, kind="stable")
    sorted_keys = keys[by_key]

    def share(i: np.ndarray, lab: np.ndarray) -> np.ndarray:
        """Share of raters who chose ``lab`` at counted row ``i``."""
        pos = counted[i]
        key = pos * k + lab
        j = np.minimum(np.searchsorted(sorted_keys, key), max(len(sorted_keys) - 1, 0))
        found = sorted_keys[j] == key if len(sorted_keys) else np.zeros(len(key), bool)
        got = np.where(found, value[by_key[j]] if len(by_key) else 0.0, 0.0)
        return np.asarray(got / total[pos])

    return SetTarget(
        rows=rows,
        lists=merged.sets,
        counted=counted,
        total=total[counted],
        majority=majority[counted],
        share=share,
        parent=parent,
        label=label,
        value=value,
    )


def human_score(ranks: Ranks, sets: SetTarget) -> HumanScore | None:
    """One model against the raters' counts of ``sets`` (None: the revision has none)."""
    if not len(sets.counted):
        return None
    top1 = ranks.top1[sets.counted] if ranks.top1 is not None else np.empty(0, np.int32)
    missing = np.flatnonzero(top1 < 0)
    if len(missing):
        rows = sets.rows[sets.counted[missing]]
        raise PredictionsError(
            f"predictions of model {ranks.source.model!r} miss {len(missing)} of the rows "
            f"with rater counts, first rows {rows[:5].tolist()}; predict every row"
        )
    m = len(top1)
    majority = int(np.count_nonzero(top1 == sets.majority))
    agreement = float(sets.share(np.arange(m), top1.astype(np.int64)).mean())
    xent = None
    if ranks.xent is not None:
        xent = float(np.mean(ranks.xent[sets.counted]))
    return HumanScore(
        rows=m,
        majority_correct=majority,
        majority_accuracy=majority / m,
        expected_agreement=agreement,
        cross_entropy=xent,
    )
