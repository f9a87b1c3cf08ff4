"""Which objects a checkout re-hashes, and that corrupt bytes are still refused, the first
checkout after an add included (docs/concepts.md, "Guarantees": what a checkout re-hashes).

A hard or symbolic link is made without reading an object whose stat is unchanged since its
bytes were known to hash to its digest (but for a ctime change that a change of its link count
explains: a hard link made or removed); every other way of reading an object's bytes hashes
them. A byte flipped through the file system (with its mtime kept by ``os.utime`` or not)
changes the object's stat, so every command refuses it. Damage below the file system changes
no stat field: it is simulated here by writing the trust record of the damaged object's new
stat (what the state would hold if the disk had flipped the bit), and the tests show what
sees it (``--verify``, ``dsreg verify``, a copy, ``open``, ``sql``, ``push``) and what does
not (a plain hard-link checkout: the documented limit).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
import dsreg.ops.checkout.objects as checkout_objects
from dsreg.errors import CorruptObjectError, DsregError
from dsreg.objects.digest import hex_of
from dsreg.registry.folder import Registry
from dsreg.registry.trust import key_of

LINKS = ("copy", "reflink", "hardlink", "symlink")


def make_tree(root: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(4):
            (root / c / f"{i}.bin").write_bytes(rng.bytes(int(rng.integers(200, 600))))
    return root


def flip(reg: Registry, digest: str, *, keep_mtime: bool) -> None:
    """Flip one bit of an object in place (same inode, same size), through the file system;
    with ``keep_mtime`` its mtime is set back afterwards, as ``touch -r`` would."""
    p = reg.store.path(digest)
    before = os.stat(p)
    os.chmod(p, 0o644)
    with open(p, "r+b") as f:
        f.seek(before.st_size // 2)
        b = f.read(1)
        f.seek(before.st_size // 2)
        f.write(bytes([b[0] ^ 0x01]))
    os.chmod(p, 0o444)
    if keep_mtime:
        os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(p)
    assert after.st_ino == before.st_ino and after.st_size == before.st_size
    assert (after.st_mtime_ns == before.st_mtime_ns) == keep_mtime
    assert after.st_ctime_ns != before.st_ctime_ns  # no call sets a ctime back


def rot(reg: Registry, digest: str) -> None:
    """Damage below the file system, simulated: a bit flipped, then the object's trust record
    set to its new stat, which is what the stat check would see if the disk had flipped it
    (no field changes)."""
    flip(reg, digest, keep_mtime=True)
    reg.state.put_object_stats([(hex_of(digest), key_of(os.stat(reg.store.path(digest))))])


@pytest.fixture
def pets(make_registry: Callable[..., Registry], tmp_path: Path) -> tuple[Registry, str]:
    reg = make_registry()
    dsreg.add("pets", make_tree(tmp_path / "tree"), tag="v1", registry=reg)
    blob = dsreg.open("pets@v1", registry=reg)[0].blob
    assert blob is not None
    return reg, blob


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The objects a checkout re-hashes before linking them (checkouts this small run in
    threads, so the count is seen here)."""
    seen: list[str] = []
    real = checkout_objects.hash_path

    def counting(path: str, **kw: int) -> str:
        seen.append(path)
        return real(path, **kw)

    monkeypatch.setattr(checkout_objects, "hash_path", counting)
    yield seen


