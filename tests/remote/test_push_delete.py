"""``dsreg push --delete DATASET@TAG``: a tag removed on the remote, by compare-and-swap under
the same lock as a move, logged there; bad input refused with nothing deleted."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import Registry
from dsreg.registry.refs import parse_log

Cli = Callable[..., Any]


def state(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def pushed(
    cli: Cli, tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> tuple[Registry, Path]:
    assert cli("init").exit_code == 0
    tree = make_imagefolder("val", classes=2, per_class=2)
    assert cli("add", "pets", str(tree), "--tag", "v1").exit_code == 0
    assert cli("tag", "pets@v2", "pets@v1").exit_code == 0
    remote = tmp_path / "remote"
    assert cli("remote", "add", "origin", str(remote), "--default").exit_code == 0
    assert cli("push").exit_code == 0
    return Registry(tmp_path / ".dsreg"), remote


def test_push_delete_removes_the_remote_tag_and_logs_it(
    cli: Cli, pushed: tuple[Registry, Path]
) -> None:
    reg, remote = pushed
    r = cli("push", "--delete", "pets@v1")
    assert r.exit_code == 0, r.stderr
    assert "Deleted pets@v1" in r.stderr
    assert {(t.dataset, t.tag) for t in dsreg.ls(remote=str(remote))} == {("pets", "v2")}
    assert (remote / "info" / "refs").read_text() == "pets/v2\n"
    last = parse_log((remote / "logs" / "pets.jsonl").read_bytes())[-1]
    assert (last.event, last.tag, last.new) == ("delete", "v1", None)
    assert last.old == reg.refs.get("pets", "v1")
    assert reg.refs.get("pets", "v1") is not None  # nothing here changes


@pytest.mark.parametrize(
    "args",
    [
        ("push", "--delete", "pets@nope"),
        ("push", "--delete", "ghost@v1"),
        ("push", "--delete", "pets@v1", "pets@nope"),
        ("push", "--delete", "pets@v1", "--remote", "http://127.0.0.1:9/dsreg"),
    ],
)
def test_push_delete_bad_input_deletes_nothing(
    cli: Cli, pushed: tuple[Registry, Path], args: tuple[str, ...]
) -> None:
    reg, remote = pushed
    before, here = state(remote), state(reg.root)
    r = cli(*args)
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1
    assert state(remote) == before
    assert state(reg.root) == here


def test_push_delete_on_s3(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    reg = make_registry()
    dsreg.add("pets", make_imagefolder(), tag="v1", registry=reg)
    url = f"s3://lab/{tmp_path.name}/dsreg"
    dsreg.remote_add("s3", url, options={"endpointurl": s3_endpoint}, registry=reg)
    dsreg.push(remote="s3", registry=reg)
    res = dsreg.push("pets@v1", remote="s3", delete=True, registry=reg)
    assert [r.status for r in res.refs] == ["deleted"]
    with pytest.raises(dsreg.RevisionNotFoundError, match="holds no tags"):
        dsreg.ls(remote="s3", registry=reg)
    with pytest.raises(dsreg.RevisionNotFoundError, match="holds no tag pets@v1"):
        dsreg.push("pets@v1", remote="s3", delete=True, registry=reg)


def test_yanks_and_retirements_travel_with_push_pull_and_clone(
    cli: Cli,
    pushed: tuple[Registry, Path],
    make_imagefolder: Callable[..., Path],
    make_registry: Callable[..., Registry],
    tmp_path: Path,
) -> None:
    _reg, remote = pushed
    assert cli("add", "pets2", str(make_imagefolder("b", seed=3)), "--tag", "v1").exit_code == 0
    assert cli("yank", "pets@v1", "--reason", "leaked").exit_code == 0
    assert cli("retire", "pets", "--successor", "pets2", "--reason", "replaced").exit_code == 0
    r = cli("push", "--json")
    assert r.exit_code == 0, r.stderr
    assert {m["status"] for m in json.loads(r.stdout)["marks"]} == {"yank", "retire"}
    events = [e.event for e in parse_log((remote / "logs" / "pets.jsonl").read_bytes())]
    assert "yank" in events and "retire" in events

    fresh = dsreg.clone(str(remote), tmp_path / "clone")
    with pytest.warns(dsreg.YankedWarning) as told:
        dsreg.open("pets@v1", registry=fresh.registry)
    said = " ".join(str(w.message) for w in told)
    assert "leaked" in said and "use pets2 instead" in said
    assert ("pets", "v1") not in {(t.dataset, t.tag) for t in dsreg.ls(registry=fresh.registry)}

    other = make_registry("other")
    dsreg.remote_add("origin", str(remote), default=True, registry=other)
    dsreg.pull("pets", registry=other)
    every = {(t.dataset, t.tag): t.yanked for t in dsreg.ls(all=True, registry=other)}
    assert every[("pets", "v1")] == {"reason": "leaked"}

    # Lifted here, then pushed: the remote's yank goes too (logged there).
    assert cli("yank", "pets@v1", "--undo").exit_code == 0
    assert cli("push", "pets").exit_code == 0
    assert not (remote / "yanked" / "pets" / "v1").exists()
    last = [e for e in parse_log((remote / "logs" / "pets.jsonl").read_bytes())][-1]
    assert last.event == "unyank"
