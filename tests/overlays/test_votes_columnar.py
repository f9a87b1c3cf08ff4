"""Votes CSV read column by column (#15) gives what the record-by-record reader gives."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg.overlays.votes_csv as votes_csv
import dsreg.overlays.votes_lines as votes_lines
from dsreg.errors import VotesError
from dsreg.formats.tables import parquet_bytes
from dsreg.objects.hashing import hash_bytes
from dsreg.overlays.match import match_ids
from dsreg.overlays.votes import VoteImport, import_votes

CLASSES = ("cat", "dog", "eel", "7", "fox")
# No class name reads as an index: the columnar reader's all-digits shortcut applies.
PLAIN = ("cat", "dog", "eel", "gnu", "fox")
N = 40
IDS = [f"img/{i:03d}.png" for i in range(N)]
LABELS = np.random.default_rng(0).integers(0, len(CLASSES), N)


def _both(
    path: Path, threshold: int, classes: tuple[str, ...] = CLASSES, dataset: str = "t"
) -> tuple[Any, Any]:
    """The columnar import and the record-by-record one (an exception stands for a refusal)."""

    def run() -> VoteImport | str:
        try:
            return import_votes(
                path,
                format="csv",
                threshold=threshold,
                dataset=dataset,
                example_ids=pa.chunked_array([IDS[:17], IDS[17:]]),
                labels=LABELS,
                classes=classes,
            )
        except Exception as e:
            return f"{type(e).__name__}: {e}"

    fast = run()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(votes_csv, "csv_votes", lambda *a, **k: None)
        slow = run()
    return fast, slow


@st.composite
def vote_files(draw: st.DrawFn, classes: tuple[str, ...]) -> list[list[str]]:
    rows = draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=12, unique=True))
    out = []
    for r in rows:
        given = int(LABELS[r])
        g_cell = draw(st.sampled_from([str(given), classes[given]]))
        if draw(st.integers(0, 9)) == 0:
            g_cell = draw(st.sampled_from(["9", "Cat", " cat", "x", "+1", "03", "\u0661"]))
        sug = draw(st.none() | st.integers(0, len(classes) - 1))
        s_cell = "" if sug is None else draw(st.sampled_from([str(sug), classes[sug]]))
        if s_cell and draw(st.integers(0, 9)) == 0:
            s_cell = draw(st.sampled_from(["5", "Dog", "wolf ", "12", "-0"]))
        counts = [str(draw(st.integers(0, 5))) for _ in range(4)]
        if sug is None:
            counts[1] = draw(st.sampled_from(["", "0"]))
        if draw(st.integers(0, 6)) == 0:
            counts[draw(st.integers(0, 3))] = draw(
                st.sampled_from(
                    ["", "-1", "1.5", "99999999999", "+1", "0x1", "007", "\u0661", " 2"]
                )
            )
        eid = IDS[r] if draw(st.integers(0, 12)) else draw(st.sampled_from(["nope", IDS[0]]))
        if draw(st.integers(0, 12)) == 0:
            eid = IDS[(r + 1) % N]  # the label given is another row's: a mismatch, mostly
        if draw(st.integers(0, 8)) == 0:
            out.append([])  # a blank line: the line numbers in messages count it
        out.append([eid, g_cell, s_cell, *counts])
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data(), classes=st.sampled_from([CLASSES, PLAIN]), threshold=st.integers(1, 4))
def test_columnar_import_equals_the_record_reader(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    classes: tuple[str, ...],
    threshold: int,
) -> None:
    lines = data.draw(vote_files(classes))
    path = tmp_path_factory.mktemp("v") / "votes.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(
            ["example_id", "given_label", "suggested_label", "given", "guessed", "both", "neither"]
        )
        w.writerows(lines)
    fast, slow = _both(path, threshold, classes)
    try:
        votes_lines.check_csv(path, dataset="t", classes=classes)
        checked = None
    except VotesError as e:
        checked = f"VotesError: {e}"
    if checked is not None:
        assert checked == slow  # the streaming check refuses what the record reader does
    elif isinstance(slow, str):
        assert any(m in slow for m in ("no example", "more than once", "differs from the label"))
    if isinstance(slow, str):
        assert fast == slow
        return
    assert isinstance(fast, VoteImport)
    assert fast.table.equals(slow.table)
    assert hash_bytes(parquet_bytes(fast.table)) == hash_bytes(parquet_bytes(slow.table))
    assert (fast.summary, fast.params, fast.inputs) == (slow.summary, slow.params, slow.inputs)


def test_the_columnar_path_answers_a_clean_file(tmp_path: Path) -> None:
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        f"{IDS[3]},{LABELS[3]},,4,0,0,1\n"
        f"{IDS[1]},{CLASSES[LABELS[1]]},eel,1,3,1,0\n",
        encoding="utf-8",
    )
    got = votes_csv.csv_votes(
        path,
        threshold=3,
        examples=lambda: pa.table({"example_id": IDS, "label": LABELS}),
        classes=CLASSES,
        dataset="t",
    )
    assert got is not None
    table, summary, raters = got.table, got.summary, got.params["raters"]
    assert table.column("row").to_pylist() == [1, 3]
    assert table.column("verdict").to_pylist() == ["correctable", "non_error"]
    assert summary["correctable"] == summary["non_error"] == 1 and raters == 5


def test_match_ids_streams_the_snapshot_past_the_wanted_ids() -> None:
    batches = [pa.table({"example_id": IDS[lo : lo + 7]}) for lo in range(0, N, 7)]
    got = match_ids(batches, pa.array([IDS[30], "missing", IDS[0], IDS[30]]))
    assert got.rows.tolist() == [30, -1, 0, 30] and got.twice == []
    dup = match_ids(
        [pa.table({"example_id": ["a", "b"]}), pa.table({"example_id": ["a"]})], pa.array(["a"])
    )
    assert dup.rows.tolist() == [0] and dup.twice == [("a", 0, 2)]


def test_import_votes_streamed_gives_the_record_readers_overlay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dsreg

    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "ids.txt").write_text("\n".join(IDS), encoding="utf-8")
    np.save(tmp_path / "l.npy", LABELS)
    dsreg.add("v", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", classes=list(CLASSES),
              tag="o", registry=reg)  # fmt: skip
    path = tmp_path / "votes.csv"
    lines = [f"{IDS[i]},{LABELS[i]},{(LABELS[i] + 1) % 5},{i % 6},{5 - i % 6},0,0" for i in
             range(0, N, 3)]  # fmt: skip
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n" + "\n".join(lines),
        encoding="utf-8",
    )
    fast = dsreg.import_votes("v@o", path, format="csv", registry=reg)
    monkeypatch.setattr(votes_csv, "csv_votes", lambda *a, **k: None)
    reg2 = dsreg.init(registry=tmp_path / "reg2")
    dsreg.add("v", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", classes=list(CLASSES),
              tag="o", registry=reg2)  # fmt: skip
    slow = dsreg.import_votes("v@o", path, format="csv", registry=reg2)
    assert fast.digest == slow.digest and fast.summary == slow.summary


def test_the_join_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB's spill folder is a temporary one, removed after the join; nothing lands in the
    working directory."""
    import tempfile

    import dsreg

    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "ids.txt").write_text("\n".join(IDS), encoding="utf-8")
    np.save(tmp_path / "l.npy", LABELS)
    dsreg.add("v", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", classes=list(CLASSES),
              tag="o", registry=reg)  # fmt: skip
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        f"{IDS[5]},{LABELS[5]},,5,0,0,0\n",
        encoding="utf-8",
    )
    scratch, cwd = tmp_path / "scratch", tmp_path / "cwd"
    scratch.mkdir()
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(cwd)
    got = dsreg.import_votes("v@o", path, format="csv", registry=reg)
    assert got.summary["non_error"] == 1
    assert list(scratch.iterdir()) == [] and list(cwd.iterdir()) == []


