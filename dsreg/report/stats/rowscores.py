"""Each model's top-1 correctness row by row on every view ``dsreg eval`` scores, counted as
patterns for :func:`dsreg.report.stats.significance.significance`.

A view differs from "every row, given label" only at the rows overlays name, so a model is kept
as one bit per row (its top-1 prediction is the given label) plus, per view, the few rows where
the view serves another label or a label set (their correctness listed). The rows overlays name
are then built one by one, every model and view side by side; every other row is in the same
views on its given label, so it is counted by its models' bits alone: for a few models by
population counts of the packed bits, without a value per row. Both run a chunk of rows at a
time, a row's membership of a view looked up in a chunk-sized mask, so the work is linear in the
rows. Memory stays at a bit per row and model, whatever the number of views.

The statistics' views are the eval views plus ``honeypot_given`` (the honeypot's rows on their
given labels), ``contaminated`` (the rows the decontaminated view leaves out, on their given
labels: what an audit named, scored beside the clean rows as lm-eval-harness reports them) and
``majority`` (the rows with raters' counts, right when the top-1 prediction is the raters'
majority label).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import numpy as np

from dsreg._util.parallel import default_jobs
from dsreg.formats.manifests import View
from dsreg.report.human import SetTarget
from dsreg.report.ranks import Ranks, right_bits
from dsreg.report.stats.counts import Correctness, CorrectnessCounter, ViewFlags
from dsreg.views.sparse import SparseView, in_label_sets

__all__ = ["RowScores", "stats_view"]

# Rows built and counted at a time (a multiple of 8: the given bits are sliced by bytes).
_CHUNK: Final = 1 << 20
# Models whose given bits fit one integer key per row (the fast count of unnamed rows).
_KEY_BITS: Final = 64
# Up to this many models, the unnamed rows are counted by population counts of their packed
# bits (2**models - 1 ANDs over n / 8 bytes: the cheapest count while that is small)...
_POPCOUNT_MODELS: Final = 4
# ... up to this many, by a bincount of one key a row (2**models counters), else by sorting.
_COUNT_BITS: Final = 16
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
    if len(parts) == 1 or all(not len(r) for r, _ in parts[1:]):
        return parts[0][0].astype(np.int64, copy=False), parts[0][1].astype(bool, copy=False)
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
        self._given.append(right_bits(ranks.given))
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
        """Every view's rows counted as patterns, a chunk of rows at a time: the rows overlays
        name built one by one, every other row counted by its models' given-label bits alone (it
        is in every view that serves all rows but those named, on its given label, and in no
        other). With more models than a key holds, every row is built one by one. The chunks
        are shared among threads (numpy works on them without the GIL), each counting its
        own; the counts are added up at the end, the same in any order."""
        every = len(self.models) > _KEY_BITS
        starts = list(range(0, self.n, _CHUNK))
        threads = max(1, min(default_jobs(), len(starts)))
        if threads == 1:
            counted = [self._count(starts, every)]
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                counted = list(pool.map(self._count, [starts[t::threads] for t in range(threads)],
                                        [every] * threads))  # fmt: skip
        counter, plain = counted[0]
        for more, more_plain in counted[1:]:
            counter.update(more)
            plain.update(more_plain)
        if not every:
            keys, counts = plain.result()
            bits = (keys[:, None] >> np.arange(len(self.models), dtype=np.uint64)) & np.uint64(1)
            counter.add_views(self._plain(bits.astype(bool)), counts)
        return counter.correctness()

    def _count(self, starts: list[int], every: bool) -> tuple[CorrectnessCounter, _PlainKeys]:
        """The chunks from ``starts`` counted: the rows built one by one (every row, with
        ``every``, else the named ones) and the other rows' keys."""
        counter = CorrectnessCounter(list(self.served), self.models)
        plain = _PlainKeys(len(self.models))
        parts = self._parts()
        size = min(self.n, _CHUNK)
        mark, index = np.zeros(size, dtype=bool), np.empty(size, dtype=np.int32)
        for start in starts:
            stop = min(self.n, start + _CHUNK)
            if every:
                rows = np.arange(start, stop, dtype=np.int64)
            else:
                named = mark[: stop - start]
                for part in parts:
                    named[_within(part, start, stop) - start] = True
                rows = np.flatnonzero(named) + start
                chunk = [bits[start // 8 : (stop + 7) // 8] for bits in self._given]
                plain.add(chunk, named, len(rows))
                named[:] = False
            if len(rows):
                counter.add_views(self._at(rows, start, stop, mark, index))
        return counter, plain

    def _parts(self) -> list[np.ndarray]:
        """The sorted rows some view drops, serves alone, relabels or scores against a label
        set (the named rows are their union), each array once."""
        parts: dict[int, np.ndarray] = {}
        for served in self.served.values():
            parts[id(served.rows)] = served.rows
        for vw in self.vws.values():
            for rows in (vw.relabel, vw.set_rows, vw.pair_rows):
                parts[id(rows)] = rows
        return [p for p in parts.values() if len(p)]

    def _bits(self, rows: np.ndarray) -> np.ndarray:
        """(rows, models) bool: whether each model's top-1 is the given label at ``rows``."""
        out = np.empty((len(rows), len(self.models)), dtype=np.uint8)
        byte, shift = rows >> 3, (7 - (rows & 7)).astype(np.uint8)
        for j, bits in enumerate(self._given):
            out[:, j] = (bits[byte] >> shift) & 1
        return out.view(bool)

    def _plain(self, given: np.ndarray) -> ViewFlags:
        """The views of rows no overlay names, from their given bits: served by every view
        that serves all rows but some, on the given label, and by no other."""
        every, none = np.ones(len(given), dtype=bool), np.zeros(len(given), dtype=bool)
        served = {name: every if s.complement else none for name, s in self.served.items()}
        return ViewFlags(served=served, right=dict.fromkeys(self.served, given))

    def _at(
        self, rows: np.ndarray, start: int, stop: int, mark: np.ndarray, index: np.ndarray
    ) -> ViewFlags:
        """Every view at ``rows`` (sorted, in ``[start, stop)``, holding every named row
        there). ``mark`` (all False, left so) and ``index`` are scratch arrays of a chunk's
        length: a row's membership and position are looked up by its offset in the chunk,
        not searched for."""
        given = self._bits(rows)
        offset = rows - start
        index[offset] = np.arange(len(rows))
        out = ViewFlags(served={}, right={})
        for name, served in self.served.items():
            inside = _within(served.rows, start, stop) - start
            mark[inside] = True
            member = mark[offset]
            mark[inside] = False
            out.served[name] = ~member if served.complement else member
            right = given if name != "majority" else np.zeros_like(given)
            if name not in _GIVEN_ONLY:
                for j, special in enumerate(self._special):
                    at, values = special.get(name, (np.empty(0, np.int64), np.empty(0, bool)))
                    lo, hi = np.searchsorted(at, [start, stop])
                    if hi > lo:
                        right = right.copy() if right is given else right
                        right[index[at[lo:hi] - start], j] = values[lo:hi]
            out.right[name] = right
        return out


def _within(rows: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The part of sorted ``rows`` in ``[start, stop)``."""
    lo, hi = np.searchsorted(rows, [start, stop])
    return rows[lo:hi]


class _PlainKeys:
    """How many rows no overlay names have each given-bit key (bit j: model j right on the
    given label), counted chunk by chunk from the models' packed bits and the chunk's named
    rows. The count is linear in the rows with a constant that depends on the models: up to
    ``_POPCOUNT_MODELS``, population counts of the packed bits (no per-row key at all); up to
    ``_COUNT_BITS``, a ``bincount`` of each row's key; above, the keys sorted."""

    def __init__(self, models: int) -> None:
        self.models = models
        self._dense = np.zeros(1 << models if models <= _COUNT_BITS else 0, dtype=np.int64)
        self._keys: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []

    def add(self, bits: list[np.ndarray], named: np.ndarray, named_rows: int) -> None:
        """One chunk: each model's packed given bits over it (``len(named)`` rows, starting
        at a byte), and which of its rows are named (``named_rows`` of them)."""
        n = len(named)
        if named_rows:
            free = ~np.packbits(named)
            bits = [b & free for b in bits]  # a named row counts as key 0, taken out below
        if self.models <= _POPCOUNT_MODELS:
            self._dense += _exact_counts(_superset_counts(bits, n - named_rows))
            return
        key = _row_keys(bits, n)
        if self.models <= _COUNT_BITS:
            counted = np.bincount(key, minlength=len(self._dense))
            counted[0] -= named_rows
            self._dense += counted
            return
        k, c = np.unique(key, return_counts=True)
        if named_rows:
            c[0] -= named_rows  # key 0 sorts first; the named rows made it present
        self._keys.append(k)
        self._counts.append(c)

    def update(self, other: _PlainKeys) -> None:
        """Add the counts of another counter (of the same models)."""
        self._dense += other._dense
        self._keys += other._keys
        self._counts += other._counts

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct keys (sorted, uint64) and how many rows have each."""
        if self.models <= _COUNT_BITS:
            keys = np.flatnonzero(self._dense)
            return keys.astype(np.uint64), self._dense[keys]
        if not self._keys:
            return np.empty(0, np.uint64), np.empty(0, np.int64)
        k, inverse = np.unique(np.concatenate(self._keys), return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=np.concatenate(self._counts))
        keep = counts > 0
        return k[keep], counts[keep].astype(np.int64)


def _superset_counts(bits: list[np.ndarray], rows: int) -> np.ndarray:
    """``at[s]``: how many of ``rows`` rows have bit j set for every j in the set ``s`` (a
    bitmask), from population counts of the packed bits ANDed together (``at[0]`` = rows)."""
    at = np.zeros(1 << len(bits), dtype=np.int64)
    at[0] = rows
    todo: list[tuple[int, np.ndarray | None, int]] = [(0, None, 0)]
    while todo:
        s, both, first = todo.pop()
        for j in range(first, len(bits)):
            more = bits[j] if both is None else both & bits[j]
            at[s | 1 << j] = int(np.bitwise_count(more).sum())
            todo.append((s | 1 << j, more, j + 1))
    return at


def _exact_counts(at: np.ndarray) -> np.ndarray:
    """From superset counts (rows with at least the bits of s) the exact counts (rows with
    exactly the bits of s): the Moebius inversion over the subsets, one bit at a time."""
    out = at.copy()
    s = np.arange(len(at))
    for j in range(len(at).bit_length() - 1):
        low = s[((s >> j) & 1) == 0]
        out[low] -= out[low | 1 << j]
    return out


def _row_keys(bits: list[np.ndarray], n: int) -> np.ndarray:
    """Each of ``n`` rows' key (bit j: its bit in ``bits[j]``), in the narrowest unsigned
    type that holds them."""
    dtype = np.dtype(np.uint16 if len(bits) <= _COUNT_BITS else np.uint64)
    key = np.zeros(n, dtype=dtype)
    for j, b in enumerate(bits):
        key |= np.unpackbits(b, count=n).astype(dtype) << dtype.type(j)
    return key
