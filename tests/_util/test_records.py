"""field_dict and FieldDict: a result's JSON keys are its fields, in the order declared;
from_fields reads them back."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from dsreg._util.records import FieldDict, field_dict, from_fields


@dataclass(frozen=True, slots=True, kw_only=True)
class _Span(FieldDict):
    end: int
    start: int
    seqs: tuple[int, int] | None = None


def test_keys_follow_the_declared_order_not_the_alphabet() -> None:
    span = _Span(start=1, end=9, seqs=(2, 3))
    assert list(span.to_dict()) == ["end", "start", "seqs"]
    assert span.to_dict() == {"end": 9, "start": 1, "seqs": (2, 3)}
    assert json.dumps(span.to_dict()) == '{"end": 9, "start": 1, "seqs": [2, 3]}'


def test_a_value_given_replaces_its_field_in_place() -> None:
    span = _Span(start=1, end=9, seqs=(2, 3))
    assert field_dict(span, seqs=[2, 3]) == {"end": 9, "start": 1, "seqs": [2, 3]}
    assert list(field_dict(span, end="nine")) == ["end", "start", "seqs"]


def test_a_name_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="_Span has no field 'stop'"):
        field_dict(_Span(start=1, end=9), stop=3)


def test_the_mixin_keeps_a_slots_record_without_a_dict() -> None:
    span = _Span(start=1, end=9)
    assert not hasattr(span, "__dict__")


def test_from_fields_reads_back_what_field_dict_wrote() -> None:
    span = _Span(start=1, end=9, seqs=(2, 3))
    d = json.loads(json.dumps(field_dict(span)))
    assert from_fields(_Span, d, seqs=tuple(d["seqs"])) == span
    assert from_fields(_Span, {"start": 1}, end=9, seqs=None) == _Span(start=1, end=9)
    with pytest.raises(KeyError, match="end"):
        from_fields(_Span, {"start": 1, "seqs": None})
    with pytest.raises(TypeError, match="_Span has no field 'stop'"):
        from_fields(_Span, d, stop=3)
