"""``dsreg export``: a revision's labels as ``.npy``, CSV or Parquet, aligned to the snapshot's
rows (-1 where the view removes a row) or to the view's.

The rows stream from DuckDB in record batches: a ``.npy`` is filled in place through a memory
map, CSV and Parquet are written a batch at a time, so nothing but a batch (and, for ``.npy``,
the label vector's pages) is held, however large the set. The file appears whole or not at all:
it is written beside its destination and renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsreg.errors import InvalidInputError, StorageError
from dsreg.model.manifests import Revision
from dsreg.repo.registry import Registry
from dsreg.views.loaders import check_align
from dsreg.views.sql import Connection

__all__ = ["EXPORT_FORMATS", "ExportResult", "check_export_format", "export_labels"]

EXPORT_FORMATS = ("npy", "csv", "parquet")
_BATCH = 1 << 16


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult:
    """What ``dsreg export`` wrote: ``rows`` entries (``removed`` of them -1, snapshot-aligned)."""

    revision: str
    output: str
    format: str
    align: str
    rows: int
    removed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "output": self.output,
            "format": self.format,
            "align": self.align,
            "rows": self.rows,
            "removed": self.removed,
        }


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
    if format not in EXPORT_FORMATS:
        raise InvalidInputError(f"unknown --format {format!r}; choose npy, csv or parquet")
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
    which = check_align(align)
    r = reg.resolve(spec)
    dest = Path(output)
    if dest.is_dir():
        raise InvalidInputError(f"{dest} is a folder; give a file name, e.g. {dest}/labels.{fmt}")
    with Connection(reg) as con:
        con.create_view("__dsreg_v", r.revision)
        con.create_view("__dsreg_s", Revision(snapshot=r.revision.snapshot), view="original")
        count = con.execute("SELECT count(*) FROM __dsreg_v").fetchall()[0][0]
        n = int(count) if which == "view" else reg.snapshot(r.revision.snapshot).rows
        removed = 0 if which == "view" else n - int(count)
        try:
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
        except OSError as e:
            raise StorageError(f"cannot write {dest}: {e.strerror}", path=str(dest)) from e
        os.close(fd)
        try:
            os.chmod(tmp, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
            if fmt == "npy":
                _write_npy(con, tmp, n, snapshot=which == "snapshot")
            else:
                _write_table(con, tmp, fmt, snapshot=which == "snapshot")
            _fsync(tmp)
            os.replace(tmp, dest)
        except OSError as e:
            raise StorageError(f"cannot write {dest}: {e.strerror}", path=str(dest)) from e
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return ExportResult(
        revision=r.digest, output=str(dest), format=fmt, align=which, rows=n, removed=removed
    )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_npy(con: Connection, path: str, n: int, *, snapshot: bool) -> None:
    import numpy as np

    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(n,))
    try:
        if snapshot:
            out[:] = -1
            _, batches = con.batches('SELECT "row", label FROM __dsreg_v', rows=_BATCH)
            for b in batches:
                out[b.column(0).to_numpy()] = b.column(1).to_numpy()
        else:
            _, batches = con.batches('SELECT label FROM __dsreg_v ORDER BY "row"', rows=_BATCH)
            at = 0
            for b in batches:
                out[at : at + b.num_rows] = b.column(0).to_numpy()
                at += b.num_rows
        out.flush()
    finally:
        del out


def _write_table(con: Connection, path: str, fmt: str, *, snapshot: bool) -> None:
    if snapshot:
        query = (
            'SELECT s."row", s.example_id, coalesce(v.label, -1)::BIGINT AS label, v.label_name '
            'FROM __dsreg_s s LEFT JOIN __dsreg_v v ON v."row" = s."row" ORDER BY s."row"'
        )
    else:
        query = (
            'SELECT "row", example_id, label::BIGINT AS label, label_name FROM __dsreg_v '
            'ORDER BY "row"'
        )
    schema, batches = con.batches(query, rows=_BATCH)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, schema) as w:
            for b in batches:
                w.write_batch(b)
    else:
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(path, schema) as w:
            for b in batches:
                w.write_batch(b)
