"""``dsreg add --labels/--table`` of label-only sets, streamed a row group at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import DatasetFormatError, InvalidInputError
from dsreg.formats.tables import base_schema, parquet_bytes
from dsreg.ingest.stream import Validation

ROW_GROUP = 1 << 18


def _examples(reg: dsreg.Registry, revision: str) -> pa.Table:
    return dsreg.open(revision, registry=reg).labels()


@pytest.mark.parametrize("wide", [False, True])
def test_a_set_larger_than_one_row_group_round_trips(
    tmp_path: Path, wide: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if wide:  # read one group ahead, encoded one at a time, as a source of wide rows is
        monkeypatch.setattr("dsreg.ingest.streamadd.WIDE", 1)
        monkeypatch.setattr("dsreg.formats.tables.IN_FLIGHT", 1)
    reg = dsreg.init(registry=tmp_path / "reg")
    n = 2 * ROW_GROUP + 17  # three row groups: what streams is what is read back
    labels = np.random.default_rng(1).integers(0, 345, n).astype(np.int32)
    np.save(tmp_path / "l.npy", labels)
    ids = [f"q/{i:08d}.ndjson" for i in range(n)][::-1]
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    r = dsreg.add("qd", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", tag="v1", registry=reg)
    assert r.rows == n and len(r.classes) == int(labels.max()) + 1
    got = _examples(reg, r.revision)
    assert got.column("example_id").to_pylist() == ids
    assert np.array_equal(got.column("label").to_numpy(), labels)
    stored = pq.ParquetFile(reg.store.path(r.examples))
    assert [stored.metadata.row_group(i).num_rows for i in range(3)] == [ROW_GROUP] * 2 + [17]
    if wide:  # the same bytes either way
        monkeypatch.undo()
        again = dsreg.add(
            "qd",
            labels=tmp_path / "l.npy",
            ids=tmp_path / "ids.txt",
            registry=dsreg.init(registry=tmp_path / "r2"),
        )
        assert again.examples == r.examples


def test_ids_from_txt_json_and_a_table_give_one_examples_table(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    labels = np.array([2, 0, 1, 1], dtype=np.int64)
    ids = ["a.jpg", "b/c.jpg", "d e,f.jpg", '"g".jpg']
    np.save(tmp_path / "l.npy", labels)
    (tmp_path / "ids.txt").write_text("\r\n".join(ids) + "\r\n", encoding="utf-8")
    (tmp_path / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
    pq.write_table(pa.table({"example_id": ids, "label": labels}), tmp_path / "t.parquet")
    txt = dsreg.add("a", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", registry=reg)
    js = dsreg.add("b", labels=tmp_path / "l.npy", ids=tmp_path / "ids.json", registry=reg)
    tab = dsreg.add("c", table=tmp_path / "t.parquet", registry=reg)
    assert txt.examples == js.examples == tab.examples
    assert _examples(reg, txt.revision).column("example_id").to_pylist() == ids


@pytest.mark.parametrize("suffix", [".txt", ".json"])
def test_duplicate_ids_are_refused_naming_the_first(tmp_path: Path, suffix: str) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "l.npy", np.zeros(5, dtype=np.int64))
    ids = ["x", "dup2", "dup1", "dup2", "dup1"]
    f = tmp_path / f"ids{suffix}"
    f.write_text(json.dumps(ids) if suffix == ".json" else "\n".join(ids), encoding="utf-8")
    with pytest.raises(
        DatasetFormatError,
        match=r"2 example ids occur more than once, first "
        r"\['dup1', 'dup2'\]",
    ):
        dsreg.add("d", labels=tmp_path / "l.npy", ids=f, tag="v1", registry=reg)
    assert dsreg.ls(registry=reg) == []
    assert list(reg.store) == []


def test_as_many_ids_as_labels(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "l.npy", np.zeros(3, dtype=np.int64))
    (tmp_path / "ids.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="holds 2 ids for the 3 labels"):
        dsreg.add("d", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", registry=reg)
    (tmp_path / "ids.txt").write_text("a\nb\nc\nd\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="holds 4 ids for the 3 labels"):
        dsreg.add("d", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", registry=reg)
    with pytest.raises(InvalidInputError, match="--ids goes with --labels"):
        dsreg.add("d", table=tmp_path / "l.npy", ids=tmp_path / "ids.txt", registry=reg)


def test_duplicates_far_apart_in_a_big_table_are_found(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    n = ROW_GROUP + 10
    ids = [f"{i}" for i in range(n)]
    ids[-1] = "7"  # the same id in the first and the last row group
    pq.write_table(
        pa.table({"example_id": ids, "label": np.zeros(n, dtype=np.int32)}), tmp_path / "t.parquet"
    )
    with pytest.raises(
        DatasetFormatError, match=r"1 example ids occur more than once, first \['7'\]"
    ):
        dsreg.add("d", table=tmp_path / "t.parquet", registry=reg)


def test_only_hashes_seen_twice_are_looked_up_even_when_their_parts_repeat() -> None:
    # Hashes that share their top bits and the 32 bits under them but differ below, in one
    # row group and across two: only the hash that occurs twice is handed on to be compared
    # as text, and a set without repeats never is.
    base = np.uint64(0xAB12345678000000)
    hashes = {
        "a": base | np.uint64(1),
        "b": base | np.uint64(2),  # a's top 40 bits, another hash
        "c": base | np.uint64(1),  # a's hash: a collision (or the same id)
        "d": np.uint64(0x0000000000000005),
        "e": np.uint64(0xFF00000000000005),
    }

    def hasher(ids: pa.ChunkedArray) -> np.ndarray:
        return np.array([hashes[i] for i in ids.to_pylist()], dtype=np.uint64)

    def looked_up(groups: list[list[str]]) -> list[int]:
        v = Validation(what="t", id_name="id", unique_hint="", classes=None, allow_lookalikes=True)
        v.ids([pa.array(g, pa.string()) for g in groups], hasher)
        seen: list[int] = []

        def repeats(candidates: np.ndarray) -> tuple[list[str], list[tuple[str, str]]]:
            seen.extend(int(h) for h in candidates)
            return [], []

        v.finish_ids(repeats)
        return seen

    assert looked_up([["a", "b", "d"], ["c", "e"]]) == [int(hashes["a"])]
    assert looked_up([["a", "b"], ["d", "e"]]) == []


@pytest.mark.parametrize("row_group", [100_003, ROW_GROUP, 1 << 20])
def test_a_table_of_ids_and_labels_gives_the_whole_tables_bytes(
    tmp_path: Path, row_group: int
) -> None:
    # However the source's row groups fall, the examples table is the one the whole-table
    # writer gives: its groups of ROW_GROUP rows, each column one chunk.
    n = 2 * ROW_GROUP + 17
    ids = pa.array([f"x{i:07d}" for i in range(n)][::-1], pa.string())
    labels = np.random.default_rng(3).integers(0, 10, n).astype(np.int32)
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"example_id": ids, "label": labels}), src, row_group_size=row_group)
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("d", table=src, tag="v1", registry=reg)
    ds = dsreg.open("d@v1", registry=reg)
    whole = pa.Table.from_arrays(
        [ids, pa.array(labels), pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())],
        schema=base_schema(),
    )
    assert ds.registry.store.path(ds.snapshot.examples).read_bytes() == parquet_bytes(whole)


def test_labels_out_of_range_over_several_row_groups(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    labels = np.zeros(ROW_GROUP + 5, dtype=np.int64)
    labels[3] = 9
    labels[ROW_GROUP + 1] = -1
    np.save(tmp_path / "l.npy", labels)
    with pytest.raises(
        DatasetFormatError,
        match=r"2 labels are out of range \[0, 3\), first "
        rf"\[9, -1\] at rows \[3, {ROW_GROUP + 1}\]",
    ):
        dsreg.add("d", labels=tmp_path / "l.npy", classes=["a", "b", "c"], registry=reg)


def test_cli_add_with_ids(tmp_path: Path, cli: Callable[..., Any]) -> None:
    np.save(tmp_path / "l.npy", np.array([1, 0], dtype=np.int64))
    (tmp_path / "ids.txt").write_text("n01/a.JPEG\nn02/b.JPEG\n", encoding="utf-8")
    assert cli("init").exit_code == 0
    res = cli("add", "iv", "--labels", "l.npy", "--ids", "ids.txt", "--tag", "v1")
    assert res.exit_code == 0, res.stderr
    rows = dsreg.open("iv@v1", registry=tmp_path / ".dsreg").labels()
    assert rows.column("example_id").to_pylist() == ["n01/a.JPEG", "n02/b.JPEG"]
    bad = cli("add", "iv2", "--labels", "l.npy", "--ids", "l.npy")
    assert bad.exit_code == 1 and "use .txt (one id per line) or .json" in bad.stderr


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "..", "a\\b", "a\x00b", "a//b", "x/"])
def test_an_unsafe_id_in_a_later_row_group_is_refused(tmp_path: Path, bad: str) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    n = ROW_GROUP + 10
    ids = [f"{i}" for i in range(n)]
    ids[ROW_GROUP + 3] = bad  # the second row group: a slice of the source, not its start
    table = pa.table({"example_id": ids, "label": np.zeros(n, dtype=np.int32)})
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(dsreg.InputPathError, match=re.escape(f"example id {bad!r} is unsafe")):
        dsreg.add("d", table=tmp_path / "t.parquet", registry=reg)
    assert dsreg.ls(registry=reg) == [] and list(reg.store) == []


def test_ids_with_dots_and_slashes_that_stay_inside_are_accepted(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    ids = ["a.b", ".hidden", "a..b", "...", "c/d.e", "f/.g", "h/..i"]
    pq.write_table(
        pa.table({"example_id": ids, "label": np.zeros(len(ids), dtype=np.int32)}),
        tmp_path / "t.parquet",
    )
    r = dsreg.add("d", table=tmp_path / "t.parquet", registry=reg)
    assert _examples(reg, r.revision).column("example_id").to_pylist() == ids
