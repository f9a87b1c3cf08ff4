"""Uncertainty and significance of models' accuracies on several views of one set of rows.

The input is each model's top-1 correctness on each view, its rows counted as patterns
(:class:`~dsreg.report.stats.counts.Correctness`). The views share their rows (the snapshot's),
so one bootstrap resample of the rows resamples every view at once, and a figure that spans
views (a rank change, a flip point) is resampled jointly; a resample draws the patterns' counts,
which is exact and costs the number of distinct patterns, not of rows.

:func:`significance` returns, per view: each model's accuracy with its interval (Wilson's or
the bootstrap percentile interval), its rank with the bootstrap rank interval, and every pair's
discordant counts, McNemar's exact p-value, the Holm-corrected p-value across the view's pairs
and the paired bootstrap interval of the accuracy difference. Across views: the rank changes
and the pairs whose order changes, marked significant only where the pair's order is
significant in both views; the rank correlation of two views (the honeypot's given and
corrected labels); the flip points of :func:`~dsreg.report.stats.flip_point`. docs/queries.md
explains every figure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from dsreg._util.records import field_dict
from dsreg.errors import InvalidInputError
from dsreg.report.stats.core import (
    LEVEL,
    competition_ranks,
    discordant,
    flip_point,
    flip_removed,
    holm,
    mcnemar_exact_many,
    percentile_interval,
    wilson,
)
from dsreg.report.stats.counts import Correctness

__all__ = [
    "CI_METHODS",
    "Correlation",
    "FlipPointStat",
    "ModelStat",
    "OrderChange",
    "PairStat",
    "RankChange",
    "Significance",
    "StatsOptions",
    "ViewStats",
    "significance",
    "starred",
]

CI_METHODS: Final = ("wilson", "bootstrap")
Interval = tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatsOptions:
    """How :func:`significance` measures: ``ci`` is the accuracy interval (``wilson`` or
    ``bootstrap``); rank intervals, paired difference intervals and flip-point intervals are
    always bootstrap percentile intervals over ``resamples`` resamples drawn from ``seed``.
    ``alpha`` is the family-wise error rate of a view's pairs (Holm). ``changes`` names the
    (from, to) views whose rank changes are reported, ``correlate`` the two views whose
    ranks are correlated, ``flips`` the (all rows, corrected errors) views of the flip points;
    a name absent from the input is skipped."""

    ci: str = "wilson"
    resamples: int = 1000
    seed: int = 0
    level: float = LEVEL
    alpha: float = 0.05
    changes: tuple[tuple[str, str], ...] = (
        ("original", "corrected"),
        ("honeypot_given", "honeypot"),
        ("original", "multilabel"),
        ("original", "majority"),
        ("original", "decontaminated"),
    )
    correlate: tuple[str, str] = ("honeypot_given", "honeypot")
    flips: tuple[str, str] = ("corrected", "honeypot")

    def check(self) -> None:
        if self.ci not in CI_METHODS:
            raise InvalidInputError(f"--ci {self.ci!r}: choose {' or '.join(CI_METHODS)}")
        if not 1 <= self.resamples <= 1_000_000:
            raise InvalidInputError(
                f"--resamples {self.resamples}: give a number of resamples from 1 to 1000000"
            )
        if not 0 <= self.seed < 2**63:
            raise InvalidInputError(f"--seed {self.seed}: give a seed from 0 to 2**63 - 1")
        if not 0 < self.level < 1 or not 0 < self.alpha < 1:
            raise InvalidInputError("the level and alpha must be between 0 and 1")


# -- results --------------------------------------------------------------------------------------


def _interval(x: Interval | None) -> list[float] | None:
    return None if x is None else [x[0], x[1]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelStat:
    """One model on one view: correct rows, accuracy with its interval, rank (competition
    ranking by correct rows, 1 best) with its bootstrap interval."""

    correct: int
    accuracy: float | None
    interval: Interval | None
    rank: int | None
    rank_interval: Interval | None

    def to_dict(self) -> dict[str, Any]:
        return field_dict(
            self, interval=_interval(self.interval), rank_interval=_interval(self.rank_interval)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PairStat:
    """Two models on one view's rows: rows only ``a`` gets right and only ``b`` does, McNemar's
    exact p-value, Holm's adjusted p-value across the view's pairs, ``significant`` when that
    is below alpha, and the accuracy difference (a - b) with its paired bootstrap interval."""

    a: str
    b: str
    only_a: int
    only_b: int
    p: float
    p_holm: float
    significant: bool
    difference: float | None
    difference_interval: Interval | None

    def to_dict(self) -> dict[str, Any]:
        return field_dict(self, difference_interval=_interval(self.difference_interval))


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewStats:
    view: str
    rows: int
    models: dict[str, ModelStat]
    pairs: tuple[PairStat, ...]

    def pair(self, a: str, b: str) -> PairStat | None:
        for p in self.pairs:
            if (p.a, p.b) in ((a, b), (b, a)):
                return p
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "models": {m: s.to_dict() for m, s in self.models.items()},
            "pairs": [p.to_dict() for p in self.pairs],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderChange:
    """A pair whose order differs between two views (``a`` leads on ``source``), significant
    when the pair's order is significant in both views."""

    source: str
    target: str
    a: str
    b: str
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "a": self.a, "b": self.b,
                "significant": self.significant}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class RankChange:
    """A model's rank from one view to another (``change`` positive: it climbs); significant
    when some pair it changes order with is significant in both views (``against``)."""

    source: str
    target: str
    model: str
    before: int | None
    after: int | None
    significant: bool
    against: tuple[str, ...]

    @property
    def change(self) -> int | None:
        return None if self.before is None or self.after is None else self.before - self.after

    @property
    def starred(self) -> bool:
        """Whether the change is marked significant where it is printed (``starred``)."""
        return starred(self.before, self.after, significant=self.significant)

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "model": self.model,
                "before": self.before, "after": self.after, "change": self.change,
                "significant": self.significant, "against": list(self.against)}  # fmt: skip


