"""An ``--against`` corpus that is not registered, given as one Parquet file.

The file holds one item per row: an ``id`` column (strings or integers, every row one, each
once) naming the item in the matches, and exactly one payload column, ``image`` (bytes: an
encoded image, or a struct with a ``bytes`` field as Hugging Face ``datasets`` writes its
``Image`` feature) or ``text`` (strings). Other columns are not read. A file without these
columns, or with them of another type, is refused before any work with one line naming the
file and the columns found (``read_corpus``).

A row whose payload is null, or larger than ``fingerprints.MAX_PAYLOAD_BYTES``, is listed as
unreadable with its id, as an unreadable file of an ``--against`` folder is. The payloads are
fingerprinted as they are, as the kind their column names (bytes of the ``image`` column that
are no image are unreadable, never read as text), batch by batch on the audit's engine
(``fingerprint_blobs``: the bytes travel with the batch, so a Ray task needs no shared file
system), and not stored; a payload that cannot be fingerprinted (an undecodable image, an
empty text) is listed as unreadable with its id and the reason, as a null one is; the corpus
is named in the matches by the digest of its listing (each id and its payload's digest), as a
folder is.

Memory. The file is never read whole: ``read_corpus`` reads its footer and its ``id`` column,
and ``windows`` reads the payload column in batches of rows (Parquet pages read as they come,
no row group read ahead), handing the engine a window of at most ``WINDOW_BYTES`` of payloads
at a time. A single value is read whole by the Parquet reader before its size is known, as
any Parquet reader must (a Parquet value is at most 2 GiB).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsreg.audit import fingerprints
from dsreg.audit.fingerprints import FINGERPRINT_SCHEMA, fingerprint_payloads, too_large
from dsreg.errors import DatasetFormatError
from dsreg.objects.hashing import hash_bytes

__all__ = [
    "BLOBS_SCHEMA",
    "ID_COLUMN",
    "PAYLOAD_COLUMNS",
    "WINDOW_BYTES",
    "Corpus",
    "Window",
    "fingerprint_blobs",
    "in_order",
    "read_corpus",
    "windows",
]

#: The column naming each item.
ID_COLUMN = "id"
#: The payload columns, exactly one of which a corpus file has.
PAYLOAD_COLUMNS = ("image", "text")
#: Payload bytes of a corpus file handed to the engine at a time.
WINDOW_BYTES = 256 << 20
# Rows the Parquet reader decodes at a time.
_BATCH_ROWS = 64


@dataclass(frozen=True, slots=True)
class Corpus:
    """A corpus file checked: its payload column, and every row's id in the file's order (the
    payloads are read later, window by window)."""

    path: Path
    kind: str  # the payload column's name: image or text
    ids: list[str]


def _unreadable(path: Path, e: Exception) -> DatasetFormatError:
    detail = " ".join(str(e).split())[:200]
    return DatasetFormatError(
        f"--against {path}: not a readable Parquet file ({detail}); give a folder, a "
        "registered revision, or a Parquet file of a corpus",
        path=str(path),
    )


def _refuse(path: Path, found: list[str], why: str) -> DatasetFormatError:
    names = ", ".join(found) or "none"
    return DatasetFormatError(
        f"--against {path}: {why}; a corpus file needs an {ID_COLUMN!r} column (strings or "
        f"integers) and one of 'image' (bytes) or 'text' (strings); columns found: {names}",
        path=str(path),
    )


def _payload_type_ok(kind: pa.DataType, name: str) -> bool:
    """Whether a payload column of type ``kind`` is what ``name`` asks for: bytes (or a struct
    with a ``bytes`` field of bytes) for ``image``, strings for ``text``."""
    if name == "image" and pa.types.is_struct(kind):
        index = kind.get_field_index("bytes")
        if index < 0:
            return False
        kind = kind.field(index).type
    if name == "image":
        return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _as_binary(column: pa.Array, name: str) -> pa.Array:
    """A batch's payload column as large binary (an image struct's ``bytes`` field)."""
    if pa.types.is_struct(column.type):
        column = pc.struct_field(column, [column.type.get_field_index("bytes")])
    if name == "text":
        column = column.cast(pa.large_string())
    return column.cast(pa.large_binary())


def _ids(path: Path, column: pa.ChunkedArray) -> list[str]:
    """The ids of the ``id`` column, as strings; a one-line error naming the first row without
    one, or the first id given to two rows (rows counted from 0)."""
    ids = [None if i is None else str(i) for i in column.to_pylist()]
    missing = [r for r, i in enumerate(ids) if i is None]
    if missing:
        raise DatasetFormatError(
            f"--against {path}: row {missing[0]} (counted from 0) has no id, and {len(missing)} "
            f"of {len(ids)} rows have none; give every row an id of its own",
            path=str(path),
        )
    first: dict[str | None, int] = {}
    for r, i in enumerate(ids):
        if (seen := first.setdefault(i, r)) != r:
            raise DatasetFormatError(
                f"--against {path}: id {i!r} is given to rows {seen} and {r} (counted from 0); "
                "give every row an id of its own",
                path=str(path),
            )
    return [str(i) for i in ids]


def read_corpus(path: Path) -> Corpus:
    """The corpus file ``path`` checked, its ids read (not its payloads); a one-line
    ``DatasetFormatError`` where it is not a Parquet file of the expected columns (see the
    module)."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as e:
        raise _unreadable(path, e) from e
    names = list(schema.names)
    given = [c for c in PAYLOAD_COLUMNS if c in names]
    if ID_COLUMN not in names or len(given) != 1:
        raise _refuse(
            path,
            names,
            "no 'id' column" if ID_COLUMN not in names else "not exactly one payload column",
        )
    try:
        table = pq.read_table(path, columns=[ID_COLUMN])
    except (OSError, pa.ArrowException) as e:  # a footer that reads, pages that do not
        raise _unreadable(path, e) from e
    if table.num_rows == 0:
        raise DatasetFormatError(
            f"--against {path}: the Parquet file has no rows; give a corpus with one row per item",
            path=str(path),
        )
    ids = table.column(ID_COLUMN)
    if not (
        pa.types.is_string(ids.type)
        or pa.types.is_large_string(ids.type)
        or pa.types.is_integer(ids.type)
    ):
        raise _refuse(path, names, f"column 'id' holds {ids.type}")
    kind = schema.field(given[0]).type
    if not _payload_type_ok(kind, given[0]):
        raise _refuse(path, names, f"column {given[0]!r} holds {kind}")
    return Corpus(path=path, kind=given[0], ids=_ids(path, ids))


