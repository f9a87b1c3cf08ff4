"""The patterns ``dsreg eval``'s statistics are computed on, against a plain reference: every
row's correctness on every view taken from ``Dataset.labels()`` of that view, the rows counted
as tuples in a dict. Every way of counting (population counts, a bincount of keys, sorted keys,
every row built one by one), over chunks smaller than the set, gives the reference's patterns in
the reference's order (the bootstrap draws depend on that order)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.formats.manifests import VIEWS
from dsreg.registry.reader import LocalReader
from dsreg.report.evaluate import revision_target
from dsreg.report.predictions import read_predictions
from dsreg.report.stats import rowscores
from dsreg.report.stats.core import PatternCounter
from dsreg.report.stats.rowscores import RowScores
from dsreg.views.sparse import sparse_views

# (module constant, value): each setting sends the rows no overlay names down another path.
PATHS = {
    "popcount": {},
    "bincount": {"_POPCOUNT_MODELS": 0},
    "sorted keys": {"_POPCOUNT_MODELS": 0, "_COUNT_BITS": 0},
    "every row": {"_KEY_BITS": 0},
}


def _reference(ls: Any, preds: dict[str, np.ndarray]) -> tuple[list[str], Counter[tuple[int, ...]]]:
    """The statistics' views in RowScores' order and each row's features, counted: per view
    a served bit, then per model a right bit."""
    n, models = ls.n, list(preds)
    right: dict[str, np.ndarray] = {}

    def scored(view: str, rows: np.ndarray, labels: np.ndarray | list[Any]) -> np.ndarray:
        c = np.full((n, len(models)), -1, np.int8)
        for j, m in enumerate(models):
            if view == "multilabel":  # the top-1 prediction in the row's label set
                hit = [int(preds[m][r]) in s for r, s in zip(rows, labels, strict=True)]
                c[rows, j] = np.asarray(hit, np.int8)
            else:
                c[rows, j] = preds[m][rows] == np.asarray(labels)
        return c

    for view in VIEWS:
        t = ls.view(view)
        rows = t.column("row").to_numpy()
        if view == "honeypot":
            right["honeypot_given"] = scored(view, rows, t.column("given_label").to_numpy())
        labels = t.column("labels").to_pylist() if view == "multilabel" else t.column("label")
        right[view] = scored(view, rows, labels if view == "multilabel" else labels.to_numpy())
        if view == "decontaminated":  # the rows it leaves out, on their given labels
            out = np.setdiff1d(np.arange(n), rows)
            right["contaminated"] = scored(view, out, ls.labels[out])
    views = list(right)
    rows_as = Counter(
        tuple(int(x) for v in views for x in (right[v][r, 0] >= 0, *(right[v][r] > 0)))
        for r in range(n)
    )
    return views, rows_as


def _patterns(ls: Any, preds: dict[str, np.ndarray]) -> tuple[list[str], Any]:
    resolved = LocalReader(ls.reg).revision("toy@corrected")  # every view from its overlays
    labels = revision_target(resolved)
    vws = sparse_views(labels.target.n, labels.merged, VIEWS)
    scores = RowScores(labels.target.n, vws, labels.sets)
    for ranks in read_predictions(labels.target, list(preds.items())):
        scores.add(ranks.source.model, ranks)
    got = scores.correctness()
    return list(got.views), got.patterns


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("models", [1, 3, 6])
def test_patterns_equal_the_rows_counted_plainly(
    make_labelset: Any, monkeypatch: pytest.MonkeyPatch, path: str, models: int
) -> None:
    ls = make_labelset(n=203, k=4, seed=models, overlays=3)
    rng = np.random.default_rng(models)
    preds = {f"m{j}": np.where(rng.random(ls.n) < 0.6, ls.labels, rng.integers(0, 4, ls.n))
             for j in range(models)}  # fmt: skip
    views, want = _reference(ls, preds)
    monkeypatch.setattr(rowscores, "_CHUNK", 64)  # four chunks, the last one short
    for name, value in PATHS[path].items():
        monkeypatch.setattr(rowscores, name, value)
    got_views, pat = _patterns(ls, preds)
    assert got_views == views
    order = sorted(want)
    assert pat.features.tolist() == [list(k) for k in order]
    assert pat.counts.tolist() == [want[k] for k in order]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 3, 8, 9, 16, 17, 40, 64, 65, 70]),
    st.integers(0, 300),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_pattern_counter_sorts_and_counts_rows_as_tuples(
    columns: int, n: int, seed: int, weighted: bool
) -> None:
    """Chunks of rows, plain or standing for several rows each (a weight of 0 keeps the
    pattern): the distinct rows in tuple order, each with its rows."""
    rng = np.random.default_rng(seed)
    # Few distinct rows (as eval's are) and, at random, as many as there are rows.
    pool = rng.integers(0, 2, size=(int(rng.integers(1, 12)), columns)).astype(np.uint8)
    rows = pool[rng.integers(0, len(pool), n)] if rng.random() < 0.7 else (
        rng.integers(0, 2, size=(n, columns)).astype(np.uint8)
    )  # fmt: skip
    weights = rng.integers(0, 4, n) if weighted else np.ones(n, np.int64)
    counter = PatternCounter(columns)
    cuts = np.sort(rng.integers(0, n + 1, 2))
    for lo, hi in ((0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], n)):
        if rng.random() < 0.5:
            counter.add(rows[lo:hi], weights[lo:hi] if weighted else None)
        else:
            cols = [rows[lo:hi, c] for c in range(columns)]
            counter.add_columns(cols, weights[lo:hi] if weighted else None, rows=hi - lo)
    want: Counter[tuple[int, ...]] = Counter()
    for r, w in zip(rows.tolist(), weights.tolist(), strict=True):
        want[tuple(r)] += w
    pat = counter.patterns()
    order = sorted(want)
    assert pat.features.tolist() == [list(k) for k in order]
    assert pat.counts.tolist() == [want[k] for k in order]
