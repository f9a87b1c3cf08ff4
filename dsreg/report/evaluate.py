"""Accuracy of model predictions on a revision's original, cleaned, corrected and honeypot labels,
and how the ranking of the models changes between them (Northcutt et al., NeurIPS 2021, Table 3).

The revision's snapshot and overlays are read once; the view rule of ``dsreg.views.rule`` is
applied to the rows overlays name only (a view is "every row except these" or "only these"), so
scoring 50 million rows costs one pass over the labels and one over each model's predictions.
A test holds these views equal to ``policy.apply_view``.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dsreg._version import __version__
from dsreg.errors import InvalidInputError, PredictionsError
from dsreg.formats.manifests import VIEWS, View
from dsreg.objects.hashing import hash_file
from dsreg.registry.reader import Resolved
from dsreg.registry.results import Recorded
from dsreg.report._json import stable_json
from dsreg.report.human import HumanScore, SetTarget, human_score, set_target
from dsreg.report.predictions import (
    Predictions,
    PredictionsSource,
    Ranks,
    Target,
    read_predictions,
)
from dsreg.report.ranks import count_within, unranked
from dsreg.report.show import LabelQuality, label_quality
from dsreg.report.stats.rowscores import RowScores
from dsreg.report.stats.significance import Significance, StatsOptions, significance
from dsreg.views.sparse import (
    Named,
    SparseView,
    in_label_sets,
    load_revision,
    read_column,
    sparse_views,
    view_rows,
)

__all__ = [
    "EvalReport",
    "HumanScore",
    "ModelResult",
    "ViewScore",
    "evaluate",
    "view_rows",  # re-exported: what evaluate scores, for tests against policy.apply_view
]

SCHEMA = "dsreg/eval/1"


# -- results --------------------------------------------------------------------------------------


def _acc(correct: int | None, rows: int) -> float | None:
    return None if correct is None or rows == 0 else correct / rows


def _topk(counts: Mapping[int, int | None], rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    c = {f"top{k}": v for k, v in counts.items()}
    a = {f"top{k}": _acc(v, rows) for k, v in counts.items()}
    return c, a


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewScore:
    """One model on one view: rows scored, top-k correct counts, rank among the models (by
    top-1; ties share a rank). On the honeypot, ``given_*`` score the same rows on the given
    labels."""

    view: View
    rows: int
    correct: dict[int, int | None]
    rank: int | None = None
    given_correct: dict[int, int | None] | None = None
    given_rank: int | None = None

    def accuracy(self, k: int = 1) -> float | None:
        return _acc(self.correct.get(k), self.rows)

    def given_accuracy(self, k: int = 1) -> float | None:
        return None if self.given_correct is None else _acc(self.given_correct.get(k), self.rows)

    def to_dict(self) -> dict[str, Any]:
        c, a = _topk(self.correct, self.rows)
        d: dict[str, Any] = {"rows": self.rows, "correct": c, "accuracy": a, "rank": self.rank}
        if self.given_correct is not None:
            gc, ga = _topk(self.given_correct, self.rows)
            d["given"] = {"correct": gc, "accuracy": ga, "rank": self.given_rank}
        return d


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResult:
    """One model: where its predictions came from, its score per view, its rank changes
    (positive: the model climbs that many places)."""

    model: str
    predictions: PredictionsSource
    scores: dict[View, ViewScore]
    rank_change: dict[str, int | None] = field(default_factory=dict)
    human: HumanScore | None = None

    @property
    def set_accuracy(self) -> float | None:
        """Top-1 accuracy on the multilabel view: right when the prediction is in ``labels``
        (ReaL accuracy, for an ImageNet-ReaL overlay)."""
        s = self.scores.get("multilabel")
        return None if s is None else s.accuracy(1)

    def to_dict(self) -> dict[str, Any]:
        h = self.human
        ml = self.scores.get("multilabel")
        return {
            "model": self.model,
            "predictions": self.predictions.to_dict(),
            "scores": {v: s.to_dict() for v, s in self.scores.items()},
            "rank_change": dict(self.rank_change),
            "set_accuracy": self.set_accuracy,
            "set_rows": None if ml is None else ml.rows,
            "majority_accuracy": None if h is None else h.majority_accuracy,
            "expected_agreement": None if h is None else h.expected_agreement,
            "cross_entropy": None if h is None else h.cross_entropy,
            "human_rows": None if h is None else h.rows,
            "majority_rank": None if h is None else h.rank,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalReport:
    """The accuracy report: which revision, which predictions, each model's scores per view."""

    dataset: str
    spec: str
    tag: str | None
    revision: str
    snapshot: str
    overlays: tuple[tuple[str, str], ...]  # (digest, kind)
    views: dict[View, int]  # rows served per view
    top_k: tuple[int, ...]
    models: tuple[ModelResult, ...]
    notes: tuple[str, ...] = ()
    # Intervals, rank intervals, pairwise tests, rank changes, correlation and flip points of
    # the top-1 accuracies (docs/queries.md, "Uncertainty and significance").
    significance: Significance | None = None
    label_quality: LabelQuality | None = None  # how clean the revision's labels are
    # What ``record=True`` recorded of these predictions (``dsreg.record``), one per model.
    recorded: tuple[Recorded, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "dsreg_version": __version__,
            "dataset": self.dataset,
            "spec": self.spec,
            "tag": self.tag,
            "revision": self.revision,
            "snapshot": self.snapshot,
            "overlays": [{"digest": d, "kind": k} for d, k in self.overlays],
            "views": {v: {"rows": r} for v, r in self.views.items()},
            "top_k": list(self.top_k),
            "models": [m.to_dict() for m in self.models],
            "notes": list(self.notes),
            "significance": None if self.significance is None else self.significance.to_dict(),
            "label_quality": None if self.label_quality is None else self.label_quality.to_dict(),
        } | ({"recorded": [r.to_dict() for r in self.recorded]} if self.recorded else {})

    def to_json(self) -> str:
        """Stable JSON: sorted keys, six-decimal floats; the same result gives the same bytes."""
        return stable_json(self.to_dict())

    def to_arrow(self) -> pa.Table:
        """One row per (model, view): model, view, rows, rank, top<k> accuracy columns (on the
        multilabel view, top1 is the set accuracy), on the honeypot the given-label accuracy
        and rank, and the model's scores against the raters' distributions (the same on
        every row of a model)."""
        rows: list[dict[str, Any]] = []
        for m in self.models:
            for v, s in m.scores.items():
                r: dict[str, Any] = {"model": m.model, "view": v, "rows": s.rows, "rank": s.rank}
                for k in self.top_k:
                    r[f"top{k}"] = s.accuracy(k)
                r["given_top1"] = s.given_accuracy(1)
                r["given_rank"] = s.given_rank
                h = m.human
                r["majority_accuracy"] = None if h is None else h.majority_accuracy
                r["expected_agreement"] = None if h is None else h.expected_agreement
                r["cross_entropy"] = None if h is None else h.cross_entropy
                rows.append(r)
        return pa.Table.from_pylist(rows)

    def to_pandas(self) -> Any:
        """``to_arrow()`` as a pandas DataFrame (needs pandas)."""
        return self.to_arrow().to_pandas()