class Window(NamedTuple):
    """Consecutive rows of a corpus file: those with a payload to fingerprint (a
    ``BLOBS_SCHEMA`` table), and the ids of those without one or with one too large to read,
    with the reason."""

    blobs: pa.Table
    skipped: list[tuple[str, str]]

    @property
    def rows(self) -> int:
        return int(self.blobs.num_rows) + len(self.skipped)


def windows(corpus: Corpus) -> Iterator[Window]:
    """The corpus's rows in order, in windows of at most ``WINDOW_BYTES`` of payloads (one row
    more if that row alone is larger): the payload column read batch by batch, never whole."""
    window = _Gathered()
    try:
        reader = pq.ParquetFile(corpus.path, pre_buffer=False, buffer_size=1 << 20)
        at = 0
        for batch in reader.iter_batches(
            batch_size=_BATCH_ROWS, columns=[corpus.kind], use_threads=False
        ):
            data = _as_binary(batch.column(0), corpus.kind)
            names = corpus.ids[at : at + len(data)]
            at += len(data)
            taken: list[int] = []
            lengths = pc.binary_length(data).to_pylist()
            for j, (name, n) in enumerate(zip(names, lengths, strict=True)):
                if n is None or n > fingerprints.MAX_PAYLOAD_BYTES:
                    window.skipped.append(
                        (name, "no payload (null)" if n is None else too_large(n))
                    )
                    continue
                if window.size and window.size + n > WINDOW_BYTES:
                    window.pieces.append(data.take(taken))
                    taken = []
                    yield window.done()
                    window = _Gathered()
                taken.append(j)
                window.ids.append(name)
                window.size += n
            window.pieces.append(data.take(taken))
    except (OSError, pa.ArrowException) as e:  # pages that do not read
        raise _unreadable(corpus.path, e) from e
    if window.ids or window.skipped:
        yield window.done()


@dataclass
class _Gathered:
    """A window being gathered: its payloads' ids, pieces and bytes, and the rows skipped."""

    ids: list[str] = field(default_factory=list)
    pieces: list[pa.Array] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    size: int = 0

    def done(self) -> Window:
        data = pa.concat_arrays(self.pieces) if self.pieces else pa.array([], pa.large_binary())
        names = pa.array(self.ids, pa.string())
        return Window(
            pa.table({ID_COLUMN: names, "bytes": data}, schema=BLOBS_SCHEMA), self.skipped
        )


#: What ``fingerprint_blobs`` reads: an item's id and its bytes.
BLOBS_SCHEMA = pa.schema(
    [pa.field(ID_COLUMN, pa.string(), nullable=False), pa.field("bytes", pa.large_binary())]
)


def fingerprint_blobs(batch: pa.Table, kind: str) -> pa.Table:
    """The fingerprints of a ``BLOBS_SCHEMA`` batch's payloads, taken as ``kind`` (the corpus's
    payload column), each named by its digest, with the item's id as a last column: the pure
    batch function the engine runs for a corpus file."""
    data = batch.column("bytes").to_pylist()
    table = fingerprint_payloads([hash_bytes(b) for b in data], data, as_kind=kind)
    return table.append_column(ID_COLUMN, batch.column(ID_COLUMN))


def in_order(ids: list[str], parts: list[pa.Table]) -> pa.Table:
    """The engine's result batches for the items ``ids`` as one ``FINGERPRINT_SCHEMA`` table,
    in their order."""
    if not parts:
        return FINGERPRINT_SCHEMA.empty_table()
    table = pa.concat_tables(parts)
    order = pc.index_in(pa.array(ids, pa.string()), value_set=table.column(ID_COLUMN))
    return table.take(order).select(FINGERPRINT_SCHEMA.names)
