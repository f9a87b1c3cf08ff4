"""Hostile tables: stored under their own digest (so intact), built by other code, pushed and
cloned. No command indexes with them; each refuses with a DsregError naming the table, and
verify reports the snapshot as damaged (docs/concepts.md, "Guarantees")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dsreg.errors import DsregError
from dsreg.formats.manifests import Revision, Snapshot
from dsreg.formats.tables import base_schema, parquet_bytes
from dsreg.ops.checkout.apply import checkout
from dsreg.ops.maintenance import verify
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader
from dsreg.views.dataset import Dataset

CLASSES = ("a", "b", "c")


def _plant(reg: Registry, table: pa.Table, *, rows: int, source: dict[str, Any]) -> str:
    """Store ``table`` as the examples of a snapshot of dataset 'evil' claiming ``rows`` rows,
    tag its original revision evil@x, and return that revision's digest."""
    examples = reg.store.put_bytes(parquet_bytes(table))
    snap = Snapshot(dataset="evil", examples=examples, rows=rows, classes=CLASSES, source=source)
    rev = Revision(snapshot=reg.put_manifest(snap))
    digest = reg.put_manifest(rev)
    reg.refs.set("evil", "x", digest, force=True, command="test")
    return digest


def _table(ids: list[str], labels: list[int], blobs: list[str | None]) -> pa.Table:
    return pa.Table.from_arrays(
        [
            pa.array(ids, pa.string()),
            pa.array(labels, pa.int32()),
            pa.array(blobs, pa.string()),
            pa.array([None if b is None else 1 for b in blobs], pa.int64()),
        ],
        schema=base_schema(),
    )


def _every_reader_refuses(reg: Registry, tmp: Path) -> None:
    resolved = LocalReader(reg).revision("evil@x")
    # len() parses no row (the verified manifest's row count less the rows the overlays
    # remove): it is not a reader of the table's content. Every read of the rows is.
    readers: list[Callable[[], object]] = [
        lambda: Dataset(resolved).labels(),
        lambda: list(Dataset(resolved).iter_batches(2)),
        lambda: Dataset(resolved)[0],
        lambda: checkout(resolved, tmp / "out", link="copy"),
    ]
    for read in readers:
        with pytest.raises(DsregError):
            read()
    assert not verify(reg).ok


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bad_label=st.one_of(st.integers(-(2**31), -1), st.integers(len(CLASSES), 2**31 - 1)),
    at=st.integers(0, 3),
)
def test_labels_outside_the_classes_are_refused(
    tmp_path_factory: pytest.TempPathFactory, bad_label: int, at: int
) -> None:
    tmp = tmp_path_factory.mktemp("h")
    reg = Registry.init(tmp / "reg")
    blob = reg.store.put_bytes(b"payload")
    labels = [0, 1, 2, 0]
    labels[at] = bad_label
    _plant(
        reg,
        _table([f"a/{i}.bin" for i in range(4)], labels, [blob] * 4),
        rows=4,
        source={"kind": "imagefolder"},
    )
    _every_reader_refuses(reg, tmp)


@pytest.mark.parametrize(
    ("case", "make"),
    [
        ("null blob in a tree", lambda b: (_table(["a/0", "a/1"], [0, 1], [b, None]), 2)),
        ("blob not a digest", lambda b: (_table(["a/0", "a/1"], [0, 1], [b, "../x"]), 2)),
        ("row count not the manifest's", lambda b: (_table(["a/0", "a/1"], [0, 1], [b, b]), 5)),
        ("an id that climbs out", lambda b: (_table(["a/0", "a/../../keep"], [0, 1], [b, b]), 2)),
        ("an absolute id", lambda b: (_table(["a/0", "/etc/passwd"], [0, 1], [b, b]), 2)),
    ],
)
def test_tables_that_break_their_manifest_are_refused(
    tmp_path: Path, case: str, make: Callable[[str], tuple[pa.Table, int]]
) -> None:
    reg = Registry.init(tmp_path / "reg")
    blob = reg.store.put_bytes(b"payload")
    table, rows = make(blob)
    _plant(reg, table, rows=rows, source={"kind": "imagefolder"})
    _every_reader_refuses(reg, tmp_path)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bad=st.sampled_from(["..", ".", "", "a/..", "../x", "/abs", "x//y", "x/", "a\\b", "a\x00b"]),
    where=st.sampled_from(["id", "class"]),
)
def test_paths_that_would_leave_a_checkout_are_never_served(
    tmp_path_factory: pytest.TempPathFactory, bad: str, where: str
) -> None:
    """Ids and class names are checked on every read path, not only at add."""
    assume(not (where == "class" and bad == ""))  # the manifest schema refuses it already
    tmp = tmp_path_factory.mktemp("p")
    reg = Registry.init(tmp / "reg")
    blob = reg.store.put_bytes(b"payload")
    classes = CLASSES if where == "id" else (bad, "b", "c")
    first = f"{bad}/x.bin" if where == "id" and bad not in ("/abs",) else "a/x.bin"
    ids = [bad if where == "id" else "a/0.bin", first, "a/1.bin"]
    examples = reg.store.put_bytes(parquet_bytes(_table(ids, [0, 1, 2], [blob] * 3)))
    if where == "id" and len(set(ids)) < 3:
        ids[1] = "a/dup.bin"
    snap = Snapshot(
        dataset="evil", examples=examples, rows=3, classes=classes, source={"kind": "imagefolder"}
    )
    rev = Revision(snapshot=reg.put_manifest(snap))
    reg.refs.set("evil", "x", reg.put_manifest(rev), force=True, command="test")
    _every_reader_refuses(reg, tmp)
    # Nothing was written beside the target folder.
    assert sorted(p.name for p in tmp.iterdir()) in (["reg"], ["out", "reg"])
    assert not (tmp / "out").exists() or not any((tmp / "out").iterdir())
