"""An option whose value is one of a few names (a ``--format``): anything else is refused with
every name the option takes."""

from __future__ import annotations

from collections.abc import Sequence

from dsreg.errors import InvalidInputError

__all__ = ["check_choice"]


def check_choice(value: str, choices: Sequence[str], *, option: str) -> None:
    """``InvalidInputError`` unless ``value`` is one of ``choices``, the message naming
    ``option`` and the choices as a list: ``unknown --format 'x'; choose a, b or c``."""
    if value not in choices:
        listed = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
        raise InvalidInputError(f"unknown {option} {value!r}; choose {listed}")
