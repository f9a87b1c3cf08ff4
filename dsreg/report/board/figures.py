"""The figures of a leaderboard from the row patterns of one revision (docs/queries.md,
"leaderboard").

A revision's rows are reduced to patterns (``stats.Patterns``) whose features are, per view,
whether the row is in the view and, per model, whether the model's top-1 is the row's label
under that view. Every figure below is a function of those patterns' counts: each model's
accuracy with its Wilson interval, its rank and bootstrap rank interval, and for each pair of
models on each view the discordant counts and McNemar's exact p-value, Holm-corrected across
the pairs of the view.

``view_figures`` is the one call that turns counts (``Counts``: feature sums, resampled sums,
discordant counts) into figures; ``counts_of`` makes them from any patterns, and the
leaderboard from its own structured patterns, more cheaply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsreg.report.stats.core import (
    LEVEL,
    Patterns,
    competition_ranks,
    discordant,
    holm,
    wilson,
)

__all__ = ["Counts", "ViewFigures", "counts_of", "feature_index", "mcnemar_many", "view_figures"]

#: Holm-corrected p-values below this make a pair's order significant.
ALPHA = 0.05


def feature_index(views: int, models: int, view: int, model: int | None) -> int:
    """The column of a feature: per view, membership first, then each model's correctness."""
    return view * (models + 1) + (0 if model is None else 1 + model)


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewFigures:
    """One view of one revision: rows, and per model correct rows, accuracy, Wilson interval,
    rank and rank interval; per pair (i < j) the discordant counts and p-values."""

    rows: int
    correct: np.ndarray  # (M,) int64
    intervals: list[tuple[float, float] | None]
    ranks: np.ndarray  # (M,) competition ranks, 0 where the view is empty
    rank_intervals: list[tuple[float, float] | None]
    only: np.ndarray  # (M, M): rows model a gets right and model b does not
    pvalues: np.ndarray  # (M, M) McNemar exact, symmetric, 1 on the diagonal
    adjusted: np.ndarray  # (M, M) Holm-corrected across the view's pairs

    def accuracy(self, m: int) -> float | None:
        return None if not self.rows else float(self.correct[m]) / self.rows

    def significant(self, a: int, b: int) -> bool:
        return bool(self.adjusted[a, b] < ALPHA)

    def model_dict(self, m: int) -> dict[str, Any]:
        iv, rv = self.intervals[m], self.rank_intervals[m]
        return {
            "rows": self.rows,
            "correct": int(self.correct[m]),
            "accuracy": self.accuracy(m),
            "interval": None if iv is None else list(iv),
            "rank": int(self.ranks[m]) or None,
            "rank_interval": None if rv is None else list(rv),
        }

    def pairs(self, names: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                out.append(
                    {
                        "a": names[a],
                        "b": names[b],
                        "only_a": int(self.only[a, b]),
                        "only_b": int(self.only[b, a]),
                        "p": float(self.pvalues[a, b]),
                        "p_holm": float(self.adjusted[a, b]),
                        "significant": self.significant(a, b),
                    }
                )
        return out


def mcnemar_many(only_a: np.ndarray, only_b: np.ndarray) -> np.ndarray:
    """McNemar's exact two-sided p-values, elementwise: at probability 1/2 the binomial is
    symmetric, so the two-sided p-value is twice the smaller tail, capped at 1 (what
    ``stats.mcnemar_exact`` computes one pair at a time); 1 where no row is discordant."""
    from scipy.special import bdtr  # the binomial CDF, without importing scipy.stats

    a = np.asarray(only_a, dtype=np.int64)
    b = np.asarray(only_b, dtype=np.int64)
    n = a + b
    tail = bdtr(np.minimum(a, b), np.maximum(n, 1), 0.5)
    p: np.ndarray = np.where(n == 0, 1.0, np.minimum(1.0, 2.0 * tail))
    return p


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    """What the figures of one revision are computed from: each feature's sum over the rows
    (``sums``, F), over each bootstrap resample (``samples``, R x F, or None), and per view
    the (M x M) discordant counts (``only[v][a, b]``: rows of view v model a gets right and
    model b does not). Features are laid out by ``feature_index``."""

    views: int
    models: int
    sums: np.ndarray
    samples: np.ndarray | None
    only: list[np.ndarray]


def counts_of(patterns: Patterns, *, views: int, models: int, resamples: int, seed: int) -> Counts:
    """``Counts`` from row patterns directly (any layout of rows, no structure used)."""
    only = []
    for v in range(views):
        first = feature_index(views, models, v, 0)
        only.append(discordant(patterns.features[:, first : first + models], patterns.counts))
    return Counts(
        views=views,
        models=models,
        sums=patterns.sums(),
        samples=patterns.resample(resamples, seed) if resamples else None,
        only=only,
    )


def _rank_intervals(
    samples: np.ndarray, member: int, cols: slice, level: float
) -> list[tuple[float, float] | None]:
    """The percentile interval of each model's rank over the resamples (a resample that drew
    no row of the view ranks no one and is left out)."""
    n = samples[:, member]
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.where(n[:, None] > 0, samples[:, cols] / n[:, None], np.nan)
    ranks = competition_ranks(boot).astype(np.float64)
    ranks[ranks == 0] = np.nan
    if np.isnan(ranks).all():
        return [None] * ranks.shape[1]
    # Ranks are whole numbers: the interval's ends are ranks some resample gave (the lower
    # end rounded down, the upper up), never a rank between two.
    tail = (1 - level) / 2 * 100
    low = np.nanpercentile(ranks, tail, axis=0, method="lower")
    high = np.nanpercentile(ranks, 100 - tail, axis=0, method="higher")
    return [(float(lo), float(hi)) for lo, hi in zip(low, high, strict=True)]


def view_figures(counts: Counts, *, level: float = LEVEL) -> list[ViewFigures]:
    """The figures of each view of one revision from its counts: Wilson intervals, ranks,
    bootstrap rank intervals (with samples), McNemar exact p-values Holm-corrected across the
    pairs of each view. The one call that turns counts into figures."""
    models, sums = counts.models, counts.sums
    out = []
    for v in range(counts.views):
        member = feature_index(counts.views, models, v, None)
        cols = slice(member + 1, member + 1 + models)
        rows = int(sums[member])
        correct = sums[cols].astype(np.int64)
        acc = correct / rows if rows else np.full(models, np.nan)
        rank_iv: list[tuple[float, float] | None] = [None] * models
        if counts.samples is not None and rows:
            rank_iv = _rank_intervals(counts.samples, member, cols, level)
        only = counts.only[v]
        p = mcnemar_many(only, only.T)
        iu = np.triu_indices(models, 1)
        adj = np.ones_like(p)
        adj[iu] = holm(p[iu].tolist())
        adj = np.minimum(adj, adj.T)
        out.append(
            ViewFigures(
                rows=rows,
                correct=correct,
                intervals=[wilson(int(c), rows, level) for c in correct],
                ranks=competition_ranks(acc),
                rank_intervals=rank_iv,
                only=only,
                pvalues=p,
                adjusted=adj,
            )
        )
    return out
