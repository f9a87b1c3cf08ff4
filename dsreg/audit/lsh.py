"""Candidate pairs of texts: MinHash LSH with every candidate's Jaccard verified, and shared
13-grams.

MinHash LSH cuts each ``NUM_PERM``-value signature into ``b`` bands of ``r`` values; two texts
are candidates when some band is equal in both. Two texts of Jaccard similarity ``J`` share a
band with probability ``1 - (1 - J**r)**b`` (``band_plan`` picks the widest ``r`` for which that
is at least ``RECALL_AT_THRESHOLD`` at the threshold, so fewer unrelated pairs become
candidates). Each candidate's exact Jaccard similarity is then computed from the two shingle
sets (not estimated from the signatures) and the pair kept only if it reaches the threshold:
the result has no false positive, and its recall at the threshold is the band plan's.

Shared 13-grams are found exactly: every 13-gram hash of the queries looked up in the sorted
13-gram hashes of the stored texts, each pair counted once with the number it shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from dsreg.audit.text import NUM_PERM, jaccard
from dsreg.errors import InvalidInputError

__all__ = [
    "RECALL_AT_THRESHOLD",
    "TextPairs",
    "band_plan",
    "gram_pairs",
    "minhash_pairs",
]

#: The probability that two texts exactly at the Jaccard threshold become candidates.
RECALL_AT_THRESHOLD = 0.995
_P = np.uint64(0x9E3779B97F4A7C15)

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


class TextPairs(NamedTuple):
    """Pairs, sorted by query then stored index, with the similarity that kept each: the
    Jaccard similarity of their shingles, or the number of 13-grams they share."""

    query: I64
    stored: I64
    similarity: npt.NDArray[np.float64]


def band_plan(threshold: float, num_perm: int = NUM_PERM) -> tuple[int, int]:
    """``(bands, rows)``: the most rows per band whose candidate probability at ``threshold``
    is at least ``RECALL_AT_THRESHOLD``."""
    if not 0.0 < threshold <= 1.0:
        raise InvalidInputError(
            f"Jaccard threshold {threshold} is out of range: use a number above 0 and at most 1"
        )
    best = (num_perm, 1)
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if 1.0 - (1.0 - threshold**r) ** b >= RECALL_AT_THRESHOLD:
            best = (b, r)
    return best


def _band_keys(signatures: npt.NDArray[np.uint32], rows: int, band: int) -> U64:
    block = signatures[:, band * rows : (band + 1) * rows].astype(np.uint64)
    key = np.zeros(len(signatures), dtype=np.uint64)
    for k in range(rows):
        key = key * _P + block[:, k] + np.uint64(1)
    return key


def _equal_keys(q: U64, s: U64, mask_q: npt.NDArray[np.bool_]) -> tuple[I64, I64]:
    """Every ``(i, j)`` with ``q[i] == s[j]``, for the queries where ``mask_q``."""
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    qi = np.flatnonzero(mask_q)
    left = np.searchsorted(sorted_s, q[qi], side="left")
    right = np.searchsorted(sorted_s, q[qi], side="right")
    counts = (right - left).astype(np.int64)
    owners = np.repeat(qi, counts)
    first = np.cumsum(counts) - counts
    picks = np.repeat(left - first, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    return owners.astype(np.int64), order[picks].astype(np.int64)


def _unique_pairs(qi: I64, sj: I64, n_stored: int) -> tuple[I64, I64]:
    key = np.unique(qi * np.int64(max(n_stored, 1)) + sj)
    return key // max(n_stored, 1), key % max(n_stored, 1)


def minhash_pairs(
    q_sig: npt.NDArray[np.uint32],
    s_sig: npt.NDArray[np.uint32],
    q_shingles: Sequence[U64],
    s_shingles: Sequence[U64],
    threshold: float,
    *,
    q_ok: npt.NDArray[np.bool_] | None = None,
    s_ok: npt.NDArray[np.bool_] | None = None,
) -> TextPairs:
    """Pairs of a query and a stored text whose shingles' Jaccard similarity is at least
    ``threshold``, found through MinHash LSH and verified exactly (see the module)."""
    bands, rows = band_plan(threshold, q_sig.shape[1] if q_sig.ndim == 2 else NUM_PERM)
    q_ok = np.ones(len(q_sig), dtype=bool) if q_ok is None else q_ok
    s_ok = np.ones(len(s_sig), dtype=bool) if s_ok is None else s_ok
    found_q, found_s = [], []
    for band in range(bands):
        q_keys, s_keys = _band_keys(q_sig, rows, band), _band_keys(s_sig, rows, band)
        # Stored texts that were not read can never match: a key no query holds.
        s_keys[~s_ok] = np.uint64(0)
        qi, sj = _equal_keys(q_keys, s_keys, q_ok & (q_keys != 0))
        found_q.append(qi)
        found_s.append(sj)
    empty = np.zeros(0, dtype=np.int64)
    qi, sj = _unique_pairs(
        np.concatenate(found_q) if found_q else empty,
        np.concatenate(found_s) if found_s else empty,
        len(s_sig),
    )
    sims = np.array(
        [jaccard(q_shingles[int(i)], s_shingles[int(j)]) for i, j in zip(qi, sj, strict=True)],
        dtype=np.float64,
    )
    keep = sims >= threshold
    return TextPairs(qi[keep], sj[keep], sims[keep])


def _flatten(sets: Sequence[U64]) -> tuple[U64, I64]:
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    values = np.concatenate(list(sets)) if len(sets) else np.zeros(0, dtype=np.uint64)
    return values.astype(np.uint64), np.repeat(np.arange(len(sets), dtype=np.int64), sizes)


def gram_pairs(q_grams: Sequence[U64], s_grams: Sequence[U64], min_shared: int = 1) -> TextPairs:
    """Pairs of a query and a stored text sharing at least ``min_shared`` 13-grams, with the
    number they share."""
    if min_shared < 1:
        raise InvalidInputError(f"min_shared {min_shared} is out of range: use 1 or more")
    q_values, q_owner = _flatten(q_grams)
    s_values, s_owner = _flatten(s_grams)
    qi, sj = _equal_keys(q_values, s_values, np.ones(len(q_values), dtype=bool))
    pair_q, pair_s = q_owner[qi], s_owner[sj]
    n = max(len(s_grams), 1)
    keys, counts = np.unique(pair_q * np.int64(n) + pair_s, return_counts=True)
    keep = counts >= min_shared
    keys, counts = keys[keep], counts[keep]
    return TextPairs(keys // n, keys % n, counts.astype(np.float64))
