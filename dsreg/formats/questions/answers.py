"""Question sets as values (docs/questions.md): the kinds of set, the choices of a
multiple-choice row and its answer's position, the normalisations exact answers are matched
under, and the key by which a file's row finds a question by its content.

A multiple-choice set's classes are letters, ``A`` for the first choice: a row's label is its
answer's position. An exact-answer set's classes are its answers, normalised: the name and
version of the normalisation (``gsm8k/1``) are recorded in the snapshot, so the rule that made
its classes is part of its digest, and a later version of a rule never changes what an older
snapshot means: every version named here stays as it was.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Final

from dsreg._util.jsonread import LINE_BYTES, loads
from dsreg.errors import InvalidInputError

__all__ = [
    "EXACT_ANSWER",
    "LETTERS",
    "MAX_CHOICES",
    "MULTIPLE_CHOICE",
    "NORMALIZATIONS",
    "TASKS",
    "answer_position",
    "answer_positions",
    "fold_text",
    "letter_classes",
    "normalization_id",
    "normalize_answer",
    "parse_choices",
    "question_key",
]

MULTIPLE_CHOICE: Final = "multiple-choice"
EXACT_ANSWER: Final = "exact-answer"
# What a snapshot's ``task`` may say: a classification set's labels are classes of their own;
# a question set's are an answer's position or an answer.
TASKS: Final = ("multiclass", MULTIPLE_CHOICE, EXACT_ANSWER)

LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# A row has at most this many choices: each is named by one letter.
MAX_CHOICES: Final = len(LETTERS)


def letter_classes(k: int) -> tuple[str, ...]:
    """The classes of a multiple-choice set whose rows have at most ``k`` choices."""
    return tuple(LETTERS[:k])


# -- answers' positions ------------------------------------------------------------------------

_INDEX = re.compile(r"[0-9]{1,4}")


def answer_position(value: object) -> int | None:
    """The 0-based position an answer names, or None when it names none: an integer (``2``,
    ``2.0``) or its digits (``"2"``) as it is, one letter (``"C"`` or ``"c"``) by its place in
    the alphabet. Surrounding spaces are ignored."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _INDEX.fullmatch(text):
        return int(text)
    if len(text) == 1 and text.upper() in LETTERS:
        return LETTERS.index(text.upper())
    return None


_SEPARATORS = re.compile(r"\s*(?:,|;|/|\band\b|\bor\b|\s)\s*", re.IGNORECASE)


def answer_positions(value: object) -> tuple[int, ...] | None:
    """The positions a list of answers names, ascending and once each: a list, or text such as
    ``"A,C"``, ``"1, 3"``, ``"0 1 3"``, ``"2 and 3"``, ``"(0, 1)"`` or ``"0 or 2"``; None when
    any part names no position (free text) or nothing is named."""
    if isinstance(value, list | tuple):
        parts: list[object] = list(value)
    elif isinstance(value, str):
        text = value.strip().strip("()[]{}").strip()
        parts = [p for p in _SEPARATORS.split(text) if p] if text else []
    else:
        one = answer_position(value)
        return None if one is None else (one,)
    found = [answer_position(p) for p in parts]
    if not found or any(p is None for p in found):
        return None
    return tuple(sorted({p for p in found if p is not None}))


def parse_choices(value: object) -> tuple[str, ...] | None:
    """A row's choices as texts, or None when the value is no list of them: a list (Parquet,
    JSON Lines), a ``{"text": [...]}`` record (the Hugging Face layout of ARC), or in a CSV cell
    a JSON list or a Python list literal (what pandas writes for a list: ``['a', "b's"]``).
    Numbers among the choices are kept as their text (``3`` -> ``"3"``)."""
    if isinstance(value, Mapping) and "text" in value:
        value = value["text"]
    if isinstance(value, str):
        value = _list_literal(value)
    if not isinstance(value, list | tuple) or not value:
        return None
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(repr(item))
        else:
            return None
    return tuple(out)


def _list_literal(text: str) -> object:
    text = text.strip()
    if not text.startswith("["):
        return None
    try:
        return loads(text, what="choices", error=InvalidInputError, max_bytes=LINE_BYTES)
    except InvalidInputError:
        pass
    try:
        # Literals only: ast.literal_eval evaluates no name, call or operator.
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


