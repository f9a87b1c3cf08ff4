"""Each model's top-1 correctness row by row on every view ``dsreg eval`` scores, counted as
patterns for :func:`dsreg.report.stats.significance.significance`.

A view differs from "every row, given label" only at the rows overlays name, so a model is kept
as one bit per row (its top-1 prediction is the given label) plus, per view, the few rows where
the view serves another label or a label set (their correctness listed). The rows overlays name
are then built one by one, every model and view side by side; every other row is in the same
views on its given label, so it is counted by its models' bits alone (one integer key a row).
Memory stays at a bit per row and model, whatever the number of views.

The statistics' views are the eval views plus ``honeypot_given`` (the honeypot's rows on their
given labels), ``contaminated`` (the rows the decontaminated view leaves out, on their given
labels: what an audit named, scored beside the clean rows as lm-eval-harness reports them) and
``majority`` (the rows with raters' counts, right when the top-1 prediction is the raters'
majority label).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from dsreg.formats.manifests import View
from dsreg.report.human import SetTarget
from dsreg.report.ranks import Ranks
from dsreg.report.stats.significance import Correctness, CorrectnessCounter
from dsreg.views.sparse import SparseView, in_label_sets

__all__ = ["RowScores", "stats_view"]

# Rows built and counted at a time (a multiple of 8: the given bits are unpacked by bytes).
_CHUNK: Final = 1 << 20
# Models whose given bits fit one integer key per row (the fast count of unnamed rows).
_KEY_BITS: Final = 64
# The statistics' views scored on the given labels alone (no view relabels their rows).
_GIVEN_ONLY: Final = ("honeypot_given", "contaminated")


def stats_view(view: View, *, given: bool = False) -> str:
    """The statistics' name of an eval view (``honeypot_given``: the honeypot, given labels)."""
    return "honeypot_given" if given and view == "honeypot" else view


@dataclass(frozen=True, slots=True)
class _Served:
    complement: bool  # every row except ``rows``, or only ``rows``
    rows: np.ndarray  # sorted


