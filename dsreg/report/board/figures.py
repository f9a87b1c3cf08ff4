"""The figures of a leaderboard from the row patterns of one revision (docs/queries.md,
"leaderboard").

A revision's rows are reduced to patterns (``stats.Patterns``) whose features are, per view,
whether the row is in the view and, per model, whether the model's top-1 is the row's label
under that view. Every figure below is a function of those patterns' counts: each model's
accuracy with its Wilson interval, its rank and bootstrap rank interval, and for each pair of
models on each view the discordant counts and McNemar's exact p-value, Holm-corrected across
the pairs of the view.

``view_figures`` is the one call that turns patterns into figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsreg.report.stats import (
    LEVEL,
    Patterns,
    competition_ranks,
    discordant,
    holm,
    wilson,
)

__all__ = ["ViewFigures", "feature_index", "mcnemar_many", "view_figures"]

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
    from scipy.stats import binom

    a = np.asarray(only_a, dtype=np.int64)
    b = np.asarray(only_b, dtype=np.int64)
    n = a + b
    tail = binom.cdf(np.minimum(a, b), np.maximum(n, 1), 0.5)
    p: np.ndarray = np.where(n == 0, 1.0, np.minimum(1.0, 2.0 * tail))
    return p


def view_figures(
    patterns: Patterns, *, views: int, models: int, resamples: int, seed: int, level: float = LEVEL
) -> list[ViewFigures]:
    """The figures of each view of one revision from its patterns; ``resamples`` bootstrap
    resamples of the rows (0: no rank intervals), the same for a ``seed``."""
    sums = patterns.sums()
    samples = patterns.resample(resamples, seed) if resamples else None
    out = []
    for v in range(views):
        member = feature_index(views, models, v, None)
        cols = slice(member + 1, member + 1 + models)
        rows = int(sums[member])
        correct = sums[cols].astype(np.int64)
        acc = correct / rows if rows else np.full(models, np.nan)
        ranks = competition_ranks(acc)
        rank_iv: list[tuple[float, float] | None] = [None] * models
        if samples is not None and rows:
            n = samples[:, member]
            with np.errstate(divide="ignore", invalid="ignore"):
                boot = np.where(n[:, None] > 0, samples[:, cols] / n[:, None], np.nan)
            boot_ranks = competition_ranks(boot).astype(np.float64)
            boot_ranks[boot_ranks == 0] = np.nan  # a resample that drew no row of the view
            tail = (1 - level) / 2 * 100
            low, high = np.nanpercentile(boot_ranks, [tail, 100 - tail], axis=0)
            rank_iv = [(float(lo), float(hi)) for lo, hi in zip(low, high, strict=True)]
        only = discordant(patterns.features[:, cols], patterns.counts)
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
                ranks=ranks,
                rank_intervals=rank_iv,
                only=only,
                pvalues=p,
                adjusted=adj,
            )
        )
    return out
