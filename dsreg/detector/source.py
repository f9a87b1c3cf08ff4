"""What every predicted-probabilities source is: :class:`ProbabilitySource` and its checks.

A source has ``n`` rows, ``k`` classes, a floating ``dtype``, a BLAKE3 digest for provenance,
and :meth:`ProbabilitySource.chunks`, which yields ``(start, chunk)`` pairs of at most
``chunk_rows`` rows, validated and (where needed) renormalised: the validation of values, the
tolerances and the chunk sizes live here, with the interface. The sources themselves (in memory,
``.npy``, Parquet) and :func:`~dsreg.detector.probs.open_probabilities` are in
:mod:`dsreg.detector.probs`. See ``docs/detector.md``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dsreg.errors import InvalidInputError, ProbabilitiesError
from dsreg.objects.hashing import FileDigest

__all__ = [
    "CHUNKS_IN_USE",
    "CHUNK_ELEMENTS",
    "MAX_SUM_DEVIATION",
    "FloatArray",
    "IntArray",
    "ProbabilitySource",
    "check_dtype",
    "check_shape",
    "default_chunk_rows",
    "first_values",
    "sum_tolerance",
]

FloatArray = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.intp]

#: Rows whose sum is further than this from 1 are refused.
MAX_SUM_DEVIATION = 1e-3
#: Float rounding of a stored softmax never moves a row sum this far; see :func:`sum_tolerance`.
_ROUNDING_FLOOR = 1e-5
#: Default chunk size in matrix elements: large enough that numpy's per-call overhead vanishes,
#: small enough that the detector's per-chunk temporaries stay in tens of megabytes.
CHUNK_ELEMENTS = 1 << 21
_SUPPORTED = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
#: Chunks a caller may still be working on when it asks for the next one (the detector works
#: on two at a time): a source keeps them readable, a mapped file's pages released behind them.
CHUNKS_IN_USE = 2


def sum_tolerance(dtype: npt.DTypeLike, k: int) -> float:
    """Largest ``|row sum - 1|`` taken as float rounding: ``max(1e-5, k * eps(dtype))``, <= 1e-3.

    A float16 row of ``k`` rounded probabilities can be ``k * eps / 2`` off; it is never
    rewritten. Rows off by more than this (but at most 1e-3) are renormalised.
    """
    eps = float(np.finfo(np.dtype(dtype)).eps)
    return min(MAX_SUM_DEVIATION, max(_ROUNDING_FLOOR, k * eps))


def default_chunk_rows(k: int) -> int:
    """Rows per chunk so that a chunk of ``k`` columns holds about two million values."""
    return max(1, CHUNK_ELEMENTS // max(k, 1))


def check_dtype(dtype: np.dtype[Any], what: str) -> None:
    """Refuse a dtype other than float16, float32 or float64; ``what`` names the input."""
    if dtype not in _SUPPORTED:
        raise ProbabilitiesError(
            f"{what} has dtype {dtype}; predicted probabilities must be float16, float32 or "
            "float64: convert them, e.g. with .astype(numpy.float32)"
        )


def check_shape(shape: tuple[int, ...], what: str) -> tuple[int, int]:
    """``(n, k)`` of a 2-D shape with ``n >= 1`` and ``k >= 2``, else refused."""
    if len(shape) != 2:
        raise ProbabilitiesError(
            f"{what} has shape {shape}; predicted probabilities must be a 2-D array of shape "
            "(n examples, k classes)"
        )
    n, k = int(shape[0]), int(shape[1])
    if n < 1 or k < 2:
        raise ProbabilitiesError(
            f"{what} has shape {shape}; need at least 1 row and 2 class columns"
        )
    return n, k


def first_values(values: npt.NDArray[Any], limit: int = 5) -> str:
    """The first ``limit`` values, comma-separated, and how many there are if more (messages)."""
    shown = ", ".join(str(v) for v in values[:limit].tolist())
    return shown + (f", … ({len(values)} in all)" if len(values) > limit else "")


def _renormalise(chunk: FloatArray, local: IntArray) -> FloatArray:
    """Copy of ``chunk`` with rows ``local`` divided by their sum in float64."""
    out = np.array(chunk, copy=True, order="C")
    rows = out[local].astype(np.float64)
    rows /= rows.sum(axis=1, keepdims=True)
    out[local] = rows.astype(out.dtype)
    return out


def _validate_chunk(start: int, chunk: FloatArray, tolerance: float) -> IntArray:
    """Raise on invalid values; return the local rows that need renormalising."""
    if not chunk.min() >= 0:
        # The minimum is NaN if any value is, so this catches NaN and negatives; find where.
        bad = np.isnan(chunk)
        kind = "NaN"
        if not bad.any():
            bad = chunk < 0
            kind = "negative"
        r, c = np.argwhere(bad)[0]
        count = int(bad.sum())
        raise ProbabilitiesError(
            f"predicted probabilities contain {kind} values: row {start + int(r)}, column "
            f"{int(c)} is {float(chunk[r, c])} ({count} such value{'s' * (count != 1)} in rows "
            f"{start}..{start + len(chunk) - 1}); probabilities must be finite and >= 0: "
            "export softmax outputs, not logits"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        # Summed in the input precision (float32 for float16): far finer than the tolerances.
        sums = chunk.sum(axis=1, dtype=np.float32 if chunk.dtype == np.float16 else None)
        deviation = np.abs(sums.astype(np.float64) - 1.0)
    far = np.flatnonzero(~(deviation <= MAX_SUM_DEVIATION))
    if far.size:
        infinite = np.flatnonzero(np.isinf(chunk[far]).any(axis=1))
        if infinite.size:
            row = start + int(far[infinite[0]])
            raise ProbabilitiesError(
                f"predicted probabilities contain infinite values (row {row}); probabilities "
                "must be finite: export softmax outputs, not logits"
            )
        raise ProbabilitiesError(
            f"rows of predicted probabilities must sum to 1 (within {MAX_SUM_DEVIATION:g}); "
            f"rows {first_values(far + start)} sum to {first_values(np.round(sums[far], 6))}: "
            "apply a softmax to logits, or divide each row by its sum"
        )
    return np.flatnonzero(deviation > tolerance)


class ProbabilitySource(ABC):
    """Predicted probabilities of shape ``(n, k)``, read in row chunks.

    Attributes
    ----------
    n : int
        Number of rows (examples).
    k : int
        Number of columns (classes).
    dtype : numpy.dtype
        float16, float32 or float64; chunks have this dtype.
    path : pathlib.Path or None
        The file read, or None for an in-memory array.
    """

    n: int
    k: int
    dtype: np.dtype[Any]
    path: Path | None

    def __init__(self, n: int, k: int, dtype: np.dtype[Any], path: Path | None) -> None:
        self.n, self.k, self.dtype, self.path = n, k, dtype, path
        self._renorm: IntArray | None = None
        self._digest: str | None = None
        self._hashing: Future[str] | None = None
        self._started: FileDigest | None = None
        self._stop_hashing = threading.Event()

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path is not None else ""
        return f"{type(self).__name__}(n={self.n}, k={self.k}, dtype={self.dtype.name}{where})"

    def __enter__(self) -> ProbabilitySource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release file handles and mappings; stop a digest still being taken."""
        self._stop_hashing.set()
        if self._started is not None:
            self._started.stop()
        if self._hashing is not None:
            self._hashing.exception()  # waits for the thread to give up (HashingStopped)

    def start_digest(self, started: FileDigest | None = None) -> None:
        """Start taking :meth:`digest` on a second thread, on one core (BLAKE3 releases the
        GIL), while the caller works on the source: the detector's passes and the digest's
        read of the file run side by side. ``digest`` then waits for it; ``close`` stops it.

        ``started``: the digest of this source's file, begun earlier by the caller (before
        its imports and its reading of the labels); it is used instead of a new one. Should
        it end without a digest (stopped, or the file unreadable), :meth:`digest` takes one
        as it would without it, so its result and its errors are the same either way."""
        if self._digest is not None or self._hashing is not None or self._started is not None:
            return
        if started is not None and self.path is not None and Path(started.path) == self.path:
            self._started = started
            return
        pool = ThreadPoolExecutor(1)
        self._hashing = pool.submit(self._hash_bytes, 1, self._stop_hashing)
        pool.shutdown(wait=False)

    @abstractmethod
    def _raw_chunks(self, chunk_rows: int) -> Iterator[tuple[int, FloatArray]]:
        """Yield ``(start, chunk)`` in row order; chunks are C-contiguous and read-only."""

    @abstractmethod
    def _hash_bytes(self, threads: int = 0, stop: threading.Event | None = None) -> str:
        """BLAKE3 hex digest of the bytes this source stands for, on ``threads`` threads (0:
        BLAKE3's choice); ``HashingStopped`` once ``stop`` is set."""

    def chunks(self, chunk_rows: int | None = None) -> Iterator[tuple[int, FloatArray]]:
        """Yield validated ``(start, chunk)`` pairs covering all rows in order.

        The first complete pass validates every value and records the rows that need
        renormalising; later passes renormalise the same rows without re-checking.

        Parameters
        ----------
        chunk_rows : int, optional
            Maximum rows per chunk; default :func:`default_chunk_rows`.

        Yields
        ------
        start : int
            Position of the chunk's first row.
        chunk : numpy.ndarray, shape (rows, k)
            C-contiguous; treat as read-only.

        Raises
        ------
        ProbabilitiesError
            On the first chunk holding NaN, infinite or negative values, or a row whose sum
            is more than ``1e-3`` from 1.
        """
        size = default_chunk_rows(self.k) if chunk_rows is None else int(chunk_rows)
        if size < 1:
            raise InvalidInputError(f"chunk_rows must be at least 1, got {chunk_rows!r}")
        known = self._renorm
        if known is not None:
            for start, chunk in self._raw_chunks(size):
                lo, hi = np.searchsorted(known, [start, start + len(chunk)])
                if hi > lo:
                    chunk = _renormalise(chunk, known[lo:hi] - start)
                yield start, chunk
            return
        tolerance = sum_tolerance(self.dtype, self.k)
        found: list[IntArray] = []
        seen = 0
        for start, chunk in self._raw_chunks(size):
            local = _validate_chunk(start, chunk, tolerance)
            seen += len(chunk)
            if local.size:
                found.append(local + start)
                chunk = _renormalise(chunk, local)
            yield start, chunk
        if seen != self.n:
            raise ProbabilitiesError(
                f"{self!r} yielded {seen} rows but declares {self.n}; the file changed or is "
                "truncated: write it again"
            )
        self._renorm = np.concatenate(found) if found else np.zeros(0, dtype=np.intp)

    def validate(self, chunk_rows: int | None = None) -> int:
        """Check every value (one pass, unless done) and return how many rows were renormalised."""
        if self._renorm is None:
            for _ in self.chunks(chunk_rows):
                pass
        assert self._renorm is not None
        return int(self._renorm.size)

    @property
    def renormalized_rows(self) -> int:
        """Rows whose sum was off by more than float rounding and that were divided by it."""
        return self.validate()

    def to_array(self) -> FloatArray:
        """Return the validated, renormalised probabilities as one ``(n, k)`` array.

        Holds the whole matrix: meant for small data and tests, not for the detector.
        """
        out = np.empty((self.n, self.k), dtype=self.dtype)
        for start, chunk in self.chunks():
            out[start : start + len(chunk)] = chunk
        return out

    def digest(self) -> str:
        """BLAKE3 of the source's bytes: ``"blake3:"`` + 64 lowercase hex characters.

        For a file, the file's exact bytes. For an in-memory array, the bytes that
        ``numpy.save`` writes for its C-ordered copy, so saving the array to ``.npy`` and
        opening the file gives the same digest.
        """
        if self._digest is None and self._started is not None:
            self._digest = self._started.result()
        if self._digest is None:
            hexd = self._hashing.result() if self._hashing is not None else self._hash_bytes()
            self._digest = "blake3:" + hexd
        return self._digest
