"""The checkout plan's whole-list checks (``ops/checkout/plan.py``) agree with the rules they
speed up: destinations that the substring searches call surely safe are never refused by the
pattern, and the byte-operation digest check says what ``is_digest`` says of every entry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.errors import CorruptObjectError, ManifestError
from dsreg.objects.digest import is_digest
from dsreg.ops.checkout import plan as cp

# Paths built from the characters every refusal turns on, and a few ordinary ones.
_PATH = st.text(alphabet=st.sampled_from("ab./\\\x00\né-dsrg"), max_size=12)
_DIGEST = "blake3:" + "0123456789abcdef" * 4


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PATH, min_size=1, max_size=6))
def test_surely_safe_destinations_are_never_refused(paths: list[str]) -> None:
    joined = "\n".join(paths)
    if cp._surely_safe(joined):
        assert cp._REFUSED.search(joined) is None


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/etc/passwd",
        "a/../b",
        "..",
        ".",
        "a//b",
        "a/",
        "a\\b",
        "a\x00b",
        ".dsreg.json",
        "a/.dsreg-0123456789/b",
        "./a",
    ],
)
def test_every_refused_kind_is_refused_among_safe_ones(path: str) -> None:
    paths = {f"cat/{i}.jpg": _DIGEST for i in range(50)}
    paths[path] = _DIGEST
    with pytest.raises(ManifestError, match="not a safe path"):
        cp._check_destinations(paths, "revision x")


def test_ordinary_destinations_pass() -> None:
    paths = {f"cat/{i}.jpg": _DIGEST for i in range(50)} | {"dog/.hidden": _DIGEST}
    cp._check_destinations(paths, "revision x")  # a hidden file is not one of dsreg's names


# Entries close to a digest: the right length or not, a character changed, a line break or
# upper-case digit inside, the prefix repeated.
_NEAR = st.one_of(
    st.just(_DIGEST),
    st.builds(
        lambda i, c: _DIGEST[:i] + c + _DIGEST[i + 1 :],
        st.integers(0, 70),
        st.sampled_from("0aAg:\nb3lé"),
    ),
    st.builds(lambda k: _DIGEST[:k], st.integers(0, 71)),
    st.builds(lambda s: _DIGEST + s, st.sampled_from(["\n", "0", "\nblake3:"])),
    st.just("blake3:blake3:" + "0" * 57),
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_NEAR, min_size=1, max_size=5))
def test_the_digest_check_says_what_is_digest_says(blobs: list[str]) -> None:
    assert cp._all_digests(blobs) == all(is_digest(b) for b in blobs)


def test_a_table_naming_a_non_digest_is_refused() -> None:
    place = (*((f"cat/{i}.jpg", _DIGEST) for i in range(40)), ("cat/x.jpg", "../x"))
    with pytest.raises(CorruptObjectError, match="not a digest"):
        cp._check_digests(place)
    cp._check_digests(place[:-1])