def served(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.bin")] if folder.exists() else []


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("keep_mtime", [False, True])
@pytest.mark.parametrize("linked_before", [False, True])
def test_a_flipped_byte_is_refused_by_every_checkout(
    pets: tuple[Registry, str], tmp_path: Path, link: str, keep_mtime: bool, linked_before: bool
) -> None:
    """After the add (or after a hard-link checkout, which changed every object's ctime and
    recorded it), a byte flipped in an object is refused by a checkout of every link type,
    into a new folder and as a switch; nothing of it is served and verify names it."""
    reg, blob = pets
    if linked_before:
        dsreg.checkout("pets@v1", tmp_path / "first", link="hardlink", registry=reg)
    flip(reg, blob, keep_mtime=keep_mtime)
    out = tmp_path / "out"
    with pytest.raises(CorruptObjectError, match="corrupt"):
        dsreg.checkout("pets@v1", out, link=link, registry=reg)
    assert served(out) == []
    assert blob in {p.digest for p in dsreg.verify(registry=reg).problems}


@pytest.mark.parametrize("link", ["hardlink", "symlink"])
def test_a_switch_refuses_a_flipped_byte(
    make_registry: Callable[..., Registry], tmp_path: Path, link: str
) -> None:
    reg = make_registry()
    dsreg.add("pets", make_tree(tmp_path / "a", seed=1), tag="a", registry=reg)
    dsreg.add("pets", make_tree(tmp_path / "b", seed=2), tag="b", registry=reg)
    out = tmp_path / "out"
    dsreg.checkout("pets@a", out, link=link, registry=reg)
    before = {p: p.read_bytes() for p in served(out)}
    blob = dsreg.open("pets@b", registry=reg)[0].blob
    assert blob is not None
    flip(reg, blob, keep_mtime=True)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@b", out, link=link, registry=reg)
    assert {p: p.read_bytes() for p in served(out)} == before  # the folder as it was


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_open_sql_and_push_refuse_a_flipped_byte(
    pets: tuple[Registry, str], tmp_path: Path, keep_mtime: bool
) -> None:
    reg, blob = pets
    dsreg.checkout("pets@v1", tmp_path / "co", link="hardlink", registry=reg)
    flip(reg, blob, keep_mtime=keep_mtime)
    ds = dsreg.open("pets@v1", registry=reg)
    with pytest.raises(CorruptObjectError):
        ds[0].read_bytes()
    dsreg.remote_add("origin", str(tmp_path / "remote"), default=True, registry=reg)
    with pytest.raises(DsregError, match="corrupt"):
        dsreg.push(registry=reg)
    # sql reads the examples table (a Parquet object), hashed once per process: read before,
    # flipped the same way, refused after.
    query = 'SELECT count(*) AS n FROM "pets@v1"'
    assert dsreg.sql(query, registry=reg).column("n").to_pylist() == [8]
    examples = ds.snapshot.examples
    flip(reg, examples, keep_mtime=keep_mtime)
    with pytest.raises(CorruptObjectError):
        dsreg.sql(query, registry=reg)


def test_a_trusted_object_is_linked_without_being_read(
    pets: tuple[Registry, str], tmp_path: Path, hashed: list[str]
) -> None:
    """The add's objects are linked unread; a hard link changes an object's ctime, and the
    checkout records the new stat, so the next one links them unread too; ``verify=True``
    re-hashes every one; a flipped object is the only one re-hashed."""
    reg, blob = pets
    path = reg.store.path(blob)
    ctime = os.stat(path).st_ctime_ns
    dsreg.checkout("pets@v1", tmp_path / "a", link="hardlink", registry=reg)
    assert hashed == []
    assert os.stat(path).st_ctime_ns != ctime  # the link changed it
    dsreg.checkout("pets@v1", tmp_path / "b", link="hardlink", registry=reg)
    dsreg.checkout("pets@v1", tmp_path / "c", link="symlink", registry=reg)
    assert hashed == []
    dsreg.checkout("pets@v1", tmp_path / "d", link="hardlink", verify=True, registry=reg)
    assert len(set(hashed)) == 8
    hashed.clear()
    flip(reg, blob, keep_mtime=True)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "e", link="hardlink", registry=reg)
    assert [os.path.basename(p) for p in hashed] == [path.name]


def test_damage_below_the_file_system(
    pets: tuple[Registry, str], tmp_path: Path, cli: Callable[..., object]
) -> None:
    """What the stat cannot see: a plain hard-link checkout links the object (the documented
    limit); ``--verify``, a copy, ``open``, ``dsreg verify`` refuse or name it; once anything
    found it, it is marked and no checkout trusts it any more."""
    reg, blob = pets
    rot(reg, blob)
    served_anyway = tmp_path / "plain"
    dsreg.checkout("pets@v1", served_anyway, link="hardlink", registry=reg)
    assert len(served(served_anyway)) == 8
    for link in ("hardlink", "symlink"):
        with pytest.raises(CorruptObjectError):
            dsreg.checkout("pets@v1", tmp_path / f"v-{link}", link=link, verify=True, registry=reg)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "copy", link="copy", registry=reg)
    with pytest.raises(CorruptObjectError):
        dsreg.open("pets@v1", registry=reg)[0].read_bytes()
    # The refusals marked it corrupt: a plain hard-link checkout no longer trusts it.
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "after", link="hardlink", registry=reg)
    assert [p.digest for p in dsreg.verify(registry=reg).problems] == [blob]


