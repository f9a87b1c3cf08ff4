"""The one reachability walk: gc keeps what it reaches, verify checks it, push sends it, pull and
clone fetch it; each object it reads is read once."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg.errors import CorruptObjectError, IntegrityError
from dsreg.formats.manifests import Revision
from dsreg.ingest.snapshot import AddResult, add_source
from dsreg.ingest.sources import scan_imagefolder
from dsreg.objects.store import ObjectStore
from dsreg.ops.maintenance import collect_garbage, verify
from dsreg.overlays.write import corrections_table, write_overlay
from dsreg.registry import reachable as walk
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import MANIFEST_KINDS, Kind, Node, children, reachable, roots
from dsreg.registry.reader import LocalReader
from dsreg.remote.config import add_remote
from dsreg.remote.transfer import clone, pull, push


def _add(reg: Registry, dataset: str, tree: Path, *, tag: str | None = None) -> AddResult:
    return add_source(reg, dataset, scan_imagefolder(tree), tag=tag)


def _overlay(reg: Registry, snapshot: str, row: int, example_id: str) -> str:
    """A detected overlay of one suspected row, logged for the snapshot's dataset."""
    table = corrections_table(
        rows=np.array([row]),
        example_ids=[example_id],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
    )
    producer = {"name": "test", "version": "1", "params": {"row": row}, "inputs": {}}
    return write_overlay(reg, base=snapshot, kind="detected", table=table, producer=producer)


def _remote_objects(remote: Path) -> set[str]:
    files = remote / "files" / "blake3"
    return {f"blake3:{p.parent.name}{p.name}" for p in files.glob("*/*")}


def _blobs(reg: Registry, spec: str) -> set[str]:
    ds = dsreg.open(spec, registry=reg)
    return {e.blob for e in ds if e.blob is not None}


def _logged_overlays(reg: Registry) -> list[str]:
    return [e.new for e in reg.refs.log("pets") if e.event == "overlay" and e.new]


@pytest.fixture
def pets(make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]) -> Registry:
    """pets@original (6 payloads), pets@cleaned (one overlay applied), and an overlay the log
    names that no tag applies."""
    reg = make_registry()
    tree = make_imagefolder("pets", classes=["cat", "dog"], per_class=3)
    added = _add(reg, "pets", tree, tag="original")
    applied = _overlay(reg, added.snapshot, 0, "cat/img000.bin")
    _overlay(reg, added.snapshot, 1, "cat/img001.bin")  # logged, never applied
    dsreg.tag("pets@cleaned", "pets@original", overlays=[applied], view="cleaned", registry=reg)
    return reg


def test_gc_keeps_everything_a_tag_reaches_and_removes_what_nothing_reaches(
    pets: Registry, make_imagefolder: Callable[..., Path]
) -> None:
    reg = pets
    kept = set(reg.store)
    # An untagged add that shares one payload with pets and has one of its own, and a revision
    # stored but never tagged: everything of theirs that pets does not hold is garbage.
    loose = make_imagefolder("loose", classes=["cat"], per_class=0)
    shared = next(iter(sorted(_blobs(reg, "pets@original"))))
    (loose / "cat" / "shared.bin").write_bytes(reg.store.read_bytes(shared))
    (loose / "cat" / "own.bin").write_bytes(b"only in the untagged add")
    untagged = _add(reg, "loose", loose)
    original = LocalReader(reg).revision("pets@original").revision
    stray = Revision(snapshot=original.snapshot, view="corrected")
    reg.store_revision(stray)  # stored, never tagged
    garbage = set(reg.store) - kept
    assert len(garbage) == 5  # own.bin, examples table, snapshot, revision; stray revision
    assert {untagged.revision, stray.digest} <= garbage

    assert set(collect_garbage(reg, dry_run=True).removed) == garbage
    done = collect_garbage(reg)
    assert set(done.removed) == garbage
    assert set(reg.store) == kept
    assert done.kept == len(kept)
    assert shared in set(reg.store)
    for spec in ("pets@original", "pets@cleaned"):
        assert all(e.read_bytes() for e in dsreg.open(spec, registry=reg))
    assert verify(reg).ok
    assert collect_garbage(reg).removed == ()


def test_gc_keeps_an_overlay_the_log_names_with_its_table_and_base(pets: Registry) -> None:
    reg = pets
    logged = [e.new for e in reg.refs.log("pets") if e.event == "overlay" and e.new]
    assert len(logged) == 2
    dsreg.tag(
        "pets@cleaned", "pets@original", force=True, registry=reg
    )  # no overlay applied any more
    collect_garbage(reg)
    for od in logged:
        ov = reg.overlay(od)
        assert {od, ov.corrections, ov.base} <= set(reg.store)


