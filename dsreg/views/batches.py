"""``Dataset.iter_batches``: a view streamed as Arrow record batches, in bounded memory (#15).

The snapshot's examples table is read a batch at a time from its verified bytes, and the view
rule (``views.rule.apply_view``, the reference) is applied to each batch's slice of the merged
overlays: positionally, with no per-row Python object. What stays in memory for the whole pass
is the compressed examples object and the merged overlays (a byte and an int32 a row, plus the
multilabel view's list index), never the decoded examples of the whole set.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsreg.errors import InvalidInputError, ManifestError
from dsreg.model.manifests import Snapshot, View
from dsreg.model.tables import as_numpy, from_numpy, served_metadata
from dsreg.objects.digest import short
from dsreg.repo.registry import Registry
from dsreg.views.rule import Merged, apply_view, merge_overlays

__all__ = ["iter_view_batches"]


def iter_view_batches(
    reg: Registry,
    snap: Snapshot,
    corrections: Sequence[pa.Table],
    view: View,
    *,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """The rows ``view`` serves, in snapshot order, as record batches of at most
    ``batch_size`` rows: ``row, example_id, label, label_name, given_label, verdict, blob,
    size``, ``labels`` (multilabel view), then the served metadata columns."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be a whole number >= 1; got {batch_size!r}")
    merged = merge_overlays(snap.rows, corrections)
    names = pa.array(snap.classes, pa.string())
    k = len(snap.classes)
    data = reg.store.read_bytes(snap.examples)
    what = f"examples table {short(snap.examples)} of {snap.dataset!r}"
    try:
        pf = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False)
        if pf.metadata.num_rows != snap.rows:
            raise ManifestError(
                f"{what} has {pf.metadata.num_rows} rows; its snapshot says {snap.rows}"
            )
        meta = served_metadata(pf.schema_arrow.names)
        start = 0
        for batch in pf.iter_batches(batch_size=batch_size, use_threads=False):
            n = batch.num_rows
            labels = as_numpy(batch.column("label")).astype(np.int32, copy=False)
            if n and (labels.min() < 0 or labels.max() >= k):
                raise ManifestError(f"{what} holds labels outside [0, {k})")
            part = Merged(
                verdict=merged.verdict[start : start + n],
                suggested=merged.suggested[start : start + n],
                set_index=None if merged.set_index is None else merged.set_index[start : start + n],
                sets=merged.sets,
            )
            v = apply_view(view, labels, part)
            take = from_numpy(v.rows, pa.int64())
            cols: dict[str, pa.Array] = {
                "row": from_numpy(v.rows + start, pa.int64()),
                "example_id": batch.column("example_id").take(take),
                "label": from_numpy(v.label, pa.int32()),
                "label_name": pc.take(names, from_numpy(v.label, pa.int32())),
                "given_label": from_numpy(v.given_label, pa.int32()),
                "verdict": v.verdict.cast(pa.string()),
                "blob": batch.column("blob").take(take),
                "size": batch.column("size").take(take),
            }
            if v.labels is not None:
                cols["labels"] = v.labels
            for name in meta:
                cols[name] = batch.column(name).take(take)
            start += n
            if len(v.rows):
                yield pa.RecordBatch.from_pydict(cols)
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"{what} is not readable Parquet: {e}") from e
