"""The overlay commands as a user types them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

CIFAR = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def setup_cifar(cli: Callable[..., object], tmp_path: Path, shared_data: Path) -> None:
    (tmp_path / "classes.txt").write_text("\n".join(CIFAR) + "\n")
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    r = cli(
        "add",
        "cifar10-test",
        "--labels",
        str(shared_data / "cifar10_test_set_original_labels.npy"),
        "--classes",
        "classes.txt",
        "--tag",
        "original",
    )
    assert r.exit_code == 0, r.stderr  # type: ignore[attr-defined]


def test_import_votes_tag_and_show(
    cli: Callable[..., object], tmp_path: Path, shared_data: Path
) -> None:
    setup_cifar(cli, tmp_path, shared_data)
    r = cli(
        "overlay",
        "import-votes",
        "cifar10-test@original",
        str(shared_data / "cifar10_mturk.json"),
        "--format",
        "label-errors",
        "--threshold",
        "3",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    made = json.loads(r.stdout)
    assert made["summary"]["errors"] == 54
    digest = made["overlay"]
    r = cli(
        "tag",
        "cifar10-test@cleaned-v1",
        "cifar10-test@original",
        "--overlay",
        digest[7:15],
        "--view",
        "cleaned",
    )
    assert r.exit_code == 0, r.stderr
    r = cli("show", "cifar10-test@cleaned-v1", "--json")
    shown = json.loads(r.stdout)
    assert shown["rows"] == 9946
    assert shown["overlays"][0]["kind"] == "validated"
    assert (
        shown["revision"]
        == json.loads(cli("show", "cifar10-test@cleaned-v1", "--json").stdout)["revision"]
    )
    assert len(shown["revision"]) == len("blake3:") + 64
    r = cli("overlay", "ls", "cifar10-test")
    assert digest[7:19] in r.stdout and "validated" in r.stdout
    r = cli("overlay", "show", digest[7:15], "--rows", "3")
    assert "non_error" in r.stdout or "correctable" in r.stdout


def test_detect_prints_rate_per_class_ranked_top_and_digest(
    cli: Callable[..., object], tmp_path: Path, shared_data: Path
) -> None:
    setup_cifar(cli, tmp_path, shared_data)
    r = cli(
        "detect",
        "cifar10-test@original",
        "--pred-probs",
        str(shared_data / "cifar10_test_set_pyx.npy"),
        "--tag",
        "detected-v1",
        "--view",
        "corrected",
    )
    assert r.exit_code == 0, r.stderr
    assert "flagged        284 rows for review" in r.stdout  # cleanlab 2.9 default here
    assert "noise rate" in r.stdout and "per class" in r.stdout
    # One estimate of the wrong labels, not cleanlab's num_label_issues beside it.
    assert "of the 10000 rows scanned" in r.stdout and "label issues" not in r.stdout
    assert "overlay        blake3:" in r.stdout
    r = cli("show", "cifar10-test@detected-v1")
    assert "unvalidated" in r.stdout and "rows      10000 of 10000" in r.stdout


def test_bad_probabilities_are_refused_with_exit_1_and_nothing_written(
    cli: Callable[..., object], tmp_path: Path
) -> None:
    np.save(tmp_path / "labels.npy", np.array([0, 1, 1, 0]))
    assert cli("init").exit_code == 0
    assert cli("add", "toy", "--labels", "labels.npy", "--tag", "original").exit_code == 0
    reg = tmp_path / ".dsreg"
    before = sorted(p for p in reg.rglob("*") if p.is_file())
    cases = {
        "shape.npy": np.ones((3, 2)) / 2,
        "nan.npy": np.array([[np.nan, 1], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]),
        "sum.npy": np.array([[0.9, 0.3], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]),
    }
    for name, arr in cases.items():
        np.save(tmp_path / name, arr)
        r = cli("detect", "toy@original", "--pred-probs", name)
        assert r.exit_code == 1, name
        assert r.stderr.startswith("Error: "), r.stderr
    r = cli("detect", "toy@original", "--pred-probs", "missing.npy")
    assert r.exit_code == 1 and "missing.npy" in r.stderr
    r = cli("detect", "toy@original", "--pred-probs", "sum.npy", "--filter-by", "nope")
    assert r.exit_code == 1 and "nope" in r.stderr
    assert sorted(p for p in reg.rglob("*") if p.is_file()) == before
