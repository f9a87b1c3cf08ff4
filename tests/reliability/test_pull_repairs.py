"""A corrupt object is replaced by a pull, not trusted because it exists (docs/concepts.md,
"Guarantees": "A corrupt object is replaced, not trusted")."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

import dsreg


@pytest.mark.parametrize("found_by", ["verify", "checkout"])
def test_pull_replaces_an_object_a_read_found_corrupt(
    tmp_path: Path, make_imagefolder: Callable[..., Path], found_by: str
) -> None:
    reg = tmp_path / "reg"
    dsreg.init(registry=reg)
    tree = make_imagefolder(per_class=2)
    dsreg.add("ds", tree, tag="v1", registry=reg)
    remote = tmp_path / "remote"
    dsreg.push(remote=str(remote), registry=reg)
    out = tmp_path / "out"
    dsreg.checkout("ds@v1", out, link="hardlink", registry=reg)
    victim = sorted(p for p in out.rglob("*.bin"))[0]
    original = (tree / victim.relative_to(out)).read_bytes()
    # An edit through the hard link writes into the store's object.
    os.chmod(victim, stat.S_IRUSR | stat.S_IWUSR)
    victim.write_bytes(b"edited " + original[7:])
    if found_by == "verify":
        assert not dsreg.verify(registry=reg).ok
    else:
        with pytest.raises(dsreg.DsregError):
            dsreg.checkout("ds@v1", tmp_path / "again", link="copy", registry=reg)
    dsreg.pull("ds@v1", remote=str(remote), registry=reg)
    assert dsreg.verify(registry=reg).ok
    fresh = tmp_path / "fresh"
    dsreg.checkout("ds@v1", fresh, link="copy", registry=reg)
    assert (fresh / victim.relative_to(out)).read_bytes() == original
