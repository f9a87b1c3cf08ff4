"""A dataclass as the dict its JSON form is built from: one field, one key, in declared order.

Most result types print as exactly their fields. They inherit :class:`FieldDict` (or call
:func:`field_dict` with the few fields whose JSON form differs) instead of spelling each
field's name three times; a type whose keys are renamed, reordered or computed keeps its own
``to_dict``. :func:`from_fields` reads such a dict back: each field from its key.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["FieldDict", "field_dict", "from_fields"]

R = TypeVar("R", bound="DataclassInstance")


def field_dict(record: DataclassInstance, /, **values: Any) -> dict[str, Any]:
    """``{name: value}`` for each field of ``record`` in the order its class declares them; a
    field named in ``values`` has that value instead (its JSON form: a list for a tuple, …).
    A name in ``values`` that is not a field raises ``TypeError``."""
    names = _names(type(record), values)
    return {n: values[n] if n in values else getattr(record, n) for n in names}


def from_fields(cls: type[R], d: Mapping[str, Any], /, **values: Any) -> R:
    """A ``cls`` with each field ``d[name]``, or the value ``values`` gives it (a tuple for a JSON
    list, a field ``d`` does not hold, …): the inverse of :func:`field_dict`. A field in neither
    raises ``KeyError``; a name in ``values`` that is not a field, ``TypeError``."""
    return cls(**{n: values[n] if n in values else d[n] for n in _names(cls, values)})


def _names(cls: type[DataclassInstance], values: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields of ``cls`` in declared order; ``TypeError`` if ``values`` names another."""
    names, known = _fields_of(cls)
    if not values.keys() <= known:
        raise TypeError(f"{cls.__name__} has no field {sorted(values.keys() - known)[0]!r}")
    return names


@functools.cache
def _fields_of(cls: type[DataclassInstance]) -> tuple[tuple[str, ...], frozenset[str]]:
    """The field names of ``cls``, in order and as a set: read once per class (manifests are
    read and written by the thousand)."""
    names = tuple(f.name for f in fields(cls))
    return names, frozenset(names)


class FieldDict:
    """Base of a dataclass whose ``to_dict`` is :func:`field_dict` of it, values as held."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return field_dict(cast("DataclassInstance", self))
