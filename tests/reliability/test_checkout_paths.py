"""A checkout writes and removes only below its folder (the
guarantee "A checkout stays inside its folder" in docs/concepts.md).

Every destination a plan holds is checked (the target revision's files, the files of the
revision the pin names, those of an interrupted checkout's journal), even when a table slipped
past the check on read; and no link inside the folder is ever followed, whether it was there
when the plan was made or swapped in while the checkout ran. Each case snapshots everything
outside the target (the "victim" files beside it) and asserts it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
import dsreg.ops.checkout.apply as checkout_mod
import dsreg.registry.tables as tables_mod
from dsreg.errors import DsregError, InputPathError
from dsreg.formats.manifests import Revision, Snapshot
from dsreg.formats.tables import base_schema, parquet_bytes
from dsreg.ops.checkout.apply import JOURNAL, PIN, checkout
from dsreg.ops.checkout.journal import Journal
from dsreg.overlays.write import corrections_table, write_overlay
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader

LINKS = ["reflink", "copy", "hardlink", "symlink"]
SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def tree_state(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry below ``root`` (links not followed) with its kind and content."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.name != PIN and (p.is_file() or p.is_symlink())
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A registry with pets@original, pets@corrected (two files move class) and a planted
    hostile revision 'evil@x' whose files layout table names ids that leave the folder."""
    tmp = tmp_path_factory.mktemp("paths")
    reg = dsreg.init(registry=tmp / "reg")
    tree = tmp / "tree"
    rng = np.random.default_rng(0)
    for c in ("cat", "dog", "fox"):
        (tree / c / "deep").mkdir(parents=True)
        for i in range(4):
            (tree / c / f"img{i}.bin").write_bytes(rng.bytes(64))
        (tree / c / "deep" / "x.bin").write_bytes(rng.bytes(64))
    res = dsreg.add("pets", tree, tag="original", registry=reg)
    ds = dsreg.open("pets@original", registry=reg)
    ids = [ds[i].example_id for i in range(len(ds))]
    table = corrections_table(
        rows=np.array([ids.index("cat/img1.bin"), ids.index("dog/img0.bin")]),
        example_ids=["cat/img1.bin", "dog/img0.bin"],
        given_label=np.array([0, 1]),
        suggested_label=np.array([2, 0]),
        verdict=["suspected", "suspected"],
        score=np.array([0.01, 0.02]),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)
    dsreg.tag("pets@corrected", "pets@original", overlays=[ov], view="corrected", registry=reg)
    yield {"tmp": tmp, "reg": reg, "tree": tree}


def plant(reg: Registry, ids: list[str], tag: str) -> str:
    """A files-layout snapshot of dataset 'evil' with ``ids`` (stored under its own digest, as
    another program could push it), tagged evil@<tag>; its revision digest."""
    blob = reg.store.put_bytes(b"hostile payload")
    table = pa.Table.from_arrays(
        [
            pa.array(ids, pa.string()),
            pa.array([0] * len(ids), pa.int32()),
            pa.array([blob] * len(ids), pa.string()),
            pa.array([15] * len(ids), pa.int64()),
        ],
        schema=base_schema(),
    )
    examples = reg.store.put_bytes(parquet_bytes(table))
    snap = Snapshot(
        dataset="evil",
        examples=examples,
        rows=len(ids),
        classes=("a",),
        source={"kind": "table", "files": True},
    )
    rev = reg.put_manifest(Revision(snapshot=reg.put_manifest(snap)))
    reg.refs.set("evil", tag, rev, force=True, command="test")
    return rev


def escapes(victim: Path) -> list[str]:
    """Ids naming ``victim/keep.txt`` from a target at ``victim/co/target``, every way."""
    return [
        "../../keep.txt",
        "a/../../../keep.txt",
        str(victim / "keep.txt"),  # absolute
        "./../../keep.txt",
        "a//../../../keep.txt",
        "a\\..\\..\\keep.txt",
        "../../keep.txt\x00",
    ]


