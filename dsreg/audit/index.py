"""Every pair of 64-bit hashes within a Hamming distance, none missed: multi-index hashing.

The 64 bits are cut into ``m`` bands of contiguous bits, and band ``i`` is searched within a
radius ``r_i`` (``-1``: not searched). If ``d(q, s) <= t`` and ``sum(r_i + 1) >= t + 1``, some
searched band differs in at most ``r_i`` bits (otherwise the bands' distances would add up
to at least ``t + 1``), so probing each query's band value XOR every mask of at most ``r_i``
bits finds every pair: the pigeonhole principle, with ``m = t + 1`` and all radii 0 as its
plainest case. Each candidate's full distance (``bitwise_count`` of the XOR) is then checked,
and a pair found in several bands is kept only from the first band where it lies within the
radius, so no pair is reported twice.

A band of ``b`` bits over ``N`` stored uniform hashes yields about ``N / 2**b`` candidates per
probe, and there are ``sum(C(b, k), k <= r)`` probes per query: ``plan_bands`` picks ``m`` and
the radii that minimise the expected probes and candidates (``Plan.cost``), so a small
threshold gets wide exact bands and a large one narrower bands searched with radii. Each band's
lookup table is built once: for bands up to ``TABLE_BITS`` bits a direct-address table (a
count per band value, summed), wider ones a sorted array searched by bisection.

numpy, not DuckDB, does the band join: a probe is a band value XOR one of up to a few hundred
masks, which a SQL equi-join would first have to materialise (docs/audit.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dsreg.errors import InvalidInputError

__all__ = [
    "CANDIDATE_BUDGET",
    "TABLE_BITS",
    "HammingPairs",
    "Plan",
    "brute_force_pairs",
    "hamming_pairs",
    "plan_bands",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

#: Bands up to this many bits get a direct-address table (``2**b + 1`` offsets, 4 bytes each).
TABLE_BITS = 24
#: Candidates checked at once: bounds the temporaries (about 40 bytes a candidate).
CANDIDATE_BUDGET = 1 << 22
# Relative cost of one probe (a table lookup) against one candidate (gather, XOR, count, test).
_PROBE_COST = 1.0
_CANDIDATE_COST = 1.0
_MAX_BANDS = 16


class HammingPairs(NamedTuple):
    """Pairs within the threshold, sorted by query then stored index."""

    query: I64
    stored: I64
    distance: npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class Plan:
    """Bands as ``(first bit, width)`` from the least significant bit, a radius per band
    (``-1``: the band is not searched), and the expected work for uniform hashes."""

    bands: tuple[tuple[int, int], ...]
    radii: tuple[int, ...]
    cost: float

    def probes_per_query(self) -> int:
        return sum(_ball(w, r) for (_, w), r in zip(self.bands, self.radii, strict=True))

    def expected_candidates(self, n_queries: int, n_stored: int) -> float:
        return n_queries * sum(
            _ball(w, r) * n_stored / 2.0**w
            for (_, w), r in zip(self.bands, self.radii, strict=True)
        )


def _ball(width: int, radius: int) -> int:
    """Masks of at most ``radius`` set bits within ``width`` bits."""
    return sum(math.comb(width, k) for k in range(radius + 1))


def _split(m: int) -> tuple[tuple[int, int], ...]:
    widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
    starts = np.cumsum([0, *widths[:-1]])
    return tuple((int(s), w) for s, w in zip(starts, widths, strict=True))


def _band_cost(width: int, radius: int, n_queries: int, n_stored: int) -> float:
    if radius < 0:
        return 0.0
    probes = n_queries * _ball(width, radius)
    table = n_stored + (2**width if width <= TABLE_BITS else n_stored * 20)
    return probes * (_PROBE_COST + _CANDIDATE_COST * n_stored / 2.0**width) + table


def plan_bands(threshold: int, n_queries: int, n_stored: int) -> Plan:
    """The bands and radii with the least expected work for ``threshold`` (see the module)."""
    # Empty sides cost nothing whatever the plan: plan as for one item, not for none (a plan
    # for none would be any plan, even one of millions of probes).
    n_queries, n_stored = max(n_queries, 1), max(n_stored, 1)
    best: Plan | None = None
    # At least two bands: a band value must fit an int64 (and one 64-bit band is brute force).
    for m in range(2, _MAX_BANDS + 1):
        bands = _split(m)
        radii = [-1] * m
        # Greedy: t + 1 radius steps, each to the band it costs least to widen.
        for _ in range(threshold + 1):
            steps = [
                _band_cost(w, radii[i] + 1, n_queries, n_stored)
                - _band_cost(w, radii[i], n_queries, n_stored)
                for i, (_, w) in enumerate(bands)
            ]
            radii[int(np.argmin(steps))] += 1
        cost = sum(
            _band_cost(w, r, n_queries, n_stored) for (_, w), r in zip(bands, radii, strict=True)
        )
        if best is None or cost < best.cost:
            best = Plan(bands=bands, radii=tuple(radii), cost=cost)
    assert best is not None
    return best


def _masks(width: int, radius: int) -> I64:
    out = [0]
    for k in range(1, radius + 1):
        out.extend(sum(1 << b for b in bits) for bits in itertools.combinations(range(width), k))
    return np.array(out, dtype=np.int64)


def _band(hashes: U64, start: int, width: int) -> I64:
    return ((hashes >> np.uint64(start)) & np.uint64((1 << width) - 1)).astype(np.int64)


class _BandTable:
    """The stored hashes' values in one band: for any probe value, the range of ``order``
    holding the stored indices with that value."""

    def __init__(self, values: I64, width: int) -> None:
        # Positions in 32 bits where they fit: half the memory, and half the cache lines the
        # random lookups of the probes touch.
        index = np.int32 if len(values) < 2**31 else np.int64
        self.order = np.argsort(values, kind="stable").astype(index)
        self.direct = width <= TABLE_BITS
        if self.direct:
            counts = np.bincount(values, minlength=1 << width)
            self.offsets = np.zeros(len(counts) + 1, dtype=index)
            np.cumsum(counts, out=self.offsets[1:])
        else:
            self.sorted = values[self.order]

    def ranges(self, probes: I64) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """Per probe, the first and the end position in ``order`` (int32 or int64)."""
        if self.direct:
            return self.offsets[probes], self.offsets[probes + 1]
        left = np.searchsorted(self.sorted, probes, side="left").astype(np.int64)
        right = np.searchsorted(self.sorted, probes, side="right").astype(np.int64)
        return left, right


def _check(queries: npt.ArrayLike, name: str) -> U64:
    array = np.asarray(queries)
    if array.ndim != 1 or array.dtype != np.uint64:
        raise InvalidInputError(
            f"{name} must be a one-dimensional uint64 array, not {array.dtype} of shape "
            f"{array.shape}: convert it with numpy.asarray(..., dtype=numpy.uint64)"
        )
    return array


def _expand(starts: I64, counts: I64) -> I64:
    """``concatenate([arange(a, a + c) for a, c in zip(starts, counts)])`` without the loop."""
    total = int(counts.sum())
    first = np.cumsum(counts) - counts
    return np.repeat(starts - first, counts) + np.arange(total, dtype=np.int64)


def _row_chunks(counts: I64, budget: int) -> Iterator[slice]:
    """Consecutive row slices whose counts add up to about ``budget`` (at least one row)."""
    ends = np.cumsum(counts)
    start = 0
    while start < len(ends):
        before = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + budget, side="right")))
        yield slice(start, stop)
        start = stop


def hamming_pairs(
    queries: npt.ArrayLike,
    stored: npt.ArrayLike,
    threshold: int,
    *,
    plan: Plan | None = None,
) -> HammingPairs:
    """Every ``(i, j)`` with ``bit_count(queries[i] ^ stored[j]) <= threshold``, each once."""
    q, s = _check(queries, "queries"), _check(stored, "stored hashes")
    if not 0 <= threshold <= 64:
        raise InvalidInputError(f"threshold {threshold} is not a Hamming distance: use 0 to 64")
    if not len(q) or not len(s):
        return _sorted_pairs([])
    plan = plan or plan_bands(threshold, len(q), len(s))
    if any(w > 63 for _, w in plan.bands):
        raise InvalidInputError("a band of the plan is wider than 63 bits: use two bands or more")
    found: list[tuple[I64, I64, npt.NDArray[np.uint8]]] = []
    searched = [(b, r) for b, r in zip(plan.bands, plan.radii, strict=True) if r >= 0]
    earlier: list[tuple[tuple[int, int], int]] = []
    for (start, width), radius in searched:
        table = _BandTable(_band(s, start, width), width)
        masks = _masks(width, radius)
        q_band = _band(q, start, width)
        for rows in _row_chunks(np.full(len(q), len(masks)), CANDIDATE_BUDGET // 4):
            found.extend(_probe(q, s, rows, q_band, masks, table, threshold, earlier))
        earlier.append(((start, width), radius))
    return _sorted_pairs(found)


def _probe(
    q: U64,
    s: U64,
    rows: slice,
    q_band: I64,
    masks: I64,
    table: _BandTable,
    threshold: int,
    earlier: list[tuple[tuple[int, int], int]],
) -> Iterator[tuple[I64, I64, npt.NDArray[np.uint8]]]:
    """The pairs of the queries in ``rows`` found through one band, not found in an earlier one."""
    probes = (q_band[rows, None] ^ masks[None, :]).ravel()
    owners = np.repeat(np.arange(rows.start, rows.stop, dtype=np.int64), len(masks))
    lo, hi = table.ranges(probes)
    hit = hi > lo
    starts, counts = lo[hit].astype(np.int64), (hi[hit] - lo[hit]).astype(np.int64)
    owners = owners[hit]
    for part in _row_chunks(counts, CANDIDATE_BUDGET):
        c = counts[part]
        qi = np.repeat(owners[part], c)
        sj = table.order[_expand(starts[part], c)].astype(np.int64)
        xor = q[qi] ^ s[sj]
        distance = np.bitwise_count(xor)
        keep = distance <= threshold
        for (start, width), radius in earlier:
            keep &= np.bitwise_count(_band(xor, start, width)) > radius
        yield qi[keep], sj[keep], distance[keep].astype(np.uint8)


def _sorted_pairs(found: list[tuple[I64, I64, npt.NDArray[np.uint8]]]) -> HammingPairs:
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return HammingPairs(empty, empty.copy(), np.zeros(0, dtype=np.uint8))
    qi = np.concatenate([f[0] for f in found])
    sj = np.concatenate([f[1] for f in found])
    dist = np.concatenate([f[2] for f in found])
    order = np.lexsort((sj, qi))
    return HammingPairs(qi[order], sj[order], dist[order])


def brute_force_pairs(
    queries: npt.ArrayLike, stored: npt.ArrayLike, threshold: int
) -> HammingPairs:
    """The same pairs by comparing every query with every stored hash (the reference)."""
    q, s = _check(queries, "queries"), _check(stored, "stored hashes")
    found = []
    step = max(1, (1 << 24) // max(1, len(s)))
    for start in range(0, len(q), step):
        block = np.bitwise_count(q[start : start + step, None] ^ s[None, :])
        qi, sj = np.nonzero(block <= threshold)
        found.append(
            (qi.astype(np.int64) + start, sj.astype(np.int64), block[qi, sj].astype(np.uint8))
        )
    return _sorted_pairs(found)
