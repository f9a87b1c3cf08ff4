"""The remote commands as a user types them: remote add/ls/remove, push, pull, clone,
import-dvc; data on stdout, messages on stderr, errors exit 1 with ``Error:``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]


def _setup(cli: Cli, make_imagefolder: Callable[..., Path]) -> Path:
    tree = make_imagefolder("pets", classes=["cat", "dog"], per_class=3)
    assert cli("init").exit_code == 0
    r = cli("add", "pets", str(tree), "--tag", "v1")
    assert r.exit_code == 0, r.stderr
    return tree


@pytest.mark.parametrize(
    "args",
    [
        ["remote", "-h"],
        ["remote", "add", "-h"],
        ["remote", "ls", "-h"],
        ["remote", "remove", "-h"],
        ["push", "-h"],
        ["pull", "-h"],
        ["clone", "-h"],
        ["import-dvc", "-h"],
    ],
)
def test_every_command_has_help(cli: Cli, args: list[str]) -> None:
    r = cli(*args)
    assert r.exit_code == 0 and "Usage:" in r.stdout


def test_remote_add_ls_remove(cli: Cli, tmp_path: Path) -> None:
    assert cli("init").exit_code == 0
    r = cli("remote", "add", "origin", "./store", "--default")
    assert r.exit_code == 0 and "origin" in r.stderr and r.stdout == ""
    r = cli("remote", "add", "lab", "s3://bucket/dsreg", "-o", "region=eu-west-1", "--json")
    assert json.loads(r.stdout) == {
        "name": "lab",
        "url": "s3://bucket/dsreg",
        "options": {"region": "eu-west-1"},
        "default": False,
    }
    r = cli("remote", "ls")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[1].startswith("  lab ") and "region=eu-west-1" in lines[1]
    assert lines[2].startswith("* origin ") and str(tmp_path / "store") in lines[2]
    assert cli("remote", "remove", "lab").exit_code == 0
    assert [x["name"] for x in json.loads(cli("remote", "ls", "--json").stdout)] == ["origin"]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["remote", "add", "s3", "s3://b/p", "-o", "secret_access_key=x"], "credential"),
        (["remote", "add", "bad", "foo://b/p"], "foo://"),
        (["remote", "add", "Bad Name", "/tmp/x"], "invalid remote name"),
        (["remote", "remove", "nope"], "no remote 'nope'"),
        (["push"], "no remote given and no default remote"),
        (["pull", "-r", "nope"], "no remote 'nope'"),
    ],
)
def test_errors_exit_1_with_a_message(cli: Cli, args: list[str], match: str) -> None:
    assert cli("init").exit_code == 0
    r = cli(*args)
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: ") and match in r.stderr


def test_push_clone_pull_checkout(
    cli: Cli, make_imagefolder: Callable[..., Path], tmp_path: Path
) -> None:
    tree = _setup(cli, make_imagefolder)
    assert cli("remote", "add", "origin", "./store", "--default").exit_code == 0
    r = cli("push")
    assert r.exit_code == 0, r.stderr
    tag, digest, status = r.stdout.strip().split("\t")
    assert (tag, status) == ("pets@v1", "created") and digest.startswith("blake3:")
    assert "9 objects sent" in r.stderr  # 6 files, examples, snapshot, revision
    r = cli("push", "pets@v1", "--json")
    assert json.loads(r.stdout)["objects_sent"] == 0

    r = cli("clone", "./store", "lab")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "lab")
    r = cli("pull", "--registry", "lab", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["objects_fetched"] == 6  # the payloads the clone left behind
    r = cli("checkout", "pets@v1", "out", "--registry", "lab", "--link", "copy")
    assert r.exit_code == 0, r.stderr
    for p in tree.rglob("*.bin"):
        assert (tmp_path / "out" / p.relative_to(tree)).read_bytes() == p.read_bytes()


def test_push_of_a_moved_tag_is_refused_without_force(
    cli: Cli, make_imagefolder: Callable[..., Path]
) -> None:
    _setup(cli, make_imagefolder)
    assert cli("push", "-r", "./store").exit_code == 0
    other = make_imagefolder("other", seed=3)
    assert cli("add", "pets", str(other), "--tag", "v1", "--force").exit_code == 0
    r = cli("push", "-r", "./store")
    assert r.exit_code == 1 and "pets@v1" in r.stderr and "--force" in r.stderr
    r = cli("push", "-r", "./store", "--force")
    assert r.exit_code == 0 and r.stdout.strip().endswith("moved")


def _git_dvc_project(root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(DVC_NO_ANALYTICS="1", GIT_CONFIG_NOSYSTEM="1")
    for var in ("DVC_SITE_CACHE_DIR", "DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR"):
        env[var] = str(root.parent / var.lower())
    for rel, data in {"cat/1.bin": b"meow" * 9, "dog/2.bin": b"woof" * 11}.items():
        (root / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "data" / rel).write_bytes(data)
    dvc = [sys.executable, "-m", "dvc"]
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.name", "dsreg tests"],
        ["git", "config", "user.email", "tests@dsreg.invalid"],
        [*dvc, "init", "-q"],
        [*dvc, "add", "-q", "data"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "data"],
    ):
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr


def test_import_dvc(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: import-dvc reads a git repository")
    project = tmp_path / "project"
    project.mkdir()
    _git_dvc_project(project)
    for var in ("DVC_SITE_CACHE_DIR", "DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    assert cli("init").exit_code == 0
    r = cli("import-dvc", "./project", "data", "--rev", "HEAD", "--as", "pets", "--tag", "original")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip().startswith("blake3:") and "commit" in r.stderr
    r = cli("show", "pets@original", "--json")
    source = json.loads(r.stdout)["source"]
    assert source["kind"] == "dvc" and source["path"] == "data" and source["rev"] == "HEAD"
    r = cli("import-dvc", "./project", "nowhere", "--as", "pets")
    assert r.exit_code == 1 and "does not exist" in r.stderr
