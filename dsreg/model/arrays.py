"""Arrow arrays built from numpy buffers.

``pa.array`` of numpy or of a Python list makes pyarrow import pandas (a third of a second,
more on a busy machine) the first time it is called; a command that must answer in under a
second (importing a 50,000-row relabeling, scoring it) builds its arrays here instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["from_numpy", "string_array"]  # from_numpy is re-exported by model.tables


def from_numpy(
    values: np.ndarray, type_: pa.DataType, *, valid: np.ndarray | None = None
) -> pa.Array:
    """A fixed-width Arrow array over numpy ``values`` (cast to ``type_``'s dtype), null where
    ``valid`` is false. ``pa.array`` on a numpy array imports pandas to ask whether it is a
    pandas object: a third of a second for a command that reads a table in one."""
    bitmap = None
    if valid is not None and not valid.all():
        bitmap = pa.py_buffer(np.packbits(np.asarray(valid, dtype=bool), bitorder="little"))
    if pa.types.is_boolean(type_):  # Arrow packs booleans into bits
        bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(type_, len(values), [bitmap, pa.py_buffer(bits)])
    data = np.ascontiguousarray(values, dtype=np.dtype(type_.to_pandas_dtype()))
    return pa.Array.from_buffers(type_, len(data), [bitmap, pa.py_buffer(data)])


def string_array(values: Sequence[str]) -> pa.Array:
    """A string array from Python strings."""
    data = [v.encode("utf-8") for v in values]
    offsets = np.cumsum([0, *(len(b) for b in data)], dtype=np.int64).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    )
