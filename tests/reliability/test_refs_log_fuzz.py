"""A damaged ref log costs its damaged lines, never a command (docs/concepts.md, "Guarantees": a
damaged log line is skipped and reported). The log file is fuzzed (random bytes, JSON of the
wrong types, lines torn in the middle of a character, terminal escapes in the text fields) and
``dsreg.log``, ``dsreg.verify`` and ``dsreg.gc`` must raise nothing but a ``DsregError``, keep
every valid line, name every damaged one, and gc must remove nothing a valid line or a tag
names."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.errors import DsregError
from dsreg.registry.folder import Registry
from dsreg.registry.refs import LogEntry, parse_log
from tests.conftest import stored_view

NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
FIELDS = ("time", "user", "dataset", "tag", "old", "new", "command", "event")
# What may be printed: text, spaces and line ends; never ESC, another control or a bidi override.
UNPRINTABLE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
PIECES = ["a", "é", "漢", "😀", "\x1b[2J", "\x1b]0;owned\x07", "\x9b31m", "\r", "\x00",
          "\u202e", "\x7f", "\x1b", " ", "\t", "\ud800"]  # fmt: skip
nasty_text = st.lists(st.sampled_from(PIECES), max_size=10).map("".join) | st.text(max_size=10)


@pytest.fixture
def template(make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]) -> Path:
    reg = make_registry()
    dsreg.add("pets", make_imagefolder(per_class=2), tag="v1", registry=reg)
    stored_view(reg, "pets@v1", "cleaned")  # untagged: only a log line may keep it
    stored_view(reg, "pets@v1", "corrected")  # untagged and unnamed: garbage
    return reg.root


def _valid(draw: st.DrawFn, digests: list[str]) -> dict[str, Any]:
    event = draw(st.sampled_from(["tag", "overlay", "push"]))
    return {
        "time": NOW,
        "user": draw(nasty_text),
        "dataset": "pets",
        "tag": "v9" if event != "overlay" else None,
        "old": draw(st.none() | st.sampled_from(digests)),
        "new": draw(st.sampled_from(digests)),
        "command": draw(nasty_text),
        "event": event,
    }


def _wrong(draw: st.DrawFn, line: dict[str, Any]) -> dict[str, Any] | Any:
    """An entry made invalid by construction: a field of the wrong type or form, or missing."""
    how = draw(st.sampled_from(["type", "form", "missing", "other", "not-an-object"]))
    field = draw(st.sampled_from(FIELDS))
    bad = dict(line)
    if how == "type":
        must_be_str = field in ("time", "user", "dataset", "command", "event")
        value = draw(
            json_values.filter(lambda v: not isinstance(v, str) and (must_be_str or v is not None))
        )
        bad[field] = value
    elif how == "form":
        forms = {
            "time": "yesterday",
            "dataset": "Pets!",
            "tag": "../v1",
            "old": "blake3:xyz",
            "new": "sha256:" + "a" * 64,
            "event": "Tag Moved",
        }
        key = field if field in forms else "new"
        bad[key] = forms[key]
    elif how == "missing":
        del bad[draw(st.sampled_from(["time", "user", "dataset"]))]
    elif how == "other":
        bad["dataset"] = "cars"  # a line of another dataset's log, in this one
    else:
        return draw(json_values.filter(lambda v: not isinstance(v, dict)))
    return bad


@st.composite
def logs(draw: st.DrawFn, digests: list[str]) -> tuple[bytes, list[dict[str, Any]], int]:
    """(log bytes, the valid entries in it, how many damaged lines)."""
    lines: list[bytes] = []
    valid: list[dict[str, Any]] = []
    damaged = 0
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["valid", "bytes", "wrong", "torn", "json"]))
        entry = _valid(draw, digests)
        try:  # raw UTF-8 when it can be (a torn line may then end inside a character)
            raw = json.dumps(entry, ensure_ascii=draw(st.booleans())).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: only its \u escape is JSON
            raw = json.dumps(entry).encode("utf-8")
        if kind == "valid":
            lines.append(raw)
            valid.append(entry)
            continue
        if kind == "bytes":
            blob = draw(st.binary(min_size=1, max_size=40))
            parts = [p for p in blob.split(b"\n") if p.strip()]
            lines += parts
            damaged += len(parts)
            continue
        if kind == "wrong":
            lines.append(json.dumps(_wrong(draw, entry)).encode("utf-8"))
        elif kind == "torn":
            cut = draw(st.integers(1, len(raw) - 1))
            lines.append(raw[:cut])  # a crash mid-append, perhaps inside a UTF-8 character
        else:
            lines.append(json.dumps(draw(json_values)).encode("utf-8"))
        damaged += 1
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b""])), valid, damaged


def _digests(template: Path) -> list[str]:
    reg = Registry(template)
    return [*sorted(reg.store), "blake3:" + "e" * 64]  # every object, and one that is absent


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_fuzzed_log_is_read_skipped_and_reported_never_a_crash(
    template: Path,
    tmp_path_factory: pytest.TempPathFactory,
    cli: Callable[..., Any],
    data: st.DataObject,
) -> None:
    digests = _digests(template)
    text, valid, damaged = data.draw(logs(digests))
    root = tmp_path_factory.mktemp("reg") / "reg"
    shutil.copytree(template, root)
    reg = Registry(root)
    (root / "logs" / "pets.jsonl").write_bytes((root / "logs" / "pets.jsonl").read_bytes() + text)
    before = set(reg.store)
    tagged = reg.refs.get("pets", "v1")

    # log: every valid line, in order; the damaged ones counted.
    got = dsreg.log("pets", registry=root)
    expected = [LogEntry.from_dict(v) for v in valid]
    assert got[len(got) - len(expected) :] == expected
    assert len(got.damaged) == damaged, (text, got.damaged)

    # verify: each damaged line named by file and line, and nothing else wrong.
    res = dsreg.verify(registry=root)
    assert sorted(p.digest for p in res.problems) == sorted(
        f"logs/pets.jsonl:{d.line}" for d in got.damaged
    )
    assert res.ok == (damaged == 0)

    # gc: never a crash, never an object a valid line or the tag names.
    dsreg.gc(registry=root)
    named = {d for v in valid for d in (v["old"], v["new"]) if d}
    assert (named & before) <= set(reg.store)
    assert tagged is not None and reg.store.has(tagged)
    assert len(dsreg.open("pets@v1", registry=root)) == 6

    # The command line prints the good lines, with nothing a terminal would obey.
    shown = cli("log", "pets", "--registry", str(root))
    assert shown.exit_code == 0, shown.stderr
    assert not UNPRINTABLE.search(shown.stdout), repr(shown.stdout)
    assert ("damaged log line" in shown.stderr) == (damaged > 0)
    as_json = cli("log", "pets", "--json", "--registry", str(root))
    shown_json = json.loads(as_json.stdout)
    assert shown_json[len(shown_json) - len(expected) :] == [e.to_dict() for e in expected]
    checked = cli("verify", "--registry", str(root))
    assert checked.exit_code == (1 if damaged else 0)
    assert not UNPRINTABLE.search(checked.stdout), repr(checked.stdout)


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=300))
def test_any_bytes_parse_into_entries_and_damaged_lines(blob: bytes) -> None:
    try:
        log = parse_log(blob, dataset="pets")
    except DsregError:
        return
    lines = [n for n, line in enumerate(blob.split(b"\n"), start=1) if line.strip()]
    assert len(log) + len(log.damaged) == len(lines)
    assert {d.line for d in log.damaged} <= set(lines)


def test_a_log_torn_inside_a_character_keeps_the_lines_around_it(template: Path) -> None:
    reg = Registry(template)
    path = reg.root / "logs" / "pets.jsonl"
    whole = json.dumps({"time": NOW, "user": "漢字", "dataset": "pets", "tag": None, "old": None,
                        "new": None, "command": "c", "event": "note"},
                       ensure_ascii=False).encode()  # fmt: skip
    torn = whole[: whole.index("漢".encode()) + 1]  # one byte of a three-byte character
    path.write_bytes(path.read_bytes() + torn)
    # The next writer ends the torn line first, so its own line is whole.
    stored_view(reg, "pets@v1", "honeypot")
    dsreg.tag("pets@v2", "pets@v1", view="honeypot", registry=reg)
    log = dsreg.log("pets", registry=reg)
    assert [d.reason for d in log.damaged] == ["not UTF-8 text (a torn character?)"]
    assert log[-1].tag == "v2"
