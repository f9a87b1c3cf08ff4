"""benchmarks/audit_thresholds.py: a kind left out (``--images 0``, ``--flat 0``, ``--texts 0``)
is said to be not measured and the others' curves are given alone; a size it cannot measure is
one line and exit status 1, before any curve; at the defaults, the targets are met on
photographs and on flat synthetic images."""

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


_IMAGE_CURVES = [
    "images, every transformation (pHash bits with crops, pixel check)",
    "images, pHash alone (no pixel check)",
    "images, pixel tolerance at the default 10 bits",
    # Which copies are cropped decides the counts of these two curves.
    "images, crops left out",
    "images, cropped copies only",
    "images, full-image pHash only (no crops, no pixel check)",
]
_FLAT_CURVES = [
    "flat synthetic images (pHash bits with crops, pixel check)",
    "flat synthetic images, pHash alone (no pixel check)",
    "flat synthetic images, pixel tolerance at the default 10 bits",
]
_BITS = ["4", "6", "8", "10", "12", "14", "16"]
_TOLERANCES = ["0.3", "0.5", "0.7", "0.9", "1.2", "1.5", "2.0"]


def _check_rows(curves: dict[str, list[list[str]]]) -> None:
    for heading, rows in curves.items():
        steps = _TOLERANCES if "pixel tolerance" in heading else _BITS
        assert [r[0] for r in rows] == steps
        assert all(0.0 <= float(r[1]) <= 1.0 and 0.0 <= float(r[2]) <= 1.0 for r in rows)


def test_no_texts_measures_the_images_alone(run: Run) -> None:
    res = run("--texts", "0", "--flat", "0", "--images", "4")
    assert res.returncode == 0, res.stderr
    curves = _curves(res.stdout)
    assert curves.pop("texts: not measured (--texts 0)") == []
    assert curves.pop("flat synthetic images: not measured (--flat 0)") == []
    assert [heading.split(":")[0] for heading in curves] == _IMAGE_CURVES
    headings = list(curves)
    assert all(h.endswith(": 2 copies, 2 unrelated") for h in headings[:3] + headings[5:])
    _check_rows(curves)


def test_flat_synthetic_images_alone(run: Run) -> None:
    res = run("--texts", "0", "--images", "0", "--flat", "4")
    assert res.returncode == 0, res.stderr
    curves = _curves(res.stdout)
    assert curves.pop("texts: not measured (--texts 0)") == []
    assert curves.pop("images: not measured (--images 0)") == []
    assert list(curves) == [f"{h}: 2 copies, 2 unrelated" for h in _FLAT_CURVES]
    _check_rows(curves)


def test_the_defaults_meet_the_targets_on_photographs_and_flat_images(run: Run) -> None:
    """At the default thresholds (10 bits, pixel tolerance 0.9), on the benchmark's default
    sets: recall and precision at least 0.95 on photographs and on flat synthetic images."""
    res = run("--texts", "0")
    assert res.returncode == 0, res.stderr
    curves = {h.split(":")[0]: rows for h, rows in _curves(res.stdout).items()}
    for name in (_IMAGE_CURVES[0], _FLAT_CURVES[0]):
        at_default = next(r for r in curves[name] if r[0] == "10")
        recall, precision = float(at_default[1]), float(at_default[2])
        print(f"{name}: recall {recall}, precision {precision}")
        assert recall >= 0.95 and precision >= 0.95
    for name in (_IMAGE_CURVES[2], _FLAT_CURVES[2]):
        at_default = next(r for r in curves[name] if r[0] == "0.9")
        assert float(at_default[1]) >= 0.95 and float(at_default[2]) >= 0.95


def test_no_images_measures_the_texts_alone(run: Run) -> None:
    res = run("--images", "0", "--flat", "0", "--texts", "4")
    assert res.returncode == 0, res.stderr
    curves = _curves(res.stdout)
    assert curves.pop("images: not measured (--images 0)") == []
    assert curves.pop("flat synthetic images: not measured (--flat 0)") == []
    assert list(curves) == ["texts (3-word shingle Jaccard): 2 copies, 2 unrelated"]
    rows = curves["texts (3-word shingle Jaccard): 2 copies, 2 unrelated"]
    assert [r[0] for r in rows] == ["0.1", "0.15", "0.2", "0.25", "0.3", "0.35", "0.4", "0.5"]
    # Two verbatim-but-edited copies and two unrelated docstrings: found at the default 0.3.
    assert rows[4][1:] == ["1.000", "1.000", "0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--images", "1"], "argument --images: 1 is not a set size: give 0 to leave"),
        (["--flat", "1"], "argument --flat: 1 is not a set size: give 0 to leave"),
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
