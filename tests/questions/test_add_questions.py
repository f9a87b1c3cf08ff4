"""Question sets registered (``add --questions``, ``add --answers``) and read back: labels,
classes, the questions and choices kept and shown, the normalisation in the digest, and every
refusal in one line with nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import dsreg
from dsreg import Registry
from dsreg.errors import DatasetFormatError, InvalidInputError
from dsreg.formats.manifests import Snapshot
from tests.questions.conftest import GSM8K, Question, write_answers, write_questions


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_multiple_choice_set_from_each_format(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    questions: list[Question],
    suffix: str,
) -> None:
    reg = make_registry()
    src = write_questions(tmp_path / f"q{suffix}", questions)
    res = dsreg.add("mmlu", questions=src, tag="original", registry=reg)
    # Letters up to the most choices any row has (one row has 5).
    assert res.classes == ("A", "B", "C", "D", "E")
    ds = dsreg.open("mmlu@original", registry=reg)
    assert ds.snapshot.task == "multiple-choice"
    assert ds.snapshot.normalization is None
    assert "normalization" not in ds.snapshot.to_dict()
    t = ds.labels()
    assert t.column("label").to_pylist() == [q.answer for q in questions]
    assert t.column("question").to_pylist() == [q.question for q in questions]
    assert t.column("choices").to_pylist() == [list(q.choices) for q in questions]
    assert t.column("subject").to_pylist() == [q.subject for q in questions]
    assert ds.snapshot.source["format"] == suffix.lstrip(".")


def test_the_same_set_from_each_format_is_the_same_table(
    make_registry: Callable[..., Registry], tmp_path: Path, questions: list[Question]
) -> None:
    reg = make_registry()
    examples = {
        dsreg.add(
            f"mmlu-{suffix[1:]}",
            questions=write_questions(tmp_path / f"q{suffix}", questions),
            tag="v",
            registry=reg,
        ).examples
        for suffix in (".csv", ".jsonl", ".parquet")
    }
    assert len(examples) == 1


def test_answers_as_letters_are_their_positions(
    make_registry: Callable[..., Registry], tmp_path: Path, questions: list[Question]
) -> None:
    reg = make_registry()
    by_index = write_questions(tmp_path / "index.csv", questions)
    by_letter = write_questions(tmp_path / "letter.csv", questions, letters=True)
    a = dsreg.add("a", questions=by_index, tag="v", registry=reg)
    b = dsreg.add("b", questions=by_letter, tag="v", registry=reg)
    la = dsreg.open("a@v", registry=reg).labels_array()
    lb = dsreg.open("b@v", registry=reg).labels_array()
    assert la.tolist() == lb.tolist() == [q.answer for q in questions]
    assert a.classes == b.classes


def test_questions_are_shown(
    cli: Callable[..., object], tmp_path: Path, questions: list[Question]
) -> None:
    write_questions(tmp_path / "q.csv", questions)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    r = cli("add", "mmlu", "--questions", "q.csv", "--tag", "original")
    assert r.exit_code == 0, r.stderr  # type: ignore[attr-defined]
    r = cli("show", "mmlu@original")
    first = questions[0]
    assert "task      multiple-choice" in r.stdout  # type: ignore[attr-defined]
    assert f"(A) {first.choices[0]}" in r.stdout  # type: ignore[attr-defined]
    shown = json.loads(cli("show", "mmlu@original", "--json").stdout)  # type: ignore[attr-defined]
    assert shown["task"] == "multiple-choice"
    assert shown["questions"][0]["choices"] == list(first.choices)
    assert shown["questions"][0]["label"] == "ABCDE"[first.answer]
    sql = 'SELECT choices[label + 1] AS text FROM "mmlu@original" ORDER BY "row" LIMIT 1'
    r = cli("sql", sql, "--format", "csv")
    assert first.choices[first.answer] in r.stdout  # type: ignore[attr-defined]


def test_the_review_card_shows_the_question_and_lettered_choices(
    question_set: tuple[Registry, Path], questions: list[Question]
) -> None:
    from dsreg.registry.reader import LocalReader
    from dsreg.reviewing.queued import Queued, shown_examples

    reg, src = question_set
    dsreg.import_labels(
        "mmlu@original",
        _redux_file(src.parent, questions),
        format="mmlu-redux",
        tag="redux",
        registry=reg,
    )
    q = Queued(LocalReader(reg).revision("mmlu@redux"), None)
    shown = dict(shown_examples(q, [2])[0].metadata)
    assert shown["question"] == questions[2].question
    assert shown["choices"].splitlines() == [
        f"{letter}. {text}" for letter, text in zip("ABCDE", questions[2].choices, strict=False)
    ]


def _redux_file(folder: Path, questions: list[Question]) -> Path:
    from tests.questions.conftest import write_redux

    return write_redux(folder / "redux.csv", questions)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_an_exact_answer_set_keeps_its_answers_normalised(
    make_registry: Callable[..., Registry], tmp_path: Path, suffix: str
) -> None:
    reg = make_registry()
    src = write_answers(tmp_path / f"gsm{suffix}")
    dsreg.add("gsm", answers=src, normalize="gsm8k", id_column="id", tag="v", registry=reg)
    ds = dsreg.open("gsm@v", registry=reg)
    assert ds.snapshot.task == "exact-answer"
    assert ds.snapshot.normalization == "gsm8k/1"
    assert ds.classes == ("13", "18", "3", "32", "60", "70000")  # sorted as text
    t = ds.labels()
    assert t.column("label_name").to_pylist() == ["13", "3", "70000", "60", "18", "32"]
    assert t.column("answer").to_pylist() == [a for _, a in GSM8K]  # as given
    assert t.column("example_id").to_pylist() == [f"gsm-{i}" for i in range(len(GSM8K))]


def test_the_normalisation_is_part_of_the_digest(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    rows = [("Q1", "5"), ("Q2", "5.0"), ("Q3", "Yes")]
    src = write_answers(tmp_path / "a.csv", rows)
    text = dsreg.add("text", answers=src, tag="v", registry=reg)
    gsm = dsreg.add("gsm", answers=src, normalize="gsm8k", tag="v", registry=reg)
    assert text.classes == ("5", "5.0", "yes")
    assert gsm.classes == ("5", "yes")
    assert reg.snapshot(text.snapshot).normalization == "text/1"
    # The same rows, answers and classes under two rules: two snapshots.
    same = write_answers(tmp_path / "b.csv", [("Q1", "5"), ("Q2", "yes")])
    t2 = dsreg.add("t2", answers=same, tag="v", registry=reg)
    g2 = dsreg.add("t2", answers=same, normalize="gsm8k", tag="w", registry=reg)
    assert reg.snapshot(t2.snapshot).classes == reg.snapshot(g2.snapshot).classes
    assert t2.snapshot != g2.snapshot


def test_classes_may_hold_answers_no_row_has(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    src = write_answers(tmp_path / "a.jsonl")
    res = dsreg.add(
        "gsm", answers=src, normalize="gsm8k", classes=["1,000", "#### 13"], registry=reg
    )
    assert "1000" in res.classes and res.classes.count("13") == 1


def test_a_snapshot_without_a_normalisation_keeps_its_bytes() -> None:
    snap = Snapshot(dataset="d", examples="blake3:" + "0" * 64, rows=1, classes=("a",))
    assert "normalization" not in snap.to_dict()
    assert Snapshot.from_dict(snap.to_dict()) == snap


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([{"question": "q", "choices": "a, b", "answer": 0}], "row 0 has the choices 'a, b'"),
        ([{"question": "q", "choices": ["a", "b"], "answer": 2}], "row 0 has the answer 2"),
        ([{"question": "q", "choices": ["a", "b"], "answer": "E"}], "row 0 has the answer 'E'"),
        ([{"question": "", "choices": ["a"], "answer": 0}], "row 0 has the question ''"),
        ([{"question": "q", "choices": [str(i) for i in range(27)], "answer": 0}], "27 choices"),
        ([{"question": "q", "answer": 0}], "no column 'choices' \\(--choices-column\\)"),
        ([{"question": "q", "choices": ["a"], "answer": 0}, {"question": 3}], "several kinds"),
    ],
)
def test_a_bad_question_set_is_refused_in_one_line(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    registry_state: Callable[[Path], dict[str, object]],
    rows: list[dict[str, object]],
    match: str,
) -> None:
    reg = make_registry()
    src = tmp_path / "bad.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = registry_state(reg.root)
    with pytest.raises(DatasetFormatError, match=match) as e:
        dsreg.add("bad", questions=src, tag="v", registry=reg)
    assert "\n" not in str(e.value)
    assert registry_state(reg.root) == before


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"questions": "q.csv", "normalize": "gsm8k"}, "--normalize goes with --answers"),
        ({"questions": "q.csv", "classes": ["A"]}, "--classes does not go with --questions"),
        ({"answers": "q.csv", "normalize": "math"}, "unknown --normalize 'math'"),
        ({"questions": "q.csv", "answers": "q.csv"}, "give exactly one source"),
        ({"labels": "l.npy", "id_column": "id"}, "--id-column goes with"),
    ],
)
def test_options_that_do_not_go_together_are_refused(
    cli: Callable[..., object],
    tmp_path: Path,
    questions: list[Question],
    options: dict[str, object],
    match: str,
) -> None:
    write_questions(tmp_path / "q.csv", questions)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    args = []
    for name, value in options.items():
        for v in value if isinstance(value, list) else [value]:
            args += [f"--{name.replace('_', '-')}", str(v)]
    if "classes" in options:
        (tmp_path / "A").write_text("A\n")
    r = cli("add", "x", *args)
    assert r.exit_code == 1  # type: ignore[attr-defined]
    assert match.split("'")[0] in r.stderr  # type: ignore[attr-defined]
    assert len(r.stderr.strip().splitlines()) == 1  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError):
        dsreg.add("x", registry=tmp_path / ".dsreg", **options)  # type: ignore[arg-type]