def starred(before: int | None, after: int | None, *, significant: bool) -> bool:
    """Whether a model's move from rank ``before`` to ``after`` gets the significance star:
    only where the rank moves. A model may change order with one model and back with another
    and keep its rank: a pair's significance then says nothing of a move it did not make. The
    one rule for every place that prints the star (``eval``'s rank changes, the published
    leaderboard); the footnote that explains it is printed only where a star is."""
    return significant and before is not None and after is not None and before != after


@dataclass(frozen=True, slots=True, kw_only=True)
class Correlation:
    """Spearman's and Kendall's correlation of the models' accuracies on two views (their
    ranks), with p-values; ``warning`` when both are negative and significant at alpha."""

    source: str
    target: str
    models: int
    spearman: float
    spearman_p: float
    kendall: float
    kendall_p: float
    warning: bool

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "models": self.models,
                "spearman": self.spearman, "spearman_p": self.spearman_p,
                "kendall": self.kendall, "kendall_p": self.kendall_p,
                "warning": self.warning}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class FlipPointStat:
    """``a`` leads on all rows of a view, ``b`` on its corrected errors: removing a share
    ``removed`` of the correctly labelled rows at random flips them in expectation, at a
    noise prevalence ``prevalence``; with bootstrap intervals. ``rows`` counts the correctly
    labelled rows, ``errors`` the corrected errors."""

    a: str
    b: str
    rows: int
    errors: int
    removed: float
    removed_interval: Interval | None
    prevalence: float
    prevalence_interval: Interval | None

    def to_dict(self) -> dict[str, Any]:
        return field_dict(
            self,
            removed_interval=_interval(self.removed_interval),
            prevalence_interval=_interval(self.prevalence_interval),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Significance:
    """Everything :func:`significance` measures, with the options it measured with."""

    options: StatsOptions
    views: dict[str, ViewStats]
    rank_changes: tuple[RankChange, ...] = ()
    order_changes: tuple[OrderChange, ...] = ()
    correlation: Correlation | None = None
    flip_points: tuple[FlipPointStat, ...] = ()
    flip_views: tuple[str, str] | None = field(default=None)

    def rank_change(self, source: str, target: str, model: str) -> RankChange | None:
        for c in self.rank_changes:
            if (c.source, c.target, c.model) == (source, target, model):
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "ci": o.ci,
            "level": o.level,
            "alpha": o.alpha,
            "resamples": o.resamples,
            "seed": o.seed,
            "views": {v: s.to_dict() for v, s in self.views.items()},
            "rank_changes": [c.to_dict() for c in self.rank_changes],
            "order_changes": [c.to_dict() for c in self.order_changes],
            "correlation": None if self.correlation is None else self.correlation.to_dict(),
            "flip_points": [f.to_dict() for f in self.flip_points],
            "flip_views": None if self.flip_views is None else list(self.flip_views),
        }


# -- computation ----------------------------------------------------------------------------------