@SETTINGS
@given(
    where=st.sampled_from(["target", "pin", "journal"]),
    which=st.integers(0, 6),
    link=st.sampled_from(LINKS),
    bypass=st.booleans(),
)
def test_no_destination_outside_the_folder_is_written_or_removed(
    world: dict[str, Any], where: str, which: int, link: str, bypass: bool
) -> None:
    """A hostile revision as the target, or named by the folder's pin or journal (the stale
    set of a switch), writes and removes nothing outside the folder, even with the table check
    on read turned off (``bypass``: the plan's own check must hold)."""
    reg: Registry = world["reg"]
    victim = world["tmp"] / f"victim-{where}-{which}-{link}-{bypass}"
    shutil.rmtree(victim, ignore_errors=True)
    target = victim / "co" / "target"
    target.parent.mkdir(parents=True)
    (victim / "keep.txt").write_text("the victim's own file")
    bad = escapes(victim)[which]
    evil = plant(reg, ["a/0.bin", bad], f"x{which}")
    mp = pytest.MonkeyPatch()
    try:
        if bypass:
            mp.setattr(tables_mod, "check_examples_against", lambda table, snap: None)
        if where == "target":
            before = tree_state(victim)
            with pytest.raises(DsregError):
                checkout(LocalReader(reg).revision(evil), target, link=link)  # type: ignore[arg-type]
        else:
            checkout(LocalReader(reg).revision("pets@original"), target, link=link)  # type: ignore[arg-type]
            pin = json.loads((target / PIN).read_text())
            if where == "pin":
                # As if an older dsreg had checked the hostile revision out here.
                pin["revision"] = evil
                (target / PIN).write_text(json.dumps(pin))
            else:
                journal = Journal(
                    from_revision=pin["revision"], from_link=link, to_revision=evil, link=link
                )
                (target / JOURNAL).write_bytes(journal.to_bytes())
            before = tree_state(victim)
            with pytest.raises(DsregError):
                checkout(LocalReader(reg).revision("pets@corrected"), target, link=link)  # type: ignore[arg-type]
    finally:
        mp.undo()
    assert tree_state(victim) == before
    assert (victim / "keep.txt").read_text() == "the victim's own file"


def _swap_for_link(folder: Path, outside: Path) -> None:
    """Replace ``folder`` by a symbolic link to ``outside``, which holds the same files (so a
    switch that followed the link would find, replace and remove them there)."""
    shutil.copytree(folder, outside, symlinks=True, copy_function=shutil.copyfile)
    (outside / "precious.txt").write_text("not dsreg's")
    shutil.rmtree(folder)
    folder.symlink_to(outside, target_is_directory=True)


@SETTINGS
@given(
    folder=st.sampled_from(["cat", "dog", "fox", "cat/deep", "fox/deep"]),
    first=st.sampled_from(LINKS),
    second=st.sampled_from(LINKS),
    to=st.sampled_from(["pets@corrected", "pets@original"]),
    when=st.sampled_from(["before the plan", "after the plan"]),
)
def test_a_folder_replaced_by_a_link_is_never_followed(
    world: dict[str, Any], folder: str, first: str, second: str, to: str, when: str
) -> None:
    """A folder inside the checkout replaced by a symbolic link to elsewhere, before the next
    checkout plans or while it runs: the checkout refuses, and nothing outside is touched."""
    reg: Registry = world["reg"]
    base = world["tmp"] / f"link-{folder.replace('/', '_')}-{first}-{second}-{to[5:]}-{when[0]}"
    shutil.rmtree(base, ignore_errors=True)
    target, outside = base / "target", base / "elsewhere"
    checkout(LocalReader(reg).revision("pets@original"), target, link=first)  # type: ignore[arg-type]
    mp = pytest.MonkeyPatch()
    before: dict[str, tuple[str, str]] = {}
    if when == "before the plan":
        _swap_for_link(target / folder, outside)
        before = tree_state(outside)
    else:
        real_plan = checkout_mod.plan

        def plan_then_swap(*args: Any, **kwargs: Any) -> Any:
            planned = real_plan(*args, **kwargs)
            _swap_for_link(target / folder, outside)
            before.update(tree_state(outside))
            return planned

        mp.setattr(checkout_mod, "plan", plan_then_swap)
    try:
        checkout(LocalReader(reg).revision(to), target, link=second)  # type: ignore[arg-type]
    except InputPathError as e:
        assert "never follows a link" in str(e)
    else:
        # Swapped after the plan, in a folder this checkout does not touch: nothing to refuse.
        assert when == "after the plan"
    finally:
        mp.undo()
    assert (target / folder).is_symlink()
    assert before and tree_state(outside) == before
    assert (outside / "precious.txt").read_text() == "not dsreg's"


