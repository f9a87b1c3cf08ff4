"""dsreg's confident learning equals cleanlab 2.x run with every ``np.argsort`` stable.

The oracle is cleanlab itself (a test-time dependency only): inside each test, ``numpy.argsort``
is patched to ``kind="stable"`` (cleanlab's only ordering primitive on these code paths; it calls
no ``argpartition``/``sort``/``ndarray.argsort`` there) and cleanlab runs with ``n_jobs=1`` so the
patch applies in-process. Parity is exact: masks, ranked orders and scores are compared with
``np.array_equal`` (scores also by dtype), counts and confident joints by equality.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.detector import count, filter, rank
from dsreg.detector.detector import detect
from dsreg.detector.options import DetectorOptions

with warnings.catch_warnings():
    # cleanlab's own imports (sklearn, pandas) may warn on newer numpy; not ours to fail on.
    warnings.simplefilter("ignore")
    cl_filter = pytest.importorskip("cleanlab.filter", reason="cleanlab is the parity oracle")
    import cleanlab.count as cl_count
    import cleanlab.rank as cl_rank
    from cleanlab.internal.util import round_preserving_row_totals as cl_round_rows

FILTER_BY = filter.FILTER_BY
RANK_BY = rank.RANK_BY


@contextmanager
def stable_sorts() -> Iterator[None]:
    """Run cleanlab with stable argsorts; silence only its small-class warning."""
    original = np.argsort

    def stable_argsort(a: Any, axis: int = -1, kind: Any = None, order: Any = None) -> Any:
        return original(a, axis=axis, kind="stable", order=order)

    np.argsort = stable_argsort  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="May not flag all label issues", category=UserWarning
            )
            yield
    finally:
        np.argsort = original  # type: ignore[assignment]


def cleanlab_find(labels: Any, probs: Any, **kwargs: Any) -> Any:
    with stable_sorts():
        return cl_filter.find_label_issues(labels, probs, n_jobs=1, **kwargs)


def synthetic(
    n: int,
    k: int,
    *,
    seed: int,
    dtype: Any = np.float64,
    decimals: int | None = None,
    imbalance: float = 0.0,
    missing: int | None = None,
    noise: float = 0.2,
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded labels and softmax probabilities with label noise.

    ``decimals`` rounds the probabilities (then renormalises in float64), so ties abound;
    ``imbalance`` skews class priors (Zipf-like); ``missing`` is a class no example is given.
    """
    rng = np.random.default_rng(seed)
    prior = 1.0 / np.arange(1, k + 1) ** imbalance
    truth = rng.choice(k, size=n, p=prior / prior.sum())
    logits = rng.standard_normal((n, k)) * 1.5
    logits[np.arange(n), truth] += 2.5
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    if decimals is not None:
        probs = np.round(probs, decimals)
        probs /= probs.sum(axis=1, keepdims=True)
    labels = truth.copy()
    flip = rng.random(n) < noise
    labels[flip] = rng.integers(0, k, int(flip.sum()))
    if missing is not None:
        labels[labels == missing] = (missing + 1) % k
    return labels, probs.astype(dtype)


DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "f64-k3": lambda: synthetic(600, 3, seed=0),
    "f32-k7-missing-class": lambda: synthetic(2000, 7, seed=1, dtype=np.float32, missing=2),
    "f64-k5-rounded": lambda: synthetic(3000, 5, seed=2, decimals=2),
    "f32-k10-rounded-imbalanced": lambda: synthetic(
        3000, 10, seed=3, dtype=np.float32, decimals=2, imbalance=1.2, missing=0
    ),
    "f16-k4": lambda: synthetic(1500, 4, seed=4, dtype=np.float16),
    "f16-k6-rounded": lambda: synthetic(4000, 6, seed=5, dtype=np.float16, decimals=2, missing=3),
    "f32-k40-tiny-classes": lambda: synthetic(
        700, 40, seed=6, dtype=np.float32, imbalance=1.5, noise=0.3
    ),
}


@pytest.fixture(scope="module", params=sorted(DATASETS))
def dataset(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray]:
    return DATASETS[request.param]()


def shared_data_dir() -> Path:
    env = os.environ.get("DSREG_SHARED_DATA")
    if env:
        return Path(env) / "label-errors"
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "label-errors"


def real(name: str) -> tuple[np.ndarray, np.ndarray]:
    folder = shared_data_dir()
    probs = folder / f"{name}_test_set_pyx.npy"
    if not probs.exists():
        pytest.skip(f"real label-errors files not found in {folder} (set DSREG_SHARED_DATA)")
    return np.load(folder / f"{name}_test_set_original_labels.npy"), np.load(probs)


