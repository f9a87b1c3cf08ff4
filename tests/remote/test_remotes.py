"""Remotes: push, pull, clone and open(remote=) against a local folder and an S3 server (moto on
loopback, through dvc-s3); faults: a killed push resumed, corrupt and missing remote objects,
remotes that refuse writes, wrong URLs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import dsreg
from dsreg import (
    AddResult,
    ConfigError,
    CorruptObjectError,
    InvalidInputError,
    ObjectNotFoundError,
    Registry,
    RemoteError,
    RevisionNotFoundError,
    TagExistsError,
)
from dsreg.objects.digest import short
from dsreg.ops.maintenance import reachable
from dsreg.registry.reader import LocalReader

# ``python -c`` with this runs the dsreg command line in a fresh process.
DSREG_MAIN = "import sys; from dsreg.cli import main; main(sys.argv[1:])"
PIN = ".dsreg.json"  # the pin file a checkout writes


def tagged(reg: Registry, dataset: str, tag: str) -> str | None:
    """The revision ``dataset@tag`` names here (``dsreg ls``), or None."""
    return {(t.dataset, t.tag): t.revision for t in dsreg.ls(registry=reg)}.get((dataset, tag))


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != PIN
    }


def remote_objects(root: Path) -> set[str]:
    """Digests of the complete objects in a local-directory remote (staging names left out)."""
    base = root / "files" / "blake3"
    if not base.is_dir():
        return set()
    return {
        "blake3:" + shard.name + p.name
        for shard in base.iterdir()
        for p in shard.iterdir()
        if len(p.name) == 62
    }


def blobs_of(reg: Registry, spec: str) -> set[str]:
    everything, problems = reachable(reg, [LocalReader(reg).revision(spec).digest])
    assert not problems
    return everything


@pytest.fixture
def origin(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    tmp_path: Path,
) -> tuple[Registry, Path, Path, AddResult]:
    """A registry holding pets@v1, with a local-directory remote 'origin' (default)."""
    reg = make_registry("a")
    tree = make_imagefolder("pets", classes=["cat", "dog", "fox"], per_class=5)
    res = add_tree(reg, "pets", tree, tag="v1")
    remote = tmp_path / "remote"
    dsreg.remote_add("origin", str(remote), default=True, registry=reg)
    return reg, tree, remote, res


# -- configuration ---------------------------------------------------------------------------
def test_remote_config_round_trip(make_registry: Callable[..., Registry], tmp_path: Path) -> None:
    reg = make_registry()
    dsreg.remote_add("nas", str(tmp_path / "nas"), registry=reg)
    dsreg.remote_add(
        "lab", "s3://lab-bucket/dsreg", options={"region": "eu-west-1"}, default=True, registry=reg
    )
    got = {r.name: r for r in dsreg.remote_ls(registry=reg)}
    assert got["nas"].url == str(tmp_path / "nas") and not got["nas"].default
    assert got["lab"].options == {"region": "eu-west-1"} and got["lab"].default
    text = (reg.root / "config.toml").read_text()
    assert "[remote.lab]" in text and 'remote = "lab"' in text
    with pytest.raises(ConfigError, match="exists"):
        dsreg.remote_add("nas", "/elsewhere", registry=reg)
    removed = dsreg.remote_remove("lab", registry=reg)
    assert removed.default
    assert [r.name for r in dsreg.remote_ls(registry=reg)] == ["nas"]
    assert "remote =" not in (reg.root / "config.toml").read_text()
    with pytest.raises(ConfigError, match="no remote 'lab'"):
        dsreg.remote_remove("lab", registry=reg)


def test_relative_remote_path_is_stored_absolute(
    make_registry: Callable[..., Registry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = make_registry()
    monkeypatch.chdir(tmp_path)
    assert dsreg.remote_add("nas", "./store", registry=reg).url == str(tmp_path / "store")


def test_credentials_are_never_stored(make_registry: Callable[..., Registry]) -> None:
    reg = make_registry()
    before = (reg.root / "config.toml").read_text()
    with pytest.raises(InvalidInputError, match=r"secret_access_key.*environment"):
        dsreg.remote_add("s3", "s3://b/p", options={"secret_access_key": "hunter2"}, registry=reg)
    with pytest.raises(InvalidInputError, match="password"):
        dsreg.remote_add("web", "https://alice:hunter2@example.org/dsreg", registry=reg)
    after = (reg.root / "config.toml").read_text()
    assert after == before and "hunter2" not in after


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("foo://bucket/x", {}, "foo://"),
        ("s3://bucket/x", {"no_such_option": "1"}, "no_such_option"),
    ],
)
def test_wrong_url_or_option_is_a_clear_error(
    make_registry: Callable[..., Registry], url: str, options: dict[str, str], match: str
) -> None:
    reg = make_registry()
    with pytest.raises(RemoteError, match=match):
        dsreg.remote_add("bad", url, options=options, registry=reg)
    assert dsreg.remote_ls(registry=reg) == []


# -- local-directory remote ------------------------------------------------------------------
def test_push_then_pull_into_a_fresh_registry_is_byte_identical(
    origin: tuple[Registry, Path, Path, AddResult],
    make_registry: Callable[..., Registry],
    tmp_path: Path,
) -> None:
    reg, tree, remote, res = origin
    pushed = dsreg.push(registry=reg)
    assert pushed.sent == len(blobs_of(reg, "pets@v1")) and pushed.already == 0
    assert [(r.dataset, r.tag, r.status) for r in pushed.refs] == [("pets", "v1", "created")]
    assert (remote / "refs" / "pets" / "v1").read_text().strip() == res.revision
    assert sorted(p.name for p in remote.iterdir()) == ["files", "info", "logs", "refs"]
    assert (remote / "info" / "refs").read_text() == "pets/v1\n"  # for static web servers

    fresh = make_registry("b")
    pulled = dsreg.pull(["pets@v1"], remote=str(remote), registry=fresh)
    assert pulled.revisions == (res.revision,)
    assert tagged(fresh, "pets", "v1") == res.revision
    assert blobs_of(fresh, "pets@v1") == blobs_of(reg, "pets@v1")
    dsreg.checkout("pets@v1", tmp_path / "out", link="copy", registry=fresh)
    assert files_of(tmp_path / "out") == files_of(tree)
    assert dsreg.verify(registry=fresh).ok


def test_a_second_push_sends_nothing_and_a_changed_tree_sends_only_the_change(
    origin: tuple[Registry, Path, Path, AddResult],
    add_tree: Callable[..., AddResult],
) -> None:
    reg, tree, remote, _res = origin
    first = dsreg.push(registry=reg)
    again = dsreg.push(registry=reg)
    assert again.sent == 0 and again.bytes == 0
    assert [r.status for r in again.refs] == ["unchanged"]
    (tree / "dog" / "img000.bin").write_bytes(b"a new photo of a dog")
    add_tree(reg, "pets", tree, tag="v2")
    before = remote_objects(remote)
    third = dsreg.push(["pets@v2"], registry=reg)
    # the changed blob, its examples table, snapshot and revision: nothing else
    assert third.sent == 4
    assert len(remote_objects(remote) - before) == 4
    assert first.sent + 4 == len(remote_objects(remote))


def test_a_corrected_revision_pushes_only_its_overlay_and_pulls_to_the_same_view(
    origin: tuple[Registry, Path, Path, AddResult],
    make_registry: Callable[..., Registry],
    tmp_path: Path,
) -> None:
    import numpy as np

    from dsreg.overlays.write import corrections_table, write_overlay

    reg, tree, remote, res = origin
    dsreg.push(registry=reg)
    table = corrections_table(
        rows=np.array([1, 6]),
        example_ids=["cat/img001.bin", "dog/img001.bin"],
        given_label=np.array([0, 1]),
        suggested_label=np.array([2, 0]),
        verdict=["suspected", "suspected"],
        score=np.array([0.01, 0.02]),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res.snapshot, kind="detected", table=table, producer=producer)
    made = dsreg.tag("pets@corrected", "pets@v1", overlays=[ov], view="corrected", registry=reg)
    pushed = dsreg.push(["pets@corrected"], registry=reg)
    assert pushed.sent == 3  # the overlay manifest, its corrections table, the revision

    fresh = make_registry("b")
    dsreg.pull(["pets@corrected"], remote=str(remote), registry=fresh)
    assert tagged(fresh, "pets", "corrected") == made.revision
    mine = dsreg.open("pets@corrected", registry=reg).labels()
    theirs = dsreg.open("pets@corrected", registry=fresh).labels()
    assert theirs.equals(mine)
    dsreg.checkout("pets@corrected", tmp_path / "out", link="copy", registry=fresh)
    # the relabelled cat photo sits in its new class's folder (named apart from fox's own)
    moved = tmp_path / "out" / "fox" / "cat__img001.bin"
    assert moved.read_bytes() == (tree / "cat" / "img001.bin").read_bytes()


def test_pull_fetches_only_what_is_missing(
    origin: tuple[Registry, Path, Path, AddResult], make_registry: Callable[..., Registry]
) -> None:
    reg, _tree, remote, _res = origin
    dsreg.push(registry=reg)
    fresh = make_registry("b")
    dsreg.remote_add("origin", str(remote), default=True, registry=fresh)
    first = dsreg.pull(registry=fresh)
    second = dsreg.pull(registry=fresh)
    assert first.fetched == len(remote_objects(remote))
    assert second.fetched == 0 and [r.status for r in second.refs] == ["unchanged"]


def test_a_tag_the_remote_holds_elsewhere_is_refused_unless_forced(
    origin: tuple[Registry, Path, Path, AddResult],
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> None:
    reg, _tree, remote, res = origin
    dsreg.push(registry=reg)
    other = make_registry("other")
    dsreg.remote_add("origin", str(remote), default=True, registry=other)
    theirs = add_tree(other, "pets", make_imagefolder("other-pets", seed=7), tag="v1")
    before = remote_objects(remote)
    with pytest.raises(TagExistsError, match=r"pets@v1.*--force"):
        dsreg.push(registry=other)
    assert remote_objects(remote) == before  # refused before anything was sent
    assert (remote / "refs" / "pets" / "v1").read_text().strip() == res.revision

    moved = dsreg.push(force=True, registry=other)
    assert [(r.status, r.previous) for r in moved.refs] == [("moved", res.revision)]
    assert (remote / "refs" / "pets" / "v1").read_text().strip() == theirs.revision
    log = (remote / "logs" / "pets.jsonl").read_text().splitlines()
    assert len(log) == 2 and res.revision in log[1] and theirs.revision in log[1]

    # and the first registry's pull is refused in turn, unless forced
    with pytest.raises(TagExistsError, match="pets@v1"):
        dsreg.pull(registry=reg)
    assert tagged(reg, "pets", "v1") == res.revision
    dsreg.pull(force=True, registry=reg)
    assert tagged(reg, "pets", "v1") == theirs.revision
    assert [e.old for e in dsreg.log("pets", registry=reg)][-1] == res.revision


def test_clone_holds_tags_and_manifests_and_fetches_payloads_on_demand(
    origin: tuple[Registry, Path, Path, AddResult], tmp_path: Path
) -> None:
    reg, tree, remote, res = origin
    dsreg.push(registry=reg)
    cloned = dsreg.clone(str(remote), tmp_path / "lab")
    lab = dsreg.find_registry(tmp_path / "lab")
    assert [(r.dataset, r.tag, r.revision) for r in cloned.refs] == [("pets", "v1", res.revision)]
    assert tagged(lab, "pets", "v1") == res.revision
    snap = lab.snapshot(res.snapshot)
    assert lab.store.has(snap.examples)
    payloads = blobs_of(reg, "pets@v1") - {res.revision, res.snapshot, snap.examples}
    assert lab.store.missing(payloads) == payloads  # lazily: no payload yet
    # The history travels: the clone's log is the origin's (its tag's line, carried by the
    # push), and writing the tag there adds none.
    assert dsreg.log("pets", registry=lab) == dsreg.log("pets", registry=reg)

    ds = dsreg.open("pets@v1", registry=lab, remote="origin")
    assert ds.digest == res.revision
    ex = next(iter(ds))
    assert ex.read_bytes() == (tree / ex.example_id).read_bytes()
    assert not lab.store.missing(payloads)


def test_checkout_fetches_missing_payloads_from_the_default_remote(
    origin: tuple[Registry, Path, Path, AddResult], tmp_path: Path
) -> None:
    reg, tree, remote, _res = origin
    dsreg.push(registry=reg)
    dsreg.clone(str(remote), tmp_path / "lab")
    dsreg.checkout("pets@v1", tmp_path / "out", registry=tmp_path / "lab")
    assert files_of(tmp_path / "out") == files_of(tree)


def test_checkout_without_payloads_or_remote_is_a_clear_error(
    origin: tuple[Registry, Path, Path, AddResult], tmp_path: Path
) -> None:
    reg, _tree, remote, _res = origin
    dsreg.push(registry=reg)
    dsreg.clone(str(remote), tmp_path / "lab")
    dsreg.remote_remove("origin", registry=tmp_path / "lab")
    with pytest.raises(ObjectNotFoundError, match=r"no default remote.*dsreg pull"):
        dsreg.checkout("pets@v1", tmp_path / "out", registry=tmp_path / "lab")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_open_with_a_remote_fetches_a_revision_this_registry_never_saw(
    origin: tuple[Registry, Path, Path, AddResult],
    make_registry: Callable[..., Registry],
) -> None:
    reg, tree, remote, res = origin
    dsreg.push(registry=reg)
    fresh = make_registry("b")
    dsreg.remote_add("origin", str(remote), registry=fresh)
    ds = dsreg.open("pets@v1", registry=fresh, remote="origin")
    assert ds.digest == res.revision
    assert {e.example_id: e.read_bytes() for e in ds} == files_of(tree)
    assert tagged(fresh, "pets", "v1") == res.revision


def test_a_pull_in_several_staging_waves_lands_every_object(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import dsreg.remote.waves as waves

    reg = make_registry("a")
    tree = make_imagefolder("many", classes=4, per_class=150)
    add_tree(reg, "many", tree, tag="v1")
    dsreg.push(remote=str(tmp_path / "remote"), registry=reg)
    # Waves of 64 objects over 256 shards: later waves land in shards earlier ones created.
    monkeypatch.setattr(waves, "WAVE", 64)
    fresh = make_registry("b")
    assert dsreg.pull(remote=str(tmp_path / "remote"), registry=fresh).fetched == 603
    dsreg.checkout("many@v1", tmp_path / "out", link="copy", registry=fresh)
    assert files_of(tmp_path / "out") == files_of(tree)
    assert dsreg.verify(registry=fresh).ok


# -- faults ----------------------------------------------------------------------------------
def _damage(path: Path, data: bytes) -> None:
    os.chmod(path, 0o644)
    path.write_bytes(data)


@pytest.mark.parametrize("damage", ["corrupt", "truncated"])
def test_a_damaged_remote_object_is_caught_by_digest_and_never_served(
    origin: tuple[Registry, Path, Path, AddResult],
    make_registry: Callable[..., Registry],
    damage: str,
) -> None:
    reg, _tree, remote, res = origin
    dsreg.push(registry=reg)
    victim = dsreg.open("pets@v1", registry=reg)
    blob = sorted(blobs_of(reg, "pets@v1") - {victim.digest, res.snapshot, res.examples})[0]
    path = remote / "files" / "blake3" / blob[7:9] / blob[9:]
    original = path.read_bytes()
    _damage(path, original[:-1] if damage == "truncated" else b"X" + original[1:])

    fresh = make_registry("b")
    with pytest.raises(CorruptObjectError, match=blob):
        dsreg.pull(["pets@v1"], remote=str(remote), registry=fresh)
    assert not fresh.store.has(blob)
    assert tagged(fresh, "pets", "v1") is None  # no tag names a revision it cannot serve
    assert dsreg.verify(registry=fresh).ok  # what did arrive is intact

    _damage(path, original)  # repaired on the remote: the pull completes
    dsreg.pull(["pets@v1"], remote=str(remote), registry=fresh)
    assert fresh.store.has(blob) and dsreg.verify(registry=fresh).ok


def test_a_missing_remote_object_is_reported_by_digest(
    origin: tuple[Registry, Path, Path, AddResult], make_registry: Callable[..., Registry]
) -> None:
    reg, _tree, remote, res = origin
    dsreg.push(registry=reg)
    blob = sorted(blobs_of(reg, "pets@v1") - {res.revision, res.snapshot, res.examples})[0]
    (remote / "files" / "blake3" / blob[7:9] / blob[9:]).unlink()
    with pytest.raises(ObjectNotFoundError, match=short(blob)):
        dsreg.pull(["pets@v1"], remote=str(remote), registry=make_registry("b"))


def test_a_remote_that_refuses_writes_is_a_clear_error(
    origin: tuple[Registry, Path, Path, AddResult], tmp_path: Path
) -> None:
    reg, _tree, _remote, _res = origin
    # A path below a regular file cannot be written by anyone (root included).
    (tmp_path / "a-file").write_text("not a folder")
    bad = tmp_path / "a-file" / "remote"
    with pytest.raises(RemoteError, match=r"cannot write.*a-file/remote.*Not a directory"):
        dsreg.push(remote=str(bad), registry=reg)
    assert tagged(reg, "pets", "v1") is not None


def test_a_url_holding_no_registry_is_a_clear_error(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    nowhere = tmp_path / "no-such-remote"
    with pytest.raises(RevisionNotFoundError, match="holds no tags"):
        dsreg.clone(str(nowhere), tmp_path / "lab")
    assert not (tmp_path / "lab").exists()
    with pytest.raises(RevisionNotFoundError, match="holds no tags"):
        dsreg.pull(remote=str(nowhere), registry=make_registry("b"))


def test_a_killed_push_resumes_without_resending(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    dsreg_env: Callable[..., dict[str, str]],
    tmp_path: Path,
) -> None:
    reg = make_registry("a")
    tree = make_imagefolder("big", classes=20, per_class=200)
    res = add_tree(reg, "big", tree, tag="v1")
    remote = tmp_path / "remote"
    total = len(blobs_of(reg, "big@v1"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            DSREG_MAIN,
            "push",
            "-r",
            str(remote),
            "--jobs",
            "1",
            "--registry",
            str(reg.root),
        ],
        env=dsreg_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not remote_objects(remote) and time.monotonic() < deadline:
            assert proc.poll() is None, "the push ended before it was interrupted"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    arrived = remote_objects(remote)
    assert 0 < len(arrived) < total
    assert not (remote / "refs").exists()  # objects go first: no tag names a partial revision

    resumed = dsreg.push(remote=str(remote), registry=reg)
    assert resumed.sent == total - len(arrived) and resumed.already == len(arrived)
    assert remote_objects(remote) == blobs_of(reg, "big@v1")

    fresh = make_registry("b")
    dsreg.pull(["big@v1"], remote=str(remote), registry=fresh)
    assert tagged(fresh, "big", "v1") == res.revision
    assert dsreg.verify(registry=fresh).ok


# -- S3 (moto server on loopback, dvc-s3) -----------------------------------------------------
def test_s3_push_then_pull_into_a_fresh_registry(
    origin: tuple[Registry, Path, Path, AddResult],
    make_registry: Callable[..., Registry],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    reg, tree, _remote, res = origin
    url = f"s3://lab/{tmp_path.name}/dsreg"
    dsreg.remote_add("s3", url, options={"endpointurl": s3_endpoint}, registry=reg)
    pushed = dsreg.push(remote="s3", registry=reg)
    assert pushed.sent == len(blobs_of(reg, "pets@v1"))
    assert dsreg.push(remote="s3", registry=reg).sent == 0

    fresh = make_registry("b")
    dsreg.remote_add("s3", url, options={"endpointurl": s3_endpoint}, default=True, registry=fresh)
    pulled = dsreg.pull(registry=fresh)
    assert pulled.revisions == (res.revision,)
    assert blobs_of(fresh, "pets@v1") == blobs_of(reg, "pets@v1")
    dsreg.checkout("pets@v1", tmp_path / "out", link="copy", registry=fresh)
    assert files_of(tmp_path / "out") == files_of(tree)
    assert dsreg.verify(registry=fresh).ok

    cloned = dsreg.clone(url, tmp_path / "lab", name="s3", options={"endpointurl": s3_endpoint})
    assert [r.revision for r in cloned.refs] == [res.revision]
    dsreg.checkout("pets@v1", tmp_path / "lab-out", link="copy", registry=tmp_path / "lab")
    assert files_of(tmp_path / "lab-out") == files_of(tree)


def test_s3_bucket_that_does_not_exist_is_a_clear_error(
    origin: tuple[Registry, Path, Path, AddResult], s3_endpoint: str
) -> None:
    reg, _tree, _remote, _res = origin
    dsreg.remote_add(
        "gone", "s3://no-such-bucket/dsreg", options={"endpointurl": s3_endpoint}, registry=reg
    )
    with pytest.raises(RemoteError, match=r"no-such-bucket.*bucket does not exist"):
        dsreg.push(remote="gone", registry=reg)
