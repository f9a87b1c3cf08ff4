"""check_choice: a value that is none of an option's names is refused with all of them."""

from __future__ import annotations

import pytest

from dsreg._util.choices import check_choice
from dsreg.errors import InvalidInputError


def test_a_choice_passes() -> None:
    check_choice("csv", ("table", "csv"), option="--format")


@pytest.mark.parametrize(
    ("choices", "listed"),
    [(("csv",), "csv"), (("npy", "csv"), "npy or csv"), (("a", "b", "c"), "a, b or c")],
)
def test_another_value_is_refused_with_every_choice(choices: tuple[str, ...], listed: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        check_choice("xml", choices, option="--format")
    assert str(e.value) == f"unknown --format 'xml'; choose {listed}"