# -- scoring --------------------------------------------------------------------------------------


def _missing(unpredicted: np.ndarray, ranks: Ranks, vw: SparseView) -> np.ndarray:
    """Served rows of ``vw`` the model did not predict (``unpredicted``: every such row)."""
    if vw.complement:
        if not len(unpredicted):
            return unpredicted
        return unpredicted[~np.isin(unpredicted, vw.rows)]
    return np.asarray(vw.rows[ranks.given[vw.rows] < 0])


def _hits(ranks: np.ndarray, k: int) -> int:
    """How many predicted rows (rank >= 0) have their label in the top ``k``."""
    return count_within(ranks, k)


def _score(
    ranks: Ranks,
    vw: SparseView,
    top_k: Sequence[int],
    full: Mapping[int, int],
    *,
    sets: SetTarget,
) -> ViewScore:
    """Counts over the few rows a view adds, drops or relabels; ``full[k]`` is the top-k count
    over every snapshot row, computed once per model."""
    correct: dict[int, int | None] = {}
    given_correct: dict[int, int | None] | None = {} if vw.name == "honeypot" else None
    g, s = ranks.given, ranks.suggested
    for k in top_k:
        if ranks.depth is not None and k > ranks.depth:
            correct[k] = None
            if given_correct is not None:
                given_correct[k] = None
            continue
        c = _hits(g[vw.rows], k)
        if vw.complement:
            c = full[k] - c
        if given_correct is not None:
            given_correct[k] = c
        if len(vw.relabel):
            c += _hits(s[vw.relabel_cand], k) - _hits(g[vw.relabel], k)
        if vw.name == "multilabel":
            if k > 1:  # a label set is scored on the top-1 prediction alone
                correct[k] = None
                continue
            c += _set_hits(ranks, vw, sets) - _served_hits(ranks, vw) + _pair_gain(ranks, vw)
        correct[k] = c
    return ViewScore(view=vw.name, rows=vw.size, correct=correct, given_correct=given_correct)


