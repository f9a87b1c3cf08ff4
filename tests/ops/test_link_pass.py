"""A hard- or symbolic-link checkout's pass into an empty folder (``links.LinkPass``): what it
places and what it reports of the objects, beside the general way each file can take.

The guarantees themselves (corrupt bytes refused, records that vouch, an interrupted checkout
finished) are held by ``tests/reliability``; here, the pieces the pass adds: a chunk's
sightings kept a column at a time, and the files the loop hands to the general way."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsreg
from dsreg.errors import CorruptObjectError
from dsreg.ops.checkout.objects import Sightings
from dsreg.registry.folder import Registry
from dsreg.registry.trust import StatKey

_STATS = st.tuples(*(st.integers(0, 9) for _ in range(5)))
_SEEN = st.lists(st.tuples(st.sampled_from("abcd"), _STATS, st.none() | _STATS), max_size=8)


@given(_SEEN, st.none() | st.integers(0, 10))
def test_a_chunk_s_sightings_follow_the_rule(
    seen: list[tuple[str, StatKey, StatKey | None]], clock: int | None
) -> None:
    """Each sighting is safe only if the clock was read and its mtime and ctime are older than
    that reading, and differs where its stat is not its record."""
    got = Sightings()
    got.saw_all(
        [b for b, _s, _r in seen], [s for _b, s, _r in seen], clock, [r for _b, _s, r in seen]
    )
    assert list(got) == [
        (b, s, clock is not None and s[2] < clock and s[3] < clock, s != r) for b, s, r in seen
    ]


def _tree(root: Path) -> Path:
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            (root / c / f"{i}.bin").write_bytes(f"{c} {i} ".encode() * (i + 5))
    (root / "dog" / "same.bin").write_bytes((root / "cat" / "0.bin").read_bytes())
    return root


@pytest.fixture
def pets(make_registry: Callable[..., Registry], tmp_path: Path) -> Registry:
    reg = make_registry()
    dsreg.add("pets", _tree(tmp_path / "tree"), tag="v1", registry=reg)
    return reg


@pytest.mark.parametrize("link", ["hardlink", "symlink"])
def test_every_file_is_its_object_in_the_store(pets: Registry, tmp_path: Path, link: str) -> None:
    """Each file is the store's object for its example (a hard link to it, or a symbolic link
    naming it by its absolute path), duplicates included."""
    out = tmp_path / "out"
    assert dsreg.checkout("pets@v1", out, link=link, registry=pets).added == 7
    ds = dsreg.open("pets@v1", registry=pets)
    for i in range(len(ds)):
        ex = ds[i]
        assert ex.blob is not None
        placed, obj = out / ex.example_id, pets.store.path(ex.blob)
        assert placed.read_bytes() == (tmp_path / "tree" / ex.example_id).read_bytes()
        assert os.path.samefile(placed, obj)
        if link == "symlink":
            assert os.readlink(placed) == os.fspath(obj)
        else:
            assert not placed.is_symlink()


def test_without_records_each_object_is_re_hashed_and_damage_refused(
    pets: Registry, tmp_path: Path
) -> None:
    """With the state removed no record vouches for an object: each is re-hashed before it is
    linked (the general way), and one whose bytes were changed is refused, the new folder
    removed again."""
    (pets.root / "state" / "stat.sqlite").unlink()
    assert dsreg.checkout("pets@v1", tmp_path / "ok", link="hardlink", registry=pets).added == 7
    (pets.root / "state" / "stat.sqlite").unlink()
    blob = dsreg.open("pets@v1", registry=pets)[0].blob
    assert blob is not None
    path = pets.store.path(blob)
    before = os.stat(path)
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.write(b"X")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(CorruptObjectError, match="corrupt"):
        dsreg.checkout("pets@v1", tmp_path / "bad", link="hardlink", registry=pets)
    assert not (tmp_path / "bad").exists()