def test_checkout_verify_on_the_command_line(
    pets: tuple[Registry, str], tmp_path: Path, cli: Callable[..., object]
) -> None:
    reg, blob = pets
    rot(reg, blob)
    res = cli(
        "checkout", "pets@v1", str(tmp_path / "o"), "--link", "hardlink", "--verify",
        "--registry", str(reg.root),
    )  # fmt: skip
    assert res.exit_code == 1  # type: ignore[attr-defined]
    assert "corrupt" in res.stderr  # type: ignore[attr-defined]
    assert served(tmp_path / "o") == []


DAMAGE = ("digest", "stat", "check", "short", "junk", "removed", "garbage file")


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(how=st.sampled_from(DAMAGE), at=st.integers(0, 40), bit=st.integers(0, 7))
def test_a_damaged_trust_record_means_a_re_hash(
    make_registry: Callable[..., Registry],
    tmp_path_factory: pytest.TempPathFactory,
    how: str,
    at: int,
    bit: int,
) -> None:
    """A record that would trust a rotten object, damaged (a bit flipped in its key, its
    fields or its check, cut short, replaced, the database removed or overwritten): the
    hard-link checkout re-hashes the object and refuses it."""
    base = tmp_path_factory.mktemp("t")
    reg = Registry.init(base / "reg")
    dsreg.add("pets", make_tree(base / "tree"), tag="v1", registry=reg)
    blob = dsreg.open("pets@v1", registry=reg)[0].blob
    assert blob is not None
    rot(reg, blob)
    db = reg.root / "state" / "stat.sqlite"
    key = bytes.fromhex(hex_of(blob))
    if how in ("removed", "garbage file"):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        if how == "garbage file":
            db.write_bytes(os.urandom(4096))
    else:
        con = sqlite3.connect(db, isolation_level=None)
        (value,) = con.execute("SELECT stat FROM objects_v2 WHERE digest = ?", (key,)).fetchone()
        new_key, new_value = key, bytearray(value)
        if how == "digest":
            k = bytearray(key)
            k[at % 32] ^= 1 << bit
            new_key = bytes(k)
        elif how == "stat":
            new_value[at % 40] ^= 1 << bit
        elif how == "check":
            new_value[40 + at % 4] ^= 1 << bit
        elif how == "short":
            new_value = new_value[: at % 44]
        else:
            new_value = bytearray(os.urandom(44))
        con.execute("DELETE FROM objects_v2 WHERE digest = ?", (key,))
        con.execute("INSERT INTO objects_v2 VALUES (?, ?)", (new_key, bytes(new_value)))
        con.close()
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", base / "out", link="hardlink", registry=reg)
    assert served(base / "out") == []


def test_a_deleted_hard_link_checkout_costs_no_re_hash(
    pets: tuple[Registry, str], tmp_path: Path, hashed: list[str]
) -> None:
    """Deleting a hard-linked checkout changes every object's ctime and link count, unrecorded;
    the link count explains the ctime, so the next hard-link checkout links every object
    unread, and the one after it too."""
    reg, blob = pets
    path = reg.store.path(blob)
    first = tmp_path / "first"
    dsreg.checkout("pets@v1", first, link="hardlink", registry=reg)
    linked = os.stat(path)
    shutil.rmtree(first)
    now = os.stat(path)
    assert now.st_ctime_ns != linked.st_ctime_ns and now.st_nlink == linked.st_nlink - 1
    for name in ("again", "third"):
        res = dsreg.checkout("pets@v1", tmp_path / name, link="hardlink", registry=reg)
        assert res.added == 8 and len(served(tmp_path / name)) == 8
        assert (tmp_path / name / "cat" / "0.bin").read_bytes() == (
            tmp_path / "tree" / "cat" / "0.bin"
        ).read_bytes()
    assert hashed == []
    shutil.rmtree(tmp_path / "again")
    dsreg.checkout("pets@v1", tmp_path / "sym", link="symlink", registry=reg)
    assert hashed == []


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_after_a_deleted_checkout_a_flip_without_a_link_change_is_refused(
    pets: tuple[Registry, str], tmp_path: Path, hashed: list[str], keep_mtime: bool
) -> None:
    """A hard-linked checkout deleted, another made (recording the stats after its links),
    then a byte flipped with the link count left as recorded: refused, mtime set back or not."""
    reg, blob = pets
    dsreg.checkout("pets@v1", tmp_path / "first", link="hardlink", registry=reg)
    shutil.rmtree(tmp_path / "first")
    dsreg.checkout("pets@v1", tmp_path / "second", link="hardlink", registry=reg)
    assert hashed == []
    flip(reg, blob, keep_mtime=keep_mtime)
    for link in ("hardlink", "symlink"):
        with pytest.raises(CorruptObjectError):
            dsreg.checkout("pets@v1", tmp_path / f"out-{link}", link=link, registry=reg)
        assert served(tmp_path / f"out-{link}") == []


