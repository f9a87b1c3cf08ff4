"""`make demo` end to end: what a newcomer reads in its output holds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "demo" / "run.py"

pytest.importorskip("sklearn", reason="the demo's models need scikit-learn (the demo extra)")


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "DSREG_DEMO_OUT": str(tmp_path / "out")}
    env.pop("DSREG_REGISTRY", None)
    env.pop("DSREG_HOME", None)
    proc = subprocess.run(
        [sys.executable, str(DEMO)], env=env, text=True, capture_output=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "Demo complete" in out
    # The detector is scored against the labels the demo flipped.
    m = re.search(r"precision (\d\.\d\d) .* recall (\d\.\d\d)", out)
    assert m, out
    assert float(m.group(1)) >= 0.8 and float(m.group(2)) >= 0.6
    # The switch to the corrected labels writes only the relabelled files.
    switch = re.findall(r"\((\d+) written, (\d+) removed, (\d+) unchanged, hardlink\)", out)
    assert len(switch) == 2
    written, _, unchanged = map(int, switch[1])
    assert 0 < written < 300 and unchanged > 1400
    # The honeypot re-ranks the models: some rank moves in the eval table are not '='.
    assert re.search(r"\(([+-]\d+)\)", out), out
    assert (tmp_path / "out" / "ranks.png").stat().st_size > 10_000
    assert "Checked " in out and "all intact" in out
    # The models recorded before the relabeling are re-scored on it, with intervals.
    assert re.search(r"\d+\.\d \(\d+\.\d-\d+\.\d\) rank \d \[\d+-\d+\]", out), out
    assert (tmp_path / "out" / "leaderboard.png").stat().st_size > 10_000
    # The audit finds the training set's copies of test images (3 byte for byte, 5 edited),
    # reuses every fingerprint when run again, and eval scores the rows it left beside the rest.
    assert "contaminated rows per tier: exact 3, image 5" in out, out
    m = re.search(r"test image (\S+) is training image (\S+) \(image tier, (\d+) bits apart\)", out)
    assert m, out
    assert m.group(2).split("-")[-1].split(".")[0] == m.group(1).split("/")[-1].split(".")[0]
    assert 0 < int(m.group(3)) <= 4
    assert "the same findings again: 0 fingerprints computed" in out
    assert re.search(r"^rows .* decontaminated 1789$", out, re.MULTILINE), out
