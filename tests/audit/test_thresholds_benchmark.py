"""benchmarks/audit_thresholds.py: either kind left out (``--images 0`` or ``--texts 0``) gives
the other kind's curve alone and says the skipped kind was not measured; a size it cannot
measure is one line and exit status 1, before any curve."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "audit_thresholds.py"
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(dsreg_env: Callable[..., dict[str, str]]) -> Run:
    """``run(*args)``: the benchmark in a fresh Python process, as a user runs it."""

    def go(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            env=dsreg_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )

    return go


def _curves(stdout: str) -> dict[str, list[list[str]]]:
    """Each curve's heading and its rows (threshold, recall, precision, false positives)."""
    curves: dict[str, list[list[str]]] = {}
    for block in stdout.strip().split("\n\n"):
        heading, *lines = block.strip().splitlines()
        curves[heading] = [line.split() for line in lines[1:]]
    return curves


def test_no_texts_measures_the_images_alone(run: Run) -> None:
    res = run("--texts", "0", "--images", "4")
    assert res.returncode == 0, res.stderr
    curves = _curves(res.stdout)
    assert curves.pop("texts: not measured (--texts 0)") == []
    # Which copies are cropped decides the counts of the middle two curves.
    assert [heading.split(":")[0] for heading in curves] == [
        "images, every transformation (pHash Hamming bits, with crops)",
        "images, crops left out",
        "images, cropped copies only",
        "images, full-image pHash only (no crops)",
    ]
    assert all(h.endswith(": 2 copies, 2 unrelated") for h in list(curves)[::3])
    for rows in curves.values():
        assert [r[0] for r in rows] == ["4", "6", "8", "10", "12", "14", "16"]
        assert all(0.0 <= float(r[1]) <= 1.0 and 0.0 <= float(r[2]) <= 1.0 for r in rows)


def test_no_images_measures_the_texts_alone(run: Run) -> None:
    res = run("--images", "0", "--texts", "4")
    assert res.returncode == 0, res.stderr
    curves = _curves(res.stdout)
    assert curves.pop("images: not measured (--images 0)") == []
    assert list(curves) == ["texts (3-word shingle Jaccard): 2 copies, 2 unrelated"]
    rows = curves["texts (3-word shingle Jaccard): 2 copies, 2 unrelated"]
    assert [r[0] for r in rows] == ["0.1", "0.15", "0.2", "0.25", "0.3", "0.35", "0.4", "0.5"]
    # Two verbatim-but-edited copies and two unrelated docstrings: found at the default 0.3.
    assert rows[4][1:] == ["1.000", "1.000", "0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--images", "1"], "argument --images: 1 is not a set size: give 0 to leave"),
        (["--texts", "-2"], "argument --texts: -2 is not a set size"),
        (["--texts", "many"], "argument --texts: 'many' is not a whole number"),
        (["--images", "0", "--texts", "100000"], "--texts 100000: the standard library gives"),
        (["--texts", "0", "--images", "100000"], "--images 100000: 150000 tiles asked for"),
    ],
)
def test_a_size_it_cannot_measure_is_one_line(run: Run, args: list[str], message: str) -> None:
    res = run(*args)
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
