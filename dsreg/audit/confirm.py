"""The second, independent comparison of two images whose pHashes are near: their pixels.

A pHash keeps the signs of a grayscale image's lowest frequencies against their median, so it
is blind to colour and to contrast: two different images with the same layout (a small circle
on a flat background, in other colours) can lie a few bits apart, and on flat synthetic images
they do. So a pair of images found within the threshold becomes a finding only if their
colour thumbnails (``images.THUMB_SIDE`` pixels a side, RGB) agree too:

- the view compared is the one the hashes matched: the stored image's full thumbnail, or, for a
  pair matched through one of its crops (``images.CROPS``), that crop of its thumbnail
  (resampled bilinearly, ``VIEWS``);
- a brightness change is allowed: the test thumbnail ``a`` is scaled by the gain ``g`` that
  fits the match's ``b`` best (least squares), kept within ``GAIN``;
- the pixel distance is the root-mean-square difference ``rms(g a - b)`` over every pixel and
  channel, in units of the images' contrast: the larger of ``g`` times ``a``'s and ``b``'s
  root-mean-square deviation from their channels' means, and at least ``CONTRAST_FLOOR``
  levels (of 255), so that two nearly flat images are compared by their levels, not by noise;
- the pair is confirmed when that distance is at most ``PIXEL_TOLERANCE``.

A re-encoded, resized, brightened or cropped copy differs from its source by noise and by the
sub-pixel shift of a crop: well under its contrast. An image of the same layout in other
colours differs by most of it. docs/audit.md measures both, on photographs and on flat
synthetic images.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dsreg.audit.images import CROPS, THUMB_SIDE
from dsreg.formats.tables import as_numpy

__all__ = [
    "CONTRAST_FLOOR",
    "GAIN",
    "PIXEL_TOLERANCE",
    "VIEWS",
    "confirmed_images",
    "nearest_views",
    "pixel_distances",
]

#: The brightness gain allowed between a copy and its source (PIL's ``Brightness`` of 0.75 to
#: 1.33): the fitted gain is clipped to this range.
GAIN: Final = (0.75, 4.0 / 3.0)
#: The least contrast (root-mean-square deviation, in levels of 255) a difference is measured
#: against.
CONTRAST_FLOOR: Final = 16.0
#: The largest pixel distance (in units of contrast) at which a pair is confirmed: measured in
#: docs/audit.md ("Choosing the thresholds").
PIXEL_TOLERANCE: Final = 0.9

F64 = npt.NDArray[np.float64]


def _resample(start: float, stop: float, side: int = THUMB_SIDE) -> F64:
    """The ``(side, side)`` matrix taking ``side`` pixels to ``side`` pixels covering
    ``[start, stop)`` of them, bilinearly (pixel centres at half-integers, edges clamped)."""
    out: F64 = np.zeros((side, side))
    scale = (stop - start) / side
    for i in range(side):
        x = start + (i + 0.5) * scale - 0.5
        lo = int(np.floor(x))
        frac = x - lo
        out[i, min(max(lo, 0), side - 1)] += 1.0 - frac
        out[i, min(max(lo + 1, 0), side - 1)] += frac
    return out


def _view(crop: tuple[float, float, float, float] | None) -> F64:
    """The ``(side * side, side * side)`` matrix taking a flattened channel of a thumbnail to
    that of its crop ``crop`` (the identity for the full image)."""
    if crop is None:
        return np.eye(THUMB_SIDE * THUMB_SIDE)
    left, top, right, bottom = (f * THUMB_SIDE for f in crop)
    rows = _resample(top, THUMB_SIDE - bottom)
    cols = _resample(left, THUMB_SIDE - right)
    out: F64 = np.kron(rows, cols).astype(np.float64)
    return out


#: Per view of an image (0 the full image, ``1 + k`` crop ``k`` of ``CROPS``): the matrix
#: taking its flattened thumbnail channel to that view's.
VIEWS: Final = np.stack([_view(None), *(_view(c) for c in CROPS)])


def nearest_views(queries: npt.NDArray[np.uint64], variants: npt.NDArray[np.uint64]) -> np.ndarray:
    """Per pair, which of the stored image's hashes (``variants[i]``: its full hash, then its
    crops') is nearest ``queries[i]``; the full image where several are as near."""
    distances = np.bitwise_count(variants ^ queries[:, None])
    nearest: np.ndarray = np.argmin(distances, axis=1)
    return nearest


def pixel_distances(a: npt.ArrayLike, b: npt.ArrayLike, views: npt.ArrayLike) -> F64:
    """Per pair, the pixel distance (see the module) of the test thumbnail ``a[i]`` to view
    ``views[i]`` of the stored thumbnail ``b[i]``; thumbnails ``(n, side, side, 3)`` uint8."""
    n = len(np.asarray(views))
    px = THUMB_SIDE * THUMB_SIDE
    qa = np.asarray(a, dtype=np.float64).reshape(n, px, 3)
    sb = np.asarray(b, dtype=np.float64).reshape(n, px, 3)
    views = np.asarray(views, dtype=np.int64)
    for v in np.unique(views[views > 0]):  # the crops' views, a matrix product per crop
        at = views == v
        sb[at] = np.einsum("pq,nqc->npc", VIEWS[v], sb[at])
    fit = (qa * sb).sum(axis=(1, 2)) / np.maximum((qa * qa).sum(axis=(1, 2)), 1e-9)
    gain = np.clip(fit, *GAIN)
    residual = np.sqrt(((gain[:, None, None] * qa - sb) ** 2).mean(axis=(1, 2)))
    contrast = np.maximum.reduce(
        [gain * _deviation(qa), _deviation(sb), np.full(n, CONTRAST_FLOOR)]
    )
    out: F64 = residual / contrast
    return out


def _deviation(x: F64) -> F64:
    """Root-mean-square deviation of each thumbnail from its channels' means."""
    out: F64 = np.sqrt(((x - x.mean(axis=1, keepdims=True)) ** 2).mean(axis=(1, 2)))
    return out


def _thumbs(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    column = table.column("thumb").take(pa.array(rows, pa.int64())).combine_chunks()
    size = THUMB_SIDE * THUMB_SIDE * 3
    data = np.frombuffer(column.buffers()[1], dtype=np.uint8)
    start = column.offset * size
    return data[start : start + len(rows) * size].reshape(len(rows), size)


def _variants(table: pa.Table, rows: np.ndarray) -> npt.NDArray[np.uint64]:
    full = as_numpy(table.column("phash").take(pa.array(rows, pa.int64()))).astype(np.uint64)
    crops = table.column("phash_crops").take(pa.array(rows, pa.int64())).combine_chunks()
    flat = as_numpy(crops.flatten()).astype(np.uint64).reshape(len(rows), len(CROPS))
    return np.concatenate([full[:, None], flat], axis=1)


def confirmed_images(q: pa.Table, s: pa.Table, qi: np.ndarray, si: np.ndarray) -> np.ndarray:
    """Which image pairs ``(qi[k], si[k])`` (rows of the fingerprint tables ``q`` and ``s``,
    their pHashes within the threshold) the pixel check confirms."""
    if not len(qi):
        return np.zeros(0, dtype=bool)
    queries = as_numpy(q.column("phash").take(pa.array(qi, pa.int64()))).astype(np.uint64)
    views = nearest_views(queries, _variants(s, si))
    return pixel_distances(_thumbs(q, qi), _thumbs(s, si), views) <= PIXEL_TOLERANCE
