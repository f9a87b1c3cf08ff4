"""How stable a multitask ranking is (docs/llm.md, "Stability"): Zhang and Hardt (2024) show
that an aggregate of rankings across tasks can reorder its top contenders when a model is left
out or a weak one is added, and that it depends on which tasks are in the benchmark.

For the top ``k`` models of the full field (by the chosen aggregate), the report lists:

- **left out**: for each model of the field, the pairs of the other top-k models whose order
  changes when the aggregate is computed without it;
- **added**: the top-k models aggregated among themselves, then with each model outside the top
  k added alone: the pairs whose order the added model changes;
- **holds**: for each pair of the top k, the share of bootstrap resamples of the tasks (tasks
  drawn with replacement, as many as there are) in which the pair keeps its order.

Every perturbation is one batch of the same vectorised aggregate (``aggregate.per_task`` over
a stack of fields), not a loop over models.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from dsreg._util.records import FieldDict, field_dict
from dsreg.report.board.aggregate import Aggregate, ViewCounts, over_tasks, per_task

__all__ = ["PairChange", "PairHold", "Perturbation", "Stability", "order", "stability"]

Relation = Literal["ahead", "tied", "behind"]
# Aggregates closer than this are tied (a mean of fractions carries rounding).
_TIE: Final = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class PairChange(FieldDict):
    """Two top-k models whose order changes: ``a`` was ``was`` ``b`` and is ``now``."""

    a: str
    b: str
    was: Relation
    now: Relation


@dataclass(frozen=True, slots=True, kw_only=True)
class Perturbation:
    """The field changed by one model (``left out`` or ``added``) and the pairs it reorders."""

    change: Literal["left out", "added"]
    model: str
    changed: tuple[PairChange, ...]

    def to_dict(self) -> dict[str, Any]:
        return field_dict(self, changed=[c.to_dict() for c in self.changed])


@dataclass(frozen=True, slots=True, kw_only=True)
class PairHold(FieldDict):
    """A pair of the top k (``a`` ranked first) and the share of task resamples in which their
    relation (``relation``: a ahead of, tied with or behind b) holds."""

    a: str
    b: str
    relation: Relation
    holds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Stability:
    """The stability report of one view (module docstring). ``alone``: the top k ordered
    among themselves, the baseline of ``added``; ``holds`` is empty without resamples."""

    rank_by: Aggregate
    top: tuple[str, ...]
    alone: tuple[str, ...]
    left_out: tuple[Perturbation, ...]
    added: tuple[Perturbation, ...]
    holds: tuple[PairHold, ...]
    resamples: int

    def to_dict(self) -> dict[str, Any]:
        return field_dict(
            self,
            top=list(self.top),
            alone=list(self.alone),
            left_out=[p.to_dict() for p in self.left_out],
            added=[p.to_dict() for p in self.added],
            holds=[h.to_dict() for h in self.holds],
        )


def order(values: np.ndarray, names: Sequence[str]) -> list[int]:
    """Indices of ``values`` best first (NaN last), ties by name: the order a board lists."""
    v = np.where(np.isnan(values), -np.inf, values)
    return sorted(range(len(names)), key=lambda i: (-v[i], names[i]))


def _relation(diff: np.ndarray) -> np.ndarray:
    """+1 where a is ahead, 0 tied, -1 behind (NaN: neither is scored, taken as tied)."""
    d = np.nan_to_num(diff, nan=0.0)
    out: np.ndarray = np.where(np.abs(d) <= _TIE, 0, np.sign(d)).astype(np.int8)
    return out


_WORDS: Final[dict[int, Relation]] = {1: "ahead", 0: "tied", -1: "behind"}


def _fields(counts: ViewCounts, keep: np.ndarray, by: Aggregate) -> np.ndarray:
    """The aggregate ``by`` of each stacked field: ``keep`` ``(fields, models)`` says which
    models each field holds; ``(fields, models)`` out (NaN for a model not in the field)."""
    stacked = counts.present[None] & keep[:, None, :]
    values = over_tasks(per_task(counts.correct[None], counts.rows[None], stacked)).of(by)
    out: np.ndarray = np.where(keep, values, np.nan)
    return out


def _changes(
    pairs: list[tuple[int, int]], was: np.ndarray, now: np.ndarray, names: Sequence[str]
) -> tuple[PairChange, ...]:
    """The pairs whose relation differs between the aggregates ``was`` and ``now``."""
    out = []
    for a, b in pairs:
        r0, r1 = int(_relation(was[a] - was[b])), int(_relation(now[a] - now[b]))
        if r0 != r1:
            out.append(PairChange(a=names[a], b=names[b], was=_WORDS[r0], now=_WORDS[r1]))
    return tuple(out)


def _holds(
    pairs: list[tuple[int, int]],
    full: np.ndarray,
    counts: ViewCounts,
    by: Aggregate,
    draws: tuple[int, int],
    names: Sequence[str],
) -> tuple[PairHold, ...]:
    """Each pair's share of task resamples keeping its relation in ``full``; ``draws``: the
    resamples and their seed."""
    resamples, seed = draws
    if not resamples or not pairs:
        return ()
    tasks = counts.rows.shape[0]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    weights = rng.multinomial(tasks, np.full(tasks, 1 / tasks), size=resamples)
    boot = over_tasks(counts.per_task(), weights).of(by)
    out = []
    for a, b in pairs:
        rel = _relation(full[a] - full[b])
        share = float((_relation(boot[:, a] - boot[:, b]) == rel).mean())
        out.append(PairHold(a=names[a], b=names[b], relation=_WORDS[int(rel)], holds=share))
    return tuple(out)


def stability(
    names: Sequence[str],
    counts: ViewCounts,
    *,
    by: Aggregate,
    top: int,
    resamples: int,
    seed: int,
) -> Stability:
    """The stability report of models ``names`` from one view's counts (no resample axis),
    ordered by aggregate ``by``: the top ``top`` of the full field, each model left out, each
    weaker model added to the top alone, and ``resamples`` bootstrap resamples of the tasks
    from ``seed``."""
    m = len(names)
    full = over_tasks(counts.per_task()).of(by)
    ranked = order(full, names)
    k = min(top, m)
    best = ranked[:k]
    pairs = list(itertools.combinations(best, 2))
    without = ~np.eye(m, dtype=bool)
    left = _fields(counts, without, by)
    left_out = tuple(
        Perturbation(
            change="left out",
            model=names[i],
            changed=_changes([p for p in pairs if i not in p], full, left[i], names),
        )
        for i in ranked
    )
    in_top = np.zeros(m, dtype=bool)
    in_top[best] = True
    alone = _fields(counts, in_top[None], by)[0]
    weaker = ranked[k:]
    added: tuple[Perturbation, ...] = ()
    if weaker:
        keep = np.repeat(in_top[None], len(weaker), axis=0)
        keep[np.arange(len(weaker)), weaker] = True
        widened = _fields(counts, keep, by)
        added = tuple(
            Perturbation(change="added", model=names[w], changed=_changes(pairs, alone, f, names))
            for w, f in zip(weaker, widened, strict=True)
        )
    return Stability(
        rank_by=by,
        top=tuple(names[i] for i in best),
        alone=tuple(names[i] for i in order(np.where(in_top, alone, np.nan), names)[:k]),
        left_out=left_out,
        added=added,
        holds=_holds(pairs, full, counts, by, (resamples, seed), names),
        resamples=resamples,
    )
