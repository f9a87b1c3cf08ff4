"""A read of a remote that lacks part of a dataset's record says so (issue: "where a line
depends on something a remote does not hold, the output says so instead of silently
differing"): the label card names the overlays the log names that the remote cannot give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dsreg


def _toy(root: Path) -> tuple[dsreg.Registry, str]:
    reg = dsreg.init(registry=root / "reg")
    labels = np.random.default_rng(0).integers(0, 3, 60)
    np.save(root / "labels.npy", labels)
    (root / "classes.txt").write_text("a\nb\nc\n")
    dsreg.add("toy", labels=root / "labels.npy", classes=root / "classes.txt", tag="original",
              registry=reg)  # fmt: skip
    np.save(root / "probs.npy", np.random.default_rng(1).dirichlet(np.ones(3), 60))
    made = dsreg.detect("toy@original", root / "probs.npy", registry=reg)  # logged, not applied
    return reg, made.digest


def _object_files(remote: Path, digest: str) -> Path:
    hexd = digest.split(":", 1)[1]
    return remote / "files" / "blake3" / hexd[:2] / hexd[2:]


def test_the_label_card_names_the_logged_overlays_a_remote_cannot_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg, detected = _toy(tmp_path)
    monkeypatch.setenv("DSREG_CACHE", str(tmp_path / "cache-first"))
    remote = tmp_path / "remote"
    dsreg.push(remote=str(remote), registry=reg)
    here = dsreg.show("toy@original", registry=reg).label_quality
    there = dsreg.show("toy@original", remote=str(remote), registry=None).label_quality
    assert here is not None and there is not None
    assert here.to_dict() == there.to_dict() and not there.unheld
    assert "unheld" not in there.to_dict()

    # The remote loses the overlay's manifest (a push by an older dsreg never sent it): the
    # detector line cannot be given there, and the card says why instead of dropping it.
    _object_files(remote, detected).unlink()
    monkeypatch.setenv("DSREG_CACHE", str(tmp_path / "cache-fresh"))  # a reader new to it
    gap = dsreg.show("toy@original", remote=str(remote), registry=None)
    card = gap.label_quality
    assert card is not None and card.unheld == (detected,)
    assert card.detected is None and here.detected is not None
    lines = card.lines()
    assert any(
        line.startswith("not here: 1 overlays") and detected.split(":")[1][:12] in line
        for line in lines
    ), lines
    assert card.to_dict()["unheld"] == [detected]
