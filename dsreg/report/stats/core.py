"""Uncertainty and significance of accuracies: intervals, paired tests, rank intervals, flip points.

Every figure here is a function of counts. A model's accuracy on a view is correct rows over the
view's rows; a pair of models on a view is four counts of rows (both right, only A right, only B
right, both wrong). So the bootstrap runs on *patterns*, not rows: each row is a vector of 0/1
features (is it in view v, is model m right on it under view v's label, ...), rows with equal
vectors are exchangeable, and resampling N rows with replacement draws the patterns' counts from
a multinomial over the distinct patterns with their observed shares. That is the bootstrap over
rows exactly (the same distribution of every resampled sum), at the cost of the number of
distinct patterns, which for ten models is a few thousand whatever the number of rows.

The closed forms are the textbook ones: Wilson's score interval for one proportion, McNemar's
exact test (a two-sided binomial test on the discordant rows) for two models on the same rows,
Holm's step-down correction across the pairs of one view, percentile intervals for bootstrapped
figures, and competition ranking ("1, 2, 2, 4") for ranks, as ``dsreg eval`` ranks models.

A flip point (Northcutt, Athalye and Mueller, 2021, Section 6) answers: if correctly labelled
rows were removed at random, how many must go before model B overtakes model A? With ``k`` a
model's correct rows among the ``n_c`` rows whose label was right and the ``n_e`` corrected
errors, keeping a fraction ``r`` of the correct rows gives an expected difference of correct rows
``r (kA_c - kB_c) + (kA_e - kB_e)`` over the same number of rows for both models, so the order
flips in expectation at ``r* = (kB_e - kA_e) / (kA_c - kB_c)``: a share ``1 - r*`` of the
correctly labelled rows removed, at a noise prevalence of ``n_e / (r* n_c + n_e)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

__all__ = [
    "FlipPoint",
    "PatternCounter",
    "Patterns",
    "competition_ranks",
    "discordant",
    "flip_point",
    "flip_removed",
    "holm",
    "mcnemar_exact",
    "mcnemar_exact_many",
    "percentile_interval",
    "wilson",
]

LEVEL: Final = 0.95
# Up to this many columns, patterns are counted with a counter per possible row (a bincount of
# 2**columns counters); above, by sorting the rows' keys.
DENSE_COLUMNS: Final = 16
# Rows a resample draws at once when it draws rows rather than pattern counts (bounded memory).
_DRAW_CHUNK: Final = 1 << 22


# ndtri(0.975), the quantile of the default level as scipy.special computes it (a test holds
# the two equal): the intervals every eval prints need no scipy (0.3 s of imports).
_Z_LEVEL: Final = 1.959963984540054


def _z(level: float) -> float:
    """The two-sided standard normal quantile of ``level`` (1.96 for 0.95)."""
    if level == LEVEL:
        return _Z_LEVEL
    # scipy.special, not scipy.stats: the same function (norm.ppf is ndtri) without the second
    # of import time scipy.stats costs.
    from scipy.special import ndtri

    return float(ndtri(0.5 + level / 2))


def wilson(correct: int, rows: int, level: float = LEVEL) -> tuple[float, float] | None:
    """Wilson's score interval of ``correct / rows`` at ``level``; None for no rows.

    Unlike the normal approximation it stays inside [0, 1] and keeps its coverage near 0 and 1
    and for small samples (Brown, Cai and DasGupta, 2001).
    """
    if rows <= 0:
        return None
    z = _z(level)
    p = correct / rows
    denom = 1 + z * z / rows
    centre = (p + z * z / (2 * rows)) / denom
    half = z * math.sqrt(p * (1 - p) / rows + z * z / (4 * rows * rows)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def percentile_interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float] | None:
    """The percentile interval of bootstrap ``samples`` (NaNs, undefined resamples, left out);
    None when no sample is defined."""
    values = np.asarray(samples, dtype=np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value for two models on the same rows, from the discordant
    counts (rows only A gets right, rows only B gets right): a binomial test of ``only_a`` in
    ``only_a + only_b`` trials at 1/2. 1.0 when no row is discordant."""
    from scipy.stats import binomtest

    trials = only_a + only_b
    if trials == 0:
        return 1.0
    return float(binomtest(only_a, trials, 0.5, alternative="two-sided").pvalue)


