"""The Hamming index finds exactly the pairs brute force finds: none missed, none twice."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.audit import index
from dsreg.audit.index import (
    Plan,
    Variants,
    brute_force_pairs,
    hamming_pairs,
    plan_bands,
    variant_pairs,
)
from dsreg.errors import InvalidInputError


def _near(rng: np.random.Generator, base: np.ndarray, n: int, max_flips: int) -> np.ndarray:
    """``n`` hashes: copies of random members of ``base`` with up to ``max_flips`` bits flipped,
    half of them; the other half uniform."""
    picked = base[rng.integers(0, len(base), size=n)].copy()
    for _ in range(max_flips):
        flip = rng.random(n) < 0.5
        bits = rng.integers(0, 64, size=int(flip.sum())).astype(np.uint64)
        picked[flip] ^= np.uint64(1) << bits
    fresh = rng.random(n) < 0.5
    picked[fresh] = rng.integers(0, 2**64, size=int(fresh.sum()), dtype=np.uint64)
    return picked


def _same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_stored=st.integers(0, 400),
    n_queries=st.integers(0, 300),
    threshold=st.integers(0, 24),
    max_flips=st.integers(0, 24),
)
def test_index_equals_brute_force(
    seed: int, n_stored: int, n_queries: int, threshold: int, max_flips: int
) -> None:
    rng = np.random.default_rng(seed)
    stored = rng.integers(0, 2**64, size=n_stored, dtype=np.uint64)
    if n_stored:
        # Repeated hashes too: equal images have equal hashes.
        stored[rng.random(n_stored) < 0.1] = stored[0]
    queries = _near(rng, stored, n_queries, max_flips) if n_stored else stored[:0]
    got = hamming_pairs(queries, stored, threshold)
    assert _same(got, brute_force_pairs(queries, stored, threshold))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    threshold=st.integers(0, 16),
    n_queries=st.integers(1, 5000),
    n_stored=st.integers(1, 10**7),
)
def test_every_plan_covers_its_threshold(
    seed: int, threshold: int, n_queries: int, n_stored: int
) -> None:
    """Whatever the sizes, the plan's radii add up to the threshold: the pigeonhole bound."""
    plan = plan_bands(threshold, n_queries, n_stored)
    assert sum(r + 1 for r in plan.radii if r >= 0) >= threshold + 1
    assert sum(w for _, w in plan.bands) == 64
    rng = np.random.default_rng(seed)
    stored = rng.integers(0, 2**64, size=300, dtype=np.uint64)
    queries = _near(rng, stored, 200, threshold + 2)
    got = hamming_pairs(queries, stored, threshold, plan=plan)
    assert _same(got, brute_force_pairs(queries, stored, threshold))


def test_the_plainest_plan_threshold_plus_one_exact_bands() -> None:
    """``threshold + 1`` bands, each joined on equality (radius 0), as multi-index hashing is
    usually described: still exact."""
    rng = np.random.default_rng(3)
    stored = rng.integers(0, 2**64, size=3000, dtype=np.uint64)
    queries = _near(rng, stored, 3000, 10)
    for t in (3, 8, 10):
        width = [64 // (t + 1) + (i < 64 % (t + 1)) for i in range(t + 1)]
        starts = np.cumsum([0, *width[:-1]])
        bands = Plan(
            bands=tuple((int(s), w) for s, w in zip(starts, width, strict=True)),
            radii=(0,) * (t + 1),
            cost=0.0,
        )
        got = hamming_pairs(queries, stored, t, plan=bands)
        assert _same(got, brute_force_pairs(queries, stored, t))
        assert len(got.query) > 0


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [10, 16])
def test_no_pair_missed_on_20000_by_20000(threshold: int) -> None:
    rng = np.random.default_rng(threshold)
    stored = rng.integers(0, 2**64, size=20_000, dtype=np.uint64)
    queries = _near(rng, stored, 20_000, threshold + 4)
    start = time.perf_counter()
    got = hamming_pairs(queries, stored, threshold)
    indexed = time.perf_counter() - start
    want = brute_force_pairs(queries, stored, threshold)
    assert len(want.query) > 5_000
    assert _same(got, want)
    assert indexed < 60


@pytest.mark.parametrize(
    ("queries", "threshold", "message"),
    [
        (np.zeros(3, dtype=np.int64), 4, "queries must be a one-dimensional uint64 array"),
        (np.zeros(3, dtype=np.uint64), 65, "threshold 65 is not a Hamming distance: use 0 to 64"),
        (np.zeros(3, dtype=np.uint64), -1, "threshold -1 is not a Hamming distance"),
    ],
)
def test_bad_input_is_refused(queries: np.ndarray, threshold: int, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        hamming_pairs(queries, np.zeros(2, dtype=np.uint64), threshold)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6),
    chunk=st.integers(1, 700),
    threshold=st.integers(0, 16),
)
def test_stored_hashes_in_parts_and_runs_are_one_array(
    seed: int, sizes: list[int], chunk: int, threshold: int
) -> None:
    """Stored hashes given as several arrays, indexed in runs that start and end anywhere
    (within a part or across parts, empty parts too), give the pairs of their concatenation."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 2**64, size=n, dtype=np.uint64) for n in sizes]
    whole = np.concatenate(parts)
    queries = _near(rng, whole, 150, threshold + 3) if len(whole) else whole
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index, "CHUNK_ROWS", chunk)
        got = hamming_pairs(queries, parts, threshold)
    assert _same(got, brute_force_pairs(queries, whole, threshold))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_items=st.integers(1, 200), crops=st.integers(0, 5))
def test_an_item_is_matched_once_at_its_nearest_variant(
    seed: int, n_items: int, crops: int
) -> None:
    """An image with crop hashes: one pair per (query, image), at the nearest of its hashes,
    the crops held in two parts (as a list column's chunks)."""
    rng = np.random.default_rng(seed)
    full = rng.integers(0, 2**64, size=n_items, dtype=np.uint64)
    counts = rng.integers(0, crops + 1, size=n_items)
    variants = [_near(rng, full[i : i + 1], int(c), 6) for i, c in enumerate(counts)]
    queries = _near(rng, np.concatenate([full, *variants]), 100, 8)
    cut = n_items // 2
    parts = [Variants(full, np.arange(n_items + 1), 0)]
    for first, group in ((0, variants[:cut]), (cut, variants[cut:])):
        sizes = np.array([len(v) for v in group], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        values = np.concatenate(group) if group else np.zeros(0, dtype=np.uint64)
        parts.append(Variants(values.astype(np.uint64), offsets, first))
    got = variant_pairs(queries, parts, 10)
    want = {}
    for i, h in enumerate(queries):
        for item in range(n_items):
            every = np.concatenate([full[item : item + 1], variants[item]])
            d = int(np.bitwise_count(every ^ h).min())
            if d <= 10:
                want[(i, item)] = d
    pairs = zip(got.query.tolist(), got.stored.tolist(), strict=True)
    assert dict(zip(pairs, got.distance.tolist(), strict=True)) == want
    assert len(got.query) == len(want)
