"""``dsreg leaderboard --tasks``: recorded models aggregated over several datasets (docs/llm.md,
"A multitask leaderboard").

Each task is one dataset at one revision: its latest tag by default, or the one ``--revisions``
names. A model counts on a task where it is recorded on that revision's snapshot; every model
recorded on a task is scored there on the same rows (a view of the revision), so the task's
figures are correct counts over common rows. The views scored are ``original`` (each task's
labels as published) and ``corrected`` (its re-annotated labels: the revision's overlays
applied) by default.

On each view the board gives each model's three aggregates (``aggregate.py``: mean score, mean
win rate, Borda count), each with a bootstrap interval over items: every task's rows are
resampled (``leaderboard.RevisionPatterns.resample``, the same draw a one-dataset leaderboard
makes), the per-task counts recomputed, and the aggregates taken again, a thousand resamples
in one vectorised pass per block. Each task draws from its own seed (the board's ``seed`` and
the task's name), so adding a task leaves the others' draws as they were. The stability report
(``stability.py``) follows the top ``k`` models by the ``rank_by`` aggregate.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import numpy as np

from dsreg._util.records import field_dict
from dsreg.errors import InvalidInputError, NotFoundError
from dsreg.formats.manifests import View
from dsreg.objects.digest import short
from dsreg.registry.reader import Reader, Resolved
from dsreg.report._json import stable_json
from dsreg.report.board.aggregate import (
    Aggregate,
    Aggregates,
    ViewCounts,
    check_aggregate,
    intervals,
    over_tasks,
    per_task,
)
from dsreg.report.board.figures import feature_index
from dsreg.report.board.leaderboard import check_views, revision_patterns
from dsreg.report.board.stability import Stability, order, stability
from dsreg.report.predictions import recorded_predictions
from dsreg.report.stats.core import LEVEL, competition_ranks

__all__ = [
    "MULTITASK_VIEWS",
    "ModelAggregate",
    "MultitaskBoard",
    "MultitaskOptions",
    "TaskEntry",
    "ViewBoard",
    "multitask_leaderboard",
]

SCHEMA = "dsreg/leaderboard-tasks/1"
#: The views a multitask board scores by default: the labels as published, and re-annotated.
MULTITASK_VIEWS: Final[tuple[View, ...]] = ("original", "corrected")
# Resamples aggregated at a time (bounds the memory of the per-task figures).
_BLOCK: Final = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEntry:
    """One task: the revision scored, the models recorded on its snapshot, its rows per view."""

    task: str
    tag: str | None
    revision: str
    snapshot: str
    models: tuple[str, ...]
    rows: dict[str, int]

    @property
    def name(self) -> str:
        return f"{self.task}@{self.tag or short(self.revision)}"

    def to_dict(self) -> dict[str, Any]:
        return field_dict(self, models=list(self.models))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelAggregate:
    """One model's aggregates on one view: the tasks it is scored on, its mean score, mean win
    rate and Borda count, each with its bootstrap interval (None without resamples), and its
    rank by the board's ``rank_by`` aggregate (competition ranking, 1 the best)."""

    model: str
    tasks: int
    score: float | None
    score_interval: tuple[float, float] | None
    win_rate: float | None
    win_rate_interval: tuple[float, float] | None
    borda: float
    borda_interval: tuple[float, float] | None
    rank: int

    def to_dict(self) -> dict[str, Any]:
        def iv(x: tuple[float, float] | None) -> list[float] | None:
            return None if x is None else list(x)

        return field_dict(
            self,
            score_interval=iv(self.score_interval),
            win_rate_interval=iv(self.win_rate_interval),
            borda_interval=iv(self.borda_interval),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewBoard:
    """The models on one view, best first by ``rank_by``, and the view's stability report."""

    view: View
    models: tuple[ModelAggregate, ...]
    stability: Stability

    def to_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "models": [m.to_dict() for m in self.models],
            "stability": self.stability.to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MultitaskBoard:
    """Recorded models aggregated over ``tasks``, one ``ViewBoard`` per view."""

    tasks: tuple[TaskEntry, ...]
    views: tuple[View, ...]
    rank_by: Aggregate
    top: int
    resamples: int
    seed: int
    boards: tuple[ViewBoard, ...]

    def board(self, view: View) -> ViewBoard:
        return self.boards[self.views.index(view)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "level": LEVEL,
            "tasks": [t.to_dict() for t in self.tasks],
            "views": list(self.views),
            "rank_by": self.rank_by,
            "top": self.top,
            "resamples": self.resamples,
            "seed": self.seed,
            "boards": [b.to_dict() for b in self.boards],
        }

    def to_json(self) -> str:
        return stable_json(self.to_dict())


@dataclass(frozen=True, slots=True, kw_only=True)
class MultitaskOptions:
    """How a multitask board aggregates: its ``views`` (None: ``MULTITASK_VIEWS``), the
    aggregate that orders models (``rank_by``, one of ``aggregate.AGGREGATES``), the ``top``
    models the stability report follows, and the bootstrap's ``resamples`` and ``seed``."""

    views: Sequence[str] | None = None
    rank_by: str = "win-rate"
    top: int = 5
    resamples: int = 1000
    seed: int = 0


# -- the tasks' counts ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TaskCounts:
    """One task's counts: per view its rows and each model's correct rows, and the same over
    each resample (``(resamples, views)`` and ``(resamples, views, models)``, or None)."""

    entry: TaskEntry
    rows: np.ndarray
    correct: np.ndarray
    boot_rows: np.ndarray | None
    boot_correct: np.ndarray | None


def task_seed(seed: int, task: str) -> int:
    """The seed of ``task``'s resamples: the board's ``seed`` and the task's name."""
    state = np.random.SeedSequence([seed, zlib.crc32(task.encode("utf-8"))]).generate_state(1)
    return int(state[0])


def _task_counts(
    reader: Reader, res: Resolved, views: Sequence[View], resamples: int, seed: int
) -> _TaskCounts:
    results = reader.results(res.dataset)
    here = [m for m, r in results.items() if r.record.snapshot == res.revision.snapshot]
    if not here:
        raise NotFoundError(
            f"no model is recorded for task {res.dataset!r} on the snapshot of {res.spec}"
            f"{reader.where}; record one with 'dsreg eval {res.spec} PREDS --record --model NAME'"
        )
    arrays = [(m, partial(recorded_predictions, res.registry, results[m].record)) for m in here]
    patterns = revision_patterns(res, arrays, views)
    v, m = len(views), len(here)
    members = [feature_index(v, m, i, None) for i in range(v)]
    cols = np.array([[c + 1 + j for j in range(m)] for c in members])
    sums = patterns.sums()
    boot = patterns.resample(resamples, task_seed(seed, res.dataset)) if resamples else None
    entry = TaskEntry(
        task=res.dataset,
        tag=res.tag,
        revision=res.digest,
        snapshot=res.revision.snapshot,
        models=tuple(here),
        rows={view: int(sums[c]) for view, c in zip(views, members, strict=True)},
    )
    return _TaskCounts(
        entry=entry,
        rows=sums[members].astype(np.int64),
        correct=sums[cols].astype(np.int64),
        boot_rows=None if boot is None else np.rint(boot[:, members]).astype(np.int32),
        boot_correct=None if boot is None else np.rint(boot[:, cols]).astype(np.int32),
    )


def _view_counts(counts: Sequence[_TaskCounts], models: Sequence[str], view: int) -> ViewCounts:
    """One view's counts over the tasks: ``(tasks, models)``, absent models counted 0."""
    at = {m: i for i, m in enumerate(models)}
    present = np.zeros((len(counts), len(models)), dtype=bool)
    correct = np.zeros((len(counts), len(models)), dtype=np.int64)
    for t, c in enumerate(counts):
        idx = [at[m] for m in c.entry.models]
        present[t, idx] = True
        correct[t, idx] = c.correct[view]
    rows = np.array([c.rows[view] for c in counts], dtype=np.int64)
    return ViewCounts(correct=correct, rows=rows, present=present)


def _resampled(
    counts: Sequence[_TaskCounts], models: Sequence[str], view: int, present: np.ndarray
) -> list[np.ndarray]:
    """Each aggregate (score, win rate, Borda) over every resample, ``(resamples, models)``:
    the per-task figures of a block of resamples at a time, vectorised over the block."""
    at = {m: i for i, m in enumerate(models)}
    resamples = len(counts[0].boot_rows) if counts[0].boot_rows is not None else 0
    out = [np.empty((resamples, len(models))) for _ in range(3)]
    for start in range(0, resamples, _BLOCK):
        stop = min(resamples, start + _BLOCK)
        correct = np.zeros((stop - start, len(counts), len(models)), dtype=np.int64)
        rows = np.zeros((stop - start, len(counts)), dtype=np.int64)
        for t, c in enumerate(counts):
            assert c.boot_rows is not None and c.boot_correct is not None
            idx = [at[m] for m in c.entry.models]
            correct[:, t, idx] = c.boot_correct[start:stop, view]
            rows[:, t] = c.boot_rows[start:stop, view]
        agg = over_tasks(per_task(correct, rows, present))
        for i, values in enumerate((agg.score, agg.win_rate, agg.borda)):
            out[i][start:stop] = values
    return out


def _view_board(
    counts: Sequence[_TaskCounts],
    models: Sequence[str],
    view: tuple[int, View],
    options: MultitaskOptions,
) -> ViewBoard:
    i, name = view
    vc = _view_counts(counts, models, i)
    point: Aggregates = over_tasks(vc.per_task())
    boot = _resampled(counts, models, i, vc.present) if options.resamples else None
    ivs = [intervals(b, LEVEL) for b in boot] if boot else [[None] * len(models)] * 3
    by = check_aggregate(options.rank_by)
    ranked = point.of(by)
    ranks = competition_ranks(np.where(np.isnan(ranked), -np.inf, ranked))
    tasks = vc.present.sum(axis=0)
    rows = []
    for m in order(ranked, models):
        score, rate = float(point.score[m]), float(point.win_rate[m])
        rows.append(
            ModelAggregate(
                model=models[m],
                tasks=int(tasks[m]),
                score=None if np.isnan(score) else score,
                score_interval=ivs[0][m],
                win_rate=None if np.isnan(rate) else rate,
                win_rate_interval=ivs[1][m],
                borda=float(point.borda[m]),
                borda_interval=ivs[2][m],
                rank=int(ranks[m]),
            )
        )
    report = stability(
        models,
        vc,
        by=by,
        top=options.top,
        resamples=options.resamples,
        seed=options.seed,
    )
    return ViewBoard(view=name, models=tuple(rows), stability=report)


def _check_tasks(revisions: Sequence[Resolved]) -> None:
    if not revisions:
        raise InvalidInputError("--tasks is empty: name the datasets to aggregate over")
    seen: dict[str, str] = {}
    for res in revisions:
        if res.dataset in seen:
            raise InvalidInputError(
                f"task {res.dataset!r} is given twice ({seen[res.dataset]} and {res.spec}); "
                "give each dataset once, at one revision"
            )
        seen[res.dataset] = res.spec


def multitask_leaderboard(
    reader: Reader, revisions: Sequence[Resolved], options: MultitaskOptions
) -> MultitaskBoard:
    """Aggregate the models ``reader`` records on each task's revision (one ``revisions``
    entry per task, in the order given) on each of the ``options``' views (default original
    and corrected): mean score, mean win rate and Borda count with bootstrap intervals over
    items, and the stability of the top models (``MultitaskOptions``)."""
    _check_tasks(revisions)
    names = MULTITASK_VIEWS if options.views is None else check_views(options.views)
    by = check_aggregate(options.rank_by)
    if options.resamples < 0:
        raise InvalidInputError(f"--resamples {options.resamples}: give 0 or more")
    if options.top < 2:
        raise InvalidInputError(f"--top {options.top}: the stability report follows 2 or more")
    counts = [
        _task_counts(reader, res, names, options.resamples, options.seed) for res in revisions
    ]
    models = sorted({m for c in counts for m in c.entry.models})
    return MultitaskBoard(
        tasks=tuple(c.entry for c in counts),
        views=names,
        rank_by=by,
        top=options.top,
        resamples=options.resamples,
        seed=options.seed,
        boards=tuple(_view_board(counts, models, v, options) for v in enumerate(names)),
    )
