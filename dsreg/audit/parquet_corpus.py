"""An ``--against`` corpus that is not registered, given as one Parquet file.

The file holds one item per row: an ``id`` column (strings or integers, every row one, each
once) naming the item in the matches, and exactly one payload column, ``image`` (bytes: an
encoded image, or a struct with a ``bytes`` field as Hugging Face ``datasets`` writes its
``Image`` feature) or ``text`` (strings). Other columns are not read. A file without these
columns, or with them of another type, is refused before any work with one line naming the
file and the columns found (``read_corpus``).

A row whose payload is null is listed as unreadable with its id, as an unreadable file of an
``--against`` folder is. The payloads are fingerprinted as they are, as the kind their column
names (bytes of the ``image`` column that are no image are unreadable, never read as text),
batch by batch on the audit's engine (``fingerprint_blobs``: the bytes travel with the batch,
so a Ray task needs no shared file system), and not stored; a payload that cannot be
fingerprinted (an undecodable image, an empty text) is listed as unreadable with its id and
the reason, as a null one is; the corpus is named in the matches by the digest of its
listing (each id and its payload's digest), as a folder is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsreg.audit.fingerprints import FINGERPRINT_SCHEMA, fingerprint_payloads
from dsreg.errors import DatasetFormatError
from dsreg.objects.hashing import hash_bytes

__all__ = [
    "BLOBS_SCHEMA",
    "ID_COLUMN",
    "PAYLOAD_COLUMNS",
    "Corpus",
    "blobs_table",
    "fingerprint_blobs",
    "in_order",
    "read_corpus",
]

#: The column naming each item.
ID_COLUMN = "id"
#: The payload columns, exactly one of which a corpus file has.
PAYLOAD_COLUMNS = ("image", "text")


@dataclass(frozen=True, slots=True)
class Corpus:
    """A corpus file's items with a payload (ids and bytes, in the file's order), and the
    ids of those without one."""

    path: Path
    kind: str  # the payload column's name: image or text
    ids: list[str]
    payloads: pa.Array  # binary
    empty: list[str]


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


def _payloads(column: pa.ChunkedArray, name: str) -> pa.Array | None:
    """The column as binary, or None if its type is not the one ``name`` asks for."""
    kind = column.type
    if name == "image" and pa.types.is_struct(kind):
        index = kind.get_field_index("bytes")
        if index < 0:
            return None
        column = pc.struct_field(column, [index])
        kind = column.type
    if name == "image" and (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        return column.combine_chunks().cast(pa.large_binary())
    if name == "text" and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return column.combine_chunks().cast(pa.large_string()).cast(pa.large_binary())
    return None


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
    """The items of the corpus file ``path``; a one-line ``DatasetFormatError`` where it is not
    a Parquet file of the expected columns (see the module)."""
    try:
        names = list(pq.read_schema(path).names)
    except (OSError, pa.ArrowException) as e:
        raise _unreadable(path, e) from e
    given = [c for c in PAYLOAD_COLUMNS if c in names]
    if ID_COLUMN not in names or len(given) != 1:
        raise _refuse(
            path,
            names,
            "no 'id' column" if ID_COLUMN not in names else "not exactly one payload column",
        )
    try:
        table = pq.read_table(path, columns=[ID_COLUMN, given[0]])
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
    payloads = _payloads(table.column(given[0]), given[0])
    if payloads is None:
        raise _refuse(path, names, f"column {given[0]!r} holds {table.column(given[0]).type}")
    id_list = _ids(path, ids)
    has = pc.is_valid(payloads)
    kept = [i for i, ok in zip(id_list, has.to_pylist(), strict=True) if ok]
    empty = [i for i, ok in zip(id_list, has.to_pylist(), strict=True) if not ok]
    return Corpus(path=path, kind=given[0], ids=kept, payloads=payloads.filter(has), empty=empty)


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


def blobs_table(corpus: Corpus) -> pa.Table:
    """The batch function's input for ``corpus``."""
    return pa.table(
        {ID_COLUMN: pa.array(corpus.ids, pa.string()), "bytes": corpus.payloads},
        schema=BLOBS_SCHEMA,
    )


def in_order(corpus: Corpus, parts: list[pa.Table]) -> pa.Table:
    """The engine's result batches as one ``FINGERPRINT_SCHEMA`` table in the corpus's order."""
    if not parts:
        return FINGERPRINT_SCHEMA.empty_table()
    table = pa.concat_tables(parts)
    order = pc.index_in(pa.array(corpus.ids, pa.string()), value_set=table.column(ID_COLUMN))
    return table.take(order).select(FINGERPRINT_SCHEMA.names)
