"""A dataclass as the dict its JSON form is built from: one field, one key, in declared order.

Most result types print as exactly their fields. They inherit :class:`FieldDict` (or call
:func:`field_dict` with the few fields whose JSON form differs) instead of spelling each
field's name three times; a type whose keys are renamed, reordered or computed keeps its own
``to_dict``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["FieldDict", "field_dict"]


def field_dict(record: DataclassInstance, /, **values: Any) -> dict[str, Any]:
    """``{name: value}`` for each field of ``record`` in the order its class declares them; a
    field named in ``values`` has that value instead (its JSON form: a list for a tuple, …).
    A name in ``values`` that is not a field raises ``TypeError``."""
    names = [f.name for f in fields(record)]
    unknown = values.keys() - set(names)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)[0]!r}")
    return {n: values[n] if n in values else getattr(record, n) for n in names}


class FieldDict:
    """Base of a dataclass whose ``to_dict`` is :func:`field_dict` of it, values as held."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return field_dict(cast("DataclassInstance", self))
