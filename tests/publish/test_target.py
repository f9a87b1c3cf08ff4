"""``dsreg publish site`` and ``dsreg export --to site``: a bare word is a configured remote's name,
or a folder here when no remote has that name; when it is both, the command is refused in one
line naming both and how to say which (``./site``, or the remote's URL), and nothing is
written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dsreg
from tests.conftest import CliResult


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A registry with one tagged label-only set; its root."""
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "l.npy", np.array([0, 1, 1, 0], dtype=np.int64))
    dsreg.add("toy", labels=tmp_path / "l.npy", classes=["a", "b"], tag="v1", registry=reg)
    return reg.root


def _files(folder: Path) -> list[str]:
    return (
        sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
        if folder.exists()
        else []
    )


@pytest.mark.parametrize("command", [["publish", "site"], ["export", "toy@v1", "--to", "site"]])
def test_a_word_naming_both_a_remote_and_a_folder_here_is_refused_naming_both(
    toy: Path, tmp_path: Path, cli: Callable[..., CliResult], command: list[str]
) -> None:
    elsewhere = tmp_path / "bucket"
    reg = ("--registry", str(toy))
    assert cli("remote", "add", "site", str(elsewhere), *reg).exit_code == 0
    (tmp_path / "site").mkdir()  # cli runs in tmp_path
    res = cli(*command, *reg)
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1, res.stderr
    assert "names both the remote site" in res.stderr and str(elsewhere) in res.stderr
    assert "write ./site for the folder" in res.stderr
    assert _files(tmp_path / "site") == [] and not elsewhere.exists()
    # Said either way, it goes where it is told.
    assert cli(*command[:-1], "./site", *reg).exit_code == 0
    assert _files(tmp_path / "site") and not elsewhere.exists()
    assert cli(*command[:-1], str(elsewhere), *reg).exit_code == 0
    assert _files(elsewhere)


def test_a_word_naming_only_a_folder_here_is_that_folder(
    toy: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    (tmp_path / "site").mkdir()
    res = cli("publish", "site", "--registry", str(toy))
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_word_naming_neither_is_refused_saying_how_to_name_a_new_folder(
    toy: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    res = cli("publish", "site", "--registry", str(toy))
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert "no remote 'site'" in res.stderr and "write ./site for a folder" in res.stderr
    assert not (tmp_path / "site").exists()
    assert cli("publish", "./site", "--registry", str(toy)).exit_code == 0
    assert (tmp_path / "site" / "index.html").is_file()