# -- masks and rankings -------------------------------------------------------------------


@pytest.mark.parametrize("filter_by", FILTER_BY)
def test_mask_matches_stable_cleanlab(dataset: Any, filter_by: str) -> None:
    labels, probs = dataset
    expected = cleanlab_find(labels, probs, filter_by=filter_by)
    assert np.array_equal(filter.find_label_issues(labels, probs, filter_by=filter_by), expected)
    chunked = filter.find_label_issues(labels, probs, filter_by=filter_by, chunk_rows=97)
    assert np.array_equal(chunked, expected)


@pytest.mark.parametrize("path", ["margins-of-pruned-pairs", "whole-rows"])
@pytest.mark.parametrize("frac_noise", [1.0, 0.3])
def test_noise_rate_pruning_paths_match(
    dataset: Any, path: str, frac_noise: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prune_by_noise_rate reads either just the margins of pruned pairs or whole rows,
    # depending on how many pairs are pruned; force each on every dataset.
    monkeypatch.setattr(filter, "SPARSE_PAIRS_BELOW", 2.0 if path.startswith("margins") else 0.0)
    labels, probs = dataset
    expected = cleanlab_find(labels, probs, frac_noise=frac_noise)
    got = filter.find_label_issues(labels, probs, frac_noise=frac_noise, chunk_rows=89)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("rank_by", RANK_BY)
@pytest.mark.parametrize("filter_by", ["prune_by_noise_rate", "both", "low_normalized_margin"])
def test_ranked_indices_match_stable_cleanlab(dataset: Any, filter_by: str, rank_by: str) -> None:
    labels, probs = dataset
    expected = cleanlab_find(labels, probs, filter_by=filter_by, return_indices_ranked_by=rank_by)
    got = filter.find_label_issues(
        labels, probs, filter_by=filter_by, return_indices_ranked_by=rank_by, chunk_rows=211
    )
    assert got.size > 0
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("method", ["self_confidence", "normalized_margin"])
def test_adjusted_ranking_matches(dataset: Any, method: str) -> None:
    labels, probs = dataset
    kwargs = {"rank_by_kwargs": {"adjust_pred_probs": True}, "return_indices_ranked_by": method}
    expected = cleanlab_find(labels, probs, **kwargs)
    assert np.array_equal(filter.find_label_issues(labels, probs, **kwargs), expected)


@pytest.mark.parametrize(
    "options",
    [
        {"frac_noise": 0.5},
        {"frac_noise": 0.25, "filter_by": "both"},
        {"frac_noise": 0.7, "filter_by": "prune_by_class"},
        {"min_examples_per_class": 0},
        {"min_examples_per_class": 5, "filter_by": "both"},
        {"min_examples_per_class": 60},
    ],
    ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()),
)
def test_pruning_options_match(dataset: Any, options: dict[str, Any]) -> None:
    labels, probs = dataset
    expected = cleanlab_find(labels, probs, **options)
    assert np.array_equal(filter.find_label_issues(labels, probs, **options), expected)


@pytest.mark.parametrize("filter_by", ["prune_by_class", "prune_by_noise_rate", "both"])
def test_num_to_remove_per_class_matches(filter_by: str) -> None:
    labels, probs = synthetic(3000, 5, seed=11, noise=0.3)
    remove = [30, 5, 0, 12, 40]
    expected = cleanlab_find(labels, probs, filter_by=filter_by, num_to_remove_per_class=remove)
    got = filter.find_label_issues(
        labels, probs, filter_by=filter_by, num_to_remove_per_class=remove
    )
    assert np.array_equal(got, expected)
    if filter_by == "prune_by_class":
        # What a user asks for: at most that many flagged per class.
        assert (np.bincount(labels[got], minlength=5) <= remove).all()


def test_supplied_confident_joint_is_used_as_cleanlab_does(dataset: Any) -> None:
    labels, probs = dataset
    k = probs.shape[1]
    joint = count.compute_confident_joint(labels, probs) + np.eye(k, dtype=int) * 3
    expected = cleanlab_find(labels, probs, confident_joint=joint)
    assert np.array_equal(filter.find_label_issues(labels, probs, confident_joint=joint), expected)


