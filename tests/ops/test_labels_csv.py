"""``labels.csv`` of a label-only checkout, written as a stream (#15): the bytes ``csv.writer``
wrote from ``Dataset.labels()`` before."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg.model.corrections import corrections_table
from dsreg.ops import labels_csv as labels_csv_module
from dsreg.overlays.write import write_overlay

IDS = ["plain", "with,comma", 'with"quote', "line\nbreak", "cr\rx", "ünï €", "a b", '",']


def _reference(ds: dsreg.Dataset) -> bytes:
    """What checkout wrote before it streamed: csv.writer over labels()."""
    t = ds.labels()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = ["row", "example_id", "label", "label_name", "given_label", "verdict"]
    w.writerow(names)
    for r in zip(*(t.column(c).to_pylist() for c in names), strict=True):
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue().encode()


@pytest.mark.parametrize("view", ["original", "cleaned", "corrected", "honeypot"])
def test_streamed_labels_csv_is_what_csv_writer_wrote(
    tmp_path: Path, view: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(labels_csv_module, "BATCH", 3)  # several batches
    reg = dsreg.init(registry=tmp_path / "reg")
    n = len(IDS)
    labels = np.arange(n) % 3
    pq.write_table(pa.table({"example_id": IDS, "label": labels}), tmp_path / "t.parquet")
    added = dsreg.add(
        "s", table=tmp_path / "t.parquet", classes=["x", "y,z", 'q"'], tag="o", registry=reg
    )
    rows = np.array([1, 2, 5])
    table = corrections_table(
        rows=rows,
        example_ids=pa.array([IDS[i] for i in rows]),
        given_label=labels[rows],
        suggested_label=np.array([2, -1, 0]),
        verdict=["correctable", "neither", "non_error"],
    )
    producer = {"name": "t", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=added.snapshot, kind="validated", table=table, producer=producer)
    dsreg.tag("s@v", "s@o", overlays=[ov], view=view, registry=reg)
    res = dsreg.checkout("s@v", tmp_path / "co", registry=reg)
    assert res.labels_csv is not None
    got = (tmp_path / "co" / "labels.csv").read_bytes()
    ds = dsreg.open("s@v", registry=reg)
    assert got == _reference(ds)
    # Read back (an id with a lone CR aside: csv.writer never quoted one, kept as it was).
    clean = got.replace(b"cr\rx", b"crx").decode()
    back = [r[1] for r in csv.reader(io.StringIO(clean, newline=""))][1:]
    want = ds.labels().column("example_id").to_pylist()
    assert back == [i.replace("\r", "") for i in want]