def test_verify_reports_a_missing_payload_of_a_tagged_revision(pets: Registry) -> None:
    reg = pets
    blob = sorted(_blobs(reg, "pets@original"))[2]
    os.unlink(reg.store.path(blob))
    for res in (verify(reg, revisions=[LocalReader(reg).revision("pets@original")]), verify(reg)):
        assert not res.ok
        assert [(p.digest, p.problem) for p in res.problems] == [(blob, "missing")]
    # gc never needs a payload's bytes: it still keeps the rest, and removes nothing a tag needs.
    assert collect_garbage(reg).removed == ()


def test_gc_removes_nothing_when_a_reached_table_cannot_be_read(
    pets: Registry, make_imagefolder: Callable[..., Path]
) -> None:
    reg = pets
    _add(reg, "loose", make_imagefolder("loose", seed=7))  # garbage gc must not remove now
    examples = reg.snapshot(reg.revision(reg.refs.get("pets", "original") or "").snapshot)
    path = reg.store.path(examples.examples)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes()[::-1])
    before = set(reg.store)
    with pytest.raises(IntegrityError, match="gc removed nothing"):
        collect_garbage(reg)
    assert set(reg.store) == before
    problems = verify(reg, revisions=[LocalReader(reg).revision("pets@cleaned")]).problems
    assert examples.examples in {p.digest for p in problems}


