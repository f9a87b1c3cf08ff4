"""Confident-learning counts: thresholds, the confident joint, calibration, issue counts.

Mirrors ``cleanlab.count`` (cleanlab 2.x; Northcutt, Jiang, Chuang, JAIR 2021) in numpy only,
with the same arithmetic in the same dtypes and the same order, so that results are
bit-identical to cleanlab's, except that every sort is stable (``kind="stable"``): where
cleanlab's order depends on numpy's unstable sort, dsreg's is defined and the same on every
machine.

Probabilities are read in row chunks through :class:`Scan`, which computes the per-row
quantities confident learning needs in a few passes and keeps only ``n``-length vectors; the
``(n, k)`` matrix itself is never copied. The arithmetic on the resulting ``(k, k)`` joint
(calibration, rounding) is :mod:`dsreg.detector.joint`'s; its functions are re-exported here, as
in ``cleanlab.count``. See ``docs/detector.md``.

The public functions take cleanlab's arguments: ``labels`` (array_like of int, shape (n,), in
``[0, k)``), ``pred_probs`` (array_like of shape (n, k), a ``.npy`` or Parquet path, or a
``ProbabilitySource``) and, dsreg's own, ``chunk_rows`` (rows read at a time; it never changes
a result). Their docstrings describe the other parameters.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.detector.joint import (
    FLOATING_POINT_COMPARISON,
    Int64Array,
    calibrate_confident_joint,
    check_joint,
    normalise_joint,
    round_preserving_row_totals,
    round_preserving_sum,
)
from dsreg.detector.probs import open_probabilities
from dsreg.detector.source import (
    CHUNKS_IN_USE,
    FloatArray,
    IntArray,
    ProbabilitySource,
    first_values,
)
from dsreg.errors import InvalidInputError, ProbabilitiesError

__all__ = [
    "ESTIMATION_METHODS",
    "Scan",
    "calibrate_confident_joint",
    "check_joint",
    "check_labels",
    "compute_confident_joint",
    "estimate_joint",
    "estimate_noise_rate",
    "get_confident_thresholds",
    "num_label_issues",
    "round_preserving_row_totals",
    "round_preserving_sum",
]

#: Chunks a pass works on at once, each on a thread (:meth:`Scan.map_chunks`): as many as a
#: source keeps readable behind the one it reads.
WORKERS = CHUNKS_IN_USE
_T = TypeVar("_T")

# cleanlab.internal.constants
CONFIDENT_THRESHOLDS_LOWER_BOUND = 2 * FLOATING_POINT_COMPARISON

ESTIMATION_METHODS = ("off_diagonal", "off_diagonal_calibrated", "off_diagonal_custom")

ProbsLike = npt.ArrayLike | str | os.PathLike[str] | ProbabilitySource
BoolArray = npt.NDArray[np.bool_]


class _RowVectors(NamedTuple):
    """What pass 1 keeps of every row (see :class:`Scan`'s properties of the same names)."""

    self_confidence: FloatArray
    argmax: IntArray
    reduce_mask: BoolArray
    max_other: FloatArray | None


def _index_dtype(k: int) -> np.dtype[Any]:
    # Signed, so -1 can mean "no confident class"; small, because there are n of them.
    return np.dtype(np.int16) if k < 2**15 else np.dtype(np.int32)


def _work_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    # numpy's float16 loops are several times slower than float32 ones; float16 -> float32 is
    # exact, and comparisons, argmax and max give the same answers on the widened values.
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def ceil_to_dtype(values: npt.NDArray[Any], dtype: np.dtype[Any]) -> FloatArray:
    """Smallest values of ``dtype`` that are >= ``values`` (elementwise).

    For ``x`` of ``dtype``, ``x >= values`` (compared exactly, as numpy does after promoting)
    holds exactly when ``x >= ceil_to_dtype(values, dtype)``; comparing in the narrow dtype
    avoids widening every chunk.
    """
    wide = np.asarray(values, dtype=np.float64)
    narrow = wide.astype(dtype)
    low = narrow.astype(np.float64) < wide
    narrow[low] = np.nextafter(narrow[low], np.inf)
    return narrow


def check_labels(labels: npt.ArrayLike, *, n: int, k: int) -> IntArray:
    """Validate given labels against ``n`` rows and ``k`` classes.

    Parameters
    ----------
    labels : array_like, shape (n,)
        Integer class indices in ``[0, k)``.
    n : int
        Number of rows of the probabilities.
    k : int
        Number of classes.

    Returns
    -------
    numpy.ndarray of intp, shape (n,)

    Raises
    ------
    ProbabilitiesError
        Labels that are not 1-D integers, whose length is not ``n``, or outside ``[0, k)``.
    """
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ProbabilitiesError(
            f"labels must be a 1-D array of class indices, got shape {array.shape}"
        )
    integral = False
    if array.dtype.kind == "f" and array.size:
        with np.errstate(invalid="ignore"):  # inf labels: mod is NaN, so not integral
            integral = bool(np.all(np.mod(array, 1) == 0))
    if array.dtype.kind not in "iu" and not integral:
        raise ProbabilitiesError(
            f"labels must be integer class indices, got dtype {array.dtype}: convert "
            "class names to indices into the class list first"
        )
    if len(array) != n:
        raise ProbabilitiesError(
            f"there are {len(array)} labels but {n} rows of predicted probabilities; "
            "both must describe the same examples in the same order"
        )
    outside = (array < 0) | (array >= k)
    if outside.any():
        rows = np.flatnonzero(outside)
        values = np.unique(array[rows])
        raise ProbabilitiesError(
            f"labels {first_values(values)} are outside [0, {k}) (first at row {int(rows[0])}); "
            f"the probabilities have {k} columns, one per class: check that both use the same "
            "class list"
        )
    return array.astype(np.intp, copy=False)


class Scan:
    """Per-row quantities of one labelled probability matrix, computed in passes and cached.

    Pass 1 keeps each row's self-confidence, argmax, ``_reduce_issues`` flag and (if asked)
    largest other probability; the thresholds follow from the self-confidences. Pass 2 keeps
    each row's confident class. Both run on first use; later steps work on these vectors.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Given labels, in ``[0, k)``.
    pred_probs : array_like, str, os.PathLike or ProbabilitySource
        Probabilities of shape ``(n, k)``; see :func:`~dsreg.detector.probs.open_probabilities`.
    chunk_rows : int, optional
        Rows per chunk. Results do not depend on it.
    need_max_other : bool, default False
        Also keep ``max_{j != label} p[i, j]`` from pass 1 (normalized margins of every row).
    progress : callable, optional
        ``progress(task, rows_done, n)`` after each chunk of each pass over the probabilities
        (task ``"detecting, pass 1"``, ``"detecting, pass 2"``, ...); says nothing by default.
    """

    def __init__(
        self,
        labels: npt.ArrayLike,
        pred_probs: ProbsLike,
        *,
        chunk_rows: int | None = None,
        need_max_other: bool = False,
        progress: ProgressHook = no_progress,
    ) -> None:
        self.source = open_probabilities(pred_probs)
        self.n, self.k = self.source.n, self.source.k
        self.dtype = self.source.dtype
        self.labels = check_labels(labels, n=self.n, k=self.k)
        self.chunk_rows = chunk_rows
        self.counts: Int64Array = np.bincount(self.labels, minlength=self.k).astype(np.int64)
        self.need_max_other = need_max_other
        self.progress = progress
        self._passes = 0
        self._pass1: _RowVectors | None = None
        self._order: IntArray | None = None
        self._thresholds: FloatArray | None = None
        self._guess: IntArray | None = None
        self._cj_counts: Int64Array | None = None
        self._calibrated: Int64Array | None = None

    def chunks(self) -> Iterator[tuple[int, FloatArray]]:
        """Validated ``(start, chunk)`` pairs; see :meth:`ProbabilitySource.chunks`. Each call
        is one pass, reported to ``progress`` chunk by chunk."""
        self._passes += 1
        task = f"detecting, pass {self._passes}"
        for start, chunk in self.source.chunks(self.chunk_rows):
            yield start, chunk
            self.progress(task, start + len(chunk), self.n)

    def map_chunks(self, work: Callable[[int, FloatArray], _T]) -> Iterator[_T]:
        """``work(start, chunk)`` for every chunk of one pass, the results in row order.

        Chunks are worked on ``WORKERS`` at a time, each on a thread of its own, while the
        next is read (and in the first pass validated) on this one: numpy releases the GIL in
        its loops, so a pass keeps more than one core busy. ``work`` writes only what belongs
        to its rows; whatever depends on earlier chunks is done with the results, in order."""
        with ThreadPoolExecutor(WORKERS) as pool:
            pending: deque[Future[_T]] = deque()
            for start, chunk in self.chunks():
                pending.append(pool.submit(work, start, chunk))
                while len(pending) > WORKERS:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    # -- pass 1 -------------------------------------------------------------------------------

    def _run_pass1(self) -> _RowVectors:
        if self._pass1 is not None:
            return self._pass1
        n, dtype = self.n, self.dtype
        work = _work_dtype(dtype)
        self_conf = np.empty(n, dtype=dtype)
        argmax = np.empty(n, dtype=_index_dtype(self.k))
        reduce = np.empty(n, dtype=bool)
        max_other = np.empty(n, dtype=dtype) if self.need_max_other else None

        def rows_of(start: int, chunk: FloatArray) -> None:
            stop = start + len(chunk)
            lab = self.labels[start:stop]
            rows = np.arange(len(chunk))
            wide = chunk.astype(work, copy=False)
            sc = chunk[rows, lab]
            top_at = wide.argmax(axis=1)
            top = wide[rows, top_at]
            # cleanlab's _reduce_issues adds 1e-6 to p[i, label] in the input dtype and asks
            # whether argmax (first maximum) lands on the label. Without copying the chunk:
            # the label wins ties only against columns after it.
            boosted = sc + FLOATING_POINT_COMPARISON
            reduce[start:stop] = (
                (top_at == lab)
                | ((top_at < lab) & (boosted > top))
                | ((top_at > lab) & (boosted >= top))
            )
            self_conf[start:stop] = sc
            argmax[start:stop] = top_at
            if max_other is not None:
                others = np.array(wide, copy=True)
                others[rows, lab] = -np.inf
                max_other[start:stop] = others.max(axis=1)

        for _ in self.map_chunks(rows_of):
            pass
        self._pass1 = _RowVectors(self_conf, argmax, reduce, max_other)
        return self._pass1

    @property
    def self_confidence(self) -> FloatArray:
        """``p[i, labels[i]]`` in the input dtype, shape (n,)."""
        return self._run_pass1().self_confidence

    @property
    def argmax(self) -> IntArray:
        """``argmax(p[i])`` (first maximum), shape (n,)."""
        return self._run_pass1().argmax

    @property
    def reduce_mask(self) -> BoolArray:
        """Rows cleanlab's ``_reduce_issues`` clears: the label is the argmax after +1e-6."""
        return self._run_pass1().reduce_mask

    @property
    def max_other(self) -> FloatArray | None:
        """``max_{j != labels[i]} p[i, j]`` if requested at construction, else None."""
        return self._run_pass1().max_other

    def class_rows(self, c: int) -> IntArray:
        """Rows labelled ``c``, ascending."""
        if self._order is None:
            # A stable sort of small integers is a radix sort in numpy: the same order as
            # sorting the intp labels, in linear time.
            self._order = np.argsort(self.labels.astype(_index_dtype(self.k)), kind="stable")
            self._bounds = np.concatenate(([0], np.cumsum(self.counts)))
        return self._order[self._bounds[c] : self._bounds[c + 1]]

    @property
    def thresholds(self) -> FloatArray:
        """Per-class confident thresholds, as ``cleanlab.count.get_confident_thresholds``."""
        if self._thresholds is None:
            sc = self.self_confidence
            # cleanlab: np.mean(pred_probs[:, k][labels == k]); the same elements in the same
            # order and dtype, so the same pairwise sum. Absent classes get 2 (never reached).
            values = [
                np.mean(sc[self.class_rows(c)]) if self.counts[c] > 0 else 2 for c in range(self.k)
            ]
            # The list itself (not an array of it) so numpy promotes exactly as for cleanlab.
            self._thresholds = np.clip(
                cast(Any, values), a_min=CONFIDENT_THRESHOLDS_LOWER_BOUND, a_max=None
            )
        return self._thresholds

    # -- pass 2 -------------------------------------------------------------------------------

    def confident_pass(
        self, thresholds: npt.ArrayLike | None = None
    ) -> tuple[IntArray, Int64Array]:
        """Each row's confident class (-1 for none) and the raw ``(k, k)`` confident counts.

        Parameters
        ----------
        thresholds : array_like, shape (k,), optional
            Per-class thresholds; default :attr:`thresholds` (and then the result is cached).

        Returns
        -------
        guess : numpy.ndarray, shape (n,)
            cleanlab's ``true_label_guess``, or -1 where no class reaches its threshold.
        counts : numpy.ndarray of int64, shape (k, k)
            ``counts[given, guess]`` before the diagonal is raised to at least 1.
        """
        cache = thresholds is None
        if cache and self._guess is not None and self._cj_counts is not None:
            return self._guess, self._cj_counts
        thr = self.thresholds if thresholds is None else np.asarray(thresholds).reshape(-1)
        if thr.shape != (self.k,):
            raise InvalidInputError(
                f"thresholds must have one value per class ({self.k}), got shape {thr.shape}"
            )
        k = self.k
        # cleanlab: pred_probs >= thresholds - 1e-6, compared after numpy's type promotion.
        # A comparison is exact, so compare in the chunk's own (widened) dtype instead.
        cutoff = np.asarray(thr - 1e-6)
        limit = ceil_to_dtype(cutoff, _work_dtype(self.dtype))
        argmax = self.argmax
        guess = np.empty(self.n, dtype=_index_dtype(k))

        def counts_of(start: int, chunk: FloatArray) -> Int64Array:
            stop = start + len(chunk)
            confident = chunk.astype(limit.dtype, copy=False) >= limit
            # Summing the bytes is several times faster than count_nonzero along an axis.
            how_many = (
                confident.view(np.uint8).sum(axis=1, dtype=np.uint16)
                if k < 2**16
                else np.count_nonzero(confident, axis=1)
            )
            first = confident.argmax(axis=1)
            g = np.where(how_many > 1, argmax[start:stop], first)
            g[how_many == 0] = -1
            guess[start:stop] = g
            ok = how_many > 0
            return np.bincount(
                self.labels[start:stop][ok] * k + g[ok].astype(np.intp), minlength=k * k
            )

        flat = np.zeros(k * k, dtype=np.int64)
        for part in self.map_chunks(counts_of):
            flat += part
        counts = flat.reshape(k, k)
        if cache:
            self._guess, self._cj_counts = guess, counts
        return guess, counts

    def off_diagonal(self) -> BoolArray:
        """Rows counted off the diagonal of the confident joint (cleanlab's indices)."""
        guess, _ = self.confident_pass()
        return np.asarray((guess >= 0) & (guess != self.labels))

    def confident_joint(self, *, calibrate: bool = True) -> Int64Array:
        """The ``(k, k)`` confident joint, as ``compute_confident_joint``."""
        _, counts = self.confident_pass()
        cj = _diagonal_at_least_one(counts)
        if not calibrate:
            return cj
        if self._calibrated is None:
            self._calibrated = calibrate_confident_joint(cj, self.labels)
        return self._calibrated.copy()


def _diagonal_at_least_one(counts: Int64Array) -> Int64Array:
    """cleanlab's confident joint from the confident counts: a copy, each class counted at
    least once on the diagonal."""
    cj = counts.copy()
    np.fill_diagonal(cj, cj.diagonal().clip(min=1))
    return cj


def get_confident_thresholds(
    labels: npt.ArrayLike, pred_probs: ProbsLike, *, chunk_rows: int | None = None
) -> FloatArray:
    """Per-class threshold: the mean self-confidence of the examples given that class.

    Returns
    -------
    numpy.ndarray, shape (k,)
        2 for classes no example is given (no probability reaches it).
    """
    return Scan(labels, pred_probs, chunk_rows=chunk_rows).thresholds


def compute_confident_joint(
    labels: npt.ArrayLike,
    pred_probs: ProbsLike,
    *,
    thresholds: npt.ArrayLike | None = None,
    calibrate: bool = True,
    return_indices_of_off_diagonals: bool = False,
    chunk_rows: int | None = None,
) -> Any:
    """Count examples confidently belonging to each (given label, true label) pair.

    Parameters
    ----------
    thresholds : array_like, shape (k,), optional
        Per-class thresholds; default :func:`get_confident_thresholds`.
    calibrate : bool, default True
        Apply :func:`calibrate_confident_joint`.
    return_indices_of_off_diagonals : bool, default False
        Also return the rows counted off the diagonal.

    Returns
    -------
    confident_joint : numpy.ndarray of int, shape (k, k)
    indices : numpy.ndarray of intp, shape (m,)
        Only with ``return_indices_of_off_diagonals``.
    """
    scan = Scan(labels, pred_probs, chunk_rows=chunk_rows)
    guess, counts = scan.confident_pass(thresholds)
    cj = _diagonal_at_least_one(counts)
    result = calibrate_confident_joint(cj, scan.labels) if calibrate else cj
    if return_indices_of_off_diagonals:
        return result, np.flatnonzero((guess >= 0) & (guess != scan.labels))
    return result


def estimate_joint(
    labels: npt.ArrayLike,
    pred_probs: ProbsLike | None = None,
    *,
    confident_joint: npt.ArrayLike | None = None,
    chunk_rows: int | None = None,
) -> npt.NDArray[np.float64]:
    """Estimate the joint distribution ``P(given label, true label)``, summing to 1.

    Parameters
    ----------
    pred_probs : array_like, shape (n, k), or a path or ProbabilitySource, optional
        Needed unless ``confident_joint`` is given.
    confident_joint : array_like, shape (k, k), optional
        Calibrated (again) before normalising, as cleanlab does.

    Returns
    -------
    numpy.ndarray of float64, shape (k, k)
    """
    if confident_joint is None:
        if pred_probs is None:
            raise InvalidInputError("estimate_joint needs pred_probs or confident_joint")
        calibrated = Scan(labels, pred_probs, chunk_rows=chunk_rows).confident_joint()
    else:
        calibrated = calibrate_confident_joint(confident_joint, labels)
    return normalise_joint(calibrated)


def _fraction_off_diagonal(scan: Scan, confident_joint: npt.ArrayLike | None) -> float:
    cj = scan.confident_joint() if confident_joint is None else confident_joint
    joint = normalise_joint(calibrate_confident_joint(cj, scan.labels))
    return float(1.0 - joint.trace())


def count_issues(
    scan: Scan, estimation_method: str, confident_joint: npt.ArrayLike | None = None
) -> int:
    """:func:`num_label_issues` on an existing :class:`Scan` (no extra passes)."""
    if estimation_method == "off_diagonal":
        return int(np.sum(scan.off_diagonal() & ~scan.reduce_mask))
    if estimation_method == "off_diagonal_calibrated":
        fraction = _fraction_off_diagonal(scan, None)
    else:
        if confident_joint is None:
            raise InvalidInputError(
                "estimation_method='off_diagonal_custom' needs confident_joint="
            )
        fraction = _fraction_off_diagonal(scan, check_joint(confident_joint, scan.k))
    return int(np.rint(fraction * scan.n).astype(int))


def num_label_issues(
    labels: npt.ArrayLike,
    pred_probs: ProbsLike,
    *,
    confident_joint: npt.ArrayLike | None = None,
    estimation_method: str = "off_diagonal",
    chunk_rows: int | None = None,
) -> int:
    """Estimate how many examples have label issues.

    Parameters
    ----------
    confident_joint : array_like, shape (k, k), optional
        Only with ``estimation_method="off_diagonal_custom"``.
    estimation_method : {"off_diagonal", "off_diagonal_calibrated", "off_diagonal_custom"}
        ``"off_diagonal"`` counts the rows off the confident joint's diagonal (less those
        whose label is the argmax within 1e-6), as ``find_label_issues(filter_by=
        "confident_learning")``. ``"off_diagonal_calibrated"`` rounds ``n`` times the
        off-diagonal mass of the calibrated joint (:func:`estimate_noise_rate`).

    Returns
    -------
    int
    """
    if estimation_method not in ESTIMATION_METHODS:
        raise InvalidInputError(
            f"estimation_method must be one of {', '.join(ESTIMATION_METHODS)}; "
            f"got {estimation_method!r}"
        )
    if confident_joint is not None and estimation_method != "off_diagonal_custom":
        raise InvalidInputError(
            "confident_joint is only used with estimation_method='off_diagonal_custom'; "
            "drop it or choose that method"
        )
    scan = Scan(labels, pred_probs, chunk_rows=chunk_rows)
    return count_issues(scan, estimation_method, confident_joint)


def noise_rate_of(scan: Scan) -> float:
    """:func:`estimate_noise_rate` on an existing :class:`Scan`."""
    return _fraction_off_diagonal(scan, None)


def estimate_noise_rate(
    labels: npt.ArrayLike, pred_probs: ProbsLike, *, chunk_rows: int | None = None
) -> float:
    """Estimated fraction of examples whose given label is wrong.

    ``1 - trace(joint)`` of the calibrated joint estimate, exactly the fraction that
    ``num_label_issues(estimation_method="off_diagonal_calibrated")`` multiplies by ``n``
    and rounds.

    Returns
    -------
    float
        In ``[0, 1]``.
    """
    return noise_rate_of(Scan(labels, pred_probs, chunk_rows=chunk_rows))
