"""BibTeX field values in braces and in quotes: nested braces kept, the value's own delimiters
dropped, an unclosed value refused with the line it starts on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.errors import InvalidInputError
from dsreg.formats.credit import parse_bibtex

# Text with balanced braces (a BibTeX value may nest them), no quotes, backslashes or '@'.
_PLAIN = st.text(alphabet="ab ,=#\n", max_size=6)
_BALANCED = st.recursive(
    _PLAIN,
    lambda inner: st.lists(inner | inner.map(lambda s: "{" + s + "}"), max_size=3).map("".join),
    max_leaves=8,
)


def _words(value: str) -> str:
    return " ".join(value.split())


@settings(max_examples=300)
@given(title=_BALANCED, author=_BALANCED)
def test_braced_and_quoted_values_keep_their_inner_braces(title: str, author: str) -> None:
    text = f'@misc{{key,\n  title = {{{title}}},\n  author = "{author}{{x}}",\n}}\n'
    entry = parse_bibtex(text)[0]
    assert entry.get("title") == _words(title)
    assert entry.get("author") == _words(author + "{x}")


@settings(max_examples=200)
@given(head=_BALANCED, delimiter=st.sampled_from(["{", '"']))
def test_an_unclosed_value_is_refused_naming_its_delimiter(head: str, delimiter: str) -> None:
    text = f"@misc{{key,\n  title = {delimiter}{head}"
    with pytest.raises(InvalidInputError, match=f"line 2: a '{delimiter}' is never closed"):
        parse_bibtex(text)
