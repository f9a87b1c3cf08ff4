"""Shared fixtures of the question-set tests: small multiple-choice and exact-answer sets in
every source format, and re-annotation files in the layouts the releases publish (the
MMLU-Redux CSV, a Platinum-style status file), written by the tests themselves."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry

REDUX_COLUMNS = (
    "question",
    "choices",
    "answer",
    "error_type",
    "source",
    "correct_answer",
    "potential_reason",
)


@dataclass(frozen=True)
class Question:
    """One multiple-choice row and what an MMLU-Redux annotator said of it."""

    question: str
    choices: tuple[str, ...]
    answer: int
    subject: str
    error_type: str = "ok"
    correct_answer: str = ""


def _questions() -> list[Question]:
    """40 questions, their answers and annotations fixed: every error type of the release
    (spelled as the release spells them), letters and digits as correct answers, a row with 3
    and one with 5 choices, and one question asked twice (in two subjects)."""
    out = []
    kinds = [
        ("ok", ""),
        ("OK", ""),
        ("Wrong Groundtruth", "C"),
        ("wrong groundtruth", "2"),
        ("multiple correct answers", "1, 3"),
        ("No Correct Answer", "-2-a"),
        ("bad question clarity", ""),
        ("Bad Options Clarity", ""),
        ("expert", ""),
        ("Ok", ""),
    ]
    for i in range(40):
        error_type, correct = kinds[i % len(kinds)]
        answer = (i * 7) % 4
        if error_type.lower().startswith("wrong") and correct in ("C", "2"):
            answer = 0  # the correct answer is another choice
        n = 3 if i == 5 else 5 if i == 6 else 4
        answer = min(answer, n - 1)
        out.append(
            Question(
                question=f"Question {i}: which option is right, given “case” {i % 3}?",
                choices=tuple(f"option {j} of {i}" for j in range(n)),
                answer=answer,
                subject="algebra" if i < 20 else "biology",
                error_type=error_type,
                correct_answer=correct,
            )
        )
    # The release repeats a question across subjects: the same text and choices again.
    twin = out[0]
    out.append(Question(twin.question, twin.choices, twin.answer, "biology", "ok", ""))
    return out


@pytest.fixture(scope="session")
def questions() -> list[Question]:
    return _questions()


def write_questions(path: Path, rows: Sequence[Question], *, letters: bool = False) -> Path:
    """A multiple-choice set as ``.csv`` (choices as a Python list literal, as pandas writes
    them), ``.jsonl`` or ``.parquet``, by ``path``'s suffix; ``letters``: answers as letters."""
    records = [
        {
            "question": q.question,
            "choices": list(q.choices),
            "answer": "ABCDEFG"[q.answer] if letters else q.answer,
            "subject": q.subject,
        }
        for q in rows
    ]
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(records), path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["question", "choices", "answer", "subject"])
            for r in records:
                w.writerow([r["question"], repr(r["choices"]), r["answer"], r["subject"]])
    return path


def write_redux(
    path: Path,
    rows: Sequence[Question],
    *,
    separator: str = ",",
    encoding: str = "utf-8",
    columns: Sequence[str] = REDUX_COLUMNS,
) -> Path:
    """The MMLU-Redux release's CSV layout: ``columns`` in that order, choices as a Python list
    literal, the answer as a 0-based position."""
    with path.open("w", newline="", encoding=encoding) as f:
        w = csv.writer(f, delimiter=separator)
        w.writerow(columns)
        for q in rows:
            cells = {
                "question": q.question,
                "choices": repr(list(q.choices)),
                "answer": q.answer,
                "error_type": q.error_type,
                "source": "https://example.org/source",
                "correct_answer": q.correct_answer,
                "potential_reason": "a reason\non two lines" if q.correct_answer else "",
            }
            w.writerow([cells.get(c, "") for c in columns])
    return path


@pytest.fixture
def question_set(
    make_registry: Callable[..., Registry], tmp_path: Path, questions: list[Question]
) -> tuple[Registry, Path]:
    """A registry holding the questions as ``mmlu@original``, and the set's CSV."""
    reg = make_registry()
    src = write_questions(tmp_path / "mmlu.csv", questions)
    dsreg.add("mmlu", questions=src, tag="original", registry=reg)
    return reg, src


GSM8K = [
    ("Janet has 16 eggs and eats 3. How many are left?", "16 - 3 = <<16-3=13>>13\n#### 13"),
    ("A robe takes 2 bolts and half as much again. How many?", "2 + 1 = 3\n#### 3"),
    ("Josh buys a house for $80,000. What is the profit?", "It is $70,000.\n#### 70,000"),
    ("What share of 20 is 12?", "12/20 = 60%\n#### 60%"),
    ("How much is one dozen at $1.50 each?", "#### $18.00"),
    ("How many legs do 4 spiders have?", "#### 32"),
]


def write_answers(path: Path, rows: Sequence[tuple[str, Any]] = GSM8K) -> Path:
    """An exact-answer set in GSM8K's layout (question, answer with its ``####`` line)."""
    records = [{"question": q, "answer": a, "id": f"gsm-{i}"} for i, (q, a) in enumerate(rows)]
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(records), path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["question", "answer", "id"])
            w.writeheader()
            w.writerows(records)
    return path


@pytest.fixture
def answer_set(make_registry: Callable[..., Registry], tmp_path: Path) -> tuple[Registry, Path]:
    """A registry holding GSM8K-style rows as ``gsm@original`` (normalised as gsm8k), and the
    set's JSON Lines file."""
    reg = make_registry()
    src = write_answers(tmp_path / "gsm.jsonl")
    dsreg.add("gsm", answers=src, normalize="gsm8k", tag="original", registry=reg)
    return reg, src
