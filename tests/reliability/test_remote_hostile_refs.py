"""What a remote says is checked before it is written here (docs/concepts.md, "Guarantees"):
a remote tag that names no revision of its own dataset is refused by pull, clone and
``dsreg.open(remote=)`` (named, never written locally; the other tags come); a damaged remote
tag blocks nothing but itself, and ``push --force`` repairs it; a clone copies only the log
lines that are entries of their dataset naming what the clone holds whole; and a push never
publishes a local tag naming another dataset's revision."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import DsregError, IntegrityError, TagExistsError
from dsreg.formats.manifests import Revision
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import reachable
from dsreg.remote.store import RemoteStore, ref_value

SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _settings(n: int) -> settings:
    return settings(SETTINGS, max_examples=n)


def _tree(root: Path, key: str, n: int) -> Path:
    for i in range(n):
        p = root / f"c{i % 3}" / f"{i:03d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(hashlib.sha256(f"{key}/{i}".encode()).digest())
    return root


def _overlay(reg: Registry, snapshot: str, example_id: str) -> str:
    import numpy as np

    from dsreg.overlays.write import corrections_table, write_overlay

    table = corrections_table(
        rows=np.array([0]),
        example_ids=[example_id],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
        score=np.array([0.01]),
    )
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    return write_overlay(reg, base=snapshot, kind="detected", table=table, producer=producer)


class World:
    """A source registry pushed to a folder remote; the digests the tests point tags at."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.source = Registry.init(tmp / "source")
        self.remote = tmp / "remote"
        reg = self.source
        pets = dsreg.add("pets", _tree(tmp / "pets", "pets", 6), tag="v1", registry=reg)
        cars = dsreg.add("cars", _tree(tmp / "cars", "cars", 5), tag="v1", registry=reg)
        self.pets, self.cars = pets, cars
        self.pets_overlay = _overlay(reg, pets.snapshot, "c0/000.bin")
        self.cars_overlay = _overlay(reg, cars.snapshot, "c0/000.bin")
        fixed = dsreg.tag("pets@fixed", "pets@v1", overlays=[self.pets_overlay], registry=reg)
        self.pets_fixed = fixed.revision
        self.cars_fixed = dsreg.tag(
            "cars@fixed", "cars@v1", overlays=[self.cars_overlay], registry=reg
        ).revision
        # Revisions no tag names: one only the history will name, one that mixes datasets.
        self.pets_old = dsreg.tag(
            "pets@gone", "pets@v1", view="cleaned", overlays=[self.pets_overlay], registry=reg
        ).revision
        (reg.root / "refs" / "pets" / "gone").unlink()
        self.mixed = reg.put_manifest(
            Revision(snapshot=pets.snapshot, overlays=(self.cars_overlay,))
        )
        dsreg.push(remote=str(self.remote), registry=reg)
        dsreg.push([self.pets_old, self.mixed], remote=str(self.remote), registry=reg)
        self.blob = sorted(
            reachable(reg, [pets.revision])[0] - {pets.revision, pets.snapshot, pets.examples}
        )[0]

    def copy(self, name: str) -> Path:
        """A fresh copy of the remote to damage."""
        out = self.tmp / "copies" / f"{name}-{time.monotonic_ns()}"
        shutil.copytree(self.remote, out)
        return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("hostile"))


def _tags(root: Path) -> dict[tuple[str, str], str]:
    return {(ds, tag): d for ds, tag, d in Registry(root).refs.all()}


def _new_root(world: World, name: str) -> Path:
    return world.tmp / "locals" / f"{name}-{time.monotonic_ns()}"


# -- tags naming another dataset's revision --------------------------------------------------
FOREIGN = ("other-revision", "other-snapshot", "overlay", "mixed-overlays", "payload")


def _foreign(world: World, kind: str) -> str:
    return {
        "other-revision": world.cars_fixed,
        "other-snapshot": world.cars.snapshot,
        "overlay": world.pets_overlay,
        "mixed-overlays": world.mixed,
        "payload": world.blob,
    }[kind]


