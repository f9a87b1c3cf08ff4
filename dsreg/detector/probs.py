"""Predicted-probability sources: in memory, memory-mapped ``.npy``, or Parquet read in chunks.

Every source has the same interface: ``n`` rows, ``k`` classes, a floating ``dtype``, a BLAKE3
digest for provenance, and :meth:`ProbabilitySource.chunks`, which yields ``(start, chunk)``
pairs of at most ``chunk_rows`` rows, validated and (where needed) renormalised. The detector
only ever touches probabilities through :meth:`~ProbabilitySource.chunks`, so an ``n x k``
matrix is never held in memory unless the caller already holds it.

Validation (:class:`~dsreg.errors.ProbabilitiesError`): a 2-D float16/32/64 array, ``n >= 1``,
``k >= 2``; no NaN, infinite or negative value; rows summing to 1 within ``1e-3``. Rows off by
more than :func:`sum_tolerance` (float rounding) but within ``1e-3`` are divided by their sum
and counted in :attr:`ProbabilitySource.renormalized_rows`, never printed or warned. See
``docs/detector.md``.

The interface and the validation are :mod:`dsreg.detector.source`'s (``ProbabilitySource``,
``sum_tolerance`` and ``default_chunk_rows`` are re-exported here); this module holds the
sources and :func:`open_probabilities`, which picks one.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dsreg._util.inputs import input_file
from dsreg.detector.source import (
    CHUNKS_IN_USE,
    FloatArray,
    ProbabilitySource,
    check_dtype,
    check_shape,
    default_chunk_rows,
    sum_tolerance,
)
from dsreg.errors import InputPathError, ProbabilitiesError, StorageError
from dsreg.formats.inputfiles import open_npy, refuse_duplicate_columns
from dsreg.objects.hashing import Hasher, HashingStopped, hash_file

__all__ = [
    "ArraySource",
    "NpySource",
    "ParquetSource",
    "ProbabilitySource",
    "default_chunk_rows",
    "open_probabilities",
    "sum_tolerance",
]


def _path_error(exc: OSError, file: Path) -> Exception:
    if isinstance(exc, FileNotFoundError):
        return InputPathError(f"no such probabilities file: {file}")
    if isinstance(exc, (IsADirectoryError, PermissionError)):
        return InputPathError(f"cannot open probabilities file {file}: {exc.strerror}")
    return StorageError(f"cannot read {file}: {exc.strerror or exc}")


def _hash_file(path: Path, threads: int, stop: threading.Event | None) -> str:
    # One large input: BLAKE3 may use every core (hashing.py), unless it is hashed beside
    # other work (ProbabilitySource.start_digest).
    try:
        return hash_file(path, threads=threads, stop=stop).removeprefix("blake3:")
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc


class ArraySource(ProbabilitySource):
    """Probabilities already in memory (any layout; chunks are C-contiguous).

    Parameters
    ----------
    array : array_like, shape (n, k)
        float16, float32 or float64 probabilities. Never modified.
    """

    def __init__(self, array: npt.ArrayLike) -> None:
        data = np.asarray(array)
        check_dtype(data.dtype, "pred_probs")
        n, k = check_shape(data.shape, "pred_probs")
        super().__init__(n, k, data.dtype, None)
        self.array = data

    def _raw_chunks(self, chunk_rows: int) -> Iterator[tuple[int, FloatArray]]:
        for start in range(0, self.n, chunk_rows):
            chunk = np.ascontiguousarray(self.array[start : start + chunk_rows])
            yield start, chunk

    def _hash_bytes(self, threads: int = 0, stop: threading.Event | None = None) -> str:
        header = io.BytesIO()
        fields = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False}
        fields["shape"] = (self.n, self.k)  # type: ignore[assignment]
        try:
            np.lib.format.write_array_header_1_0(header, fields)
        except ValueError:  # header too large for format 1.0; numpy.save switches to 2.0
            header = io.BytesIO()
            np.lib.format.write_array_header_2_0(header, fields)
        hasher = Hasher(threads=threads)
        hasher.update(header.getvalue())
        for _, chunk in self._raw_chunks(default_chunk_rows(self.k)):
            if stop is not None and stop.is_set():
                raise HashingStopped("pred_probs")
            hasher.update(chunk.data.cast("B"))
        return hasher.hexdigest()


class NpySource(ProbabilitySource):
    """A ``.npy`` file opened memory-mapped; chunks are views into the mapping.

    Pages of a chunk are released (``MADV_DONTNEED``, where the OS offers it) once the
    caller has moved ``CHUNKS_IN_USE`` chunks past it, so resident memory stays at a few
    chunks however large the file.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npy`` file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        file = Path(path)
        hint = "; save it with numpy.save"
        # Mapped copy-on-write: numpy's argmax copies a read-only chunk whole first (pass 1
        # would copy the file once); the detector never writes to a chunk.
        data = open_npy(file, what=str(file), error=ProbabilitiesError, hint=hint, private=True)
        check_dtype(data.dtype, str(file))
        n, k = check_shape(data.shape, str(file))
        super().__init__(n, k, data.dtype, file)
        self.array = data

    def _release(self, begin: int, end: int) -> int:
        """Drop mapped pages in bytes ``[begin, end)`` of the mapping; return the new boundary."""
        mm = getattr(self.array, "_mmap", None)
        advice = getattr(mmap, "MADV_DONTNEED", None)
        end -= end % mmap.PAGESIZE
        if mm is None or advice is None or end <= begin:
            return begin
        try:
            mm.madvise(advice, begin, end - begin)
        except (OSError, ValueError):
            return begin
        return end

    def _raw_chunks(self, chunk_rows: int) -> Iterator[tuple[int, FloatArray]]:
        data = self.array
        offset = int(getattr(data, "offset", 0)) % mmap.ALLOCATIONGRANULARITY
        row_bytes = self.k * self.dtype.itemsize
        c_order = bool(data.flags.c_contiguous)
        released = 0
        ends: deque[int] = deque()
        for start in range(0, self.n, chunk_rows):
            chunk = np.ascontiguousarray(data[start : start + chunk_rows])
            yield start, chunk
            if c_order:
                # Mapped pages count as resident memory: give them back as the pass moves on,
                # behind the chunks the caller may still be working on.
                ends.append(offset + (start + len(chunk)) * row_bytes)
                while len(ends) > CHUNKS_IN_USE:
                    released = self._release(released, ends.popleft())

    def _hash_bytes(self, threads: int = 0, stop: threading.Event | None = None) -> str:
        assert self.path is not None
        return _hash_file(self.path, threads, stop)

    def close(self) -> None:
        super().close()
        mm = getattr(self.array, "_mmap", None)
        if mm is not None:
            del self.array
            # BufferError: a caller still holds a chunk view; the GC unmaps it later.
            with contextlib.suppress(BufferError):
                mm.close()


