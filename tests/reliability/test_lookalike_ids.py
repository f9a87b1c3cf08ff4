"""Example ids unique in their spelling: ids that differ only in Unicode normalisation (NFC and
NFD) or in whitespace ending a path part are refused by every source that carries ids, unless
``--allow-lookalike-ids`` (docs/concepts.md, "Guarantees")."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from inprocess import run

import dsreg
from dsreg.formats.arrays import id_spellings
from dsreg.formats.names import id_spelling

ROW_GROUP = 1 << 18
State = Callable[[Path], dict[str, tuple[str, int, str]]]

# Letters, some with a precomposed form (é, Å, 가) that NFD takes apart, combining marks, and
# Unicode whitespace (White_Space; none of them a line end, which ids.txt splits at).
LETTERS = ["a", "B", "e", "\u00e9", "\u00c5", "\u0391", "\uac00", "\u6f22", "-", "_"]
MARKS = ["\u0301", "\u0308", "\u0327", "\u030a", "\u0323"]
SPACES = [" ", "\t", "\u00a0", "\u2003", "\u3000", "\u202f"]


def reference_spelling(example_id: str) -> str:
    """What the tests hold the implementation to: NFC, each path part right-stripped of the
    whitespace Python knows (for this alphabet, Unicode's White_Space)."""
    nfc = unicodedata.normalize("NFC", example_id)
    return "/".join(part.rstrip() for part in nfc.split("/"))


@st.composite
def spellings(draw: st.DrawFn) -> str:
    """A spelling: letters and marks, NFC, starting with a letter; no space at its end."""
    first = draw(st.sampled_from(LETTERS[:8]))
    rest = draw(st.lists(st.sampled_from(LETTERS + MARKS + SPACES), max_size=5))
    return unicodedata.normalize("NFC", (first + "".join(rest)).rstrip())


@st.composite
def id_lists(draw: st.DrawFn) -> list[str]:
    """Four to eight distinct ids (``x<n>-`` before each spelling), some written in NFD or with
    trailing whitespace, and some spellings used twice in different writings."""
    bases = draw(st.lists(spellings(), min_size=2, max_size=6, unique=True))
    ids: list[str] = []
    for n, base in enumerate(bases):
        for _ in range(draw(st.integers(1, 2))):
            text = f"x{n}-{base}"
            if draw(st.booleans()):
                text = unicodedata.normalize("NFD", text)
            if draw(st.booleans()):
                text += "".join(draw(st.lists(st.sampled_from(SPACES), min_size=1, max_size=2)))
            ids.append(text)
    order = draw(st.permutations(list(dict.fromkeys(ids))))
    return list(order)


def _lookalike(ids: list[str]) -> bool:
    seen: dict[str, str] = {}
    return any(seen.setdefault(reference_spelling(i), i) != i for i in ids)


def _write_source(kind: str, ids: list[str], tmp: Path) -> list[str]:
    """``ids`` written as the source ``kind``; the ``dsreg add`` arguments that add it."""
    labels = [i % 2 for i in range(len(ids))]
    np.save(tmp / "l.npy", np.array(labels, dtype=np.int64))
    if kind == "ids.txt":
        (tmp / "ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
        return ["--labels", str(tmp / "l.npy"), "--ids", str(tmp / "ids.txt")]
    if kind == "ids.json":
        (tmp / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
        return ["--labels", str(tmp / "l.npy"), "--ids", str(tmp / "ids.json")]
    if kind == "csv":
        with open(tmp / "t.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerows([["example_id", "label"], *zip(ids, labels, strict=True)])
        return ["--table", str(tmp / "t.csv")]
    table = pa.table({"example_id": ids, "label": labels})
    pq.write_table(table, tmp / "t.parquet")
    if kind == "parquet":
        return ["--table", str(tmp / "t.parquet")]
    if kind == "files":
        for i in ids:
            (tmp / "files").mkdir(exist_ok=True)
            (tmp / "files" / i).write_bytes(i.encode())
        return ["--table", str(tmp / "t.parquet"), "--files", str(tmp / "files")]
    assert kind == "tree"
    for i, label in zip(ids, labels, strict=True):
        (tmp / "tree" / f"c{label}").mkdir(parents=True, exist_ok=True)
        (tmp / "tree" / f"c{label}" / i).write_bytes(i.encode())
    return [str(tmp / "tree")]


KINDS = ["ids.txt", "ids.json", "csv", "parquet", "files", "tree"]


@pytest.mark.parametrize("kind", KINDS)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ids=id_lists())
def test_lookalike_ids_are_refused_by_every_source_unless_allowed(
    tmp_path_factory: pytest.TempPathFactory, registry_state: State, kind: str, ids: list[str]
) -> None:
    tmp = tmp_path_factory.mktemp("s")
    reg = str(tmp / "reg")
    run("init", "--registry", reg)
    args = ["add", "d", *_write_source(kind, ids, tmp), "--tag", "v", "--registry", reg]
    before = _state(registry_state, reg)
    res = run(*args)
    assert res.crash is None, res.crash
    stored = ids if kind != "tree" else [f"c{i % 2}/{x}" for i, x in enumerate(ids)]
    event("lookalikes" if _lookalike(stored) else "none")
    if _lookalike(stored):
        # One line, naming two ids of one spelling as ascii() writes them; nothing written.
        assert res.code == 1 and res.err.count("\n") == 1, res.err
        named = re.findall(r"example ids ('(?:[^'\\]|\\.)*') and ('(?:[^'\\]|\\.)*')", res.err)
        assert named, res.err
        a, b = (eval(x) for x in named[0])
        assert a != b and a in stored and b in stored
        assert reference_spelling(a) == reference_spelling(b)
        assert "--allow-lookalike-ids" in res.err
        assert _state(registry_state, reg) == before
        res = run(*args, "--allow-lookalike-ids")
    assert res.code == 0, res.err
    got = run("sql", 'SELECT example_id FROM "d@v"', "--json", "--registry", reg)
    assert sorted(r["example_id"] for r in got.json()) == sorted(stored)


def _state(registry_state: State, reg: str) -> dict[str, tuple[str, int, str]]:
    """The registry's files, but its lock (an empty file the first lock creates)."""
    state = registry_state(Path(reg))
    state.pop("lock", None)
    return state


def test_a_trailing_space_in_ids_txt_is_refused_naming_both(tmp_path: Path) -> None:
    """The simplest case: ``a`` and ``a `` in an ids file, refused before anything is written;
    the option keeps both, exactly."""
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "l.npy", np.array([0, 1], dtype=np.int64))
    (tmp_path / "ids.txt").write_text("a\na \n")
    l_npy, ids_txt = str(tmp_path / "l.npy"), str(tmp_path / "ids.txt")
    res = run("add", "d", "--labels", l_npy, "--ids", ids_txt, "--registry", str(reg.root))
    assert res.code == 1
    assert res.err.startswith("Error: ids file ") and "example ids 'a' and 'a '" in res.err
    with pytest.raises(dsreg.DatasetFormatError, match="--allow-lookalike-ids"):
        dsreg.add("d", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", registry=reg)
    assert dsreg.ls(registry=reg) == [] and not list((reg.root / "files").rglob("*/*"))
    r = dsreg.add(
        "d",
        labels=tmp_path / "l.npy",
        ids=tmp_path / "ids.txt",
        tag="v",
        allow_lookalike_ids=True,
        registry=reg,
    )
    assert dsreg.open(r.revision, registry=reg).labels().column("example_id").to_pylist() == [
        "a",
        "a ",
    ]


def test_nfc_and_nfd_in_a_csv_table_are_refused(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "t.csv").write_text("example_id,label\ncaf\u00e9.png,0\ncafe\u0301.png,1\n")
    with pytest.raises(dsreg.DatasetFormatError) as e:
        dsreg.add("d", table=tmp_path / "t.csv", registry=reg)
    assert "'caf\\xe9.png' and 'cafe\\u0301.png'" in str(e.value)


def test_lookalikes_in_different_row_groups_are_found(tmp_path: Path) -> None:
    """Across the streamed row groups: the first and the last of three groups' ids (the hashes
    of their spellings collide; the staged table's ids are compared as text)."""
    reg = dsreg.init(registry=tmp_path / "reg")
    n = 2 * ROW_GROUP + 5
    np.save(tmp_path / "l.npy", np.zeros(n, dtype=np.int64))
    ids = [f"{i:08d}.jpg" for i in range(n)]
    ids[-1] = "00000001.jpg\u3000"  # row 1's, with an ideographic space
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    with pytest.raises(dsreg.DatasetFormatError) as e:
        dsreg.add("d", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", registry=reg)
    assert "'00000001.jpg' and '00000001.jpg\\u3000'" in str(e.value)


def test_a_tree_added_with_the_option_is_checked_again_without_it(tmp_path: Path) -> None:
    """The re-add fast path answers only an add made under the same rule: a tree added with
    --allow-lookalike-ids and added again without it is refused, not answered from the scan."""
    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "tree" / "cat").mkdir(parents=True)
    (tmp_path / "tree" / "cat" / "a.png").write_bytes(b"1")
    (tmp_path / "tree" / "cat" / "a.png ").write_bytes(b"2")
    first = dsreg.add("d", tmp_path / "tree", allow_lookalike_ids=True, registry=reg)
    again = dsreg.add("d", tmp_path / "tree", allow_lookalike_ids=True, registry=reg)
    assert again.revision == first.revision
    with pytest.raises(dsreg.DatasetFormatError, match=re.escape("'cat/a.png' and 'cat/a.png '")):
        dsreg.add("d", tmp_path / "tree", registry=reg)


def test_ids_that_differ_in_case_are_kept(tmp_path: Path) -> None:
    """Case is visible and datasets use it (base64 ids, YouTube ids): not a lookalike."""
    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "t.csv").write_text("example_id,label\na.png,0\nA.png,1\n")
    assert dsreg.add("d", table=tmp_path / "t.csv", registry=reg).rows == 2


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(
        st.text(
            st.one_of(
                st.sampled_from(LETTERS + MARKS + SPACES + ["/", "\n", "\x85", "\u2028"]),
                # Characters this Python's Unicode tables know (pyarrow's may be newer).
                st.characters(codec="utf-8", exclude_categories=["Cn", "Cs"]),
            ),
            max_size=8,
        ),
        max_size=6,
    )
)
def test_the_vectorised_spelling_is_the_python_one(ids: list[str]) -> None:
    """``arrays.id_spellings`` (the streamed sources) spells each id as ``names.id_spelling``
    (trees, tables with files), as the independent reference does, in either string type."""
    expected = [reference_spelling(i) if not _has_other_space(i) else id_spelling(i) for i in ids]
    assert [id_spelling(i) for i in ids] == expected
    for type_ in (pa.string(), pa.large_string()):
        arr: Any = pa.array(ids, type=type_)
        assert id_spellings(arr).to_pylist() == expected
        if len(ids) > 1:
            assert id_spellings(arr.slice(1)).to_pylist() == expected[1:]


def _has_other_space(text: str) -> bool:
    """Whether ``text`` holds a character Python's ``str.isspace`` and Unicode's White_Space
    disagree on (U+001C to U+001F), where the reference cannot speak."""
    return any("\x1c" <= c <= "\x1f" for c in text)
