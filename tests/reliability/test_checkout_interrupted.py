"""An interrupted checkout is finished by the next one (the guarantee "A checkout
folder holds exactly one revision's view" in docs/concepts.md).

A failure is injected at the n-th file operation of a checkout (hypothesis over n, the
revisions, the link types, and whether the disk stays full from then on or one operation
fails): a link, a rename, a copy's write, a folder's creation, a removal. The next checkout of
any revision must leave exactly that revision's view, its pin, no journal and no temporary
file; a failed checkout into a new folder leaves no folder behind. The kill -9 variant is in
``test_checkout_kill.py``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
import dsreg.ops.checkout.fs as checkout_fs
from dsreg._util.fs import write_all
from dsreg.errors import DsregError, InputPathError, StorageError
from dsreg.ops.checkout.apply import JOURNAL, PIN, checkout
from dsreg.overlays.write import corrections_table, write_overlay
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader

LINKS = ["reflink", "copy", "hardlink", "symlink"]
REVISIONS = ["ds@a", "ds@b", "ds@c", "ds@a-corrected"]
SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.name != PIN and (p.is_file() or p.is_symlink())
    }


def write_tree(root: Path, seed: int, *, classes: list[str], per_class: int) -> None:
    rng = np.random.default_rng(seed)
    for c in classes:
        (root / c / "sub").mkdir(parents=True)
        for i in range(per_class):
            # Half the files are the same in every tree (same path and bytes): a switch keeps
            # them; the others differ in bytes, or exist in one tree only.
            data = f"{c}/{i}".encode() * 8 if i % 2 else rng.bytes(int(rng.integers(20, 300)))
            (root / c / f"{i}.bin").write_bytes(data)
        (root / c / "sub" / f"{seed}.bin").write_bytes(rng.bytes(40))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """ds@a, ds@b, ds@c (three trees that share some files and differ in others, in bytes,
    names and classes) and ds@a-corrected (files of a moved between classes); each
    revision's view, as a fresh copy checkout gives it."""
    tmp = tmp_path_factory.mktemp("interrupted")
    reg = dsreg.init(registry=tmp / "reg")
    for tag, seed, classes in (
        ("a", 1, ["cat", "dog", "fox"]),
        ("b", 2, ["cat", "dog", "owl"]),
        ("c", 3, ["ant", "cat", "dog", "fox"]),
    ):
        write_tree(tmp / tag, seed, classes=classes, per_class=8)
        res = dsreg.add("ds", tmp / tag, tag=tag, registry=reg)
        if tag == "a":
            ds = dsreg.open("ds@a", registry=reg)
            ids = [ds[i].example_id for i in range(len(ds))]
            moved = ["cat/0.bin", "cat/1.bin", "dog/2.bin", "fox/sub/1.bin"]
            rows = sorted(ids.index(m) for m in moved)
            table = corrections_table(
                rows=np.array(rows),
                example_ids=[ids[r] for r in rows],
                given_label=np.array([ds[r].label for r in rows]),
                suggested_label=np.array([(ds[r].label + 1) % 3 for r in rows]),
                verdict=["suspected"] * len(rows),
                score=np.full(len(rows), 0.01),
            )
            producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
            ov = write_overlay(
                reg, base=res.snapshot, kind="detected", table=table, producer=producer
            )
            dsreg.tag("ds@a-corrected", "ds@a", overlays=[ov], view="corrected", registry=reg)
    views = {}
    for spec in REVISIONS:
        out = tmp / f"view-{spec}"
        checkout(LocalReader(reg).revision(spec), out, link="copy")
        views[spec] = files_of(out)
    assert len({tuple(sorted(v.items())) for v in views.values()}) == len(REVISIONS)
    yield {"tmp": tmp, "reg": reg, "views": views}