def _float_dtype(arrow_type: Any) -> np.dtype[Any] | None:
    import pyarrow as pa

    if pa.types.is_floating(arrow_type):
        return cast(np.dtype[Any], np.dtype(arrow_type.to_pandas_dtype()))
    return None


def _list_value_dtype(arrow_type: Any) -> np.dtype[Any] | None:
    import pyarrow as pa

    is_list = pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
    if is_list or pa.types.is_fixed_size_list(arrow_type):
        return _float_dtype(arrow_type.value_type) or np.dtype(object)
    return None


class ParquetSource(ProbabilitySource):
    """A Parquet file read in record batches with pyarrow.

    Two layouts: one list (or fixed-size list) column holding ``k`` floats per row, or ``k``
    float columns, one per class in class order.

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file.
    column : str, optional
        Name of the list column. Default: the only list column, if there is exactly one.
    columns : sequence of str, optional
        Names of the per-class columns in class order. Default: every floating-point column,
        in schema order, when the file has no list column.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        column: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        file = Path(path)
        input_file(file, what=f"probabilities file {str(file)!r}")
        try:
            # pre_buffer would read ahead every row group: memory as large as the file.
            self._file = pq.ParquetFile(file, pre_buffer=False)
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            raise _path_error(exc, file) from exc
        except (pa.ArrowException, OSError) as exc:
            raise ProbabilitiesError(f"{file} is not a readable Parquet file: {exc}") from exc
        schema = self._file.schema_arrow
        refuse_duplicate_columns(schema.names, what=str(file), error=ProbabilitiesError)
        if column is not None and columns is not None:
            raise ProbabilitiesError("pass either column= (a list column) or columns=, not both")
        lists = [f.name for f in schema if _list_value_dtype(f.type) is not None]
        if column is None and columns is None:
            if len(lists) > 1:
                raise ProbabilitiesError(
                    f"{file} has several list columns ({', '.join(lists)}); name the one "
                    "holding the probabilities with column="
                )
            column = lists[0] if lists else None
            columns = [f.name for f in schema if pa.types.is_floating(f.type)]
        names = [column] if column is not None else list(columns or ())
        missing = [c for c in names if c not in schema.names]
        if missing:
            raise ProbabilitiesError(f"{file} has no column(s) {missing}; it has {schema.names}")
        self._names, self._list = names, column is not None
        if column is not None:
            kind = schema.field(column).type
            value_dtype = _list_value_dtype(kind)
            if value_dtype is None or value_dtype.kind == "O":
                raise ProbabilitiesError(
                    f"column {column!r} of {file} has type {kind}; expected a list of floats"
                )
            k = kind.list_size if pa.types.is_fixed_size_list(kind) else self._first_length()
        else:
            dtypes = [_float_dtype(schema.field(c).type) for c in names]
            if any(d is None for d in dtypes):  # not `None in`: dtype(None) is float64
                bad = [c for c, d in zip(names, dtypes, strict=True) if d is None]
                raise ProbabilitiesError(
                    f"column(s) {bad} of {file} are not floating point; pass the class "
                    "probability columns with columns="
                )
            value_dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
            k = len(names)
        check_dtype(value_dtype, str(file))
        n, k = check_shape((self._file.metadata.num_rows, k), str(file))
        super().__init__(n, k, value_dtype, file)

    def _first_length(self) -> int:
        for batch in self._file.iter_batches(batch_size=1, columns=self._names):
            value = batch.column(0)[0].as_py() if batch.num_rows else None
            return 0 if value is None else len(value)
        return 0

    def _raw_chunks(self, chunk_rows: int) -> Iterator[tuple[int, FloatArray]]:
        import pyarrow as pa

        start = 0
        try:
            # One row group at a time, so decoded data never outgrows a row group.
            batches = (
                batch
                for group in range(self._file.num_row_groups)
                for batch in self._file.iter_batches(
                    batch_size=chunk_rows, row_groups=[group], columns=self._names
                )
            )
            for batch in batches:
                if batch.num_rows:
                    chunk = self._decode(batch, start)
                    chunk.flags.writeable = False
                    yield start, chunk
                    start += batch.num_rows
        except (pa.ArrowException, OSError) as exc:  # OSError: a damaged page ("Invalid page
            # header"), found only when its row group is read
            raise ProbabilitiesError(
                f"cannot read {self.path}: {exc}; write the probabilities again"
            ) from exc

    def _decode(self, batch: Any, start: int) -> FloatArray:
        import pyarrow as pa

        rows = batch.num_rows
        if self._list:
            lists = batch.column(0)
            if not pa.types.is_fixed_size_list(lists.type):
                bad = np.flatnonzero(np.diff(np.asarray(lists.offsets)) != self.k)
            else:
                bad = np.zeros(0, dtype=np.intp)
            if lists.null_count or bad.size:
                where = f"row {start + int(bad[0])}" if bad.size else "a null row"
                raise ProbabilitiesError(
                    f"every row of {self._names[0]!r} in {self.path} must hold {self.k} "
                    f"probabilities; {where} does not"
                )
            values = lists.flatten()
            if values.null_count:
                raise ProbabilitiesError(f"{self.path} has null probabilities near row {start}")
            flat = values.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False)
            return np.ascontiguousarray(flat.reshape(rows, self.k))
        out = np.empty((rows, self.k), dtype=self.dtype)
        for j in range(self.k):
            col = batch.column(j)
            if col.null_count:
                raise ProbabilitiesError(
                    f"column {self._names[j]!r} of {self.path} has nulls near row {start}"
                )
            out[:, j] = col.to_numpy(zero_copy_only=False)
        return out

    def _hash_bytes(self, threads: int = 0, stop: threading.Event | None = None) -> str:
        assert self.path is not None
        return _hash_file(self.path, threads, stop)

    def close(self) -> None:
        super().close()
        self._file.close()


def open_probabilities(
    probs: npt.ArrayLike | str | os.PathLike[str] | ProbabilitySource,
    *,
    column: str | None = None,
    columns: Sequence[str] | None = None,
) -> ProbabilitySource:
    """Open predicted probabilities from an array, a ``.npy`` file or a Parquet file.

    Parameters
    ----------
    probs : array_like, str, os.PathLike or ProbabilitySource
        An ``(n, k)`` array, or the path of a ``.npy`` or Parquet file (recognised by its
        first bytes), or an already opened source (returned unchanged).
    column, columns : optional
        Parquet layout; see :class:`ParquetSource`.

    Returns
    -------
    ProbabilitySource

    Raises
    ------
    InputPathError
        The path does not exist.
    ProbabilitiesError
        The content is not a readable float matrix of shape ``(n, k >= 2)``.
    """
    if isinstance(probs, ProbabilitySource):
        return probs
    if isinstance(probs, (str, os.PathLike)):
        path = Path(probs)
        input_file(path, what=f"probabilities file {str(path)!r}")
        try:
            with path.open("rb") as handle:
                magic = handle.read(6)
        except OSError as exc:
            raise _path_error(exc, path) from exc
        if magic == b"\x93NUMPY":
            return NpySource(path)
        if magic[:4] == b"PAR1":
            return ParquetSource(path, column=column, columns=columns)
        raise ProbabilitiesError(
            f"{path} is neither a .npy file nor a Parquet file; save probabilities with "
            "numpy.save or pyarrow.parquet.write_table"
        )
    return ArraySource(probs)
