"""The precision/recall curve behind the audit's default thresholds (docs/audit.md).

Real photographs (``dsreg.audit.corpus``: tiles of the photographs installed packages ship),
flat synthetic images (``corpus.shape_images``: shapes on flat backgrounds) and real text
(standard-library docstrings): each base item once in a "training" set, a transformed copy of
half of them (JPEG q30-90, resize 50-200%, crop up to 10%, brightness +-20%; case, whitespace,
punctuation and 10% word edits) plus unrelated items in a "test" set. A test item is a true
positive when it is matched to its own source, a false positive when it is matched to anything
else. A test image is matched as the audit matches it: its pHash against the stored image's and
those of its crops (``images.CROPS``), then confirmed by the pixel check (``confirm.py``, at its
default tolerance); the curves without the pixel check are printed beside. Prints one line per
threshold.

    python benchmarks/audit_thresholds.py [--images N] [--flat N] [--texts N]

N is the size of the training set (0 leaves that kind out: its curve is not measured, and the
output says so), at least 2 so the test set holds a copy and an unrelated item, and at most
what the corpus gives for photographs and texts (two thirds of its images or texts: the
unrelated items are a further N/2).
"""

from __future__ import annotations

import argparse
import sys
from typing import NamedTuple, NoReturn

import numpy as np
from PIL import Image

from dsreg.audit import DEFAULT_IMAGE_THRESHOLD
from dsreg.audit.confirm import PIXEL_TOLERANCE, nearest_views, pixel_distances
from dsreg.audit.corpus import (
    edit_text,
    jpeg,
    photo_tiles,
    png,
    shape_images,
    stdlib_texts,
    transform_image,
)
from dsreg.audit.images import fingerprint_images
from dsreg.audit.text import fingerprint_texts, jaccard

_STEPS = [4, 6, 8, 10, 12, 14, 16]
# A distance no threshold reaches: a pair the pixel check refuses.
_NEVER = 65


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


class _Distances(NamedTuple):
    """Per test image and training image: the pHash distance as the audit matches (to the
    nearest of the stored image and its crops), with the pairs the pixel check refuses set out
    of reach (``checked``) and without (``alone``), and the pixel distance of the pairs within
    the default pHash threshold (infinite for the others)."""

    checked: np.ndarray
    alone: np.ndarray
    pixels: np.ndarray


def _distances(train: list[bytes], test: list[bytes]) -> _Distances:
    q, stored = fingerprint_images(test), fingerprint_images(train)
    variants = np.concatenate([stored.hashes[:, None], stored.crops], axis=1)
    d = np.bitwise_count(q.hashes[:, None, None] ^ variants[None]).min(axis=2)
    qi, sj = np.nonzero(d <= max(_STEPS))
    views = nearest_views(q.hashes[qi], variants[sj])
    px = pixel_distances(q.thumbs[qi], stored.thumbs[sj], views)
    far = px > PIXEL_TOLERANCE
    checked = d.copy()
    checked[qi[far], sj[far]] = _NEVER
    pixels = np.full(d.shape, np.inf)
    near = d[qi, sj] <= DEFAULT_IMAGE_THRESHOLD
    pixels[qi[near], sj[near]] = px[near]
    return _Distances(checked, d, pixels)


def _tolerance_curve(name: str, pixels: np.ndarray, pos: np.ndarray) -> None:
    _curve(
        f"{name}, pixel tolerance at the default {DEFAULT_IMAGE_THRESHOLD} bits",
        pixels,
        pos,
        [0.3, 0.5, 0.7, 0.9, 1.2, 1.5, 2.0],
        "le",
    )


