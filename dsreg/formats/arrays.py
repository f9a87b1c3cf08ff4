"""Arrow arrays built from numpy buffers.

``pa.array`` of numpy or of a Python list makes pyarrow import pandas (a third of a second,
more on a busy machine) the first time it is called; a command that must answer in under a
second (importing a 50,000-row relabeling, scoring it) builds its arrays here instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from dsreg._util.lazy import lazy_imports
from dsreg.formats.names import TRAILING_SPACE, UNSAFE_PATH

# Imported when first called: a command reading a table seldom needs it (0.1 s to import).
with lazy_imports():
    import pyarrow.compute as pc

# from_numpy is re-exported by model.tables
__all__ = [
    "first_unsafe",
    "from_numpy",
    "id_spellings",
    "int_lists",
    "null_array",
    "repeated_string",
    "scattered",
    "string_array",
    "string_lists",
]


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


def _offsets(lengths: Sequence[int]) -> pa.Array:
    return from_numpy(np.cumsum([0, *lengths], dtype=np.int64).astype(np.int32), pa.int32())


def string_lists(values: Sequence[Sequence[str]]) -> pa.ListArray:
    """A list of strings per row (a question set's choices), from Python lists."""
    flat = [v for row in values for v in row]
    return pa.ListArray.from_arrays(_offsets([len(row) for row in values]), string_array(flat))


def int_lists(values: Sequence[Sequence[int] | None]) -> pa.ListArray:
    """A list of int32 per row, null where a row has ``None``, from Python lists."""
    flat = np.fromiter((v for row in values if row is not None for v in row), dtype=np.int32)
    lengths = [0 if row is None else len(row) for row in values]
    valid = np.array([row is not None for row in values], dtype=bool)
    mask = None if valid.all() else from_numpy(~valid, pa.bool_())
    return pa.ListArray.from_arrays(
        _offsets(lengths), from_numpy(flat, pa.int32()), type=pa.list_(pa.int32()), mask=mask
    )


def repeated_string(value: str, n: int) -> pa.Array:
    """``n`` copies of one string, made from numpy buffers (no Python object per copy)."""
    data = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{n} copies of {value!r} do not fit one string array")
    return pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data * n)],
    )


# Every id ``UNSAFE_PATH`` matches is empty or holds one of these bytes ("/", ".", "\\", NUL).
_UNSAFE_BYTES = (b"/", b".", b"\\", b"\x00")


def first_unsafe(ids: pa.Array | pa.ChunkedArray) -> str | None:
    """The first id, in row order, that ``model.names.UNSAFE_PATH`` matches (None: all safe).

    The regex runs only on chunks that could match: a chunk whose ids are all non-empty and
    hold none of the bytes "/", ".", "\\" or NUL (every match needs one) is passed by a scan of
    its bytes, which costs a small fraction of the regex.
    """
    for chunk in ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]:
        if len(chunk) and _may_be_unsafe(chunk):
            bad = pc.match_substring_regex(chunk, UNSAFE_PATH)
            if bad.true_count:
                return str(chunk.filter(bad)[0].as_py())
    return None


def _may_be_unsafe(chunk: pa.Array) -> bool:
    if not pa.types.is_string(chunk.type):
        return True  # large_string and the rest: the regex decides
    _, offsets, data = chunk.buffers()
    ends = np.frombuffer(offsets, dtype=np.int32, count=chunk.offset + len(chunk) + 1)
    ends = ends[chunk.offset :]
    if data is None or bool((ends[1:] == ends[:-1]).any()):
        return True  # an empty id (or a null, which the regex passes)
    text = memoryview(data)[int(ends[0]) : int(ends[-1])].tobytes()
    return any(b in text for b in _UNSAFE_BYTES)


