"""Pairs of payloads per tier: which payloads of a test set's fingerprints table match which
of another's, and how near (docs/audit.md, "Tiers").

- ``exact``: equal payload digests (distance 0);
- ``image``: the test image's pHash within the threshold of the other image's or of one of its
  crops' (``index.py``: none missed), then confirmed by their pixels (``confirm.py``): a pair
  the pixel check refuses is no match;
- ``text``: MinHash LSH candidates (``lsh.py``), each confirmed by the exact Jaccard similarity
  of the two shingle sets (distance ``1 - J``);
- ``ngram``: every shared 13-gram, looked up exactly (distance: the fraction of the test
  text's 13-grams the other does not hold).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.audit.confirm import confirmed_images
from dsreg.audit.index import Variants, variant_pairs
from dsreg.audit.lsh import gram_pairs, minhash_pairs
from dsreg.formats.tables import as_numpy

__all__ = ["TierPairs", "image_variants", "payload_pairs"]


class TierPairs(NamedTuple):
    """Pairs of payloads (rows of the two fingerprint tables) one tier found, with their
    distance."""

    query: np.ndarray
    stored: np.ndarray
    distance: np.ndarray
    tier: str


def payload_pairs(
    q: pa.Table, s: pa.Table, image_threshold: int, text_threshold: float
) -> list[TierPairs]:
    """Pairs of payload indices ``(q, s)`` per tier, with their distance."""
    out = []
    qd, sd = q.column("payload"), s.column("payload")
    at = pc.index_in(qd, value_set=sd)
    hit = np.flatnonzero(~as_numpy(pc.is_null(at)).astype(bool))
    stored = as_numpy(at.filter(pc.is_valid(at))).astype(np.int64)
    out.append(TierPairs(hit, stored, np.zeros(len(hit)), "exact"))
    qi, si = _of_kind(q, "image"), _of_kind(s, "image")
    if len(qi) and len(si):
        out.append(_image_pairs(q, s, qi, si, image_threshold))
    qt, st = _of_kind(q, "text"), _of_kind(s, "text")
    if len(qt) and len(st):
        out += _text_pairs(q, s, qt, st, text_threshold)
    return out


def _of_kind(fp: pa.Table, kind: str) -> np.ndarray:
    return np.flatnonzero(as_numpy(pc.equal(fp.column("kind"), kind)).astype(bool))


def _image_pairs(
    q: pa.Table, s: pa.Table, qi: np.ndarray, si: np.ndarray, threshold: int
) -> TierPairs:
    """Image payload pairs: each test image's full pHash against every stored hash of the other
    side's images, the full image's and its crops' (one row each in the index, so the join
    stays exact for the threshold); a pair's distance is its nearest variant's. Only the pairs
    the pixel check confirms are kept."""
    qh = as_numpy(q.column("phash").take(pa.array(qi))).astype(np.uint64)
    pairs = variant_pairs(qh, image_variants(s, si), threshold)
    query, stored = qi[pairs.query], si[pairs.stored]
    keep = confirmed_images(q, s, query, stored)
    return TierPairs(query[keep], stored[keep], pairs.distance[keep].astype(float), "image")


def image_variants(table: pa.Table, rows: np.ndarray) -> list[Variants]:
    """The pHashes of the images at ``rows`` of a fingerprint table: their full-image hashes
    and their crops', item ``i`` being ``rows[i]``. The crops are read where they lie (a list
    column's values, chunk by chunk) when ``rows`` is every row, as against a whole dataset."""
    every = len(rows) == table.num_rows
    full = table.column("phash") if every else table.column("phash").take(pa.array(rows))
    parts = [Variants(_u64(full), np.arange(len(rows) + 1, dtype=np.int64), 0)]
    crops = table.column("phash_crops")
    chunks = crops.chunks if every else [crops.take(pa.array(rows)).combine_chunks()]
    first = 0
    for chunk in chunks:
        offsets = as_numpy(chunk.offsets).astype(np.int64)
        values = as_numpy(chunk.values)[offsets[0] : offsets[-1]].astype(np.uint64, copy=False)
        parts.append(Variants(values, offsets - offsets[0], first))
        first += len(chunk)
    return parts


def _u64(column: pa.ChunkedArray) -> np.ndarray:
    return as_numpy(column).astype(np.uint64, copy=False)


def _sets(table: pa.Table, rows: np.ndarray, column: str) -> list[np.ndarray]:
    col = table.column(column).take(pa.array(rows)).combine_chunks()
    offsets = as_numpy(col.offsets).astype(np.int64)
    values = as_numpy(col.values).astype(np.uint64)
    return [values[offsets[i] : offsets[i + 1]] for i in range(len(rows))]


def _signatures(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    col = table.column("minhash").take(pa.array(rows)).combine_chunks()
    return as_numpy(col.values).astype(np.uint32).reshape(len(rows), -1)


def _text_pairs(
    q: pa.Table, s: pa.Table, qt: np.ndarray, st: np.ndarray, threshold: float
) -> list[TierPairs]:
    qs, ss = _sets(q, qt, "shingles"), _sets(s, st, "shingles")
    near = minhash_pairs(_signatures(q, qt), _signatures(s, st), qs, ss, threshold)
    qg, sg = _sets(q, qt, "grams"), _sets(s, st, "grams")
    grams = gram_pairs(qg, sg)
    sizes = np.array([max(len(g), 1) for g in qg], dtype=np.float64)
    missing = 1.0 - grams.similarity / sizes[grams.query]
    return [
        TierPairs(qt[near.query], st[near.stored], 1.0 - near.similarity, "text"),
        TierPairs(qt[grams.query], st[grams.stored], missing, "ngram"),
    ]