def significance(data: Correctness, options: StatsOptions | None = None) -> Significance:
    """Intervals, ranks, pairs, rank changes, correlation and flip points of ``data``."""
    o = options or StatsOptions()
    o.check()
    sums = data.patterns.sums().astype(np.int64)
    # A lone model ranks first in every resample: with Wilson's intervals nothing of it is
    # resampled (its rank interval is [1, 1]), and no generator or percentile is set up.
    lone = len(data.models) < 2 and o.ci == "wilson"
    drawn = None if lone else data.patterns.resample(o.resamples, o.seed)
    views = {v: _view(data, i, sums, drawn, o) for i, v in enumerate(data.views)}
    changes = [c for c in o.changes if c[0] in views and c[1] in views]
    orders = tuple(x for s, t in changes for x in _order_changes(views[s], views[t]))
    ranks = tuple(x for s, t in changes for x in _rank_changes(views[s], views[t], orders))
    s, t = o.correlate
    corr = _correlation(views[s], views[t], o.alpha) if s in views and t in views else None
    flips: tuple[FlipPointStat, ...] = ()
    fv = o.flips if o.flips[0] in views and o.flips[1] in views else None
    if fv is not None and drawn is not None:
        flips = _flip_points(data, sums, drawn, fv, o.level)
    return Significance(
        options=o,
        views=views,
        rank_changes=ranks,
        order_changes=orders,
        correlation=corr,
        flip_points=flips,
        flip_views=fv,
    )


def _intervals(samples: np.ndarray, level: float) -> list[Interval | None]:
    """:func:`percentile_interval` of each column of ``samples`` (resamples x figures): one
    vectorised percentile when no resample is undefined, else column by column."""
    if samples.ndim != 2 or not samples.shape[1]:
        return []
    if not np.isnan(samples).any():
        tail = (1 - level) / 2 * 100
        low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
        return [(float(x), float(y)) for x, y in zip(low, high, strict=True)]
    return [percentile_interval(samples[:, j], level) for j in range(samples.shape[1])]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return out


def _view(
    data: Correctness, v: int, sums: np.ndarray, drawn: np.ndarray | None, o: StatsOptions
) -> ViewStats:
    m = len(data.models)
    cols = [data.right(v, j) for j in range(m)]
    rows = int(sums[data.served(v)])
    correct = sums[cols]
    ranks = competition_ranks(correct.astype(np.float64)) if rows else np.zeros(m, np.int64)
    rank_ci: list[Interval | None] = [(1.0, 1.0)] * m  # a lone model's, in every resample
    acc_ci: list[Interval | None] = []
    pairs: tuple[PairStat, ...] = ()
    if drawn is not None:
        boot = drawn[:, cols]
        boot_rows = drawn[:, data.served(v)]
        rank_ci = _intervals(competition_ranks(boot).astype(np.float64), o.level)
        if o.ci != "wilson":
            acc_ci = _intervals(_ratio(boot, boot_rows[:, None]), o.level)
        if rows:
            pairs = _pairs(data, v, rows, boot, boot_rows, o)
    stats = {}
    for j, name in enumerate(data.models):
        k = int(correct[j])
        ci = wilson(k, rows, o.level) if o.ci == "wilson" else acc_ci[j] if rows else None
        stats[name] = ModelStat(
            correct=k,
            accuracy=k / rows if rows else None,
            interval=ci,
            rank=int(ranks[j]) if rows else None,
            rank_interval=rank_ci[j] if rows else None,
        )
    return ViewStats(view=data.views[v], rows=rows, models=stats, pairs=pairs)


def _pairs(
    data: Correctness,
    v: int,
    rows: int,
    boot: np.ndarray,
    boot_rows: np.ndarray,
    o: StatsOptions,
) -> tuple[PairStat, ...]:
    m = len(data.models)
    if m < 2:
        return ()
    pat = data.patterns
    cols = [data.right(v, j) for j in range(m)]
    disc = discordant(pat.features[:, cols], pat.counts)
    ia, ib = np.triu_indices(m, k=1)
    only_a, only_b = disc[ia, ib], disc[ib, ia]
    p = mcnemar_exact_many(only_a, only_b)
    adjusted = holm(p.tolist())
    diffs = _intervals(_ratio(boot[:, ia] - boot[:, ib], boot_rows[:, None]), o.level)
    out = []
    for n, (a, b) in enumerate(zip(ia.tolist(), ib.tolist(), strict=True)):
        out.append(
            PairStat(
                a=data.models[a],
                b=data.models[b],
                only_a=int(only_a[n]),
                only_b=int(only_b[n]),
                p=float(p[n]),
                p_holm=adjusted[n],
                significant=adjusted[n] < o.alpha,
                difference=(int(only_a[n]) - int(only_b[n])) / rows,
                difference_interval=diffs[n],
            )
        )
    return tuple(out)