def id_spellings(ids: pa.Array) -> pa.Array:
    """``names.id_spelling`` of each id, vectorised: NFC of the ids that are not ASCII (NFC
    changes no ASCII text), then whitespace at the end of each path part removed, if the bytes
    hold any. ``ids`` itself when each is printable ASCII without a space, its own spelling:
    the usual case, passed by two reductions over the bytes (50 million ids: a tenth of a
    second). The rest costs about a second per million ids that are not ASCII."""
    data = _text_bytes(ids)
    if data is not None and (not len(data) or (data.min() > 0x20 and data.max() < 0x7F)):
        return ids
    if data is None or data.max() >= 0x80:
        other = pc.fill_null(pc.invert(pc.string_is_ascii(ids)), False)
        if pc.any(other).as_py():
            nfc = pc.utf8_normalize(ids.filter(other), form="NFC")
            ids = pc.replace_with_mask(ids, other, nfc)
    if data is None or _may_hold_space(data):
        ids = pc.replace_substring_regex(ids, pattern=TRAILING_SPACE, replacement="\\1")
    return ids


def _may_hold_space(data: np.ndarray) -> bool:
    """Whether a White_Space character may begin in UTF-8 ``data``: an ASCII control or space,
    or a first byte of the others (U+0085 and U+00A0: C2; U+1680: E1; U+2000 to U+205F: E2;
    U+3000: E3)."""
    return bool(((data <= 0x20) | (data == 0xC2) | ((data >= 0xE1) & (data <= 0xE3))).any())


def _text_bytes(chunk: pa.Array) -> np.ndarray | None:
    """The UTF-8 bytes of a string or large_string array's values (None for other types)."""
    if pa.types.is_string(chunk.type):
        width: type[np.signedinteger[Any]] = np.int32
    elif pa.types.is_large_string(chunk.type):
        width = np.int64
    else:
        return None
    _, offsets, data = chunk.buffers()
    ends = np.frombuffer(offsets, dtype=width, count=chunk.offset + len(chunk) + 1)
    lo, hi = int(ends[chunk.offset]), int(ends[-1])
    if data is None or hi == lo:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(data, dtype=np.uint8, count=hi - lo, offset=lo)


def null_array(type_: pa.DataType, n: int) -> pa.Array:
    """``n`` nulls of a fixed-width or string/binary ``type_`` over zeroed numpy buffers.

    ``pa.nulls`` fills a buffer from Arrow's pool (every page written); ``np.zeros`` of this
    size is fresh zero pages from the kernel, costing nothing until something reads them: a
    50-million-row table's all-null ``blob`` and ``size`` (a label-only set) take no time and no
    memory to serve. Other types fall back to ``pa.nulls``."""
    bitmap = pa.py_buffer(np.zeros((n + 7) // 8, dtype=np.uint8))
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        offsets = pa.py_buffer(np.zeros(n + 1, dtype=np.int32))
        return pa.Array.from_buffers(type_, n, [bitmap, offsets, pa.py_buffer(b"")], null_count=n)
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        data = pa.py_buffer(np.zeros(n * type_.bit_width // 8, dtype=np.uint8))
        return pa.Array.from_buffers(type_, n, [bitmap, data], null_count=n)
    return pa.nulls(n, type_)


def scattered(
    n: int, at: np.ndarray, values: np.ndarray, type_: pa.DataType, *, bitmap: pa.Buffer | None
) -> pa.Array:
    """A fixed-width array of ``n`` slots holding ``values`` at positions ``at`` (zero
    elsewhere), its validity ``bitmap`` (Arrow's little-endian bits; ``None``: all valid).

    One scatter into zeroed pages: the slots never written cost nothing to fill (against
    ``take`` through a null-bitmapped index, which writes every slot)."""
    data = np.zeros(n, dtype=np.dtype(type_.to_pandas_dtype()))
    data[at] = values
    nulls = -1 if bitmap is not None else 0
    return pa.Array.from_buffers(type_, n, [bitmap, pa.py_buffer(data)], null_count=nulls)
