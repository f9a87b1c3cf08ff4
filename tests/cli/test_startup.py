"""The command line stays quick to start: a re-add of an unchanged tree, a listing and a help
text load none of the data libraries (the CLI imports ``dsreg``, which imports them when a
function needs them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import dsreg
from dsreg.ingest import treescan

HEAVY = (
    "numpy",
    "pyarrow",
    "duckdb",
    "dvc",
    "dvc_data",
    "fsspec",
    "pandas",
    "matplotlib",
    "torch",
    "datasets",
    "PIL",
    "ray",
)

_REPO = Path(__file__).resolve().parents[2]

_RUN = """
import json, sys
from dsreg.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
loaded = set(sys.modules) | {m.split(".")[0] for m in sys.modules}
heavy = sorted(loaded & set(json.loads(sys.stdin.read())))
sys.stderr.write("HEAVY " + json.dumps(heavy) + "\\n")
"""


def heavy_modules(cwd: Path, *args: str, names: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of ``names`` (packages, or modules by their full name) ``dsreg ARGS`` imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    # The dsreg beside these tests, whichever one the interpreter would find installed.
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        input=json.dumps(names),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY ")][-1]
    found: list[str] = json.loads(line.removeprefix("HEAVY "))
    return found


def test_re_adding_an_unchanged_tree_loads_no_data_library(
    tmp_path: Path,
    make_imagefolder: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = make_imagefolder("tree", per_class=3)
    # Files written moments ago are "racy" (treescan.py): count them as settled, so that this
    # first add remembers its scan.
    monkeypatch.setattr(treescan, "RACY_NS", 0)
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    first = dsreg.add("ds", tree, tag="v1", registry=reg)
    assert heavy_modules(tmp_path, "add", "ds", str(tree), "--tag", "v1") == []
    assert dsreg.open("ds@v1", registry=reg).digest == first.revision
    for args in (["ls"], ["log", "ds"], ["tag", "-h"], ["--help"], ["--version"]):
        assert heavy_modules(tmp_path, *args) == [], args


def test_a_checkout_checks_its_table_without_arrow_s_compute_module(
    tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> None:
    """A checkout reads and checks its examples table with Arrow's kernels called by name:
    it never loads ``pyarrow.compute`` (a tenth of a second: it wraps every kernel as it
    loads), and still places every file."""
    tree = make_imagefolder("tree", per_class=3)
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    dsreg.add("ds", tree, tag="v1", registry=reg)
    out = tmp_path / "out"
    args = ("checkout", "ds@v1", str(out), "--link", "hardlink")
    assert heavy_modules(tmp_path, *args, names=("pyarrow.compute",)) == []
    placed = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert [p for p in placed if p.name != ".dsreg.json"] == sorted(
        p.relative_to(tree) for p in tree.rglob("*") if p.is_file()
    )


# What a tag, a show or a read has no use for: the stat cache and SQLite, a batch's worker pool
# (pickle, queue), config.toml and its TOML reader and writer, libc through ctypes (syncfs),
# Unicode normalisation (lookalike ids). A tag also has no use for the yank and retirement
# marks (read only where a mark may be in place), the remote reads, or the text of a show.
NOT_FOR_A_TAG = (
    "sqlite3",
    "dsreg.registry.state",
    "pickle",
    "queue",
    "dsreg._util.parallel",
    "dsreg.objects.batch",
    "tomllib",
    "tomli_w",
    "ctypes",
    "unicodedata",
    "dsreg.registry.config",
    "dsreg.registry.marks",
    "dsreg.api.reading",
    "dsreg.cli.evaltext",
)


def test_a_tag_of_a_view_loads_only_what_it_uses(tmp_path: Path) -> None:
    """``dsreg tag NEW SRC --view V`` reads two manifests and a tag and writes a revision and a
    log line: it imports nothing of what adds, checkouts, gc or remotes need, and still tags."""
    (tmp_path / "labels.csv").write_text("label\n" + "cat\ndog\n" * 3)
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    dsreg.add("lab", labels=tmp_path / "labels.csv", tag="original", registry=reg)
    args = ("tag", "lab@clean", "lab@original", "--view", "cleaned")
    assert heavy_modules(tmp_path, *args, names=HEAVY + NOT_FOR_A_TAG) == []
    assert dsreg.open("lab@clean", registry=reg).view == "cleaned"
    # A tag moved in place, as the start-up benchmark times it, loads no more.
    assert heavy_modules(tmp_path, *args, "--force", names=NOT_FOR_A_TAG) == []


def test_a_repeated_tag_of_a_view_does_not_load_the_schema_validator(tmp_path: Path) -> None:
    """A manifest whose verified bytes passed the schema check once is not checked again (the
    hash check still runs), so a tag reading and writing only such manifests never imports
    jsonschema_rs (whose extension imports email, socket and decimal)."""
    (tmp_path / "labels.csv").write_text("label\n" + "cat\ndog\n" * 3)
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    dsreg.add("lab", labels=tmp_path / "labels.csv", tag="original", registry=reg)
    args = ("tag", "lab@clean", "lab@original", "--view", "cleaned", "--force")
    heavy_modules(tmp_path, *args)
    assert heavy_modules(tmp_path, *args, names=("jsonschema_rs",)) == []
    assert dsreg.open("lab@clean", registry=reg).view == "cleaned"


_CLI_MODULES = """
import sys
from dsreg.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
loaded = sorted(m for m in sys.modules if m.startswith("dsreg.cli") or m == "click")
sys.stderr.write("LOADED " + " ".join(loaded) + "\\n")
"""

_COMMAND_MODULES = {
    "dsreg.cli.core",
    "dsreg.cli.overlays",
    "dsreg.cli.query",
    "dsreg.cli.remotes",
    "dsreg.cli.reviewing",
}


def cli_modules(cwd: Path, *args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _CLI_MODULES, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("LOADED ")][-1]
    return set(line.removeprefix("LOADED ").split())


def test_a_command_loads_its_own_commands_module_alone(tmp_path: Path) -> None:
    """Start-up does not grow with the number of commands: ``dsreg tag`` imports the module of
    the registry commands and no other command's, ``dsreg overlay ls`` the overlay commands',
    and ``dsreg --version`` none, nor click."""
    assert cli_modules(tmp_path, "tag", "-h") & _COMMAND_MODULES == {"dsreg.cli.core"}
    assert cli_modules(tmp_path, "overlay", "ls", "-h") & _COMMAND_MODULES == {"dsreg.cli.overlays"}
    version = cli_modules(tmp_path, "--version")
    assert not version & _COMMAND_MODULES and "click" not in version