def _served_hits(ranks: Ranks, vw: SparseView) -> int:
    """Top-1 hits at the multilabel view's set rows on the single label it serves there
    (what the count above holds for them, replaced by ``_set_hits``)."""
    rel = vw.set_cand >= 0
    return _hits(ranks.suggested[vw.set_cand[rel]], 1) + _hits(ranks.given[vw.set_rows[~rel]], 1)


def _pair_gain(ranks: Ranks, vw: SparseView) -> int:
    """Top-1 hits the multilabel view's pair rows (``multi_label`` without a list: the given
    and the suggested label fit) add to the count above, which scores them on the given label
    alone: the rows whose top-1 is the suggested label and not the given one."""
    if not len(vw.pair_rows):
        return 0
    given = ranks.given[vw.pair_rows]
    suggested = ranks.suggested[vw.pair_cand]
    return int(np.count_nonzero((suggested == 0) & (given != 0)))


def _set_hits(ranks: Ranks, vw: SparseView, sets: SetTarget) -> int:
    """How many set rows' top-1 prediction is in the row's ``labels`` list."""
    if not len(vw.set_rows) or sets.lists is None or ranks.top1 is None:
        return 0
    top1 = ranks.top1[np.searchsorted(sets.rows, vw.set_rows)]
    return int(np.count_nonzero(in_label_sets(top1, vw.set_index, sets.lists)))


def _ranks_of(values: Sequence[int | None]) -> list[int | None]:
    """Competition ranking (1, 2, 2, 4): 1 + how many score strictly more; None stays None."""
    have = [v for v in values if v is not None]
    return [None if v is None else 1 + sum(1 for w in have if w > v) for v in values]


