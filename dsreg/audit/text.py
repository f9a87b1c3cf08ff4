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

A text is read in pieces of ``PIECE_BYTES`` (decoded, checked, normalised and split into
words one piece at a time, each piece cut at an ASCII separator so the words are those of the
whole), and its window hashes are kept as sorted sets merged as they come: the memory a text
takes is its bytes and its sets of hashes, never a string or a list of words of the whole.

Empty text (no words), bytes that are not UTF-8, and text holding NUL or other control
characters than whitespace (binary data) are reported per item with a one-line reason.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = [
    "GRAM_WORDS",
    "NUM_PERM",
    "PIECE_BYTES",
    "SEED",
    "SHINGLE_WORDS",
    "TextFingerprints",
    "fingerprint_texts",
    "jaccard",
    "minhash_of_hashes",
    "permutations",
    "sorted_set",
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
# An ASCII character that is neither a letter nor a digit: where a text is cut into pieces.
_SEPARATOR = re.compile("[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")
#: Bytes of a text decoded and split into words at a time (``_text_pieces``).
PIECE_BYTES = 1 << 20
# A text's window hashes are merged into one sorted set after this many pieces.
_MERGE_EVERY = 16
# Distinct words whose hashes a batch keeps (a cache; about 100 bytes each).
_KNOWN_WORDS = 1 << 20

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
    # (shingles, NUM_PERM) at most ~64 MB at a time: the flat hashes in slices, a slice's items
    # (or parts of one large item) reduced, each item's minimum kept across slices.
    step = max(1, (1 << 24) // NUM_PERM)
    for lo in range(0, len(mixed), step):
        hi = min(lo + step, len(mixed))
        first = int(np.searchsorted(starts, lo, side="right")) - 1
        last = int(np.searchsorted(starts, hi, side="left"))
        cuts = np.maximum(starts[first:last], lo) - lo
        values = mixed[lo:hi, None] * _A[None, :] + _B[None, :]
        items = nonempty[first:last]
        out[items] = np.minimum(out[items], np.minimum.reduceat(values, cuts, axis=0))
    return out


def sorted_set(hashes: U64) -> U64:
    """The distinct values of ``hashes``, sorted: ``np.unique``'s result by a sort and a
    comparison of neighbours (numpy 2.3's hash-based ``unique`` takes tens of times longer on
    64-bit hashes)."""
    ordered = np.sort(hashes)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def jaccard(a: U64, b: U64) -> float:
    """Jaccard similarity of two sorted unique hash sets (1.0 for two empty sets)."""
    if not len(a) and not len(b):
        return 1.0
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common)


def _text_pieces(payload: bytes) -> Iterator[str]:
    """The text of ``payload`` in pieces of about ``PIECE_BYTES`` bytes, decoded piece by piece,
    or ``ValueError`` saying why it is not usable text (the first undecodable byte, or the
    first control character, as decoding the whole would name them).

    Each piece but the first starts with an ASCII character that is not a letter or a digit:
    a separator of words before and after normalisation, which NFKC leaves as it is and never
    composes with what precedes it. So the words of the pieces, in order, are the words of the
    whole text, and no more than a piece of it is held as a string at a time (a text without
    such a character for longer than a piece is held until the next one)."""
    if not payload:
        raise ValueError("empty text (0 bytes)")
    view = memoryview(payload)
    held = ""
    at = 0
    while at < len(payload):
        end = _char_boundary(payload, at, at + PIECE_BYTES)
        try:
            text = held + str(view[at:end], "utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"not UTF-8 text (byte {at + e.start} cannot be decoded)") from None
        bad = _BINARY.search(text, len(held))
        if bad:
            raise ValueError(f"binary data, not text (control character U+{ord(bad.group()):04X})")
        at = end
        cut = _last_cut(text) if at < len(payload) else len(text)
        if cut:
            yield text[:cut]
        held = text[cut:]
    if held:
        yield held


def _char_boundary(payload: bytes, start: int, end: int) -> int:
    """Where a piece that starts at ``start`` ends, near ``end`` (at least 4 bytes on, a whole
    character): at a byte that is not a UTF-8 continuation byte, up to 3 back, so a piece
    never cuts a valid character in two and a decoding error is always a real one."""
    end = max(end, start + 4)
    if end >= len(payload):
        return len(payload)
    for at in range(end, end - 4, -1):
        if payload[at] & 0xC0 != 0x80:  # not a continuation byte
            return at
    return end  # four continuation bytes: invalid wherever it is cut


def _last_cut(text: str) -> int:
    """The position of the last ASCII separator of ``text`` (0 if none)."""
    found = _SEPARATOR.search(text[::-1])
    return len(text) - found.end() if found else 0


class _Windows:
    """The shingle and 13-gram hash sets of one text, gathered piece by piece: each piece's
    word hashes follow the last ``GRAM_WORDS - 1`` of the pieces before, so every window is
    counted once, wherever the pieces were cut."""

    def __init__(self) -> None:
        self.tail = np.zeros(0, dtype=np.uint64)
        self.words = 0
        self.shingles: list[U64] = []
        self.grams: list[U64] = []

    def add(self, hashed: U64) -> None:
        joined = np.concatenate([self.tail, hashed])
        old = len(self.tail)
        self.words += len(hashed)
        for n, kept in ((SHINGLE_WORDS, self.shingles), (GRAM_WORDS, self.grams)):
            new = window_hashes(joined[max(0, old - n + 1) :], n)
            if len(new):
                kept.append(sorted_set(new))
                if len(kept) > _MERGE_EVERY:  # bounded: merged as they come
                    kept[:] = [sorted_set(np.concatenate(kept))]
        self.tail = joined[-(GRAM_WORDS - 1) :].copy()

    def sets(self) -> tuple[U64, U64]:
        """The sorted unique shingle and 13-gram hashes."""
        if self.words < SHINGLE_WORDS:  # a text shorter than a shingle: one of all its words
            return sorted_set(window_hashes(self.tail, self.words)), np.zeros(0, dtype=np.uint64)
        return _union(self.shingles), _union(self.grams)


def _union(parts: list[U64]) -> U64:
    return sorted_set(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)


def fingerprint_texts(payloads: Sequence[bytes]) -> TextFingerprints:
    """Fingerprint every text of ``payloads`` (UTF-8 bytes): a pure function of the bytes,
    item by item, so it runs in workers unchanged and is stored per payload digest. A text is
    read in pieces (``_text_pieces``), so its memory is its bytes and its sets of hashes, not
    a string and a list of words of the whole."""
    n = len(payloads)
    ok = np.zeros(n, dtype=np.bool_)
    errors = [""] * n
    empty = np.zeros(0, dtype=np.uint64)
    shingles: list[U64] = [empty] * n
    grams: list[U64] = [empty] * n
    known: dict[str, int] = {}
    for i, payload in enumerate(payloads):
        windows = _Windows()
        try:
            for piece in _text_pieces(payload):
                if len(known) > _KNOWN_WORDS:  # a cache: cleared rather than grown unbounded
                    known.clear()
                windows.add(_word_hashes(words(piece), known))
            if not windows.words:
                raise ValueError("empty text (no words)")
        except ValueError as exc:
            errors[i] = str(exc)
            continue
        shingles[i], grams[i] = windows.sets()
        ok[i] = True
    return TextFingerprints(
        minhash=minhash_of_hashes(shingles), shingles=shingles, grams=grams, ok=ok, errors=errors
    )
