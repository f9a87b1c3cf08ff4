"""``Dataset.iter_batches``: the view streamed in record batches equals ``labels()``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import InvalidInputError
from dsreg.formats.corrections import corrections_table
from dsreg.overlays.write import write_overlay

N = 50
CORE = ["row", "example_id", "label", "label_name", "given_label", "verdict", "blob", "size"]
VERDICTS = ["non_error", "correctable", "multi_label", "neither", "non_agreement"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[dsreg.Registry, dsreg.AddResult]:
    tmp = tmp_path_factory.mktemp("b")
    reg = dsreg.init(registry=tmp / "reg")
    labels = np.random.default_rng(3).integers(0, 4, N)
    np.save(tmp / "l.npy", labels)
    return reg, dsreg.add("b", labels=tmp / "l.npy", tag="original", registry=reg)


@settings(max_examples=25, deadline=None)
@given(
    named=st.lists(
        st.tuples(st.integers(0, N - 1), st.sampled_from(VERDICTS), st.integers(0, 3)),
        max_size=20,
        unique_by=lambda t: t[0],
    ),
    view=st.sampled_from(["original", "cleaned", "corrected", "honeypot", "multilabel"]),
    batch=st.integers(1, 64),
)
def test_batches_equal_labels(
    setup: tuple[dsreg.Registry, dsreg.AddResult],
    named: list[tuple[int, str, int]],
    view: str,
    batch: int,
) -> None:
    reg, added = setup
    base = dsreg.open(added.revision, registry=reg)
    given_labels = base.labels().column("label").to_numpy()
    named.sort()
    rows = np.array([r for r, _, _ in named], dtype=np.int64)
    table = corrections_table(
        rows=rows,
        example_ids=pa.array([str(r) for r in rows.tolist()], pa.string()),
        given_label=given_labels[rows] if len(rows) else np.empty(0, np.int64),
        suggested_label=np.array([s if v == "correctable" else -1 for _, v, s in named]),
        verdict=pa.array([v for _, v, _ in named], pa.string()),
    )
    producer = {"name": "t", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=added.snapshot, kind="validated", table=table, producer=producer)
    rev = dsreg.tag("b@t", "b@original", overlays=[ov], view=view, force=True, registry=reg)
    ds = dsreg.open(rev.revision, registry=reg)
    batches = list(ds.iter_batches(batch))
    assert all(0 < len(b) <= batch for b in batches)
    got = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None
    want = dsreg.open(rev.revision, registry=reg).labels().select(CORE)
    assert len(ds) == want.num_rows
    if got is None:
        assert want.num_rows == 0
    else:
        assert got.select(CORE).equals(want)


def test_batch_size_is_checked(setup: tuple[dsreg.Registry, dsreg.AddResult]) -> None:
    reg, added = setup
    with pytest.raises(InvalidInputError, match="batch_size"):
        next(dsreg.open(added.revision, registry=reg).iter_batches(0))


def test_a_set_of_several_row_groups_streams_in_order(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    n = (1 << 18) + 100  # two row groups of the examples table
    np.save(tmp_path / "l.npy", np.arange(n) % 7)
    added = dsreg.add("big", labels=tmp_path / "l.npy", registry=reg)
    ds = dsreg.open(added.revision, registry=reg)
    sizes, first = [], []
    for b in ds.iter_batches(100_000):
        sizes.append(len(b))
        first.append(b.column("row")[0].as_py())
    assert sizes == [100_000, 100_000, 62_244] and first == [0, 100_000, 200_000]
    assert len(ds) == n