def _merged(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows and values of several (rows, values) lists, sorted by row, the later list winning
    where two name a row."""
    rows = np.concatenate([r for r, _ in parts]).astype(np.int64)
    values = np.concatenate([v for _, v in parts]).astype(bool)
    # The last of each row wins: unique on the reversed arrays keeps each row's first.
    rows_r, values_r = rows[::-1], values[::-1]
    keep, first = np.unique(rows_r, return_index=True)
    return keep, values_r[first]


class RowScores:
    """Models' correctness on ``views`` (sparse views of ``n`` snapshot rows), added one model
    at a time (:meth:`add`), then counted (:meth:`correctness`)."""

    def __init__(self, n: int, views: dict[View, SparseView], sets: SetTarget) -> None:
        self.n, self.vws, self.sets = n, views, sets
        self.served: dict[str, _Served] = {}
        for name, vw in views.items():
            if name == "honeypot":  # the given labels first, as the table reads
                self.served["honeypot_given"] = _Served(False, vw.rows)
            self.served[name] = _Served(vw.complement, vw.rows)
            if name == "decontaminated":  # the rows it leaves out, beside it
                self.served["contaminated"] = _Served(False, vw.rows)
        if len(sets.counted):
            self.served["majority"] = _Served(False, sets.rows[sets.counted])
        self.models: list[str] = []
        self._given: list[np.ndarray] = []
        self._special: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []

    def add(self, model: str, ranks: Ranks) -> None:
        """Keep one model: its given-label bits and, per view, the rows scored otherwise."""
        self.models.append(model)
        self._given.append(np.packbits(ranks.given == 0))
        special: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, vw in self.vws.items():
            parts = [(vw.relabel, ranks.suggested[vw.relabel_cand] == 0)]
            if name == "multilabel":
                parts.append((vw.set_rows, self._in_sets(ranks, vw)))
                pair = (ranks.given[vw.pair_rows] == 0) | (ranks.suggested[vw.pair_cand] == 0)
                parts.append((vw.pair_rows, pair))
            special[name] = _merged(parts)
        if "majority" in self.served:
            top1 = ranks.top1[self.sets.counted] if ranks.top1 is not None else None
            right = np.zeros(len(self.sets.counted), bool) if top1 is None else (
                top1 == self.sets.majority
            )  # fmt: skip
            special["majority"] = (self.served["majority"].rows, right)
        self._special.append(special)

    def _in_sets(self, ranks: Ranks, vw: SparseView) -> np.ndarray:
        """Whether each set row's top-1 prediction is in the row's ``labels`` list."""
        if not len(vw.set_rows) or self.sets.lists is None or ranks.top1 is None:
            return np.zeros(len(vw.set_rows), dtype=bool)
        top1 = ranks.top1[np.searchsorted(self.sets.rows, vw.set_rows)]
        return in_label_sets(top1, vw.set_index, self.sets.lists)

    def correctness(self) -> Correctness:
        """Every view's rows counted as patterns: the rows overlays name one by one, every
        other row by its models' given-label bits alone (it is in every view that serves all
        rows but those named, on its given label, and in no other)."""
        counter = CorrectnessCounter(list(self.served), self.models)
        named = self._named()
        if len(named):
            counter.add(self._at(named))
        if len(self.models) <= _KEY_BITS:
            keys, counts = self._plain_patterns(named)
            bits = (keys[:, None] >> np.arange(len(self.models), dtype=np.uint64)) & np.uint64(1)
            counter.add(self._plain(bits.astype(np.int8)), counts)
            return counter.correctness()
        for start in range(0, self.n, _CHUNK):
            rows = np.arange(start, min(self.n, start + _CHUNK), dtype=np.int64)
            counter.add(self._at(rows[~np.isin(rows, named, assume_unique=True)]))
        return counter.correctness()

    def _named(self) -> np.ndarray:
        """Every row some view drops, serves alone, relabels or scores against a label set."""
        parts = [served.rows for served in self.served.values()]
        for vw in self.vws.values():
            parts += [vw.relabel, vw.set_rows, vw.pair_rows]
        return np.unique(np.concatenate(parts).astype(np.int64))

    def _bits(self, rows: np.ndarray) -> np.ndarray:
        """(rows, models) int8: whether each model's top-1 is the given label at ``rows``."""
        out = np.empty((len(rows), len(self.models)), dtype=np.int8)
        byte, shift = rows >> 3, (7 - (rows & 7)).astype(np.uint8)
        for j, bits in enumerate(self._given):
            out[:, j] = (bits[byte] >> shift) & 1
        return out

    def _plain_patterns(self, named: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct given-bit keys (bit j: model j) of the rows no overlay names, and how
        many rows have each."""
        keys, counts = [], []
        for start in range(0, self.n, _CHUNK):
            stop = min(self.n, start + _CHUNK)
            key = np.zeros(stop - start, dtype=np.uint64)
            for j, bits in enumerate(self._given):
                got = np.unpackbits(bits[start // 8 : (stop + 7) // 8])[: stop - start]
                key |= got.astype(np.uint64) << np.uint64(j)
            lo, hi = np.searchsorted(named, [start, stop])
            keep = np.ones(stop - start, dtype=bool)
            keep[named[lo:hi] - start] = False
            k, c = np.unique(key[keep], return_counts=True)
            keys.append(k)
            counts.append(c)
        if not keys:
            return np.empty(0, np.uint64), np.empty(0, np.int64)
        k, inverse = np.unique(np.concatenate(keys), return_inverse=True)
        return k, np.bincount(inverse.ravel(), weights=np.concatenate(counts)).astype(np.int64)

    def _plain(self, given: np.ndarray) -> dict[str, np.ndarray]:
        """The views of rows no overlay names, from their given bits."""
        none = np.full(given.shape, -1, dtype=np.int8)
        return {name: given if s.complement else none for name, s in self.served.items()}

    def _at(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Every view's correctness at ``rows`` (sorted), as ``CorrectnessCounter.add`` takes."""
        given = self._bits(rows)
        out = {}
        for name, served in self.served.items():
            inside = np.isin(rows, served.rows, assume_unique=True)
            member = ~inside if served.complement else inside
            c = given.copy() if name != "majority" else np.zeros_like(given)
            if name not in _GIVEN_ONLY:
                for j, special in enumerate(self._special):
                    at, values = special.get(name, (np.empty(0, np.int64), np.empty(0, bool)))
                    pos = np.minimum(np.searchsorted(rows, at), max(len(rows) - 1, 0))
                    hit = rows[pos] == at if len(rows) else np.zeros(len(at), bool)
                    c[pos[hit], j] = values[hit]
            c[~member] = -1
            out[name] = c
        return out
