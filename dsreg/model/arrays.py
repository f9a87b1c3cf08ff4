"""Arrow arrays built from numpy buffers.

``pa.array`` of numpy or of a Python list makes pyarrow import pandas (a third of a second,
more on a busy machine) the first time it is called; a command that must answer in under a
second (importing a 50,000-row relabeling, scoring it) builds its arrays here instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["from_numpy", "string_array"]


_NUMPY_OF = {
    pa.int8(): np.int8,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.float64(): np.float64,
}


def from_numpy(
    values: np.ndarray, type_: pa.DataType, *, valid: np.ndarray | None = None
) -> pa.Array:
    """A fixed-width Arrow array (int8, int32, int64 or float64) over numpy ``values``, null
    where ``valid`` is false."""
    data = np.ascontiguousarray(values, dtype=_NUMPY_OF[type_])
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        type_, len(data), [bitmap, pa.py_buffer(data)], null_count=-1 if bitmap else 0
    )


def string_array(values: Sequence[str]) -> pa.Array:
    """A string array from Python strings."""
    data = [v.encode("utf-8") for v in values]
    offsets = np.cumsum([0, *(len(b) for b in data)], dtype=np.int64).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    )