@_settings(20)
@given(kind=st.sampled_from(FOREIGN), op=st.sampled_from(["pull", "pull-spec", "open", "clone"]))
def test_a_remote_tag_naming_no_revision_of_its_dataset_is_refused(
    world: World, kind: str, op: str
) -> None:
    remote = world.copy("foreign")
    (remote / "refs" / "pets" / "evil").write_text(_foreign(world, kind) + "\n")
    root = _new_root(world, op)
    with pytest.raises(IntegrityError, match=r"pets@evil") as err:
        if op == "clone":
            dsreg.clone(str(remote), root)
        else:
            Registry.init(root)
            if op == "pull":
                dsreg.pull(remote=str(remote), registry=root)
            elif op == "pull-spec":
                dsreg.pull(["pets@evil"], remote=str(remote), registry=root)
            else:
                dsreg.open("pets@evil", remote=str(remote), registry=root)
    assert "not written here" in str(err.value)
    tags = _tags(root)
    assert ("pets", "evil") not in tags
    if op in ("pull", "clone"):  # the others came
        assert tags == {
            ("pets", "v1"): world.pets.revision,
            ("pets", "fixed"): world.pets_fixed,
            ("cars", "v1"): world.cars.revision,
            ("cars", "fixed"): world.cars_fixed,
        }
        dsreg.gc(registry=root)
    if op == "pull":
        assert dsreg.verify(registry=root).ok


# -- a damaged remote tag --------------------------------------------------------------------
_garbage = st.binary(max_size=120).filter(lambda b: isinstance(ref_value(b), bytes))


@_settings(10)
@given(garbage=_garbage)
def test_a_damaged_remote_tag_blocks_only_itself_and_force_repairs_it(
    world: World, garbage: bytes
) -> None:
    remote = world.copy("damaged")
    (remote / "refs" / "pets" / "v1").write_bytes(garbage)
    url = str(remote)
    # Other tags push and pull as before.
    assert [r.status for r in dsreg.push(["cars"], remote=url, registry=world.source).refs] == [
        "unchanged",
        "unchanged",
    ]
    fresh = _new_root(world, "pull")
    Registry.init(fresh)
    with pytest.raises(IntegrityError, match=r"pets@v1 is damaged"):
        dsreg.pull(remote=url, registry=fresh)
    assert ("pets", "v1") not in _tags(fresh) and ("pets", "fixed") in _tags(fresh)
    # The damaged tag itself: refused without --force, repaired with it.
    with pytest.raises(TagExistsError, match=r"pets@v1.*damaged.*--force"):
        dsreg.push(["pets@v1"], remote=url, registry=world.source)
    res = dsreg.push(remote=url, force=True, registry=world.source)
    statuses = {(r.dataset, r.tag): r.status for r in res.refs}
    assert statuses[("pets", "v1")] == "repaired"
    assert set(statuses.values()) == {"repaired", "unchanged"}
    rs = RemoteStore(name="r", url=url, options={})
    assert rs.get_ref("pets", "v1") == world.pets.revision
    last = json.loads(rs.log_bytes("pets").splitlines()[-1])
    assert (last["tag"], last["old"], last["new"]) == ("v1", None, world.pets.revision)
    again = _new_root(world, "again")
    Registry.init(again)
    dsreg.pull(remote=url, registry=again)
    assert _tags(again)[("pets", "v1")] == world.pets.revision


def test_a_tag_file_that_never_ends_is_read_no_further_and_blocks_only_itself(
    world: World,
) -> None:
    remote = world.copy("endless")
    tag = remote / "refs" / "pets" / "v1"
    tag.unlink()
    tag.symlink_to("/dev/zero")  # a file of a folder remote that reads without end
    url = str(remote)
    fresh = _new_root(world, "endless")
    Registry.init(fresh)
    with pytest.raises(IntegrityError, match=r"pets@v1 is damaged"):
        dsreg.pull(remote=url, registry=fresh)
    assert ("pets", "v1") not in _tags(fresh) and ("pets", "fixed") in _tags(fresh)
    res = dsreg.push(["pets@v1"], remote=url, force=True, registry=world.source)
    assert [r.status for r in res.refs] == ["repaired"]
    assert not tag.is_symlink()
    assert RemoteStore(name="r", url=url, options={}).get_ref("pets", "v1") == world.pets.revision


