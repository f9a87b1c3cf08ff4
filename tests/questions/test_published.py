"""Published re-annotations imported as overlays (``overlay import-labels --format mmlu-redux``
and ``--format status``): the release's files as they are (separators, encodings, column
orders, spellings, repeated questions), the verdicts and categories they give, and each
refusal in one line with nothing written."""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import dsreg
from dsreg import Registry
from dsreg.errors import InvalidInputError, RelabelingError
from tests.questions.conftest import Question, write_answers, write_questions, write_redux

# What each error type becomes (docs/questions.md, "From categories to verdicts").
REDUX_VERDICT = {
    "ok": "non_error",
    "wrong_groundtruth": "correctable",
    "multiple_correct_answers": "multi_label",
    "no_correct_answer": "neither",
    "bad_question_clarity": "neither",
    "bad_options_clarity": "neither",
    "expert": "unreviewed",
}


def _error_types(path: Path, sep: str = ",", encoding: str = "utf-8") -> pd.Series:
    frame = pd.read_csv(path, sep=sep, encoding=encoding, dtype=str, keep_default_na=False)
    return frame["error_type"].str.strip().str.lower().str.replace(" ", "_")


def test_verdict_counts_equal_the_file_s_error_type_counts(
    question_set: tuple[Registry, Path], questions: list[Question], tmp_path: Path
) -> None:
    reg, _src = question_set
    path = write_redux(tmp_path / "redux.csv", questions)
    res = dsreg.import_labels("mmlu@original", path, format="mmlu-redux", tag="redux", registry=reg)
    types = _error_types(path)
    ov = reg.overlay(res.digest)
    assert ov.version == 4 and ov.kind == "validated"
    assert ov.summary["error_types"] == {t: int((types == t).sum()) for t in REDUX_VERDICT}
    # One line per row but the twin question, whose two "ok" lines name both of its rows.
    verdicts = Counter(REDUX_VERDICT[t] for t in types)
    for verdict, n in verdicts.items():
        assert ov.summary[verdict] == n, verdict
    assert ov.summary["lines"] == len(questions) and ov.summary["checked"] == len(questions)
    assert ov.summary["repeated"] == 2 and ov.summary["match"] == "content"
    # Read back per row: each category's rows, as overlay show --category lists them.
    for name, n in ov.summary["error_types"].items():
        shown = dsreg.overlay_show(res.digest, category=name, rows=0, registry=reg)
        assert shown.total == n, name


def test_the_corrections_of_each_error_type(
    question_set: tuple[Registry, Path], questions: list[Question], tmp_path: Path
) -> None:
    reg, _src = question_set
    path = write_redux(tmp_path / "redux.csv", questions)
    res = dsreg.import_labels("mmlu@original", path, format="mmlu-redux", registry=reg)
    rows = {r["row"]: r for r in dsreg.overlay_show(res.digest, rows=100, registry=reg).corrections}
    assert rows[2]["verdict"] == "correctable" and rows[2]["suggested_label"] == 2  # "C"
    assert rows[3]["verdict"] == "correctable" and rows[3]["suggested_label"] == 2  # "2"
    assert rows[4]["verdict"] == "multi_label"
    assert rows[4]["labels"] == sorted({1, 3, questions[4].answer})  # "1, 3" and the given
    assert rows[5]["verdict"] == "neither" and rows[5]["suggested_label"] is None  # "-2-a"
    assert rows[8]["verdict"] == "unreviewed" and rows[8]["category"] == "expert"
    assert {rows[i]["category"] for i in (6, 7)} == {"bad_question_clarity", "bad_options_clarity"}


