"""What a model's predictions become: ranks of the labels a view may hold, chunk by chunk.

:class:`Target` is what predictions are lined up with (a snapshot's labels, the suggested labels
and label sets or rater counts overlays give), :class:`Ranks` one model's result, and
:class:`RankAccumulator` the arithmetic that fills it from a chunk of predicted labels or
probabilities at given rows. Reading files and tables into such chunks is
:mod:`dsreg.report.predictions`'s, which re-exports the records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from dsreg.errors import PredictionsError
from dsreg.formats.inputfiles import topk_faults

__all__ = [
    "EPS",
    "Labels",
    "PredictionsSource",
    "RankAccumulator",
    "Ranks",
    "Target",
    "count_within",
    "describe",
    "right_bits",
    "unranked",
]

# Values a pass over a whole rank array reads at a time: its temporaries stay small and are
# reused, where one of the array's size would be fresh memory (on a VM that backs memory on
# first touch, a fresh page costs several times reading one). A multiple of 8 (bits are packed).
_PASS = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictionsSource:
    """Where one model's predictions came from: the file as given and its BLAKE3 digest."""

    model: str
    file: str | None
    digest: str | None
    format: str
    kind: str  # "labels", "topk" or "probabilities"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "digest": self.digest,
            "format": self.format,
            "kind": self.kind,
        }


