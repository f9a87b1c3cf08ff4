"""``dsreg leaderboard``: every recorded model re-scored on every tagged revision of a dataset.

A recorded result holds a model's predictions aligned with a snapshot's rows, so it can be
scored on any revision of that snapshot, including a relabeling tagged after it was recorded:
the leaderboard reads each revision's labels and overlays once (``evaluate.revision_target``,
the evaluator's own reading, so its counts are ``dsreg eval``'s), ranks each model's
predictions there (``predictions.read_predictions``), and reduces the rows to patterns.

The reduction is sparse, as the evaluator's views are: a row no overlay names is in the
original, cleaned and corrected views with its given label and in no honeypot, so its features
follow from the models' top-1 correctness on the given label alone. Those rows are counted by
that correctness (one 64-bit key per row for up to 64 models, packed bits beyond), and only the
rows overlays name get their full feature vector. Memory holds one model's predictions and a bit
per row per model, whatever the number of rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from dsreg._util.records import FieldDict
from dsreg.errors import InvalidInputError, NotFoundError
from dsreg.formats.manifests import View
from dsreg.objects.digest import short
from dsreg.registry.reader import Reader, RecordedResult, Resolved
from dsreg.report._json import stable_json
from dsreg.report.board.figures import Counts, ViewFigures, feature_index, view_figures
from dsreg.report.evaluate import revision_target
from dsreg.report.predictions import AlignedPredictions, read_predictions, recorded_predictions
from dsreg.report.stats.core import PatternCounter, Patterns, discordant
from dsreg.views.sparse import SparseView, sparse_views

__all__ = [
    "BOARD_VIEWS",
    "Flip",
    "Leaderboard",
    "RevisionBoard",
    "leaderboard",
    "score_revision",
]

SCHEMA = "dsreg/leaderboard/1"
#: The views a leaderboard scores (top-1 accuracy; the multilabel view is ``dsreg eval``'s).
BOARD_VIEWS: tuple[View, ...] = ("original", "cleaned", "corrected", "honeypot")
#: What ``--views`` may name: the default views, and the rows an audit left (scored by default
#: when a scored revision applies an audit overlay, as ``dsreg eval`` does).
BOARD_CHOICES: tuple[View, ...] = (*BOARD_VIEWS, "decontaminated")
# Rows counted at a time (a multiple of 8: the models' correctness is kept as packed bits).
_CHUNK = 1 << 22


@dataclass(frozen=True, slots=True, kw_only=True)
class RevisionBoard:
    """The models scored on one revision: ``figures[i]`` is view ``views[i]``."""

    tag: str | None
    revision: str
    snapshot: str
    views: tuple[View, ...]
    models: tuple[str, ...]
    figures: tuple[ViewFigures, ...]

    @property
    def name(self) -> str:
        return self.tag or short(self.revision)

    def figure(self, view: View) -> ViewFigures:
        return self.figures[self.views.index(view)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "revision": self.revision,
            "snapshot": self.snapshot,
            "rows": {v: f.rows for v, f in zip(self.views, self.figures, strict=True)},
            "scores": {
                m: {v: f.model_dict(i) for v, f in zip(self.views, self.figures, strict=True)}
                for i, m in enumerate(self.models)
            },
            "pairs": {
                v: f.pairs(self.models) for v, f in zip(self.views, self.figures, strict=True)
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Flip(FieldDict):
    """Two models whose order on a view differs between two revisions: ``a`` led on
    ``before`` and ``b`` leads on ``after``. ``significant``: the pair's order is significant
    (McNemar, Holm-corrected) on both revisions."""

    view: View
    before: str
    after: str
    a: str
    b: str
    significant: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Leaderboard:
    """Every recorded model of ``dataset`` on each revision (``revisions``, oldest tag first)."""

    dataset: str
    views: tuple[View, ...]
    resamples: int
    seed: int
    results: dict[str, RecordedResult]
    revisions: tuple[RevisionBoard, ...]
    flips: tuple[Flip, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "dataset": self.dataset,
            "views": list(self.views),
            "level": 0.95,
            "resamples": self.resamples,
            "seed": self.seed,
            "models": {
                m: {
                    "result": held.digest,
                    "predictions": held.record.predictions,
                    "snapshot": held.record.snapshot,
                    "kind": held.record.kind,
                    "meta": dict(held.record.meta),
                }
                for m, held in self.results.items()
            },
            "revisions": [b.to_dict() for b in self.revisions],
            "flips": [f.to_dict() for f in self.flips],
        }

    def to_json(self) -> str:
        return stable_json(self.to_dict())


# -- one revision ---------------------------------------------------------------------------------


def _base_keys(bits: Sequence[np.ndarray], start: int, stop: int) -> np.ndarray:
    """The models' top-1 correctness on rows [start, stop) as (rows, models) booleans, from
    each model's packed bits (``start`` a multiple of 8)."""
    out = np.empty((stop - start, len(bits)), dtype=bool)
    for m, b in enumerate(bits):
        out[:, m] = np.unpackbits(b[start // 8 : (stop + 7) // 8], count=stop - start).view(bool)
    return out


def _count_base(bits: Sequence[np.ndarray], n: int, named: np.ndarray) -> Patterns:
    """Distinct correctness vectors of the rows no overlay names, with their counts."""
    m = len(bits)
    counter = PatternCounter(m) if m > 64 else None
    keys: list[np.ndarray] = []
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        chunk = _base_keys(bits, start, stop)
        lo, hi = np.searchsorted(named, [start, stop])
        if hi > lo:
            keep = np.ones(stop - start, dtype=bool)
            keep[named[lo:hi] - start] = False
            chunk = chunk[keep]
        if counter is not None:
            counter.add(chunk)
            continue
        # Up to 64 models: each row's correctness is one little-endian 64-bit key.
        packed = np.zeros((len(chunk), 8), dtype=np.uint8)
        packed[:, : (m + 7) // 8] = np.packbits(chunk, axis=1, bitorder="little")
        k, c = np.unique(packed.view("<u8").ravel(), return_counts=True)
        keys.append(np.stack([k, c.astype(np.uint64)], axis=1))
    if counter is not None:
        return counter.patterns()
    if not keys:
        return Patterns(features=np.zeros((0, m), np.uint8), counts=np.zeros(0, np.int64))
    both = np.concatenate(keys)
    uniq, inverse = np.unique(both[:, 0], return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=both[:, 1].astype(np.float64))
    features = ((uniq[:, None] >> np.arange(m, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    return Patterns(features=features, counts=np.rint(counts).astype(np.int64))


def _named_features(
    vws: Sequence[SparseView],
    named: np.ndarray,
    given: list[np.ndarray],
    suggested: list[Any],
    part: slice,
) -> np.ndarray:
    """The full feature vectors of rows overlays name (``named``, the ``part`` of all of
    them): ``given[m]`` is model m's top-1 correctness on their given labels,
    ``suggested[m](vw)`` on a view's relabelled rows (all of them, in ``vw.relabel`` order)."""
    models = len(given)
    out = np.zeros((len(named), len(vws) * (models + 1)), dtype=np.uint8)
    for v, vw in enumerate(vws):
        listed = np.isin(named, vw.rows)
        member = ~listed if vw.complement else listed
        col = feature_index(len(vws), models, v, None)
        out[:, col] = member
        # The view's relabelled rows within this part, and where they are in it.
        lo, hi = np.searchsorted(vw.relabel, [named[0], named[-1] + 1]) if len(named) else (0, 0)
        at = np.searchsorted(named, vw.relabel[lo:hi])
        for m in range(models):
            right = given[m].copy()
            right[at] = suggested[m](vw)[lo:hi]
            out[:, col + 1 + m] = member & right
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RevisionPatterns:
    """One revision's rows as patterns, in two parts: ``base``, the models' correctness on the
    given label of the rows no overlay names (P_b x M), and ``named``, the full feature vectors
    of the rows overlays name (P_n x F). ``complement`` marks the views every base row is in
    (the others hold none)."""

    base: Patterns
    named: Patterns
    complement: tuple[bool, ...]

    @property
    def models(self) -> int:
        return int(self.base.features.shape[1])

    def joint(self) -> Patterns:
        """Both parts as one set of patterns of full feature vectors."""
        views, models = len(self.complement), self.models
        expanded = np.zeros((len(self.base.counts), views * (models + 1)), dtype=np.uint8)
        for v, comp in enumerate(self.complement):
            if comp:
                col = feature_index(views, models, v, None)
                expanded[:, col] = 1
                expanded[:, col + 1 : col + 1 + models] = self.base.features
        return Patterns(
            features=np.concatenate([expanded, self.named.features]),
            counts=np.concatenate([self.base.counts, self.named.counts]),
        )

    def _spread(self, out: np.ndarray, rows: Any, correct: np.ndarray) -> None:
        """Add the base rows' count and correct counts to every complement view's columns."""
        views, models = len(self.complement), self.models
        for v, comp in enumerate(self.complement):
            if comp:
                col = feature_index(views, models, v, None)
                out[..., col] += rows
                out[..., col + 1 : col + 1 + models] += correct

    def resample(self, resamples: int, seed: int) -> np.ndarray:
        """As ``joint().resample``, the same sums from the same seed, with the base part's
        product taken once for every complement view (M columns, not V x (M + 1))."""
        joint = self.joint()
        pb = len(self.base.counts)
        out = np.zeros((resamples, joint.features.shape[1]))
        for start, drawn in joint.draws(resamples, seed):
            wb, wn = drawn[:, :pb], drawn[:, pb:]
            block = wn @ self.named.features.astype(drawn.dtype)
            self._spread(block, wb.sum(axis=1), wb @ self.base.features.astype(wb.dtype))
            out[start : start + len(drawn)] = block
        return out

    def sums(self) -> np.ndarray:
        """Each feature's sum over every row (F,): the named rows', and the base rows' in every
        complement view."""
        sums = self.named.sums()
        self._spread(sums, self.base.rows, self.base.sums())
        return sums

    def counts(self, resamples: int, seed: int) -> Counts:
        views, models = len(self.complement), self.models
        sums = self.sums()
        base_only = discordant(self.base.features, self.base.counts)
        only = []
        for v, comp in enumerate(self.complement):
            first = feature_index(views, models, v, 0)
            named = self.named.features[:, first : first + models]
            mine = discordant(named, self.named.counts)
            only.append(mine + base_only if comp else mine)
        return Counts(
            views=views,
            models=models,
            sums=sums,
            samples=self.resample(resamples, seed) if resamples else None,
            only=only,
        )


# A model's predictions, or a function that loads them: the leaderboard maps one model's at a
# time, so that memory holds one model's predictions whatever the number of models.
Loadable = np.ndarray | AlignedPredictions | Callable[[], np.ndarray | AlignedPredictions]


def revision_patterns(
    resolved: Resolved,
    models: Sequence[tuple[str, Loadable]],
    views: Sequence[View],
) -> RevisionPatterns:
    """The row patterns of ``models`` (aligned predictions) on the ``views`` of a revision."""
    labels = revision_target(resolved)
    target, merged = labels.target, labels.merged
    n = target.n
    vw_map = sparse_views(n, merged, views)
    vws = [vw_map[v] for v in views]
    named = np.asarray(merged.named, dtype=np.int64)
    bits: list[np.ndarray] = []
    given: list[np.ndarray] = []
    suggested: list[Any] = []
    loaded = ((m, a() if callable(a) else a) for m, a in models)
    for ranks in read_predictions(target, loaded):  # type: ignore[arg-type]  # one at a time
        right = ranks.given == 0
        bits.append(np.packbits(right))
        given.append(right[named])
        sug = ranks.suggested == 0
        suggested.append(lambda vw, sug=sug: sug[vw.relabel_cand])
        del ranks, right
    base = _count_base(bits, n, named)
    # The rows overlays name, counted by pattern too: the bootstrap draws over distinct
    # patterns, a few thousand however many rows are corrected.
    full = PatternCounter(len(vws) * (len(models) + 1))
    for start in range(0, len(named), _CHUNK):
        part = slice(start, start + _CHUNK)
        full.add(_named_features(vws, named[part], [g[part] for g in given], suggested, part))
    return RevisionPatterns(
        base=base, named=full.patterns(), complement=tuple(vw.complement for vw in vws)
    )


def score_revision(
    resolved: Resolved,
    models: Sequence[tuple[str, Loadable]],
    *,
    views: Sequence[View],
    resamples: int,
    seed: int,
) -> RevisionBoard:
    """Score aligned predictions on one revision: every figure of ``figures``."""
    patterns = revision_patterns(resolved, models, views)
    return RevisionBoard(
        tag=resolved.tag,
        revision=resolved.digest,
        snapshot=resolved.revision.snapshot,
        views=tuple(views),
        models=tuple(m for m, _ in models),
        figures=tuple(view_figures(patterns.counts(resamples, seed))),
    )


# -- the board ------------------------------------------------------------------------------------


def check_views(views: Sequence[str]) -> tuple[View, ...]:
    names = tuple(dict.fromkeys(views))
    bad = [v for v in names if v not in BOARD_CHOICES]
    if bad or not names:
        raise InvalidInputError(
            f"--views {','.join(views)!r}: choose from {', '.join(BOARD_CHOICES)}"
        )
    return names  # type: ignore[return-value]  # checked against BOARD_CHOICES


def default_views(revisions: Sequence[Resolved]) -> tuple[View, ...]:
    """The default views, with ``decontaminated`` when one of ``revisions`` applies an audit."""
    audited = any(
        res.registry.overlay(d).kind == "audit" for res in revisions for d in res.revision.overlays
    )
    return (*BOARD_VIEWS, "decontaminated") if audited else BOARD_VIEWS


def _flips(boards: Sequence[RevisionBoard], views: Sequence[View]) -> list[Flip]:
    out: list[Flip] = []
    for before, after in itertools.pairwise(boards):
        common = [m for m in before.models if m in after.models]
        for v in views:
            f0, f1 = before.figure(v), after.figure(v)
            if not f0.rows or not f1.rows:
                continue
            for x, a in enumerate(common):
                for b in common[x + 1 :]:
                    i0, j0 = before.models.index(a), before.models.index(b)
                    i1, j1 = after.models.index(a), after.models.index(b)
                    s0 = np.sign(int(f0.correct[i0]) - int(f0.correct[j0]))
                    s1 = np.sign(int(f1.correct[i1]) - int(f1.correct[j1]))
                    if s0 * s1 >= 0:
                        continue
                    lead, trail = (a, b) if s0 > 0 else (b, a)
                    sig = f0.significant(i0, j0) and f1.significant(i1, j1)
                    out.append(Flip(view=v, before=before.name, after=after.name, a=lead,
                                    b=trail, significant=sig))  # fmt: skip
    return out


def leaderboard(
    reader: Reader,
    dataset: str,
    revisions: Sequence[Resolved],
    *,
    views: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> Leaderboard:
    """Score every model ``reader`` records for ``dataset`` on each of ``revisions`` (its
    tags in the order they were first set, by default) whose snapshot the model's predictions
    are aligned with. ``views``: default original, cleaned, corrected and honeypot, and
    decontaminated when a scored revision applies an audit overlay."""
    names = None if views is None else check_views(views)
    if resamples < 0:
        raise InvalidInputError(f"--resamples {resamples}: give 0 or more")
    results = reader.results(dataset)
    if not results:
        raise NotFoundError(
            f"no model is recorded for {dataset!r}{reader.where}; record one with "
            "'dsreg eval SPEC PREDS --record --model NAME'"
        )
    if not revisions:
        raise NotFoundError(f"dataset {dataset!r} has no tags{reader.where}; tag a revision first")
    for res in revisions:
        if res.dataset != dataset:
            raise InvalidInputError(
                f"--revisions {res.spec!r} is a revision of {res.dataset!r}, not of {dataset!r}"
            )
    distinct: list[Resolved] = []
    for res in revisions:
        if all(o.digest != res.digest for o in distinct):
            distinct.append(res)
    scored = [
        (res, [m for m, r in results.items() if r.record.snapshot == res.revision.snapshot])
        for res in distinct
    ]
    scored = [(res, here) for res, here in scored if here]
    if names is None:
        names = default_views([res for res, _ in scored])
    boards = []
    for res, here in scored:
        arrays = [(m, partial(recorded_predictions, res.registry, results[m].record)) for m in here]
        boards.append(score_revision(res, arrays, views=names, resamples=resamples, seed=seed))
    return Leaderboard(
        dataset=dataset,
        views=names,
        resamples=resamples,
        seed=seed,
        results=results,
        revisions=tuple(boards),
        flips=tuple(_flips(boards, names)),
    )
