"""``dsreg export``: a revision's labels as ``.npy``, CSV, Parquet or JSON lines, aligned to
the snapshot's rows (-1 where the view removes a row) or to the view's; with them the label
sets and raters' counts the revision carries.

Bounded memory, however large the set: the view's ``(row, label)`` pairs stream from DuckDB
(which reads only those columns) into one int64 vector over the snapshot's rows, -1 where the
view has no row; CSV and Parquet then stream the snapshot's example ids from its verified
examples table, a row group's batch at a time, beside that vector. Nothing is joined, and
nothing but the label vector, one batch and the label sets and raters' counts a revision
carries (the rows holding one, sorted) is held. The file appears whole or not at all:
it is written beside its destination and renamed into place.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

from dsreg._util.choices import check_choice
from dsreg._util.fs import replacing
from dsreg._util.records import FieldDict
from dsreg.errors import DsregError, InvalidInputError, StorageError
from dsreg.registry.reader import Resolved
from dsreg.views.loaders import check_align, rated_array
from dsreg.views.rule import scatter_lists
from dsreg.views.sql import Connection
from dsreg.views.verified import verified_object

__all__ = [
    "EXPORT_FORMATS",
    "METADATA_FORMATS",
    "ExportResult",
    "check_export_format",
    "export_labels",
]

EXPORT_FORMATS = ("npy", "csv", "parquet", "jsonl")
# Written by ``dsreg.report.croissant.write``: a folder (croissant) or a JSON record (datacite).
METADATA_FORMATS = ("croissant", "datacite")
_BATCH = 1 << 16
_RATED = ("labels", "label_counts")  # the lists a view serves when its revision carries them


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult(FieldDict):
    """What ``dsreg export`` wrote: ``rows`` entries (``removed`` of them -1, snapshot-aligned);
    ``columns`` the label sets and counts it carries (``labels``, ``label_counts``), and, for
    ``npy``, ``beside`` the arrays written beside the labels, one per such column."""

    revision: str
    output: str
    format: str
    align: str
    rows: int
    removed: int
    columns: tuple[str, ...] = ()
    beside: tuple[str, ...] = ()


def check_export_format(format: str | None, output: str | os.PathLike[str]) -> str:
    """``format``, else the output's suffix if it names one of ``EXPORT_FORMATS``."""
    if format is None:
        suffix = Path(output).suffix.lower().lstrip(".")
        if suffix not in EXPORT_FORMATS:
            raise InvalidInputError(
                f"cannot tell the format of {os.fspath(output)!r} from its suffix; give "
                "--format npy, csv, parquet or jsonl"
            )
        return suffix
    check_choice(format, EXPORT_FORMATS + METADATA_FORMATS, option="--format")
    return format


def beside_path(dest: Path, column: str) -> Path:
    """Where ``--format npy`` writes a column's array: ``labels.npy`` -> ``labels.<column>.npy``
    (a name without ``.npy`` gains ``.<column>.npy``)."""
    stem = dest.name[: -len(".npy")] if dest.name.lower().endswith(".npy") else dest.name
    return dest.with_name(f"{stem}.{column}.npy")


def export_labels(
    r: Resolved,
    output: str | os.PathLike[str],
    *,
    format: str | None = None,
    align: str = "snapshot",
) -> ExportResult:
    """Write revision ``r``'s labels to ``output``. ``npy``: an int64 vector, and beside it
    (named by ``beside_path``) the label sets as an int8 multi-hot array and the raters'
    counts as an int32 array, one row per entry and one column per class, -1 throughout where
    the row has none. ``csv``, ``parquet`` and ``jsonl``: columns ``row``, ``example_id``, ``label``
    (int64, -1 where removed) and ``label_name`` (null where removed), then ``labels`` and
    ``label_counts`` as lists where the view serves them, one line per row, in snapshot
    order."""
    fmt = check_export_format(format, output)
    if fmt in METADATA_FORMATS:
        raise InvalidInputError(f"--format {fmt} is written by dsreg.export, not export_labels")
    which = check_align(align)
    reg = r.registry
    dest = Path(output)
    if dest.is_dir():
        raise InvalidInputError(f"{dest} is a folder; give a file name, e.g. {dest}/labels.{fmt}")
    snap = reg.snapshot(r.revision.snapshot)
    with Connection(r.reader) as con:
        con.create_view("__dsreg_v", r.revision)
        labels = _label_vector(con, snap.rows)
        rated = _rated_lists(con)
    kept = labels >= 0
    count = int(kept.sum())
    n = count if which == "view" else snap.rows
    removed = 0 if which == "view" else snap.rows - count
    beside: list[str] = []
    try:
        if fmt == "npy":
            k = len(snap.classes)
            for name, (rows, lists) in rated.items():
                # The companions first: the labels file appears last, once all are whole.
                path = beside_path(dest, name)
                array = np.full((snap.rows, k), -1, dtype=np.int8 if name == "labels" else np.int32)
                array[rows] = rated_array(name, lists, k)
                with replacing(path) as f:
                    np.save(f, array if which == "snapshot" else array[kept])
                beside.append(str(path))
        with replacing(dest) as f:  # beside it, fsynced, renamed: never a partial file
            if fmt == "npy":
                np.save(f, labels if which == "snapshot" else labels[kept])
            else:
                examples = verified_object(reg, snap.examples)
                table = _Labels(labels, snap.classes, rated, view=which == "view")
                _write_table(examples, f, fmt, table)
    except DsregError:
        raise  # a corrupt or unreadable examples table says so itself
    except OSError as e:
        raise StorageError(f"cannot write {dest}: {e.strerror}", path=str(dest)) from e
    return ExportResult(
        revision=r.digest,
        output=str(dest),
        format=fmt,
        align=which,
        rows=n,
        removed=removed,
        columns=tuple(rated),
        beside=tuple(beside),
    )