def _lead(view: ViewStats, a: str, b: str) -> int:
    """1 if ``a`` has more correct rows on ``view``, -1 if ``b`` has, 0 on a tie."""
    x, y = view.models[a].correct, view.models[b].correct
    return (x > y) - (x < y)


def _order_changes(src: ViewStats, dst: ViewStats) -> Iterable[OrderChange]:
    if not src.rows or not dst.rows:
        return
    for a, b in itertools.combinations(list(src.models), 2):
        before, after = _lead(src, a, b), _lead(dst, a, b)
        if before == after:
            continue
        if before < 0 or (before == 0 and after > 0):
            a, b = b, a  # name first the model that leads (or ties) on the source view
        p, q = src.pair(a, b), dst.pair(a, b)
        sig = p is not None and q is not None and p.significant and q.significant
        yield OrderChange(source=src.view, target=dst.view, a=a, b=b, significant=sig)


def _rank_changes(
    src: ViewStats, dst: ViewStats, orders: Sequence[OrderChange]
) -> Iterable[RankChange]:
    for name in src.models:
        against = tuple(
            c.b if c.a == name else c.a
            for c in orders
            if (c.source, c.target) == (src.view, dst.view) and c.significant
            and name in (c.a, c.b)
        )  # fmt: skip
        yield RankChange(
            source=src.view,
            target=dst.view,
            model=name,
            before=src.models[name].rank,
            after=dst.models[name].rank,
            significant=bool(against),
            against=against,
        )


def _correlation(src: ViewStats, dst: ViewStats, alpha: float) -> Correlation | None:
    """Rank correlation of the models' accuracies on two views; None below three models or
    when a view gives every model the same accuracy (no ranking to correlate)."""
    if not src.rows or not dst.rows or len(src.models) < 3:
        return None
    x = np.array([s.correct for s in src.models.values()], dtype=np.float64)
    y = np.array([dst.models[m].correct for m in src.models], dtype=np.float64)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    from scipy.stats import kendalltau, spearmanr

    rho, rho_p = spearmanr(x, y)
    tau, tau_p = kendalltau(x, y)
    # Both must agree: Spearman's p-value (a t approximation) is 0 for any perfect reversal,
    # even of three models; Kendall's is exact for few models without ties.
    warn = bool(rho < 0 and rho_p < alpha and tau < 0 and tau_p < alpha)
    return Correlation(
        source=src.view,
        target=dst.view,
        models=len(x),
        spearman=float(rho),
        spearman_p=float(rho_p),
        kendall=float(tau),
        kendall_p=float(tau_p),
        warning=warn,
    )


def _flip_points(
    data: Correctness,
    sums: np.ndarray,
    drawn: np.ndarray,
    views: tuple[str, str],
    level: float,
) -> tuple[FlipPointStat, ...]:
    """Flip points of every pair whose order on the ``views[0]`` rows differs from its order
    on the ``views[1]`` rows (the corrected errors, a subset of them): the correctly labelled
    rows are the first view's rows outside the second."""
    whole, errs = data.views.index(views[0]), data.views.index(views[1])
    m = len(data.models)
    n_e = sums[data.served(errs)]
    n_c = sums[data.served(whole)] - n_e
    bn_e = drawn[:, data.served(errs)]
    bn_c = drawn[:, data.served(whole)] - bn_e
    out = []
    for a, b in itertools.permutations(range(m), 2):
        k_e = [sums[data.right(errs, j)] for j in (a, b)]
        k_c = [sums[data.right(whole, j)] - k for j, k in zip((a, b), k_e, strict=True)]
        point = flip_point(
            int(k_c[0]), int(k_c[1]), int(k_e[0]), int(k_e[1]), rows=int(n_c), errors=int(n_e)
        )
        if point is None:
            continue
        be = [drawn[:, data.right(errs, j)] for j in (a, b)]
        bc = [drawn[:, data.right(whole, j)] - x for j, x in zip((a, b), be, strict=True)]
        removed = flip_removed(bc[0], bc[1], be[0], be[1])
        prevalence = _ratio(bn_e, (1.0 - removed) * bn_c + bn_e)
        out.append(
            FlipPointStat(
                a=data.models[a],
                b=data.models[b],
                rows=int(n_c),
                errors=int(n_e),
                removed=point.removed,
                removed_interval=percentile_interval(removed, level),
                prevalence=point.prevalence,
                prevalence_interval=percentile_interval(prevalence, level),
            )
        )
    return tuple(out)
