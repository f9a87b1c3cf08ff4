"""``dsreg.evaluate``: accuracies per view equal to scoring the reference views by hand, in every
input format; ranks and rank changes; clear errors; a stable, citable JSON report."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dsreg
from dsreg import evaluate
from dsreg.errors import CorruptObjectError, InvalidInputError, PredictionsError
from dsreg.formats.manifests import VIEWS
from dsreg.objects.hashing import hash_file
from dsreg.registry.reader import LocalReader


def probs_for(ls: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.random((ls.n, len(ls.classes)))
    p[np.arange(ls.n), ls.labels] += rng.random(ls.n) * 1.5  # better than chance
    p[: ls.n // 4, 0] = p[: ls.n // 4, 1]  # ties: broken by class index, as argmax does
    return p / p.sum(axis=1, keepdims=True)


def check_against_reference(ls: Any, report: Any, preds: dict[str, np.ndarray]) -> None:
    for m in report.models:
        pred = preds[m.model]
        for view in report.views:
            s = m.scores[view]
            for k in report.top_k:
                if (pred.ndim == 1 or view == "multilabel") and k > 1:
                    assert s.correct[k] is None
                    continue
                rows, correct = ls.reference(pred, view, k)
                assert (s.rows, s.correct[k]) == (rows, correct), (m.model, view, k)
                if view == "honeypot":
                    assert s.given_correct[k] == ls.reference(pred, view, k, given=True)[1]


@pytest.mark.parametrize("seed", range(4))
def test_every_view_scores_as_the_reference_rule_says(make_labelset: Any, seed: int) -> None:
    ls = make_labelset(n=80, k=5, seed=seed, overlays=1 + seed % 3)
    preds = {
        "probs": probs_for(ls, seed),
        "labels": np.random.default_rng(seed).integers(0, 5, ls.n),
    }
    report = evaluate("toy@corrected", preds, top_k=(1, 2, 3), registry=ls.reg)
    assert report.views == {v: len(ls.view(v)) for v in VIEWS}
    check_against_reference(ls, report, preds)


def test_every_input_format_gives_the_same_scores(
    make_labelset: Any, tmp_path: Path, write_table: Any
) -> None:
    ls = make_labelset(n=50, k=4, seed=1)
    probs = probs_for(ls, 1)
    labels = probs.argmax(axis=1)
    ids = pa.array(ls.ids)
    names = [ls.classes[i] for i in labels]
    shuffled = np.random.default_rng(0).permutation(ls.n)
    np.save(tmp_path / "npy_labels.npy", labels)
    np.save(tmp_path / "npy_probs.npy", probs)
    write_table(tmp_path / "pq_rows.parquet", pa.table({"row": np.arange(ls.n), "pred": labels}))
    write_table(  # example ids in any order, class names
        tmp_path / "csv_ids.csv",
        pa.table({"example_id": ids.take(shuffled), "pred": pa.array(names).take(shuffled)}),
    )
    write_table(  # one probability column per class, named by the class
        tmp_path / "csv_probs.csv",
        pa.table({"example_id": ids, **{c: probs[:, j] for j, c in enumerate(ls.classes)}}).take(
            shuffled
        ),
    )
    both = pa.table(
        {
            "model": ["m_a"] * ls.n + ["m_b"] * ls.n,
            "row": np.r_[np.arange(ls.n), np.arange(ls.n)],
            "pred": np.r_[labels, labels],
        }
    )
    write_table(tmp_path / "multi.parquet", both)
    files = sorted(tmp_path.glob("*.*"))
    report = evaluate("toy@corrected", files, top_k=(1, 2), registry=ls.reg)
    got = {m.model: m for m in report.models}
    assert set(got) == {"npy_labels", "npy_probs", "pq_rows", "csv_ids", "csv_probs", "m_a", "m_b"}
    kinds = {m: r.predictions.kind for m, r in got.items()}
    assert kinds["npy_probs"] == kinds["csv_probs"] == "probabilities"
    assert kinds["npy_labels"] == kinds["csv_ids"] == kinds["m_a"] == "labels"
    check_against_reference(
        ls, report, {m: labels for m in got} | {"npy_probs": probs, "csv_probs": probs}
    )
    assert (
        got["m_a"].predictions.digest
        == got["m_b"].predictions.digest
        == hash_file(tmp_path / "multi.parquet")
    )
    # In memory: an Arrow table, a DataFrame, an array (digest: that of the .npy np.save writes).
    mem = evaluate(
        "toy@corrected",
        {
            "table": pa.table({"row": np.arange(ls.n), "pred": labels}),
            "frame": pa.table({"example_id": ids, "pred": pa.array(names)}).to_pandas(),
            "array": labels,
        },
        registry=ls.reg,
    )
    assert {m.scores["corrected"].correct[1] for m in mem.models} == {
        got["npy_labels"].scores["corrected"].correct[1]
    }
    assert mem.models[2].predictions.digest == hash_file(tmp_path / "npy_labels.npy")


def test_ranks_and_rank_changes_follow_the_corrected_labels(make_labelset: Any) -> None:
    ls = make_labelset(n=90, k=4, seed=3)
    corrected = ls.view("corrected")
    fixed = corrected.column("row").to_numpy()[
        (corrected.column("label").to_numpy() != corrected.column("given_label").to_numpy())
    ]
    assert len(fixed) > 3
    given_model = ls.labels.copy()  # right on every given label: first on the original labels
    fixer = ls.labels.copy()
    fixer[fixed] = corrected.column("label").to_numpy()[np.isin(corrected.column("row"), fixed)]
    fixer[0] = (fixer[0] + 1) % 4  # one mistake elsewhere: second on the original labels
    rng = np.random.default_rng(0)
    noisy = np.where(rng.random(ls.n) < 0.5, ls.labels, (ls.labels + 1) % 4)
    report = evaluate(
        "toy@corrected",
        {"given": given_model, "fixer": fixer, "noisy": noisy, "twin": given_model},
        registry=ls.reg,
    )
    r = {m.model: m for m in report.models}
    assert [r[m].scores["original"].rank for m in ("given", "twin", "fixer", "noisy")] == [
        1,
        1,
        3,
        4,
    ]
    assert r["fixer"].scores["corrected"].rank == 1
    assert r["given"].scores["corrected"].rank == 2  # ties share a rank, the next one skips
    assert r["fixer"].rank_change["original_to_corrected"] == 2
    assert r["given"].rank_change["original_to_corrected"] == -1
    h = r["fixer"].scores["honeypot"]
    assert h.accuracy(1) == 1.0 and h.rank == 1
    assert r["given"].scores["honeypot"].given_accuracy(1) == 1.0
    assert r["given"].scores["honeypot"].accuracy(1) == 0.0
    # On the honeypot's given labels the fixer is wrong on every row: last, or tied last.
    assert h.given_accuracy(1) == 0.0 and h.given_rank >= 3
    assert r["fixer"].rank_change["honeypot_given_to_corrected"] == h.given_rank - 1


def test_a_revision_without_overlays_scores_every_view_as_the_original(make_labelset: Any) -> None:
    ls = make_labelset(n=30, overlays=0)
    pred = np.random.default_rng(1).integers(0, 4, ls.n)
    report = evaluate("toy@original", {"m": pred}, registry=ls.reg)
    s = report.models[0].scores
    assert s["original"].correct == s["cleaned"].correct == s["corrected"].correct
    assert s["original"].rows == s["cleaned"].rows == s["corrected"].rows == ls.n
    assert s["honeypot"].rows == 0 and s["honeypot"].accuracy() is None
    assert s["honeypot"].rank is None
    assert report.models[0].rank_change["honeypot_given_to_corrected"] is None
    assert any("no overlays" in n for n in report.notes)


def test_the_json_report_is_stable_and_names_every_digest(
    make_labelset: Any, tmp_path: Path
) -> None:
    ls = make_labelset(n=40, seed=2)
    np.save(tmp_path / "resnet.npy", probs_for(ls, 2))
    np.save(tmp_path / "vgg.npy", probs_for(ls, 3).argmax(axis=1))
    files = [tmp_path / "resnet.npy", tmp_path / "vgg.npy"]
    one = evaluate("toy@corrected", files, top_k=(1, 2), registry=ls.reg).to_json()
    two = evaluate("toy@corrected", files, top_k=(1, 2), registry=ls.reg).to_json()
    assert one == two
    doc = json.loads(one)
    assert doc["revision"] == LocalReader(ls.reg).revision("toy@corrected").digest
    assert doc["snapshot"] == ls.snapshot
    assert [o["digest"] for o in doc["overlays"]] == ls.overlays
    assert doc["dsreg_version"] == dsreg.__version__
    assert [m["predictions"]["digest"] for m in doc["models"]] == [hash_file(f) for f in files]
    assert list(doc) == sorted(doc)
    floats = re.findall(r'"top1": (\d+\.\d+)', one)
    assert floats and all(len(f.split(".")[1]) == 6 for f in floats)
    assert doc["models"][1]["scores"]["original"]["accuracy"]["top2"] is None  # labels only


def test_predictions_missing_rows_of_a_view_are_refused(make_labelset: Any) -> None:
    ls = make_labelset(n=40, seed=4)
    cleaned = ls.view("cleaned")
    subset = pa.table({"example_id": cleaned.column("example_id"), "pred": cleaned.column("label")})
    # Enough for the cleaned view …
    ok = evaluate("toy@cleaned", {"m": subset}, views=["cleaned"], registry=ls.reg)
    assert ok.models[0].scores["cleaned"].accuracy() == 1.0
    # … not for the original one: how many are missing, and which first.
    missing = sorted(set(range(ls.n)) - set(cleaned.column("row").to_pylist()))
    with pytest.raises(PredictionsError) as e:
        evaluate("toy@cleaned", {"m": subset}, registry=ls.reg)
    msg = str(e.value)
    assert f"miss {len(missing)} of the {ls.n} rows of the original view" in msg
    assert str(missing[:5]) in msg and ls.ids[missing[0]] in msg


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda ls: np.zeros(ls.n - 1, dtype=int), r"hold 39 labels, but the snapshot has 40"),
        (lambda ls: np.zeros((ls.n, 3)), r"shape \(40, 3\).*\(40, 4\)"),
        (lambda ls: np.zeros(ls.n), r"float64 array of shape \(40,\)"),
        (lambda ls: np.full(ls.n, 7), r"40 predicted classes are outside \[0, 4\), first \[7"),
        (
            lambda ls: np.where(np.arange(ls.n) == 3, np.nan, np.ones((ls.n, 4)).T).T,
            r"1 rows with NaN or infinite probabilities, first rows \[3\]",
        ),
        (
            lambda ls: np.where(np.arange(ls.n) % 10 == 7, -0.5, np.ones((ls.n, 4)).T).T,
            r"4 rows with negative probabilities, first rows \[7, 17, 27, 37\]; give "
            r"non-negative \(softmax logits first\) probabilities",
        ),
        (
            lambda ls: pa.table({"example_id": ["img0000", "nope", "nada"], "pred": [0, 1, 2]}),
            r"2 example ids are not in the snapshot, first \['nope', 'nada'\]",
        ),
        (
            lambda ls: pa.table({"example_id": ls.ids, "pred": ["cat"] * (ls.n - 1) + ["gnu"]}),
            r"1 predictions name a class the snapshot does not have, first \['gnu'\]",
        ),
        (
            lambda ls: pa.table({"row": [0, 1, 1], "pred": [0, 1, 2]}),
            r"more than once, first rows \[1\]",
        ),
        (
            lambda ls: pa.table(
                {"row": [0, 1], "example_id": ["img0000", "img0002"], "pred": [0, 1]}
            ),
            r"1 rows name an example_id that is not the snapshot's at that row, first "
            r"\(row, example_id\) \[\(1, 'img0002'\)\]",
        ),
        (
            lambda ls: pa.table({"row": [0], "cat": [1.0]}),
            r"missing classes \['dog', 'fox', 'owl'\]",
        ),
        (lambda ls: pa.table({"pred": [0]}), r"needs a 'row' or an 'example_id' column"),
        (lambda ls: [1, 2, 3], r"are a list"),
    ],
)
def test_predictions_that_do_not_fit_are_refused(make_labelset: Any, make: Any, match: str) -> None:
    ls = make_labelset(n=40, k=4, seed=5)
    with pytest.raises(PredictionsError, match=match):
        evaluate("toy@corrected", {"m": make(ls)}, registry=ls.reg)


def test_bad_arguments_are_refused(make_labelset: Any, tmp_path: Path) -> None:
    ls = make_labelset(n=20)
    pred = np.zeros(ls.n, dtype=int)
    with pytest.raises(InvalidInputError, match="unknown view 'clean'"):
        evaluate("toy@original", {"m": pred}, views=["clean"], registry=ls.reg)
    with pytest.raises(InvalidInputError, match="at least 1"):
        evaluate("toy@original", {"m": pred}, top_k=[0], registry=ls.reg)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    np.save(tmp_path / "a" / "m.npy", pred)
    np.save(tmp_path / "b" / "m.npy", pred)
    with pytest.raises(PredictionsError, match="two predictions are named 'm'"):
        evaluate(
            "toy@original", [tmp_path / "a" / "m.npy", tmp_path / "b" / "m.npy"], registry=ls.reg
        )
    (tmp_path / "m.txt").write_text("0\n")
    with pytest.raises(PredictionsError, match=r"unknown type .\.txt."):
        evaluate("toy@original", [tmp_path / "m.txt"], registry=ls.reg)


def test_a_corrupt_examples_table_is_never_scored(make_labelset: Any) -> None:
    ls = make_labelset(n=20)
    path = ls.reg.store.path(ls.reg.snapshot(ls.snapshot).examples)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptObjectError):
        evaluate("toy@original", {"m": np.zeros(ls.n, dtype=int)}, registry=ls.reg)


def test_a_table_corrupted_after_a_read_is_refused_on_the_next(make_labelset: Any) -> None:
    """The tables are hashed ahead, on a thread, into a cache of verified objects: a table
    rewritten after one eval is hashed again by the next, and refused."""
    ls = make_labelset(n=20)
    preds = {"m": np.zeros(ls.n, dtype=int)}
    evaluate("toy@corrected", preds, registry=ls.reg)
    revision = ls.reg.revision(ls.reg.refs.get("toy", "corrected"))
    path = ls.reg.store.path(ls.reg.overlay(revision.overlays[-1]).corrections)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[12] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptObjectError):
        evaluate("toy@corrected", preds, registry=ls.reg)


def test_the_report_as_a_table(make_labelset: Any) -> None:
    ls = make_labelset(n=20)
    report = dsreg.evaluate("toy@corrected", {"m": probs_for(ls, 0)}, top_k=(1, 3), registry=ls.reg)
    t = report.to_arrow()
    assert t.column_names[:6] == ["model", "view", "rows", "rank", "top1", "top3"]
    assert t.column("view").to_pylist() == list(VIEWS)
    assert report.to_pandas().shape == (len(VIEWS), t.num_columns)
