"""Parquet footers, read and rewritten without a Parquet library: ``created_by`` dropped, and
one-row-group files joined.

``created_by`` is dropped so that a table's bytes do not name the writer's version: pyarrow writes
``created_by = "parquet-cpp-arrow version X.Y.Z"`` into every file's footer, so the same table
written by two pyarrow releases (even two patch releases) would get two digests. The footer is a
Thrift compact-protocol ``FileMetaData`` struct; ``created_by`` is its optional field 6. Removing
it leaves a file every reader accepts (the field is optional; readers then treat the writer as
unknown), and the rest of the bytes untouched.

One-row-group files are joined into the file one writer would have written. A Parquet file is
``PAR1``, the column chunks of its row groups one after another, then a footer: a Thrift
compact-protocol ``FileMetaData`` giving each chunk's byte offsets in the file, a 4-byte length and
``PAR1``. A row group's chunk bytes depend only on its rows and the writer settings (each chunk has
its own dictionary, statistics and pages), not on the row groups before it, so row groups can be
encoded on separate threads, each as a file of its own, and joined: the bodies one after another,
and the footers merged into one, every offset moved by where the body now starts, ``ordinal`` (when
written) renumbered, ``num_rows`` summed. Everything else in the footer is copied byte for byte, so
the joined file equals the one-writer file (``tests/formats/test_parquet_join.py`` compares them
byte for byte; ``tests/golden`` pins the digests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Union

__all__ = [
    "MAGIC",
    "RowGroupJoiner",
    "read_field_header",
    "read_varint",
    "skip_value",
    "strip_created_by",
    "varint_bytes",
]

MAGIC = b"PAR1"
_CREATED_BY = 6
_BINARY = 8


def strip_created_by(data: bytes) -> bytes:
    """``data`` (a whole Parquet file) without its footer's ``created_by`` field."""
    if len(data) < 12 or data[-4:] != MAGIC:
        raise ValueError("not a Parquet file: no trailing PAR1")
    n = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - n
    footer = data[start:-8]
    pos, last = 0, 0
    while footer[pos] != 0:
        head_at = pos
        fid, t, pos = read_field_header(footer, pos, last)
        pos = skip_value(footer, pos, t)
        if fid == _CREATED_BY and t == _BINARY:
            rest = footer[pos:]
            if rest[0] != 0 and rest[0] >> 4:
                # The next field's id was written relative to 6; rewrite it relative to ``last``.
                nt, nid = rest[0] & 0x0F, fid + (rest[0] >> 4)
                d = nid - last
                head2 = bytes([d << 4 | nt]) if d <= 15 else bytes([nt]) + varint_bytes(nid * 2)
                rest = head2 + rest[1:]
            new = footer[:head_at] + rest
            return data[:start] + new + len(new).to_bytes(4, "little") + MAGIC
        last = fid
    return data


