"""Which snapshot row a record of an external file names: by example id, by ImageNet validation
file name, or by position. One place for the matching every importer of corrections uses.

All of it is vectorised in Arrow and numpy: 50,000 ids match in a few milliseconds. Ids are
matched by ``match_ids``: a hashed join in Arrow that hashes the ids *wanted* and streams
the snapshot's ids past them a batch at a time (``pc.index_in`` of each batch against the
distinct wanted ids), never a Python dict, nor a hash table, of the snapshot's 50 million ids:
memory grows with the ids wanted, not with the snapshot.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.formats.tables import as_numpy, from_numpy

__all__ = ["IMAGENET_VAL", "IdMatch", "imagenet_val_numbers", "match_ids", "rows_by_id"]

# The ImageNet (ILSVRC2012) validation images are numbered by file name from 1 to 50,000; a
# snapshot's ids may hold them under any folders (``val/n01440764/ILSVRC2012_val_00000293.JPEG``
# in the ImageFolder layout, which sorts them by class, not by number).
IMAGENET_VAL: Final = r"(?:^|/)ILSVRC2012_val_(?P<n>[0-9]{8})\.(?:JPEG|jpeg|JPG|jpg|png|PNG)$"


def rows_by_id(snapshot_ids: pa.Array | pa.ChunkedArray, keys: pa.Array) -> np.ndarray:
    """The snapshot row of each of ``keys`` (example ids), -1 where none has that id
    (snapshot ids are unique, so a key names at most one row)."""
    if isinstance(snapshot_ids, pa.Array):
        snapshot_ids = pa.chunked_array([snapshot_ids])
    batches = (pa.Table.from_arrays([c], names=["example_id"]) for c in snapshot_ids.chunks)
    return match_ids(batches, keys).rows


def imagenet_val_numbers(snapshot_ids: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """Each row's ImageNet validation image number (1 for ``ILSVRC2012_val_00000001.JPEG``),
    or None unless every example id ends in such a file name and no number comes twice."""
    if isinstance(snapshot_ids, pa.ChunkedArray):
        snapshot_ids = snapshot_ids.combine_chunks()
    if not len(snapshot_ids):
        return None
    found = pc.extract_regex(snapshot_ids, IMAGENET_VAL)
    if found.null_count:
        return None
    digits = pc.struct_field(found, "n")
    numbers = as_numpy(pc.cast(digits, pa.int64())).astype(np.int64, copy=False)
    return numbers if len(np.unique(numbers)) == len(numbers) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class IdMatch:
    """Where each wanted id sits in the snapshot.

    Attributes
    ----------
    rows : ndarray of int64, shape (m,)
        The row of ``wanted[i]``, or -1 when the snapshot has no such id.
    labels : ndarray of int64, shape (m,)
        The snapshot's label at that row (-1 where ``rows`` is -1, or when the batches carry
        no ``label`` column).
    twice : list of (str, int, int)
        Wanted ids the snapshot holds at two rows (id, first row, second row): a snapshot's ids
        are unique, so any entry means the table was not made by ``dsreg add``.
    """

    rows: np.ndarray
    labels: np.ndarray
    twice: list[tuple[str, int, int]]


def match_ids(batches: Iterable[pa.RecordBatch | pa.Table], wanted: pa.Array) -> IdMatch:
    """The snapshot rows of ``wanted`` ids.

    Parameters
    ----------
    batches : iterable of pyarrow RecordBatch or Table
        The snapshot's examples in row order, with an ``example_id`` column and optionally
        ``label``; read a batch at a time (``repo.tables.examples_batches``).
    wanted : pyarrow string Array, shape (m,)
        The ids to find; may repeat (each copy gets the same row).

    Returns
    -------
    IdMatch
    """
    wanted = pc.cast(wanted, pa.string())
    distinct = pc.unique(wanted)
    rows = np.full(len(distinct), -1, dtype=np.int64)
    labels = np.full(len(distinct), -1, dtype=np.int64)
    twice: list[tuple[str, int, int]] = []
    start = 0
    for batch, pos in _positions(batches, distinct):
        ids = batch.column("example_id")
        hit = pc.is_valid(pos)
        if pc.any(hit).as_py():
            at = as_numpy(pc.indices_nonzero(hit)).astype(np.int64) + start
            keys = as_numpy(pc.drop_null(pos)).astype(np.int64)
            order = np.argsort(keys, kind="stable")
            keys, at = keys[order], at[order]
            first = np.ones(len(keys), dtype=bool)
            first[1:] = keys[1:] != keys[:-1]
            new = first & (rows[keys] < 0)
            rows[keys[new]] = at[new]
            if "label" in batch.column_names:
                lab = batch.column("label")
                labels[keys[new]] = as_numpy(
                    pc.take(lab, from_numpy(at[new] - start, pa.int64()))
                ).astype(np.int64)
            for k, r in zip(keys[~new].tolist(), at[~new].tolist(), strict=True):
                twice.append((distinct[k].as_py(), int(rows[k]), r))
        start += len(ids)
    back = as_numpy(pc.index_in(wanted, value_set=distinct)).astype(np.int64)
    return IdMatch(rows=rows[back], labels=labels[back], twice=twice)


def _positions(
    batches: Iterable[pa.RecordBatch | pa.Table], distinct: pa.Array
) -> Iterator[tuple[pa.Table, pa.ChunkedArray]]:
    """The snapshot's batches gathered into runs of at least twice as many rows as ids wanted
    (``pc.index_in`` builds its hash table of the wanted ids once per call: per 256 Ki-row
    batch, 5 million wanted ids were hashed 190 times over 50 million rows), each with its
    positions among ``distinct``; two runs probed at once on two threads (Arrow releases the
    GIL), in order."""
    from concurrent.futures import Future, ThreadPoolExecutor

    run_rows = max(1 << 20, 2 * len(distinct))

    def probe(table: pa.Table) -> pa.ChunkedArray:
        return pc.index_in(table.column("example_id"), value_set=distinct)

    def runs() -> Iterator[pa.Table]:
        held: list[pa.Table] = []
        have = 0
        for batch in batches:
            t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            held.append(t.select([n for n in t.column_names if n in ("example_id", "label")]))
            have += len(t)
            if have >= run_rows:
                yield pa.concat_tables(held)
                held, have = [], 0
        if held:
            yield pa.concat_tables(held)

    ahead: deque[tuple[pa.Table, Future[pa.ChunkedArray]]] = deque()
    with ThreadPoolExecutor(2) as pool:
        for table in runs():
            ahead.append((table, pool.submit(probe, table)))
            if len(ahead) >= 2:
                t, f = ahead.popleft()
                yield t, f.result()
        while ahead:
            t, f = ahead.popleft()
            yield t, f.result()
