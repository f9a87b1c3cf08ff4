"""``dsreg eval`` against label sets and raters' counts: set accuracy (ReaL accuracy), majority
accuracy, expected agreement and cross-entropy, checked against the published formulas."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import Registry


def add_plain(root: Path, reg: Registry, labels: list[int], k: int) -> str:
    np.save(root / "labels.npy", np.asarray(labels, np.int32))
    dsreg.add("ds", labels=root / "labels.npy", classes=[f"c{i}" for i in range(k)], tag="v1",
              registry=reg)  # fmt: skip
    return "ds@v1"


@st.composite
def real_cases(draw: st.DrawFn) -> tuple[int, list[int], list[list[int]], list[int]]:
    k = draw(st.integers(2, 5))
    n = draw(st.integers(1, 30))
    cls = st.integers(0, k - 1)
    given_labels = draw(st.lists(cls, min_size=n, max_size=n))
    lists = draw(st.lists(st.lists(cls, unique=True, max_size=k), min_size=n, max_size=n))
    preds = draw(st.lists(cls, min_size=n, max_size=n))
    return k, given_labels, lists, preds


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(case=real_cases())
def test_set_accuracy_is_real_accuracy(
    case: tuple[int, list[int], list[list[int]], list[int]],
) -> None:
    """ReaL accuracy (Beyer et al. 2020): over the rows with a non-empty list, the share whose
    prediction is in the list."""
    k, labels, lists, preds = case
    nonempty = [i for i, s in enumerate(lists) if s]
    want = sum(preds[i] in lists[i] for i in nonempty) / len(nonempty) if nonempty else None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reg = dsreg.init(registry=root / "reg")
        spec = add_plain(root, reg, labels, k)
        (root / "real.json").write_text(json.dumps(lists))
        dsreg.import_labels(spec, root / "real.json", format="real", tag="real",
                            view="multilabel", registry=reg)  # fmt: skip
        report = dsreg.evaluate("ds@real", {"m": np.asarray(preds)}, registry=reg)
    m = report.models[0]
    assert report.views["multilabel"] == len(nonempty)
    assert m.to_dict()["set_rows"] == len(nonempty)
    assert m.set_accuracy == want
    assert m.human is None and m.to_dict()["majority_accuracy"] is None


def human_reference(counts: np.ndarray, probs: np.ndarray) -> tuple[float, float, float]:
    """Majority accuracy, expected agreement and cross-entropy, one row at a time."""
    hit = agree = xent = 0.0
    rated = [i for i in range(len(counts)) if counts[i].sum() > 0]
    for i in rated:
        c = counts[i]
        total = float(c.sum())
        pred = int(np.argmax(probs[i]))
        majority = max(range(len(c)), key=lambda j: (c[j], -j))
        hit += pred == majority
        agree += c[pred] / total
        q = probs[i] / probs[i].sum()
        xent -= sum(c[j] / total * math.log(max(q[j], 1e-12)) for j in range(len(c)) if c[j])
    m = len(rated)
    return hit / m, agree / m, xent / m


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 25),
    k=st.integers(2, 5),
)
def test_scores_against_rater_counts_follow_their_definitions(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n).tolist()
    counts = rng.integers(0, 4, (n, k)) * (rng.random((n, k)) < 0.6)
    counts[0, 0] += 1  # at least one rated row
    probs = rng.dirichlet(np.ones(k), n)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reg = dsreg.init(registry=root / "reg")
        spec = add_plain(root, reg, labels, k)
        np.save(root / "counts.npy", counts)
        dsreg.import_labels(spec, root / "counts.npy", format="counts", tag="h", registry=reg)
        report = dsreg.evaluate(
            "ds@h", {"probs": probs, "labels": np.argmax(probs, axis=1)}, registry=reg
        )
    want = human_reference(counts, probs)
    by = {m.model: m for m in report.models}
    for name in ("probs", "labels"):
        h = by[name].human
        assert h is not None
        assert h.rows == int((counts.sum(axis=1) > 0).sum())
        assert math.isclose(h.majority_accuracy or 0, want[0], abs_tol=1e-12)
        assert math.isclose(h.expected_agreement or 0, want[1], abs_tol=1e-12)
    assert by["labels"].human.cross_entropy is None  # type: ignore[union-attr]
    assert math.isclose(by["probs"].human.cross_entropy or 0, want[2], rel_tol=1e-9)  # type: ignore[union-attr]


def test_cli_eval_json_and_table_carry_the_new_scores(
    make_registry: Callable[..., Registry], tmp_path: Path, cli: Callable[..., Any]
) -> None:
    reg = make_registry()
    labels = [0, 1, 2, 0, 1, 2]
    spec = add_plain(tmp_path, reg, labels, 3)
    (tmp_path / "real.json").write_text(json.dumps([[0], [0, 1], [], [1], [1, 2], [2]]))
    counts = np.array([[5, 0, 0], [1, 4, 0], [2, 2, 1], [0, 5, 0], [0, 3, 2], [0, 0, 5]])
    np.save(tmp_path / "counts.npy", counts)
    r1 = dsreg.import_labels(spec, tmp_path / "real.json", format="real", registry=reg)
    r2 = dsreg.import_labels(spec, tmp_path / "counts.npy", format="counts", registry=reg)
    # ReaL first, the counts later: a row both name takes the later overlay (its counts; its
    # list only where the later one has a list, which the counts overlay never has)
    dsreg.tag("ds@both", spec, overlays=[r1.digest, r2.digest], view="multilabel", registry=reg)
    dsreg.tag("ds@real", spec, overlays=[r1.digest], view="multilabel", registry=reg)
    probs = np.eye(3)[[0, 1, 1, 1, 2, 0]] * 0.8 + 0.2 / 3
    np.save(tmp_path / "model.npy", probs)
    r = cli("eval", "ds@real", str(tmp_path / "model.npy"), "--registry", str(reg.root), "--json")
    assert r.exit_code == 0, r.stderr
    m = json.loads(r.stdout)["models"][0]
    # five rows with a list; predictions 0, 1, 1, 2, 0 against [0], [0,1], [1], [1,2], [2]
    assert m["set_rows"] == 5 and m["set_accuracy"] == 0.8
    assert m["majority_accuracy"] is None and m["cross_entropy"] is None
    r = cli("eval", "ds@both", str(tmp_path / "model.npy"), "--registry", str(reg.root), "--json")
    m = json.loads(r.stdout)["models"][0]
    assert m["human_rows"] == 6
    assert m["majority_accuracy"] == 0.5  # majorities 0, 1, 0, 1, 1, 2; top-1 0, 1, 1, 1, 2, 0
    assert set(m) >= {"set_accuracy", "majority_accuracy", "expected_agreement", "cross_entropy"}
    r = cli("eval", "ds@both", str(tmp_path / "model.npy"), "--registry", str(reg.root))
    assert r.exit_code == 0, r.stderr
    assert "SET (multilabel)" in r.stdout and "MAJORITY" in r.stdout
    r = cli("eval", "ds@both", str(tmp_path / "model.npy"), "--registry", str(reg.root), "--full")
    assert r.exit_code == 0, r.stderr
    assert "AGREEMENT" in r.stdout and "CROSS-ENTROPY" in r.stdout
