"""Advice and checks that agree: a damaged ref's error names the command that repairs that
kind of ref (a tag is set again, a recorded model recorded again, a yank yanked again), that
command repairs it, and ``verify`` applies the checks the readers of recorded results apply
(it names a result whose predictions hold NaN, which ``leaderboard`` and ``cite`` refuse)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg.registry import results
from dsreg.registry.reader import LocalReader


@pytest.fixture
def recorded(cli: Callable[..., Any], make_imagefolder: Callable[..., Path], tmp_path: Path) -> Any:
    """A registry (``.dsreg`` in the working folder) with ``ds@v1`` and model ``m1`` recorded;
    ``preds.npy`` its predictions."""
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    dsreg.add("ds", make_imagefolder(classes=2, per_class=5), tag="v1", registry=reg)
    np.save(tmp_path / "preds.npy", np.tile([0.8, 0.2], (10, 1)))
    got = cli("eval", "ds@v1", str(tmp_path / "preds.npy"), "--record", "--model", "m1")
    assert got.exit_code == 0, got.stderr
    return reg


def _one_error(got: Any) -> str:
    assert got.exit_code == 1 and got.stderr.startswith("Error: "), got.stderr
    assert len(got.stderr.strip().splitlines()) == 1, got.stderr
    return str(got.stderr)


def test_a_damaged_model_ref_names_and_is_repaired_by_eval_record_force(
    recorded: Any, cli: Callable[..., Any], tmp_path: Path
) -> None:
    ref = recorded.root / "results" / "ds" / "m1"
    good = ref.read_text()
    ref.write_text("garbage\n")
    advice = (
        "record the model again with 'dsreg eval ds@REVISION PREDICTIONS --record --model m1 "
        "--force' (its results are listed by 'dsreg log ds')"
    )
    for args in (("leaderboard", "ds"), ("cite", "ds@v1", "--model", "m1")):
        error = _one_error(cli(*args))
        assert "model ref ds/m1 is damaged (holds 'garbage')" in error and advice in error
        assert "dsreg tag" not in error
    checked = cli("verify")
    assert checked.exit_code == 1 and "results/ds/m1" in checked.stdout
    assert advice in checked.stdout and "dsreg tag" not in checked.stdout
    # The command named repairs it (without --force, it is refused with the same advice).
    assert advice in _one_error(
        cli("eval", "ds@v1", str(tmp_path / "preds.npy"), "--record", "--model", "m1")
    )
    repaired = cli(
        "eval", "ds@v1", str(tmp_path / "preds.npy"), "--record", "--model", "m1", "--force"
    )
    assert repaired.exit_code == 0, repaired.stderr
    assert ref.read_text() == good
    assert cli("leaderboard", "ds").exit_code == 0
    assert cli("verify").exit_code == 0


def test_a_damaged_tag_names_and_is_repaired_by_tag_force(
    recorded: Any, cli: Callable[..., Any]
) -> None:
    digest = LocalReader(recorded).revision("ds@v1").digest
    ref = recorded.root / "refs" / "ds" / "v1"
    ref.write_text("garbage\n")
    error = _one_error(cli("show", "ds@v1"))
    assert "tag ds@v1 is damaged (holds 'garbage')" in error
    assert "restore it with 'dsreg tag --force ds@v1 REVISION'" in error
    assert "tag ds@v1 is damaged" in _one_error(cli("tag", "ds@v1", digest))
    assert cli("tag", "--force", "ds@v1", digest).exit_code == 0
    assert ref.read_text().strip() == digest
    assert cli("show", "ds@v1").exit_code == 0


def test_a_damaged_yank_is_repaired_by_yanking_again(
    recorded: Any, cli: Callable[..., Any]
) -> None:
    assert cli("yank", "ds@v1", "--reason", "leaked").exit_code == 0
    ref = recorded.root / "yanked" / "ds" / "v1"
    ref.write_text("garbage\n")
    checked = cli("verify")
    assert checked.exit_code == 1 and "yanked/ds/v1" in checked.stdout
    assert cli("yank", "ds@v1", "--reason", "leaked").exit_code == 0
    assert cli("verify").exit_code == 0


def _nan_result(reg: Any) -> str:
    """Record ``nan`` for ``ds@v1`` as another tool could: its objects intact (they hash
    right), its probabilities holding a NaN, which recording through dsreg refuses."""
    snap = LocalReader(reg).revision("ds@v1").revision.snapshot
    probs = np.tile([0.8, 0.2], (10, 1))
    good = results.prepare(dataset="ds", model="nan", snapshot=snap, predictions=probs, classes=2)
    probs[3, 1] = np.nan
    data = results.encode_predictions(probs)
    record = dataclasses.replace(good.record, predictions=reg.store.put_bytes(data))
    made = results.record_result(reg, results.Prepared(record=record, data=data))
    return made.digest


def test_verify_names_a_recorded_result_that_readers_refuse(
    recorded: Any, cli: Callable[..., Any]
) -> None:
    _nan_result(recorded)
    for args in (("leaderboard", "ds"), ("cite", "ds@v1", "--model", "nan")):
        assert "NaN" in _one_error(cli(*args))
    checked = cli("verify")
    assert checked.exit_code == 1, checked.stdout
    assert "model ref ds/nan" in checked.stdout and "row 3 holds NaN or infinite" in checked.stdout
    assert "all intact" not in checked.stdout + checked.stderr
