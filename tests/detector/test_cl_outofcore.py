"""Out of core: a memory-mapped .npy or a Parquet file, read in many small chunks, gives
exactly the in-memory result, which is exactly stable-sorted cleanlab's."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsreg.detector import filter, rank
from dsreg.detector.detector import Detection, detect
from dsreg.detector.options import DetectorOptions
from dsreg.detector.probs import open_probabilities

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cl_filter = pytest.importorskip("cleanlab.filter", reason="cleanlab is the parity oracle")


def cleanlab_stable(labels: np.ndarray, probs: np.ndarray, **kwargs: Any) -> Any:
    original = np.argsort

    def stable_argsort(a: Any, axis: int = -1, kind: Any = None, order: Any = None) -> Any:
        return original(a, axis=axis, kind="stable", order=order)

    np.argsort = stable_argsort  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="May not flag all label issues")
            return cl_filter.find_label_issues(labels, probs, n_jobs=1, **kwargs)
    finally:
        np.argsort = original  # type: ignore[assignment]


def make(n: int, k: int, dtype: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    z = rng.standard_normal((n, k)) * 1.5
    z[np.arange(n), truth] += 2.5
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p = np.round(p / p.sum(axis=1, keepdims=True), 3)  # ties across chunk boundaries
    p /= p.sum(axis=1, keepdims=True)
    labels = np.where(rng.random(n) < 0.15, rng.integers(0, k, n), truth)
    return labels, p.astype(dtype)


def same(a: Detection, b: Detection, *, skip: tuple[str, ...] = ()) -> None:
    for name in set(Detection.__slots__) - set(skip):
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


@pytest.fixture(scope="module", params=[np.float16, np.float32, np.float64])
def files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    labels, probs = make(5000, 8, request.param, seed=21)
    folder = tmp_path_factory.mktemp("probs")
    np.save(folder / "p.npy", probs)
    table = pa.table(
        {"pred_probs": pa.FixedSizeListArray.from_arrays(pa.array(probs.reshape(-1)), 8)}
    )
    pq.write_table(table, folder / "p.parquet", row_group_size=777)
    return labels, probs, folder


@pytest.mark.parametrize("kind", ["p.npy", "p.parquet"])
def test_detect_from_file_in_small_chunks_equals_in_memory(files: Any, kind: str) -> None:
    labels, probs, folder = files
    in_memory = detect(labels, probs)
    from_file = detect(labels, folder / kind, DetectorOptions(chunk_rows=97))
    same(from_file, in_memory)
    assert len(in_memory) > 0
    ranked = cleanlab_stable(labels, probs, return_indices_ranked_by="self_confidence")
    assert np.array_equal(from_file.rows, ranked)


@pytest.mark.parametrize("filter_by", filter.FILTER_BY)
def test_every_filter_from_a_memory_mapped_file(files: Any, filter_by: str) -> None:
    labels, probs, folder = files
    expected = cleanlab_stable(labels, probs, filter_by=filter_by)
    got = filter.find_label_issues(labels, folder / "p.npy", filter_by=filter_by, chunk_rows=97)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("rank_by", rank.RANK_BY)
def test_rankings_from_parquet(files: Any, rank_by: str) -> None:
    labels, probs, folder = files
    expected = cleanlab_stable(labels, probs, filter_by="both", return_indices_ranked_by=rank_by)
    got = filter.find_label_issues(
        labels,
        folder / "p.parquet",
        filter_by="both",
        return_indices_ranked_by=rank_by,
        chunk_rows=97,
    )
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("chunk_rows", [1, 2, 97, 4999, 5000, 10**6])
def test_chunk_size_never_changes_the_result(chunk_rows: int) -> None:
    labels, probs = make(5000, 8, np.float32, seed=5)
    same(
        detect(labels, probs, DetectorOptions(chunk_rows=chunk_rows, rank_by="normalized_margin")),
        detect(labels, probs, DetectorOptions(rank_by="normalized_margin")),
    )


def test_renormalised_rows_are_used_the_same_way_out_of_core(tmp_path: Path) -> None:
    labels, probs = make(3000, 6, np.float64, seed=8)
    probs[::7] *= 1.0004  # off by 4e-4: renormalised and reported
    np.save(tmp_path / "p.npy", probs)
    from_file = detect(labels, tmp_path / "p.npy", DetectorOptions(chunk_rows=97))
    assert from_file.renormalized_rows == len(range(0, 3000, 7))
    fixed = probs.copy()
    fixed[::7] /= fixed[::7].sum(axis=1, keepdims=True)
    same(from_file, detect(labels, fixed), skip=("renormalized_rows",))
    ranked = cleanlab_stable(labels, fixed, return_indices_ranked_by="self_confidence")
    assert np.array_equal(from_file.rows, ranked)


@pytest.mark.parametrize(
    ("filter_by", "rank_by", "passes"),
    [
        ("prune_by_noise_rate", "self_confidence", 3),
        ("prune_by_noise_rate", "confidence_weighted_entropy", 4),
        ("prune_by_class", "normalized_margin", 2),
        ("low_self_confidence", "self_confidence", 2),
    ],
)
def test_the_file_is_read_a_bounded_number_of_times(
    files: Any, filter_by: str, rank_by: str, passes: int
) -> None:
    labels, _, folder = files
    source = open_probabilities(folder / "p.npy")
    reads = []
    raw = source._raw_chunks

    def counted(chunk_rows: int) -> Any:
        reads.append(chunk_rows)
        return raw(chunk_rows)

    source._raw_chunks = counted  # type: ignore[method-assign]
    detect(labels, source, DetectorOptions(filter_by=filter_by, rank_by=rank_by, chunk_rows=500))
    assert len(reads) == passes


@pytest.mark.parametrize("sparse_below", [0.0, 2.0], ids=["whole-rows", "pruned-pairs-only"])
def test_both_pruning_paths_out_of_core(
    files: Any, sparse_below: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filter, "SPARSE_PAIRS_BELOW", sparse_below)
    labels, probs, folder = files
    expected = cleanlab_stable(labels, probs, filter_by="both", frac_noise=0.6)
    got = filter.find_label_issues(
        labels, folder / "p.parquet", filter_by="both", frac_noise=0.6, chunk_rows=97
    )
    assert np.array_equal(got, expected)