class Failures:
    """Make the n-th file operation fail (``once``), or that one and every later one that
    needs space (``full``: a disk that stays full; removals still work)."""

    def __init__(self, n: int, mode: str) -> None:
        self.n, self.mode = n, mode
        self.calls = 0
        self.fired = False
        self._lock = threading.Lock()

    def wrap(self, fn: Callable[..., Any], *, frees: bool = False) -> Callable[..., Any]:
        def op(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls += 1
                fail = (
                    self.calls == self.n
                    if self.mode == "once"
                    else self.calls >= self.n and not frees
                )
                self.fired |= fail
            if fail:
                err = errno.EIO if frees else errno.ENOSPC
                raise OSError(err, os.strerror(err))
            return fn(*args, **kwargs)

        return op

    def install(self, mp: pytest.MonkeyPatch) -> None:
        for name in ("link", "symlink", "replace", "rename", "sendfile", "mkdir"):
            mp.setattr(os, name, self.wrap(getattr(os, name)))
        for name in ("unlink", "rmdir"):
            mp.setattr(os, name, self.wrap(getattr(os, name), frees=True))
        mp.setattr(checkout_fs, "write_all", self.wrap(write_all))


def interrupted(fn: Callable[[], object], n: int, mode: str) -> tuple[bool, BaseException | None]:
    """Run ``fn`` with the n-th file operation failing; (fired, the error it raised)."""
    failures = Failures(n, mode)
    mp = pytest.MonkeyPatch()
    failures.install(mp)
    try:
        fn()
    except (DsregError, OSError) as e:
        return failures.fired, e
    finally:
        mp.undo()
    return failures.fired, None


def assert_holds(reg: Registry, target: Path, spec: str, link: str, views: dict[str, Any]) -> None:
    """``target`` holds exactly ``spec``'s view, linked as ``link`` says, pinned, and nothing of
    an interrupted checkout (journal, temporary files) is left."""
    assert files_of(target) == views[spec]
    pin = json.loads((target / PIN).read_text())
    assert (pin["revision"], pin["link"]) == (LocalReader(reg).revision(spec).digest, link)
    assert not (target / JOURNAL).exists()
    assert not [p for p in target.rglob(".dsreg-*")]
    for p in target.rglob("*"):
        if p.name == PIN or (p.is_dir() and not p.is_symlink()):
            continue
        st = p.lstat()
        if link == "symlink":
            assert p.is_symlink(), p
        elif link == "hardlink":
            assert st.st_nlink >= 2, p
        else:
            # The user's own copy: never a link to the store (an edit would corrupt it).
            assert p.is_file() and not p.is_symlink() and st.st_nlink == 1, p


@SETTINGS
@given(
    first=st.sampled_from(REVISIONS),
    second=st.sampled_from(REVISIONS),
    then=st.sampled_from(REVISIONS),
    links=st.tuples(*[st.sampled_from(LINKS)] * 3),
    n=st.integers(1, 140),
    mode=st.sampled_from(["once", "full"]),
)
def test_a_switch_failing_at_any_operation_is_finished_by_the_next_checkout(
    world: dict[str, Any],
    first: str,
    second: str,
    then: str,
    links: tuple[str, str, str],
    n: int,
    mode: str,
) -> None:
    reg: Registry = world["reg"]
    target = Path(world["tmp"]) / "switch"
    shutil.rmtree(target, ignore_errors=True)
    checkout(LocalReader(reg).revision(first), target, link=links[0])  # type: ignore[arg-type]
    fired, error = interrupted(
        lambda: checkout(LocalReader(reg).revision(second), target, link=links[1]),  # type: ignore[arg-type]
        n,
        mode,
    )
    if error is None:
        assert_holds(reg, target, second, links[1], world["views"])
    else:
        assert fired and isinstance(error, DsregError), error
        if (target / JOURNAL).exists():
            assert "run 'dsreg checkout' into it again" in str(error) or isinstance(
                error, InputPathError
            )
    checkout(LocalReader(reg).revision(then), target, link=links[2])  # type: ignore[arg-type]
    assert_holds(reg, target, then, links[2], world["views"])


@SETTINGS
@given(
    spec=st.sampled_from(REVISIONS),
    link=st.sampled_from(LINKS),
    n=st.integers(1, 80),
    mode=st.sampled_from(["once", "full"]),
)
def test_a_failed_checkout_into_a_new_folder_leaves_nothing_and_reruns(
    world: dict[str, Any], spec: str, link: str, n: int, mode: str
) -> None:
    reg: Registry = world["reg"]
    target = Path(world["tmp"]) / "fresh" / "target"
    shutil.rmtree(target.parent, ignore_errors=True)
    fired, error = interrupted(
        lambda: checkout(LocalReader(reg).revision(spec), target, link=link),  # type: ignore[arg-type]
        n,
        mode,
    )
    if error is None:
        assert_holds(reg, target, spec, link, world["views"])
    else:
        assert fired and isinstance(error, DsregError), error
        if mode == "full":
            # Removals work on a full disk: what the checkout placed, and the folder it made,
            # are gone.
            assert not target.exists(), sorted(p.name for p in target.iterdir())
    checkout(LocalReader(reg).revision(spec), target, link=link)  # type: ignore[arg-type]
    assert_holds(reg, target, spec, link, world["views"])


def test_a_damaged_journal_is_refused_and_names_the_way_out(
    world: dict[str, Any], tmp_path: Path
) -> None:
    reg: Registry = world["reg"]
    target = tmp_path / "target"
    checkout(LocalReader(reg).revision("ds@a"), target, link="copy")
    (target / JOURNAL).write_text('{"schema": "dsreg/journal/1", "to": "../x"}')
    before = files_of(target)
    with pytest.raises(InputPathError, match="check out into a new folder"):
        checkout(LocalReader(reg).revision("ds@b"), target, link="copy")
    assert files_of(target) == before


def test_a_failed_switch_says_what_the_folder_holds(world: dict[str, Any], tmp_path: Path) -> None:
    """The deterministic case of the report: the disk fills mid-switch."""
    reg: Registry = world["reg"]
    target = tmp_path / "target"
    checkout(LocalReader(reg).revision("ds@a"), target, link="copy")
    fired, error = interrupted(
        lambda: checkout(LocalReader(reg).revision("ds@b"), target, link="copy"), 12, "full"
    )
    assert fired and isinstance(error, StorageError)
    assert "No space left on device" in str(error) and JOURNAL in str(error)
    assert (target / JOURNAL).exists()
    checkout(LocalReader(reg).revision("ds@c"), target, link="copy")
    assert_holds(reg, target, "ds@c", "copy", world["views"])


@pytest.mark.parametrize("switch", [False, True])
def test_what_a_killed_atomic_write_left_is_removed_by_the_next_checkout(
    world: dict[str, Any], tmp_path: Path, switch: bool
) -> None:
    """A checkout killed while it wrote its journal, pin or ``labels.csv`` (``write_atomic``:
    a temporary ``.NAME.xxxxxxxx`` beside the file) leaves that temporary file. The next
    checkout removes them: in a folder holding a checkout (a switch killed while it wrote its
    journal or pin), and in a new folder that holds nothing else (a first checkout killed while
    it wrote its journal), which is not refused as a folder of the user's. A user's file of
    another name stays. (``test_checkout_kill.py`` kills at random moments; this is the
    deterministic case.)"""
    reg: Registry = world["reg"]
    target = tmp_path / "target"
    target.mkdir()
    left = ["..dsreg.journal.k2x_9a0b"]
    if switch:
        checkout(LocalReader(reg).revision("ds@a"), target, link="copy")
        left = ["..dsreg.json.gg77ux7r", ".labels.csv.abcdefgh", *left]
    for name in left:
        (target / name).write_bytes(b'{"schema": "dsreg/pin/1"')  # cut short by the kill
    checkout(LocalReader(reg).revision("ds@b"), target, link="copy")
    assert_holds(reg, target, "ds@b", "copy", world["views"])
    assert not [n for n in os.listdir(target) if n in left]
    (target / ".dsreg.json.bak").write_bytes(b"mine")
    checkout(LocalReader(reg).revision("ds@a"), target, link="copy")
    assert (target / ".dsreg.json.bak").read_bytes() == b"mine"
