"""Uncertainty and significance of accuracies: the closed forms and the pattern bootstrap
(``core``), the figures of a set of models on several views (``significance``), and the rows of
``dsreg eval`` counted for them (``rowscores``).

``significance`` is the entry point for a caller with per-view correctness of its models:
feed a :class:`CorrectnessCounter` chunks of rows, then call :func:`significance` on its
:meth:`~CorrectnessCounter.correctness` with :class:`StatsOptions`.
"""

from dsreg.report.stats.core import (
    LEVEL,
    FlipPoint,
    PatternCounter,
    Patterns,
    competition_ranks,
    discordant,
    flip_point,
    flip_removed,
    holm,
    mcnemar_exact,
    mcnemar_exact_many,
    percentile_interval,
    wilson,
)
from dsreg.report.stats.significance import (
    CI_METHODS,
    Correctness,
    CorrectnessCounter,
    Correlation,
    FlipPointStat,
    ModelStat,
    OrderChange,
    PairStat,
    RankChange,
    Significance,
    StatsOptions,
    ViewStats,
    significance,
)

__all__ = [
    "CI_METHODS",
    "LEVEL",
    "Correctness",
    "CorrectnessCounter",
    "Correlation",
    "FlipPoint",
    "FlipPointStat",
    "ModelStat",
    "OrderChange",
    "PairStat",
    "PatternCounter",
    "Patterns",
    "RankChange",
    "Significance",
    "StatsOptions",
    "ViewStats",
    "competition_ranks",
    "discordant",
    "flip_point",
    "flip_removed",
    "holm",
    "mcnemar_exact",
    "mcnemar_exact_many",
    "percentile_interval",
    "significance",
    "wilson",
]
