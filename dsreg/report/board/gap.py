"""``dsreg gap``: several test sets of one task (Recht et al., "Do ImageNet classifiers
generalize to ImageNet?", 2019).

For the models recorded on two revisions of datasets that share their classes (an original test
set and a new one collected the same way), each model's accuracy on each with its Wilson
interval, the gap between them, and the least-squares line of new against old accuracy (slope,
intercept, R²): the paper's Figure 1, where models fall on a line below ``y = x`` whose slope
says whether a point of accuracy on the old set buys more or less than a point on the new.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from dsreg.errors import InvalidInputError, NotFoundError
from dsreg.registry.reader import Resolved
from dsreg.registry.results import load_predictions
from dsreg.report._json import stable_json
from dsreg.report.board.leaderboard import check_views, score_revision

__all__ = ["Gap", "GapModel", "gap"]

SCHEMA = "dsreg/gap/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class GapModel:
    """One model on both sets: rows, correct rows, accuracy and interval on each; ``gap`` is
    old accuracy minus new."""

    model: str
    old: dict[str, Any]
    new: dict[str, Any]

    @property
    def gap(self) -> float | None:
        a, b = self.old["accuracy"], self.new["accuracy"]
        return None if a is None or b is None else a - b

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "old": self.old, "new": self.new, "gap": self.gap}


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """The models of two test sets and the linear fit of new against old accuracy (``None``
    fields with fewer than two models or no spread in old accuracy)."""

    old: str
    new: str
    old_revision: str
    new_revision: str
    view: str
    models: tuple[GapModel, ...]
    slope: float | None
    intercept: float | None
    r2: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "old": {"spec": self.old, "revision": self.old_revision},
            "new": {"spec": self.new, "revision": self.new_revision},
            "view": self.view,
            "models": [m.to_dict() for m in self.models],
            "fit": {"slope": self.slope, "intercept": self.intercept, "r2": self.r2},
        }

    def to_json(self) -> str:
        return stable_json(self.to_dict())


def _scores(res: Resolved, models: list[str], view: str) -> list[dict[str, Any]]:
    arrays = []
    for m in models:
        rec = res.reader.result(res.dataset, m).record
        arrays.append((m, np.asarray(load_predictions(res.registry, rec))))
    board = score_revision(res, arrays, views=(view,), resamples=0, seed=0)  # type: ignore[arg-type]
    fig = board.figures[0]
    return [fig.model_dict(i) for i in range(len(models))]


def _recorded_on(res: Resolved) -> set[str]:
    held = res.reader.results(res.dataset)
    return {m for m, r in held.items() if r.record.snapshot == res.revision.snapshot}


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None, float | None]:
    if len(x) < 2 or float(np.ptp(x)) == 0.0:
        return None, None, None
    from scipy.stats import linregress

    fit = linregress(x, y)
    return float(fit.slope), float(fit.intercept), float(fit.rvalue**2)


class _Scored(TypedDict):
    """What scoring the models on both sets finds: the fields of a ``Gap`` past its names."""

    models: tuple[GapModel, ...]
    slope: float | None
    intercept: float | None
    r2: float | None


def _scored(ro: Resolved, rn: Resolved, models: list[str], view: str) -> _Scored:
    """``models`` scored on ``view`` of the old set ``ro`` and the new ``rn``, and the line of
    new against old accuracy through those with an accuracy on both."""
    so, sn = _scores(ro, models, view), _scores(rn, models, view)
    scored = tuple(GapModel(model=m, old=a, new=b) for m, a, b in zip(models, so, sn, strict=True))
    both = [m for m in scored if m.gap is not None]
    x = np.array([m.old["accuracy"] for m in both], dtype=np.float64)
    y = np.array([m.new["accuracy"] for m in both], dtype=np.float64)
    slope, intercept, r2 = _fit(x, y)
    return _Scored(models=scored, slope=slope, intercept=intercept, r2=r2)


def gap(ro: Resolved, rn: Resolved, *, view: str = "original") -> Gap:
    """The models recorded on both the old set ``ro`` and the new ``rn`` scored on ``view``
    of each."""
    (name,) = check_views([view])
    old, new = ro.spec, rn.spec
    c_old = ro.registry.snapshot(ro.revision.snapshot).classes
    c_new = rn.registry.snapshot(rn.revision.snapshot).classes
    if c_old != c_new:
        raise InvalidInputError(
            f"{old} and {new} do not share their classes ({len(c_old)} and {len(c_new)} "
            "classes, or another order): a gap compares test sets of one task"
        )
    common = sorted(_recorded_on(ro) & _recorded_on(rn))
    if not common:
        raise NotFoundError(
            f"no model is recorded on both {old} and {new}; record each model on both with "
            "'dsreg eval SPEC PREDS --record --model NAME' (the same NAME)"
        )
    return Gap(
        old=ro.spec,
        new=rn.spec,
        old_revision=ro.digest,
        new_revision=rn.digest,
        view=name,
        **_scored(ro, rn, common, name),
    )
