"""A clone's payloads that are not fetched yet are not damage (docs/concepts.md, "Guarantees":
verify tells what is lost from what is not fetched). ``dsreg verify`` on a lazy clone reports
them apart (``not_fetched``) and exits 0; anything damaged, and any manifest or table missing,
is a problem as before, and in a registry with no remote to fetch from a missing payload is
lost."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.registry.folder import Registry


@pytest.fixture
def cloned(
    make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path], tmp_path: Path
) -> tuple[Registry, Registry, set[str]]:
    """(origin, a lazy clone of it, the payload digests the clone lacks)."""
    origin = make_registry("origin")
    dsreg.add("pets", make_imagefolder(per_class=3), tag="v1", registry=origin)
    dsreg.tag("pets@cleaned", "pets@v1", view="cleaned", registry=origin)
    dsreg.remote_add("origin", str(tmp_path / "remote"), default=True, registry=origin)
    dsreg.push(registry=origin)
    clone = dsreg.clone(str(tmp_path / "remote"), tmp_path / "clone")
    reg = Registry(Path(clone.registry))
    payloads = set(origin.store) - set(reg.store)
    assert len(payloads) == 9
    return origin, reg, payloads


def test_a_lazy_clone_verifies_with_its_payloads_not_fetched(
    cloned: tuple[Registry, Registry, set[str]], cli: Callable[..., Any]
) -> None:
    _, reg, payloads = cloned
    res = dsreg.verify(registry=reg)
    assert res.ok and res.problems == ()
    assert set(res.not_fetched) == payloads and res.remote == "origin"

    shown = cli("verify", "--registry", str(reg.root))
    assert shown.exit_code == 0, shown.stderr
    assert "9 payloads not fetched yet" in shown.stderr and "'origin'" in shown.stderr
    assert "all intact" in shown.stderr and shown.stdout == ""
    as_json = json.loads(cli("verify", "--json", "--registry", str(reg.root)).stdout)
    assert as_json["ok"] and as_json["problems"] == [] and as_json["remote"] == "origin"
    assert set(as_json["not_fetched"]) == payloads
    # One revision's verify says the same of what that revision reaches.
    assert set(dsreg.verify("pets@v1", registry=reg).not_fetched) == payloads

    dsreg.pull(registry=reg)
    after = dsreg.verify(registry=reg)
    assert after.ok and after.not_fetched == () and "not_fetched" not in after.to_dict()


def test_without_a_remote_to_fetch_from_a_missing_payload_is_lost(
    cloned: tuple[Registry, Registry, set[str]], cli: Callable[..., Any]
) -> None:
    _, reg, payloads = cloned
    dsreg.remote_remove("origin", registry=reg)
    res = dsreg.verify(registry=reg)
    assert not res.ok and res.not_fetched == ()
    assert {p.digest for p in res.problems} == payloads
    assert {p.problem for p in res.problems} == {"missing"}
    assert cli("verify", "--registry", str(reg.root)).exit_code == 1


def _corrupt(reg: Registry, digest: str) -> None:
    path = reg.store.path(digest)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGE = ["none", "corrupt-payload", "corrupt-manifest", "lose-snapshot", "lose-table"]
DAMAGE += ["lose-revision"]


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fetched=st.sets(st.integers(0, 8), max_size=9),
    damage=st.sampled_from(DAMAGE),
    pick=st.integers(0, 100),
)
def test_verify_tells_what_is_not_fetched_from_what_is_damaged(
    cloned: tuple[Registry, Registry, set[str]],
    tmp_path_factory: pytest.TempPathFactory,
    fetched: set[int],
    damage: str,
    pick: int,
) -> None:
    origin, template, payloads = cloned
    root = tmp_path_factory.mktemp("clone") / "clone"
    shutil.copytree(template.root, root)
    reg = Registry(root)
    ordered = sorted(payloads)
    have = {ordered[i] for i in fetched}
    for d in have:  # a partial fetch: some payloads came (checkout, open(remote=))
        reg.store.put_bytes(origin.store.read_bytes(d))
    tagged = reg.refs.get("pets", "v1")
    assert tagged is not None
    rev = reg.revision(tagged)
    snap = reg.snapshot(rev.snapshot)
    victim = {
        "none": None,
        "corrupt-payload": sorted(have)[pick % len(have)] if have else None,
        "corrupt-manifest": rev.snapshot,
        "lose-snapshot": rev.snapshot,
        "lose-table": snap.examples,
        "lose-revision": tagged,
    }[damage]
    if victim is not None and damage.startswith("corrupt"):
        _corrupt(reg, victim)
    elif victim is not None:
        os.unlink(reg.store.path(victim))

    res = dsreg.verify(registry=root)
    problems = {p.digest for p in res.problems}
    assert set(res.not_fetched) <= payloads - have  # never a fetched or a damaged object
    if victim is None:
        assert res.ok and set(res.not_fetched) == payloads - have
        assert res.remote == ("origin" if payloads - have else None)
    else:
        assert not res.ok and victim in problems and victim not in res.not_fetched
    if damage in ("none", "corrupt-payload"):
        # The tables were readable: every payload they name is either here or not fetched.
        assert set(res.not_fetched) == payloads - have