def read_field_header(buf: bytes | memoryview, pos: int, last: int) -> tuple[int, int, int]:
    """The compact-protocol field header at ``pos`` (not a struct's stop byte), ``last`` the
    previous field's id in the struct: (field id, type, position of the value)."""
    head = buf[pos]
    pos += 1
    t, delta = head & 0x0F, head >> 4
    if delta:
        return last + delta, t, pos
    zz, pos = read_varint(buf, pos)
    return (zz >> 1) ^ -(zz & 1), t, pos


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def varint_bytes(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def skip_value(buf: bytes | memoryview, pos: int, t: int) -> int:
    """The position after a value of compact type ``t`` starting at ``pos``."""
    if t in (1, 2):  # a struct field's boolean lives in its header byte
        return pos
    if t == 3:
        return pos + 1
    if t in (4, 5, 6):
        return read_varint(buf, pos)[1]
    if t == 7:
        return pos + 8
    if t == 8:
        size, pos = read_varint(buf, pos)
        return pos + size
    if t in (9, 10):
        head = buf[pos]
        pos += 1
        size, et = head >> 4, head & 0x0F
        if size == 15:
            size, pos = read_varint(buf, pos)
        for _ in range(size):
            pos = pos + 1 if et in (1, 2) else skip_value(buf, pos, et)
        return pos
    if t == 11:
        size, pos = read_varint(buf, pos)
        if size:
            kt, vt = buf[pos] >> 4, buf[pos] & 0x0F
            pos += 1
            for _ in range(size):
                pos = pos + 1 if kt in (1, 2) else skip_value(buf, pos, kt)
                pos = pos + 1 if vt in (1, 2) else skip_value(buf, pos, vt)
        return pos
    if t == 12:
        while True:
            head = buf[pos]
            pos += 1
            if head == 0:
                return pos
            if not head >> 4:
                pos = read_varint(buf, pos)[1]
            pos = skip_value(buf, pos, head & 0x0F)
    raise ValueError(f"unknown Thrift compact type {t} in the Parquet footer")


# -- one-row-group files joined ------------------------------------------------------------------
_I16, _I32, _I64, _LIST, _STRUCT = 4, 5, 6, 9, 12

# What to change in a struct: field id -> a new value for an integer field, or the rules for a
# struct field (or for every struct in a list field).
Rules = dict[int, Union[Callable[[int], int], "Rules"]]


def _zigzag(n: int) -> int:
    return n << 1 if n >= 0 else (-n << 1) - 1


def _copy_struct(buf: memoryview, pos: int, out: bytearray, rules: Rules) -> int:
    """Copy the struct at ``pos`` into ``out`` with ``rules`` applied; the position after it."""
    last = 0
    while True:
        start = pos
        if buf[pos] == 0:
            out.append(0)
            return pos + 1
        fid, t, pos = read_field_header(buf, pos, last)
        last = fid
        out += buf[start:pos]  # the field header: same id, same type
        rule = rules.get(fid)
        if rule is None:
            end = skip_value(buf, pos, t)
            out += buf[pos:end]
            pos = end
        elif callable(rule):
            if t not in (_I16, _I32, _I64):
                raise ValueError(f"Parquet footer field {fid} is not an integer (type {t})")
            zz, pos = read_varint(buf, pos)
            out += varint_bytes(_zigzag(rule((zz >> 1) ^ -(zz & 1))))
        elif t == _STRUCT:
            pos = _copy_struct(buf, pos, out, rule)
        elif t == _LIST and buf[pos] & 0x0F == _STRUCT:
            size, pos = _list_head(buf, pos, out)
            for _ in range(size):
                pos = _copy_struct(buf, pos, out, rule)
        else:
            end = skip_value(buf, pos, t)
            out += buf[pos:end]
            pos = end


def _list_head(buf: memoryview, pos: int, out: bytearray) -> tuple[int, int]:
    start = pos
    size = buf[pos] >> 4
    pos += 1
    if size == 15:
        size, pos = read_varint(buf, pos)
    out += buf[start:pos]
    return size, pos


def _list_head_bytes(size: int, elem: int) -> bytes:
    return bytes([size << 4 | elem]) if size < 15 else bytes([0xF0 | elem]) + varint_bytes(size)


def _footer(data: memoryview) -> memoryview:
    if len(data) < 12 or bytes(data[:4]) != MAGIC or bytes(data[-4:]) != MAGIC:
        raise ValueError("not a Parquet file: no PAR1 at both ends")
    n = int.from_bytes(data[-8:-4], "little")
    return data[len(data) - 8 - n : -8]


def _fields(buf: memoryview, pos: int = 0) -> list[tuple[int, int, int, int]]:
    """The top-level fields of the struct at ``pos``: (id, type, header start, value start)."""
    out, last = [], 0
    while buf[pos] != 0:
        start = pos
        fid, t, pos = read_field_header(buf, pos, last)
        last = fid
        out.append((fid, t, start, pos))
        pos = skip_value(buf, pos, t)
    return out


class RowGroupJoiner:
    """Feed one-row-group Parquet files in order (``add`` returns the bytes to write for each),
    then ``footer()``: the joined file is ``PAR1``, the bodies in order, the footer."""

    def __init__(self) -> None:
        self.pos = len(MAGIC)  # where the next body starts in the joined file
        self.rows = 0
        self.groups: list[bytes] = []
        self._first: memoryview | None = None

    def add(self, data: bytes | memoryview) -> memoryview:
        """Take one file of exactly one row group; return its body (the bytes between the
        leading ``PAR1`` and the footer), to be written next."""
        view = memoryview(data).cast("B")
        footer = _footer(view)
        body = view[len(MAGIC) : len(view) - 8 - len(footer)]
        shift = self.pos - len(MAGIC)
        ordinal = len(self.groups)

        def moved(offset: int) -> int:
            return offset + shift

        def nonzero_moved(offset: int) -> int:
            return offset + shift if offset else 0

        column_meta: Rules = {9: moved, 10: moved, 11: moved, 14: moved}
        chunk: Rules = {2: nonzero_moved, 3: column_meta, 4: moved, 6: moved}
        group: Rules = {1: chunk, 5: moved, 7: lambda _: ordinal}
        groups = [f for f in _fields(footer) if f[0] == 4]
        rows = [f for f in _fields(footer) if f[0] == 3]
        if len(groups) != 1 or len(rows) != 1 or groups[0][1] != _LIST:
            raise ValueError("a Parquet footer without num_rows and row_groups")
        size, pos = _list_head(footer, groups[0][3], bytearray())
        if size != 1:
            raise ValueError(f"a part to join holds {size} row groups, not one")
        out = bytearray()
        _copy_struct(footer, pos, out, group)
        self.groups.append(bytes(out))
        zz, _ = read_varint(footer, rows[0][3])
        self.rows += (zz >> 1) ^ -(zz & 1)
        if self._first is None:
            self._first = memoryview(bytes(footer))
        self.pos += len(body)
        return body

    def footer(self) -> bytes:
        """The joined file's footer, its length and ``PAR1`` (after every part is added)."""
        if self._first is None:
            raise ValueError("no row groups to join")
        first = self._first
        out = bytearray()
        for fid, t, start, value in _fields(first):
            out += first[start:value]
            if fid == 3:
                out += varint_bytes(_zigzag(self.rows))
            elif fid == 4:
                out += _list_head_bytes(len(self.groups), _STRUCT)
                out += b"".join(self.groups)
            else:
                out += first[value : skip_value(first, value, t)]
        out.append(0)
        return bytes(out) + len(out).to_bytes(4, "little") + MAGIC