def _rank(results: list[ModelResult], names: Sequence[View]) -> list[ModelResult]:
    for v in names:
        scores = [m.scores[v] for m in results]
        ranks = _ranks_of([s.correct[1] if s.rows else None for s in scores])
        given = _ranks_of(
            [s.given_correct[1] if s.given_correct is not None and s.rows else None for s in scores]
        )
        for m, s, r, gr in zip(results, scores, ranks, given, strict=True):
            m.scores[v] = replace(s, rank=r, given_rank=gr if s.given_correct is not None else None)
    majority = _ranks_of([m.human.majority_correct if m.human else None for m in results])
    out = []
    for m, mr in zip(results, majority, strict=True):
        human = m.human if m.human is None else replace(m.human, rank=mr)
        change: dict[str, int | None] = {}
        o, c, h = (m.scores.get(v) for v in ("original", "corrected", "honeypot"))
        if o is not None and c is not None:
            change["original_to_corrected"] = _climb(o.rank, c.rank)
        if h is not None:
            change["honeypot_given_to_corrected"] = _climb(h.given_rank, h.rank)
        ml = m.scores.get("multilabel")
        if o is not None and ml is not None:
            change["original_to_multilabel"] = _climb(o.rank, ml.rank)
        if o is not None and human is not None:
            change["original_to_majority"] = _climb(o.rank, human.rank)
        out.append(replace(m, rank_change=change, human=human))
    return out


def _climb(before: int | None, after: int | None) -> int | None:
    """The places a model climbs from rank ``before`` to rank ``after`` (None: either is)."""
    return before - after if before is not None and after is not None else None


@dataclass(frozen=True, slots=True)
class RevisionLabels:
    """What a revision's predictions are scored against: the rows and their labels
    (``target``), the overlays' verdicts merged (``merged``) and the overlays by digest and
    kind, and the rater counts as label sets (``sets``)."""

    target: Target
    merged: Named
    overlays: list[tuple[str, str]]
    sets: SetTarget


def revision_target(resolved: Resolved) -> RevisionLabels:
    rev = load_revision(resolved.registry, resolved.revision)
    merged = rev.merged
    cand = merged.suggested >= 0
    sets = set_target(merged, len(rev.classes))

    def example_ids() -> pa.Array:
        return read_column(rev.examples, "example_id").combine_chunks()

    target = Target(
        labels=rev.labels,
        label_groups=rev.labels.groups,
        classes=rev.classes,
        cand_rows=merged.named[cand],
        cand_suggested=merged.suggested[cand],
        example_ids=_cache(example_ids),
        extra_rows=sets.rows,
        count_parent=sets.parent,
        count_label=sets.label,
        count_value=sets.value,
        normalization=resolved.registry.snapshot(resolved.revision.snapshot).normalization,
    )
    return RevisionLabels(target, merged, list(rev.overlays), sets)


def _cache(fn: Any) -> Any:
    box: list[pa.Array] = []

    def get() -> pa.Array:
        if not box:
            box.append(fn())
        return box[0]

    return get


def _check_names(inputs: Sequence[tuple[str, Predictions]]) -> None:
    seen: set[str] = set()
    for name, _ in inputs:
        if not name:
            raise PredictionsError("a model needs a name (a file stem or a mapping key)")
        if name in seen:
            raise PredictionsError(
                f"two predictions are named {name!r}; model names (file stems) must differ"
            )
        seen.add(name)


def evaluate(
    resolved: Resolved,
    inputs: Sequence[tuple[str, Predictions]],
    *,
    views: Sequence[View] = VIEWS,
    top_k: Sequence[int] = (1,),
    stats: StatsOptions | None = None,
) -> EvalReport:
    """Score each named predictions (``named_inputs``) against the views of ``resolved``'s
    snapshot + overlays, with the intervals and tests of ``stats`` (default options when
    None); rank the models on each view."""
    stats = stats or StatsOptions()
    stats.check()
    names = tuple(dict.fromkeys(views))
    for v in names:
        if v not in VIEWS:
            raise InvalidInputError(f"unknown view {v!r}; choose from {', '.join(VIEWS)}")
    if not names:
        raise InvalidInputError(f"give at least one view of {', '.join(VIEWS)}")
    ks = tuple(sorted({1, *(int(k) for k in top_k)}))
    if ks[0] < 1:
        raise InvalidInputError(f"top-k values must be at least 1, got {list(top_k)}")
    if not inputs:
        raise PredictionsError("give at least one predictions file or array")
    _check_names(inputs)
    with ThreadPoolExecutor(max_workers=1) as hasher:
        # Predictions files are hashed (for the report) while the revision is read.
        digests = {
            str(p): hasher.submit(hash_file, p)
            for _, p in inputs
            if isinstance(p, str | os.PathLike) and Path(p).is_file()
        }
        labels = revision_target(resolved)
        report, rows = _score_all(resolved, labels, inputs, names, ks, digests)
    return dataclasses.replace(
        report,
        significance=significance(rows.correctness(), stats),
        label_quality=label_quality(resolved),
    )


