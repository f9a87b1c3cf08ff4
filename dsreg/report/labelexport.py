"""``dsreg export``: a revision's labels as ``.npy``, CSV or Parquet, aligned to the snapshot's
rows (-1 where the view removes a row) or to the view's.

Bounded memory, however large the set: the view's ``(row, label)`` pairs stream from DuckDB
(which reads only those columns) into one int64 vector over the snapshot's rows, -1 where the
view has no row; CSV and Parquet then stream the snapshot's example ids from its verified
examples table, a row group's batch at a time, beside that vector. Nothing is sorted or joined,
and nothing but the label vector and one batch is held. The file appears whole or not at all:
it is written beside its destination and renamed into place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from dsreg._util.fs import replacing
from dsreg._util.records import FieldDict
from dsreg.errors import DsregError, InvalidInputError, StorageError
from dsreg.registry.folder import Registry
from dsreg.views.loaders import check_align
from dsreg.views.sql import Connection
from dsreg.views.verified import verified_object

__all__ = [
    "EXPORT_FORMATS",
    "METADATA_FORMATS",
    "ExportResult",
    "check_export_format",
    "export_labels",
]

EXPORT_FORMATS = ("npy", "csv", "parquet")
# Written by ``dsreg.report.croissant.write``: a folder (croissant) or a JSON record (datacite).
METADATA_FORMATS = ("croissant", "datacite")
_BATCH = 1 << 16


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult(FieldDict):
    """What ``dsreg export`` wrote: ``rows`` entries (``removed`` of them -1, snapshot-aligned)."""

    revision: str
    output: str
    format: str
    align: str
    rows: int
    removed: int


def check_export_format(format: str | None, output: str | os.PathLike[str]) -> str:
    """``format``, else the output's suffix if it names one of ``EXPORT_FORMATS``."""
    if format is None:
        suffix = Path(output).suffix.lower().lstrip(".")
        if suffix not in EXPORT_FORMATS:
            raise InvalidInputError(
                f"cannot tell the format of {os.fspath(output)!r} from its suffix; give "
                "--format npy, csv or parquet"
            )
        return suffix
    if format not in EXPORT_FORMATS + METADATA_FORMATS:
        raise InvalidInputError(
            f"unknown --format {format!r}; choose npy, csv, parquet, croissant or datacite"
        )
    return format


def export_labels(
    reg: Registry,
    spec: str,
    output: str | os.PathLike[str],
    *,
    format: str | None = None,
    align: str = "snapshot",
) -> ExportResult:
    """Write ``spec``'s labels to ``output``. ``npy``: an int64 vector. ``csv`` and ``parquet``:
    columns ``row``, ``example_id``, ``label`` (int64, -1 where removed) and ``label_name``
    (null where removed), one line per row, in snapshot order."""
    fmt = check_export_format(format, output)
    if fmt in METADATA_FORMATS:
        raise InvalidInputError(f"--format {fmt} is written by dsreg.export, not export_labels")
    which = check_align(align)
    r = reg.resolve(spec)
    dest = Path(output)
    if dest.is_dir():
        raise InvalidInputError(f"{dest} is a folder; give a file name, e.g. {dest}/labels.{fmt}")
    snap = reg.snapshot(r.revision.snapshot)
    with Connection(reg) as con:
        con.create_view("__dsreg_v", r.revision)
        labels = _label_vector(con, snap.rows)
    kept = labels >= 0
    count = int(kept.sum())
    n = count if which == "view" else snap.rows
    removed = 0 if which == "view" else snap.rows - count
    try:
        with replacing(dest) as f:  # beside it, fsynced, renamed: never a partial file
            if fmt == "npy":
                np.save(f, labels if which == "snapshot" else labels[kept])
            else:
                examples = verified_object(reg, snap.examples)
                _write_table(examples, f, fmt, labels, snap.classes, view=which == "view")
    except DsregError:
        raise  # a corrupt or unreadable examples table says so itself
    except OSError as e:
        raise StorageError(f"cannot write {dest}: {e.strerror}", path=str(dest)) from e
    return ExportResult(
        revision=r.digest, output=str(dest), format=fmt, align=which, rows=n, removed=removed
    )


def _label_vector(con: Connection, n: int) -> np.ndarray:
    """The view's label of each snapshot row, -1 where the view has no such row."""
    out = np.full(n, -1, dtype=np.int64)
    _, batches = con.batches('SELECT "row", label FROM __dsreg_v', rows=_BATCH)
    for b in batches:
        out[b.column(0).to_numpy()] = b.column(1).to_numpy()
    return out


def _write_table(
    examples: Path,
    path: IO[bytes],
    fmt: str,
    labels: np.ndarray,
    classes: tuple[str, ...],
    *,
    view: bool,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("row", pa.int64()),
            ("example_id", pa.string()),
            ("label", pa.int64()),
            ("label_name", pa.string()),
        ]
    )
    names = np.asarray(classes, dtype=object)
    writer: Any
    if fmt == "parquet":
        writer = pq.ParquetWriter(path, schema)
    else:
        import pyarrow.csv as pacsv

        writer = pacsv.CSVWriter(path, schema)
    try:
        source = pq.ParquetFile(examples)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"cannot read the examples table {examples}: {e}") from e
    with writer:
        at = 0
        for batch in source.iter_batches(batch_size=_BATCH, columns=["example_id"]):
            k = batch.num_rows
            lab = labels[at : at + k]
            rows = np.arange(at, at + k, dtype=np.int64)
            ids = batch.column(0)
            at += k
            if view:
                keep = lab >= 0
                rows, lab, ids = rows[keep], lab[keep], ids.filter(pa.array(keep))
            missing = lab < 0
            label_name = pa.array(names[np.where(missing, 0, lab)], pa.string(), mask=missing)
            writer.write_batch(
                pa.record_batch([rows, ids.cast(pa.string()), lab, label_name], schema=schema)
            )