def mcnemar_exact_many(only_a: np.ndarray, only_b: np.ndarray) -> np.ndarray:
    """:func:`mcnemar_exact` elementwise over arrays of discordant counts, in one call: at a
    success probability of 1/2 the binomial is symmetric, so the two-sided p-value is twice the
    lower tail at the smaller count, capped at 1 (1 where the counts are equal or both zero)."""
    from scipy.special import bdtr  # the binomial CDF, without importing scipy.stats

    a = np.asarray(only_a, dtype=np.int64)
    b = np.asarray(only_b, dtype=np.int64)
    tail = bdtr(np.minimum(a, b), a + b, 0.5)
    p: np.ndarray = np.where(a == b, 1.0, np.minimum(1.0, 2.0 * tail))
    return p


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error across ``pvalues``), in the order
    given: the i-th smallest p times (m - i), made monotone, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 + how many score strictly more ("1, 2, 2, 4"); NaN scores
    rank after every defined one and get rank 0 (undefined)."""
    s = np.where(np.isnan(scores), -np.inf, scores)
    ranks = 1 + (s[..., None, :] > s[..., :, None]).sum(axis=-1)
    out: np.ndarray = np.where(np.isnan(scores), 0, ranks)
    return out


def discordant(correct: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """For patterns' 0/1 correctness of M models (P x M) and the patterns' row counts, the
    (M x M) matrix whose entry [a, b] counts rows model a gets right and model b does not."""
    # float32 products are exact while every sum stays below 2**24 rows (BLAS, not a loop).
    exact = np.dtype(np.float32 if int(counts.sum()) < (1 << 24) else np.float64)
    c: np.ndarray = correct.astype(exact)
    right: np.ndarray = c * counts.astype(exact)[:, None]
    both: np.ndarray = right.T @ (1 - c)
    counted: np.ndarray = np.rint(both).astype(np.int64)
    return counted


@dataclass(frozen=True, slots=True)
class FlipPoint:
    """Where model B overtakes model A as correctly labelled rows are removed at random.

    ``removed`` is the share of correctly labelled rows removed at the flip (in (0, 1)), and
    ``prevalence`` the share of label errors among the rows left at that point.
    """

    removed: float
    prevalence: float


def flip_removed(
    a_correct: np.ndarray, b_correct: np.ndarray, a_errors: np.ndarray, b_errors: np.ndarray
) -> np.ndarray:
    """The share of correctly labelled rows to remove for B to overtake A, elementwise over
    arrays of counts (A's and B's correct rows among the correctly labelled rows, and among the
    corrected errors): 0 where B already leads (or ties) with nothing removed, 1 where B does not
    lead even with every correctly labelled row removed, else ``1 - r*``. The clipped form is
    what a bootstrap interval of a flip point is taken over."""
    gap_c = np.asarray(a_correct, np.float64) - np.asarray(b_correct, np.float64)
    gap_e = np.asarray(a_errors, np.float64) - np.asarray(b_errors, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        kept = np.where(gap_c > 0, -gap_e / np.where(gap_c > 0, gap_c, 1.0), np.nan)
    removed = 1.0 - kept
    removed = np.where(gap_c + gap_e <= 0, 0.0, removed)  # B leads or ties already
    removed = np.where((gap_c + gap_e > 0) & (gap_e >= 0), 1.0, removed)  # B never leads
    return np.clip(np.nan_to_num(removed, nan=1.0), 0.0, 1.0)


def flip_point(
    a_correct: int, b_correct: int, a_errors: int, b_errors: int, *, rows: int, errors: int
) -> FlipPoint | None:
    """The flip point of A (who leads on all rows) and B (who leads on the corrected errors), or
    None when their orders on the two agree. ``rows`` counts the correctly labelled rows,
    ``errors`` the corrected errors."""
    gap_c, gap_e = a_correct - b_correct, a_errors - b_errors
    if gap_c + gap_e <= 0 or gap_e >= 0:
        return None
    kept = -gap_e / gap_c
    return FlipPoint(removed=1.0 - kept, prevalence=errors / (kept * rows + errors))


@dataclass(frozen=True, slots=True)
class Patterns:
    """The distinct rows of a 0/1 feature matrix and how many rows each stands for."""

    features: np.ndarray  # (P, F) uint8
    counts: np.ndarray  # (P,) int64

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

    def sums(self) -> np.ndarray:
        """Each feature's sum over all rows (F,)."""
        # float64 BLAS is exact below 2**53 rows; an int64 product is a slow loop.
        total: np.ndarray = self.counts.astype(np.float64) @ self.features.astype(np.float64)
        counted: np.ndarray = np.rint(total).astype(np.int64)
        return counted

    def resample(self, resamples: int, seed: int) -> np.ndarray:
        """Each feature's sum over ``resamples`` bootstrap resamples of the rows (rows drawn
        with replacement, as many as there are), as a (resamples, F) float64 array; the same
        ``seed`` gives the same sums."""
        features: np.ndarray | None = None
        out = np.zeros((resamples, self.features.shape[1]))
        for start, drawn in self.draws(resamples, seed):
            if features is None:
                features = self.features.astype(drawn.dtype)
            out[start : start + len(drawn)] = drawn @ features
        return out

    def draws(self, resamples: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
        """The resamples' counts of each pattern, block by block: ``(first resample, (block,
        P) counts)``, as float32 where that is exact (below 2**24 rows: the faster matrix
        product), else float64. ``resample`` is their product with the features; a caller
        whose features have structure can take a cheaper product."""
        rng = np.random.default_rng(seed)
        n, p = self.rows, len(self.counts)
        exact = np.dtype(np.float32 if n < (1 << 24) else np.float64)
        if n == 0:
            return
        if p * 4 <= n:  # few patterns: draw their counts, a multinomial over the patterns
            shares = self.counts / n
            for start in range(0, resamples, 256):
                drawn = rng.multinomial(n, shares, size=min(256, resamples - start))
                yield start, drawn.astype(exact)
            return
        # As many patterns as rows, nearly: draw rows, count them by pattern.
        owner = np.repeat(np.arange(p), self.counts)
        per = max(1, _DRAW_CHUNK // n)
        for start in range(0, resamples, per):
            block = min(per, resamples - start)
            picks = owner[rng.integers(0, n, size=(block, n))]
            picks += np.arange(block)[:, None] * p
            drawn = np.bincount(picks.ravel(), minlength=block * p).reshape(block, p)
            yield start, drawn.astype(exact)


class PatternCounter:
    """Counts the distinct rows of 0/1 feature matrices given chunk by chunk (same columns).

    A row's features are read as one key, the first column its highest bit, so keys sort as
    the rows do (as 0/1 tuples): an unsigned integer up to 64 columns, counted by a
    ``bincount`` up to ``DENSE_COLUMNS`` columns and by a sort above; wider rows are packed
    into bytes and sorted. The counter keeps only the distinct patterns seen so far,
    whatever the number of rows.
    """

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self._width = (columns + 7) // 8
        self._wide = columns > 64
        self._keys = np.empty(0, dtype=f"V{self._width}" if self._wide else np.uint64)
        self._counts = np.empty(0, dtype=np.int64)

    def add(self, features: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Count the rows of one (n, columns) 0/1 chunk; ``counts``: how many rows each of
        its rows stands for (default one)."""
        if features.ndim != 2 or features.shape[1] != self.columns:
            raise ValueError(f"expected (n, {self.columns}) features, got {features.shape}")
        if self._wide:
            packed = np.ascontiguousarray(np.packbits(features.astype(bool), axis=1))
            self._merge(packed.view(f"V{self._width}").ravel(), counts)
            return
        self._count([features[:, c] for c in range(self.columns)], len(features), counts)

    def add_columns(
        self, columns: Sequence[np.ndarray], counts: np.ndarray | None = None, *, rows: int
    ) -> None:
        """As :meth:`add`, the chunk of ``rows`` rows given as its columns (each ``rows``
        values, nonzero for 1): up to 64 columns, no (rows, columns) matrix is built."""
        if len(columns) != self.columns or any(len(c) != rows for c in columns):
            raise ValueError(f"expected {self.columns} columns of {rows} values")
        if self._wide:
            self.add(np.stack(columns, axis=1), counts)
        else:
            self._count(columns, rows, counts)

    def _count(self, columns: Sequence[np.ndarray], n: int, counts: np.ndarray | None) -> None:
        """Count ``n`` rows given as columns: each row's key, then the keys."""
        bits = next(b for b in (8, 16, 32, 64) if b >= self.columns)
        dtype: np.dtype[Any] = np.dtype(f"u{bits // 8}")
        key = np.zeros(n, dtype=dtype)
        for c, col in enumerate(columns):
            key |= (col != 0).astype(dtype) << dtype.type(self.columns - 1 - c)
        if self.columns <= DENSE_COLUMNS:
            # A counter per possible key; a key seen stays, even at a weight of 0.
            size = 1 << self.columns
            seen = np.bincount(key, minlength=size)
            present = np.flatnonzero(seen)
            weights = seen if counts is None else np.bincount(key, counts, minlength=size)
            self._merge(present.astype(np.uint64), weights[present], distinct=True)
        else:
            self._merge(key.astype(np.uint64), counts)

    def _merge(
        self, keys: np.ndarray, counts: np.ndarray | None, *, distinct: bool = False
    ) -> None:
        """Fold a chunk's keys (with their counts, default one each; ``distinct``: the keys
        are so already, with their counts) into those seen so far."""
        if counts is None:
            keys, counts = np.unique(keys, return_counts=True)
        elif not distinct:
            keys, inverse = np.unique(keys, return_inverse=True)
            counts = np.bincount(inverse.ravel(), weights=counts, minlength=len(keys))
        merged = np.concatenate([self._keys, keys])
        weights = np.concatenate([self._counts, counts])
        self._keys, inverse = np.unique(merged, return_inverse=True)
        self._counts = np.bincount(inverse.ravel(), weights=weights).astype(np.int64)

    def update(self, other: PatternCounter) -> None:
        """Add the rows another counter (of as many columns) counted."""
        if other.columns != self.columns:
            raise ValueError(f"expected a counter of {self.columns} columns")
        self._merge(other._keys, other._counts, distinct=True)

    def patterns(self) -> Patterns:
        if self._wide:
            raw = np.frombuffer(self._keys.tobytes(), dtype=np.uint8).reshape(-1, self._width)
            bits = np.unpackbits(raw, axis=1)[:, : self.columns]
        else:
            shifts = np.arange(self.columns - 1, -1, -1, dtype=np.uint64)
            bits = (self._keys[:, None] >> shifts) & np.uint64(1)
        return Patterns(features=bits.astype(np.uint8), counts=self._counts.copy())
