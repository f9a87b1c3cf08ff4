"""Drop ``created_by`` from a Parquet footer, so a table's bytes do not name the writer's version.

pyarrow writes ``created_by = "parquet-cpp-arrow version X.Y.Z"`` into every file's footer, so
the same table written by two pyarrow releases (even two patch releases) would get two digests.
The footer is a Thrift compact-protocol ``FileMetaData`` struct; ``created_by`` is its optional
field 6. Removing it leaves a file every reader accepts (the field is optional; readers then
treat the writer as unknown), and the rest of the bytes untouched.
"""

from __future__ import annotations

__all__ = [
    "read_field_header",
    "read_varint",
    "skip_value",
    "strip_created_by",
    "varint_bytes",
]

_MAGIC = b"PAR1"
_CREATED_BY = 6
_BINARY = 8


def strip_created_by(data: bytes) -> bytes:
    """``data`` (a whole Parquet file) without its footer's ``created_by`` field."""
    if len(data) < 12 or data[-4:] != _MAGIC:
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
            return data[:start] + new + len(new).to_bytes(4, "little") + _MAGIC
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
