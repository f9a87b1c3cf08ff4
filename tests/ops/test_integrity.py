"""Corrupt objects are named by verify and never served; gc removes only what no ref reaches."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg import (
    AddResult,
    CorruptObjectError,
    IntegrityError,
    InvalidInputError,
    ManifestError,
    ObjectNotFoundError,
    Registry,
)
from dsreg.objects.digest import short
from dsreg.ops.maintenance import reachable, roots
from dsreg.overlays.write import corrections_table, write_overlay
from tests.conftest import stored_view

PIN = ".dsreg.json"  # the pin file a checkout writes


@pytest.fixture
def pets(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> tuple[Registry, Path, AddResult]:
    reg = make_registry()
    tree = make_imagefolder(classes=["cat", "dog"], per_class=3)
    return reg, tree, add_tree(reg, "pets", tree)


def test_a_clean_registry_verifies(pets: tuple[Registry, Path, AddResult]) -> None:
    reg, _, _ = pets
    res = dsreg.verify(registry=reg)
    assert res.ok and res.checked == 6 + 3  # payloads, examples table, snapshot, revision
    assert dsreg.verify("pets@original", registry=reg).ok


def test_a_flipped_payload_is_named_and_never_served(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path, flip_byte: Callable[..., None]
) -> None:
    reg, tree, _ = pets
    ds = dsreg.open("pets@original", registry=reg)
    bad = ds[4]
    assert bad.blob is not None
    flip_byte(reg, bad.blob)

    for res in (dsreg.verify(registry=reg), dsreg.verify("pets@original", registry=reg)):
        assert not res.ok
        assert [p.digest for p in res.problems] == [bad.blob]
        assert "corrupt" in res.problems[0].problem

    ds = dsreg.open("pets@original", registry=reg)  # manifests and table are intact
    with pytest.raises(CorruptObjectError, match=short(bad.blob)):
        ds[4].read_bytes()
    with pytest.raises(CorruptObjectError, match=short(bad.blob)):
        _ = ds[4].path
    assert ds[3].read_bytes() == (tree / ds[3].example_id).read_bytes()

    for link in ("hardlink", "copy"):
        out = tmp_path / f"out-{link}"
        with pytest.raises(CorruptObjectError, match=short(bad.blob)):
            dsreg.checkout("pets@original", out, link=link, registry=reg)
        # Whatever was written is right; the corrupt file is not there, and no pin claims it is.
        for p in out.rglob("*.bin"):
            assert p.read_bytes() == (tree / p.relative_to(out)).read_bytes()
        assert not (out / bad.example_id).exists()
        assert not (out / PIN).exists()


def test_a_flipped_examples_table_is_never_parsed(
    pets: tuple[Registry, Path, AddResult], flip_byte: Callable[..., None]
) -> None:
    reg, _, res = pets
    flip_byte(reg, res.examples)
    ds = dsreg.open("pets@original", registry=reg)
    with pytest.raises(CorruptObjectError, match=short(res.examples)):
        ds.labels()
    with pytest.raises(CorruptObjectError):
        list(ds.iter_batches(2))
    with pytest.raises(CorruptObjectError):
        len(ds)
    problems = dsreg.verify(registry=reg).problems
    assert res.examples in {p.digest for p in problems}


@pytest.mark.parametrize("which", ["snapshot", "revision"])
def test_a_flipped_manifest_is_refused_on_open(
    pets: tuple[Registry, Path, AddResult], which: str, flip_byte: Callable[..., None]
) -> None:
    reg, _, res = pets
    digest = getattr(res, which)
    flip_byte(reg, digest, at=20)
    with pytest.raises(CorruptObjectError, match=short(digest)):
        dsreg.open("pets@original", registry=reg)
    assert digest in {p.digest for p in dsreg.verify(registry=reg).problems}


def test_a_flipped_overlay_table_is_refused(
    pets: tuple[Registry, Path, AddResult], flip_byte: Callable[..., None]
) -> None:
    reg, _, res = pets
    table = corrections_table(
        rows=np.array([0]),
        example_ids=["cat/img000.bin"],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
    )
    producer = {"name": "t", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)
    dsreg.tag("pets@corrected", "pets@original", overlays=[ov], view="corrected", registry=reg)
    corrections = dsreg.overlay_show(ov, registry=reg).overlay.corrections
    flip_byte(reg, corrections)
    with pytest.raises(CorruptObjectError, match=short(corrections)):
        dsreg.open("pets@corrected", registry=reg).labels()
    assert corrections in {p.digest for p in dsreg.verify("pets@corrected", registry=reg).problems}


def test_a_missing_object_is_reported(pets: tuple[Registry, Path, AddResult]) -> None:
    reg, _, _ = pets
    ds = dsreg.open("pets@original", registry=reg)
    blob = ds[0].blob
    assert blob is not None
    os.unlink(reg.store.path(blob))
    res = dsreg.verify("pets@original", registry=reg)
    assert [(p.digest, p.problem) for p in res.problems] == [(blob, "missing")]
    with pytest.raises(ObjectNotFoundError, match=short(blob)):
        ds[0].read_bytes()


# -- gc ----------------------------------------------------------------------------------------


def test_gc_removes_only_what_no_ref_reaches(
    pets: tuple[Registry, Path, AddResult],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> None:
    reg, tree, _ = pets
    kept = set(reg.store)
    # An untagged add sharing one payload with pets, plus one file of its own.
    loose = make_imagefolder("loose", classes=["cat"], per_class=0)
    (loose / "cat" / "shared.bin").write_bytes((tree / "cat" / "img000.bin").read_bytes())
    (loose / "cat" / "own.bin").write_bytes(b"only here")
    untagged = add_tree(reg, "loose", loose, tag=None)
    rev = stored_view(reg, "pets@original", "cleaned")  # stored, never tagged
    garbage = set(reg.store) - kept
    assert len(garbage) == 5  # own.bin, examples table, snapshot, revision; cleaned revision
    assert {untagged.revision, rev.digest} <= garbage

    dry = dsreg.gc(dry_run=True, registry=reg)
    assert set(dry.removed) == garbage and dry.dry_run
    assert set(reg.store) == kept | garbage  # a dry run removes nothing

    done = dsreg.gc(registry=reg)
    assert set(done.removed) == garbage
    assert set(reg.store) == kept
    assert dsreg.verify(registry=reg).ok
    ds = dsreg.open("pets@original", registry=reg)
    assert [e.read_bytes() for e in ds] == [(tree / e.example_id).read_bytes() for e in ds]
    assert dsreg.gc(registry=reg).removed == ()


def test_gc_keeps_what_a_moved_tag_still_reaches_and_logged_overlays(
    pets: tuple[Registry, Path, AddResult],
) -> None:
    reg, _, res = pets
    table = corrections_table(
        rows=np.array([2]),
        example_ids=["cat/img002.bin"],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
    )
    producer = {"name": "t", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)
    cleaned = dsreg.tag(
        "pets@cleaned", "pets@original", overlays=[ov], view="cleaned", registry=reg
    )
    # Move 'original' to the cleaned revision: the old original revision manifest is kept while
    # the log names it (docs/concepts.md, "Guarantees"); pruned, it is garbage, but the snapshot
    # and every payload are still reached through the cleaned revision.
    dsreg.tag("pets@original", "pets@cleaned", force=True, registry=reg)
    assert dsreg.gc(registry=reg).removed == ()
    removed = dsreg.gc(prune_log_older_than="now", registry=reg).removed
    assert removed == (res.revision,)
    keep, problems = reachable(reg, roots(reg))
    assert not problems and {ov, reg.overlay(ov).corrections, cleaned.revision} <= keep
    assert dsreg.verify(registry=reg).ok


def test_gc_removes_nothing_when_reachable_content_is_unreadable(
    pets: tuple[Registry, Path, AddResult],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    flip_byte: Callable[..., None],
) -> None:
    reg, _, res = pets
    add_tree(reg, "loose", make_imagefolder("loose", seed=3), tag=None)
    flip_byte(reg, res.examples)
    before = set(reg.store)
    with pytest.raises(IntegrityError, match="gc removed nothing"):
        dsreg.gc(registry=reg)
    assert set(reg.store) == before


def test_gc_clears_stale_staging_files_only(pets: tuple[Registry, Path, AddResult]) -> None:
    reg, _, _ = pets
    old, fresh = reg.root / "tmp" / "obj-old", reg.root / "tmp" / "obj-fresh"
    old.write_bytes(b"left by a killed add")
    fresh.write_bytes(b"being written now")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    dsreg.gc(dry_run=True, registry=reg)
    assert old.exists()
    dsreg.gc(registry=reg)
    assert not old.exists() and fresh.exists()


def test_json_payloads_are_payloads_not_manifests(
    make_registry: Callable[..., Registry], tmp_path: Path, add_tree: Callable[..., AddResult]
) -> None:
    """A dataset of JSON documents: verify must not mistake them for broken manifests."""
    reg = make_registry()
    tree = tmp_path / "docs"
    (tree / "pos").mkdir(parents=True)
    (tree / "neg").mkdir()
    (tree / "pos" / "a.json").write_text('{"text": "great film"}')
    (tree / "neg" / "b.json").write_text('{"schema": "mine/1", "text": "dull"}')
    res = add_tree(reg, "docs", tree)
    assert dsreg.verify(registry=reg).ok
    assert dsreg.verify("docs@original", registry=reg).ok
    ds = dsreg.open("docs@original", registry=reg)
    blob = ds[0].blob
    assert blob is not None and not reg.is_manifest(blob)
    assert all(reg.is_manifest(d) for d in (res.snapshot, res.revision))
    with pytest.raises(InvalidInputError, match="not a revision"):
        dsreg.open(blob, registry=reg)


def test_a_stored_manifest_that_breaks_its_schema_is_reported(
    pets: tuple[Registry, Path, AddResult],
) -> None:
    """Bytes that hash right but are not a valid manifest (written by another program)."""
    from dsreg.formats.canonical import canonical_bytes

    reg, _, res = pets
    bad = reg.store.put_bytes(
        canonical_bytes(
            {"overlays": [], "schema": "dsreg/revision/1", "snapshot": res.snapshot, "view": "x"}
        )
    )
    reg.refs.set("pets", "odd", bad)
    problems = {p.digest: p.problem for p in dsreg.verify(registry=reg).problems}
    assert list(problems) == [bad] and "breaks schema 'revision' at view" in problems[bad]
    with pytest.raises(ManifestError, match="breaks schema"):
        dsreg.open("pets@odd", registry=reg)
