"""``dsreg checkout``: the view as files, byte-identical; a pin file; incremental switching."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg.errors import InputPathError
from dsreg.ingest.snapshot import AddResult, add_source
from dsreg.ingest.sources import scan_labels, scan_table
from dsreg.ops.checkout.apply import PIN, checkout
from dsreg.overlays.write import corrections_table, write_overlay
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader

LINKS = ["hardlink", "symlink", "copy", "reflink"]


def files_of(root: Path) -> dict[str, bytes]:
    """``{relative path: bytes}`` of every file (links followed), the pin file left out."""
    out = {}
    for p in root.rglob("*"):
        if p.name != PIN and (p.is_file() or p.is_symlink()):
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def inodes(root: Path) -> dict[str, int]:
    """The inode of each entry itself (a symlink's own inode, not its target's)."""
    return {
        p.relative_to(root).as_posix(): p.lstat().st_ino
        for p in root.rglob("*")
        if p.name != PIN and not p.is_dir()
    }


@pytest.fixture
def pets(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> tuple[Registry, Path, AddResult]:
    reg = make_registry()
    tree = make_imagefolder(classes=["cat", "dog", "fox"], per_class=4)
    return reg, tree, add_tree(reg, "pets", tree)


@pytest.mark.parametrize("link", LINKS)
def test_checkout_is_byte_identical_to_the_source_tree(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path, link: str
) -> None:
    reg, tree, res = pets
    out = tmp_path / "out"
    result = checkout(LocalReader(reg).revision("pets@original"), out, link=link)  # type: ignore[arg-type]
    assert files_of(out) == files_of(tree)
    assert (result.files, result.added, result.removed) == (12, 12, 0)
    pin = json.loads((out / PIN).read_text())
    assert pin == {
        "schema": "dsreg/pin/1",
        "revision": res.revision,
        "dataset": "pets",
        "spec": "pets@original",
        "snapshot": res.snapshot,
        "view": "original",
        "layout": "imagefolder",
        "link": link,
        "files": 12,
    }
    some = out / "dog" / "img001.bin"
    if link == "symlink":
        assert some.is_symlink()
    elif link == "hardlink":
        assert some.stat().st_nlink >= 2 and not some.stat().st_mode & stat.S_IWUSR
    else:
        # A copy is the user's to edit: its own inode, writable, never the store's object.
        assert some.stat().st_nlink == 1 and some.stat().st_mode & stat.S_IWUSR


def test_checking_out_again_touches_nothing(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    reg, _, _ = pets
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out, link="copy")
    before = inodes(out)
    again = checkout(LocalReader(reg).revision("pets@original"), out, link="copy")
    assert (again.added, again.removed, again.unchanged) == (0, 0, 12)
    assert inodes(out) == before


def test_checking_out_again_restores_a_deleted_file(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    reg, tree, _ = pets
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out)
    (out / "fox" / "img003.bin").unlink()
    res = checkout(LocalReader(reg).revision("pets@original"), out)
    assert (res.added, res.unchanged) == (1, 11)
    assert files_of(out) == files_of(tree)


def test_switching_link_type_replaces_store_links_with_copies(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    reg, tree, _ = pets
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out, link="hardlink")
    checkout(LocalReader(reg).revision("pets@original"), out, link="copy")
    for p in out.rglob("*.bin"):
        # Still a hard link to the store would let an edit of the "copy" corrupt the store.
        assert p.stat().st_nlink == 1 and p.stat().st_mode & stat.S_IWUSR, p
    assert files_of(out) == files_of(tree)


def test_a_users_own_files_survive_switches_and_link_changes(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    reg, _, _ = pets
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out, link="hardlink")
    (out / "notes.txt").write_text("mine")
    (out / "cat" / "extra.bin").write_bytes(b"mine too")
    checkout(LocalReader(reg).revision("pets@original"), out, link="copy")
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "cat" / "extra.bin").read_bytes() == b"mine too"


def test_a_folder_pinned_to_a_revision_the_registry_lacks_is_left_alone(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path, make_registry: Callable[..., Registry]
) -> None:
    reg, _, _ = pets
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out)
    (out / "notes.txt").write_text("mine")
    other = make_registry("other")
    np.save(tmp_path / "labels.npy", np.array([0, 1]))
    add_source(other, "nums", scan_labels(tmp_path / "labels.npy", classes=None), tag="v1")
    before = files_of(out)
    with pytest.raises(InputPathError, match="cannot read"):
        checkout(LocalReader(other).revision("nums@v1"), out)
    assert files_of(out) == before


def _detected(reg: Registry, res: AddResult) -> str:
    """A detected overlay: cat/img001.bin -> fox, dog/img002.bin -> cat."""
    table = corrections_table(
        rows=np.array([1, 6]),
        example_ids=["cat/img001.bin", "dog/img002.bin"],
        given_label=np.array([0, 1]),
        suggested_label=np.array([2, 0]),
        verdict=["suspected", "suspected"],
        score=np.array([0.01, 0.02]),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    return write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)


@pytest.mark.parametrize("link", ["copy", "symlink", "hardlink"])
def test_switching_revisions_moves_only_what_differs(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path, link: str
) -> None:
    reg, tree, _ = pets
    ov = _detected(reg, pets[2])
    corrected = dsreg.tag(
        "pets@corrected", "pets@original", overlays=[ov], view="corrected", registry=reg
    )
    dsreg.tag("pets@cleaned", "pets@original", overlays=[ov], view="cleaned", registry=reg)
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out, link=link)  # type: ignore[arg-type]
    before = inodes(out)

    res = checkout(LocalReader(reg).revision("pets@corrected"), out, link=link)  # type: ignore[arg-type]
    after = inodes(out)
    moved = {"cat/img001.bin", "dog/img002.bin"}
    untouched = set(before) - moved
    if link != "hardlink":  # a hard link's inode is the object's, rewritten or not
        assert {p: after[p] for p in untouched} == {p: before[p] for p in untouched}
    assert (res.added, res.removed, res.unchanged) == (2, 2, 10)
    got = files_of(out)
    # Relabelled files land under their corrected class; the names they had are gone.
    assert not moved & set(got)
    new = sorted(set(got) - set(before))
    assert [p.split("/")[0] for p in new] == ["cat", "fox"]
    assert got[new[1]] == (tree / "cat" / "img001.bin").read_bytes()
    assert got[new[0]] == (tree / "dog" / "img002.bin").read_bytes()
    pin = json.loads((out / PIN).read_text())
    assert (pin["revision"], pin["view"]) == (corrected.revision, "corrected")

    # Cleaned: the two suspected files are removed, nothing else moves.
    res = checkout(LocalReader(reg).revision("pets@cleaned"), out, link=link)  # type: ignore[arg-type]
    assert set(files_of(out)) == untouched
    if link != "hardlink":
        assert inodes(out) == {p: before[p] for p in untouched}
    assert (res.added, res.removed) == (0, 2)

    # And back to the original: byte-identical to the source again.
    checkout(LocalReader(reg).revision("pets@original"), out, link=link)  # type: ignore[arg-type]
    assert files_of(out) == files_of(tree)
    if link != "hardlink":
        assert {p: inodes(out)[p] for p in untouched} == {p: before[p] for p in untouched}


def test_a_non_empty_folder_without_a_pin_is_refused(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    reg, _, _ = pets
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my work")
    with pytest.raises(InputPathError, match=f"{out} is not empty and holds no {PIN}"):
        checkout(LocalReader(reg).revision("pets@original"), out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InputPathError, match="not a folder"):
        checkout(LocalReader(reg).revision("pets@original"), f)


def test_label_only_checkout_is_a_labels_csv(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    np.save(tmp_path / "y.npy", np.array([1, 0, 1]))
    (tmp_path / "c.txt").write_text("neg\npos\n")
    from dsreg.ingest.sources import read_classes

    add_source(
        reg,
        "y",
        scan_labels(tmp_path / "y.npy", classes=read_classes(tmp_path / "c.txt")),
        tag="original",
    )
    out = tmp_path / "out"
    res = checkout(LocalReader(reg).revision("y@original"), out)
    assert res.files == 0
    assert (out / "labels.csv").read_text() == (
        "row,example_id,label,label_name,given_label,verdict\n"
        "0,0,1,pos,1,\n1,1,0,neg,0,\n2,2,1,pos,1,\n"
    )
    assert json.loads((out / PIN).read_text())["layout"] == "labels"


def test_table_with_files_checks_out_at_the_example_ids(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    src = tmp_path / "files"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "x.wav").write_bytes(b"wave")
    (src / "y.wav").write_bytes(b"why")
    pq.write_table(
        pa.table({"id": ["a/b/x.wav", "y.wav"], "label": [0, 1]}), tmp_path / "t.parquet"
    )
    table = scan_table(
        tmp_path / "t.parquet", id_column="id", label_column="label", classes=None, files=src
    )
    add_source(reg, "audio", table, tag="original")
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("audio@original"), out, link="copy")
    assert files_of(out) == {"a/b/x.wav": b"wave", "y.wav": b"why"}
    assert json.loads((out / PIN).read_text())["layout"] == "files"


def test_the_default_link_is_a_copy_and_no_journal_stays(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    reg, tree, _ = pets
    out = tmp_path / "out"
    res = checkout(LocalReader(reg).revision("pets@original"), out)
    assert res.link == "reflink" and files_of(out) == files_of(tree)
    assert sorted(p.name for p in out.iterdir()) == [PIN, "cat", "dog", "fox"]
    for p in out.rglob("*.bin"):
        assert p.stat().st_nlink == 1 and not p.is_symlink()


def test_a_plan_lists_every_destination_journal_first_pin_last(
    pets: tuple[Registry, Path, AddResult], tmp_path: Path
) -> None:
    from dsreg.ops.checkout.apply import JOURNAL, plan
    from dsreg.views.dataset import Dataset

    reg, _, res = pets
    ov = _detected(reg, res)
    dsreg.tag("pets@corrected", "pets@original", overlays=[ov], view="corrected", registry=reg)
    out = tmp_path / "out"
    checkout(LocalReader(reg).revision("pets@original"), out, link="copy")
    planned = plan(out, Dataset(LocalReader(reg).revision("pets@corrected")), link="copy")
    dest = list(planned.destinations())
    assert dest[0] == JOURNAL and dest[-1] == PIN
    assert set(dest) >= {"cat/img001.bin", "dog/img002.bin"} | {p for p, _b in planned.place}
    assert planned.journal is not None and not planned.fresh and not planned.recovering
    # Nothing to do: no journal is written.
    again = plan(out, Dataset(LocalReader(reg).revision("pets@original")), link="copy")
    assert again.journal is None and list(again.destinations()) == [PIN]
