"""The detector's result: what the overlay is built from."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest

from dsreg.detector import count
from dsreg.detector.detector import Detection, detect
from dsreg.detector.options import DetectorOptions
from dsreg.errors import InvalidInputError, ProbabilitiesError


def make(n: int = 4000, k: int = 7, seed: int = 3, decimals: int | None = 2) -> Any:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    z = rng.standard_normal((n, k)) * 1.5
    z[np.arange(n), truth] += 2.5
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    if decimals is not None:
        p = np.round(p, decimals)
        p /= p.sum(axis=1, keepdims=True)
    labels = np.where(rng.random(n) < 0.2, rng.integers(0, k, n), truth)
    return labels, p


@pytest.mark.parametrize(
    "rank_by", ["self_confidence", "normalized_margin", "confidence_weighted_entropy"]
)
def test_detection_is_consistent(rank_by: str) -> None:
    labels, probs = make()
    found = detect(labels, probs, DetectorOptions(rank_by=rank_by))
    n, k = probs.shape
    assert (found.n, found.k) == (n, k)
    assert len(found) == found.rows.size > 0
    assert found.rows.dtype == np.int64 and np.unique(found.rows).size == found.rows.size
    # Worst first; equal scores keep row order.
    assert (np.diff(found.scores) >= 0).all()
    tied = np.diff(found.scores) == 0
    assert tied.any() and (np.diff(found.rows)[tied] > 0).all()
    assert np.array_equal(found.given_labels, labels[found.rows])
    assert np.array_equal(found.suggested_labels, probs[found.rows].argmax(axis=1))
    # Flagged rows are never ones whose label is the model's top class.
    assert (found.suggested_labels != found.given_labels).all()
    assert np.array_equal(found.issues_per_class, np.bincount(found.given_labels, minlength=k))
    assert found.confident_joint.shape == (k, k)
    assert np.array_equal(found.confident_joint.sum(axis=1), np.bincount(labels, minlength=k))
    assert 0.0 <= found.noise_rate <= 1.0
    assert round(found.noise_rate * n) == count.num_label_issues(
        labels, probs, estimation_method="off_diagonal_calibrated"
    )
    assert found.num_issues_estimate == count.num_label_issues(labels, probs)
    assert found.renormalized_rows == 0


def test_noise_rate_tracks_the_injected_noise() -> None:
    labels, probs = make(n=20000, k=5, seed=1, decimals=None)
    rng = np.random.default_rng(2)
    noisy = labels.copy()
    flip = rng.random(labels.size) < 0.1
    noisy[flip] = (noisy[flip] + rng.integers(1, 5, int(flip.sum()))) % 5
    assert detect(noisy, probs).noise_rate > detect(labels, probs).noise_rate + 0.05


def test_params_are_json_and_the_record_round_trips() -> None:
    labels, probs = make()
    options = DetectorOptions(filter_by="both", frac_noise=0.5, min_examples_per_class=3)
    found = detect(labels, probs, options)
    assert found.params == {
        "method": "confident_learning",
        "filter_by": "both",
        "rank_by": "self_confidence",
        "adjust_pred_probs": False,
        "frac_noise": 0.5,
        "num_to_remove_per_class": None,
        "min_examples_per_class": 3,
        "estimation_method": "off_diagonal",
        "ties": "stable",
    }
    text = json.dumps(found.to_dict())
    back = Detection.from_dict(json.loads(text))
    for name in Detection.__slots__:
        a, b = getattr(found, name), getattr(back, name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        else:
            assert a == b, name
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.noise_rate = 0.0  # type: ignore[misc]


def test_float16_scores_keep_their_dtype_through_json() -> None:
    labels, probs = make(decimals=None)
    found = detect(labels, probs.astype(np.float16))
    assert found.scores.dtype == np.float16
    back = Detection.from_dict(json.loads(json.dumps(found.to_dict())))
    assert back.scores.dtype == np.float16 and np.array_equal(back.scores, found.scores)


def test_num_to_remove_per_class_is_recorded() -> None:
    labels, probs = make(k=4)
    options = DetectorOptions(filter_by="prune_by_class", num_to_remove_per_class=[3, 0, 5, 1])
    found = detect(labels, probs, options)
    assert found.params["num_to_remove_per_class"] == [3, 0, 5, 1]
    assert (found.issues_per_class <= [3, 0, 5, 1]).all()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"filter_by": "prune_by_magic"}, "filter_by must be one of"),
        ({"rank_by": "loss"}, "rank_by must be one of"),
        ({"frac_noise": 0.0}, r"frac_noise must be in \(0, 1\]"),
        ({"frac_noise": 0.5, "filter_by": "confident_learning"}, "only apply to filter_by"),
        ({"num_to_remove_per_class": [1, 2]}, "must hold 7 non-negative integers"),
        ({"num_to_remove_per_class": [1] * 7, "filter_by": "low_self_confidence"}, "only apply"),
        ({"min_examples_per_class": -1}, "non-negative integer"),
        ({"rank_by_kwargs": {"adjust": True}}, "accepts only 'adjust_pred_probs'"),
        (
            {
                "rank_by": "confidence_weighted_entropy",
                "rank_by_kwargs": {"adjust_pred_probs": True},
            },
            "not supported for confidence_weighted_entropy",
        ),
        ({"estimation_method": "off_diagonal_custom"}, "estimation_method must be"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    labels, probs = make(n=300)
    with pytest.raises(InvalidInputError, match=message):
        detect(labels, probs, DetectorOptions(**options))


def test_bad_inputs_are_refused_before_any_work() -> None:
    labels, probs = make(n=300)
    with pytest.raises(ProbabilitiesError, match="there are 299 labels but 300 rows"):
        detect(labels[:-1], probs)
    with pytest.raises(ProbabilitiesError, match=r"labels 9 are outside \[0, 7\)"):
        detect(np.where(labels == 0, 9, labels), probs)
    with pytest.raises(ProbabilitiesError, match="sum to 1"):
        detect(labels, probs * 0.5)


def test_renormalised_rows_are_reported() -> None:
    labels, probs = make(n=500, decimals=None)
    probs[:10] *= 1.0008
    found = detect(labels, probs)
    assert found.renormalized_rows == 10
    assert found.to_dict()["renormalized_rows"] == 10
