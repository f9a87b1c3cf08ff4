"""A question set's rows as questions (docs/questions.md, "Reading a question set back"): the
one reader of a revision's question, choices and answer per row, for whatever lines rows up
with them by document id or by content (the published re-annotations of
``dsreg.overlays.published``, a model's logged answers, ``dsreg show``).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsreg.errors import InvalidInputError
from dsreg.formats.questions.answers import (
    EXACT_ANSWER,
    MULTIPLE_CHOICE,
    answer_position,
    normalize_answer,
    question_key,
)
from dsreg.registry.reader import Resolved
from dsreg.registry.tables import read_examples

__all__ = ["QuestionRow", "QuestionSet", "question_rows"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionRow:
    """One row of a question set.

    ``row``: its position in the snapshot; ``example_id``: its id (the file's id column, or
    the row number as text); ``question``: the question as registered; ``choices``: a
    multiple-choice row's option texts in order (``None`` for an exact-answer row);
    ``answer``: the snapshot's label, a class index (a multiple-choice row: the answer's
    position, ``choices[answer]`` its text; an exact-answer row: the index of its normalised
    answer in the classes); ``answer_text``: the answer as text (the chosen option's text, or
    the answer as the file gave it, before normalisation)."""

    row: int
    example_id: str
    question: str
    choices: tuple[str, ...] | None
    answer: int
    answer_text: str

    @property
    def key(self) -> str:
        """The row's content key (``answers.question_key``): its question and choices
        folded (Unicode NFKC, curly quotes straight, white space runs as one space)."""
        return question_key(self.question, self.choices)


@dataclass(frozen=True, kw_only=True)
class QuestionSet:
    """Every row of a question set's snapshot, in row order, with what reads them needs:
    ``task`` (``multiple-choice`` or ``exact-answer``), ``classes`` (letters, or the normalised
    answers) and an exact-answer set's ``normalization`` (``gsm8k/1``; None otherwise)."""

    task: str
    classes: tuple[str, ...]
    normalization: str | None
    rows: tuple[QuestionRow, ...]

    def by_id(self) -> dict[str, QuestionRow]:
        """The rows by example id (ids are unique in a snapshot)."""
        return {r.example_id: r for r in self.rows}

    def by_key(self, *, choices: bool = True) -> dict[str, list[QuestionRow]]:
        """The rows by content key, each key's rows in row order (a set may hold a question
        twice); ``choices=False``: by the question alone (``question_key(question)``)."""
        out: dict[str, list[QuestionRow]] = defaultdict(list)
        for r in self.rows:
            out[r.key if choices else question_key(r.question)].append(r)
        return dict(out)

    def answer_class(self, text: str) -> int | None:
        """The class an answer names, or None when the set has no such class: an exact answer
        normalised by the set's rule and looked up among the classes; for a multiple-choice
        set, a letter (``"C"``) or a 0-based position (``"2"``) within the classes."""
        if self.task == MULTIPLE_CHOICE:
            pos = answer_position(text)
            return pos if pos is not None and pos < len(self.classes) else None
        assert self.normalization is not None
        folded = normalize_answer(text, self.normalization)
        return self._class_index.get(folded)

    @functools.cached_property
    def _class_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.classes)}


def question_rows(resolved: Resolved) -> QuestionSet:
    """The question, choices and answer of every row of ``resolved``'s snapshot, in row order
    (recorded results are aligned with a snapshot's rows, whatever view a revision serves;
    ``dsreg.open(spec).labels_array()`` gives the view's labels on the same rows).

    How a record of another file finds its row: by example id (``QuestionSet.by_id``), or by
    content, ``QuestionSet.by_key()[formats.questions.answers.question_key(question, choices)]`` (a
    list: a question may come twice in a set, and then a record names every such row). An
    answer a record gives is compared as ``QuestionSet.answer_class`` reads it. Refuses
    (``InvalidInputError``) a snapshot that is not a question set."""
    reg = resolved.registry
    snap = reg.snapshot(resolved.revision.snapshot)
    if snap.task not in (MULTIPLE_CHOICE, EXACT_ANSWER):
        raise InvalidInputError(
            f"{snap.dataset} is not a question set (its snapshot's task is {snap.task}); "
            "register one with 'dsreg add NAME --questions FILE' or '--answers FILE'"
        )
    mc = snap.task == MULTIPLE_CHOICE
    columns = ["example_id", "label", "question", "choices" if mc else "answer"]
    table = read_examples(reg, snap, columns=columns)
    ids = table.column("example_id").to_pylist()
    labels = table.column("label").to_pylist()
    questions = table.column("question").to_pylist()
    extra: Sequence[Any] = table.column(columns[-1]).to_pylist()
    rows = []
    for i, (eid, label, question, value) in enumerate(
        zip(ids, labels, questions, extra, strict=True)
    ):
        options: tuple[str, ...] | None = tuple(value) if mc and value is not None else None
        text = options[label] if options is not None else str(value)
        rows.append(
            QuestionRow(
                row=i,
                example_id=eid,
                question=question,
                choices=options,
                answer=label,
                answer_text=text,
            )
        )
    return QuestionSet(
        task=snap.task, classes=snap.classes, normalization=snap.normalization, rows=tuple(rows)
    )
