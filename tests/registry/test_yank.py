"""Yanked tags and retired datasets (PEP 592's yank): left out of listings, resolved when named
exactly with their reason, logged; bad input refused with nothing written."""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import Registry

Cli = Callable[..., Any]


def state(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


@pytest.fixture
def reg(cli: Cli, tmp_path: Path, make_imagefolder: Callable[..., Path]) -> Registry:
    assert cli("init").exit_code == 0
    tree = make_imagefolder("val", classes=2, per_class=2)
    other = make_imagefolder("val2", classes=2, per_class=2, seed=1)
    for args in (("pets", str(tree), "--tag", "v1"), ("pets2", str(other), "--tag", "v1")):
        assert cli("add", *args).exit_code == 0
    assert cli("tag", "pets@v2", "pets@v1").exit_code == 0
    return Registry(tmp_path / ".dsreg")


def test_yanked_tag_leaves_ls_resolves_exactly_and_warns(cli: Cli, reg: Registry) -> None:
    r = cli("yank", "pets@v1", "--reason", "test rows leaked into train")
    assert r.exit_code == 0, r.stderr
    listed = json.loads(cli("ls", "--json").stdout)
    assert ("pets", "v1") not in {(t["dataset"], t["tag"]) for t in listed}
    every = json.loads(cli("ls", "--all", "--json").stdout)
    marked = {(t["dataset"], t["tag"]): t.get("yanked") for t in every}
    assert marked[("pets", "v1")] == {"reason": "test rows leaked into train"}
    assert "(yanked)" in cli("ls", "--all").stdout
    shown = cli("show", "pets@v1", "--json")
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["yanked"] == {"reason": "test rows leaked into train"}
    assert shown.stderr.strip().splitlines() == [
        "Warning: pets@v1 is yanked: test rows leaked into train"
    ]
    assert "yanked" not in json.loads(cli("show", "pets@v2", "--json").stdout)
    with pytest.warns(dsreg.YankedWarning, match="leaked"):
        ds = dsreg.open("pets@v1", registry=reg.root)
    assert len(ds.labels()) == 4
    events = [e.event for e in dsreg.log("pets", registry=reg.root)]
    assert events[-1] == "yank"


def test_checkout_and_eval_print_the_reason(cli: Cli, reg: Registry, tmp_path: Path) -> None:
    assert cli("yank", "pets@v1", "--reason", "bad labels").exit_code == 0
    r = cli("checkout", "pets@v1", str(tmp_path / "co"))
    assert r.exit_code == 0, r.stderr
    assert "Warning: pets@v1 is yanked: bad labels" in r.stderr


def test_eval_prints_the_reason(cli: Cli, reg: Registry, tmp_path: Path) -> None:
    assert cli("yank", "pets@v1", "--reason", "bad labels").exit_code == 0
    labels = dsreg.open("pets@v2", registry=reg.root).labels()["label"].to_numpy()
    preds = tmp_path / "m.npy"
    np.save(preds, labels.astype(np.int32))
    r = cli("eval", "pets@v1", str(preds), "--json")
    assert r.exit_code == 0, r.stderr
    assert "Warning: pets@v1 is yanked: bad labels" in r.stderr


def test_a_leaderboard_leaves_out_yanked_tags_unless_named(reg: Registry) -> None:
    labels = dsreg.open("pets@v2", registry=reg.root).labels()["label"].to_numpy()
    dsreg.record("pets@v2", labels.astype(np.int32), model="m", registry=reg.root)
    dsreg.yank("pets@v1", reason="leaked", registry=reg.root)
    board = dsreg.leaderboard("pets", resamples=0, registry=reg.root)
    assert [r.tag for r in board.revisions] == ["v2"]
    with pytest.warns(dsreg.YankedWarning, match="leaked"):
        named = dsreg.leaderboard("pets", revisions=["v1", "v2"], resamples=0, registry=reg.root)
    assert named.revisions[0].tag == "v1"  # v2 is the same revision


def test_gc_keeps_yanks_and_retirements(cli: Cli, reg: Registry) -> None:
    assert cli("yank", "pets@v1", "--reason", "kept").exit_code == 0
    assert cli("retire", "pets", "--successor", "pets2", "--reason", "kept too").exit_code == 0
    assert cli("gc", "--prune-log-older-than", "0s").exit_code == 0
    assert cli("verify").exit_code == 0
    shown = json.loads(cli("show", "pets@v1", "--json").stdout)
    assert shown["yanked"] == {"reason": "kept"}
    assert shown["retired"] == {"successor": "pets2", "reason": "kept too"}


def test_undo_lifts_the_yank_and_is_logged(cli: Cli, reg: Registry) -> None:
    assert cli("yank", "pets@v1", "--reason", "oops").exit_code == 0
    r = cli("yank", "pets@v1", "--undo")
    assert r.exit_code == 0, r.stderr
    listed = json.loads(cli("ls", "--json").stdout)
    assert ("pets", "v1") in {(t["dataset"], t["tag"]) for t in listed}
    assert cli("show", "pets@v1").stderr == ""
    assert [e.event for e in dsreg.log("pets", registry=reg.root)][-2:] == ["yank", "unyank"]


def test_retired_dataset_names_its_successor(cli: Cli, reg: Registry) -> None:
    r = cli("retire", "pets", "--successor", "pets2", "--reason", "superseded")
    assert r.exit_code == 0, r.stderr
    shown = cli("show", "pets@v2", "--json")
    assert json.loads(shown.stdout)["retired"] == {"successor": "pets2", "reason": "superseded"}
    assert "use pets2 instead" in shown.stderr
    with pytest.warns(dsreg.YankedWarning, match="pets2"):
        dsreg.open("pets@v1", registry=reg.root)
    assert dsreg.log("pets", registry=reg.root)[-1].event == "retire"


@pytest.mark.parametrize(
    "args",
    [
        ("yank", "pets@nope", "--reason", "x"),
        ("yank", "pets@v1", "--reason", "  "),
        ("yank", "pets@v1"),
        ("yank", "pets@v2", "--undo"),
        ("retire", "pets", "--successor", "ghost", "--reason", "x"),
        ("retire", "pets", "--successor", "pets2", "--reason", ""),
        ("retire", "pets", "--successor", "pets2"),
        ("retire", "pets", "--reason", "x"),
    ],
)
def test_bad_input_is_one_line_exit_1_nothing_written(
    cli: Cli, reg: Registry, args: tuple[str, ...]
) -> None:
    before = state(reg.root)
    r = cli(*args)
    assert r.exit_code == 1
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("Error: ")
    assert "Traceback" not in r.stderr
    assert state(reg.root) == before


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reason=st.text(alphabet=string.printable.strip() + "é ", min_size=1, max_size=80))
def test_any_printable_reason_round_trips(reg: Registry, reason: str) -> None:
    if not reason.strip():
        with pytest.raises(dsreg.InvalidInputError):
            dsreg.yank("pets@v1", reason=reason, registry=reg.root)
        return
    dsreg.yank("pets@v1", reason=reason, registry=reg.root)
    every = {(t.dataset, t.tag): t for t in dsreg.ls(all=True, registry=reg.root)}
    assert every[("pets", "v1")].yanked == {"reason": reason.strip()}
    assert ("pets", "v1") not in {(t.dataset, t.tag) for t in dsreg.ls(registry=reg.root)}
    dsreg.yank("pets@v1", undo=True, registry=reg.root)
