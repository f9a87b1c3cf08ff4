"""Fingerprints of text: MinHash over word shingles, and the set of 13-word n-grams.

A text is normalised before it is cut into words: Unicode NFKC, case folded, every run of
characters that are not letters or digits a separator. So case, whitespace and punctuation
changes leave the words as they were, and what is left to differ is the words themselves
(lm-eval-harness's decontamination normalises the same way before its 13-grams).

Each word is hashed once (the first 8 bytes of its SHA-1, little-endian, as datasketch's
``sha1_hash64``); an n-word window's hash is the polynomial ``sum(w[i + k] * P**(n - 1 - k))``
mod 2**64 of its words' hashes, computed for every window of a text with ``n`` vectorised
multiply-adds. Word shingles (``SHINGLE_WORDS`` words) are the MinHash input and, kept as a
sorted set, what a candidate pair's Jaccard similarity is verified on; 13-grams are kept as a
sorted set for exact overlap.

MinHash is datasketch's ``affine32`` scheme (its default since 2.0): each input hash's low 32
bits through MurmurHash3's ``fmix32``, then ``NUM_PERM`` permutations ``a * h + b`` mod 2**32
(``a`` odd), with ``a`` and ``b`` drawn as datasketch draws them from ``RandomState(SEED)``.
``MinHash(num_perm=NUM_PERM, seed=SEED, hashfunc=identity)`` fed the same shingle hashes holds
the same values (the tests check it); the whole batch is one ``(shingles, NUM_PERM)`` product
and a ``minimum.reduceat``.

Empty text (no words), bytes that are not UTF-8, and text holding NUL or other control
characters than whitespace (binary data) are reported per item with a one-line reason.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = [
    "GRAM_WORDS",
    "NUM_PERM",
    "SEED",
    "SHINGLE_WORDS",
    "TextFingerprints",
    "fingerprint_texts",
    "jaccard",
    "minhash_of_hashes",
    "permutations",
    "window_hashes",
    "words",
]

#: Words per shingle: MinHash input and the verified Jaccard's sets.
SHINGLE_WORDS = 3
#: Words per n-gram of the exact overlap tier (lm-eval-harness's 13-grams).
GRAM_WORDS = 13
#: Permutations (values) per MinHash signature.
NUM_PERM = 128
#: datasketch's default seed.
SEED = 1
# A large odd multiplier for the window polynomial (the 64-bit golden ratio).
_P = np.uint64(0x9E3779B97F4A7C15)
_SPLIT = re.compile(r"[\W_]+")
# C0 controls but tab, newline, vertical tab, form feed and carriage return; and DEL.
_BINARY = re.compile("[\x00-\x08\x0e-\x1f\x7f]")

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]


class TextFingerprints(NamedTuple):
    """Per item of a batch: its MinHash, its shingle and 13-gram sets, and whether it was read."""

    #: ``(n, NUM_PERM)`` uint32; all ``0xFFFFFFFF`` where ``ok`` is false or a text is shorter
    #: than a shingle.
    minhash: U32
    #: Sorted unique shingle hashes per item (empty where not ``ok``).
    shingles: list[U64]
    #: Sorted unique 13-gram hashes per item (empty for texts under 13 words).
    grams: list[U64]
    ok: npt.NDArray[np.bool_]
    errors: list[str]


def permutations(num_perm: int = NUM_PERM, seed: int = SEED) -> tuple[U32, U32]:
    """datasketch's ``affine32`` permutation parameters ``(a, b)``."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint64).astype(np.uint32)
    return a, b


_A, _B = permutations()


def _fmix32(h: U32) -> U32:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def words(text: str) -> list[str]:
    """The normalised words of ``text`` (NFKC, case folded, split on non-alphanumerics)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [w for w in _SPLIT.split(folded) if w]


def _word_hashes(tokens: Sequence[str], known: dict[str, int]) -> U64:
    """Each word's hash; ``known`` holds the batch's words hashed so far (words repeat)."""
    for t in set(tokens).difference(known):
        known[t] = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
    return np.fromiter((known[t] for t in tokens), dtype=np.uint64, count=len(tokens))


def window_hashes(word_hashes: U64, n: int) -> U64:
    """The hash of every ``n``-word window (none when there are fewer than ``n`` words)."""
    count = len(word_hashes) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    acc = np.zeros(count, dtype=np.uint64)
    for k in range(n):
        acc = acc * _P + word_hashes[k : k + count]
    return acc


def minhash_of_hashes(hashes: Sequence[U64]) -> U32:
    """The ``(len(hashes), NUM_PERM)`` MinHash signatures of sets of 64-bit hashes (their low
    32 bits are the input, as datasketch's 32-bit hash functions give)."""
    out = np.full((len(hashes), NUM_PERM), np.iinfo(np.uint32).max, dtype=np.uint32)
    sizes = np.array([len(h) for h in hashes], dtype=np.int64)
    nonempty = np.flatnonzero(sizes)
    if not len(nonempty):
        return out
    flat = np.concatenate([hashes[int(i)] for i in nonempty])
    mixed = _fmix32((flat & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    starts = np.cumsum(sizes[nonempty]) - sizes[nonempty]
    # (shingles, NUM_PERM) at most ~64 MB at a time: chunk by whole items.
    step = max(1, (1 << 24) // NUM_PERM)
    first = 0
    while first < len(nonempty):
        last = int(np.searchsorted(starts, starts[first] + step, side="left"))
        last = max(last, first + 1)
        lo = int(starts[first])
        hi = int(starts[last]) if last < len(nonempty) else len(mixed)
        values = mixed[lo:hi, None] * _A[None, :] + _B[None, :]
        out[nonempty[first:last]] = np.minimum.reduceat(values, starts[first:last] - lo, axis=0)
        first = last
    return out


def jaccard(a: U64, b: U64) -> float:
    """Jaccard similarity of two sorted unique hash sets (1.0 for two empty sets)."""
    if not len(a) and not len(b):
        return 1.0
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common)


def _decode(payload: bytes) -> str:
    """The text of ``payload``, or ``ValueError`` saying why it is not usable text."""
    if not payload:
        raise ValueError("empty text (0 bytes)")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text (byte {e.start} cannot be decoded)") from None
    bad = _BINARY.search(text)
    if bad:
        raise ValueError(f"binary data, not text (control character U+{ord(bad.group()):04X})")
    return text


def fingerprint_texts(payloads: Sequence[bytes]) -> TextFingerprints:
    """Fingerprint every text of ``payloads`` (UTF-8 bytes): a pure function of the bytes,
    item by item, so it runs in workers unchanged and is stored per payload digest."""
    n = len(payloads)
    ok = np.zeros(n, dtype=np.bool_)
    errors = [""] * n
    empty = np.zeros(0, dtype=np.uint64)
    shingles: list[U64] = [empty] * n
    grams: list[U64] = [empty] * n
    known: dict[str, int] = {}
    for i, payload in enumerate(payloads):
        try:
            tokens = words(_decode(payload))
            if not tokens:
                raise ValueError("empty text (no words)")
        except ValueError as exc:
            errors[i] = str(exc)
            continue
        hashed = _word_hashes(tokens, known)
        # A text shorter than a shingle is one shingle of all its words.
        shingles[i] = np.unique(window_hashes(hashed, min(SHINGLE_WORDS, len(tokens))))
        grams[i] = np.unique(window_hashes(hashed, GRAM_WORDS))
        ok[i] = True
    return TextFingerprints(
        minhash=minhash_of_hashes(shingles), shingles=shingles, grams=grams, ok=ok, errors=errors
    )
