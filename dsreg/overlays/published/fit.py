"""A published re-annotation fitted to a question set's rows: each record's rows found, each
row's annotations settled, the corrections table (version 4: ``labels`` and ``category``) and
the summary built.

A record finds its rows by example id when the file has an ``example_id`` column, or the
column the set's ids were registered from; else by content: its question and, for a
multiple-choice set whose file has them, its choices (``formats.questions.answers.question_key``). A
question the set holds twice is one record's rows, both. A row several records name (a
question the release repeats, in two subjects) takes their annotation when they agree, and
``non_agreement`` when they do not, its category the categories joined by ``|``. A record that
finds no row is refused: nothing is guessed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa

from dsreg._util.inputs import shown
from dsreg.errors import RelabelingError
from dsreg.formats.arrays import int_lists, string_array
from dsreg.formats.corrections import LabelSets, corrections_table, with_category
from dsreg.formats.manifests import ERRORS
from dsreg.formats.questions.answers import MULTIPLE_CHOICE, parse_choices, question_key
from dsreg.overlays.published.records import PublishedFile, Record, read_published
from dsreg.overlays.published.rules import (
    ERROR_TYPES,
    STATUSES,
    Annotation,
    annotate,
    category,
    category_column,
)
from dsreg.overlays.relabel import LabelImport
from dsreg.views.questions import QuestionRow, QuestionSet

__all__ = ["PUBLISHED_FORMATS", "import_published"]

PUBLISHED_FORMATS: Final = ("mmlu-redux", "status")
# What the summary calls the counts of a format's categories.
_COUNTED: Final = {"mmlu-redux": ("error_types", ERROR_TYPES), "status": ("statuses", STATUSES)}


def import_published(
    path: Path, *, format: str, questions: QuestionSet, dataset: str, id_column: str | None
) -> LabelImport:
    """The corrections a published re-annotation ``path`` makes of the question set
    ``questions`` (of ``dataset``, its ids registered from ``id_column``, if any)."""
    if format == "mmlu-redux" and questions.task != MULTIPLE_CHOICE:
        raise RelabelingError(
            f"--format mmlu-redux re-annotates a multiple-choice set; {dataset} is an "
            f"{questions.task} set: use --format status"
        )
    file = read_published(path, what=f"{format} file")
    column = category_column(format, file)
    if not file.records:
        raise file.refuse(None, "holds no annotation, only its header; nothing to import")
    find, match = _finder(file, questions, dataset, id_column)
    named: dict[int, list[Annotation]] = defaultdict(list)
    counts: Counter[str] = Counter()
    rows_of = {r.row: r for r in questions.rows}
    for record in file.records:
        name = category(format, file, record, column)
        counts[name] += 1
        for row in find(record):
            named[row].append(annotate(format, file, record, name, rows_of[row], questions))
    settled = {row: _settle(notes) for row, notes in sorted(named.items())}
    table = _table(settled, rows_of)
    key, names = _COUNTED[format]
    verdicts = Counter(a.verdict for a in settled.values())
    summary: dict[str, Any] = {
        "checked": len(settled),
        "match": match,
        "lines": len(file.records),
        "errors": sum(n for v, n in verdicts.items() if v in ERRORS),
        key: {n: counts[n] for n in names},
        "repeated": sum(len(notes) > 1 for notes in named.values()),
        "conflicting": verdicts["non_agreement"],
    }
    if file.encoding is not None:
        summary["encoding"] = file.encoding
    return LabelImport(table=table, summary=summary, params={"format": format, "match": match})


Finder = Callable[[Record], list[int]]


def _finder(
    file: PublishedFile, qs: QuestionSet, dataset: str, id_column: str | None
) -> tuple[Finder, str]:
    """How a record finds its rows, and the name of the match (``example_id`` or ``content``)."""
    ids = "example_id" if "example_id" in file.columns else id_column
    if ids is not None and ids in file.columns:
        by_id = qs.by_id()

        def find_id(record: Record) -> list[int]:
            eid = record.text(ids)
            row = by_id.get(eid)
            if row is None:
                raise file.refuse(
                    record, f"{ids} {shown(eid)} names no row of {dataset}; check the file"
                )
            return [row.row]

        return find_id, "example_id"
    if "question" not in file.columns:
        raise file.refuse(
            None,
            f"no column 'question' (nor 'example_id') to find the rows by; its columns are "
            f"{list(file.columns)} (separated by ',', ';' or tab)",
        )
    with_choices = qs.task == MULTIPLE_CHOICE and "choices" in file.columns
    by_key = qs.by_key(choices=with_choices)

    def find_content(record: Record) -> list[int]:
        question = record.values.get("question")
        if not isinstance(question, str) or not question.strip():
            raise file.refuse(record, f"the question {shown(question)} is empty")
        choices = None
        if with_choices:
            choices = parse_choices(record.values.get("choices"))
            if choices is None:
                raise file.refuse(
                    record,
                    f"the choices {shown(record.values.get('choices'))} are not a list of texts",
                )
        rows = by_key.get(question_key(question, choices))
        if not rows:
            also = " with these choices" if with_choices else ""
            raise file.refuse(
                record,
                f"no row of {dataset} has the question {shown(question)}{also} (compared with "
                "white space, curly quotes and Unicode forms folded); is the file about this "
                f"set?{_not_utf8(file.encoding)}",
            )
        return [r.row for r in rows]

    return find_content, "content"


def _not_utf8(encoding: str | None) -> str:
    """What a refused match adds when the file was not UTF-8: its letters may have been read
    as other letters (a Mac OS Roman apostrophe read as Windows-1252 is ``Õ``)."""
    if encoding in (None, "utf-8"):
        return ""
    return (
        f" The file is not UTF-8 and was read as {encoding}: if it holds another encoding, "
        "convert it to UTF-8 first (Mac OS Roman: iconv -f MACINTOSH -t UTF-8)"
    )


def _settle(notes: list[Annotation]) -> Annotation:
    """A row's annotation: the one its records agree on, else ``non_agreement``."""
    distinct = set(notes)
    if len(distinct) == 1:
        return notes[0]
    names = sorted({a.category for a in distinct})
    return Annotation("|".join(names), "non_agreement")


def _table(settled: dict[int, Annotation], rows_of: dict[int, QuestionRow]) -> pa.Table:
    """The corrections of the rows named, in the version 4 layout (``settled`` is in row
    order, as the table is)."""
    rows = np.fromiter(settled, dtype=np.int64, count=len(settled))
    notes = list(settled.values())
    lists = [list(a.labels) if a.labels is not None else None for a in notes]
    table = corrections_table(
        rows=rows,
        example_ids=[rows_of[r].example_id for r in settled],
        given_label=np.array([rows_of[r].answer for r in settled], dtype=np.int32),
        suggested_label=np.array([a.suggested for a in notes], dtype=np.int64),
        verdict=[a.verdict for a in notes],
        label_sets=LabelSets(labels=int_lists(lists)),
    )
    return with_category(table, string_array([a.category for a in notes]))
