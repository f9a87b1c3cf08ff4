"""The bytes of a votes log: its records, its damaged spans, and the files they are moved to.

A record is one line, ``<CRC-32 of the JSON, 8 lowercase hex> <JSON object>\\n``, whose JSON
holds ``seq``, the record's number (0, 1, 2, … in the order they were appended). A span of a
log that is not a record whose check holds is *damaged*: a record with a flipped, lost or added
byte, a last record torn by a crash mid-append, or bytes that are no record at all. ``scan``
splits a log into its records and its damaged spans. After a damaged byte it resynchronises on
the next record (the next ``<8 hex> {`` anywhere in the bytes, not only after a newline, whose
line's check holds), so damage costs the records it touches and never the ones after it.

A damaged span is counted in records. Between two records it held the ``seq`` numbers missing
between theirs, less the ones set aside before (a span moved aside earlier leaves its numbers
missing for good). At the end of the log nothing follows to count from; it counts as the larger
of two tallies, each of which misses a record only where the damage hit that record's own
bytes: one record (a damaged end is most often the last record, torn by a crash) plus one for
each further line in it that starts as a record does, and the ``"op":"`` keys in it (every
record has one; a reviewer's name cannot put one there, its quotes being escaped). Bytes added
after the last record therefore count as one record: the count may say one too many there.

A span moved aside (``votelog.VotesLog`` does it when a server opens the log) goes to a file
of its own beside the log, ``votes.log.damaged-<offset>`` (``.2``, ``.3``, … added when that
name holds other bytes): one header line, a record of this same format (``op`` ``set-aside``,
``start`` and ``end`` the byte range in the log as it was, ``records``, ``seqs``, ``crc32`` of
the bytes, ``t``), then the span's bytes exactly.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from dsreg._util.jsonread import LINE_BYTES, loads
from dsreg._util.records import field_dict
from dsreg.errors import InvalidInputError

__all__ = [
    "DAMAGED_PREFIX",
    "Scan",
    "SetAside",
    "decode",
    "encode",
    "quarantine_header",
    "read_quarantine",
    "scan",
]

DAMAGED_PREFIX: Final = "votes.log.damaged-"
# Where a record may start: its check (8 lowercase hex), a space and its JSON object's brace.
_START: Final = re.compile(rb"[0-9a-f]{8} \{")
# A further line of a damaged end that starts as a record does, whole or cut by the end.
_LINE_START: Final = re.compile(rb"\n(?:[0-9a-f]{8} \{|[0-9a-f]{1,8} ?\Z)")
_OP_KEY: Final = re.compile(rb'"op":"')


def encode(record: dict[str, Any]) -> bytes:
    """A record's line: its JSON (sorted keys, ASCII) after the CRC-32 of that JSON."""
    body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def decode(line: bytes, *, numbered: bool = True) -> dict[str, Any] | None:
    """The record of one line (without its newline), or None if the line is not one whose check
    holds and (``numbered``) whose ``seq`` is a whole number."""
    if len(line) < 11 or line[8:9] != b" ":
        return None
    body = line[9:]
    if line[:8] != b"%08x" % zlib.crc32(body):
        return None
    try:
        record = loads(body, what="votes log record", error=InvalidInputError, max_bytes=LINE_BYTES)
    except InvalidInputError:
        return None
    if not isinstance(record, dict):
        return None
    if not numbered:
        return record
    seq = record.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        return None
    return record


@dataclass(frozen=True, slots=True, kw_only=True)
class SetAside:
    """A damaged span of a votes log.

    Attributes
    ----------
    log : str
        The log's path.
    start, end : int
        Its byte range in the log, ``[start, end)`` (as Python slices it), as the log was when
        it was found.
    records : int
        The records (answers, skips, undos) it held, as far as can be told (module docstring).
    seqs : tuple of int, or None
        The first and last ``seq`` of those records (None when it held none).
    file : str or None
        The file that holds its bytes; None while they are still in the log (a reader that
        does not repair the log found them: the next server of the queue moves them).
    time : float or None
        When it was moved aside (Unix time); None while it is still in the log.
    readable : bool
        False when the file is damaged itself: its bytes fail the header's check, or its header
        is unreadable (the range is then the file's name's offset and size, ``records`` 0).
    """

    log: str
    start: int
    end: int
    records: int
    seqs: tuple[int, int] | None
    file: str | None
    time: float | None = None
    readable: bool = True

    def describe(self) -> str:
        """One line saying where the span was, what it held and where its bytes are."""
        held = f"{self.records} record{'' if self.records == 1 else 's'}"
        if self.seqs is not None:
            first, last = self.seqs
            held += f", seq {first}" if first == last else f", seq {first} to {last}"
        what = (
            f"bytes {self.start}-{self.end} of {self.log} ({self.end - self.start} bytes, {held})"
        )
        if self.file is None:
            return (
                f"{what}: still in the log; the next 'dsreg review' moves it to a file of its own"
            )
        if not self.readable:
            return f"{what}: in {self.file}, which is damaged itself (the count is its header's)"
        return f"{what}: moved to {self.file}"

    def to_dict(self) -> dict[str, Any]:
        return field_dict(self, seqs=None if self.seqs is None else list(self.seqs))