@pytest.mark.parametrize("problem", ["unknown", "twice", "label"])
def test_a_refusal_is_worded_by_the_columnar_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    """Unknown ids, examples voted twice and given labels that differ are refused without the
    record-by-record reader (which holds the whole file and the snapshot's ids), in its words:
    the lines named count blank lines, and the count covers every offending record."""
    lines = [f"{IDS[i]},{LABELS[i]},,4,0,0,1" for i in range(N)]
    for k in range(7):
        i = 3 + 5 * k
        if problem == "unknown":
            lines[i] = f"nope{k},{LABELS[i]},,4,0,0,1"
        elif problem == "twice":
            lines[i] = f"{IDS[k % 2]},{LABELS[k % 2]},,4,0,0,1"
        else:
            lines[i] = f"{IDS[i]},{(LABELS[i] + 1) % len(CLASSES)},,4,0,0,1"
    lines[10:10] = ["", ""]
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n" + "\n".join(lines),
        encoding="utf-8",
    )
    fast, slow = _both(path, 3)
    assert isinstance(slow, str) and slow.startswith(f"VotesError: {path}: 7 ")
    assert fast == slow

    def no_record_reader(*a: Any, **k: Any) -> Any:
        raise AssertionError("the record-by-record reader ran")

    monkeypatch.setattr(votes_lines, "parse_csv", no_record_reader)
    with pytest.raises(VotesError) as got:
        import_votes(
            path,
            format="csv",
            threshold=3,
            dataset="t",
            example_ids=pa.chunked_array([IDS]),
            labels=LABELS,
            classes=CLASSES,
        )
    assert f"{type(got.value).__name__}: {got.value}" == slow


