"""A remote's yanks and retirements as readers meet them: ``ls --remote`` leaves yanked tags
out (``--all`` marks them) and names retired datasets' successors, ``open(remote=)`` warns
with the reason, a damaged remote mark is named and not applied; ``verify`` checks this
registry's yank and retirement refs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import Registry

Cli = Callable[..., Any]


@pytest.fixture
def marked(cli: Cli, tmp_path: Path, make_imagefolder: Callable[..., Path]) -> Path:
    """A folder remote holding pets@v1, pets@v2 (yanked) and pets2@v1; pets is retired for
    pets2."""
    assert cli("init").exit_code == 0
    tree = make_imagefolder("a", classes=2, per_class=2)
    assert cli("add", "pets", str(tree), "--tag", "v1").exit_code == 0
    assert cli("add", "pets2", str(make_imagefolder("b", seed=3)), "--tag", "v1").exit_code == 0
    assert cli("tag", "pets@v2", "pets@v1").exit_code == 0
    assert cli("yank", "pets@v2", "--reason", "labels <leaked>").exit_code == 0
    assert cli("retire", "pets", "--successor", "pets2", "--reason", "replaced").exit_code == 0
    remote = tmp_path / "remote"
    assert cli("push", "-r", str(remote)).exit_code == 0
    return remote


@pytest.fixture
def elsewhere(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with no registry above it (not below the test's tmp_path, which holds
    the registry that made the marks), and an empty per-user cache."""
    where = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(where)
    monkeypatch.setenv("DSREG_CACHE", str(where / "cache"))
    return where


def test_ls_remote_leaves_out_yanked_tags_and_names_retirements(
    cli: Cli, marked: Path, elsewhere: Path
) -> None:
    tags = dsreg.ls(remote=str(marked))
    assert [(t.dataset, t.tag) for t in tags] == [("pets", "v1"), ("pets2", "v1")]
    assert tags.retired == {"pets": {"successor": "pets2", "reason": "replaced"}}
    every = {(t.dataset, t.tag): t.yanked for t in dsreg.ls(remote=str(marked), all=True)}
    assert every[("pets", "v2")] == {"reason": "labels <leaked>"}
    res = cli("ls", "--remote", str(marked), "--all")
    assert res.exit_code == 0, res.stderr
    assert "v2 (yanked)" in res.stdout
    assert "Dataset pets is retired: replaced; use pets2 instead" in res.stderr
    listed = json.loads(cli("ls", "--remote", str(marked), "--json").stdout)
    assert {(t["dataset"], t["tag"]) for t in listed} == {("pets", "v1"), ("pets2", "v1")}


def test_open_from_a_remote_warns_of_its_yank_and_retirement(marked: Path, elsewhere: Path) -> None:
    with pytest.warns(dsreg.YankedWarning) as told:
        ds = dsreg.open("pets@v2", remote=str(marked))
    said = [str(w.message) for w in told]
    assert "pets@v2 is yanked: labels <leaked>" in said
    assert "dataset pets is retired: replaced; use pets2 instead" in said
    assert len(ds) == 4
    assert ds.registry.root == elsewhere / "cache"  # read into the cache: the remote's marks
    with pytest.warns(dsreg.YankedWarning, match="retired"):
        dsreg.show("pets@v1", remote=str(marked))


def test_a_damaged_remote_mark_is_named_and_not_applied(
    cli: Cli, marked: Path, elsewhere: Path
) -> None:
    (marked / "yanked" / "pets" / "v2").write_text("not a digest\n")
    tags = dsreg.ls(remote=str(marked))
    assert ("pets", "v2") in {(t.dataset, t.tag) for t in tags}  # served unmarked
    assert list(tags.unusable) == ["pets@v2"]
    res = cli("ls", "--remote", str(marked))
    assert "Not applied: the mark of pets@v2" in res.stderr and "damaged" in res.stderr


def test_verify_reports_damaged_yank_and_retirement_refs(cli: Cli, marked: Path) -> None:
    reg = Registry(Path(".dsreg").resolve())
    assert cli("verify").exit_code == 0
    (reg.root / "yanked" / "pets" / "v2").chmod(0o644)
    (reg.root / "yanked" / "pets" / "v2").write_text("garbage\n")
    retired = reg.root / "retired" / "pets" / "pets2"
    retired.chmod(0o644)
    retired.write_text(dsreg.show("pets2@v1", registry=reg).revision + "\n")  # not a mark
    res = cli("verify")
    assert res.exit_code == 1
    assert "mark yanked/pets/v2 cannot be used" in res.stdout + res.stderr
    assert "mark retired/pets/pets2 cannot be used" in res.stdout + res.stderr
    # Not applied: ls lists v2 again, and nothing warns of the retirement.
    tags = {(t.dataset, t.tag) for t in dsreg.ls(registry=reg)}
    assert ("pets", "v2") in tags
    dsreg.open("pets@v1", registry=reg)  # a warning would fail the test (filterwarnings)