# -- scores, counts, joints ---------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    k=st.integers(1, 60),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1.0, 10.0, 1000.0]),
    quarters=st.booleans(),
    transposed=st.booleans(),
)
def test_vectorised_rounding_matches_cleanlabs_row_loop(
    k: int, seed: int, scale: float, quarters: bool, transposed: bool
) -> None:
    # dsreg rounds all rows at once; cleanlab loops over rows in Python. Equal remainders
    # (quarters) exercise the tie rule; transposed inputs are what calibration passes.
    rng = np.random.default_rng(seed)
    matrix = rng.random((k, k)) * scale
    if quarters:
        matrix = np.round(matrix * 4) / 4
    if transposed:
        matrix = matrix.T
    with stable_sorts():
        expected = cl_round_rows(matrix)
    assert np.array_equal(count.round_preserving_row_totals(matrix), expected)


@pytest.mark.parametrize(
    ("method", "adjust"),
    [
        ("self_confidence", False),
        ("self_confidence", True),
        ("normalized_margin", False),
        ("normalized_margin", True),
        ("confidence_weighted_entropy", False),
    ],
)
def test_label_quality_scores_bit_identical(dataset: Any, method: str, adjust: bool) -> None:
    labels, probs = dataset
    expected = cl_rank.get_label_quality_scores(
        labels, probs, method=method, adjust_pred_probs=adjust
    )
    got = rank.get_label_quality_scores(
        labels, probs, method=method, adjust_pred_probs=adjust, chunk_rows=53
    )
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected)


def test_order_label_issues_matches(dataset: Any) -> None:
    labels, probs = dataset
    mask = filter.find_label_issues(labels, probs, filter_by="predicted_neq_given")
    for rank_by in RANK_BY:
        with stable_sorts():
            expected = cl_rank.order_label_issues(mask, labels, probs, rank_by=rank_by)
        assert np.array_equal(
            rank.order_label_issues(mask, labels, probs, rank_by=rank_by), expected
        )


@pytest.mark.parametrize("estimation_method", ["off_diagonal", "off_diagonal_calibrated"])
def test_num_label_issues_matches(dataset: Any, estimation_method: str) -> None:
    labels, probs = dataset
    with stable_sorts():
        expected = cl_count.num_label_issues(labels, probs, estimation_method=estimation_method)
    assert count.num_label_issues(labels, probs, estimation_method=estimation_method) == expected


def test_off_diagonal_custom_matches(dataset: Any) -> None:
    labels, probs = dataset
    joint = count.compute_confident_joint(labels, probs, calibrate=False)
    with stable_sorts():
        expected = cl_count.num_label_issues(
            labels, probs, confident_joint=joint, estimation_method="off_diagonal_custom"
        )
    got = count.num_label_issues(
        labels, probs, confident_joint=joint, estimation_method="off_diagonal_custom"
    )
    assert got == expected


@pytest.mark.parametrize("calibrate", [True, False])
def test_confident_joint_and_off_diagonals_match(dataset: Any, calibrate: bool) -> None:
    labels, probs = dataset
    with stable_sorts():
        cj, off = cl_count.compute_confident_joint(
            labels, probs, calibrate=calibrate, return_indices_of_off_diagonals=True
        )
    got_cj, got_off = count.compute_confident_joint(
        labels, probs, calibrate=calibrate, return_indices_of_off_diagonals=True, chunk_rows=97
    )
    assert np.array_equal(got_cj, cj)
    assert np.array_equal(got_off, off)


def test_thresholds_and_joint_estimate_match(dataset: Any) -> None:
    labels, probs = dataset
    expected = cl_count.get_confident_thresholds(labels, probs)
    got = count.get_confident_thresholds(labels, probs, chunk_rows=97)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    with stable_sorts():
        joint = cl_count.estimate_joint(labels, probs)
    assert np.array_equal(count.estimate_joint(labels, probs), joint)
    assert count.estimate_noise_rate(labels, probs) == pytest.approx(1.0 - joint.trace())


def test_explicit_thresholds_match(dataset: Any) -> None:
    labels, probs = dataset
    thresholds = np.linspace(0.2, 0.6, probs.shape[1])
    with stable_sorts():
        expected = cl_count.compute_confident_joint(labels, probs, thresholds=thresholds)
    assert np.array_equal(
        count.compute_confident_joint(labels, probs, thresholds=thresholds), expected
    )


def test_detect_equals_cleanlab_pieces(dataset: Any) -> None:
    labels, probs = dataset
    result = detect(labels, probs, DetectorOptions(chunk_rows=101))
    ranked = cleanlab_find(labels, probs, return_indices_ranked_by="self_confidence")
    assert np.array_equal(result.rows, ranked)
    with stable_sorts():
        joint = cl_count.compute_confident_joint(labels, probs)
        estimate = cl_count.num_label_issues(labels, probs)
    assert np.array_equal(result.confident_joint, joint)
    assert result.num_issues_estimate == estimate
    assert np.array_equal(result.scores, probs[result.rows, labels[result.rows]])
    assert np.array_equal(result.suggested_labels, probs[result.rows].argmax(axis=1))