def test_a_local_tag_naming_another_datasets_revision_is_never_pushed(
    world: World, tmp_path: Path
) -> None:
    reg = Registry.init(tmp_path / "reg")
    dsreg.pull(["cars@v1", "pets@v1"], remote=str(world.remote), registry=reg)
    remote = tmp_path / "remote"
    for bad in (world.cars.revision, world.cars.snapshot, world.pets_overlay, world.mixed):
        (reg.root / "refs" / "pets" / "v2").write_text(bad + "\n")  # a hand edit
        with pytest.raises(DsregError, match=r"pets@v2"):
            dsreg.push(remote=str(remote), registry=reg)
        assert not (remote / "refs").exists()  # refused before anything was written


# -- the log a clone copies ------------------------------------------------------------------
_NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _line(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "time": _NOW,
        "user": "someone",
        "dataset": "pets",
        "tag": "v1",
        "old": None,
        "new": None,
        "command": "dsreg push",
        "event": "push",
    }
    base.update(fields)
    return json.dumps(base, sort_keys=True).encode()


def _candidates(world: World) -> list[tuple[str, bytes, bool]]:
    """(what, line, whether a clone keeps it)."""
    rand = "blake3:" + "ab" * 32
    return [
        ("push v1", _line(new=world.pets.revision), True),
        ("push fixed", _line(tag="fixed", new=world.pets_fixed), True),
        ("forced move", _line(old=world.pets_old, new=world.pets.revision), True),
        ("overlay made", _line(tag=None, event="overlay", new=world.pets_overlay), True),
        ("bogus overlay", _line(tag=None, event="overlay", new=rand), False),
        ("other dataset", _line(dataset="cars", new=world.cars.revision), False),
        ("names cars", _line(new=world.cars_fixed), False),
        ("names a blob", _line(old=world.blob, new=world.pets.revision), False),
        ("mixed revision", _line(new=world.mixed), False),
        ("tag a number", _line(tag=5, new=world.pets.revision), False),
        ("old not a digest", _line(old="blake3:zz", new=world.pets.revision), False),
        ("time a number", _line(time=12, new=world.pets.revision), False),
        ("time not a date", _line(time="yesterday", new=world.pets.revision), False),
        ("event odd", _line(event="Push!", new=world.pets.revision), False),
        ("a list", b"[1, 2]", False),
        ("not utf-8", b'{"time": "\xff\xfe"}', False),
        ("torn", _line(new=world.pets.revision)[:40], False),
    ]


@_settings(20)
@given(data=st.data())
def test_a_clone_copies_only_log_lines_it_can_stand_behind(world: World, data: Any) -> None:
    candidates = _candidates(world)
    picks = data.draw(
        st.lists(
            st.one_of(
                st.sampled_from(candidates),
                st.binary(min_size=1, max_size=60)
                .filter(lambda b: b"\n" not in b and b.strip())
                .map(lambda b: ("junk", b, False)),
            ),
            min_size=1,
            max_size=12,
        )
    )
    remote = world.copy("logs")
    (remote / "logs" / "pets.jsonl").write_bytes(b"".join(line + b"\n" for _w, line, _k in picks))
    root = _new_root(world, "clone")
    res = dsreg.clone(str(remote), root)
    skipped = sorted(s.line for s in res.skipped if s.dataset == "pets")
    assert skipped == [i + 1 for i, (_w, _l, keep) in enumerate(picks) if not keep], (
        [(w, keep) for w, _l, keep in picks],
        res.skipped,
    )
    reg = Registry(root)
    kept = [json.loads(line) for _w, line, keep in picks if keep]
    copied = reg.refs.log("pets")[: len(kept)]
    assert [(e.tag, e.old, e.new, e.event) for e in copied] == [
        (k["tag"], k["old"], k["new"], k["event"]) for k in kept
    ]
    # Everything a copied line names is here, whole (payloads come on demand).
    named = {d for e in copied for d in (e.old, e.new) if d}
    seen, problems = reachable(reg, sorted(named), tables=False)
    assert not problems and not reg.store.missing(seen)
    assert reg.store.has(world.pets_old) == any(w == "forced move" for w, _l, _k in picks)
    dsreg.gc(registry=root)  # never refuses because of what the remote's log said
    assert dsreg.log("pets", registry=root)
