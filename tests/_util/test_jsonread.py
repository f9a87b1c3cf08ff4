"""The bounded JSON reader (dsreg/_util/jsonread.py) and the input files it reads
(dsreg/_util/inputs.py): the depth scan against a parse and against exact bracket depths, the
one-line refusals, and files that are no regular files."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg._util.inputs import input_file, read_input, shown
from dsreg._util.jsonread import LINE_BYTES, MAX_DEPTH, json_problem, load_file, loads
from dsreg.errors import InputPathError, ManifestError, VotesError

TALLY: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if TALLY:
        print("\nhypothesis examples:", ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\n', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, database=None)
@given(value=JSON_VALUES, limit=st.integers(0, 6), text=st.booleans())
def test_the_depth_scan_agrees_with_a_parse(value: Any, limit: int, text: bool) -> None:
    """Random documents (strings full of brackets, quotes and backslashes), as bytes or text:
    refused exactly when deeper than the limit, else parsed as json.loads parses them."""
    TALLY["scan vs parse"] += 1
    data: bytes | str = json.dumps(value)
    if not text:
        data = data.encode()
    problem = json_problem(data, max_bytes=len(data), max_depth=limit)
    assert (problem is not None) == (_depth(value) > limit), (data, problem)
    if problem is None:
        got = loads(data, what="doc", error=VotesError, max_bytes=len(data), max_depth=limit)
        assert got == json.loads(data)


@settings(max_examples=300, deadline=None, database=None)
@given(seq=st.text(alphabet="[]{}", max_size=300), limit=st.integers(0, 40))
def test_the_depth_scan_of_any_brackets_is_exact(seq: str, limit: int) -> None:
    """Brackets in any order, balanced or not (documents cut short, or hostile): refused exactly
    when some prefix opens more than ``limit`` levels."""
    TALLY["bracket sequences"] += 1
    exact = max(accumulate(1 if c in "[{" else -1 for c in seq), default=0)
    problem = json_problem(seq.encode(), max_bytes=len(seq), max_depth=limit)
    assert (problem is not None) == (max(exact, 0) > limit), seq


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"[" * 100_000, f"JSON nested deeper than {MAX_DEPTH} levels"),
        (b'{"a":' * 200_000, f"JSON nested deeper than {MAX_DEPTH} levels"),
        (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"x", "is not valid JSON: Extra data at line 1"),
        (b"[" + b"9" * 5000 + b"]", "is not valid JSON: Exceeds the limit (4300 digits)"),
        (b"\xff", "is not UTF-8 text (byte 0)"),
        (b" " * (LINE_BYTES + 1), f"more than the {LINE_BYTES:,} dsreg reads"),
    ],
)
def test_refusals_are_one_line_naming_the_document(data: bytes, says: str) -> None:
    with pytest.raises(ManifestError) as err:
        loads(data, what="object 0123", error=ManifestError, max_bytes=LINE_BYTES, hint="; fix")
    message = str(err.value)
    assert message.startswith("object 0123") and message.endswith("; fix"), message
    assert says in message and "\n" not in message and "set_int_max_str_digits" not in message


def test_the_deepest_document_allowed_parses() -> None:
    data = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert _depth(loads(data, what="doc", error=VotesError, max_bytes=len(data))) == MAX_DEPTH


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "missing"])
def test_files_that_are_no_regular_files_are_named_unread(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "in.json"
    says = {
        "fifo": "is a named pipe (FIFO), not a regular file",
        "device": "is a character device, not a regular file",
        "folder": "is a folder, not a regular file",
        "missing": "does not exist; check the path",
    }[kind]
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes it: opening it for reading would wait forever
    elif kind == "device":
        path = Path("/dev/zero")  # reading it would never end
    elif kind == "folder":
        path.mkdir()
    what = f"votes file {str(path)!r}"
    with pytest.raises(InputPathError, match=re.escape(says)):
        input_file(path, what=what)
    with pytest.raises(InputPathError, match=re.escape(says)):
        load_file(path, what=what, error=VotesError)


def test_a_file_larger_than_its_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b"0," * 1000 + b"0]")
    with pytest.raises(VotesError, match=r"is 2,003 bytes, more than the 2,000 dsreg reads; x$"):
        read_input(path, what="votes file", max_bytes=2000, error=VotesError, hint="; x")
    assert read_input(path, what="votes file", max_bytes=2003, error=VotesError) == (
        path.read_bytes()
    )


def test_long_values_are_shown_short() -> None:
    assert shown(10**3999) == "an integer of 4,000 digits"
    assert shown(-(10**25)) == "a negative integer of 26 digits"
    assert shown(123) == "123"
    long = shown("x" * 5_000_000)
    assert len(long) < 200 and long.endswith("(5,000,002 characters)")
