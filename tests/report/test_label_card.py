"""The label card: ``label_quality`` of a revision, the same in ``eval``, ``show`` and ``cite``
(``--json`` and text), from validated votes, rater counts and a detected overlay; and
``dsreg detect`` printing one estimate of the wrong labels."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg import Registry

K = 3


def _add(tmp_path: Path, reg: Registry, labels: np.ndarray) -> str:
    np.save(tmp_path / "labels.npy", labels.astype(np.int32))
    classes = [f"c{i}" for i in range(K)]
    dsreg.add("ds", labels=tmp_path / "labels.npy", classes=classes, tag="v1", registry=reg)
    return "ds@v1"


def _six(x: Any) -> Any:
    """Floats at six decimals, as eval's stable JSON writes them."""
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _six(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_six(v) for v in x]
    return x


def _cards(cli: Callable[..., Any], reg: Registry, spec: str, preds: Path) -> list[Any]:
    """label_quality of eval, show and cite --json, and the three commands' text."""
    at = ("--registry", str(reg.root))
    docs = [
        json.loads(cli("eval", spec, str(preds), "--json", *at).stdout)["label_quality"],
        json.loads(cli("show", spec, "--json", *at).stdout)["label_quality"],
        json.loads(cli("cite", spec, "--json", *at).stdout)["label_quality"],
    ]
    texts = [
        cli("eval", spec, str(preds), *at).stdout,
        cli("show", spec, *at).stdout,
        cli("cite", spec, *at).stderr,  # stdout is the citation alone
    ]
    return [docs, texts]


def test_validated_counts_and_agreement_reach_eval_show_and_cite(
    make_registry: Callable[..., Registry], tmp_path: Path, cli: Callable[..., Any]
) -> None:
    reg = make_registry()
    labels = np.array([0, 1, 2, 0, 1, 2])
    spec = _add(tmp_path, reg, labels)
    # Raters' counts: rows 1 and 4 have another majority (errors), row 2 splits 2/2/1.
    counts = np.array([[5, 0, 0], [1, 0, 4], [2, 2, 1], [5, 0, 0], [0, 1, 4], [0, 0, 5]])
    np.save(tmp_path / "counts.npy", counts)
    ov = dsreg.import_labels(spec, tmp_path / "counts.npy", format="counts", registry=reg)
    dsreg.tag("ds@rated", spec, overlays=[ov.digest], view="corrected", registry=reg)
    np.save(tmp_path / "m.npy", labels)
    (eval_doc, show_doc, cite_doc), texts = _cards(cli, reg, "ds@rated", tmp_path / "m.npy")
    assert show_doc == cite_doc and eval_doc == _six(show_doc)
    v = eval_doc["validated"]
    s = dsreg.show(ov.digest, registry=reg).manifest["summary"]  # type: ignore[union-attr]
    assert (v["checked"], v["errors"], v["raters"]) == (s["checked"], s["errors"], 5)
    assert v["overlays"] == [ov.digest] and v["share"] == pytest.approx(s["errors"] / s["checked"])
    a = eval_doc["agreement"]
    share = (counts.max(axis=1) / counts.sum(axis=1)).mean()
    assert a["rows"] == 6 and a["mean_majority_share"] == pytest.approx(share, abs=1e-6)
    assert eval_doc["detected"] is None
    for text in texts:
        line = next(ln for ln in text.splitlines() if ln.startswith("quality"))
        assert f"{v['errors']} errors in {v['checked']} rows checked" in line
        assert f"majority share {100 * share:.2f}%" in text


def test_a_detected_overlay_is_reported_applied_or_available(
    make_registry: Callable[..., Registry], tmp_path: Path, cli: Callable[..., Any]
) -> None:
    reg = make_registry()
    rng = np.random.default_rng(0)
    labels = rng.integers(0, K, 300)
    spec = _add(tmp_path, reg, labels)
    probs = np.full((300, K), 0.05)
    probs[np.arange(300), labels] = 0.9
    flip = rng.choice(300, 30, replace=False)
    probs[flip] = 0.05
    probs[flip, (labels[flip] + 1) % K] = 0.9
    probs /= probs.sum(axis=1, keepdims=True)
    np.save(tmp_path / "probs.npy", probs)
    r = cli("detect", spec, "--pred-probs", str(tmp_path / "probs.npy"), "--tag", "det",
            "--registry", str(reg.root))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    # One estimate of the wrong labels; the flagged rows are described as candidates.
    estimate = next(ln for ln in r.stdout.splitlines() if ln.startswith("label errors"))
    assert "noise rate" in estimate and "of the 300 rows scanned" in estimate
    assert "label issues" not in r.stdout and "candidates to check" in r.stdout
    rate = dsreg.show("ds@det", registry=reg).label_quality.detected["rate"]  # type: ignore[union-attr]
    assert f"{100 * rate:.2f}% estimated wrong" in estimate
    np.save(tmp_path / "m.npy", labels)
    (applied, *_), texts = _cards(cli, reg, "ds@det", tmp_path / "m.npy")
    assert applied["detected"]["applied"] is True and applied["validated"] is None
    assert applied["detected"]["rate"] == pytest.approx(rate, abs=1e-6)
    assert all(f"{100 * rate:.2f}% of labels estimated wrong" in t for t in texts)
    # The original revision applies no overlay; the detected one of its snapshot is available.
    (plain, *_), texts = _cards(cli, reg, spec, tmp_path / "m.npy")
    assert plain["detected"]["applied"] is False
    assert plain["detected"]["overlay"] == applied["detected"]["overlay"]
    assert all("available, not applied" in t for t in texts)
