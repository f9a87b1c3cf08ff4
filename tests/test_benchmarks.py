"""The benchmarks' one way of declaring and checking a target (``benchmarks/_common.py``) and
``make bench``'s runner (``benchmarks/bench_all.py``): a missed target is printed as FAIL with the
commit measured and makes the exit status 1; the runner runs every benchmark, then fails if one
did. No benchmark is timed here: the scripts run are stand-ins that print what they are told."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

BENCHMARKS = REPO / "benchmarks"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def common(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common

    return _common


def _script(path: Path, figures: dict[str, float | None]) -> Path:
    """A benchmark stand-in: declares two targets, checks them on the figures given."""
    path.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(BENCHMARKS)!r})
        from _common import Checks, Target
        FAST = Target("wall time: baseline / dsreg", ">=", 10)
        SMALL = Target("peak RSS", "<", 1024, "MiB")
        checks = Checks("stand-in")
        checks.check(FAST, {figures["fast"]!r})
        checks.check(SMALL, {figures["small"]!r})
        open({str(path.with_suffix(".ran"))!r}, "w").close()
        sys.exit(checks.finish())
        """)
    )
    return path


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True)


def test_a_missed_target_fails_the_run_naming_the_commit(tmp_path: Path, common: Any) -> None:
    met = _run(_script(tmp_path / "met.py", {"fast": 12.5, "small": 700.0}))
    assert met.returncode == 0, met.stdout + met.stderr
    at = common.commit()
    assert met.stdout.splitlines()[0] == f"stand-in: measuring commit {at}"
    assert (
        "PASS  wall time: baseline / dsreg" in met.stdout
        and "12.50x  (target >= 10x)" in met.stdout
    )
    assert met.stdout.strip().endswith(f"stand-in at commit {at}: 2 of 2 targets met")

    missed = _run(_script(tmp_path / "missed.py", {"fast": 9.99, "small": 700.0}))
    assert missed.returncode == 1
    assert "FAIL  wall time: baseline / dsreg" in missed.stdout
    assert "1 of 2 targets met; MISSED: wall time: baseline / dsreg" in missed.stdout

    # A target declared and not measured is missed, not passed over.
    unmeasured = _run(_script(tmp_path / "unmeasured.py", {"fast": 12.5, "small": None}))
    assert unmeasured.returncode == 1
    assert "FAIL  peak RSS" in unmeasured.stdout and "not measured" in unmeasured.stdout


def test_targets_compare_as_declared(common: Any) -> None:
    at_least = common.Target("speed", ">=", 10)
    below = common.Target("memory", "<", 1024, "MiB")
    assert at_least.met(10) and not at_least.met(9.999)
    assert below.met(1023.9) and not below.met(1024)
    assert str(at_least) == ">= 10x" and str(below) == "< 1024 MiB"
    with pytest.raises(ValueError, match="op '=>'"):
        common.Target("typo", "=>", 1)


def test_the_commit_is_marked_dirty_when_a_tracked_file_differs(
    tmp_path: Path, common: Any
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    _git(repo, "add", "a.txt")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "--short", "HEAD")
    assert common.commit(repo) == head
    (repo / "untracked.txt").write_text("results\n")  # a benchmark's output: not a change
    assert common.commit(repo) == head
    (repo / "a.txt").write_text("two\n")
    assert common.commit(repo) == f"{head}+dirty"
    assert common.commit(tmp_path / "not-a-repo") == "unknown"


def test_make_bench_runs_every_benchmark_then_fails_if_one_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_all

    _script(tmp_path / "first.py", {"fast": 20.0, "small": 10.0})
    _script(tmp_path / "second.py", {"fast": 2.0, "small": 10.0})  # misses its speed target
    _script(tmp_path / "third.py", {"fast": 20.0, "small": 10.0})
    runs = [("first.py",), ("second.py",), ("third.py",)]
    assert bench_all.run_all(runs, tmp_path) == 1
    assert all((tmp_path / f"{name}.ran").exists() for name in ("first", "second", "third"))
    out = capsys.readouterr().out
    assert "2 of 3 met every target" in out
    assert f"MISSED a target (or did not finish): {tmp_path.name}/second.py" in out
    (tmp_path / "second.py").unlink()
    _script(tmp_path / "second.py", {"fast": 20.0, "small": 10.0})
    assert bench_all.run_all(runs, tmp_path) == 0


def test_make_bench_runs_the_runner() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "benchmarks/bench_all.py" in recipe
