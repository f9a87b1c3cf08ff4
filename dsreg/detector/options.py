"""The detector's vocabularies, light (no numpy): the command line offers them as choices."""

from __future__ import annotations

__all__ = ["FILTER_BY", "RANK_BY"]

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
