"""``make demo`` and ``make test`` say what they install before each install step (``make -n``
lists the recipes a fresh clone runs, without running them)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A line of a recipe that installs something, and one that says what comes.
_INSTALLS = re.compile(r"-m venv |pip install |apt-get install ")
_SAYS = re.compile(r'^\s*echo "make( demo| test)?: ')


def recipes(target: str, tmp_path: Path) -> list[str]:
    """The recipe lines ``make TARGET`` runs on a fresh clone (no .venv yet), in order."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    proc = subprocess.run(
        ["make", "-n", "-B", target, f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("target", ["demo", "test"])
def test_each_install_step_is_announced(target: str, tmp_path: Path) -> None:
    lines = recipes(target, tmp_path)
    installs = [i for i, line in enumerate(lines) if _INSTALLS.search(line)]
    assert len(installs) >= 2, lines
    said = -1
    for i in installs:
        announced = [j for j in range(said + 1, i) if _SAYS.search(lines[j])]
        assert announced, f"nothing said before: {lines[i].strip()}"
        said = i


def test_make_demo_says_how_long_a_first_run_takes(tmp_path: Path) -> None:
    said = " ".join(line for line in recipes("demo", tmp_path) if _SAYS.search(line))
    assert re.search(r"a first run installs \d+ packages .*\bminute", said), said
