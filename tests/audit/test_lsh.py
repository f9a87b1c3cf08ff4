"""Text candidates: MinHash LSH pairs are verified (no false positive) and miss no pair clearly
above the threshold; shared 13-grams equal brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.audit.corpus import edit_text, stdlib_texts
from dsreg.audit.lsh import RECALL_AT_THRESHOLD, band_plan, gram_pairs, minhash_pairs
from dsreg.audit.text import fingerprint_texts, jaccard
from dsreg.errors import InvalidInputError


@pytest.fixture(scope="module")
def texts() -> tuple[list[str], list[str]]:
    base = stdlib_texts()[:300]
    rng = np.random.default_rng(5)
    vocabulary = " ".join(base).split()
    edited = [edit_text(t, rng, vocabulary)[0] for t in base[:150]]
    return base, edited


@pytest.mark.parametrize("threshold", [0.25, 0.4])
def test_minhash_pairs_are_the_brute_force_pairs(
    texts: tuple[list[str], list[str]], threshold: float
) -> None:
    base, edited = texts
    q = fingerprint_texts([t.encode() for t in edited])
    s = fingerprint_texts([t.encode() for t in base])
    got = minhash_pairs(q.minhash, s.minhash, q.shingles, s.shingles, threshold)
    exact = np.array([[jaccard(a, b) for b in s.shingles] for a in q.shingles])
    assert (got.similarity >= threshold).all()
    assert np.allclose(got.similarity, exact[got.query, got.stored])
    want = set(zip(*np.nonzero(exact >= threshold), strict=True))
    # Every pair found is a true one; every pair 0.1 above the threshold is found.
    assert set(zip(got.query.tolist(), got.stored.tolist(), strict=True)) <= want
    clear = set(zip(*np.nonzero(exact >= threshold + 0.1), strict=True))
    assert clear <= set(zip(got.query.tolist(), got.stored.tolist(), strict=True))
    assert len(clear) > 50


@settings(max_examples=100, deadline=None)
@given(threshold=st.floats(0.05, 1.0))
def test_band_plan_reaches_its_recall(threshold: float) -> None:
    bands, rows = band_plan(threshold)
    assert bands * rows <= 128
    assert 1 - (1 - threshold**rows) ** bands >= RECALL_AT_THRESHOLD


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.5, float("nan")])
def test_a_jaccard_threshold_out_of_range_is_refused(threshold: float) -> None:
    with pytest.raises(InvalidInputError, match="out of range: use a number above 0"):
        band_plan(threshold)


@settings(max_examples=100, deadline=None)
@given(
    q=st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=15),
    s=st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=15),
    min_shared=st.integers(1, 3),
)
def test_gram_pairs_equal_brute_force(
    q: list[list[int]], s: list[list[int]], min_shared: int
) -> None:
    qs = [np.unique(np.array(x, dtype=np.uint64)) for x in q]
    ss = [np.unique(np.array(x, dtype=np.uint64)) for x in s]
    got = gram_pairs(qs, ss, min_shared)
    want = [
        (i, j, len(np.intersect1d(a, b)))
        for i, a in enumerate(qs)
        for j, b in enumerate(ss)
        if len(np.intersect1d(a, b)) >= min_shared
    ]
    pairs = list(zip(got.query.tolist(), got.stored.tolist(), got.similarity.tolist(), strict=True))
    assert pairs == [(i, j, float(c)) for i, j, c in want]


def test_13_grams_find_a_copied_passage(texts: tuple[list[str], list[str]]) -> None:
    base, _ = texts
    passage = " ".join(base[7].split()[5:25])
    q = fingerprint_texts([f"Question: {passage.upper()}?".encode()])
    s = fingerprint_texts([t.encode() for t in base])
    got = gram_pairs(q.grams, s.grams)
    assert 7 in got.stored.tolist()
