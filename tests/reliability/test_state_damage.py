"""A damaged stat cache or scan memory costs speed, never correctness (docs/concepts.md,
"Guarantees": the local state is never trusted over the bytes)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsreg.ingest import treescan
from dsreg.ingest.result import AddTarget
from dsreg.ingest.tree import add_tree
from dsreg.ingest.treescan import scan_tree
from dsreg.ops.maintenance import verify
from dsreg.registry.folder import Registry


@pytest.fixture(autouse=True)
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as settled at once, so the cache remembers them."""
    monkeypatch.setattr(treescan, "RACY_NS", 0)


def _blobs(reg: Registry, revision: str) -> dict[str, str]:
    from dsreg.registry.tables import read_examples

    snap = reg.snapshot(reg.revision(revision).snapshot)
    t = read_examples(reg, snap, columns=["example_id", "blob"])
    return dict(zip(t.column("example_id").to_pylist(), t.column("blob").to_pylist(), strict=True))


def _db(reg: Registry) -> sqlite3.Connection:
    return sqlite3.connect(reg.root / "state" / "stat.sqlite", isolation_level=None)


FIELDS = ("inode", "size", "mtime_ns", "ctime_ns", "digest")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    victim=st.integers(0, 5),
    field=st.sampled_from(FIELDS),
    donor=st.integers(0, 5),
)
def test_a_damaged_stat_cache_row_never_puts_other_bytes_in_a_snapshot(
    tmp_path_factory: pytest.TempPathFactory,
    make_imagefolder: Callable[..., Path],
    victim: int,
    field: str,
    donor: int,
) -> None:
    base = tmp_path_factory.mktemp("reg")
    reg = Registry.init(base / ".dsreg")
    tree = make_imagefolder(per_class=2)
    first = add_tree(reg, AddTarget(dataset="ds", tag="v1"), scan_tree(tree))
    with _db(reg) as con:
        rows = con.execute("SELECT path, inode, size, mtime_ns, ctime_ns, digest FROM files_v2")
        rows = sorted(rows.fetchall())
        path = rows[victim % len(rows)][0]
        other = rows[donor % len(rows)]
        # The damage: one field of one row takes another row's value (for the digest: another
        # file's digest, whose object the store holds, so nothing looks missing).
        value = other[1 + FIELDS.index(field)]
        con.execute(f"UPDATE files_v2 SET {field} = ? WHERE path = ?", (value, path))
        # Another scan, so the re-add cannot be answered from the remembered scan.
        con.execute("DELETE FROM scans_v2")
    again = add_tree(reg, AddTarget(dataset="ds", tag="v2"), scan_tree(tree))
    assert again.revision == first.revision
    assert _blobs(reg, again.revision) == _blobs(reg, first.revision)
    assert verify(reg).ok


def test_a_damaged_scan_memory_never_answers_for_another_tree(
    tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> None:
    reg = Registry.init(tmp_path / ".dsreg")
    a = add_tree(reg, AddTarget(dataset="ds", tag="a"), scan_tree(make_imagefolder(per_class=2)))
    tree_b = make_imagefolder(per_class=3)
    b = add_tree(reg, AddTarget(dataset="ds", tag="b"), scan_tree(tree_b))
    assert a.revision != b.revision
    with _db(reg) as con:
        # Every remembered scan now names tree a's revision.
        con.execute("UPDATE scans_v2 SET revision = ?, snapshot = ?", (a.revision, a.snapshot))
    again = add_tree(reg, AddTarget(dataset="ds", tag="b2"), scan_tree(tree_b))
    assert again.revision == b.revision


def test_state_of_an_earlier_release_is_not_trusted(
    tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> None:
    """Rows without a check (the tables before this release) are dropped, not read."""
    reg = Registry.init(tmp_path / ".dsreg")
    (reg.root / "state").mkdir()
    with _db(reg) as con:
        con.execute(
            "CREATE TABLE files (path TEXT PRIMARY KEY, inode INTEGER, size INTEGER, "
            "mtime_ns INTEGER, ctime_ns INTEGER, digest TEXT) WITHOUT ROWID"
        )
        con.execute("INSERT INTO files VALUES ('x', 1, 2, 3, 4, 'blake3:' || hex(zeroblob(32)))")
    tree = make_imagefolder(per_class=2)
    res = add_tree(reg, AddTarget(dataset="ds", tag="v1"), scan_tree(tree))
    assert res.new_objects == 6
    with _db(reg) as con:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "files" not in names and "files_v2" in names