@pytest.mark.parametrize(
    ("separator", "encoding", "columns"),
    [
        (";", "utf-8", None),
        (",", "cp1252", None),
        (";", "cp1252", None),
        (",", "utf-8-sig", None),
        (",", "utf-8", ("question", "choices", "answer", "correct_answer", "error_type",
                        "source", "potential_reason")),
        (",", "utf-8", ("question", "choices", "answer", "error_type", "source",
                        "correct_answer", "potential_reason", "", "")),
    ],
)  # fmt: skip
def test_the_release_s_files_as_they_are(
    question_set: tuple[Registry, Path],
    questions: list[Question],
    tmp_path: Path,
    separator: str,
    encoding: str,
    columns: tuple[str, ...] | None,
) -> None:
    """Separated by ';', not UTF-8 (Windows-1252: the questions' curly quotes are single
    bytes), a byte-order mark, the columns in another order, trailing unnamed columns."""
    reg, _src = question_set
    kwargs = {"columns": columns} if columns else {}
    path = write_redux(
        tmp_path / "r.csv", questions, separator=separator, encoding=encoding, **kwargs
    )  # type: ignore[arg-type]
    res = dsreg.import_labels("mmlu@original", path, format="mmlu-redux", registry=reg)
    assert res.summary["encoding"] == ("cp1252" if encoding == "cp1252" else "utf-8")
    assert res.summary["checked"] == len(questions)
    clean = write_redux(tmp_path / "clean.csv", questions)
    same = dsreg.import_labels("mmlu@original", clean, format="mmlu-redux", registry=reg)
    # The same annotations whatever the file's bytes: the same corrections table.
    assert reg.overlay(res.digest).corrections == reg.overlay(same.digest).corrections


def test_repeated_lines_that_disagree_make_non_agreement(
    question_set: tuple[Registry, Path], questions: list[Question], tmp_path: Path
) -> None:
    reg, _src = question_set
    twin = replace(questions[-1], error_type="Expert")
    path = write_redux(tmp_path / "r.csv", [*questions[:-1], twin])
    res = dsreg.import_labels("mmlu@original", path, format="mmlu-redux", registry=reg)
    rows = dsreg.overlay_show(res.digest, verdict="non_agreement", rows=10, registry=reg)
    assert [(r["row"], r["category"]) for r in rows.corrections] == [
        (0, "expert|ok"),
        (40, "expert|ok"),
    ]
    assert res.summary["conflicting"] == 2


def test_a_status_file_as_the_platinum_releases_publish(
    answer_set: tuple[Registry, Path], tmp_path: Path
) -> None:
    reg, _src = answer_set
    path = tmp_path / "platinum.jsonl"
    from tests.questions.conftest import GSM8K

    status = ["consensus", "verified", "revised", "rejected", "revised", "consensus"]
    answers = [a for _, a in GSM8K]
    answers[2] = "The profit is 60%\n#### 60"  # revised to an answer the set has
    answers[4] = "#### 18"  # revised to the same answer: the label was right
    path.write_text(
        "".join(
            json.dumps({"question": q, "answer": a, "cleaning_status": s}) + "\n"
            for (q, _), a, s in zip(GSM8K, answers, status, strict=True)
        )
    )
    res = dsreg.import_labels("gsm@original", path, format="status", tag="platinum", registry=reg)
    rows = dsreg.overlay_show(res.digest, rows=10, registry=reg).corrections
    assert [(r["verdict"], r["category"]) for r in rows] == [
        ("non_error", "keep"),
        ("non_error", "keep"),
        ("correctable", "revise"),
        ("neither", "reject"),
        ("non_error", "revise"),
        ("non_error", "keep"),
    ]
    ds = dsreg.open("gsm@platinum", registry=reg)
    assert ds.classes[rows[2]["suggested_label"]] == "60"
    assert res.summary["statuses"] == {"keep": 3, "revise": 2, "reject": 1}
    # The cleaned view drops the rejected and the revised row; the corrected one revises.
    assert dsreg.open("gsm@platinum", registry=reg).labels().num_rows == 4
    dsreg.import_labels(
        "gsm@original", path, format="status", tag="fixed", view="corrected", registry=reg
    )
    served = dsreg.sql('SELECT label_name FROM "gsm@fixed" ORDER BY "row"', registry=reg)
    assert served.column("label_name").to_pylist() == ["13", "3", "60", "18", "32"]


def test_a_revised_answer_the_set_has_no_class_for(
    answer_set: tuple[Registry, Path],
    tmp_path: Path,
    registry_state: Callable[[Path], dict[str, object]],
) -> None:
    reg, src = answer_set
    path = tmp_path / "status.csv"
    path.write_text("question,status,answer\n" + f'"{_gsm(0)}",revise,"#### 1,234"\n')
    before = registry_state(reg.root)
    with pytest.raises(RelabelingError, match=r"line 2: the answer '#### 1,234' \('1234'") as e:
        dsreg.import_labels("gsm@original", path, format="status", registry=reg)
    assert "--classes FILE naming '1234'" in str(e.value) and "\n" not in str(e.value)
    assert registry_state(reg.root) == before
    # What the refusal says to do: the classes then hold the answer, and the import goes on.
    dsreg.add("gsm", answers=src, normalize="gsm8k", classes=["1234"], tag="v2", registry=reg)
    res = dsreg.import_labels("gsm@v2", path, format="status", registry=reg)
    assert res.summary["checked"] == 1


