"""``dsreg.open``: every way to name a revision, and what a pinned revision serves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import dsreg
from dsreg import (
    AddResult,
    AmbiguousDigestError,
    InvalidInputError,
    ObjectNotFoundError,
    Registry,
    RegistryNotFoundError,
    Revision,
    RevisionNotFoundError,
    Snapshot,
)
from dsreg.formats.canonical import canonical_bytes
from dsreg.objects.digest import MIN_PREFIX, short
from dsreg.objects.hashing import hash_bytes
from dsreg.registry.reader import LocalReader


@pytest.fixture
def added(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> tuple[Registry, Path, AddResult]:
    reg = make_registry()
    tree = make_imagefolder(classes=["cat", "dog"], per_class=3)
    return reg, tree, add_tree(reg, "pets", tree)


def test_every_spec_form_opens_the_same_revision(added: tuple[Registry, Path, AddResult]) -> None:
    reg, _, res = added
    hexd = res.revision.removeprefix("blake3:")
    for spec in (
        "pets@original",
        f"pets@{hexd[:12]}",
        f"pets@{hexd[:MIN_PREFIX]}",
        f"pets@{hexd}",
        f"pets@{res.revision}",
        res.revision,
    ):
        ds = dsreg.open(spec, registry=reg)
        assert ds.digest == res.revision, spec
    # A snapshot digest stands for its original revision.
    assert dsreg.open(res.snapshot, registry=reg).digest == res.revision
    assert dsreg.open(f"pets@{short(res.snapshot)}", registry=reg).digest == res.revision
    # The registry can be given as a path.
    assert dsreg.open("pets@original", registry=reg.root).digest == res.revision


def test_open_finds_the_registry_upward_then_in_dsreg_home(
    added: tuple[Registry, Path, AddResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg, _, res = added
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("DSREG_HOME", raising=False)
    with pytest.raises(RegistryNotFoundError, match="dsreg init"):
        dsreg.open("pets@original")
    monkeypatch.setenv("DSREG_HOME", str(reg.root))
    assert dsreg.open("pets@original").digest == res.revision
    # A .dsreg above the working directory wins over $DSREG_HOME.
    local = dsreg.init(registry=tmp_path / "proj" / ".dsreg")
    (tmp_path / "proj" / "src").mkdir()
    monkeypatch.chdir(tmp_path / "proj" / "src")
    with pytest.raises(RevisionNotFoundError, match="no dataset 'pets'"):
        dsreg.open("pets@original")
    assert dsreg.find_registry().root == local.root


def test_a_revision_serves_rows_labels_and_verified_bytes(
    added: tuple[Registry, Path, AddResult],
) -> None:
    reg, tree, res = added
    ds = dsreg.open("pets@original", registry=reg)
    assert len(ds) == 6
    t = ds.labels()
    assert isinstance(t, pa.Table)
    assert t.column_names[:8] == [
        "row",
        "example_id",
        "label",
        "label_name",
        "given_label",
        "verdict",
        "blob",
        "size",
    ]
    assert t.column("row").to_pylist() == list(range(6))
    assert t.column("label_name").to_pylist() == ["cat"] * 3 + ["dog"] * 3
    last = ds[-1]
    assert last.example_id == "dog/img002.bin" and last.row == 5
    assert (last.label, last.label_name, last.given_label, last.verdict) == (1, "dog", 1, None)
    assert last.path is not None and last.path.read_bytes() == last.read_bytes()
    assert last.read_bytes() == (tree / "dog" / "img002.bin").read_bytes()
    assert [e.example_id for e in ds] == t.column("example_id").to_pylist()
    with pytest.raises(IndexError):
        ds[6]
    assert short(res.revision) in repr(ds)


def test_label_only_examples_have_no_bytes(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    import numpy as np

    reg = make_registry()
    np.save(tmp_path / "y.npy", np.array([1, 0]))
    dsreg.add("y", labels=tmp_path / "y.npy", tag="original", registry=reg)
    ex = dsreg.open("y@original", registry=reg)[0]
    assert ex.path is None
    with pytest.raises(InvalidInputError, match="label-only"):
        ex.read_bytes()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope@original", "no dataset 'nope'"),
        ("pets@v9", "no tag or revision 'v9' in dataset 'pets'; its tags are original"),
        ("pets@abcdef0", "no tag or revision 'abcdef0'"),
        ("blake3:" + "0" * 64, "0000000000"),
    ],
)
def test_unknown_revisions_are_named(
    added: tuple[Registry, Path, AddResult], spec: str, message: str
) -> None:
    reg, _, _ = added
    with pytest.raises((RevisionNotFoundError, ObjectNotFoundError)) as e:
        dsreg.open(spec, registry=reg)
    assert message in str(e.value)


def test_a_prefix_of_another_datasets_revision_is_not_found(
    added: tuple[Registry, Path, AddResult],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> None:
    reg, _, res = added
    add_tree(reg, "other", make_imagefolder("o", seed=5))
    with pytest.raises(RevisionNotFoundError):
        dsreg.open(f"other@{short(res.revision)}", registry=reg)


def test_an_ambiguous_revision_prefix_lists_the_candidates_and_writes_nothing(
    make_registry: Callable[..., Registry],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
    colliding: Callable[[int, Callable[[int], str]], tuple[int, int]],
) -> None:
    """Two real revisions of one dataset whose digests share 6 hex characters: found by brute
    force over snapshots that differ in their examples digest (~5k tries, birthday bound)."""
    reg = make_registry()

    def snapshot(i: int) -> Snapshot:
        return Snapshot(
            dataset="amb",
            examples=hash_bytes(str(i).encode()),
            rows=1,
            classes=("a",),
            source={"kind": "labels"},
        )

    def rev_digest(i: int) -> str:
        snap = hash_bytes(canonical_bytes(snapshot(i).to_dict()))
        return hash_bytes(canonical_bytes(Revision(snapshot=snap).to_dict()))

    i, j = colliding(MIN_PREFIX, rev_digest)
    revs = []
    for k in (i, j):
        snap_digest = reg.put_manifest(snapshot(k))
        revs.append(reg.put_manifest(Revision(snapshot=snap_digest)))
    assert revs == [rev_digest(i), rev_digest(j)]
    prefix = revs[0][7 : 7 + MIN_PREFIX]

    before = registry_state(reg.root)
    with pytest.raises(AmbiguousDigestError) as e:
        LocalReader(reg).revision(f"amb@{prefix}")
    assert prefix in str(e.value)
    assert short(revs[0]) in str(e.value) and short(revs[1]) in str(e.value)
    assert registry_state(reg.root) == before
    # One more character (or however many the two share) picks one.
    common = next(n for n in range(MIN_PREFIX, 64) if revs[0][7 + n] != revs[1][7 + n])
    for r in revs:
        assert LocalReader(reg).revision(f"amb@{r[7 : 7 + common + 1]}").digest == r


def test_an_ambiguous_object_prefix_in_the_store(
    make_registry: Callable[..., Registry],
    colliding: Callable[[int, Callable[[int], str]], tuple[int, int]],
) -> None:
    reg = make_registry()
    i, j = colliding(MIN_PREFIX, lambda k: hash_bytes(str(k).encode()))
    a, b = reg.store.put_bytes(str(i).encode()), reg.store.put_bytes(str(j).encode())
    prefix = a[7 : 7 + MIN_PREFIX]
    assert b.startswith("blake3:" + prefix)
    with pytest.raises(AmbiguousDigestError) as e:
        reg.resolve_object(prefix)
    assert short(a) in str(e.value) and short(b) in str(e.value)
    assert reg.resolve_object(a) == a
    # Shorter than 6 hex characters is never a prefix.
    with pytest.raises(ObjectNotFoundError):
        reg.resolve_object(prefix[:5])
