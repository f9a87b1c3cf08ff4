"""Edits in a checkout never corrupt the store by default, and a corrupt object is repaired by
adding its data again (the guarantees "Editing a checkout never changes the
store" and "A corrupt object is replaced, not trusted" in docs/concepts.md).

The tests run as whoever runs the suite; as root (common in ML containers) a read-only hard
link is no protection, and the tests that need an edit through one make the file writable
first (``chmod u+w``), as a user would.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.errors import CorruptObjectError
from dsreg.ops.checkout.apply import PIN
from dsreg.registry.folder import Registry

SETTINGS = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.name != PIN and (p.is_file() or p.is_symlink())
    }


def make_tree(root: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(5):
            (root / c / f"{i}.bin").write_bytes(rng.bytes(int(rng.integers(100, 400))))
    return root


def edit(path: Path, how: str) -> None:
    """Change a checked-out file in place, as a user's tool would (writable first)."""
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    with open(path, "r+b") as f:
        if how == "overwrite":  # same size
            f.seek(10)
            f.write(b"EDITED")
        elif how == "truncate":
            f.truncate(50)
        else:  # append
            f.seek(0, os.SEEK_END)
            f.write(b"more bytes")


@pytest.mark.parametrize("how", ["overwrite", "truncate", "append"])
def test_the_default_checkout_is_the_users_to_edit(
    make_registry: Callable[..., Registry], tmp_path: Path, how: str
) -> None:
    reg = make_registry()
    assert 'checkout_link = "reflink"' in (reg.root / "config.toml").read_text()
    tree = make_tree(tmp_path / "tree")
    dsreg.add("pets", tree, tag="original", registry=reg)
    res = dsreg.checkout("pets@original", tmp_path / "out", registry=reg)
    assert res.link == "reflink"
    for p in (tmp_path / "out").rglob("*.bin"):
        st = p.stat()
        assert st.st_nlink == 1 and st.st_mode & stat.S_IWUSR and not p.is_symlink()
        edit(p, how)  # plainly writable: no chmod needed, and as root too
    assert dsreg.verify(registry=reg).ok
    again = tmp_path / "again"
    dsreg.checkout("pets@original", again, registry=reg)
    assert files_of(again) == files_of(tree)


@SETTINGS
@given(
    how=st.sampled_from(["overwrite", "truncate", "append"]),
    found_by=st.sampled_from(["verify", "checkout", "open", "nothing"]),
    readd=st.sampled_from(["same tag", "new tag", "no tag"]),
)
def test_an_edit_through_a_hard_link_is_found_and_repaired_by_adding_again(
    tmp_path_factory: pytest.TempPathFactory, how: str, found_by: str, readd: str
) -> None:
    """The opt-in risk: an edit through a hard-linked checkout corrupts the object. verify
    names it, nothing serves it, and adding the original data again replaces it, whether the
    corruption was found by a read before (verify, checkout, open) or shows in the size."""
    if found_by == "nothing" and how == "overwrite":
        return  # the documented limit: same size and never read; verify finds it (above)
    tmp = tmp_path_factory.mktemp("hl")
    reg = dsreg.init(registry=tmp / "reg")
    tree = make_tree(tmp / "tree")
    dsreg.add("pets", tree, tag="original", registry=reg)
    out = tmp / "out"
    dsreg.checkout("pets@original", out, link="hardlink", registry=reg)
    victim = out / "dog" / "3.bin"
    blob = dsreg.open("pets@original", registry=reg)[8].blob
    assert blob is not None and reg.store.path(blob).stat().st_ino == victim.stat().st_ino
    edit(victim, how)
    res = dsreg.verify(registry=reg)
    assert [p.digest for p in res.problems] == [blob] and "corrupt" in res.problems[0].problem
    # Forget that verify found it: each way of finding it must tell add on its own.
    for marker in (reg.store.tmp / "corrupt").glob("*"):
        marker.unlink()
    if found_by == "verify":
        assert not dsreg.verify(registry=reg).ok
    elif found_by == "checkout":
        with pytest.raises(CorruptObjectError):
            dsreg.checkout("pets@original", tmp / "other", link="copy", registry=reg)
    elif found_by == "open":
        with pytest.raises(CorruptObjectError):
            dsreg.open("pets@original", registry=reg)[8].read_bytes()
    tag = {"same tag": "original", "new tag": "again", "no tag": None}[readd]
    dsreg.add("pets", tree, tag=tag, registry=reg)
    assert dsreg.verify(registry=reg).ok
    assert reg.store.read_bytes(blob) == (tree / "dog" / "3.bin").read_bytes()
    assert not reg.store.marked_corrupt()
    fresh = tmp / "fresh"
    dsreg.checkout("pets@original", fresh, link="hardlink", registry=reg)
    assert files_of(fresh) == files_of(tree)


def test_a_remembered_tree_is_looked_at_again_while_an_object_is_corrupt(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    """A re-add of an unchanged tree is answered from its remembered scan, without reading a
    file; while an object found corrupt waits for repair it is not, so the add repairs it."""
    reg = make_registry()
    tree = make_tree(tmp_path / "tree")
    time.sleep(2.2)  # older than the racy window: the scan and the stat cache remember it
    dsreg.add("pets", tree, tag="original", registry=reg)
    out = tmp_path / "out"
    dsreg.checkout("pets@original", out, link="hardlink", registry=reg)
    blob = dsreg.open("pets@original", registry=reg)[0].blob
    assert blob is not None
    edit(out / "cat" / "0.bin", "overwrite")
    assert not dsreg.verify(registry=reg).ok
    assert dsreg.add("pets", tree, tag="original", registry=reg).new_objects == 1
    assert dsreg.verify(registry=reg).ok
    assert reg.store.read_bytes(blob) == (tree / "cat" / "0.bin").read_bytes()


def test_replace_corrupt_checks_the_new_bytes_and_leaves_intact_objects(
    make_registry: Callable[..., Registry], tmp_path: Path, flip_byte: Callable[..., None]
) -> None:
    """``ObjectStore.replace_corrupt``, the repair a pull calls: new bytes must hash to the
    digest; an intact object is left alone; a corrupt or missing one is replaced whole."""
    reg = make_registry()
    good = b"the right bytes " * 10
    digest = reg.store.put_bytes(good)
    assert reg.store.replace_corrupt(digest, good) is False
    inode = reg.store.path(digest).stat().st_ino
    flip_byte(reg, digest)
    with pytest.raises(CorruptObjectError):
        reg.store.replace_corrupt(digest, b"other bytes")
    assert reg.store.check(digest) is not None and reg.store.marked_corrupt() == {digest}
    src = tmp_path / "src.bin"
    src.write_bytes(good)
    assert reg.store.replace_corrupt(digest, src) is True
    assert reg.store.read_bytes(digest) == good and not reg.store.marked_corrupt()
    assert reg.store.path(digest).stat().st_ino != inode
    assert not reg.store.path(digest).stat().st_mode & stat.S_IWUSR
    os.unlink(reg.store.path(digest))
    assert reg.store.replace_corrupt(digest, good) is True and reg.store.check(digest) is None
