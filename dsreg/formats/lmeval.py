"""The per-sample logs of EleutherAI's lm-evaluation-harness (``lm_eval --log_samples``), read
and aligned with a question set's rows (docs/llm.md, "lm-evaluation-harness samples").

``lm_eval --log_samples`` writes one ``samples_<task>_<date>.jsonl`` per task: a JSON object a
line, one per document of the task's test split (one per document and filter where a task has
several filters), holding ``doc_id`` (the document's position in the split), ``doc`` (the
dataset's record: for a question set, its ``question`` and ``choices``), ``target``,
``arguments`` (the requests sent to the model), ``resps`` and ``filtered_resps`` (the model's
answers to them, before and after the task's filters), ``filter`` and the per-sample metrics
(``acc``, ``exact_match``). What a line's answer is depends on the task's ``output_type``:

- ``multiple_choice``: one request per choice, each answered by ``[loglikelihood,
  is_greedy]`` (numbers, or their text as recent versions write them). The model's answer is
  the choice of the largest loglikelihood, the first of equal ones: what lm-eval's ``acc``
  scores (``acc_norm`` divides by each choice's length first).
- ``generate_until``: one request answered by the generated text (``filtered_resps`` the
  text after the task's filters, e.g. the extracted number of a GSM8K answer).

Alignment (``align``) matches each sample's doc to a row by content: the doc's ``question``
text and ``choices`` (a list of texts, or a mapping whose ``text`` holds them, as ARC's) equal
to the row's, exactly. Rows with the same question and choices are told apart by document id:
a doc takes the row at its ``doc_id`` where that row has its content, else the first such row
left. So one task's samples align whether the set keeps the split's order or not, and a
group's subtask files concatenated into one (their ``doc_id`` restarting at 0 in each) align
too. Every row must get exactly one sample.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from dsreg._util.inputs import shown
from dsreg._util.jsonread import LINE_BYTES, loads
from dsreg.errors import PredictionsError

__all__ = ["RowTexts", "Sample", "align", "answers", "parse_samples"]

# What a refusal says a samples file must come from.
_FROM: Final = "the samples must come from lm_eval --log_samples on this set's own rows"


@dataclass(frozen=True, slots=True)
class RowTexts:
    """Each row's question text and choices, in row order: what a sample's doc matches."""

    questions: Sequence[str]
    choices: Sequence[Sequence[str]]


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of a samples file: its line number, document id and the doc's question and
    choices; ``answer``: the position of the choice of largest loglikelihood."""

    line: int
    doc_id: int
    question: str
    choices: tuple[str, ...]
    answer: int

    @property
    def where(self) -> str:
        return f"doc_id {self.doc_id} (line {self.line})"


def _loglikelihood(resp: Any) -> float | None:
    """A choice's loglikelihood from ``[ll, is_greedy]`` (``filtered_resps``), ``[[ll,
    is_greedy]]`` (``resps``) or ``ll``, a number or its text; None if it is none of these."""
    while isinstance(resp, list) and resp and not isinstance(resp[0], bool):
        if not isinstance(resp[0], list) and len(resp) not in (1, 2):
            return None
        resp = resp[0]
    if isinstance(resp, bool) or not isinstance(resp, int | float | str):
        return None
    try:
        value = float(resp)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _generated(resps: Any) -> str | None:
    """The generated text of a ``generate_until`` sample (a text, or a list of one)."""
    if isinstance(resps, list) and len(resps) == 1:
        resps = resps[0]
    return resps if isinstance(resps, str) else None