@pytest.mark.parametrize("classes", [CLASSES, PLAIN])
def test_labels_that_are_not_classes_are_refused_by_the_columnar_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, classes: tuple[str, ...]
) -> None:
    """Label cells that are not classes (given and suggested, names and indices, more than the
    message names) are refused in the record reader's words, every one counted, without the
    record-by-record reader (38 s for 5 million votes) and before the snapshot is read."""
    lines = [f"{IDS[i]},{LABELS[i]},,4,0,0,1" for i in range(N)]
    for k, i in enumerate((4, 9, 15, 22, 30)):
        lines[i] = f"{IDS[i]},{len(classes) + k},,4,0,0,1"  # past the classes (but "7")
    lines[12] = f"{IDS[12]},{LABELS[12]},wolf,1,4,0,0"
    lines[25] = f"{IDS[25]},{len(classes)},{len(classes) + 3},1,4,0,0"
    if classes == CLASSES:
        lines[33] = f"{IDS[33]}, Wolf ,{classes[1]},1,4,0,0"  # a name: no class by any case
    lines[7:7] = ["", ""]
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n" + "\n".join(lines),
        encoding="utf-8",
    )
    fast, slow = _both(path, 3, classes)
    # With CLASSES, the cell "7" is class 7's name: of the indices past the classes, four are
    # not classes; " Wolf " is one more there.
    assert isinstance(slow, str) and slow.startswith(f"VotesError: {path}: 8 labels ")
    assert "line 6 " in slow and "; and 3 more" in slow
    assert fast == slow

    def no_record_reader(*a: Any, **k: Any) -> Any:
        raise AssertionError("the record-by-record reader ran")

    def no_snapshot() -> Any:
        raise AssertionError("the snapshot was read")

    monkeypatch.setattr(votes_lines, "parse_csv", no_record_reader)
    monkeypatch.setattr(votes_lines, "check_csv", no_record_reader)
    with pytest.raises(VotesError) as got:
        votes_csv.csv_votes(path, threshold=3, examples=no_snapshot, classes=classes, dataset="t")
    assert f"VotesError: {got.value}" == slow


@pytest.mark.parametrize("classes", [CLASSES, PLAIN])
def test_a_file_of_nothing_but_unknown_labels_is_counted_whole(
    tmp_path: Path, classes: tuple[str, ...]
) -> None:
    """Every label of every line not a class (votes meant for another dataset): every cell is
    counted and the first five named, as the record reader does."""
    lines = [f"{IDS[i]},{len(classes) + 10 + i},x{i},1,4,0,0" for i in range(N)]
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n" + "\n".join(lines),
        encoding="utf-8",
    )
    fast, slow = _both(path, 3, classes)
    assert isinstance(slow, str) and slow.startswith(f"VotesError: {path}: {2 * N} labels ")
    assert f"; and {2 * N - 5} more" in slow
    assert fast == slow


