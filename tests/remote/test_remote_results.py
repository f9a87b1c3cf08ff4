"""Recorded results travel as tags do: ``push`` sends the model refs of what it pushes and their
records and predictions; ``pull`` and ``clone`` bring them back, verified; a model ref moved on
one side is reported, never overwritten; gc keeps them and verify checks them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg import Registry
from dsreg.errors import IntegrityError, TagExistsError
from dsreg.registry.results import read_result, result_refs


def _object(folder: Path, digest: str) -> Path:
    h = digest.removeprefix("blake3:")
    return folder / "files" / "blake3" / h[:2] / h[2:]


def test_push_sends_results_and_pull_and_clone_bring_them_back(
    toy: Any, make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    folder = tmp_path / "remote"
    pushed = dsreg.push(remote=str(folder), registry=toy.reg)
    assert {(r.tag, r.revision, r.status) for r in pushed.results} == {
        (m, d, "created") for m, d in toy.recorded.items()
    }
    assert (folder / "results" / "toy" / "fixed").read_text().strip() == toy.recorded["fixed"]
    assert (folder / "info" / "results").read_text() == "toy/fixed\ntoy/given\ntoy/near\n"
    remote_log = [json.loads(x) for x in (folder / "logs" / "toy.jsonl").read_text().splitlines()]
    assert {(e["event"], e["tag"]) for e in remote_log} >= {
        ("result", "fixed"),
        ("tag", "original"),
    }
    again = dsreg.push(remote=str(folder), registry=toy.reg)
    assert again.sent == 0 and {r.status for r in again.results} == {"unchanged"}

    board = dsreg.leaderboard("toy", resamples=50, registry=toy.reg).to_json()
    other = make_registry("other")
    pulled = dsreg.pull(remote=str(folder), registry=other)
    assert {(r.tag, r.status) for r in pulled.results} == {(m, "created") for m in toy.recorded}
    assert dsreg.leaderboard("toy", resamples=50, registry=other).to_json() == board

    cloned = dsreg.clone(str(folder), tmp_path / "clone")
    assert not cloned.skipped  # the result lines of the remote's log are copied, checked
    clone = Registry.find(tmp_path / "clone")
    assert dsreg.leaderboard("toy", resamples=50, registry=clone).to_json() == board
    events = [(e.event, e.tag) for e in dsreg.log("toy", registry=clone)]
    assert ("result", "near") in events
    assert dsreg.verify(registry=clone).ok and dsreg.verify(registry=other).ok


def test_a_model_ref_moved_on_either_side_is_reported_not_overwritten(
    toy: Any, make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    folder = tmp_path / "remote"
    dsreg.push(remote=str(folder), registry=toy.reg)
    mirror = make_registry("mirror")
    dsreg.pull(remote=str(folder), registry=mirror)
    # The origin re-records "given" (other predictions) and moves the remote's with --force.
    (moved,) = dsreg.record(
        "toy@original", toy.preds["fixed"], model="given", force=True, registry=toy.reg
    )
    with pytest.raises(TagExistsError, match=r"holds toy/given .*model refs are immutable"):
        dsreg.push(remote=str(folder), registry=toy.reg)
    dsreg.push(remote=str(folder), force=True, registry=toy.reg)
    assert (folder / "results" / "toy" / "given").read_text().strip() == moved.digest

    # The mirror still holds the old result: a pull reports the move and changes nothing.
    with pytest.raises(TagExistsError, match=r"holds toy/given \(local .*, remote .*\)"):
        dsreg.pull(remote=str(folder), registry=mirror)
    assert result_refs(mirror).get("toy", "given") == toy.recorded["given"]
    # ... and a push from it is refused the same way: the remote keeps the new one.
    with pytest.raises(TagExistsError, match="toy/given"):
        dsreg.push(remote=str(folder), registry=mirror)
    assert (folder / "results" / "toy" / "given").read_text().strip() == moved.digest
    dsreg.pull(remote=str(folder), force=True, registry=mirror)
    assert result_refs(mirror).get("toy", "given") == moved.digest


def test_a_damaged_result_on_the_remote_is_refused_by_pull(
    toy: Any, make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    folder = tmp_path / "remote"
    dsreg.push(remote=str(folder), registry=toy.reg)
    predictions = read_result(toy.reg, toy.recorded["near"]).predictions
    path = _object(folder, predictions)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    other = make_registry("other")
    with pytest.raises(IntegrityError, match=r"toy@near \(a model ref\).*corrupt") as e:
        dsreg.pull(remote=str(folder), registry=other)
    assert predictions in str(e.value) and "\n" not in str(e.value)
    # The tags and the other results were pulled; the damaged one was not stored or named.
    assert set(result_refs(other).tags("toy")) == {"fixed", "given"}
    assert not other.store.has(predictions)
    assert dsreg.verify(registry=other).ok


def test_gc_keeps_a_result_until_its_ref_is_gone_and_its_log_line_expires(toy: Any) -> None:
    rec = read_result(toy.reg, toy.recorded["near"])
    kept = dsreg.gc(prune_log_older_than="now", registry=toy.reg)
    assert {toy.recorded["near"], rec.predictions}.isdisjoint(kept.removed)
    result_refs(toy.reg).delete("toy", "near", command="test")
    # The ref is gone; its log lines keep the result for the log's expiry (90 days).
    kept = dsreg.gc(registry=toy.reg)
    assert {toy.recorded["near"], rec.predictions}.isdisjoint(kept.removed)
    assert toy.reg.store.has(rec.predictions)
    gone = dsreg.gc(prune_log_older_than="now", registry=toy.reg)
    assert {toy.recorded["near"], rec.predictions} <= set(gone.removed)
    assert dsreg.verify(registry=toy.reg).ok


def test_a_damaged_local_result_is_reported_and_never_served(
    toy: Any, cli: Callable[..., Any], flip_byte: Callable[..., None], tmp_path: Path
) -> None:
    os.environ["DSREG_REGISTRY"] = str(toy.reg.root)
    try:
        rec = read_result(toy.reg, toy.recorded["fixed"])
        flip_byte(toy.reg, rec.predictions)
        v = cli("verify")
        assert (
            v.exit_code == 1 and rec.predictions.removeprefix("blake3:")[:12] in v.stdout + v.stderr
        )
        for args in (("leaderboard", "toy"), ("cite", "toy@original", "--model", "fixed")):
            r = cli(*args)
            assert r.exit_code == 1 and r.stderr.startswith("Error: "), r.stderr
            assert len(r.stderr.strip().splitlines()) == 1 and "fixed" not in r.stdout
            assert rec.predictions in r.stderr
        # A push sends no damaged result: refused before anything is sent.
        with pytest.raises(IntegrityError, match=rec.predictions):
            dsreg.push(remote=str(tmp_path / "remote"), registry=toy.reg)
        assert not (tmp_path / "remote" / "refs").exists()
        np.save(tmp_path / "fixed.npy", toy.preds["fixed"])
        again = ("eval", "toy@original", str(tmp_path / "fixed.npy"), "--record", "--model")
        r = cli(*again, "fixed", "--meta", "run=fixed")
        assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert rec.predictions in r.stderr
        # Recording the same predictions again with --force stores their bytes again.
        r = cli(*again, "fixed", "--meta", "run=fixed", "--force")
        assert r.exit_code == 0, r.stderr
        assert cli("verify").exit_code == 0 and cli("leaderboard", "toy").exit_code == 0
    finally:
        del os.environ["DSREG_REGISTRY"]