def images(n: int, tiles: list[Image.Image]) -> None:
    """The curves for ``n`` training images, from ``n + n // 2`` distinct ``tiles``."""
    rng = np.random.default_rng(0)
    train = [jpeg(t) for t in tiles[:n]]
    made = [transform_image(t, rng) for t in tiles[: n // 2]]
    unrelated = [jpeg(t) for t in tiles[n:]]
    found = _distances(train, [m[0] for m in made] + unrelated)
    d = found.checked
    none = -np.ones(len(unrelated), dtype=np.int64)
    pos = np.concatenate([np.arange(n // 2), none])
    _curve(
        "images, every transformation (pHash bits with crops, pixel check)", d, pos, _STEPS, "le"
    )
    _curve("images, pHash alone (no pixel check)", found.alone, pos, _STEPS, "le")
    _tolerance_curve("images", found.pixels, pos)
    cropped = np.array(["crop" in m[1] for m in made] + [False] * len(unrelated))
    keep = ~cropped
    _curve("images, crops left out", d[keep], pos[keep], _STEPS, "le")
    only = cropped | (pos < 0)
    _curve("images, cropped copies only", d[only], pos[only], _STEPS, "le")
    q, stored = fingerprint_images([m[0] for m in made] + unrelated), fingerprint_images(train)
    full = np.bitwise_count(q.hashes[:, None] ^ stored.hashes[None, :])
    _curve("images, full-image pHash only (no crops, no pixel check)", full, pos, _STEPS, "le")


def flat(n: int) -> None:
    """The curves for ``n`` flat synthetic training images (``corpus.shape_images``): a
    transformed copy of half of them and ``n // 2`` unrelated ones in the test set."""
    rng = np.random.default_rng(0)
    shapes = shape_images(n + n // 2, seed=5)
    train = [png(t) for t in shapes[:n]]
    made = [transform_image(t, rng)[0] for t in shapes[: n // 2]]
    found = _distances(train, made + [png(t) for t in shapes[n:]])
    pos = np.concatenate([np.arange(n // 2), -np.ones(n // 2, dtype=np.int64)])
    name = "flat synthetic images"
    _curve(f"{name} (pHash bits with crops, pixel check)", found.checked, pos, _STEPS, "le")
    _curve(f"{name}, pHash alone (no pixel check)", found.alone, pos, _STEPS, "le")
    _tolerance_curve(name, found.pixels, pos)


def texts(n: int, base: list[str]) -> None:
    """The curve for ``n`` training texts, from ``n + n // 2`` distinct texts of ``base``."""
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


class _Parser(argparse.ArgumentParser):
    """Bad options as one line and exit status 1 (argparse's own error prints its usage too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message}\n")


def _size(value: str) -> int:
    """A training set size: 0 (that kind left out) or at least 2."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 0 or n == 1:
        raise argparse.ArgumentTypeError(
            f"{n} is not a set size: give 0 to leave this kind out, or at least 2 (a copy and "
            "an unrelated item in the test set)"
        )
    return n


def _most(available: int) -> int:
    """The largest N whose N training items and N/2 unrelated ones ``available`` items give."""
    return (2 * available + 1) // 3


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=_size, default=200, metavar="N")
    parser.add_argument("--flat", type=_size, default=200, metavar="N")
    parser.add_argument("--texts", type=_size, default=350, metavar="N")
    args = parser.parse_args(argv)
    # Both sizes checked before the first (long) curve is measured.
    base = stdlib_texts() if args.texts else []
    if args.texts > _most(len(base)):
        parser.error(
            f"--texts {args.texts}: the standard library gives {len(base)} texts, enough for "
            f"--texts {_most(len(base))} at most"
        )
    try:
        n = args.images + args.images // 2
        tiles = photo_tiles(n, seed=11, side=160) if n else []
    except ValueError as e:  # fewer tiles than asked for: the count found is in the message
        parser.error(f"--images {args.images}: {e} (N training images need N + N/2 tiles)")
    if args.images:
        images(args.images, tiles)
    else:
        print("\nimages: not measured (--images 0)")
    if args.flat:
        flat(args.flat)
    else:
        print("\nflat synthetic images: not measured (--flat 0)")
    if args.texts:
        texts(args.texts, base)
    else:
        print("\ntexts: not measured (--texts 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
