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
threshold gets wide exact bands and a large one narrower bands searched with radii. Every band
is at most 16 bits wide (four bands or more), so its table is direct-address: the stored
hashes sorted by the band's value, and an offset per value.

The stored side is indexed in runs of ``CHUNK_ROWS`` rows, so memory stays bounded whatever
its size: a band table takes 12 bytes a row (hash and position) and 8 per band value, and the
stored hashes themselves are read where they lie, in as many arrays as they come in (a
fingerprint table's full-image hashes and its crops' are two). The two loops that do the work,
the table's counting sort and the probes, are compiled (``kernels.py``).

A SQL equi-join (DuckDB) is not used for the probes: a probe is a band value XOR one of up to a
few thousand masks, which a join would first have to materialise as rows (docs/audit.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dsreg._util.lazy import lazy_imports
from dsreg._util.parallel import default_jobs
from dsreg.errors import InvalidInputError

with lazy_imports():
    from dsreg.audit import kernels

__all__ = [
    "CHUNK_ROWS",
    "TABLE_BITS",
    "HammingPairs",
    "Plan",
    "Variants",
    "brute_force_pairs",
    "hamming_pairs",
    "plan_bands",
    "variant_pairs",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

#: The widest band: its table (an offset per band value, 8 bytes each) stays in a CPU's
#: second-level cache, where the join reads it value by value.
TABLE_BITS = 16
#: Stored hashes sorted by a band at once (12 bytes each: the hash and its position): a larger
#: set is sorted and joined in runs of this many rows, so memory stays bounded.
CHUNK_ROWS = 1 << 22
#: Queries filed per band at once (12 bytes each): a query is filed under every band value
#: within its band's radius, so the queries are joined in groups of at most this many filings.
NEIGHBOUR_ROWS = 1 << 23
#: Pairs collected per buffer before it is handed back.
OUT_ROWS = 1 << 20
# Relative cost of filing a query under one band value (a scatter into the neighbour table,
# read back once per run of stored rows) against checking one candidate pair (XOR, population
# count and compare, vectorised, both sides read in sequence): measured on the scale benchmark.
_PROBE_COST = 16.0
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
    table = n_stored + 2**width
    return float(probes * (_PROBE_COST + _CANDIDATE_COST * n_stored / 2.0**width) + table)


def plan_bands(threshold: int, n_queries: int, n_stored: int) -> Plan:
    """The bands and radii with the least expected work for ``threshold`` (see the module)."""
    # Empty sides cost nothing whatever the plan: plan as for one item, not for none (a plan
    # for none would be any plan, even one of millions of probes).
    n_queries, n_stored = max(n_queries, 1), max(n_stored, 1)
    best: Plan | None = None
    # At least four bands: each then at most TABLE_BITS wide.
    for m in range(64 // TABLE_BITS, _MAX_BANDS + 1):
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


def _check(queries: npt.ArrayLike, name: str) -> U64:
    array = np.asarray(queries)
    if array.ndim != 1 or array.dtype != np.uint64:
        raise InvalidInputError(
            f"{name} must be a one-dimensional uint64 array, not {array.dtype} of shape "
            f"{array.shape}: convert it with numpy.asarray(..., dtype=numpy.uint64)"
        )
    return array


def _parts(stored: npt.ArrayLike | Sequence[npt.ArrayLike]) -> list[U64]:
    """The stored hashes as contiguous ``uint64`` arrays, one per part (a part is not copied
    when it is already one)."""
    given: Sequence[Any] = stored if isinstance(stored, (list, tuple)) else [stored]
    return [np.ascontiguousarray(_check(part, "stored hashes")) for part in given]


def _chunks(parts: list[U64]) -> Iterator[tuple[U64, int]]:
    """The parts' rows, as if concatenated, in runs of ``CHUNK_ROWS`` (the last one shorter),
    each with the position of its first row. A run within one part is that part's memory; one
    that spans parts (small parts, as a list column's chunks can be) is copied into a buffer."""
    starts = np.cumsum([0, *(len(p) for p in parts)])
    total = int(starts[-1])
    buffer = np.empty(0, dtype=np.uint64)
    for at in range(0, total, CHUNK_ROWS):
        end = min(at + CHUNK_ROWS, total)
        k = int(np.searchsorted(starts, at, side="right")) - 1
        if end <= starts[k + 1]:
            yield parts[k][at - starts[k] : end - starts[k]], at
            continue
        if len(buffer) < end - at:
            buffer = np.empty(end - at, dtype=np.uint64)
        filled = 0
        while at + filled < end:
            k = int(np.searchsorted(starts, at + filled, side="right")) - 1
            piece = parts[k][at + filled - starts[k] : end - starts[k]]
            buffer[filled : filled + len(piece)] = piece
            filled += len(piece)
        yield buffer[:filled], at


class _Band(NamedTuple):
    """A searched band: its bits, its radius and the probe masks of that radius."""

    start: int
    width: int
    radius: int
    masks: I64


def _bands(plan: Plan) -> list[_Band]:
    return [
        _Band(start, width, radius, _masks(width, radius))
        for (start, width), radius in zip(plan.bands, plan.radii, strict=True)
        if radius >= 0
    ]


def hamming_pairs(
    queries: npt.ArrayLike,
    stored: npt.ArrayLike | Sequence[npt.ArrayLike],
    threshold: int,
    *,
    plan: Plan | None = None,
) -> HammingPairs:
    """Every ``(i, j)`` with ``bit_count(queries[i] ^ stored[j]) <= threshold``, each once.

    ``stored`` is one array, or a list of arrays read as their concatenation (``j`` counts
    across them), so hashes held in several columns need not be copied into one."""
    q, parts = _check(queries, "queries"), _parts(stored)
    if not 0 <= threshold <= 64:
        raise InvalidInputError(f"threshold {threshold} is not a Hamming distance: use 0 to 64")
    n_stored = sum(len(p) for p in parts)
    if not len(q) or not n_stored:
        return _sorted_pairs([])
    plan = plan or plan_bands(threshold, len(q), n_stored)
    if any(w > TABLE_BITS for (_, w), r in zip(plan.bands, plan.radii, strict=True) if r >= 0):
        raise InvalidInputError(
            f"a searched band of the plan is wider than {TABLE_BITS} bits: use more bands"
        )
    bands = _bands(plan)
    step = max(1, NEIGHBOUR_ROWS // max(len(b.masks) for b in bands))
    found: list[tuple[I64, I64, npt.NDArray[np.uint8]]] = []
    for at in range(0, len(q), step):
        found += _join(q[at : at + step], at, parts, bands, threshold)
    return _sorted_pairs(found)


def _join(
    q: U64, q_base: int, parts: list[U64], bands: list[_Band], threshold: int
) -> Iterator[tuple[I64, I64, npt.NDArray[np.uint8]]]:
    """The pairs of the queries ``q`` (rows from ``q_base``), band by band: the queries filed
    under the band values they probe, then every run of stored rows sorted by its band value
    and joined with them, value by value."""
    rows = min(sum(len(p) for p in parts), CHUNK_ROWS)
    perm_hash, perm_idx = np.empty(rows, dtype=np.uint64), np.empty(rows, dtype=np.int32)
    for i, band in enumerate(bands):
        values = 1 << band.width
        nb_off, st_off = np.empty(values + 1, dtype=np.int64), np.empty(values + 1, np.int64)
        filed = len(q) * len(band.masks)
        nb_hash, nb_row = np.empty(filed, dtype=np.uint64), np.empty(filed, dtype=np.int32)
        kernels.neighbour_table(
            q, _band(q, band.start, band.width), band.masks, nb_off, nb_hash, nb_row
        )
        earlier = np.array(
            [[b.start, (1 << b.width) - 1, b.radius] for b in bands[:i]], dtype=np.int64
        ).reshape(-1, 3)
        for chunk, base in _chunks(parts):
            kernels.band_table(chunk, band.start, band.width, st_off, perm_hash, perm_idx)
            tables = ((nb_off, nb_hash, nb_row, q_base), (st_off, perm_hash, perm_idx, base))
            yield from _collect(tables, values, threshold, earlier)


def _collect(
    tables: tuple[tuple[Any, ...], tuple[Any, ...]], values: int, threshold: int, earlier: I64
) -> list[tuple[I64, I64, npt.NDArray[np.uint8]]]:
    """The pairs of one band and one run of stored rows, its band values shared out among
    threads (the kernel releases the GIL)."""
    jobs = min(default_jobs(), max(1, len(tables[1][1]) >> 16))
    cuts = [values * k // jobs for k in range(jobs + 1)]
    spans = list(itertools.pairwise(cuts))
    if jobs == 1:
        return _pairs_of(tables, spans[0], threshold, earlier)
    with ThreadPoolExecutor(jobs) as pool:
        parts = pool.map(lambda span: _pairs_of(tables, span, threshold, earlier), spans)
        return [found for part in parts for found in part]


def _pairs_of(
    tables: tuple[tuple[Any, ...], tuple[Any, ...]],
    span: tuple[int, int],
    threshold: int,
    earlier: I64,
) -> list[tuple[I64, I64, npt.NDArray[np.uint8]]]:
    """The pairs of the band values ``span``, in buffers of ``OUT_ROWS`` pairs (larger when
    one band value alone yields more)."""
    found = []
    size, (first, end) = OUT_ROWS, span
    while first < end:
        out = (
            np.empty(size, dtype=np.int64),
            np.empty(size, dtype=np.int64),
            np.empty(size, dtype=np.uint64),
        )
        n, after = kernels.join_band(
            *tables, np.array([first, end], dtype=np.int64), threshold, earlier, out
        )
        if n == 0 and after == first:
            size *= 4
            continue
        found.append((out[0][:n].copy(), out[1][:n].copy(), out[2][:n].astype(np.uint8)))
        first = after
    return found


class Variants(NamedTuple):
    """Hashes of items that each have several (an image's and its crops'): item
    ``first_item + i`` holds ``hashes[offsets[i] : offsets[i + 1]]``."""

    hashes: U64
    offsets: I64
    first_item: int


def variant_pairs(
    queries: npt.ArrayLike, parts: Sequence[Variants], threshold: int
) -> HammingPairs:
    """Every ``(i, item)`` with some hash of ``item`` within ``threshold`` of ``queries[i]``,
    once, at the distance of its nearest hash. Items may have hashes in several parts (an
    image's full hash in one, its crops' in another); no part is copied."""
    found = hamming_pairs(queries, [p.hashes for p in parts], threshold)
    starts = np.cumsum([0, *(len(p.hashes) for p in parts)])
    part = np.searchsorted(starts, found.stored, side="right") - 1
    item = np.empty(len(found.stored), dtype=np.int64)
    for k, p in enumerate(parts):
        here = part == k
        at = found.stored[here] - starts[k]
        item[here] = p.first_item + np.searchsorted(p.offsets, at, side="right") - 1
    order = np.lexsort((found.distance, item, found.query))
    qi, item, dist = found.query[order], item[order], found.distance[order]
    first = np.ones(len(qi), dtype=bool)
    first[1:] = (qi[1:] != qi[:-1]) | (item[1:] != item[:-1])
    return HammingPairs(qi[first], item[first], dist[first])


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
