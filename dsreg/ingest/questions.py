"""A question set read into a source (docs/questions.md): ``add --questions`` (multiple choice)
and ``add --answers`` (exact answers), from CSV, JSON Lines or Parquet.

A multiple-choice row's label is its answer's position, its classes the letters ``A`` to the
most choices any row has; its question and choices are kept as the metadata columns
``question`` and ``choices`` (a list of texts). An exact-answer row's label is its answer
normalised by the rule the set is registered with (``formats.answers``), its classes the
sorted distinct normalised answers; the answer as given is kept as ``answer``. The other
columns of the file follow, as metadata. A question set is a few thousand to a few hundred
thousand rows: it is read whole, and every row is checked before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dsreg._util.inputs import INPUT_BYTES, input_file, read_input, shown
from dsreg._util.jsonread import loads_lines
from dsreg.errors import DatasetFormatError
from dsreg.formats.arrays import string_array, string_lists
from dsreg.formats.inputfiles import refuse_duplicate_columns
from dsreg.formats.names import check_lookalike_ids
from dsreg.formats.questions.answers import (
    EXACT_ANSWER,
    MAX_CHOICES,
    MULTIPLE_CHOICE,
    answer_position,
    letter_classes,
    normalization_id,
    normalize_answer,
    parse_choices,
)
from dsreg.formats.tables import check_metadata_names
from dsreg.ingest.sources import Source, table_errors, table_ids

__all__ = [
    "EXACT_ANSWER",
    "MULTIPLE_CHOICE",
    "QUESTION_COLUMNS",
    "QuestionSource",
    "read_question_table",
    "scan_questions",
]

# The metadata columns a question set's examples table names as dsreg does, whatever the
# file called them.
QUESTION_COLUMNS = ("question", "choices", "answer")
_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionSource:
    """How to read one question set: the file, its kind (``answers.MULTIPLE_CHOICE`` or
    ``EXACT_ANSWER``), its columns (``id_column`` None: the ids are the row numbers), an
    exact-answer set's rule by name (``text``, ``gsm8k``) and the answers its classes hold
    besides the rows' (``extra_answers``), and whether ids of one spelling are let through."""

    path: Path
    task: str
    question_column: str = "question"
    choices_column: str = "choices"
    answer_column: str = "answer"
    id_column: str | None = None
    normalize: str = "text"
    extra_answers: Sequence[str] = ()
    allow_lookalike_ids: bool = False

    @property
    def what(self) -> str:
        return f"question set {str(self.path)!r}"


def read_question_table(path: Path, what: str) -> pa.Table:
    """A table file read whole: ``.csv`` (``.tsv``: tab-separated; quoted cells may hold line
    breaks), ``.jsonl`` (one JSON object a line) or ``.parquet``."""
    input_file(path, what=what)
    suffix = path.suffix.lower()
    kind = "parquet" if suffix == ".parquet" else _SUFFIXES.get(suffix)
    if kind is None:
        raise DatasetFormatError(
            f"{what} has an unknown type {path.suffix!r}; use .csv, .tsv, .jsonl or .parquet"
        )
    with table_errors(path, "question set"):
        if kind == "parquet":
            table = pq.ParquetFile(path).read(use_pandas_metadata=False)
        elif kind == "jsonl":
            table = _jsonl_table(path, what)
        else:
            delimiter = "\t" if suffix == ".tsv" else ","
            opts = pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
            table = pacsv.read_csv(path, parse_options=opts)
        names = table.column_names  # decoded here: a CSV header need not be UTF-8
    refuse_duplicate_columns(names, what=what, error=DatasetFormatError)
    return table


def _jsonl_table(path: Path, what: str) -> pa.Table:
    """A JSON Lines file as a table: one column per key any line has (null where a line has
    none), each column's type inferred over all its values."""
    data = read_input(path, what=what, max_bytes=INPUT_BYTES, error=DatasetFormatError)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DatasetFormatError(
            f"{what} is not UTF-8 text (byte {e.start}); save it as UTF-8"
        ) from e
    hint = "; give one JSON object a line"
    rows = []
    names: dict[str, None] = {}
    for line, value in loads_lines(text, what=what, error=DatasetFormatError, hint=hint):
        if not isinstance(value, dict):
            raise DatasetFormatError(
                f"{what} line {line}: {shown(value)} is not a JSON object{hint}"
            )
        names.update(dict.fromkeys(value))
        rows.append(value)
    columns = {}
    for name in names:
        try:
            columns[name] = pa.array([r.get(name) for r in rows])
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise DatasetFormatError(
                f"{what}: the values of {name!r} are of several kinds ({e}); give each key "
                "values of one kind (text, numbers or lists of texts)"
            ) from e
    return pa.table(columns) if columns else pa.table({})


