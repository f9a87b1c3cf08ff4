"""Row groups encoded on their own and joined give the bytes one writer gives: the
examples table's digest depends on it (``tests/golden`` pins the digests of sets streamed this
way; these tests compare the bytes directly, over more shapes than the golden sets have)."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsreg.formats import tables
from dsreg.formats.parquet_footer import MAGIC, RowGroupJoiner, strip_created_by
from dsreg.formats.tables import _SETTINGS, ROW_GROUP, CanonicalWriter, base_schema, parquet_bytes


def _table(n: int, *, seed: int = 0) -> pa.Table:
    """The fixed columns and metadata columns of many types, nulls in most."""
    rng = np.random.default_rng(seed)
    floats = rng.random(n)
    floats[::7] = np.nan
    meta = {
        "score": pa.array(floats),
        "note": pa.array([None if i % 5 == 0 else f"s{i % 1000}" for i in range(n)]),
        "flag": pa.array((rng.integers(0, 2, n) == 1).tolist()),
        "pair": pa.array([[i, i + 1] for i in range(n)]),
        "small": pa.array(rng.integers(-5, 5, n).astype(np.int8)),
        "when": pa.array(rng.integers(0, 10**12, n)).cast(pa.timestamp("us")),
        "raw": pa.array([b"x" * (i % 20) for i in range(n)]),
        "rec": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
        "cat": pa.array(rng.integers(0, 9, n)).dictionary_encode(),
    }
    schema = base_schema()
    for name, col in meta.items():
        schema = schema.append(pa.field(name, col.type))
    ids = pa.array([f"img/{i}.png" for i in rng.permutation(n)])
    labels = pa.array(rng.integers(0, 345, n).astype(np.int32))
    fixed = [ids, labels, pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())]
    return pa.Table.from_arrays([*fixed, *meta.values()], schema=schema)


def _one_writer(table: pa.Table, rows: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows, **_SETTINGS)
    return strip_created_by(buf.getvalue())


def _joined(table: pa.Table, rows: int) -> bytes:
    joiner, out = RowGroupJoiner(), [MAGIC]
    for lo in range(0, len(table), rows):
        part = io.BytesIO()
        pq.write_table(table.slice(lo, rows), part, row_group_size=rows, **_SETTINGS)
        out.append(bytes(joiner.add(part.getvalue())))
    return b"".join(out) + strip_created_by(joiner.footer())


@pytest.mark.parametrize(("n", "rows"), [(1, 10), (10, 10), (95, 10), (20, 1), (300, 7)])
def test_joined_row_groups_are_the_one_writers_bytes(n: int, rows: int) -> None:
    # 20 and 43 groups: Thrift writes a list of 15 or more with its length apart.
    table = _table(n)
    assert _joined(table, rows) == _one_writer(table, rows)


@pytest.mark.parametrize(("threads", "in_flight"), [(1, None), (2, None), (3, None), (3, 1)])
def test_canonical_writer_gives_parquet_bytes(
    threads: int, in_flight: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if in_flight is not None:  # groups "wider" than the limit: encoded one at a time
        monkeypatch.setattr(tables, "IN_FLIGHT", in_flight)
    n = 2 * ROW_GROUP + 5
    rng = np.random.default_rng(threads)
    table = (
        _table(n // 4096, seed=threads)
        .select(["example_id", "label", "blob", "size"])
        .take(pa.array(rng.integers(0, n // 4096, n)))  # ids repeat: a dictionary is kept
        .append_column("score", pa.array(rng.random(n)))
        .append_column("note", pa.array(rng.integers(0, 50, n)).cast(pa.string()))
    )
    out = io.BytesIO()
    writer = CanonicalWriter(out, table.schema, threads=threads)
    for lo in range(0, len(table), ROW_GROUP):
        writer.write(table.slice(lo, ROW_GROUP))
    writer.close()
    assert out.getvalue() == _one_writer(table, ROW_GROUP)
    assert pq.read_metadata(io.BytesIO(out.getvalue())).num_row_groups == 3


@pytest.mark.parametrize("chunks", [1, 3])
def test_parquet_bytes_of_several_row_groups_are_the_one_writers(chunks: int) -> None:
    # A corrections table's columns (a struct among them), in chunks that straddle the groups:
    # each group is the table's slice, its pages cut where one writer would cut them.
    n = 2 * ROW_GROUP + 11
    rng = np.random.default_rng(chunks)
    counts = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 5, n).astype(np.int32)) for _ in range(2)], names=["a", "b"]
    )
    table = pa.table(
        {
            "row": np.arange(n) * 3,
            "example_id": pa.array([str(i) for i in range(n)]),
            "verdict": pa.array(rng.integers(0, 4, n)).cast(pa.string()),
            "votes": counts,
        }
    )
    cuts = np.linspace(0, n, chunks + 1).astype(int)
    table = pa.concat_tables([table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(cuts)])
    assert table.column("row").num_chunks == chunks
    assert parquet_bytes(table) == _one_writer(table, ROW_GROUP)


def test_no_rows_make_a_file_without_row_groups() -> None:
    out = io.BytesIO()
    writer = CanonicalWriter(out, base_schema())
    writer.close()
    meta = pq.read_metadata(io.BytesIO(out.getvalue()))
    assert (meta.num_rows, meta.num_row_groups, meta.created_by) == (0, 0, "")
    assert meta.schema.to_arrow_schema().names == list(base_schema().names)


def test_abort_writes_nothing_more() -> None:
    table = _table(16).take(pa.array(np.zeros(ROW_GROUP + 3, dtype=np.int64)))
    out = io.BytesIO()
    writer = CanonicalWriter(out, table.schema, threads=1)
    writer.write(table.slice(0, ROW_GROUP))
    writer.write(table.slice(ROW_GROUP))
    before = out.getvalue()
    writer.abort()
    assert out.getvalue() == before
    with pytest.raises(ValueError, match="only the last one shorter"):
        CanonicalWriter(io.BytesIO(), table.schema).write(table)


def test_a_file_of_two_row_groups_is_not_a_part() -> None:
    table = _table(20)
    with pytest.raises(ValueError, match="holds 2 row groups, not one"):
        RowGroupJoiner().add(_one_writer(table, 10))
