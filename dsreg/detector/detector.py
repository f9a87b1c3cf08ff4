"""The label-error detector: confident learning from labels and predicted probabilities.

:func:`detect` flags the rows whose given label is likely wrong, ranks them, suggests a label
for each and estimates how noisy the labels are, in one go over the probabilities (which may be
a memory-mapped ``.npy`` or a Parquet file far larger than memory). Its results equal
``cleanlab.filter.find_label_issues`` with every sort stable; see ``docs/detector.md``. The
rest of dsreg turns a :class:`Detection` into an overlay of ``suspected`` rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.detector.count import ESTIMATION_METHODS, ProbsLike, Scan, count_issues, noise_rate_of
from dsreg.detector.filter import check_filter_options, issue_mask
from dsreg.detector.options import METHOD, DetectorOptions
from dsreg.detector.probs import ProbabilitySource, open_probabilities, sum_tolerance
from dsreg.detector.rank import check_rank_options, rank_issues
from dsreg.errors import InvalidInputError

__all__ = ["Detection", "DetectorOptions", "detect"]


def _ints(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    return np.asarray(values, dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class Detection:
    """What the detector found, row-aligned and ready to become an overlay.

    Attributes
    ----------
    rows : numpy.ndarray of int64, shape (m,)
        Flagged row positions, lowest label quality first (ties: lower row first).
    given_labels : numpy.ndarray of int64, shape (m,)
        The given label of each flagged row.
    suggested_labels : numpy.ndarray of int64, shape (m,)
        ``argmax`` of each flagged row's probabilities (first maximum).
    scores : numpy.ndarray, shape (m,)
        Label quality of each flagged row under ``params["rank_by"]``; ascending.
    confident_joint : numpy.ndarray of int64, shape (k, k)
        Calibrated confident joint, ``[given, true]``; sums to ``n``.
    num_issues_estimate : int
        ``num_label_issues`` under ``params["estimation_method"]``.
    noise_rate : float
        Estimated fraction of wrong labels: off-diagonal mass of the calibrated joint.
    issues_per_class : numpy.ndarray of int64, shape (k,)
        Flagged rows per given label.
    renormalized_rows : int
        Rows of probabilities whose sum was off from 1 by more than ``sum_tolerance`` (float
        rounding; at most 1e-3) and that were divided by it before detection.
    params : dict
        JSON-able parameters that produced this result (for the overlay's provenance).
    n, k : int
        Rows and classes of the input.
    sum_tolerance : float
        The largest ``|row sum - 1|`` taken as float rounding for the input's dtype and ``k``
        (:func:`dsreg.detector.probs.sum_tolerance`): rows further off were renormalised.
    """

    rows: npt.NDArray[np.int64]
    given_labels: npt.NDArray[np.int64]
    suggested_labels: npt.NDArray[np.int64]
    scores: npt.NDArray[np.floating[Any]]
    confident_joint: npt.NDArray[np.int64]
    num_issues_estimate: int
    noise_rate: float
    issues_per_class: npt.NDArray[np.int64]
    renormalized_rows: int
    params: dict[str, Any] = field(default_factory=dict)
    n: int
    k: int
    sum_tolerance: float = 0.0

    def __len__(self) -> int:
        return int(self.rows.size)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; floats are exact (Python floats round-trip through JSON)."""
        return {
            "rows": self.rows.tolist(),
            "given_labels": self.given_labels.tolist(),
            "suggested_labels": self.suggested_labels.tolist(),
            "scores": self.scores.astype(np.float64).tolist(),
            "score_dtype": self.scores.dtype.name,
            "confident_joint": self.confident_joint.tolist(),
            "num_issues_estimate": self.num_issues_estimate,
            "noise_rate": self.noise_rate,
            "issues_per_class": self.issues_per_class.tolist(),
            "renormalized_rows": self.renormalized_rows,
            "params": dict(self.params),
            "n": self.n,
            "k": self.k,
            "sum_tolerance": self.sum_tolerance,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Detection:
        """Inverse of :meth:`to_dict`."""
        return cls(
            rows=_ints(data["rows"]),
            given_labels=_ints(data["given_labels"]),
            suggested_labels=_ints(data["suggested_labels"]),
            scores=np.asarray(data["scores"], dtype=data.get("score_dtype", "float64")),
            confident_joint=_ints(data["confident_joint"]).reshape(data["k"], data["k"]),
            num_issues_estimate=int(data["num_issues_estimate"]),
            noise_rate=float(data["noise_rate"]),
            issues_per_class=_ints(data["issues_per_class"]),
            renormalized_rows=int(data["renormalized_rows"]),
            params=dict(data["params"]),
            n=int(data["n"]),
            k=int(data["k"]),
            sum_tolerance=float(data.get("sum_tolerance", 0.0)),
        )


def detect(
    labels: npt.ArrayLike,
    probs: ProbsLike | str | os.PathLike[str] | ProbabilitySource,
    options: DetectorOptions | None = None,
    *,
    progress: ProgressHook = no_progress,
) -> Detection:
    """Find, rank and relabel the likely label errors of a labelled set.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Given labels in ``[0, k)``, in the same row order as ``probs``.
    probs : array_like of shape (n, k), str, os.PathLike or ProbabilitySource
        Out-of-sample predicted probabilities: an array, or a ``.npy`` file (memory-mapped)
        or Parquet file (read in chunks); see :func:`~dsreg.detector.probs.open_probabilities`.
    options : DetectorOptions, optional
        Which rows to flag and how to rank them; cleanlab's defaults when omitted.
    progress : callable, optional
        ``progress(task, rows_done, n)`` after each chunk of each pass over the probabilities
        (``"detecting, pass 1"``, ...); the detector itself never prints.

    Returns
    -------
    Detection

    Raises
    ------
    ProbabilitiesError
        Probabilities or labels that are malformed (shape, NaN, negative, rows not summing
        to 1 within 1e-3, labels out of range).
    InvalidInputError
        Options that are unknown or do not apply to ``filter_by``.
    InputPathError
        A probabilities path that does not exist.
    """
    options = options if options is not None else DetectorOptions()
    _check_estimation_method(options.estimation_method)
    adjust = check_rank_options(options.rank_by, options.rank_by_kwargs)
    source = open_probabilities(probs)
    scan = Scan(
        labels,
        source,
        chunk_rows=options.chunk_rows,
        need_max_other=_needs_max_other(options, adjust),
        progress=progress,
    )
    check_filter_options(scan.k, options)
    mask = issue_mask(scan, options)
    rows, scores = rank_issues(
        scan, mask, rank_by=options.rank_by, rank_by_kwargs=options.rank_by_kwargs
    )
    given = scan.labels[rows]
    return Detection(
        rows=_ints(rows),
        given_labels=_ints(given),
        suggested_labels=_ints(scan.argmax[rows]),
        scores=scores,
        confident_joint=_ints(scan.confident_joint()),
        num_issues_estimate=count_issues(scan, options.estimation_method),
        noise_rate=noise_rate_of(scan),
        issues_per_class=_ints(np.bincount(given, minlength=scan.k)),
        renormalized_rows=source.renormalized_rows,
        params=_provenance(options, adjust),
        n=scan.n,
        k=scan.k,
        sum_tolerance=sum_tolerance(source.dtype, source.k),
    )


def _check_estimation_method(method: str) -> None:
    if method not in ESTIMATION_METHODS[:2]:
        raise InvalidInputError(
            f"estimation_method must be 'off_diagonal' or 'off_diagonal_calibrated'; got {method!r}"
        )


def _needs_max_other(options: DetectorOptions, adjust: bool) -> bool:
    """Whether pass 1 keeps each row's largest other probability: the filter or the ranking
    scores every row's normalized margin from it (an adjusted margin is computed apart)."""
    return options.filter_by == "low_normalized_margin" or (
        options.rank_by == "normalized_margin" and not adjust
    )


def _provenance(options: DetectorOptions, adjust: bool) -> dict[str, Any]:
    """The JSON-able parameters a detected overlay records (part of its digest): the checked
    options, ``adjust_pred_probs`` as read from ``rank_by_kwargs``, and not ``chunk_rows``
    (it never changes a result)."""
    counts = options.num_to_remove_per_class
    return {
        "method": METHOD,
        "filter_by": options.filter_by,
        "rank_by": options.rank_by,
        "adjust_pred_probs": adjust,
        "frac_noise": float(options.frac_noise),
        "num_to_remove_per_class": (
            None if counts is None else [int(v) for v in np.asarray(counts).tolist()]
        ),
        "min_examples_per_class": int(options.min_examples_per_class),
        "estimation_method": options.estimation_method,
        "ties": "stable",
    }
