"""Probability sources: arrays, memory-mapped .npy, Parquet; validation and digests."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path
from typing import Any

import blake3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg.detector.probs as probs_module
from dsreg.detector.count import check_labels
from dsreg.detector.probs import (
    ArraySource,
    NpySource,
    ParquetSource,
    open_probabilities,
    sum_tolerance,
)
from dsreg.errors import InputPathError, ProbabilitiesError
from dsreg.objects.hashing import HashingStopped, hash_file, start_file_digest


def softmax(n: int, k: int, *, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)).astype(dtype)


def collect(source: Any, chunk_rows: int | None = None) -> np.ndarray:
    parts, expected_start = [], 0
    for start, chunk in source.chunks(chunk_rows):
        assert start == expected_start
        assert chunk.flags.c_contiguous and chunk.dtype == source.dtype
        if chunk_rows is not None:
            assert 1 <= len(chunk) <= chunk_rows
        parts.append(chunk)
        expected_start += len(chunk)
    assert expected_start == source.n
    return np.concatenate(parts)


# -- shapes, dtypes, values -------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 300),
    k=st.integers(2, 9),
    chunk_rows=st.integers(1, 400),
    dtype=st.sampled_from([np.float16, np.float32, np.float64]),
    fortran=st.booleans(),
)
def test_chunks_cover_every_row_in_order(
    n: int, k: int, chunk_rows: int, dtype: Any, fortran: bool
) -> None:
    probs = softmax(n, k, seed=n * k, dtype=dtype)
    if fortran:
        probs = np.asfortranarray(probs)
    source = open_probabilities(probs)
    assert (source.n, source.k, source.dtype) == (n, k, np.dtype(dtype))
    assert np.array_equal(collect(source, chunk_rows), probs)
    assert source.renormalized_rows == 0


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.full(5, 0.2), r"shape \(5,\).*2-D"),
        (np.ones((4, 1)), r"shape \(4, 1\).*2 class columns"),
        (np.zeros((0, 3)), r"at least 1 row"),
        (np.eye(3, dtype=np.int64), r"dtype int64.*astype"),
        (np.eye(3, dtype=np.complex64), r"dtype complex64"),
    ],
)
def test_wrong_shape_or_dtype_is_refused(array: np.ndarray, message: str) -> None:
    with pytest.raises(ProbabilitiesError, match=message):
        open_probabilities(array)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.nan, r"NaN values: row 7, column 2 is nan"),
        (-0.25, r"negative values: row 7, column 2 is -0\.25"),
        (np.inf, r"infinite values \(row 7\)"),
    ],
)
def test_invalid_values_are_refused_naming_where(value: float, message: str) -> None:
    probs = softmax(20, 4, dtype=np.float64)
    probs[7, 2] = value
    with pytest.raises(ProbabilitiesError, match=message):
        open_probabilities(probs).validate(chunk_rows=5)


def test_rows_far_from_summing_to_one_are_refused_naming_them() -> None:
    probs = softmax(50, 3, dtype=np.float64)
    probs[[4, 31]] *= 0.9
    with pytest.raises(ProbabilitiesError) as caught:
        open_probabilities(probs).validate()
    message = str(caught.value)
    assert "rows 4, 31 sum to 0.9, 0.9" in message
    assert "softmax" in message


def test_logits_are_refused() -> None:
    logits = np.random.default_rng(0).standard_normal((10, 5))
    with pytest.raises(ProbabilitiesError, match=r"negative.*softmax"):
        open_probabilities(logits).validate()


def test_rows_slightly_off_are_renormalised_and_counted_not_changed_in_place() -> None:
    probs = softmax(40, 5, dtype=np.float64)
    original = probs.copy()
    probs[3] *= 1.0005  # off by 5e-4: renormalised
    probs[9] *= 0.9993
    probs[20] *= 1 + 2e-6  # float-rounding size: left alone
    kept = probs.copy()
    source = open_probabilities(probs)
    values = collect(source, chunk_rows=7)
    assert source.renormalized_rows == 2
    assert np.allclose(values[[3, 9]].sum(axis=1), 1.0, atol=1e-15)
    assert np.allclose(values[[3, 9]], original[[3, 9]], rtol=1e-14)
    assert np.array_equal(values[20], kept[20])
    assert np.array_equal(np.delete(values, [3, 9], axis=0), np.delete(kept, [3, 9], axis=0))
    assert np.array_equal(probs, kept)  # the caller's array is never written
    # A second pass renormalises the same rows the same way, without re-validating.
    assert np.array_equal(collect(source, chunk_rows=11), values)


def test_values_just_above_one_are_accepted() -> None:
    probs = np.array([[1.00002, 0.0, 0.0], [0.5, 0.5, 0.0]], dtype=np.float32)
    source = open_probabilities(probs)
    values = source.to_array()
    assert source.renormalized_rows == 1
    assert values[0, 0] == pytest.approx(1.0)


def test_sum_tolerance_scales_with_precision() -> None:
    assert sum_tolerance(np.float64, 10) == 1e-5
    assert sum_tolerance(np.float32, 1000) == pytest.approx(1000 * np.finfo(np.float32).eps)
    # float16 rows of rounded probabilities can be ~5e-4 off; never rewritten.
    assert sum_tolerance(np.float16, 10) == 1e-3
    probs = softmax(500, 345, dtype=np.float16)
    assert open_probabilities(probs).validate() == 0


# -- labels -------------------------------------------------------------------------------


def test_labels_are_checked_against_rows_and_classes() -> None:
    assert check_labels([0, 2, 1], n=3, k=3).dtype == np.intp
    with pytest.raises(ProbabilitiesError, match="there are 2 labels but 3 rows"):
        check_labels([0, 1], n=3, k=3)
    with pytest.raises(
        ProbabilitiesError, match=r"labels 3, 7 are outside \[0, 3\) \(first at row 1\)"
    ):
        check_labels([0, 3, 7, 3], n=4, k=3)
    with pytest.raises(ProbabilitiesError, match=r"labels -1 are outside"):
        check_labels(np.array([0, -1]), n=2, k=3)
    with pytest.raises(ProbabilitiesError, match="integer class indices"):
        check_labels(["cat", "dog"], n=2, k=3)
    with pytest.raises(ProbabilitiesError, match="integer class indices"):
        check_labels([0.5, 1.0], n=2, k=3)
    with pytest.raises(ProbabilitiesError, match="1-D"):
        check_labels([[0, 1]], n=2, k=3)
    assert check_labels(np.array([1.0, 0.0]), n=2, k=3).tolist() == [1, 0]


# -- files ----------------------------------------------------------------------------------


def blake3_of(path: Path) -> str:
    return "blake3:" + blake3.blake3(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_npy_file_is_memory_mapped_and_digested(tmp_path: Path, dtype: Any) -> None:
    probs = softmax(1000, 6, seed=3, dtype=dtype)
    path = tmp_path / "p.npy"
    np.save(path, probs)
    source = open_probabilities(path)
    assert isinstance(source, NpySource)
    assert isinstance(source.array, np.memmap)
    assert np.array_equal(collect(source, 97), probs)
    digest = source.digest()
    assert re.fullmatch(r"blake3:[0-9a-f]{64}", digest)
    assert digest == blake3_of(path)
    # An in-memory array digests as the .npy numpy.save writes for it.
    assert ArraySource(probs).digest() == digest
    assert ArraySource(np.asfortranarray(probs)).digest() == digest
    source.close()


@pytest.mark.parametrize("fortran", [False, True])
def test_digest_taken_beside_the_passes_is_the_files(tmp_path: Path, fortran: bool) -> None:
    probs = softmax(1000, 6, seed=4)
    path = tmp_path / "p.npy"
    np.save(path, np.asfortranarray(probs) if fortran else probs)
    with open(path, "ab") as f:
        f.write(b"bytes after the array are part of the file")
    with open_probabilities(path) as source:
        source.start_digest()
        assert np.array_equal(collect(source, 97), probs)
        assert source.digest() == blake3_of(path)
    in_memory = ArraySource(probs)
    in_memory.start_digest()
    np.save(tmp_path / "q.npy", probs)
    assert in_memory.digest() == blake3_of(tmp_path / "q.npy")


def test_a_digest_no_longer_wanted_stops(tmp_path: Path) -> None:
    path = tmp_path / "p.npy"
    np.save(path, softmax(1000, 6, seed=4))
    stop = threading.Event()
    stop.set()
    with pytest.raises(HashingStopped):
        hash_file(path, stop=stop)
    with open_probabilities(path) as source:
        source.start_digest()
    # Closed at once: the digest was stopped, or it had finished and is the file's.
    with contextlib.suppress(HashingStopped):
        assert source.digest() == blake3_of(path)


def test_a_digest_begun_before_opening_is_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.npy"
    np.save(path, softmax(1000, 6, seed=4))
    np.save(tmp_path / "q.npy", softmax(1000, 6, seed=5))
    started = start_file_digest(path)
    other = start_file_digest(tmp_path / "q.npy")
    assert started is not None and other is not None
    expected = blake3_of(path)
    assert started.result() == expected
    # Named another way, the same file: the source takes the digest begun for it, and does
    # not read the file a second time for it.
    with monkeypatch.context() as m:
        m.setattr(probs_module, "hash_file", lambda *a, **k: pytest.fail("hashed again"))
        with open_probabilities(tmp_path / "." / "p.npy") as source:
            source.start_digest(started)
            assert source.digest() == expected
    # Begun for another file, it is not used.
    with open_probabilities(path) as source:
        source.start_digest(other)
        assert source.digest() == expected


def test_a_digest_begun_and_stopped_is_taken_again(tmp_path: Path) -> None:
    path = tmp_path / "p.npy"
    np.save(path, softmax(1000, 6, seed=4))
    started = start_file_digest(path)
    assert started is not None
    started.stop()
    with open_probabilities(path) as source:
        source.start_digest(started)
        assert source.digest() == blake3_of(path)


def test_no_digest_is_begun_for_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # Reading the pipe would block, or take the bytes meant for the reader that refuses it.
    assert start_file_digest(fifo) is None
    assert start_file_digest(tmp_path / "missing.npy") is None
    assert start_file_digest(tmp_path) is None


def test_fortran_ordered_npy_file(tmp_path: Path) -> None:
    probs = np.asfortranarray(softmax(300, 4, seed=8))
    np.save(tmp_path / "f.npy", probs)
    with open_probabilities(tmp_path / "f.npy") as source:
        assert np.array_equal(collect(source, 64), probs)


def test_missing_and_unknown_files(tmp_path: Path) -> None:
    with pytest.raises(InputPathError, match=r"probabilities file .* does not exist"):
        open_probabilities(tmp_path / "absent.npy")
    (tmp_path / "x.csv").write_text("0.5,0.5\n")
    with pytest.raises(ProbabilitiesError, match=r"neither a .npy file nor a Parquet file"):
        open_probabilities(tmp_path / "x.csv")
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(ProbabilitiesError, match=r"not a readable .npy"):
        open_probabilities(tmp_path / "bad.npy")


def test_npy_pages_are_released_as_the_pass_moves_on(tmp_path: Path) -> None:
    statm = Path("/proc/self/statm")
    if not statm.exists():
        pytest.skip("resident memory is read from /proc (Linux)")
    page = 4096

    def resident() -> int:
        return int(statm.read_text().split()[1]) * page

    rows, k = 200_000, 64  # 51 MB of float32
    path = tmp_path / "big.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, k))
    out[:] = 1.0 / k
    out.flush()
    del out
    source = open_probabilities(path)
    before = resident()
    peak = before
    for _ in source.chunks(4096):
        peak = max(peak, resident())
    assert peak - before < 20 * 2**20, f"resident memory grew by {(peak - before) >> 20} MiB"


def write_parquet(path: Path, table: pa.Table, **kwargs: Any) -> Path:
    pq.write_table(table, path, row_group_size=kwargs.pop("row_group_size", 150), **kwargs)
    return path


@pytest.mark.parametrize("layout", ["list", "fixed_size_list", "columns"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parquet_layouts(tmp_path: Path, layout: str, dtype: Any) -> None:
    probs = softmax(1000, 5, seed=9, dtype=dtype)
    value_type = pa.from_numpy_dtype(np.dtype(dtype))
    if layout == "columns":
        table = pa.table({f"p{j}": probs[:, j] for j in range(5)})
        table = table.append_column("example_id", pa.array([str(i) for i in range(1000)]))
    else:
        flat = pa.array(probs.reshape(-1), type=value_type)
        if layout == "list":
            lists = pa.ListArray.from_arrays(pa.array(np.arange(0, 5001, 5, dtype=np.int32)), flat)
        else:
            lists = pa.FixedSizeListArray.from_arrays(flat, 5)
        table = pa.table({"row": np.arange(1000), "pred_probs": lists})
    path = write_parquet(tmp_path / "p.parquet", table)
    source = open_probabilities(path)
    assert isinstance(source, ParquetSource)
    assert (source.n, source.k, source.dtype) == (1000, 5, np.dtype(dtype))
    assert np.array_equal(collect(source, 97), probs)
    assert source.digest() == blake3_of(path)


def test_parquet_float16_columns(tmp_path: Path) -> None:
    probs = softmax(200, 3, seed=2, dtype=np.float16)
    table = pa.table({f"c{j}": pa.array(probs[:, j], type=pa.float16()) for j in range(3)})
    path = write_parquet(tmp_path / "h.parquet", table)
    source = open_probabilities(path)
    assert source.dtype == np.float16
    assert np.array_equal(source.to_array(), probs)


def test_parquet_layout_errors(tmp_path: Path) -> None:
    ragged = pa.table({"p": pa.array([[0.5, 0.5], [0.2, 0.3, 0.5], [1.0, 0.0]])})
    path = write_parquet(tmp_path / "ragged.parquet", ragged)
    with pytest.raises(ProbabilitiesError, match="must hold 2 probabilities; row 1 does not"):
        open_probabilities(path).validate()
    two = pa.table({"a": pa.array([[0.5, 0.5]]), "b": pa.array([[0.5, 0.5]])})
    path = write_parquet(tmp_path / "two.parquet", two)
    with pytest.raises(ProbabilitiesError, match=r"several list columns \(a, b\).*column="):
        open_probabilities(path)
    assert open_probabilities(ParquetSource(path, column="b")).k == 2
    nulls = pa.table({"x": pa.array([0.5, None]), "y": pa.array([0.5, 1.0])})
    path = write_parquet(tmp_path / "nulls.parquet", nulls)
    with pytest.raises(ProbabilitiesError, match=r"column 'x'.*nulls"):
        open_probabilities(path).validate()
    words = pa.table({"x": pa.array(["a", "b"]), "y": pa.array([0.5, 1.0])})
    path = write_parquet(tmp_path / "words.parquet", words)
    with pytest.raises(ProbabilitiesError, match="not floating point"):
        ParquetSource(path, columns=["x", "y"])
    with pytest.raises(ProbabilitiesError, match=r"no column\(s\) \['z'\]"):
        ParquetSource(path, column="z")


def test_truncated_rows_in_a_parquet_file_are_validated(tmp_path: Path) -> None:
    probs = softmax(300, 4, seed=1, dtype=np.float64)
    probs[250] = [0.1, 0.1, 0.1, 0.1]
    path = write_parquet(tmp_path / "p.parquet", pa.table({f"c{j}": probs[:, j] for j in range(4)}))
    with pytest.raises(ProbabilitiesError, match=r"rows 250 sum to 0.4"):
        open_probabilities(path).validate(chunk_rows=64)


def test_parquet_is_read_a_row_group_at_a_time(tmp_path: Path) -> None:
    status = Path("/proc/self/status")
    clear = Path("/proc/self/clear_refs")
    if not status.exists() or not clear.exists():
        pytest.skip("peak resident memory is read from /proc (Linux)")

    def field(name: str) -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith(name + ":"))
        return int(line.split()[1]) * 1024

    rows, k = 250_000, 64  # 64 MB of float32 in 10 row groups; random, so it won't compress
    probs = softmax(rows, k, seed=4)
    path = tmp_path / "p.parquet"
    flat = pa.array(probs.reshape(-1))
    write_parquet(
        path, pa.table({"p": pa.FixedSizeListArray.from_arrays(flat, k)}), row_group_size=25_000
    )
    del probs, flat
    source = open_probabilities(path)
    clear.write_text("5")  # reset the peak to the current resident size
    before = field("VmRSS")
    for _ in source.chunks(4096):
        pass
    grown = field("VmHWM") - before
    assert grown < 32 * 2**20, f"peak resident memory grew by {grown >> 20} MiB for a 64 MB file"