IMPORT_SCRIPT = """
import sys, dsreg
got = dsreg.import_votes("v@o", sys.argv[2], format="csv", registry=sys.argv[1])
print(got.summary["checked"], "pandas" in sys.modules)
"""


def test_a_csv_import_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas behind ``pa.scalar``, ``pa.array`` and Python numbers handed to
    compute functions: 0.2 s of every import (#15). The columnar path makes none."""
    import subprocess
    import sys

    import dsreg

    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "ids.txt").write_text("\n".join(IDS), encoding="utf-8")
    np.save(tmp_path / "l.npy", LABELS)
    dsreg.add("v", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", classes=list(CLASSES),
              tag="o", registry=reg)  # fmt: skip
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        f"{IDS[5]},{LABELS[5]},,5,0,0,0\n{IDS[7]},{CLASSES[LABELS[7]]},fox,1,4,,\n",
        encoding="utf-8",
    )
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_SCRIPT, str(reg.root), str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "2 False\n", out


@pytest.mark.parametrize(
    "line",
    [
        f"{IDS[4]},wolf,,5,0,0,0",  # a label that is not a class
        f"{IDS[4]},cat,,five,0,0,0",  # a count that is not a number
        f"{IDS[4]},cat,,5,0,0",  # a field missing
    ],
)
def test_a_malformed_file_is_refused_before_the_snapshot_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    """A file the record-by-record reader refuses line by line is refused by a streaming pass
    over the file, in the same words, without reading the snapshot's example ids (at 50M rows,
    the memory of the whole import)."""
    import dsreg
    import dsreg.overlays.create as create

    reg = dsreg.init(registry=tmp_path / "reg")
    (tmp_path / "ids.txt").write_text("\n".join(IDS), encoding="utf-8")
    np.save(tmp_path / "l.npy", LABELS)
    dsreg.add("v", labels=tmp_path / "l.npy", ids=tmp_path / "ids.txt", classes=list(CLASSES),
              tag="o", registry=reg)  # fmt: skip
    path = tmp_path / "votes.csv"
    good = [f"{IDS[i]},{LABELS[i]},,5,0,0,0" for i in range(8)]
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        + "\n".join([*good[:3], "", line, *good[5:]]),
        encoding="utf-8",
    )
    _, slow = _both(path, 3, dataset="v")
    assert isinstance(slow, str) and "line 6" in slow

    def no_snapshot_ids(*a: Any, **k: Any) -> Any:
        raise AssertionError("the snapshot's ids were read")

    monkeypatch.setattr(create, "read_examples", no_snapshot_ids)
    with pytest.raises(VotesError) as got:
        dsreg.import_votes("v@o", path, format="csv", registry=reg)
    assert f"VotesError: {got.value}" == slow
    assert dsreg.overlay_ls("v", registry=reg) == []


def test_labels_spelt_as_the_record_reader_accepts_them_stay_columnar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels with spaces around them or in another case (the only class matching without
    case) are read by the columnar path as the record reader reads them: same table, and the
    record reader is never run."""
    lines = [
        f"{IDS[2]}, {CLASSES[LABELS[2]].upper()} ,Eel,1,4,0,0",
        f"{IDS[9]},{LABELS[9]}, FOX ,3,2,0,0",
        f"{IDS[11]},{CLASSES[LABELS[11]].title()},,5,,,",
    ]
    path = tmp_path / "votes.csv"
    path.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n" + "\n".join(lines),
        encoding="utf-8",
    )
    fast, slow = _both(path, 3)
    assert isinstance(slow, VoteImport) and isinstance(fast, VoteImport)
    assert fast.table.equals(slow.table)
    assert fast.table.column("suggested_label").to_pylist() == [2, 4, None]

    def no_record_reader(*a: Any, **k: Any) -> Any:
        raise AssertionError("the record-by-record reader ran")

    monkeypatch.setattr(votes_lines, "parse_csv", no_record_reader)
    again, _ = _both(path, 3)
    assert isinstance(again, VoteImport) and again.table.equals(slow.table)