def _choices(doc: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = doc.get("choices")
    if isinstance(value, Mapping):  # ARC and OpenBookQA: {"text": [...], "label": [...]}
        value = value.get("text")
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return tuple(value)
    return None


def _sample(record: Any, line: int, what: str) -> Sample:
    """One parsed line as a ``Sample``; ``PredictionsError`` naming the line and what it lacks."""
    if not isinstance(record, dict) or not isinstance(record.get("doc"), dict):
        raise PredictionsError(
            f"{what} line {line} is not an lm-eval sample (a JSON object with doc_id, doc and "
            f"filtered_resps); {_FROM}"
        )
    doc_id = record.get("doc_id")
    if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
        raise PredictionsError(f"{what} line {line}: doc_id {shown(doc_id)} is not a position")
    where = f"{what}: doc_id {doc_id} (line {line})"
    resps = record.get("filtered_resps", record.get("resps"))
    if _generated(resps) is not None:
        raise PredictionsError(
            f"{where} is a generate_until sample (a generated answer, {shown(_generated(resps))}): "
            "recording it needs an exact-answer set (answers as text, with their normalisation), "
            "which this dsreg does not register; record multiple_choice samples"
        )
    lls = [_loglikelihood(r) for r in resps] if isinstance(resps, list) and resps else [None]
    if any(v is None for v in lls):
        raise PredictionsError(
            f"{where}: filtered_resps {shown(resps)} are not one loglikelihood per choice (a "
            "multiple_choice task's answers); loglikelihood and loglikelihood_rolling tasks "
            "score no choice and are not recorded"
        )
    doc = record["doc"]
    question, choices = doc.get("question"), _choices(doc)
    if not isinstance(question, str) or choices is None:
        missing = "question" if not isinstance(question, str) else "choices"
        raise PredictionsError(
            f"{where}: the doc has no {missing!r} (a text{'' if missing == 'question' else ' list'}"
            f"; its fields: {', '.join(sorted(map(str, doc))[:12])}); a sample is aligned by its "
            "doc's question and choices"
        )
    if len(lls) != len(choices):
        raise PredictionsError(
            f"{where}: {len(lls)} loglikelihoods for the doc's {len(choices)} choices; a "
            "multiple_choice sample scores each choice once"
        )
    return Sample(
        line=line,
        doc_id=doc_id,
        question=question,
        choices=choices,
        answer=int(np.argmax(np.asarray(lls, dtype=np.float64))),
    )


def parse_samples(data: bytes, *, what: str) -> list[Sample]:
    """The samples of a samples file's bytes, in file order; ``PredictionsError`` naming the
    first line that is not one, and a file that holds several filters' lines."""
    out: list[Sample] = []
    filters: dict[str, int] = {}
    for n, raw in enumerate(io.BytesIO(data), start=1):
        if not raw.strip():
            continue
        record = loads(raw, what=f"{what} line {n}", error=PredictionsError, max_bytes=LINE_BYTES)
        out.append(_sample(record, n, what))
        name = record.get("filter", "none")
        filters.setdefault(name if isinstance(name, str) else shown(name), n)
    if len(filters) > 1:
        names = ", ".join(shown(f) for f in filters)
        raise PredictionsError(
            f"{what} holds the lines of {len(filters)} filters ({names}), one per doc each; "
            "keep one filter's lines"
        )
    if not out:
        raise PredictionsError(f"{what} holds no samples; {_FROM}")
    return out


def _differs(s: Sample, texts: RowTexts, row: int) -> str:
    """How ``s``'s doc differs from ``row``, the first differing field named."""
    q = texts.questions[row]
    if s.question != q:
        return f"its question differs from row {row}'s ({shown(s.question)} vs {shown(q)})"
    c = tuple(texts.choices[row])
    return f"its choices differ from row {row}'s ({shown(list(s.choices))} vs {shown(list(c))})"


def _unmatched(s: Sample, texts: RowTexts, by_question: Mapping[str, list[int]]) -> str:
    """Why ``s`` matches no row: against the row of its question (or at its doc_id)."""
    rows = by_question.get(s.question)
    if rows:
        row = s.doc_id if s.doc_id in rows else rows[0]
    elif s.doc_id < len(texts.questions):
        row = s.doc_id
    else:
        return f"no row has its question {shown(s.question)}"
    return _differs(s, texts, row)


def align(samples: Sequence[Sample], texts: RowTexts, *, what: str) -> np.ndarray:
    """The row of each sample (int64, in ``samples``' order), matched by the doc's question
    and choices, rows of equal content told apart by ``doc_id`` (module docstring).
    ``PredictionsError`` in one line naming the first sample that matches no row (its doc_id
    and the first field that differs), a sample with nowhere left to go, or the first row no
    sample covers."""
    n = len(texts.questions)
    rows_of: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    by_question: dict[str, list[int]] = {}
    for r, (q, c) in enumerate(zip(texts.questions, texts.choices, strict=True)):
        rows_of.setdefault((q, tuple(c)), []).append(r)
        by_question.setdefault(q, []).append(r)
    out = np.full(len(samples), -1, dtype=np.int64)
    taken = np.zeros(n, dtype=bool)
    pending = []
    for i, s in enumerate(samples):  # a doc takes the row at its doc_id where that row fits
        rows = rows_of.get((s.question, s.choices))
        if rows is None:
            raise PredictionsError(
                f"{what}: {s.where} matches no row: {_unmatched(s, texts, by_question)}; {_FROM}"
            )
        if s.doc_id < n and not taken[s.doc_id] and s.doc_id in rows:
            out[i], taken[s.doc_id] = s.doc_id, True
        else:
            pending.append(i)
    for i in pending:  # the others take the first row of their content left
        s = samples[i]
        free = [r for r in rows_of[(s.question, s.choices)] if not taken[r]]
        if not free:
            raise PredictionsError(
                f"{what}: {s.where} repeats the question and choices of an earlier doc, and the "
                "set has no row of them left; give each doc once (one run, one filter)"
            )
        out[i], taken[free[0]] = free[0], True
    if not taken.all():
        row = int(np.flatnonzero(~taken)[0])
        raise PredictionsError(
            f"{what} cover {int(taken.sum())} of the {n} rows; row {row} "
            f"({shown(texts.questions[row])}) has no sample: give the samples of the whole test "
            "split (lm_eval without --limit; a group's subtask files concatenated into one)"
        )
    return out


def answers(samples: Sequence[Sample], rows: np.ndarray, *, classes: int, what: str) -> np.ndarray:
    """Each row's answer (int32, the position of the chosen choice, which is its class) from
    aligned samples; ``PredictionsError`` where a position is not a class of the set."""
    chosen = np.fromiter((s.answer for s in samples), dtype=np.int32, count=len(samples))
    bad = np.flatnonzero(chosen >= classes)
    if len(bad):
        s = samples[int(bad[0])]
        raise PredictionsError(
            f"{what}: {s.where} chose choice {s.answer}, but the set has {classes} classes (answer "
            "positions); register the set with a class for every choice position"
        )
    out = np.empty(len(rows), dtype=np.int32)
    out[rows] = chosen
    return out