@dataclass(frozen=True, slots=True)
class Scan:
    """A log's records (oldest first), the byte range of each, and its damaged spans."""

    records: list[dict[str, Any]]
    bounds: list[tuple[int, int]]
    damaged: list[SetAside]


def _record_at(data: bytes, pos: int) -> tuple[dict[str, Any], int] | None:
    newline = data.find(b"\n", pos)
    if newline < 0:
        return None
    record = decode(data[pos:newline])
    return None if record is None else (record, newline + 1)


def _next_start(data: bytes, pos: int) -> int:
    """Where the first record at or after ``pos`` starts (the end of ``data`` if none does)."""
    for match in _START.finditer(data, pos):
        if _record_at(data, match.start()) is not None:
            return match.start()
    return len(data)


def _overlap(first: int, last: int, ranges: Sequence[tuple[int, int]]) -> int:
    return sum(max(0, min(last, hi) - max(first, lo) + 1) for lo, hi in ranges)


def _span(
    data: bytes,
    start: int,
    end: int,
    before: int,
    after: int | None,
    gone: Sequence[tuple[int, int]],
) -> tuple[int, tuple[int, int] | None]:
    """The records in the damaged ``data[start:end]`` between records numbered ``before`` (-1:
    none) and ``after`` (None: the span ends the log), counted as the module docstring says,
    and their first and last ``seq``."""
    if after is not None:
        count = max(0, after - before - 1 - _overlap(before + 1, after - 1, gone))
        seqs = (before + 1, after - 1) if count else None
    else:
        starts = 1 + len(_LINE_START.findall(data, start, end))
        count = max(starts, len(_OP_KEY.findall(data, start, end)))
        seqs = (before + 1, before + count)
    return count, seqs


def scan(data: bytes, *, log: str, gone: Sequence[tuple[int, int]] = ()) -> Scan:
    """Split a log's bytes (``log``: its path, as reported) into its records and its damaged
    spans. ``gone``: the ``seq`` ranges set aside before, which a span between two records did
    not hold."""
    records: list[dict[str, Any]] = []
    bounds: list[tuple[int, int]] = []
    holes: list[tuple[int, int, int]] = []  # start, end, records before it
    pos = 0
    while pos < len(data):
        found = _record_at(data, pos)
        if found is None:
            end = _next_start(data, pos + 1)
            holes.append((pos, end, len(records)))
            pos = end
            continue
        records.append(found[0])
        bounds.append((pos, found[1]))
        pos = found[1]
    damaged = []
    for start, end, i in holes:
        before = records[i - 1]["seq"] if i else -1
        after = records[i]["seq"] if i < len(records) else None
        count, seqs = _span(data, start, end, before, after, gone)
        damaged.append(SetAside(log=log, start=start, end=end, records=count, seqs=seqs, file=None))
    return Scan(records, bounds, damaged)


def quarantine_header(span: SetAside, data: bytes, now: float) -> bytes:
    """The header line of the file a damaged span ``data`` is moved to."""
    return encode(
        {
            "op": "set-aside",
            "start": span.start,
            "end": span.end,
            "records": span.records,
            "seqs": None if span.seqs is None else list(span.seqs),
            "crc32": f"{zlib.crc32(data):08x}",
            "t": now,
        }
    )


def read_quarantine(log: str, name: str, content: bytes) -> tuple[SetAside, bytes]:
    """What a quarantine file beside ``log`` (``name``, its path as reported; ``content``, its
    bytes) says, and the span's bytes it holds. A damaged header gives the offset its name says,
    the whole file as the bytes, and ``readable`` False."""
    newline = content.find(b"\n")
    header = decode(content[:newline], numbered=False) if newline >= 0 else None
    body = content[newline + 1 :]
    try:
        if header is None or header.get("op") != "set-aside":
            raise ValueError("not a set-aside header")
        start, end, records = (int(header[k]) for k in ("start", "end", "records"))
        seqs = header["seqs"]
        pair = None if seqs is None else (int(seqs[0]), int(seqs[1]))
        when = float(header["t"])
        whole = header["crc32"] == f"{zlib.crc32(body):08x}"
    except (KeyError, TypeError, ValueError, IndexError):
        offset = name.rpartition(DAMAGED_PREFIX)[2].partition(".")[0]
        start = int(offset) if offset.isdigit() else 0
        span = SetAside(
            log=log,
            start=start,
            end=start + len(content),
            records=0,
            seqs=None,
            file=name,
            readable=False,
        )
        return span, content
    span = SetAside(
        log=log,
        start=start,
        end=end,
        records=records,
        seqs=pair,
        file=name,
        time=when,
        readable=whole,
    )
    return span, body