@pytest.mark.parametrize("link", LINKS)
def test_a_file_replaced_by_a_link_is_replaced_or_removed_not_written_through(
    world: dict[str, Any], tmp_path: Path, link: str
) -> None:
    """A checked-out file the user replaced by a link to a file elsewhere: a switch removes or
    replaces the link itself; the file it pointed at is never written or removed."""
    reg: Registry = world["reg"]
    target = tmp_path / "target"
    checkout(LocalReader(reg).revision("pets@original"), target, link=link)  # type: ignore[arg-type]
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    # cat/img1.bin moves away in the corrected view; dog/img1.bin is re-placed on a relink.
    for rel in ("cat/img1.bin", "dog/img1.bin"):
        (target / rel).unlink()
        (target / rel).symlink_to(secret)
    other = "copy" if link != "copy" else "hardlink"
    checkout(LocalReader(reg).revision("pets@corrected"), target, link=other)  # type: ignore[arg-type]
    assert secret.read_text() == "secret"
    assert not (target / "cat" / "img1.bin").is_symlink()
    assert not (target / "dog" / "img1.bin").is_symlink()
    assert (target / "dog" / "img1.bin").read_bytes() == (
        world["tree"] / "dog" / "img1.bin"
    ).read_bytes()


def _long_tree(root: Path, name: str) -> Path:
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        (root / c / name).write_bytes(f"{c} long".encode())
        (root / c / "short.bin").write_bytes(f"{c} short".encode())
    return root


@pytest.mark.parametrize("length", [250, 255])
def test_names_up_to_name_max_check_out_and_switch(
    make_registry: Callable[..., Registry], tmp_path: Path, length: int
) -> None:
    """A file name of 250 or 255 bytes (NAME_MAX) is added, checked out with every link type,
    switched (its file moves to a class holding the same name: the moved name is cut to
    NAME_MAX) and relinked; temporary names never add to a name's length."""
    name = "é" * ((length - 4) // 2) + "x" * ((length - 4) % 2) + ".bin"
    assert len(name.encode()) == length
    reg = make_registry()
    tree = _long_tree(tmp_path / "tree", name)
    res = dsreg.add("long", tree, tag="original", registry=reg)
    ds = dsreg.open("long@original", registry=reg)
    row = [ds[i].example_id for i in range(len(ds))].index(f"cat/{name}")
    table = corrections_table(
        rows=np.array([row]),
        example_ids=[f"cat/{name}"],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
        score=np.array([0.01]),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)
    dsreg.tag("long@corrected", "long@original", overlays=[ov], view="corrected", registry=reg)
    want = files_of(tree)
    for link in LINKS:
        out = tmp_path / f"out-{link}"
        checkout(LocalReader(reg).revision("long@original"), out, link=link)  # type: ignore[arg-type]
        assert files_of(out) == want
        checkout(LocalReader(reg).revision("long@corrected"), out, link=link)  # type: ignore[arg-type]
        got = files_of(out)
        moved = [p for p in got if p.startswith("dog/") and p not in want]
        assert len(moved) == 1 and len(moved[0].split("/")[1].encode()) <= 255
        assert got[moved[0]] == b"cat long" and f"cat/{name}" not in got
        other = LINKS[(LINKS.index(link) + 1) % len(LINKS)]
        checkout(LocalReader(reg).revision("long@original"), out, link=other)  # type: ignore[arg-type]
        assert files_of(out) == want
        assert not [p for p in out.rglob(".dsreg-*")]
