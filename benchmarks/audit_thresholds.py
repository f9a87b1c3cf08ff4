"""The precision/recall curve behind the audit's default thresholds (docs/audit.md).

Real photographs (``dsreg.audit.corpus``: tiles of the photographs installed packages ship)
and real text (standard-library docstrings): each base item once in a "training" set, a
transformed copy of half of them (JPEG q30-90, resize 50-200%, crop up to 10%, brightness
+-20%; case, whitespace, punctuation and 10% word edits) plus unrelated items in a "test" set.
A test item is a true positive when it is matched to its own source, a false positive when it
is matched to anything else. A test image is matched as the audit matches it: its pHash against
the stored image's and those of its crops (``images.CROPS``). Prints one line per threshold.

    python benchmarks/audit_thresholds.py [--images N] [--texts N]
"""

from __future__ import annotations

import argparse

import numpy as np

from dsreg.audit.corpus import edit_text, jpeg, photo_tiles, stdlib_texts, transform_image
from dsreg.audit.images import fingerprint_images
from dsreg.audit.text import fingerprint_texts, jaccard


def _curve(
    name: str, similar: np.ndarray, positives: np.ndarray, thresholds: list[float], match: str
) -> None:
    """``similar[i, j]``: query i's score against stored j (higher or lower is nearer);
    ``positives[i]``: query i's own source, -1 for an unrelated query."""
    print(f"\n{name}: {int((positives >= 0).sum())} copies, {int((positives < 0).sum())} unrelated")
    print("threshold  recall  precision  false-pos")
    for t in thresholds:
        hit = similar <= t if match == "le" else similar >= t
        rows = np.arange(len(positives))
        own = np.zeros(len(positives), dtype=bool)
        has = positives >= 0
        own[has] = hit[rows[has], positives[has]]
        other = hit.copy()
        other[rows[has], positives[has]] = False
        tp = int(own.sum())
        fp_queries = int(other.any(axis=1).sum())
        recall = tp / max(1, int(has.sum()))
        precision = tp / max(1, tp + fp_queries)
        print(f"{t:>9}  {recall:6.3f}  {precision:9.3f}  {fp_queries:9d}")


def images(n: int) -> None:
    rng = np.random.default_rng(0)
    tiles = photo_tiles(n + n // 2, seed=11, side=160)
    train = [jpeg(t) for t in tiles[:n]]
    made = [transform_image(t, rng) for t in tiles[: n // 2]]
    unrelated = [jpeg(t) for t in tiles[n:]]
    q = fingerprint_images([m[0] for m in made] + unrelated).hashes
    stored = fingerprint_images(train)
    # As the audit matches: a test image's hash against the stored image's and its crops'.
    variants = np.concatenate([stored.hashes[:, None], stored.crops], axis=1)
    d = np.bitwise_count(q[:, None, None] ^ variants[None]).min(axis=2)
    none = -np.ones(len(unrelated), dtype=np.int64)
    pos = np.concatenate([np.arange(n // 2), none])
    steps = [4, 6, 8, 10, 12, 14, 16]
    _curve("images, every transformation (pHash Hamming bits, with crops)", d, pos, steps, "le")
    cropped = np.array(["crop" in m[1] for m in made] + [False] * len(unrelated))
    keep = ~cropped
    _curve("images, crops left out", d[keep], pos[keep], steps, "le")
    only = cropped | (pos < 0)
    _curve("images, cropped copies only", d[only], pos[only], steps, "le")
    full = np.bitwise_count(q[:, None] ^ stored.hashes[None, :])
    _curve("images, full-image pHash only (no crops)", full, pos, steps, "le")


def texts(n: int) -> None:
    base = stdlib_texts()
    rng = np.random.default_rng(0)
    vocab = " ".join(base).split()
    train, extra = base[:n], base[n : n + n // 2]
    copies = [edit_text(t, rng, vocab)[0] for t in train[: n // 2]]
    q = fingerprint_texts([t.encode() for t in copies + extra]).shingles
    s = fingerprint_texts([t.encode() for t in train]).shingles
    j = np.array([[jaccard(a, b) for b in s] for a in q])
    pos = np.concatenate([np.arange(n // 2), -np.ones(len(extra), dtype=np.int64)])
    _curve(
        "texts (3-word shingle Jaccard)", j, pos, [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5], "ge"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--texts", type=int, default=350)
    args = parser.parse_args()
    images(args.images)
    texts(args.texts)