def scan_questions(src: QuestionSource) -> Source:
    """The source of a question set: every row checked, nothing written."""
    what = src.what
    table = read_question_table(src.path, what)
    mc = src.task == MULTIPLE_CHOICE
    wanted = [("--question-column", src.question_column), ("--answer-column", src.answer_column)]
    if mc:
        wanted.append(("--choices-column", src.choices_column))
    if src.id_column is not None:
        wanted.append(("--id-column", src.id_column))
    for flag, col in wanted:
        if col not in table.column_names:
            raise DatasetFormatError(
                f"{what} has no column {col!r} ({flag}); its columns are {table.column_names}"
            )
    if len({col for _, col in wanted}) != len(wanted):
        raise DatasetFormatError(
            f"{what}: {', '.join(f'{flag} {col!r}' for flag, col in wanted)} must name "
            "different columns"
        )
    if not table.num_rows:
        raise DatasetFormatError(f"{what} holds no rows; a test set needs at least one")
    questions = _questions(table.column(src.question_column).to_pylist(), what)
    if mc:
        choices, labels, classes = _multiple_choice(table, src)
        own = {"question": string_array(questions), "choices": choices}
        normalization = None
    else:
        normalization = normalization_id(src.normalize)
        answers, labels, classes = _exact(table, src, normalization)
        own = {"question": string_array(questions), "answer": answers}
    ids = _ids(table, src)
    rest = [c for c in table.column_names if c not in {col for _, col in wanted}]
    clash = [c for c in rest if c.casefold() in own]
    if clash:
        raise DatasetFormatError(
            f"{what} has a column {clash[0]!r} besides the ones named by the options, and dsreg "
            f"names the question set's own columns {', '.join(own)}; rename it in the file"
        )
    metadata = pa.table({**own, **{c: table.column(c) for c in rest}})
    check_metadata_names(metadata.column_names, what=what)
    provenance: dict[str, Any] = {
        "kind": "questions",
        "format": _SUFFIXES.get(src.path.suffix.lower(), "parquet"),
        "question_column": src.question_column,
        "answer_column": src.answer_column,
    }
    if mc:
        provenance["choices_column"] = src.choices_column
    if src.id_column is not None:
        provenance["id_column"] = src.id_column
    return Source(
        ids=ids,
        labels=labels,
        classes=classes,
        payloads=[None] * len(ids),
        metadata=metadata,
        provenance=provenance,
        task=src.task,
        normalization=normalization,
    )


def _questions(values: list[Any], what: str) -> list[str]:
    for i, q in enumerate(values):
        if not isinstance(q, str) or not q.strip():
            raise DatasetFormatError(
                f"{what}: row {i} has the question {shown(q)}; every row needs its question as text"
            )
    return values


def _multiple_choice(
    table: pa.Table, src: QuestionSource
) -> tuple[pa.Array, np.ndarray, tuple[str, ...]]:
    """Each row's choices (a list of texts) and its answer's position; the letters as classes."""
    what = src.what
    raw = table.column(src.choices_column).to_pylist()
    answers = table.column(src.answer_column).to_pylist()
    choices: list[tuple[str, ...]] = []
    labels = np.empty(len(raw), dtype=np.int32)
    for i, (cell, answer) in enumerate(zip(raw, answers, strict=True)):
        options = parse_choices(cell)
        if options is None:
            raise DatasetFormatError(
                f"{what}: row {i} has the choices {shown(cell)}, not a list of texts; give each "
                'row\'s choices as a list (in a CSV cell: a JSON list, ["a", "b"])'
            )
        if len(options) > MAX_CHOICES:
            raise DatasetFormatError(
                f"{what}: row {i} has {len(options)} choices; a row has at most {MAX_CHOICES}, "
                "one letter each"
            )
        pos = answer_position(answer)
        if pos is None or pos >= len(options):
            raise DatasetFormatError(
                f"{what}: row {i} has the answer {shown(answer)}, which names none of its "
                f"{len(options)} choices; give the answer's 0-based position (0 to "
                f"{len(options) - 1}) or its letter (A to {letter_classes(len(options))[-1]})"
            )
        choices.append(options)
        labels[i] = pos
    k = max(len(c) for c in choices)
    return string_lists(choices), labels, letter_classes(k)


def _answer_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return None


def _exact(
    table: pa.Table, src: QuestionSource, normalization: str
) -> tuple[pa.Array, np.ndarray, tuple[str, ...]]:
    """Each row's answer as given (text) and its class: the answers normalised, sorted."""
    what = src.what
    given = table.column(src.answer_column).to_pylist()
    texts: list[str] = []
    normal: list[str] = []
    for i, value in enumerate(given):
        text = _answer_text(value)
        folded = None if text is None else normalize_answer(text, normalization)
        if text is None or not folded:
            raise DatasetFormatError(
                f"{what}: row {i} has the answer {shown(value)}, which is no answer under "
                f"{normalization}; every row needs its answer as text or a number"
            )
        texts.append(text)
        normal.append(folded)
    extra = set()
    for value in src.extra_answers:
        folded = normalize_answer(value, normalization)
        if not folded:
            raise DatasetFormatError(
                f"--classes names {shown(value)}, which is empty under {normalization}"
            )
        extra.add(folded)
    classes = tuple(sorted(set(normal) | extra))
    index = {c: i for i, c in enumerate(classes)}
    labels = np.fromiter((index[a] for a in normal), dtype=np.int32, count=len(normal))
    return string_array(texts), labels, classes


def _ids(table: pa.Table, src: QuestionSource) -> list[str]:
    """The rows' example ids: the id column's (checked as ``add --table`` checks them), or the
    row numbers."""
    if src.id_column is None:
        return [str(i) for i in range(table.num_rows)]
    ids = table_ids(table.column(src.id_column), src.id_column, what=src.what)
    if not src.allow_lookalike_ids:
        check_lookalike_ids(ids, what=src.what)
    return ids
