"""The detector's options and vocabularies, light (no numpy): the command line offers the
vocabularies as choices, and the library builds :class:`DetectorOptions` once, for the detector
to read all the way down."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["FILTER_BY", "METHOD", "RANK_BY", "DetectorOptions"]

# Every filter_by of cleanlab.filter.find_label_issues.
FILTER_BY = (
    "prune_by_noise_rate",
    "prune_by_class",
    "both",
    "confident_learning",
    "predicted_neq_given",
    "low_normalized_margin",
    "low_self_confidence",
)
# The label-quality scores of cleanlab.rank.
RANK_BY = ("self_confidence", "normalized_margin", "confidence_weighted_entropy")
# What a detected overlay's provenance names as its method.
METHOD = "confident_learning"


@dataclass(frozen=True, slots=True, kw_only=True)
class DetectorOptions:
    """How the detector flags and ranks rows: cleanlab's options, names and defaults.

    The detector checks them against the input (``num_to_remove_per_class`` needs one count per
    class), so a value here is not yet known to be valid.

    Attributes
    ----------
    filter_by : str
        Which rows to flag; any of :data:`FILTER_BY`.
    rank_by : str
        The label-quality score that orders the flagged rows; any of :data:`RANK_BY`.
    rank_by_kwargs : mapping, optional
        ``{"adjust_pred_probs": bool}``.
    frac_noise : float
        Flag only this fraction of the estimated issues (pruning methods only).
    num_to_remove_per_class : array_like of int, shape (k,), optional
        Issues to flag per class (pruning methods only).
    min_examples_per_class : int
        Never flag a class down below this many examples.
    estimation_method : str
        How the number of issues is estimated: ``off_diagonal`` or ``off_diagonal_calibrated``.
    chunk_rows : int, optional
        Rows of probabilities read at a time (memory against per-call overhead). It never
        changes a result, so the provenance does not record it.
    """

    filter_by: str = "prune_by_noise_rate"
    rank_by: str = "self_confidence"
    rank_by_kwargs: Mapping[str, Any] | None = None
    frac_noise: float = 1.0
    num_to_remove_per_class: npt.ArrayLike | None = None
    min_examples_per_class: int = 1
    estimation_method: str = "off_diagonal"
    chunk_rows: int | None = None
