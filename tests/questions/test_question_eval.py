"""A question set through the whole life of a test set: registered, re-annotated as published,
evaluated on the original, cleaned and corrected labels (the numbers a pandas computation over
the same files gives), and tagged, diffed, cited, exported and loaded, multiple-choice and
exact-answer alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dsreg
from dsreg import Registry
from tests.questions.conftest import GSM8K, Question, write_questions, write_redux


def _predictions(questions: list[Question]) -> np.ndarray:
    """A model's answer positions: right on about two rows in three, never beyond a row's
    choices."""
    rng = np.random.default_rng(7)
    out = []
    for q in questions:
        right = rng.random() < 0.65
        out.append(q.answer if right else int(rng.integers(len(q.choices))))
    return np.array(out, dtype=np.int64)


def _expected(redux: Path, preds: np.ndarray) -> dict[str, float]:
    """Accuracy on each view, computed from the MMLU-Redux file with pandas alone: the
    cleaned labels keep the ok (and expert: not judged) rows; the corrected ones also take each
    wrong ground truth's correct answer; every other row is removed from both."""
    f = pd.read_csv(redux, dtype=str, keep_default_na=False)
    kind = f["error_type"].str.strip().str.lower().str.replace(" ", "_")
    answer = f["answer"].astype(int)
    correct = f["correct_answer"].map(
        lambda c: "ABCDE".index(c) if c in list("ABCDE") else int(c) if c.isdigit() else -1
    )
    pred = pd.Series(preds)
    kept = kind.isin(["ok", "expert"])
    fixed = (kind == "wrong_groundtruth") & (correct >= 0) & (correct != answer)
    label = answer.where(~fixed, correct)
    return {
        "original": float((pred == answer).mean()),
        "cleaned": float((pred[kept] == answer[kept]).mean()),
        "corrected": float((pred[kept | fixed] == label[kept | fixed]).mean()),
    }


