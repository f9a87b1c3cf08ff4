"""Re-adding a tree: answered from the scan when nothing changed, never when something did."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import AddResult, Registry, TagExistsError, __version__
from dsreg.ingest import treescan
from dsreg.ingest.treescan import scan_tree
from dsreg.objects import batch


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as settled at once (instead of after two seconds)."""
    monkeypatch.setattr(treescan, "RACY_NS", 0)


@pytest.fixture
def no_reads(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """After calling it, any attempt to read or store a payload fails the test."""

    def arm() -> None:
        def refuse(*_a: object, **_k: object) -> object:
            raise AssertionError("a payload was read")

        monkeypatch.setattr(batch.ObjectBatch, "put_files", refuse)
        monkeypatch.setattr(batch, "hash_files", refuse)
        monkeypatch.setattr("dsreg.ingest.payloads.hash_files", refuse)

    return arm


def _add(reg: Registry, tree: Path, tag: str | None = "v1", *, force: bool = False) -> AddResult:
    return dsreg.add("ds", tree, tag=tag, force=force, registry=reg)


def test_an_unchanged_tree_is_re_added_from_its_scan_alone(
    settled: None,
    no_reads: Callable[[], None],
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    reg = make_registry()
    tree = make_imagefolder(per_class=5)
    first = _add(reg, tree)
    assert first.new_objects == 15
    before = registry_state(reg.root)
    no_reads()
    again = _add(reg, tree)
    assert (again.revision, again.snapshot, again.examples) == (
        first.revision,
        first.snapshot,
        first.examples,
    )
    assert again.new_objects == 0 and again.rows == 15 and again.bytes == first.bytes
    assert again.classes == first.classes
    # Nothing written: no object, no log line, not even the state.
    assert registry_state(reg.root) == before
    # A new tag on the same content is just a tag.
    other = _add(reg, tree, tag="v2")
    assert other.revision == first.revision
    assert dsreg.open("ds@v2", registry=reg).digest == first.revision


def test_a_rewritten_file_is_seen_even_with_its_old_mtime_and_size(
    settled: None, make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    tree = make_imagefolder(per_class=3)
    first = _add(reg, tree)
    f = tree / "class1" / "img002.bin"
    st = f.stat()
    new_bytes = bytes(b ^ 0xFF for b in f.read_bytes())
    f.write_bytes(new_bytes)  # same size, same inode
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back, as rsync -t or touch -r do
    assert (f.stat().st_size, f.stat().st_ino, f.stat().st_mtime_ns) == (
        st.st_size,
        st.st_ino,
        st.st_mtime_ns,
    )
    second = _add(reg, tree, tag="v2")
    assert second.revision != first.revision and second.new_objects == 1
    ds = dsreg.open("ds@v2", registry=reg)
    row = ds.labels().column("example_id").to_pylist().index("class1/img002.bin")
    assert ds[row].read_bytes() == new_bytes


def test_a_tree_changed_moments_ago_is_not_remembered(
    make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    tree = make_imagefolder(per_class=2)
    scan = scan_tree(tree)
    assert scan.racy()  # just written: a same-tick rewrite would not change its stat
    _add(reg, tree)
    assert reg.state.scan_result(scan.fingerprint("ds", __version__)) is None
    assert reg.state.lookup(str(tree)) == {}


def test_gc_forgets_scans_so_a_re_add_stores_what_gc_removed(
    settled: None, make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    old_tree = make_imagefolder("old", per_class=3, seed=1)
    new_tree = make_imagefolder("new", per_class=3, seed=2)
    _add(reg, old_tree)
    _add(reg, new_tree, force=True)  # v1 moves: only the log reaches the old tree's objects now
    assert dsreg.gc(prune_log_older_than="now", registry=reg).removed
    again = _add(reg, old_tree, tag="old")
    assert again.new_objects == 9
    assert dsreg.verify(registry=reg).ok
    ds = dsreg.open("ds@old", registry=reg)
    for i in range(len(ds)):
        assert ds[i].read_bytes() == (old_tree / ds[i].example_id).read_bytes()


def test_a_verify_that_finds_a_missing_object_lets_a_re_add_restore_it(
    settled: None, make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    tree = make_imagefolder(per_class=3)
    first = _add(reg, tree)
    ds = dsreg.open("ds@v1", registry=reg)
    lost = ds.labels().column("blob")[4].as_py()
    os.unlink(reg.store.path(lost))
    assert [p.digest for p in dsreg.verify(registry=reg).problems] == [lost]
    again = _add(reg, tree)
    assert again.revision == first.revision and again.new_objects == 1
    assert dsreg.verify(registry=reg).ok


def test_a_re_add_under_a_tag_held_by_other_content_needs_force(
    settled: None, make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    a = make_imagefolder("a", seed=1)
    b = make_imagefolder("b", seed=2)
    ra = _add(reg, a, tag="v1")
    rb = _add(reg, b, tag="v2")
    with pytest.raises(TagExistsError, match=r"tag ds@v1 exists at .*--force"):
        _add(reg, b, tag="v1")  # b's scan is known: the fast path refuses as the full one does
    assert dsreg.open("ds@v1", registry=reg).digest == ra.revision
    moved = _add(reg, b, tag="v1", force=True)
    assert moved.revision == rb.revision and moved.previous == ra.revision
    assert [e.old for e in dsreg.log("ds", registry=reg) if e.tag == "v1"][-1] == ra.revision


def test_the_command_line_re_add_reports_the_same_revision(
    settled: None, cli: Callable[..., Any], make_imagefolder: Callable[..., Path]
) -> None:
    tree = make_imagefolder(per_class=2)
    assert cli("init").exit_code == 0
    one = cli("add", "ds", str(tree), "--tag", "v1", "--json")
    two = cli("add", "ds", str(tree), "--tag", "v1", "--json")
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["revision"] == b["revision"] and b["new_objects"] == 0 and a["new_objects"] == 6


def test_the_fingerprint_is_the_same_from_worker_processes_and_from_one(
    make_imagefolder: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tree of enough class folders to be scanned by worker processes, whose packed answers
    # the fingerprint hashes directly; one process gives lists only. Same tree, same answer,
    # and any change to a file's stat changes it either way.
    tree = make_imagefolder("many", classes=70, per_class=3)
    monkeypatch.setenv("DSREG_JOBS", "2")
    forked = scan_tree(tree)
    monkeypatch.setenv("DSREG_JOBS", "1")
    serial = scan_tree(tree)
    assert forked.parts and not serial.parts
    assert forked.ids == serial.ids and forked.inodes == serial.inodes
    assert forked.fingerprint("ds", __version__) == serial.fingerprint("ds", __version__)
    target = tree / "class42" / "img001.bin"
    target.write_bytes(target.read_bytes() + b"!")
    monkeypatch.setenv("DSREG_JOBS", "2")
    changed = scan_tree(tree)
    assert changed.parts
    assert changed.fingerprint("ds", __version__) != forked.fingerprint("ds", __version__)