# -- the real label-errors files ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "flagged", "off_diagonal", "calibrated"),
    [("cifar10", 284, 244, 284), ("mnist", 15, 15, 15)],
)
def test_real_files_published_counts(
    name: str, flagged: int, off_diagonal: int, calibrated: int
) -> None:
    labels, probs = real(name)
    assert int(filter.find_label_issues(labels, probs).sum()) == flagged
    assert count.num_label_issues(labels, probs) == off_diagonal
    calibrated_count = count.num_label_issues(
        labels, probs, estimation_method="off_diagonal_calibrated"
    )
    assert calibrated_count == calibrated
    assert round(count.estimate_noise_rate(labels, probs) * len(labels)) == calibrated


@pytest.mark.parametrize("name", ["cifar10", "mnist"])
@pytest.mark.parametrize("filter_by", FILTER_BY)
def test_real_files_match_stable_cleanlab(name: str, filter_by: str) -> None:
    labels, probs = real(name)
    expected = cleanlab_find(labels, probs, filter_by=filter_by)
    assert np.array_equal(filter.find_label_issues(labels, probs, filter_by=filter_by), expected)
    for rank_by in RANK_BY:
        expected_rows = cleanlab_find(
            labels, probs, filter_by=filter_by, return_indices_ranked_by=rank_by
        )
        got = filter.find_label_issues(
            labels, probs, filter_by=filter_by, return_indices_ranked_by=rank_by, chunk_rows=997
        )
        assert np.array_equal(got, expected_rows)


def test_cifar10_tie_is_broken_by_the_stable_rule() -> None:
    # Rows 4302 (2 -> 5) and 4546 (2 -> 0) compete for one unit that round_preserving_sum
    # hands to one of two equal remainders; the stable order gives it to the 2 -> 5 pair.
    labels, probs = real("cifar10")
    mask = filter.find_label_issues(labels, probs)
    assert mask[4302] and not mask[4546]
    assert np.array_equal(mask, cleanlab_find(labels, probs))


@pytest.mark.parametrize("name", ["cifar10", "mnist"])
def test_real_scores_bit_identical(name: str) -> None:
    labels, probs = real(name)
    for method in RANK_BY:
        expected = cl_rank.get_label_quality_scores(labels, probs, method=method)
        assert np.array_equal(rank.get_label_quality_scores(labels, probs, method=method), expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_label_within_1e6_of_the_max_is_cleared_as_cleanlab_does(dtype: Any) -> None:
    # cleanlab adds 1e-6 to p[label] (in the input dtype) and clears the row when the label
    # then is the first maximum. Rows built so that p[label] + 1e-6 == max exactly, with the
    # label's column before and after the maximum's, pin down the tie rule.
    rng = np.random.default_rng(7)
    n = 3000
    low = rng.uniform(0.3, 0.45, n).astype(dtype)
    high = (low + 1e-6).astype(dtype)
    high[: n // 3] = np.nextafter(high[: n // 3], dtype(1))  # some strictly above
    probs = np.zeros((n, 3), dtype=dtype)
    label_col = rng.integers(0, 2, n)
    probs[np.arange(n), label_col] = low
    probs[np.arange(n), 1 - label_col] = high
    probs[:, 2] = (1.0 - low.astype(np.float64) - high).astype(dtype)
    labels = label_col.copy()
    labels[-200:] = 2  # a few rows whose label is elsewhere, so class 2 exists
    expected = cleanlab_find(labels, probs, filter_by="predicted_neq_given")
    got = filter.find_label_issues(labels, probs, filter_by="predicted_neq_given")
    assert np.array_equal(got, expected)
    assert 0 < got.sum() < n  # both outcomes occur


@pytest.mark.parametrize("keyword", ["n_jobs", "verbose", "multi_label"])
def test_a_cleanlab_keyword_not_taken_is_an_unknown_keyword(keyword: str) -> None:
    labels, probs = synthetic(60, 3, seed=2, noise=0.2)
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{keyword}'"):
        filter.find_label_issues(labels, probs, **{keyword: 1})


def test_each_keyword_left_out_takes_cleanlab_s_default() -> None:
    labels, probs = synthetic(400, 4, seed=9, noise=0.3)
    spelled = filter.find_label_issues(labels, probs, **filter.CLEANLAB_DEFAULTS)
    assert np.array_equal(spelled, filter.find_label_issues(labels, probs))
    assert np.array_equal(spelled, cleanlab_find(labels, probs))
