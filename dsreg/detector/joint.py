"""Arithmetic on a ``(k, k)`` confident joint: checks, calibration, rounding, normalising.

The part of ``cleanlab.count`` that needs no probabilities: the matrices and label counts that
:mod:`dsreg.detector.count` computes in passes over them are finished here, with cleanlab's
expressions in cleanlab's operand order (so the rounding is bit-identical) and stable sorts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dsreg.errors import InvalidInputError, ProbabilitiesError

__all__ = [
    "FLOATING_POINT_COMPARISON",
    "TINY_VALUE",
    "calibrate_confident_joint",
    "check_joint",
    "normalise_joint",
    "round_preserving_row_totals",
    "round_preserving_sum",
]

# cleanlab.internal.constants
FLOATING_POINT_COMPARISON = 1e-6
TINY_VALUE = 1e-100

Int64Array = npt.NDArray[np.int64]


def round_preserving_sum(iterable: npt.ArrayLike) -> npt.NDArray[np.int_]:
    """Round floats to ints keeping their (rounded) sum; cleanlab's, with a stable sort.

    Parameters
    ----------
    iterable : array_like of float, shape (m,)

    Returns
    -------
    numpy.ndarray of int, shape (m,)
    """
    floats = np.asarray(iterable, dtype=float)
    ints = floats.round()
    orig_sum = np.sum(floats).round()
    int_sum = np.sum(ints).round()
    while abs(int_sum - orig_sum) > FLOATING_POINT_COMPARISON:
        diff = np.round(orig_sum - int_sum)
        increment = -1 if int(diff < 0.0) else 1
        changes = min(int(abs(diff)), len(floats))
        # Stable where cleanlab's is not: which of two equal remainders gets the extra unit.
        indices = np.argsort(floats - ints, kind="stable")[::-increment][:changes]
        for i in indices:
            ints[i] = ints[i] + increment
        int_sum = np.sum(ints).round()
    return ints.astype(int)


def round_preserving_row_totals(confident_joint: npt.ArrayLike) -> npt.NDArray[np.int_]:
    """Round a ``(k, k)`` float matrix to ints, preserving each row's total.

    Parameters
    ----------
    confident_joint : array_like of float, shape (k, k)

    Returns
    -------
    numpy.ndarray of int, shape (k, k)
    """
    # round_preserving_sum applied to every row at once (cleanlab loops in Python). The same
    # floats: each row's total is numpy's pairwise sum of that row, which a C-ordered
    # row-wise reduction reproduces; integer-valued totals are exact in any order. Only the
    # *set* of entries adjusted matters, and a stable argsort per row picks the same set.
    floats = np.array(confident_joint, dtype=float, order="C", ndmin=2)
    ints = floats.round()
    orig_sum = floats.sum(axis=1).round()
    int_sum = ints.sum(axis=1).round()
    width = floats.shape[1]
    todo = np.flatnonzero(np.abs(int_sum - orig_sum) > FLOATING_POINT_COMPARISON)
    while todo.size:
        diff = np.round(orig_sum[todo] - int_sum[todo])
        increment = np.where(diff < 0.0, -1.0, 1.0)
        changes = np.minimum(np.abs(diff).astype(np.int64), width)
        order = np.argsort(floats[todo] - ints[todo], axis=1, kind="stable")
        position = np.empty_like(order)
        np.put_along_axis(position, order, np.arange(width)[None, :], axis=1)
        # +1 goes to the last ``changes`` of the ascending order, -1 to the first ones.
        chosen = np.where(
            increment[:, None] > 0,
            position >= (width - changes)[:, None],
            position < changes[:, None],
        )
        ints[todo] += chosen * increment[:, None]
        int_sum[todo] = ints[todo].sum(axis=1).round()
        todo = todo[np.abs(int_sum[todo] - orig_sum[todo]) > FLOATING_POINT_COMPARISON]
    return ints.astype(int)


def _label_counts(labels: npt.ArrayLike, k: int) -> Int64Array:
    array = np.asarray(labels)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise ProbabilitiesError(
            f"labels must be a 1-D array of integer class indices, got {array.dtype} "
            f"of shape {array.shape}"
        )
    if array.size and (array.min() < 0 or array.max() >= k):
        raise ProbabilitiesError(
            f"labels must lie in [0, {k}) to match a ({k}, {k}) confident joint; "
            f"got values from {array.min()} to {array.max()}"
        )
    return np.bincount(array.astype(np.intp), minlength=k).astype(np.int64)


def check_joint(confident_joint: npt.ArrayLike, k: int | None = None) -> npt.NDArray[Any]:
    """Check that a confident joint is a square matrix of finite, non-negative counts.

    Parameters
    ----------
    confident_joint : array_like, shape (k, k)
    k : int, optional
        The number of classes it must have.

    Returns
    -------
    numpy.ndarray, shape (k, k)

    Raises
    ------
    InvalidInputError
        Another shape, or a value that is not a finite, non-negative number.
    """
    cj = np.asarray(confident_joint)
    if cj.ndim != 2 or cj.shape[0] != cj.shape[1] or (k is not None and cj.shape[0] != k):
        want = f"({k}, {k})" if k is not None else "(k, k)"
        raise InvalidInputError(f"confident_joint must have shape {want}, got {cj.shape}")
    if cj.dtype.kind not in "iuf" or not np.isfinite(cj).all() or (cj < 0).any():
        raise InvalidInputError("confident_joint must hold finite, non-negative counts")
    return cj


def calibrate_confident_joint(
    confident_joint: npt.ArrayLike, labels: npt.ArrayLike
) -> npt.NDArray[np.int_]:
    """Scale a confident joint so rows sum to the label counts and the total is ``n``.

    Parameters
    ----------
    confident_joint : array_like, shape (k, k)
        ``confident_joint[given, true]`` counts.
    labels : array_like of int, shape (n,)
        Given labels.

    Returns
    -------
    numpy.ndarray of int, shape (k, k)
        Rounded so that every row total is preserved.
    """
    cj = check_joint(confident_joint)
    label_counts = _label_counts(labels, len(cj))
    # Same expression, operand order and layouts as cleanlab, for identical rounding.
    calibrated_cj = (cj.T / np.clip(cj.sum(axis=1), a_min=TINY_VALUE, a_max=None) * label_counts).T
    calibrated_cj = (
        calibrated_cj
        / np.clip(np.sum(calibrated_cj), a_min=TINY_VALUE, a_max=None)
        * sum(label_counts)
    )
    return round_preserving_row_totals(calibrated_cj)


def normalise_joint(calibrated: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Divide a (calibrated) joint by its total, so that it sums to 1.

    Parameters
    ----------
    calibrated : array_like, shape (k, k)

    Returns
    -------
    numpy.ndarray of float64, shape (k, k)
    """
    total = np.clip(float(np.sum(calibrated)), a_min=TINY_VALUE, a_max=None)
    return np.asarray(calibrated / total, dtype=np.float64)