class Labels(Protocol):
    """A snapshot's labels: an array, or a column read as it is used
    (:class:`dsreg.views.sparse.LabelColumn`)."""

    def __len__(self) -> int: ...

    def __getitem__(self, pos: slice | np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What predictions are lined up with: a snapshot's labels and the rows overlays name."""

    labels: Labels
    classes: tuple[str, ...]
    cand_rows: np.ndarray  # int64, sorted: rows some overlay names with a suggested label
    cand_suggested: np.ndarray  # int32, the suggested label at cand_rows
    example_ids: Callable[[], pa.Array]  # the snapshot's ids, read only when needed
    # Rows overlays give label sets or rater counts (sorted): the model's top-1 is kept there;
    # the counts, flattened (entry e: count_value[e] raters chose count_label[e] at
    # extra_rows[count_parent[e]], sorted by parent), give each row's cross-entropy.
    extra_rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    count_parent: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    count_label: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    count_value: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    # An exact-answer set's rule (``gsm8k/1``): predicted answers are normalised by it and
    # looked up among the classes; None for every other set.
    normalization: str | None = None
    # Where the labels are read a row group at a time: the groups' rows, in order.
    label_groups: Sequence[slice] | None = None

    @property
    def n(self) -> int:
        return len(self.labels)

    def row_chunks(self, step: int) -> list[slice]:
        """Consecutive chunks of the rows for a pass over them in order: the labels' row
        groups where they are read so (each decoded where it is used), else ``step`` rows."""
        if self.label_groups is not None:
            return list(self.label_groups)
        return [slice(a, min(self.n, a + step)) for a in range(0, self.n, step)]

    @property
    def k(self) -> int:
        return len(self.classes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranks:
    """One model's ranks: ``given[i]`` of the snapshot's label at row i, ``suggested[j]`` of the
    suggested label at ``Target.cand_rows[j]``; -1 where the model predicted nothing. From
    predicted labels (not probabilities) a rank is 0 (right) or 1 (not first): top-1 only."""

    source: PredictionsSource
    given: np.ndarray
    suggested: np.ndarray
    top1: np.ndarray | None = None  # int32 at Target.extra_rows: the predicted class, -1 none
    # float64 at Target.extra_rows: cross-entropy of the probabilities against the raters'
    # distribution (nan where the row has no counts); None for predicted labels
    xent: np.ndarray | None = None
    # The largest k whose top-k the ranks tell: 1 from labels, m from top-m class indices,
    # None (every k) from probabilities.
    depth: int | None = None


# Probabilities below this are taken as this in a cross-entropy (a model that gives a class
# the raters chose probability 0 would otherwise score infinity).
EPS = 1e-12


class RankAccumulator:
    """Ranks of one model, filled chunk by chunk (``add_labels``, ``add_probs``), then
    :meth:`ranks`."""

    def __init__(self, target: Target, source: PredictionsSource) -> None:
        self.t = target
        self.source = source
        # The narrowest type of the largest rank (a predicted label ranks 0 or 1; a class
        # among k at most k - 1), so a pass over the ranks reads as few bytes as it can.
        top = 1 if source.kind == "labels" else target.k
        dtype = next(t for t in (np.int8, np.int16, np.int32) if top < np.iinfo(t).max)
        self.given = np.full(target.n, -1, dtype=dtype)
        self.suggested = np.full(len(target.cand_rows), -1, dtype=dtype)
        m = len(target.extra_rows)
        self.top1 = np.full(m, -1, dtype=np.int32)
        self.xent = np.full(m, np.nan) if m else None
        self.has_probs = False
        self.depth: int | None = 1

    def ranks(self) -> Ranks:
        return Ranks(
            source=self.source,
            given=self.given,
            suggested=self.suggested,
            top1=self.top1 if len(self.top1) else None,
            xent=self.xent if self.has_probs else None,
            depth=None if self.has_probs else self.depth,
        )

    def _extras(self, pos: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into extra_rows, offsets in the chunk) of the chunk's extra rows."""
        rows = self.t.extra_rows
        if not len(rows):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        if isinstance(pos, slice):
            lo, hi = np.searchsorted(rows, [pos.start, pos.stop])
            return np.arange(lo, hi), rows[lo:hi] - pos.start
        ei = np.searchsorted(rows, pos)
        ok = ei < len(rows)
        ok[ok] = rows[ei[ok]] == pos[ok]
        return ei[ok], np.flatnonzero(ok)

    def _cross_entropy(self, probs: np.ndarray, ei: np.ndarray, off: np.ndarray) -> None:
        """Per extra row of the chunk that has counts: -sum_c p_raters(c) log q(c), with the
        model's probabilities q normalised per row and clipped at ``EPS``."""
        t = self.t
        if not len(ei) or not len(t.count_parent) or self.xent is None:
            return
        where = np.full(len(t.extra_rows), -1, dtype=np.int64)
        where[ei] = off
        lo, hi = np.searchsorted(t.count_parent, [ei.min(), ei.max() + 1])
        parent = t.count_parent[lo:hi]
        at = where[parent]
        ok = at >= 0
        parent, at = parent[ok], at[ok]
        label, value = t.count_label[lo:hi][ok], t.count_value[lo:hi][ok]
        q = probs[at, label] / probs[at].sum(axis=1)
        total = np.bincount(parent, weights=value, minlength=len(t.extra_rows))
        part = np.bincount(
            parent, weights=value * np.log(np.maximum(q, EPS)), minlength=len(t.extra_rows)
        )
        rated = np.unique(parent)
        rated = rated[total[rated] > 0]
        self.xent[rated] = -part[rated] / total[rated]

    def _candidates(self, pos: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into cand_rows, offsets in the chunk) of the chunk's candidate rows."""
        cand = self.t.cand_rows
        if isinstance(pos, slice):
            lo, hi = np.searchsorted(cand, [pos.start, pos.stop])
            return np.arange(lo, hi), cand[lo:hi] - pos.start
        if not len(cand):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        ci = np.searchsorted(cand, pos)
        ok = ci < len(cand)
        ok[ok] = cand[ci[ok]] == pos[ok]
        return ci[ok], np.flatnonzero(ok)

    def _fresh(self, pos: slice | np.ndarray) -> None:
        seen = np.asarray(self.given[pos]) >= 0
        dups = _dups(pos) if isinstance(pos, np.ndarray) else np.empty(0, np.int64)
        if seen.any() or len(dups):
            rows = np.arange(pos.start, pos.stop) if isinstance(pos, slice) else pos
            first = rows[seen] if seen.any() else dups
            raise PredictionsError(
                f"{describe(self.source)} predicts some rows more than once, first rows "
                f"{first[:5].tolist()}; give one prediction per row"
            )

    def add_labels(self, pred: np.ndarray, pos: slice | np.ndarray) -> None:
        # A predicted label ranks the true one 0 (right) or "not first" (1): top-1 only.
        self._fresh(pos)
        if isinstance(pos, slice) and self.given.dtype == np.int8:
            # 0 and 1 written in place as bools (a slice is a view): no temporary.
            np.not_equal(pred, self.t.labels[pos], out=self.given[pos].view(np.bool_))
        else:
            self.given[pos] = pred != self.t.labels[pos]
        ei, off = self._extras(pos)
        if len(ei):
            self.top1[ei] = pred[off]
        ci, off = self._candidates(pos)
        if len(ci):
            sug = self.t.cand_suggested[ci]
            self.suggested[ci] = np.where(sug < 0, -1, pred[off] != sug)

    def add_topk(self, pred: np.ndarray, pos: slice | np.ndarray) -> None:
        """Top-m class indices per row, best first: a label ranks where it stands in its row,
        or m (beyond the top-m) where it is absent."""
        self._fresh(pos)
        self._check_topk(pred, pos)
        m = pred.shape[1]
        self.depth = m
        self.given[pos] = _position(pred, self.t.labels[pos])
        ei, off = self._extras(pos)
        if len(ei):
            self.top1[ei] = pred[off, 0]
        self._rank_suggested(pred, pos, _position)

    def _check_topk(self, pred: np.ndarray, pos: slice | np.ndarray) -> None:
        rows = np.arange(pos.start, pos.stop) if isinstance(pos, slice) else pos
        for bad, why in topk_faults(pred, self.t.k):
            if len(bad):
                raise PredictionsError(
                    f"{describe(self.source)}: {len(bad)} rows name {why}, first rows "
                    f"{rows[bad[:5]].tolist()}; each row lists m different class indices of "
                    "the snapshot, best first"
                )

    def add_probs(self, probs: np.ndarray, pos: slice | np.ndarray) -> None:
        self._fresh(pos)
        self._check_probs(probs, pos)
        self.given[pos] = _rank_of(probs, self.t.labels[pos])
        self.has_probs = True
        ei, off = self._extras(pos)
        if len(ei):
            self.top1[ei] = np.argmax(probs[off], axis=1)
            self._cross_entropy(probs, ei, off)
        self._rank_suggested(probs, pos, _rank_of)

    def _rank_suggested(
        self,
        scores: np.ndarray,
        pos: slice | np.ndarray,
        rank: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> None:
        """The rank of the suggested label at the chunk's candidate rows, by ``rank`` of the
        chunk's ``scores`` (-1 where a candidate row has no suggested label)."""
        ci, off = self._candidates(pos)
        if len(ci):
            sug = self.t.cand_suggested[ci]
            has = sug >= 0
            r = np.full(len(ci), -1, dtype=self.suggested.dtype)
            r[has] = rank(scores[off[has]], sug[has])
            self.suggested[ci] = r

    def _check_probs(self, probs: np.ndarray, pos: slice | np.ndarray) -> None:
        """Refuse rows with NaN, infinite or negative values (logits are not probabilities: a
        ranking of them would be scored, but the cross-entropy would not mean anything)."""
        for bad_rows, why, fix in (
            (~np.isfinite(probs).all(axis=1), "NaN or infinite", "finite"),
            ((probs < 0).any(axis=1), "negative", "non-negative (softmax logits first)"),
        ):
            if bad_rows.any():
                bad = np.flatnonzero(bad_rows)
                at = np.arange(pos.start, pos.stop)[bad] if isinstance(pos, slice) else pos[bad]
                raise PredictionsError(
                    f"{describe(self.source)} has {len(bad)} rows with {why} probabilities, "
                    f"first rows {at[:5].tolist()}; give {fix} probabilities"
                )


def count_within(ranks: np.ndarray, k: int) -> int:
    """How many ranks are in the top ``k`` (0 <= rank < k; -1, not predicted, is not)."""
    # Seen as unsigned, "not predicted" (-1) is the largest value: one comparison, not two.
    flat = ranks.view(ranks.dtype.str.replace("i", "u"))
    return sum(int(np.count_nonzero(flat[a : a + _PASS] < k)) for a in range(0, len(flat), _PASS))


def unranked(ranks: np.ndarray) -> np.ndarray:
    """The rows a model predicted nothing for (rank -1), sorted."""
    parts = [np.flatnonzero(ranks[a : a + _PASS] < 0) + a for a in range(0, len(ranks), _PASS)]
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def right_bits(ranks: np.ndarray) -> np.ndarray:
    """Whether each row's rank is 0 (the model's top-1 is the label), packed 8 rows a byte
    (``np.packbits``)."""
    out = np.empty((len(ranks) + 7) // 8, dtype=np.uint8)
    for a in range(0, len(ranks), _PASS):
        out[a // 8 : (a + _PASS + 7) // 8] = np.packbits(ranks[a : a + _PASS] == 0)
    return out


def _position(pred: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Where ``label`` stands in each row of the top-m ``pred`` (0: first), m where absent."""
    hit = pred == label[:, None]
    return np.asarray(np.where(hit.any(axis=1), hit.argmax(axis=1), pred.shape[1]))


def _rank_of(probs: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Where ``label`` ranks in each row of ``probs`` when classes are sorted by descending
    probability, ties broken by class index (as ``argmax`` does): 0 is the top-1."""
    m, k = probs.shape
    mine = probs[np.arange(m), label][:, None]
    higher = np.count_nonzero(probs > mine, axis=1)
    ties_before = np.count_nonzero((probs == mine) & (np.arange(k) < label[:, None]), axis=1)
    return np.asarray(higher + ties_before)


def _dups(rows: np.ndarray) -> np.ndarray:
    """The rows that occur more than once, sorted (a sort, not a hash: fast on millions)."""
    s = np.sort(rows)
    d = s[1:][s[1:] == s[:-1]]
    return np.asarray(d[np.r_[True, d[1:] != d[:-1]]]) if len(d) else d


def describe(source: PredictionsSource) -> str:
    """How messages name one model's predictions: the model and the file, if any."""
    where = f" ({source.file})" if source.file else ""
    return f"predictions of model {source.model!r}{where}"
