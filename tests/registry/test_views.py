"""DuckDB views of revisions: their columns, names in SQL, verified objects, ``dsreg.connect``
and ``Dataset.sql``. That they serve the rows and labels of the reference rule, on random
overlays, is held by tests/views/test_rule_parity.py, with the sparse form."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dsreg
from dsreg.errors import CorruptObjectError, InvalidNameError, QueryError, RevisionNotFoundError
from dsreg.formats.corrections import corrections_table
from dsreg.ingest.snapshot import add_source
from dsreg.ingest.sources import Source
from dsreg.overlays.write import write_overlay
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader
from dsreg.views import sql as views
from dsreg.views.dataset import Dataset
from dsreg.views.verified import forget_verified

PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}


def add_set(
    reg: Registry,
    labels: np.ndarray,
    *,
    k: int,
    name: str = "toy",
    metadata: bool = False,
    ids: list[str] | None = None,
) -> str:
    """A label-only snapshot (ids ``x0``…), optionally with metadata columns; its digest."""
    n = len(labels)
    meta = (
        pa.table({"split": [f"s{i % 3}" for i in range(n)], "weight": [i / 2 for i in range(n)]})
        if metadata
        else None
    )
    src = Source(
        ids=ids or [f"x{i}" for i in range(n)],
        labels=np.asarray(labels, dtype=np.int32),
        classes=tuple(f"c'{i}" for i in range(k)),  # a quote in class names: SQL literal escaping
        payloads=[None] * n,
        metadata=meta,
        provenance={"kind": "table"},
    )
    return add_source(reg, name, src, tag="original").snapshot


def add_overlay(
    reg: Registry,
    snapshot: str,
    labels: np.ndarray,
    rows: list[int],
    verdicts: list[str],
    suggested: list[int],
    ids: list[str] | None = None,
) -> str:
    order = np.argsort(rows)
    r = np.asarray(rows, dtype=np.int64)[order]
    return write_overlay(
        reg,
        base=snapshot,
        kind="manual",
        table=corrections_table(
            rows=r,
            example_ids=[(ids[i] if ids else f"x{i}") for i in r],
            given_label=labels[r],
            suggested_label=np.asarray(suggested, dtype=np.int64)[order],
            verdict=[verdicts[i] for i in order],
        ),
        producer=PRODUCER,
    )


def sql_view(reg: Registry, spec: str) -> pa.Table:
    with views.Connection(LocalReader(reg)) as con:
        return con.table(f'SELECT * FROM "{spec}" ORDER BY "row"')


@pytest.fixture
def toy(make_registry: Callable[..., Registry]) -> tuple[Registry, np.ndarray, list[str]]:
    """toy@original (12 rows, 3 classes, metadata) and toy@cleaned/corrected/honeypot over one
    overlay: rows 1 correctable -> 2, 3 multi_label, 5 non_error, 7 suspected -> 0."""
    reg = make_registry()
    labels = np.asarray([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    snap = add_set(reg, labels, k=3, metadata=True)
    ov = add_overlay(
        reg,
        snap,
        labels,
        [1, 3, 5, 7],
        ["correctable", "multi_label", "non_error", "suspected"],
        [2, -1, -1, 0],
    )
    for view in ("cleaned", "corrected", "honeypot"):
        dsreg.tag(f"toy@{view}", "toy@original", overlays=[ov], view=view, registry=reg)
    return reg, labels, [ov]


def test_columns_are_the_documented_ones_with_metadata_after(toy: tuple) -> None:
    reg, _, _ = toy
    t = sql_view(reg, "toy@corrected")
    assert t.column_names == [
        "row",
        "example_id",
        "label",
        "label_name",
        "given_label",
        "verdict",
        "blob",
        "size",
        "suggested_label",
        "suggested_label_name",
        "score",
        "votes_given",
        "votes_guessed",
        "votes_both",
        "votes_neither",
        "votes_neutral",
        "votes_off_topic",
        "split",
        "weight",
    ]
    assert t.column("row").to_pylist() == [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]
    row1 = t.slice(1, 1).to_pylist()[0]
    assert row1["label"] == 2 and row1["given_label"] == 1 and row1["label_name"] == "c'2"
    assert row1["verdict"] == "correctable" and row1["example_id"] == "x1"


def test_row_is_the_snapshot_position(toy: tuple) -> None:
    reg, _, _ = toy
    t = sql_view(reg, "toy@cleaned")
    pairs = zip(t["row"].to_pylist(), t["example_id"].to_pylist(), strict=True)
    assert all(f"x{r}" == e for r, e in pairs)


def test_several_revisions_in_one_query_and_a_join_across_them(toy: tuple) -> None:
    reg, _, _ = toy
    con = dsreg.connect(reg)
    got = con.execute(
        'SELECT o.row, o.label, c.label FROM "toy@original" o '
        'JOIN "toy@corrected" c USING ("row") WHERE o.label <> c.label ORDER BY 1'
    ).fetchall()
    assert got == [(1, 1, 2), (7, 1, 0)]
    counts = con.execute(
        'SELECT (SELECT count(*) FROM "toy@original"), (SELECT count(*) FROM "toy@cleaned"), '
        '(SELECT count(*) FROM "toy@honeypot")'
    ).fetchall()
    assert counts == [(12, 9, 1)]
    con.close()


def test_a_revision_by_digest_prefix_or_full_digest(toy: tuple) -> None:
    reg, _, _ = toy
    digest = LocalReader(reg).revision("toy@cleaned").digest
    con = dsreg.connect(reg)
    assert con.execute(f'SELECT count(*) FROM "{digest}"').fetchall() == [(9,)]
    assert con.execute(f'SELECT count(*) FROM "toy@{digest[7:17]}"').fetchall() == [(9,)]


def test_names_in_strings_and_comments_are_not_resolved() -> None:
    q = """SELECT 'a "x@y" string', "col@weird" -- "nope@c"
    FROM "ds@v1" /* "also@not" */ JOIN "blake3:abc" ON $$ "dollar@q" $$ = 'it''s "q@r"'"""
    assert views.quoted_names(q) == ["col@weird", "ds@v1", "blake3:abc"]


def test_unknown_revision_and_bad_sql_are_dsreg_errors(toy: tuple) -> None:
    reg, _, _ = toy
    con = dsreg.connect(reg)
    with pytest.raises(RevisionNotFoundError, match="nope"):
        con.sql('SELECT * FROM "toy@nope"')
    with pytest.raises(QueryError, match=r"(?i)column"):
        con.sql('SELECT no_such_column FROM "toy@original"')
    with pytest.raises(QueryError, match=r"(?i)syntax"):
        con.execute("SELEC 1")
    # A quoted name that is not a spec is DuckDB's to judge: here an alias, …
    assert con.execute('SELECT 1 AS "Mixed@Case"').fetchall() == [(1,)]
    # … but as a table DuckDB does not know, the spec's own error says what is wrong.
    with pytest.raises(InvalidNameError, match="'Other'"):
        con.execute('SELECT * FROM "Other@original"')


def test_a_moved_tag_is_seen_by_the_next_query(toy: tuple) -> None:
    reg, _, _ = toy
    con = dsreg.connect(reg)
    assert con.execute('SELECT count(*) FROM "toy@cleaned"').fetchall() == [(9,)]
    dsreg.tag("toy@cleaned", "toy@original", force=True, registry=reg)
    assert con.execute('SELECT count(*) FROM "toy@cleaned"').fetchall() == [(12,)]


def test_dataset_sql_names_its_pinned_revision_this(toy: tuple) -> None:
    reg, _, _ = toy
    ds = dsreg.open("toy@corrected", registry=reg)
    assert ds.sql("SELECT count(*) AS n FROM this").to_pylist() == [{"n": len(ds)}]
    dsreg.tag(
        "toy@corrected", "toy@original", force=True, registry=reg
    )  # the tag moves; ds does not
    assert ds.sql("SELECT count(*) AS n FROM this").to_pylist() == [{"n": 11}]
    both = ds.sql('SELECT count(*) AS n FROM this JOIN "toy@corrected" USING ("row")')
    assert both.to_pylist() == [{"n": 11}]
    by_name = ds.sql("SELECT label_name, count(*) AS n FROM this GROUP BY ALL ORDER BY 1")
    assert by_name.to_pylist() == [
        {"label_name": "c'0", "n": 4},
        {"label_name": "c'1", "n": 2},
        {"label_name": "c'2", "n": 5},
    ]


def _corrupt(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("what", ["examples", "corrections"])
def test_a_corrupt_parquet_object_is_never_served(toy: tuple, what: str) -> None:
    reg, _, ovs = toy
    con = dsreg.connect(reg)
    assert con.execute('SELECT count(*) FROM "toy@corrected"').fetchall() == [(11,)]
    if what == "examples":
        digest = reg.snapshot(LocalReader(reg).revision("toy@original").revision.snapshot).examples
    else:
        digest = reg.overlay(ovs[0]).corrections
    _corrupt(reg.store.path(digest))
    with pytest.raises(CorruptObjectError, match="corrupt"):
        con.execute('SELECT count(*) FROM "toy@corrected"')
    with pytest.raises(CorruptObjectError):
        dsreg.open("toy@corrected", registry=reg).sql("SELECT count(*) FROM this")


def test_objects_are_hashed_once_per_process(toy: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    reg, _, _ = toy
    from dsreg.objects import store

    hashed: list[str] = []
    real = store.hash_file
    monkeypatch.setattr(store, "hash_file", lambda p: hashed.append(str(p)) or real(p))
    forget_verified()
    con = dsreg.connect(reg)
    for _ in range(3):
        con.execute('SELECT count(*) FROM "toy@corrected"').fetchall()
    assert len(hashed) == 2  # the examples table and the corrections table, once each
    examples = reg.store.path(
        reg.snapshot(LocalReader(reg).revision("toy@original").revision.snapshot).examples
    )
    st = examples.stat()
    os.utime(examples, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    con.execute('SELECT count(*) FROM "toy@corrected"').fetchall()
    assert hashed.count(str(examples)) == 2  # a changed mtime: hashed again


def test_a_view_sql_can_be_read_by_plain_duckdb(toy: tuple) -> None:
    reg, _, _ = toy
    import duckdb

    sql = views.view_sql(reg, LocalReader(reg).revision("toy@honeypot").revision)
    got = duckdb.sql(f"SELECT example_id, given_label, label FROM ({sql})").fetchall()
    assert got == [("x1", 1, 2)]


def test_metadata_columns_named_like_internal_ones_stay_columns(
    make_registry: Callable[..., Registry],
) -> None:
    reg = make_registry()
    labels = np.asarray([0, 1, 0, 1])
    src = Source(
        ids=[f"x{i}" for i in range(4)],
        labels=labels.astype(np.int32),
        classes=("a", "b"),
        payloads=[None] * 4,
        metadata=pa.table({"given": ["g0", "g1", "g2", "g3"], "e": [1, 2, 3, 4]}),
        provenance={"kind": "table"},
    )
    snap = add_source(reg, "toy", src, tag="original").snapshot
    ov = add_overlay(reg, snap, labels, [1, 2], ["correctable", "neither"], [0, -1])
    dsreg.tag("toy@corrected", "toy@original", overlays=[ov], view="corrected", registry=reg)
    got = sql_view(reg, "toy@corrected")
    served = Dataset(LocalReader(reg).revision("toy@corrected")).labels(review=True)
    assert served.cast(got.schema).equals(got)
    assert got.column("given").to_pylist() == ["g0", "g1", "g3"]
    assert got.column("label").to_pylist() == [0, 0, 1]
