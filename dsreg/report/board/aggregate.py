"""How a multitask leaderboard aggregates models over tasks (docs/llm.md, "A multitask
leaderboard"): three aggregates of per-task correct counts, each computed here and nowhere else.

On one task every model recorded there is scored on the same rows (the task's revision, one
view), so on that task the order of two models is the order of their correct counts, compared
exactly as integers. From the counts of every task:

- **mean score**: each model's accuracy averaged over the tasks it has (every task weighs the
  same, as HELM averages its scenarios);
- **mean win rate** (HELM's): on each task, the share of the other models there that the model
  beats, a tie counting half; averaged over the tasks it has (a task with fewer than two models
  ranks no one and is left out);
- **Borda count**: on each task, the number of models there the model beats (a tie half a
  point), summed over the tasks. A task a model lacks gives it nothing.

With every model on every task the Borda count is ``(models - 1) * tasks`` times the mean win
rate, so the two order models alike; they part where models miss tasks. The mean score of a
model depends on its own counts alone, so adding or removing another model never changes the
order by mean score; the two others depend on the field.

Everything takes arrays with leading batch dimensions (bootstrap resamples, models left out),
so a thousand resamples are one vectorised call, not a loop: ``per_task`` ranks each task's
models with one sort, ``over_tasks`` averages or sums over tasks with optional task weights
(the bootstrap over tasks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from dsreg.errors import InvalidInputError

__all__ = [
    "AGGREGATES",
    "Aggregate",
    "Aggregates",
    "PerTask",
    "ViewCounts",
    "check_aggregate",
    "intervals",
    "over_tasks",
    "per_task",
]

Aggregate = Literal["score", "win-rate", "borda"]
#: The aggregates a multitask board orders models by (``--rank-by``).
AGGREGATES: Final[tuple[Aggregate, ...]] = ("win-rate", "borda", "score")


def check_aggregate(name: str) -> Aggregate:
    """``name`` as an aggregate; ``InvalidInputError`` naming the choices otherwise."""
    if name not in AGGREGATES:
        raise InvalidInputError(f"--rank-by {name!r}: choose from {', '.join(AGGREGATES)}")
    return name


@dataclass(frozen=True, slots=True)
class ViewCounts:
    """One view's counts over the tasks: each model's correct rows ``(..., tasks, models)``
    (leading axes: bootstrap resamples), each task's rows in the view ``(..., tasks)``, and
    which models each task scores ``(tasks, models)``."""

    correct: np.ndarray
    rows: np.ndarray
    present: np.ndarray

    def per_task(self) -> PerTask:
        return per_task(self.correct, self.rows, self.present)


@dataclass(frozen=True, slots=True)
class PerTask:
    """Each model's figures on each task (``(..., tasks, models)``, NaN where the model is not
    scored on the task): accuracy, win rate, and Borda points (models beaten, ties half)."""

    score: np.ndarray
    win_rate: np.ndarray
    points: np.ndarray


@dataclass(frozen=True, slots=True)
class Aggregates:
    """Each model's aggregates over tasks (``(..., models)``): mean score and mean win rate
    (NaN for a model on no task that counts), Borda count."""

    score: np.ndarray
    win_rate: np.ndarray
    borda: np.ndarray

    def of(self, name: Aggregate) -> np.ndarray:
        """The aggregate named ``name`` (``AGGREGATES``)."""
        return {"score": self.score, "win-rate": self.win_rate, "borda": self.borda}[name]


def win_points(correct: np.ndarray, present: np.ndarray) -> np.ndarray:
    """On each task (the last axis holds the models), how many of the other models present
    each present model beats, a tie counting half; NaN where absent. ``correct`` holds whole
    numbers (counts, possibly as floats from a resample's sums).

    One stable sort of each task's counts: a model beats the models before the first of its
    equals and ties with the rest of its run; small counts sort as 16-bit keys (a radix
    sort)."""
    m = correct.shape[-1]
    keys = np.where(present, np.rint(correct), -1).reshape(-1, m)
    keys = keys.astype(np.int16 if keys.max(initial=0) < np.iinfo(np.int16).max else np.int64)
    order = np.argsort(keys, axis=1, kind="stable")
    ranked = np.take_along_axis(keys, order, axis=1)
    starts = np.ones(ranked.shape, dtype=bool)
    np.not_equal(ranked[:, 1:], ranked[:, :-1], out=starts[:, 1:])
    ends = np.ones(ranked.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    place = np.arange(m)
    first = np.maximum.accumulate(np.where(starts, place, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, place, m - 1)[:, ::-1], axis=1)[:, ::-1]
    absent = (keys < 0).sum(axis=1, keepdims=True)
    points = np.empty(ranked.shape)
    np.put_along_axis(points, order, (first - absent) + (last - first) / 2, axis=1)
    out: np.ndarray = np.where(keys < 0, np.nan, points).reshape(correct.shape)
    return out


def per_task(correct: np.ndarray, rows: np.ndarray, present: np.ndarray) -> PerTask:
    """The per-task figures from correct counts ``(..., tasks, models)``, each task's rows in
    the view ``(..., tasks)`` and which models each task scores (the three broadcast
    together: a stack of fields shares one set of counts). A task with no rows (a resample
    that drew none of a small view's) scores no one."""
    shape = np.broadcast_shapes(correct.shape, np.shape(present), (*rows.shape, 1))
    correct = np.broadcast_to(correct, shape)
    rows = np.broadcast_to(rows, shape[:-1])
    here = np.broadcast_to(present, shape) & (rows > 0)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(here, correct / rows[..., None], np.nan)
    points = win_points(correct, here)
    others = here.sum(axis=-1, keepdims=True) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(here & (others > 0), points / others, np.nan)
    return PerTask(score=score, win_rate=rate, points=points)


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``values`` ``(..., tasks, models)`` averaged over tasks with ``weights`` ``(...,
    tasks)``, NaNs left out; NaN where nothing counts."""
    valid = ~np.isnan(values)
    num = np.einsum("...t,...tm->...m", weights, np.where(valid, values, 0.0))
    den = np.einsum("...t,...tm->...m", weights, valid.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(den > 0, num / den, np.nan)
    return out


def over_tasks(per: PerTask, weights: np.ndarray | None = None) -> Aggregates:
    """The aggregates of per-task figures; ``weights`` ``(..., tasks)``: how often each task
    counts (a bootstrap over tasks draws them), default once each."""
    if weights is None:
        weights = np.ones(per.score.shape[:-1])
    w = np.asarray(weights, dtype=np.float64)
    borda = np.einsum("...t,...tm->...m", w, np.nan_to_num(per.points, nan=0.0))
    return Aggregates(
        score=_weighted_mean(per.score, w),
        win_rate=_weighted_mean(per.win_rate, w),
        borda=borda,
    )


def intervals(samples: np.ndarray, level: float) -> list[tuple[float, float] | None]:
    """Per model (the last axis), the percentile interval of bootstrap ``samples`` ``(resamples,
    models)``, NaNs left out; None for a model no resample defines."""
    tail = (1 - level) / 2 * 100
    out: list[tuple[float, float] | None] = []
    for column in np.asarray(samples, dtype=np.float64).T:
        values = column[~np.isnan(column)]
        if not len(values):
            out.append(None)
            continue
        low, high = np.percentile(values, [tail, 100 - tail])
        out.append((float(low), float(high)))
    return out