# -- matching by content -----------------------------------------------------------------------

_QUOTES = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"'})


def fold_text(text: str) -> str:
    """``text`` as rows are matched by content: Unicode compatibility form (NFKC), curly quotes
    as straight ones (spreadsheets curl them), runs of white space as one space, no white space
    at either end. Case is kept."""
    if not text.isascii():  # ASCII is its own compatibility form and holds no curly quote
        text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return " ".join(text.split())


def question_key(question: str, choices: Sequence[str] | None = None) -> str:
    """The key by which a row is found by its content: the question's ``fold_text`` and, when
    given, each choice's, in order."""
    key = fold_text(question)
    if choices is None:
        return key
    return key + "\x1e" + "\x1f".join(fold_text(c) for c in choices)


# -- exact answers -----------------------------------------------------------------------------


def _text_1(text: str) -> str:
    """``text/1``: compatibility form (NFKC), runs of white space as one space, trimmed, and
    case folded (``"New  York"`` is ``"new york"``)."""
    if not text.isascii():  # ASCII is its own compatibility form
        text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split()).casefold()


_NUMBER = re.compile(
    r"(?P<sign>[+-]?)\s*\$?\s*(?P<sign2>[+-]?)\s*"
    r"(?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)?(?P<frac>\.[0-9]*)?\s*%?"
)


def _number(text: str) -> str | None:
    """The canonical text of a number written as GSM8K answers write them, or None."""
    m = _NUMBER.fullmatch(text)
    if m is None or (m["sign"] and m["sign2"]):
        return None
    whole, frac = (m["int"] or "").replace(",", ""), m["frac"] or ""
    if not whole and len(frac) < 2:
        return None
    try:
        value = Decimal(f"{m['sign'] or m['sign2']}{whole or '0'}{frac}")
    except InvalidOperation:
        return None
    # Fixed-point text of the exact value (no int(): a number of 5,000 digits is text too).
    out = format(value, "f")
    if "." in out:
        out = out.rstrip("0").rstrip(".")
    return "0" if out in ("-0", "+0") else out


def _gsm8k_1(text: str) -> str:
    """``gsm8k/1``: the text after the last ``####`` (GSM8K's answer line), then ``text/1``;
    a number is written canonically: thousands separators dropped (``1,000``; commas only in
    groups of three), a leading ``$`` and a trailing ``%`` dropped, a whole number without
    decimals (``1000.0`` is ``1000``), other decimals without trailing zeros (``0.50`` is
    ``0.5``), ``-0`` as ``0``."""
    if "####" in text:
        text = text.rpartition("####")[2]
    folded = _text_1(text)
    number = _number(folded)
    return folded if number is None else number


# Every version of every rule, by its id: a snapshot names the one its classes were made with.
_RULES: Final[Mapping[str, Callable[[str], str]]] = {"text/1": _text_1, "gsm8k/1": _gsm8k_1}
# The version a new set is registered with, by the rule's name (``--normalize``).
NORMALIZATIONS: Final[Mapping[str, int]] = {"text": 1, "gsm8k": 1}


def normalization_id(name: str) -> str:
    """The id (``gsm8k/1``) a new exact-answer set records for the rule ``name``; an unknown
    name is refused naming the rules."""
    if name not in NORMALIZATIONS:
        raise InvalidInputError(
            f"unknown --normalize {name!r}; choose one of {', '.join(NORMALIZATIONS)}"
        )
    return f"{name}/{NORMALIZATIONS[name]}"


def normalize_answer(text: str, normalization: str) -> str:
    """``text`` normalised by the rule ``normalization`` names (an id, ``gsm8k/1``, as a
    snapshot records it): what exact answers are compared as."""
    rule = _RULES.get(normalization)
    if rule is None:
        raise InvalidInputError(
            f"unknown normalisation {normalization!r}; this dsreg knows {', '.join(_RULES)}: "
            "upgrade dsreg to read a set registered with a newer one"
        )
    return rule(text)