def _gsm(i: int) -> str:
    from tests.questions.conftest import GSM8K

    return GSM8K[i][0]


def test_a_status_file_by_example_id_on_a_multiple_choice_set(
    question_set: tuple[Registry, Path], tmp_path: Path
) -> None:
    reg, _src = question_set
    path = tmp_path / "status.csv"
    path.write_text("example_id,status,answer\n1,keep,\n2,revise,D\n3,reject,\n")
    res = dsreg.import_labels("mmlu@original", path, format="status", registry=reg)
    rows = dsreg.overlay_show(res.digest, rows=10, registry=reg).corrections
    assert [(r["row"], r["verdict"], r["suggested_label"]) for r in rows] == [
        (1, "non_error", None),
        (2, "correctable", 3),
        (3, "neither", None),
    ]
    assert res.summary["match"] == "example_id"


def _lines(questions: list[Question]) -> list[list[str]]:
    return [[q.question, repr(list(q.choices)), str(q.answer), "ok", "", "", ""] for q in questions]


def _write_rows(path: Path, header: list[str], rows: list[list[str]], sep: str = ",") -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=sep)
        w.writerow(header)
        w.writerows(rows)
    return path


HEADER = ["question", "choices", "answer", "error_type", "source", "correct_answer", "reason"]


def _refusals(questions: list[Question], tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Files the importer cannot read or match, with the words of their refusal."""
    good = _lines(questions[:3])
    unknown = [row.copy() for row in good]
    unknown[1][3] = "Typo Error"
    stranger = [row.copy() for row in good]
    stranger[2][0] = "A question this set does not have?"
    other_label = [row.copy() for row in good]
    other_label[0][2] = str((questions[0].answer + 1) % 4)
    beyond = [row.copy() for row in good]
    beyond[1][3], beyond[1][5] = "wrong groundtruth", "E"
    extra = [row.copy() for row in good]
    extra[1].append("stray")
    piped = tmp_path / "piped.csv"
    piped.write_text("|".join(HEADER) + "\n" + "|".join(good[0]) + "\n")
    return {
        "a separator dsreg does not read": (piped, "line 1: the header is one column"),
        "a file in Mac OS Roman": (
            write_redux(tmp_path / "m.csv", questions[:3], encoding="mac_roman"),
            "line 2: no row of mmlu has the question 'Question 0: which option is right, given "
            "ÒcaseÓ 0?' with these choices (compared with white space, curly quotes and Unicode "
            "forms folded); is the file about this set? The file is not UTF-8 and was read as "
            "cp1252: if it holds another encoding, convert it to UTF-8 first (Mac OS Roman: "
            "iconv -f MACINTOSH -t UTF-8)",
        ),
        "an unknown error type": (
            _write_rows(tmp_path / "u.csv", HEADER, unknown),
            "line 3: error_type 'Typo Error' is none of ok, wrong_groundtruth",
        ),
        "a question the set does not have": (
            _write_rows(tmp_path / "s.csv", HEADER, stranger),
            "line 4: no row of mmlu has the question 'A question this set does not have?'",
        ),
        "another label": (
            _write_rows(tmp_path / "o.csv", HEADER, other_label),
            "line 2: its answer",
        ),
        "a choice the row lacks": (
            _write_rows(tmp_path / "b.csv", HEADER, beyond),
            "line 3: the answer 'E' names a choice row 1 does not have",
        ),
        "a line with more fields than the header": (
            _write_rows(tmp_path / "x.csv", HEADER, extra),
            "line 3: 8 fields, but the header (line 1) names 7 columns",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "a separator dsreg does not read",
        "a file in Mac OS Roman",
        "an unknown error type",
        "a question the set does not have",
        "another label",
        "a choice the row lacks",
        "a line with more fields than the header",
    ],
)
def test_what_cannot_be_read_or_matched_is_refused_in_one_line(
    cli: Callable[..., object],
    tmp_path: Path,
    questions: list[Question],
    registry_state: Callable[[Path], dict[str, object]],
    case: str,
) -> None:
    write_questions(tmp_path / "q.csv", questions)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    assert cli("add", "mmlu", "--questions", "q.csv", "--tag", "original").exit_code == 0  # type: ignore[attr-defined]
    path, words = _refusals(questions, tmp_path)[case]
    before = registry_state(tmp_path / ".dsreg")
    r = cli("overlay", "import-labels", "mmlu@original", str(path), "--format", "mmlu-redux",
            "--tag", "redux")  # fmt: skip
    assert r.exit_code == 1  # type: ignore[attr-defined]
    err = r.stderr.strip()  # type: ignore[attr-defined]
    assert len(err.splitlines()) == 1, err
    assert str(path) in err and words in err, err
    assert registry_state(tmp_path / ".dsreg") == before


def test_mmlu_redux_is_for_multiple_choice_sets(
    answer_set: tuple[Registry, Path], tmp_path: Path
) -> None:
    reg, _src = answer_set
    path = _write_rows(tmp_path / "r.csv", HEADER, [])
    with pytest.raises(RelabelingError, match="re-annotates a multiple-choice set"):
        dsreg.import_labels("gsm@original", path, format="mmlu-redux", registry=reg)


def test_category_asked_of_an_overlay_without_categories(
    question_set: tuple[Registry, Path], tmp_path: Path
) -> None:
    reg, _src = question_set
    path = tmp_path / "c.csv"
    path.write_text("row,example_id,given_label,suggested_label,verdict\n0,0,0,,neither\n")
    res = dsreg.import_labels("mmlu@original", path, format="csv", registry=reg)
    with pytest.raises(InvalidInputError, match="holds no categories"):
        dsreg.overlay_show(res.digest, category="ok", registry=reg)


def test_credit_is_kept_as_for_other_relabelings(
    question_set: tuple[Registry, Path], questions: list[Question], tmp_path: Path
) -> None:
    reg, _src = question_set
    bib = tmp_path / "redux.bib"
    bib.write_text(
        "@inproceedings{gema2025mmlu,\n  title = {Are We Done with MMLU?},\n"
        "  author = {Gema, Aryo Pradipta},\n  year = {2025}\n}\n"
    )
    path = write_redux(tmp_path / "r.csv", questions)
    res = dsreg.import_labels(
        "mmlu@original", path, format="mmlu-redux", citation=bib, tag="redux", registry=reg
    )
    assert "gema2025mmlu" in reg.overlay(res.digest).producer["credit"]["bibtex"]
    assert "gema2025mmlu" in json.dumps(dsreg.cite("mmlu@redux", registry=reg).to_dict())


def test_a_set_without_question_content_is_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    dsreg.add("plain", table=_plain_table(tmp_path), tag="v", registry=reg)
    path = write_answers(tmp_path / "a.csv")
    with pytest.raises(InvalidInputError, match="not a question set"):
        dsreg.import_labels("plain@v", path, format="status", registry=reg)


def _plain_table(tmp_path: Path) -> Path:
    path = tmp_path / "plain.csv"
    path.write_text("example_id,label\na,0\nb,1\n")
    return path


def test_question_lines_of_a_jsonl_and_parquet_file(
    question_set: tuple[Registry, Path], questions: list[Question], tmp_path: Path
) -> None:
    reg, _src = question_set
    records = [
        {"question": q.question, "choices": list(q.choices), "answer": q.answer,
         "error_type": q.error_type, "correct_answer": q.correct_answer}
        for q in questions
    ]  # fmt: skip
    jl = tmp_path / "r.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in records))
    pq_path = tmp_path / "r.parquet"
    pd.DataFrame(records).to_parquet(pq_path)
    a = dsreg.import_labels("mmlu@original", jl, format="mmlu-redux", registry=reg)
    b = dsreg.import_labels("mmlu@original", pq_path, format="mmlu-redux", registry=reg)
    assert reg.overlay(a.digest).corrections == reg.overlay(b.digest).corrections


def test_a_file_of_a_header_alone_is_refused(
    question_set: tuple[Registry, Path], tmp_path: Path
) -> None:
    reg, _src = question_set
    path = _write_rows(tmp_path / "r.csv", HEADER, [])
    with pytest.raises(RelabelingError, match="holds no annotation, only its header"):
        dsreg.import_labels("mmlu@original", path, format="mmlu-redux", registry=reg)