def test_a_flip_that_keeps_the_mtime_across_a_link_change_is_the_documented_limit(
    pets: tuple[Registry, str], tmp_path: Path
) -> None:
    """What trusting a link-count change lets through (docs/concepts.md, "Guarantees"): a byte
    flipped with its mtime set back *and* a hard link removed since the record is linked by a
    plain hard-link checkout, as damage below the file system is; with the mtime not set back it
    is refused; ``--verify``, a copy, ``open`` and ``dsreg verify`` refuse or name it, and once
    found it is never trusted again."""
    reg, blob = pets
    dsreg.checkout("pets@v1", tmp_path / "first", link="hardlink", registry=reg)
    shutil.rmtree(tmp_path / "first")
    flip(reg, blob, keep_mtime=False)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "refused", link="hardlink", registry=reg)
    # Repaired by adding the data again (it replaces a marked object), linked and removed.
    dsreg.add("pets", tmp_path / "tree", registry=reg)
    dsreg.checkout("pets@v1", tmp_path / "second", link="hardlink", registry=reg)
    shutil.rmtree(tmp_path / "second")
    flip(reg, blob, keep_mtime=True)
    dsreg.checkout("pets@v1", tmp_path / "plain", link="hardlink", registry=reg)
    assert len(served(tmp_path / "plain")) == 8
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "v", link="hardlink", verify=True, registry=reg)
    with pytest.raises(CorruptObjectError):
        dsreg.open("pets@v1", registry=reg)[0].read_bytes()
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "after", link="hardlink", registry=reg)
    assert [p.digest for p in dsreg.verify(registry=reg).problems] == [blob]


@pytest.mark.parametrize("link", ["hardlink", "symlink"])
@pytest.mark.parametrize("recorded", [True, False])
def test_duplicate_files_are_re_hashed_once(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    hashed: list[str],
    link: str,
    recorded: bool,
) -> None:
    """A dataset holding the same bytes in several files: one object, read at most once by a
    checkout (once when it has no trust record, never when it has), however many files hold
    it; a flipped byte in it is still refused."""
    reg = make_registry()
    tree = make_tree(tmp_path / "tree")
    same = (tree / "cat" / "0.bin").read_bytes()
    for c in ("cat", "dog"):
        for i in range(4, 8):
            (tree / c / f"{i}.bin").write_bytes(same)
    dsreg.add("dups", tree, tag="v1", registry=reg)
    if not recorded:
        state = reg.root / "state" / "stat.sqlite"
        con = sqlite3.connect(state, isolation_level=None)
        con.execute("DELETE FROM objects_v2")
        con.close()
    out = tmp_path / "out"
    res = dsreg.checkout("dups@v1", out, link=link, registry=reg)
    assert res.files == 16 and len(served(out)) == 16
    assert all(p.read_bytes() == (tree / p.relative_to(out)).read_bytes() for p in served(out))
    assert len(hashed) == len(set(hashed)) == (0 if recorded else 8)
    hashed.clear()
    dsreg.checkout("dups@v1", tmp_path / "again", link=link, registry=reg)
    assert hashed == []
    ds = dsreg.open("dups@v1", registry=reg)
    blobs = [ds[i].blob for i in range(len(ds))]
    blob = max(set(blobs), key=blobs.count)  # the object nine files hold
    assert blob is not None and blobs.count(blob) == 9
    flip(reg, blob, keep_mtime=True)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("dups@v1", tmp_path / "bad", link=link, registry=reg)


