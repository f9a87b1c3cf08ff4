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
from dsreg.formats.corrections import corrections_table
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


@pytest.mark.parametrize("view", ["corrected", "multilabel"])
def test_batches_formatted_in_parallel_come_out_in_order(
    tmp_path: Path, view: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small batches on a pool of threads: most written by Arrow's unquoted writer, a few
    (an id with a comma, one with a lone CR) by the quoting path; the file is byte for byte
    what csv.writer wrote, lines in snapshot order."""
    monkeypatch.setattr(labels_csv_module, "BATCH", 4)
    monkeypatch.setattr(labels_csv_module, "WORKERS", 3)
    monkeypatch.setattr(labels_csv_module, "AHEAD", 1)
    n = 203
    ids = [f"id{i:04d}" for i in range(n)]
    ids[17], ids[101], ids[150] = "a,b", "c\rd", 'e"f'
    labels = np.arange(n) % 4
    reg = dsreg.init(registry=tmp_path / "reg")
    pq.write_table(pa.table({"example_id": ids, "label": labels}), tmp_path / "t.parquet")
    added = dsreg.add(
        "s", table=tmp_path / "t.parquet", classes=["a", "b", "c", "d"], tag="o", registry=reg
    )
    rows = np.arange(3, n, 7)
    verdicts = ["correctable", "multi_label", "neither", "non_error"]
    table = corrections_table(
        rows=rows,
        example_ids=pa.array([ids[i] for i in rows]),
        given_label=labels[rows],
        suggested_label=(labels[rows] + 1) % 4,
        verdict=[verdicts[i % 4] for i in range(len(rows))],
    )
    producer = {"name": "t", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=added.snapshot, kind="validated", table=table, producer=producer)
    dsreg.tag("s@v", "s@o", overlays=[ov], view=view, registry=reg)
    dsreg.checkout("s@v", tmp_path / "co", registry=reg)
    got = (tmp_path / "co" / "labels.csv").read_bytes()

    ds = dsreg.open("s@v", registry=reg)
    t = ds.labels()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = ["row", "example_id", "label", "label_name", "given_label", "verdict"]
    extra = ["labels"] if view == "multilabel" else []
    w.writerow(names + extra)
    lists = t.column("labels").to_pylist() if extra else [None] * len(t)
    records = zip(*(t.column(c).to_pylist() for c in names), strict=True)
    for r, ls in zip(records, lists, strict=True):
        joined = [";".join(map(str, ls))] if extra else []
        w.writerow(["" if v is None else v for v in r] + joined)
    assert got == buf.getvalue().encode()
    if view == "multilabel":  # each multi_label row serves its given and suggested label
        assert got.count(b";") == len(rows[1::4])