def _score_all(
    resolved: Resolved,
    labels: RevisionLabels,
    inputs: Sequence[tuple[str, Predictions]],
    names: tuple[View, ...],
    ks: tuple[int, ...],
    digests: Mapping[str, Future[str]],
) -> tuple[EvalReport, RowScores]:
    target, merged, kinds, sets = labels.target, labels.merged, labels.overlays, labels.sets
    results: list[ModelResult] = []
    seen: set[str] = set()

    def digest_of(path: Path) -> str:
        f = digests.get(str(path))
        return f.result() if f is not None else hash_file(path)

    with ThreadPoolExecutor(max_workers=1) as pool:
        # The views are built on one core while the first model's predictions are read.
        building = pool.submit(sparse_views, target.n, merged, names)
        ranked = read_predictions(target, inputs, digest_of=digest_of)
        first = next(ranked)
        vws = building.result()
    rows = RowScores(target.n, vws, sets)
    for ranks in itertools.chain([first], ranked):
        model = ranks.source.model
        if model in seen:
            raise PredictionsError(f"model {model!r} is given twice; model names must differ")
        seen.add(model)
        unpredicted = unranked(ranks.given)
        for vw in vws.values():
            miss = _missing(unpredicted, ranks, vw)
            if len(miss):
                ids = target.example_ids().take(pa.array(miss[:5])).to_pylist()
                raise PredictionsError(
                    f"predictions of model {model!r} miss {len(miss)} of the {vw.size} rows of the "
                    f"{vw.name} view, first rows {miss[:5].tolist()} (example ids {ids}); predict "
                    "every row, or score fewer views with --views"
                )
        full = {k: _hits(ranks.given, k) for k in ks}
        scores = {v: _score(ranks, vws[v], ks, full, sets=sets) for v in names}
        rows.add(model, ranks)
        results.append(
            ModelResult(
                model=model,
                predictions=ranks.source,
                scores=scores,
                human=human_score(ranks, sets),
            )
        )
    notes = []
    if not resolved.revision.overlays:
        notes.append(
            "this revision has no overlays: cleaned and corrected are the original labels, and "
            "the honeypot is empty"
        )
    if any(k == "detected" for _, k in kinds):
        notes.append(
            "a detected overlay is unvalidated: its suspected rows are removed (cleaned) or "
            "relabelled by the detector (corrected)"
        )
    report = EvalReport(
        dataset=resolved.dataset,
        spec=resolved.spec,
        tag=resolved.tag,
        revision=resolved.digest,
        snapshot=resolved.revision.snapshot,
        overlays=tuple(kinds),
        views={v: vws[v].size for v in names},
        top_k=ks,
        models=tuple(_rank(results, names)),
        notes=tuple(notes),
    )
    return report, rows


def named_inputs(predictions: Any) -> list[tuple[str, Predictions]]:
    if isinstance(predictions, Mapping):
        return [(str(k), v) for k, v in predictions.items()]
    if isinstance(predictions, str | os.PathLike):
        return [(Path(predictions).stem, predictions)]
    if isinstance(predictions, Sequence):
        out = []
        for p in predictions:
            if not isinstance(p, str | os.PathLike):
                raise PredictionsError(
                    "a list of predictions must hold file paths (the model name is the file "
                    "stem); name in-memory predictions with a dict {model: array}"
                )
            out.append((Path(p).stem, p))
        return out
    return [("model", predictions)]