def _label_vector(con: Connection, n: int) -> np.ndarray:
    """The view's label of each snapshot row, -1 where the view has no such row."""
    out = np.full(n, -1, dtype=np.int64)
    _, batches = con.batches('SELECT "row", label FROM __dsreg_v', rows=_BATCH)
    for b in batches:
        out[b.column(0).to_numpy()] = b.column(1).to_numpy()
    return out


def _rated_lists(con: Connection) -> dict[str, tuple[np.ndarray, pa.Array]]:
    """Each of the view's ``labels`` and ``label_counts`` columns (those it serves): the
    sorted rows that hold a list and their lists. Only the rows with one are kept (a counts
    overlay names a tenth of the rows or fewer)."""
    schema, _ = con.batches("SELECT * FROM __dsreg_v LIMIT 0")
    out: dict[str, tuple[np.ndarray, pa.Array]] = {}
    for name in (c for c in _RATED if c in schema.names):
        rows, parts = [], []
        _, batches = con.batches(
            f'SELECT "row", {name} FROM __dsreg_v WHERE {name} IS NOT NULL', rows=_BATCH
        )
        for b in batches:
            rows.append(b.column(0).to_numpy())
            parts.append(b.column(1).cast(pa.list_(pa.int32())))
        at = np.concatenate(rows) if rows else np.empty(0, np.int64)
        lists = pa.concat_arrays(parts) if parts else pa.array([], pa.list_(pa.int32()))
        order = np.argsort(at, kind="stable")  # a view has no order of its own
        out[name] = (at[order], lists.take(pa.array(order, pa.int64())))
    return out


@dataclass(frozen=True, slots=True)
class _Labels:
    """What the table formats write beside the example ids: the label vector over the
    snapshot, the class names, the rated lists by row, and whether to keep the view's rows
    only."""

    labels: np.ndarray
    classes: tuple[str, ...]
    rated: dict[str, tuple[np.ndarray, pa.Array]]
    view: bool

    def columns(self, at: int, ids: pa.Array) -> list[pa.Array]:
        """The columns of the snapshot rows ``at`` .. ``at + len(ids)``."""
        k = len(ids)
        lab = self.labels[at : at + k]
        rows = np.arange(at, at + k, dtype=np.int64)
        keep = lab >= 0
        lists = []
        for held, values in self.rated.values():
            lo, hi = np.searchsorted(held, [at, at + k])
            lists.append(scatter_lists(k, held[lo:hi] - at, values[lo:hi]))
        if self.view:
            mask = pa.array(keep)
            rows, lab, ids = rows[keep], lab[keep], ids.filter(mask)
            lists = [col.filter(mask) for col in lists]
        missing = lab < 0
        names = np.asarray(self.classes, dtype=object)
        label_name = pa.array(names[np.where(missing, 0, lab)], pa.string(), mask=missing)
        return [pa.array(rows), ids.cast(pa.string()), pa.array(lab), label_name, *lists]


def _csv_lists(col: pa.Array) -> pa.Array:
    """A list column as CSV text: values joined by ``;``, ``[]`` for an empty list, an empty
    field for null (the corrections CSV's cells, docs/relabelings.md)."""
    return pa.array(
        [None if v is None else (";".join(map(str, v)) if v else "[]") for v in col.to_pylist()],
        pa.string(),
    )


def _write_table(examples: Path, path: IO[bytes], fmt: str, table: _Labels) -> None:
    import pyarrow.parquet as pq

    fields = [
        ("row", pa.int64()),
        ("example_id", pa.string()),
        ("label", pa.int64()),
        ("label_name", pa.string()),
    ]
    listed = pa.string() if fmt == "csv" else pa.list_(pa.int32())
    schema = pa.schema([*fields, *((name, listed) for name in table.rated)])
    writer: Any
    if fmt == "parquet":
        writer = pq.ParquetWriter(path, schema)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        writer = pacsv.CSVWriter(path, schema)
    else:
        writer = _JsonLines(path)
    try:
        source = pq.ParquetFile(examples)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"cannot read the examples table {examples}: {e}") from e
    with writer:
        at = 0
        for batch in source.iter_batches(batch_size=_BATCH, columns=["example_id"]):
            cols = table.columns(at, batch.column(0))
            at += batch.num_rows
            if fmt == "csv":
                cols[4:] = [_csv_lists(c) for c in cols[4:]]
            writer.write_batch(pa.record_batch(cols, schema=schema))


class _JsonLines:
    """``jsonl``: one JSON object a line, the lists as JSON arrays (null where none)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def __enter__(self) -> _JsonLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.flush()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in batch.to_pylist())
        self.stream.write("".join(lines).encode("utf-8"))