def test_a_re_annotated_set_evaluates_as_pandas_computes(
    cli: Callable[..., object], tmp_path: Path, questions: list[Question]
) -> None:
    """Done when: the MMLU-Redux layout registers, imports with verdict counts equal to the
    file's error-type counts, and evaluates on original, cleaned and corrected labels with the
    numbers pandas gives."""
    write_questions(tmp_path / "mmlu.csv", questions)
    redux = write_redux(tmp_path / "redux.csv", questions)
    preds = _predictions(questions)
    np.save(tmp_path / "model.npy", preds)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    r = cli("add", "mmlu", "--questions", "mmlu.csv", "--tag", "original")
    assert r.exit_code == 0, r.stderr  # type: ignore[attr-defined]
    r = cli("overlay", "import-labels", "mmlu@original", "redux.csv", "--format", "mmlu-redux",
            "--tag", "redux", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr  # type: ignore[attr-defined]
    made = json.loads(r.stdout)  # type: ignore[attr-defined]
    kinds = pd.read_csv(redux, dtype=str)["error_type"].str.lower().str.replace(" ", "_")
    assert made["summary"]["error_types"] == {
        k: int((kinds == k).sum()) for k in made["summary"]["error_types"]
    }
    r = cli("eval", "mmlu@redux", "model.npy", "--json")
    assert r.exit_code == 0, r.stderr  # type: ignore[attr-defined]
    scores = json.loads(r.stdout)["models"][0]["scores"]  # type: ignore[attr-defined]
    want = _expected(redux, preds)
    for view, accuracy in want.items():
        assert scores[view]["accuracy"]["top1"] == pytest.approx(accuracy), view
    assert scores["cleaned"]["rows"] < scores["corrected"]["rows"] < scores["original"]["rows"]


def test_exact_answers_are_scored_as_normalised(answer_set: tuple[Registry, Path]) -> None:
    reg, _src = answer_set
    # A model's answers, written as a model writes them; 44 is no answer of the set: wrong.
    preds = pd.DataFrame(
        {"example_id": [str(i) for i in range(6)],
         "pred": ["13", "3.0", "$70,000", "60%", "44", "#### 32"]}
    )  # fmt: skip
    report = dsreg.evaluate("gsm@original", preds, registry=reg)
    assert report.to_dict()["models"][0]["scores"]["original"]["correct"]["top1"] == 5
    numbers = pd.DataFrame({"row": range(6), "pred": [13, 3, 70000, 60, 18, 33]})
    report = dsreg.evaluate("gsm@original", numbers, registry=reg)
    assert report.to_dict()["models"][0]["scores"]["original"]["correct"]["top1"] == 5


@pytest.fixture(params=["multiple-choice", "exact-answer"])
def tagged(
    request: pytest.FixtureRequest,
    question_set: tuple[Registry, Path],
    answer_set: tuple[Registry, Path],
    questions: list[Question],
    tmp_path: Path,
) -> tuple[Registry, str]:
    """Each kind of set at ``@original`` and re-annotated at ``@fixed`` (the corrected view)."""
    if request.param == "multiple-choice":
        reg, _src = question_set
        dataset, path, fmt = "mmlu", write_redux(tmp_path / "r.csv", questions), "mmlu-redux"
    else:
        reg, _src = answer_set
        dataset, fmt = "gsm", "status"
        path = tmp_path / "s.csv"
        path.write_text(
            "question,status,answer\n"
            f'"{GSM8K[0][0]}",revise,3\n"{GSM8K[1][0]}",reject,\n"{GSM8K[2][0]}",keep,70000\n'
        )
    dsreg.import_labels(
        f"{dataset}@original", path, format=fmt, tag="fixed", view="corrected", registry=reg
    )
    return reg, dataset


def test_tags_views_diff_and_cite(tagged: tuple[Registry, str]) -> None:
    reg, dataset = tagged
    original = dsreg.open(f"{dataset}@original", registry=reg)
    fixed = dsreg.open(f"{dataset}@fixed", registry=reg)
    assert fixed.view == "corrected" and len(fixed) < len(original)
    d = dsreg.diff(f"{dataset}@original", f"{dataset}@fixed", registry=reg).to_dict()
    assert d["only_a"] == len(original) - len(fixed)
    assert d["relabelled"] == int(np.sum(fixed.view_rows().label != fixed.view_rows().given_label))
    assert d["relabelled"] >= 1
    cited = dsreg.cite(f"{dataset}@fixed", registry=reg).to_dict()
    assert cited["revision"] == fixed.digest and cited["overlays"]
    assert dsreg.tag(f"{dataset}@again", f"{dataset}@fixed", registry=reg).revision == fixed.digest


def test_export_and_loaders(tagged: tuple[Registry, str], tmp_path: Path) -> None:
    reg, dataset = tagged
    ds = dsreg.open(f"{dataset}@fixed", registry=reg)
    labels = ds.labels_array(align="snapshot")
    for fmt in ("npy", "csv", "parquet", "jsonl"):
        out = tmp_path / f"labels.{fmt}"
        dsreg.export(f"{dataset}@fixed", out, format=fmt, registry=reg)
        assert out.stat().st_size > 0
    assert np.load(tmp_path / "labels.npy").tolist() == labels.tolist()
    frame = ds.to_pandas()
    assert frame["question"].tolist() == [
        r.question for r in ds.questions().rows if labels[r.row] >= 0
    ]
    hf = ds.to_hf(cache_dir=tmp_path / "hf")
    assert hf.features["label"].names == list(ds.classes)
    assert hf[0]["question"] == frame["question"][0]
    if ds.snapshot.task == "multiple-choice":
        assert hf[0]["choices"] == list(ds.questions().rows[int(frame["row"][0])].choices)
    folder = tmp_path / "croissant"
    dsreg.export(f"{dataset}@fixed", folder, format="croissant", registry=reg)
    assert any(folder.iterdir())


def test_question_rows_for_alignment(
    question_set: tuple[Registry, Path], questions: list[Question]
) -> None:
    """The public reader other importers align their records by (id or content)."""
    from dsreg.formats.questions.answers import question_key
    from dsreg.registry.reader import LocalReader
    from dsreg.views.questions import question_rows

    reg, _src = question_set
    qs = question_rows(LocalReader(reg).revision("mmlu@original"))
    assert [r.answer_text for r in qs.rows] == [q.choices[q.answer] for q in questions]
    twin = qs.by_key()[question_key(questions[0].question, questions[0].choices)]
    assert [r.row for r in twin] == [0, 40]
    assert qs.by_id()["3"].question == questions[3].question
    assert qs.answer_class("C") == 2 and qs.answer_class("F") is None


def test_every_view_of_a_re_annotation_is_served_alike(
    question_set: tuple[Registry, Path], questions: list[Question], tmp_path: Path
) -> None:
    """The view rule's three implementations agree on a version 4 overlay: the numpy rule
    (``Dataset``), DuckDB (``sql``) and the sparse evaluator (``eval``'s row counts)."""
    reg, _src = question_set
    path = write_redux(tmp_path / "r.csv", questions)
    res = dsreg.import_labels("mmlu@original", path, format="mmlu-redux", registry=reg)
    preds = tmp_path / "m.npy"
    np.save(preds, _predictions(questions))
    for view in ("cleaned", "corrected", "multilabel", "honeypot"):
        dsreg.tag(f"mmlu@{view}", "mmlu@original", overlays=[res.digest], view=view, registry=reg)
        ds = dsreg.open(f"mmlu@{view}", registry=reg).labels()
        query = f'SELECT "row", label, labels FROM "mmlu@{view}" ORDER BY "row"'
        served = dsreg.sql(query, registry=reg)
        assert served.column("row").to_pylist() == ds.column("row").to_pylist(), view
        assert served.column("label").to_pylist() == ds.column("label").to_pylist(), view
        assert served.column("labels").to_pylist() == ds.column("labels").to_pylist(), view
        rows = dsreg.evaluate(f"mmlu@{view}", preds, registry=reg).to_dict()["views"]
        assert rows[view]["rows"] == ds.num_rows, view
    multi = dsreg.open("mmlu@multilabel", registry=reg).labels().to_pylist()
    assert {r["row"]: r["labels"] for r in multi}[4] == sorted({1, 3, questions[4].answer})
