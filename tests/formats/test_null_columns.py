"""A column holding only nulls is served without being decoded, and identically: the same
values, type and schema as Parquet's own reader gives (a label-only set's ``blob`` and
``size`` at 50 million rows cost nothing to serve)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsreg.formats.arrays import null_array
from dsreg.formats.tables import read_parquet_mapped


def _parquet(table: pa.Table, **kw: object) -> pa.Buffer:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=3, **kw)  # type: ignore[arg-type]
    return pa.py_buffer(sink.getvalue())


@pytest.mark.parametrize("statistics", [True, False])
def test_all_null_columns_read_as_parquet_reads_them(statistics: bool) -> None:
    t = pa.table(
        {
            "example_id": ["a", "b", "c", "d", "e", "f", "g"],
            "blob": pa.nulls(7, pa.string()),
            "size": pa.nulls(7, pa.int64()),
            "some": pa.array([None, None, None, None, None, None, 1.5]),  # one value, last group
        },
        schema=pa.schema(
            [
                pa.field("example_id", pa.string(), nullable=False),
                pa.field("blob", pa.string()),
                pa.field("size", pa.int64()),
                pa.field("some", pa.float64()),
            ]
        ),
    )
    data = _parquet(t, write_statistics=statistics)
    want = pq.read_table(pa.BufferReader(data))
    got = read_parquet_mapped(data, digest="blake3:" + "0" * 64)
    assert got.schema == want.schema
    assert got.equals(want)
    assert got.column("some").to_pylist()[-1] == 1.5
    sub = read_parquet_mapped(data, digest="blake3:" + "0" * 64, columns=["size", "example_id"])
    assert sub.column_names == ["size", "example_id"]
    assert sub.equals(want.select(["size", "example_id"]))


@pytest.mark.parametrize("type_", [pa.string(), pa.binary(), pa.int32(), pa.int64(), pa.float64()])
def test_null_array_equals_arrows_nulls(type_: pa.DataType) -> None:
    a = null_array(type_, 1000)
    a.validate(full=True)
    assert a.equals(pa.nulls(1000, type_))
    assert a.null_count == 1000
    assert a.slice(10, 5).to_pylist() == [None] * 5


def test_rows_kept_as_each_row_group_is_read() -> None:
    import numpy as np

    t = pa.table({"example_id": [f"e{i}" for i in range(10)], "blob": pa.nulls(10, pa.string())})
    data = _parquet(t)  # row groups of 3 rows
    keep = np.array([1, 0, 1, 1, 1, 1, 0, 0, 0, 1], dtype=bool)
    got = read_parquet_mapped(data, digest="blake3:" + "0" * 64, keep=keep)
    want = pq.read_table(pa.BufferReader(data)).filter(pa.array(keep))
    assert got.equals(want)
    assert got.column("example_id").to_pylist() == ["e0", "e2", "e3", "e4", "e5", "e9"]
    none = read_parquet_mapped(data, digest="blake3:" + "0" * 64, keep=np.zeros(10, bool))
    assert none.num_rows == 0 and none.schema == want.schema