@pytest.mark.parametrize("others", [0, 6])
def test_records_are_found_however_many_others_the_state_holds(
    make_registry: Callable[..., Registry], tmp_path: Path, hashed: list[str], others: int
) -> None:
    """A checkout reads its objects' trust records in one pass over the state when they are
    most of it, and by key when other datasets' records outnumber them: either way a hard-link
    checkout after a deleted one re-hashes nothing, and a flipped byte is refused."""
    reg = make_registry()
    for i in range(others):
        dsreg.add(f"other{i}", make_tree(tmp_path / f"o{i}", seed=10 + i), tag="v1", registry=reg)
    dsreg.add("pets", make_tree(tmp_path / "tree"), tag="v1", registry=reg)
    dsreg.checkout("pets@v1", tmp_path / "first", link="hardlink", registry=reg)
    shutil.rmtree(tmp_path / "first")
    hashed.clear()
    dsreg.checkout("pets@v1", tmp_path / "second", link="hardlink", registry=reg)
    assert hashed == [] and len(served(tmp_path / "second")) == 8
    blob = dsreg.open("pets@v1", registry=reg)[0].blob
    assert blob is not None
    flip(reg, blob, keep_mtime=True)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "third", link="hardlink", registry=reg)
    assert served(tmp_path / "third") == []


def test_worker_processes_record_the_stat_after_their_links(
    pets: tuple[Registry, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In worker processes (a large checkout's way), each object's trust record is written as
    its chunk comes back, with its stat after the link; after the checkout is deleted the next
    one links from those records, and a flipped byte is still refused there."""
    import dsreg._util.parallel as parallel

    monkeypatch.setattr(parallel, "FORK_MIN", 1)
    monkeypatch.setenv("DSREG_JOBS", "2")
    reg, blob = pets
    blobs = sorted({e.blob for e in dsreg.open("pets@v1", registry=reg) if e.blob})

    def records_match() -> bool:
        rec = reg.state.object_stats([hex_of(b) for b in blobs])
        return rec == {hex_of(b): key_of(os.stat(reg.store.path(b))) for b in blobs}

    dsreg.checkout("pets@v1", tmp_path / "first", link="hardlink", registry=reg)
    assert records_match()
    shutil.rmtree(tmp_path / "first")
    dsreg.checkout("pets@v1", tmp_path / "second", link="hardlink", registry=reg)
    assert records_match() and len(served(tmp_path / "second")) == 8
    flip(reg, blob, keep_mtime=True)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "third", link="hardlink", registry=reg)
    assert served(tmp_path / "third") == []


@pytest.mark.parametrize("shards_exist", [False, True])
def test_records_written_while_the_add_reads_vouch_after_it(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    hashed: list[str],
    monkeypatch: pytest.MonkeyPatch,
    shards_exist: bool,
) -> None:
    """An add writes its trust records while it still reads files, before its objects are
    installed (``trust.StagedRecords``; here after every chunk). Into a new registry (whole
    staging folders renamed into place) or one whose shard folders exist (each object renamed
    on its own, which changes its ctime), every record holds its object's stat once the add
    is done, the first checkout re-hashes nothing, and a flipped byte is still refused."""
    import dsreg.registry.trust as trust

    monkeypatch.setattr(trust, "_EARLY", 1)
    reg = make_registry()
    if shards_exist:
        for i in range(256):
            (reg.store.files / "blake3" / f"{i:02x}").mkdir(parents=True, exist_ok=True)
    dsreg.add("pets", make_tree(tmp_path / "tree"), tag="v1", registry=reg)
    blobs = sorted({e.blob for e in dsreg.open("pets@v1", registry=reg) if e.blob})
    assert len(blobs) == 8
    rec = reg.state.object_stats([hex_of(b) for b in blobs])
    assert rec == {hex_of(b): key_of(os.stat(reg.store.path(b))) for b in blobs}
    dsreg.checkout("pets@v1", tmp_path / "first", link="hardlink", registry=reg)
    assert hashed == [] and len(served(tmp_path / "first")) == 8
    flip(reg, blobs[0], keep_mtime=True)
    with pytest.raises(CorruptObjectError):
        dsreg.checkout("pets@v1", tmp_path / "second", link="hardlink", registry=reg)
