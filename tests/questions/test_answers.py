"""The values of question sets: the exact-answer normalisations (docs/questions.md, "Exact
answers"), answers' positions, choices as published, and the content key."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsreg.errors import InvalidInputError
from dsreg.formats.questions.answers import (
    answer_position,
    answer_positions,
    letter_classes,
    normalization_id,
    normalize_answer,
    parse_choices,
    question_key,
)

GSM8K = "gsm8k/1"


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_gsm8k_writes_a_whole_number_one_way(n: int) -> None:
    """1,000 == 1000 == 1000.0 == $1,000 == 1000% == "#### 1,000": every spelling of a whole
    number GSM8K answers use is one class."""
    want = str(n)
    spellings = [
        f"{n}",
        f"{n:,}",
        f"{n}.0",
        f"{n}.000",
        f"${n:,}",
        f"{n}%",
        f"  {n:,}  ",
        f"#### {n:,}",
        f"Step one.\nStep two gives <<1+1=2>>2.\n#### {n}",
        f"{'+' if n >= 0 else ''}{n}",
    ]
    for text in spellings:
        assert normalize_answer(text, GSM8K) == want, text


@given(st.decimals(min_value=-(10**9), max_value=10**9, places=4, allow_nan=False))
def test_gsm8k_writes_a_decimal_without_trailing_zeros(d: Decimal) -> None:
    want = normalize_answer(f"{d:f}", GSM8K)
    assert want == normalize_answer(f"{d:,f}", GSM8K) == normalize_answer(f"{d:f}000", GSM8K)
    assert Decimal(want) == d
    assert want == "0" or not want.endswith("0") or "." not in want
    if "." in want:
        assert not want.endswith(".")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0.50", "0.5"),
        (".5", "0.5"),
        ("-0", "0"),
        ("-$5", "-5"),
        ("$-5", "-5"),
        ("1000.", "1000"),
        ("1,2,3", "1,2,3"),  # commas in groups of three only: a list stays text
        ("12 apples", "12 apples"),
        ("New  York", "new york"),
        ("Ｆｕｌｌ", "full"),  # compatibility form (NFKC)
        ("The answer is 5\n####   Seventy  ", "seventy"),
    ],
)
def test_gsm8k_cases(text: str, want: str) -> None:
    assert normalize_answer(text, GSM8K) == want


def test_text_normalisation_folds_case_and_white_space_only() -> None:
    assert normalize_answer("  New\tYORK ", "text/1") == "new york"
    assert normalize_answer("1,000", "text/1") == "1,000"
    assert normalize_answer("#### 5", "text/1") == "#### 5"


def test_a_normalisation_is_named_with_its_version() -> None:
    assert normalization_id("gsm8k") == "gsm8k/1"
    assert normalization_id("text") == "text/1"
    with pytest.raises(InvalidInputError, match="unknown --normalize 'math'"):
        normalization_id("math")
    with pytest.raises(InvalidInputError, match="upgrade dsreg"):
        normalize_answer("5", "gsm8k/9")


@pytest.mark.parametrize(
    ("value", "want"),
    [(2, 2), (2.0, 2), ("2", 2), (" C ", 2), ("c", 2), ("Z", 25), (True, None), (-1, None),
     ("", None), ("CC", None), ("two", None), (None, None), (2.5, None)],
)  # fmt: skip
def test_answer_position(value: object, want: int | None) -> None:
    assert answer_position(value) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [("A,C", (0, 2)), ("1, 3", (1, 3)), ("0 1 3", (0, 1, 3)), ("2 and 3", (2, 3)),
     ("(0, 1)", (0, 1)), ("0 or 2", (0, 2)), ("B,D", (1, 3)), ("3", (3,)), ([2, 0], (0, 2)),
     ("depends on interpretation", None), ("", None)],
)  # fmt: skip
def test_answer_positions_read_the_release_s_lists(text: object, want: object) -> None:
    assert answer_positions(text) == want


def test_choices_as_published() -> None:
    assert parse_choices(["a", "b"]) == ("a", "b")
    assert parse_choices('["a", "b"]') == ("a", "b")
    assert parse_choices("['x', \"Bell's palsy\"]") == ("x", "Bell's palsy")
    assert parse_choices({"text": ["p", "q"], "label": ["A", "B"]}) == ("p", "q")
    assert parse_choices([1, 2.5]) == ("1", "2.5")
    for bad in ("a, b", "[]", "[__import__('os')]", [["nested"]], None, "[1, {}]"):
        assert parse_choices(bad) is None, bad


def test_content_key_folds_what_spreadsheets_change() -> None:
    a = question_key("What’s  the “best”\u00a0answer?", ("x ", " y"))
    assert a == question_key('What\'s the "best" answer?', ("x", "y"))
    assert a != question_key('What\'s the "best" answer?', ("y", "x"))
    assert question_key("Case") != question_key("case")


def test_letters() -> None:
    assert letter_classes(4) == ("A", "B", "C", "D")
