"""docs/recipes-datasets.md runs as written: its CIFAR-10 and MNIST blocks, run by bash on the
label-errors release's files, register the sets, reproduce the paper's vote counts, export the
label vectors and cite a revision that resolves (skipped where the release's files are absent)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest

import dsreg

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "recipes-datasets.md"


def recipe_script(name: str) -> str:
    """The commands of the ``console`` block marked ``<!-- recipe-test: name -->``: its ``$``
    lines, with their backslash continuations."""
    text = RECIPE.read_text(encoding="utf-8")
    m = re.search(rf"<!-- recipe-test: {name} -->\n```console\n(.*?)```", text, re.S)
    assert m is not None, f"no block marked {name} in {RECIPE}"
    lines, going = [], False
    for line in m.group(1).splitlines():
        if line.startswith("$ "):
            lines.append(line[2:])
        elif going:
            lines.append(line)
        going = line.endswith("\\")
    return "set -euo pipefail\n" + "\n".join(lines) + "\n"


def run_recipe(
    names: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    script = "".join(recipe_script(n) for n in names)
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow  # two registrations, votes, the detector and a push: ~20 s
def test_the_cifar10_and_mnist_recipes_run_as_written(
    shared_data: Path, tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "label-errors").symlink_to(shared_data)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "dsreg"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m dsreg "$@"\n')
    shim.chmod(0o755)
    env = dsreg_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = run_recipe(["cifar10", "mnist"], work, env)
    assert proc.returncode == 0, proc.stderr

    reg = work / ".dsreg"
    validated = dsreg.open("cifar10-test@validated", registry=reg)
    assert len(validated) == 9946
    assert len(dsreg.open("cifar10-test@validated-corrected", registry=reg)) == 9964
    summary = dsreg.overlay_show(validated.revision.overlays[0], registry=reg).overlay.summary
    assert {k: summary[k] for k in ("checked", "errors", "correctable", "neither")} == {
        "checked": 275,
        "errors": 54,
        "correctable": 18,
        "neither": 4,
    }
    y = np.load(work / "cifar10_validated.npy")
    given = np.load(shared_data / "cifar10_test_set_original_labels.npy")
    assert len(y) == 10000 and (y == -1).sum() == 54 and (y[y >= 0] == given[y >= 0]).all()
    assert "Learning Multiple Layers of Features from Tiny Images" in proc.stdout
    resolve = f"dsreg checkout {validated.digest} cifar10-test --remote {work / 'published'}"
    assert resolve in proc.stdout
    assert (work / "published" / "refs" / "cifar10-test" / "validated").is_file()

    mnist = pacsv.read_csv(work / "mnist_validated.csv")
    assert mnist.column_names == ["row", "example_id", "label", "label_name"]
    assert mnist.num_rows == 9985 == len(dsreg.open("mnist-test@validated", registry=reg))
