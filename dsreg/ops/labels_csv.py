"""``labels.csv`` of a label-only checkout, written as a stream (#15).

The view is read with ``Dataset.iter_batches`` and each batch becomes CSV text in Arrow (no
Python object per row), byte for byte what ``csv.writer`` wrote before: minimal quoting (a
field holding a comma, a quote or LF is quoted, quotes doubled; a CR alone is not, as
``csv.writer`` with ``\\n`` line ends does), nulls empty. A 50-million-row view never sits in
memory as text.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.views.dataset import Dataset

__all__ = ["COLUMNS", "LabelsCsv"]

COLUMNS = ("row", "example_id", "label", "label_name", "given_label", "verdict")
BATCH = 1 << 18


class LabelsCsv:
    """The chunks of ``labels.csv``. The first batch is made when this is made, so a damaged
    examples or corrections object is refused while the checkout is planned, before it writes."""

    def __init__(self, ds: Dataset) -> None:
        self._batches = ds.iter_batches(BATCH)
        self._multilabel = ds.view == "multilabel"
        # Class names are quoted once, not per row; verdicts never need quoting.
        self._names = _text(pa.array(ds.classes, pa.string()))
        names = [*COLUMNS, *(["labels"] if self._multilabel else [])]
        self._first: list[bytes] = [(",".join(names) + "\n").encode()]
        nxt = next(self._batches, None)
        if nxt is not None:
            self._first.append(self._csv(nxt))

    def chunks(self) -> Iterator[bytes]:
        yield from self._first
        self._first = []
        for batch in self._batches:
            yield self._csv(batch)

    def _csv(self, batch: pa.RecordBatch) -> bytes:
        def col(name: str) -> pa.Array:
            return batch.column(batch.schema.get_field_index(name))

        cols = [
            pc.cast(col("row"), pa.string()),
            _text(col("example_id")),
            pc.cast(col("label"), pa.string()),
            pc.take(self._names, col("label")),
            pc.cast(col("given_label"), pa.string()),
            pc.fill_null(col("verdict"), ""),
        ]
        if self._multilabel:
            lists = pc.cast(col("labels"), pa.list_(pa.string()))
            cols.append(_text(pc.binary_join(lists, ";")))
        line = pc.binary_join_element_wise(*cols, ",")
        line = pc.binary_join_element_wise(line, "", "\n")  # each line ends in \n
        line = pc.cast(line, pa.large_string())
        if not len(line):
            return b""
        offsets, data = line.buffers()[1], line.buffers()[2]
        off = np.frombuffer(offsets, dtype=np.int64, count=len(line) + 1, offset=line.offset * 8)
        return memoryview(data)[int(off[0]) : int(off[-1])].tobytes()


def _text(col: pa.Array) -> pa.Array:
    """Text as CSV fields: quoted where csv.writer quotes it, nulls empty."""
    col = pc.fill_null(col, "")
    needs = pc.match_substring_regex(col, '[,"\n]')
    if pc.any(needs).as_py():
        quoted = pc.binary_join_element_wise('"', pc.replace_substring(col, '"', '""'), '"', "")
        col = pc.if_else(needs, quoted, col)
    return col
