"""The house rules a reader relies on (docs/architecture.md, "House rules"): small modules and
functions, few parameters, prose about the code rather than its history, short commit subjects.
They are tests so that ``make test`` keeps them, not a reviewer's memory."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dsreg"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8
# The library functions behind a ``@command`` (or called by one with its options) take the
# command's options one for one, as keywords: their width is the command's, not a design choice
# inside the package.
CLI = PACKAGE / "cli"
# Subjects of commits after this one are held to the limit; older history stays as it was.
SUBJECTS_FROM = "d178cc2"
MAX_SUBJECT = 72
# Merged before this test held the limit, or written on a branch without it; history is not
# rewritten to shorten them.
SUBJECTS_KNOWN_LONG = frozenset(
    {
        "0b33b5d",
        "187f7ce",
        "1f6530b",
        "2d0cd60",
        "349dbed",
        "6c925e2",
        "8a405bf",
        "a5ba1ef",
        "ac5cd11",
        "bb1aba4",
        "e79d862",
        "fc182a6",
    }
)  # fmt: skip


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((rel, node))
    return out


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return len([n for n in names if n not in ("self", "cls")]) + bool(a.vararg) + bool(a.kwarg)


def test_no_module_is_over_600_lines() -> None:
    big = {
        path.relative_to(ROOT).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def test_no_function_is_over_80_lines() -> None:
    long = [
        f"{rel}:{node.lineno} {node.name} ({n} lines)"
        for rel, node in _functions()
        if (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def _mirrors_options() -> set[tuple[str, str]]:
    """``(file, function)`` of every library function ``cli/`` builds a command from or calls
    with a command's options (``module_api.function``), its module found through the CLI
    module's ``from dsreg.api import module as module_api``."""
    found = set()
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {
            alias.asname or alias.name: f"dsreg/api/{alias.name}.py"
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module == "dsreg.api"
            for alias in node.names
        }
        for node in ast.walk(tree):
            # A command's function (``@command(registry_api.add)``) or one a command body calls
            # with its options (``reviewing_api.review_finish(...)`` for ``review --finish``).
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                continue
            if node.value.id in modules:
                found.add((modules[node.value.id], node.attr))
    return found


def test_no_function_takes_more_than_8_parameters() -> None:
    mirrors = _mirrors_options()
    assert ("dsreg/api/registry.py", "add") in mirrors  # the scan finds the commands
    wide = [
        f"{rel}:{node.lineno} {node.name} ({n} parameters)"
        for rel, node in _functions()
        if (n := _parameters(node)) > MAX_PARAMETERS and (rel, node.name) not in mirrors
    ]
    assert not wide, f"functions over {MAX_PARAMETERS} parameters (use a dataclass): {wide}"


# The same pattern as `grep -rn "#[0-9]\|[Ss]ession [0-9]\|DESIGN.md" dsreg docs`, so colours are
# written without a leading digit after "#" (rgb() in CSS, named or tuple colours in plots).
HISTORY = re.compile(r"#[0-9]|[Ss]ession [0-9]|DESIGN\.md|ARCHITECTURE\.md|\.\./shared")


def test_prose_describes_the_code_not_its_history() -> None:
    """Issue and session numbers, and files outside the repository, mean nothing to a reader."""
    found = []
    for top in ("dsreg", "docs", "README.md"):
        paths = [ROOT / top] if top.endswith(".md") else sorted((ROOT / top).rglob("*"))
        for path in paths:
            if path.suffix not in (".py", ".md", ".html", ".js", ".css", ".toml"):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if HISTORY.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert not found, "history in the prose:\n" + "\n".join(found[:20])


def test_commit_subjects_fit_in_72_characters() -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no history to check")
    known = subprocess.run(
        [git, "-C", str(ROOT), "cat-file", "-e", f"{SUBJECTS_FROM}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        pytest.skip(f"shallow clone: commit {SUBJECTS_FROM} is not in this checkout")
    log = subprocess.run(
        [git, "-C", str(ROOT), "log", "--format=%h %s", f"{SUBJECTS_FROM}..HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    long = [
        line
        for line in log
        if len(line.split(" ", 1)[1]) > MAX_SUBJECT and line[:7] not in SUBJECTS_KNOWN_LONG
    ]
    assert not long, f"commit subjects over {MAX_SUBJECT} characters: {long}"
