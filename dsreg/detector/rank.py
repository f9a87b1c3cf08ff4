"""Label-quality scores and the ranking of label issues, as ``cleanlab.rank`` (2.x).

Scores lie in ``[0, 1]``; lower means the given label is more likely wrong. Rankings sort by
score with a stable sort, so equal scores keep row order.

``confidence_weighted_entropy`` needs ``x * log(x)`` exactly as cleanlab gets it from
``scipy.special.xlogy``: the C library's ``log`` for float64 and float16 (computed in float64),
and its ``logf`` for float32. numpy's own ``log`` differs from the C library's in the last bit
on some CPUs, so dsreg evaluates the C library's functions once per distinct value.

The public functions take cleanlab's arguments: ``labels`` (array_like of int, shape (n,), in
``[0, k)``), ``pred_probs`` (array_like of shape (n, k), a ``.npy`` or Parquet path, or a
``ProbabilitySource``) and, dsreg's own, ``chunk_rows`` (rows read at a time; it never changes a
result). Their docstrings describe the other parameters. The per-example scorers
(``get_*_for_each_label``) take ``labels`` of shape (m,) and the matching rows of probabilities,
shape (m, k), as numpy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from dsreg.detector.count import BoolArray, ProbsLike, Scan
from dsreg.detector.options import RANK_BY
from dsreg.detector.source import FloatArray, IntArray
from dsreg.errors import InvalidInputError

__all__ = [
    "RANK_BY",
    "get_confidence_weighted_entropy_for_each_label",
    "get_label_quality_scores",
    "get_normalized_margin_for_each_label",
    "get_self_confidence_for_each_label",
    "order_label_issues",
]

CLIPPING_LOWER_BOUND = 1e-6


def check_rank_options(method: str, rank_by_kwargs: Mapping[str, Any] | None) -> bool:
    """Validate a ranking method and its keyword options; return ``adjust_pred_probs``."""
    if method not in RANK_BY:
        raise InvalidInputError(f"rank_by must be one of {', '.join(RANK_BY)}; got {method!r}")
    kwargs = dict(rank_by_kwargs or {})
    adjust = kwargs.pop("adjust_pred_probs", False)
    if kwargs:
        raise InvalidInputError(
            f"rank_by_kwargs accepts only 'adjust_pred_probs'; got {sorted(kwargs)}"
        )
    if not isinstance(adjust, bool):
        raise InvalidInputError(f"adjust_pred_probs must be True or False, got {adjust!r}")
    if adjust and method == "confidence_weighted_entropy":
        raise InvalidInputError(
            "adjust_pred_probs is not supported for confidence_weighted_entropy"
        )
    return adjust


def get_self_confidence_for_each_label(labels: IntArray, pred_probs: FloatArray) -> FloatArray:
    """``p[i, labels[i]]``.

    Returns
    -------
    numpy.ndarray, shape (m,)
        In ``pred_probs``'s dtype.
    """
    return pred_probs[np.arange(labels.shape[0]), labels]


def _max_other(labels: IntArray, pred_probs: FloatArray) -> FloatArray:
    others = np.array(pred_probs, copy=True)
    others[np.arange(labels.shape[0]), labels] = -np.inf
    return np.asarray(others.max(axis=1))


def get_normalized_margin_for_each_label(labels: IntArray, pred_probs: FloatArray) -> FloatArray:
    """``(p[label] - max_{j != label} p[j] + 1) / 2``.

    Returns
    -------
    numpy.ndarray, shape (m,)
    """
    self_confidence = get_self_confidence_for_each_label(labels, pred_probs)
    return np.asarray((self_confidence - _max_other(labels, pred_probs) + 1) / 2)


@lru_cache(maxsize=1)
def _logf() -> Callable[[float], float]:
    """The C library's single-precision ``logf`` (what scipy's float32 ``xlogy`` calls)."""
    # Imported here: only the entropy score needs it, and ctypes.util imports subprocess.
    import ctypes
    import ctypes.util

    for name in (ctypes.util.find_library("m"), ctypes.util.find_library("c"), "ucrtbase"):
        if not name:
            continue
        try:
            function = ctypes.CDLL(name).logf
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_float
        function.argtypes = [ctypes.c_float]
        return function
    # No C library found: round the double-precision log instead (may differ in the last bit).
    return lambda x: float(np.float32(math.log(x)))


@lru_cache(maxsize=1)
def _xlogx_float16_table() -> npt.NDArray[np.float64]:
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    wide = values.astype(np.float64)
    table = np.full(wide.shape, np.nan)
    for i, x in enumerate(wide.tolist()):
        if x == 0:
            table[i] = 0.0
        elif x > 0 and math.isfinite(x):
            table[i] = x * math.log(x)
    return table


def xlogx(values: FloatArray) -> FloatArray:
    """``scipy.special.xlogy(values, values)`` bit for bit, for values >= 0.

    Parameters
    ----------
    values : numpy.ndarray of float16, float32 or float64
        Non-negative and finite.

    Returns
    -------
    numpy.ndarray
        float64 for float16 and float64 input (scipy's ``dd->d`` loop), float32 for float32.
    """
    if values.dtype == np.float16:
        return _xlogx_float16_table()[values.view(np.uint16)]
    unique, inverse = np.unique(values, return_inverse=True)
    if values.dtype == np.float32:
        log = _logf()
        logs = np.array([log(x) if x > 0 else 0.0 for x in unique.tolist()], dtype=np.float32)
    else:
        logs = np.array([math.log(x) if x > 0 else 0.0 for x in unique.tolist()])
    products = unique * logs
    products[unique == 0] = 0
    return products[inverse.reshape(values.shape)]


def get_confidence_weighted_entropy_for_each_label(
    labels: IntArray, pred_probs: FloatArray
) -> FloatArray:
    """Normalized entropy divided by self-confidence, rescaled into ``[0, 1]`` (the
    probabilities non-negative).

    Returns
    -------
    numpy.ndarray of float64, shape (m,)
    """
    self_confidence = get_self_confidence_for_each_label(labels, pred_probs)
    self_confidence = np.clip(self_confidence, a_min=CLIPPING_LOWER_BOUND, a_max=None)
    num_classes = pred_probs.shape[1]
    entropy = -np.sum(xlogx(pred_probs), axis=1) / np.log(num_classes)
    label_quality_scores = entropy / self_confidence
    clipped_scores = np.clip(label_quality_scores, a_min=CLIPPING_LOWER_BOUND, a_max=None)
    return np.asarray(np.log(label_quality_scores + 1) / clipped_scores)


_SCORERS: dict[str, Callable[[IntArray, FloatArray], FloatArray]] = {
    "self_confidence": get_self_confidence_for_each_label,
    "normalized_margin": get_normalized_margin_for_each_label,
    "confidence_weighted_entropy": get_confidence_weighted_entropy_for_each_label,
}


def _adjust(pred_probs: FloatArray, thresholds: FloatArray) -> FloatArray:
    # cleanlab's _subtract_confident_thresholds, row by row.
    pred_probs_adj = pred_probs - thresholds
    pred_probs_adj += thresholds.max()
    pred_probs_adj /= pred_probs_adj.sum(axis=1, keepdims=True)
    return pred_probs_adj


def scores_of_rows(scan: Scan, rows: IntArray, method: str, adjust: bool) -> FloatArray:
    """Label-quality scores of ``rows`` (ascending), reading only what the method needs.

    Parameters
    ----------
    scan : Scan
    rows : numpy.ndarray of intp, shape (m,)
        Ascending row positions.
    method : str
        One of :data:`RANK_BY`.
    adjust : bool
        Subtract the class thresholds first (``adjust_pred_probs``).

    Returns
    -------
    numpy.ndarray, shape (m,)
    """
    if not adjust:
        if method == "self_confidence":
            return scan.self_confidence[rows]
        max_other = scan.max_other
        if method == "normalized_margin" and max_other is not None:
            return np.asarray((scan.self_confidence[rows] - max_other[rows] + 1) / 2)
    scorer = _SCORERS[method]
    thresholds = scan.thresholds if adjust else None
    parts: list[FloatArray] = []
    for start, chunk in scan.chunks():
        lo, hi = np.searchsorted(rows, [start, start + len(chunk)])
        if hi == lo:
            continue
        local = rows[lo:hi] - start
        block = chunk[local]
        if thresholds is not None:
            block = _adjust(block, thresholds)
        parts.append(scorer(scan.labels[rows[lo:hi]], block))
    if not parts:
        return _empty_scores(scan, method, adjust)
    return np.concatenate(parts)


def _empty_scores(scan: Scan, method: str, adjust: bool) -> FloatArray:
    probe = np.full((1, scan.k), 1.0 / scan.k, dtype=scan.dtype)
    if adjust:
        probe = _adjust(probe, scan.thresholds)
    return _SCORERS[method](np.zeros(1, dtype=np.intp), probe)[:0]


def rank_issues(
    scan: Scan,
    mask: BoolArray,
    *,
    rank_by: str = "self_confidence",
    rank_by_kwargs: Mapping[str, Any] | None = None,
) -> tuple[IntArray, FloatArray]:
    """Rows of ``mask`` ordered by score (lowest first, ties to the lower row), with scores."""
    adjust = check_rank_options(rank_by, rank_by_kwargs)
    rows = np.flatnonzero(mask)
    scores = scores_of_rows(scan, rows, rank_by, adjust)
    order = np.argsort(scores, kind="stable")
    return rows[order], scores[order]


def get_label_quality_scores(
    labels: npt.ArrayLike,
    pred_probs: ProbsLike,
    *,
    method: str = "self_confidence",
    adjust_pred_probs: bool = False,
    chunk_rows: int | None = None,
) -> FloatArray:
    """Label-quality score of every example; lower means more likely mislabelled.

    Parameters
    ----------
    method : {"self_confidence", "normalized_margin", "confidence_weighted_entropy"}
        ``p[label]``; ``(p[label] - max_{j != label} p[j] + 1) / 2``; or normalized entropy
        over self-confidence, rescaled.
    adjust_pred_probs : bool, default False
        Subtract each class's confident threshold and renormalise first (not with entropy).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    adjust = check_rank_options(method, {"adjust_pred_probs": adjust_pred_probs})
    scan = Scan(
        labels,
        pred_probs,
        chunk_rows=chunk_rows,
        need_max_other=method == "normalized_margin" and not adjust,
    )
    return scores_of_rows(scan, np.arange(scan.n), method, adjust)


def order_label_issues(
    label_issues_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    pred_probs: ProbsLike,
    *,
    rank_by: str = "self_confidence",
    rank_by_kwargs: dict[str, Any] | None = None,
    chunk_rows: int | None = None,
) -> IntArray:
    """Indices of the flagged examples, by label-quality score, lowest first.

    Parameters
    ----------
    label_issues_mask : array_like of bool, shape (n,)
    rank_by : str, default "self_confidence"
        See :func:`get_label_quality_scores`.
    rank_by_kwargs : dict, optional
        ``{"adjust_pred_probs": bool}``.

    Returns
    -------
    numpy.ndarray of intp, shape (m,)
        Ties keep row order.
    """
    check_rank_options(rank_by, rank_by_kwargs)
    scan = Scan(labels, pred_probs, chunk_rows=chunk_rows)
    mask = np.asarray(label_issues_mask)
    if mask.shape != (scan.n,) or mask.dtype != np.bool_:
        raise InvalidInputError(
            f"label_issues_mask must be a boolean array of shape ({scan.n},), got "
            f"{mask.dtype} of shape {mask.shape}"
        )
    rows, _ = rank_issues(scan, mask, rank_by=rank_by, rank_by_kwargs=rank_by_kwargs)
    return rows
