"""How one record of a published re-annotation becomes the correction of one row: its category
read (every spelling the releases use), then its verdict, suggested label and label set against
that row (docs/questions.md, "From categories to verdicts", where the tables of this module are
written out).

Two formats. ``mmlu-redux``: the MMLU-Redux release's ``error_type`` and ``correct_answer``
(a letter, or a 0-based position as the release's digits are: its first file's wrong ground
truth ``3`` corrected to ``2`` is the option its reason names). ``status``: a status per row,
``keep``, ``revise`` (with the revised answer) or ``reject``, as the Platinum benchmarks publish
them (``cleaning_status``: ``consensus`` and ``verified`` keep, ``revised``, ``rejected``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from dsreg._util.inputs import shown
from dsreg.errors import RelabelingError
from dsreg.formats.questions.answers import (
    MULTIPLE_CHOICE,
    answer_position,
    answer_positions,
    normalize_answer,
)
from dsreg.overlays.published.records import PublishedFile, Record
from dsreg.views.questions import QuestionRow, QuestionSet

__all__ = [
    "ANSWER_COLUMNS",
    "ERROR_TYPES",
    "STATUSES",
    "Annotation",
    "annotate",
    "category",
    "category_column",
]

# MMLU-Redux's error types as dsreg spells them (the release's own snake_case), each with the
# other spellings its files use once case, spaces and hyphens are folded (``Wrong Groundtruth``,
# ``No Correct Answers``, ``Unclear Question``).
ERROR_TYPES: Final[Mapping[str, tuple[str, ...]]] = {
    "ok": ("ok",),
    "wrong_groundtruth": ("wrong_groundtruth", "wrong_ground_truth"),
    "multiple_correct_answers": ("multiple_correct_answers", "multiple_correct_answer"),
    "no_correct_answer": ("no_correct_answer", "no_correct_answers"),
    "bad_question_clarity": ("bad_question_clarity", "bad_questions_clarity", "unclear_question"),
    "bad_options_clarity": ("bad_options_clarity", "bad_option_clarity", "unclear_options"),
    "expert": ("expert",),
}
# A status file's statuses, with the Platinum releases' ``cleaning_status`` values.
STATUSES: Final[Mapping[str, tuple[str, ...]]] = {
    "keep": ("keep", "consensus", "verified", "ok"),
    "revise": ("revise", "revised"),
    "reject": ("reject", "rejected"),
}
# The column a format's category is in: the first of these the file has.
_CATEGORY_COLUMNS: Final = {"mmlu-redux": ("error_type",), "status": ("status", "cleaning_status")}
# A status file's answer: the first of these columns the file has.
ANSWER_COLUMNS: Final = ("answer", "revised_answer", "platinum_target")
# MMLU-Redux's error types that remove a row from the cleaned and corrected views.
_NEITHER: Final = frozenset({"no_correct_answer", "bad_question_clarity", "bad_options_clarity"})


@dataclass(frozen=True, slots=True)
class Annotation:
    """What one record says of one row: its ``category`` (dsreg's spelling), ``verdict``,
    ``suggested`` label (-1: none) and label set (``labels``, ascending; None: none)."""

    category: str
    verdict: str
    suggested: int = -1
    labels: tuple[int, ...] | None = None


def _folded(text: str) -> str:
    return re.sub(r"[\s\-]+", "_", text.strip().lower())


_LOOKUP: Final = {
    fmt: {alias: name for name, aliases in table.items() for alias in aliases}
    for fmt, table in (("mmlu-redux", ERROR_TYPES), ("status", STATUSES))
}


def category_column(fmt: str, file: PublishedFile) -> str:
    """The column of ``file`` that holds ``fmt``'s categories; refused when it has none."""
    names = _CATEGORY_COLUMNS[fmt]
    found = next((c for c in names if c in file.columns), None)
    if found is None:
        raise file.refuse(
            None,
            f"no column {' or '.join(map(repr, names))}, which a {fmt} file has; its columns "
            f"are {list(file.columns)} (separated by ',', ';' or tab)",
        )
    return found


def category(fmt: str, file: PublishedFile, record: Record, column: str) -> str:
    """The record's category as dsreg spells it; an unknown one is refused naming the known."""
    raw = record.text(column)
    name = _LOOKUP[fmt].get(_folded(raw))
    if name is None:
        known = ERROR_TYPES if fmt == "mmlu-redux" else STATUSES
        raise file.refuse(
            record,
            f"{column} {shown(raw)} is none of {', '.join(known)} (in any case, with spaces or "
            "underscores); correct the file",
        )
    return name


def annotate(
    fmt: str, file: PublishedFile, record: Record, name: str, row: QuestionRow, qs: QuestionSet
) -> Annotation:
    """What ``record`` (of category ``name``) says of ``row``."""
    if fmt == "mmlu-redux":
        return _redux(file, record, name, row)
    return _status(file, record, name, row, qs)


def _within(
    file: PublishedFile, record: Record, row: QuestionRow, value: object
) -> tuple[int, ...] | None:
    """The positions ``value`` names (None: none); refused when one is beyond ``row``'s
    choices."""
    assert row.choices is not None
    n = len(row.choices)
    found = answer_positions(value)
    if found is not None and found[-1] >= n:
        raise file.refuse(
            record,
            f"the answer {shown(value)} names a choice row {row.row} does not have (it has "
            f"{n}: 0 to {n - 1}, or A to {chr(ord('A') + n - 1)})",
        )
    return found


def _redux(file: PublishedFile, record: Record, name: str, row: QuestionRow) -> Annotation:
    given = answer_position(record.values.get("answer"))
    if "answer" in record.values and given is not None and given != row.answer:
        raise file.refuse(
            record,
            f"its answer {shown(record.values['answer'])} is not the label of row {row.row} "
            f"(example {shown(row.example_id)}: {row.answer}); the file re-annotates other "
            "labels: import it onto the snapshot it was made for",
        )
    if name == "ok":
        return Annotation(name, "non_error")
    if name == "expert":  # the annotator could not judge it: no verdict on the label
        return Annotation(name, "unreviewed")
    if name in _NEITHER:
        return Annotation(name, "neither")
    correct = record.text("correct_answer")
    listed = _within(file, record, row, correct)
    if name == "wrong_groundtruth":
        pos = answer_position(correct)
        if pos is None or pos == row.answer:  # no other choice named: wrong, not correctable
            return Annotation(name, "neither")
        return Annotation(name, "correctable", suggested=pos)
    # multiple_correct_answers: the choices listed and the given one
    labels = None if listed is None else tuple(sorted({*listed, row.answer}))
    return Annotation(name, "multi_label", labels=labels)


def _answers(
    file: PublishedFile, record: Record, row: QuestionRow, qs: QuestionSet
) -> tuple[int, ...] | None:
    """The classes a status record's answer names (None: it names none)."""
    column = next((c for c in ANSWER_COLUMNS if c in record.values), None)
    value = record.values.get(column) if column is not None else None
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if qs.task == MULTIPLE_CHOICE:
        found = _within(file, record, row, value)
        if found is None:
            raise file.refuse(
                record, f"the answer {shown(value)} names no choice; give a letter or a position"
            )
        return found
    texts = list(value) if isinstance(value, list | tuple) else [value]
    classes = []
    for text in texts:
        c = qs.answer_class(str(text))
        if c is None:
            assert qs.normalization is not None
            raise _new_answer(file, record, str(text), qs.normalization)
        classes.append(c)
    return tuple(sorted(set(classes)))


def _new_answer(
    file: PublishedFile, record: Record, text: str, normalization: str
) -> RelabelingError:
    """The refusal of a revised answer that is no class of the snapshot (docs/questions.md,
    "An answer the set does not have")."""
    folded = normalize_answer(text, normalization)
    return file.refuse(
        record,
        f"the answer {shown(text)} ({shown(folded)} under {normalization}) is no class of the "
        "snapshot, whose classes are the answers its rows had; add the set again with "
        f"--classes FILE naming {shown(folded)} (answers the classes hold besides the rows'), "
        "then import this file onto that revision",
    )


def _status(
    file: PublishedFile, record: Record, name: str, row: QuestionRow, qs: QuestionSet
) -> Annotation:
    if name == "reject":
        return Annotation(name, "neither")
    answers = _answers(file, record, row, qs)
    if name == "keep":
        if answers is not None and row.answer not in answers:
            raise file.refuse(
                record,
                f"status keep, but its answer names {[qs.classes[a] for a in answers]}, not "
                f"row {row.row}'s {qs.classes[row.answer]!r}; the file re-annotates other "
                "labels: import it onto the snapshot it was made for",
            )
        return Annotation(name, "non_error")
    if answers is None:
        raise file.refuse(
            record,
            f"status revise without a revised answer (column {' or '.join(ANSWER_COLUMNS)})",
        )
    if len(answers) > 1:
        return Annotation(name, "multi_label", labels=answers)
    if answers[0] == row.answer:  # revised to the label it had: the label is right
        return Annotation(name, "non_error")
    return Annotation(name, "correctable", suggested=answers[0])
