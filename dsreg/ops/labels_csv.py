"""``labels.csv`` of a label-only checkout, written as a stream.

The view is read with ``Dataset.iter_batches`` and each batch becomes CSV text in Arrow (no
Python object per row), byte for byte what ``csv.writer`` wrote before: minimal quoting (a
field holding a comma, a quote or LF is quoted, quotes doubled; a CR alone is not, as
``csv.writer`` with ``\\n`` line ends does), nulls empty. A view of any size never sits in
memory as text: a few batches at a time do.

Speed: a batch is formatted by ``pyarrow.csv.write_csv`` (no quoting) when none of its fields
needs quotes, which Arrow checks as it writes (it refuses a field holding a comma, a quote, LF
or CR); a batch it refuses is formatted by the quoting path above instead. Batches are
formatted on a small pool of threads (Arrow releases the GIL) while the caller's thread reads
the next batches and writes the text, in order: the bytes are those of one thread.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dsreg.formats.arrays import string_array
from dsreg.views.dataset import Dataset

__all__ = ["COLUMNS", "LabelsCsv"]

COLUMNS = ("row", "example_id", "label", "label_name", "given_label", "verdict")
BATCH = 1 << 18
# Threads formatting batches (one per core, at most 4) and batches formatted ahead of the
# writer per thread: a few batches of text in memory at any time.
WORKERS = max(1, min(4, os.cpu_count() or 1))
AHEAD = 2
# Arrow's writer formats a whole batch at once (its default, 1,024 rows at a time, costs a
# third more CPU in per-slice casts).
_PLAIN = pacsv.WriteOptions(include_header=False, quoting_style="none", batch_size=BATCH)


class LabelsCsv:
    """The chunks of ``labels.csv``. The first batch is made when this is made, so a damaged
    examples or corrections object is refused while the checkout is planned, before it writes."""

    def __init__(self, ds: Dataset) -> None:
        self._batches = ds.iter_batches(BATCH)
        self._multilabel = ds.view == "multilabel"
        # Class names are quoted once, not per row; verdicts never need quoting.
        names = string_array(ds.classes)
        self._names = _text(names)
        # Arrow writes class names unquoted only if none needs quotes (else every batch quotes).
        self._plain = self._names.equals(names)
        names = [*COLUMNS, *(["labels"] if self._multilabel else [])]
        self._first: list[bytes | memoryview] = [(",".join(names) + "\n").encode()]
        nxt = next(self._batches, None)
        if nxt is not None:
            self._first.append(self._csv(nxt))

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The file's bytes, in order: the header and first batch, then each next batch as
        the pool formats it. A reader thread reads the view's batches and hands them to the
        pool; the caller's thread only writes."""
        yield from self._first
        self._first = []
        pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="dsreg-labels-csv")
        ready: queue.Queue[Future[memoryview] | BaseException | None] = queue.Queue(WORKERS * AHEAD)
        stop = threading.Event()

        def hand(item: Future[memoryview] | BaseException | None) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def read() -> None:
            try:
                for batch in self._batches:
                    if not hand(pool.submit(self._csv, batch)):
                        return
            except BaseException as e:  # re-raised in the writer's thread, as it was
                hand(e)
                return
            hand(None)

        reader = threading.Thread(target=read, name="dsreg-labels-csv-read", daemon=True)
        reader.start()
        try:
            while (item := ready.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item.result()
        finally:
            # A writer that stopped (an error, a closed generator) leaves nothing running.
            stop.set()
            reader.join()
            pool.shutdown(wait=True, cancel_futures=True)

    def _csv(self, batch: pa.RecordBatch) -> memoryview:
        """One batch as CSV lines: Arrow's writer where no field needs quotes, else quoted."""
        if self._plain:
            try:
                return self._plain_csv(batch)
            except pa.ArrowInvalid:
                pass  # a field Arrow would have to quote: the quoting path below
        return self._quoted_csv(batch)

    def _plain_csv(self, batch: pa.RecordBatch) -> memoryview:
        def col(name: str) -> pa.Array:
            return batch.column(batch.schema.get_field_index(name))

        cols = [
            col("row"),
            col("example_id"),
            col("label"),
            col("label_name"),
            col("given_label"),
            col("verdict"),
        ]
        names = list(COLUMNS)
        if self._multilabel:
            cols.append(pc.binary_join(pc.cast(col("labels"), pa.list_(pa.string())), ";"))
            names.append("labels")
        out = pa.BufferOutputStream()
        pacsv.write_csv(pa.Table.from_arrays(cols, names=names), out, write_options=_PLAIN)
        return memoryview(out.getvalue())

    def _quoted_csv(self, batch: pa.RecordBatch) -> memoryview:
        def col(name: str) -> pa.Array:
            return batch.column(batch.schema.get_field_index(name))

        cols = [
            pc.cast(col("row"), pa.string()),
            _text(col("example_id")),
            pc.cast(col("label"), pa.string()),
            pc.take(self._names, col("label")),
            pc.cast(col("given_label"), pa.string()),
            pc.fill_null(col("verdict").cast(pa.string()), ""),
        ]
        if self._multilabel:
            lists = pc.cast(col("labels"), pa.list_(pa.string()))
            cols.append(_text(pc.binary_join(lists, ";")))
        line = pc.binary_join_element_wise(*cols, ",")
        line = pc.binary_join_element_wise(line, "", "\n")  # each line ends in \n
        line = pc.cast(line, pa.large_string())
        if not len(line):
            return memoryview(b"")
        offsets, data = line.buffers()[1], line.buffers()[2]
        off = np.frombuffer(offsets, dtype=np.int64, count=len(line) + 1, offset=line.offset * 8)
        return memoryview(data)[int(off[0]) : int(off[-1])]


def _text(col: pa.Array) -> pa.Array:
    """Text as CSV fields: quoted where csv.writer quotes it, nulls empty."""
    if col.null_count:  # (fill_null makes a scalar: pyarrow imports pandas for that)
        col = pc.fill_null(col, "")
    needs = pc.match_substring_regex(col, '[,"\n]')
    if pc.any(needs).as_py():
        quoted = pc.binary_join_element_wise('"', pc.replace_substring(col, '"', '""'), '"', "")
        col = pc.if_else(needs, quoted, col)
    return col