def test_push_sends_exactly_what_verify_checks_and_pull_fetches_it(
    pets: Registry,
    make_registry: Callable[..., Registry],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    reg = pets
    checked: set[str] = set()
    check = ObjectStore.check

    def record(store: ObjectStore, digest: str) -> str | None:
        checked.add(digest)
        return check(store, digest)

    with monkeypatch.context() as m:
        m.setattr(ObjectStore, "check", record)
        assert verify(reg, revisions=[LocalReader(reg).revision("pets@cleaned")]).ok
    assert len(checked) == 6 + 5  # payloads; examples, snapshot, revision, overlay, its table

    # The history travels with the tag: the overlay the log names but no tag applies goes
    # too (its manifest and its table), and nothing else.
    logged = _logged_overlays(reg)
    history, problems = reachable(reg, logged)
    assert not problems and len(history - checked) == 2
    remote = tmp_path / "remote"
    add_remote(reg, "origin", str(remote), default=True)
    sent = dsreg.push(["pets@cleaned"], registry=reg)
    assert sent.sent == len(checked | history)
    assert _remote_objects(remote) == checked | history

    fresh = make_registry("fresh")
    add_remote(fresh, "origin", str(remote), default=True)
    pull(fresh, ["pets@cleaned"])
    assert set(fresh.store) == checked | history
    assert verify(fresh).ok


def test_clone_fetches_what_the_walk_reaches_without_payloads(
    pets: Registry, tmp_path: Path
) -> None:
    reg = pets
    remote = tmp_path / "remote"
    add_remote(reg, "origin", str(remote), default=True)
    push(reg)
    cloned = clone(str(remote), tmp_path / "clone")
    local = Registry(Path(cloned.registry))
    tags = [d for _, _, d in reg.refs.all()]
    everything, problems = reachable(reg, [*tags, *_logged_overlays(reg)])
    assert not problems
    payloads = _blobs(reg, "pets@original")
    assert set(local.store) == everything - payloads


def test_the_walk_reads_each_object_once(pets: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two tags and two logged overlays all lead to one snapshot and its examples table: the
    # walk reads each object once however many paths lead to it, and never a payload.
    reg = pets
    snap = reg.snapshot(reg.revision(reg.refs.get("pets", "original") or "").snapshot)
    overlays = [e.new for e in reg.refs.log("pets") if e.event == "overlay" and e.new]
    tables = [snap.examples, *(reg.overlay(o).corrections for o in overlays)]
    revisions = [d for _, _, d in reg.refs.all()]
    expanded: Counter[str] = Counter()
    reads: Counter[str] = Counter()
    # Every verified read of an object's bytes ends in check_bytes (read_bytes for manifests,
    # the memory-mapped reads of tables), so reads are counted there.
    step, check = walk.children, ObjectStore.check_bytes

    def counting_step(r: Registry, node: Node, *, tables: bool = True) -> Any:
        expanded[node.digest] += 1
        return step(r, node, tables=tables)

    def counting_check(store: ObjectStore, digest: str, data: bytes | memoryview) -> None:
        reads[digest] += 1
        check(store, digest, data)

    monkeypatch.setattr(walk, "children", counting_step)
    monkeypatch.setattr(ObjectStore, "check_bytes", counting_check)
    everything, problems = reachable(reg, roots(reg))
    assert not problems
    assert everything == set(reg.store)
    assert expanded and set(expanded.values()) == {1}
    assert [reads[d] for d in [*tables, *overlays, *revisions]] == [1] * 7
    assert not set(reads) & _blobs(reg, "pets@original")


def test_waves_name_each_object_once_and_never_before_what_names_it(pets: Registry) -> None:
    reg = pets
    waves: list[list[str]] = []

    def before_read(wave: Collection[str]) -> None:
        for d in wave:
            assert reg.store.has(d)  # a transfer would have fetched it here
        waves.append(list(wave))

    cleaned = reg.refs.get("pets", "cleaned")
    assert cleaned is not None
    everything, problems = reachable(reg, [cleaned], before_read=before_read)
    assert not problems
    named = [d for w in waves for d in w]
    assert sorted(named) == sorted(everything)  # every object once, across all waves
    rev = reg.revision(cleaned)
    ov = reg.overlay(rev.overlays[0])
    snap = reg.snapshot(rev.snapshot)
    depth = {d: i for i, w in enumerate(waves) for d in w}
    assert depth[cleaned] == 0
    assert depth[rev.snapshot] == depth[rev.overlays[0]] == 1
    assert depth[snap.examples] == depth[ov.corrections] == 2
    assert {depth[b] for b in _blobs(reg, "pets@original")} == {3}


def test_without_tables_the_walk_names_tables_but_never_reads_them(pets: Registry) -> None:
    reg = pets
    cleaned = reg.refs.get("pets", "cleaned")
    assert cleaned is not None
    rev = reg.revision(cleaned)
    snap = reg.snapshot(rev.snapshot)
    # A corrupt table does not stop a walk that does not read tables (a clone's).
    path = reg.store.path(snap.examples)
    os.chmod(path, 0o644)
    path.write_bytes(b"not parquet")
    everything, problems = reachable(reg, [cleaned], tables=False)
    assert not problems
    ov = reg.overlay(rev.overlays[0])
    assert everything == {cleaned, rev.snapshot, rev.overlays[0], snap.examples, ov.corrections}
    _, problems = reachable(reg, [cleaned])
    assert [p.digest for p in problems] == [snap.examples]


def test_children_of_each_kind(pets: Registry) -> None:
    reg = pets
    cleaned = reg.refs.get("pets", "cleaned")
    assert cleaned is not None
    rev = reg.revision(cleaned)
    ov = reg.overlay(rev.overlays[0])
    snap = reg.snapshot(rev.snapshot)

    nodes, leaves = children(reg, Node(digest=cleaned, kind=Kind.START))
    assert [(n.digest, n.kind) for n in nodes] == [
        (rev.snapshot, Kind.SNAPSHOT),
        (rev.overlays[0], Kind.OVERLAY),
    ]
    assert leaves == []
    nodes, leaves = children(reg, Node(digest=rev.overlays[0], kind=Kind.OVERLAY))
    assert [(n.digest, n.kind) for n in nodes] == [
        (ov.corrections, Kind.CORRECTIONS),
        (ov.base, Kind.SNAPSHOT),
    ]
    nodes, leaves = children(reg, Node(digest=rev.overlays[0], kind=Kind.OVERLAY), tables=False)
    assert [(n.digest, n.kind) for n in nodes] == [(ov.base, Kind.SNAPSHOT)]
    assert leaves == [ov.corrections]
    nodes, leaves = children(reg, Node(digest=rev.snapshot, kind=Kind.SNAPSHOT))
    assert [(n.digest, n.kind) for n in nodes] == [(snap.examples, Kind.EXAMPLES)]
    nodes, leaves = children(reg, nodes[0])
    assert nodes == [] and set(leaves) == _blobs(reg, "pets@original")
    assert {Kind.START, Kind.SNAPSHOT, Kind.OVERLAY} == MANIFEST_KINDS


def test_an_unreadable_start_is_a_problem_and_on_error_may_stop_the_walk(
    pets: Registry,
) -> None:
    reg = pets
    cleaned = reg.refs.get("pets", "cleaned")
    assert cleaned is not None
    path = reg.store.path(cleaned)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes() + b" ")
    everything, problems = reachable(reg, [cleaned])
    assert everything == {cleaned}
    assert [p.digest for p in problems] == [cleaned] and "corrupt" in problems[0].problem

    def stop(node: Node, e: Exception) -> None:
        raise e

    with pytest.raises(CorruptObjectError):
        reachable(reg, [cleaned], on_error=stop)
