"""Text from data reaches a terminal shown, never obeyed: class names, example ids, metadata
cells, credits, model names and the messages quoting them go through the command line's one
sanitiser; ``--json`` stays exact (docs/concepts.md, "Guarantees")."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.cli import main as dsreg_main

REPO = Path(dsreg.__file__).resolve().parents[1]

# What a terminal could act on: every control character but newline and tab, DEL, C1, the line
# and paragraph separators, bidirectional embeddings, overrides and isolates, lone surrogates.
OBEYED = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

# Escape sequences and what terminals and rich do with text, as pieces of a name.
PIECES = [
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: write the clipboard
    "\x1b]0;owned\x07",  # set the window title
    "\x1b[2J",  # clear the screen
    "\x1b[1A\x1b[2K",  # move up, erase the line
    "\x9b31m",  # CSI as one C1 character
    "\x9d8;;http://x\x9c",  # OSC 8 hyperlink, C1 form
    "\x1bP+q\x1b\\",  # DCS
    "\r",
    "\x08",
    "\x7f",
    "\x1b",
    "\x85",
    "\u202e",
    "\u2067",
    "\u2028",
    "\n",
    "\t",
    "[bold]",
    "[link=http://x]y[/link]",
    "a",
    "é",
    "e\u0301",
    "漢",
    "😀",
    " ",
]
hostile = st.lists(
    st.one_of(
        st.sampled_from(PIECES),
        st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp", "Zs", "L", "M"]),
    ),
    min_size=1,
    max_size=6,
).map("".join)


class Terminal(io.StringIO):
    """stdout or stderr as a terminal: what ``isatty`` says decides the file formats' form."""

    def isatty(self) -> bool:
        return True


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(*args: str, tty: bool = False) -> Ran:
    """``dsreg ARGS`` in this process, stdout and stderr terminals with ``tty``."""
    out, err = (Terminal(), Terminal()) if tty else (io.StringIO(), io.StringIO())
    saved, sys.argv = sys.argv, ["dsreg", *args]
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                dsreg_main(list(args))
            except SystemExit as e:
                code = int(e.code or 0)
    finally:
        sys.argv = saved
    return Ran(code, out.getvalue(), err.getvalue())


def shown(res: Ran, *, code: int = 0) -> Ran:
    """``res``, checked: the exit status, and nothing a terminal would obey in either stream,
    which a UTF-8 terminal can encode."""
    assert res.code == code, (res.code, res.out, res.err)
    for text in (res.out, res.err):
        assert not OBEYED.search(text), repr(text)
        text.encode("utf-8")
    return res


# -- the reported case, as a user types it ---------------------------------------------------------


def test_an_osc52_class_name_is_shown_escaped_by_show(tmp_path: Path) -> None:
    """``--classes`` naming a class ``a ESC]52;c;… BEL`` (a clipboard write), then ``dsreg
    show t@v | cat -v``: no byte of the sequence reaches the pipe, its escape does."""
    (tmp_path / "cls.txt").write_bytes(b"a\x1b]52;c;cHduZWQ=\x07\nb\n")
    np.save(tmp_path / "l.npy", np.array([0, 1, 0, 1]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO)

    def dsreg_(*args: str) -> subprocess.CompletedProcess[bytes]:
        cmd = [sys.executable, "-m", "dsreg", *args]
        return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=120)

    assert dsreg_("init").returncode == 0
    added = dsreg_("add", "t", "--labels", "l.npy", "--classes", "cls.txt", "--tag", "v")
    assert added.returncode == 0, added.stderr
    res = dsreg_("show", "t@v")
    assert res.returncode == 0, res.stderr
    assert b"\x1b" not in res.stdout and b"\x07" not in res.stdout
    assert b"classes   2: a\\x1b]52;c;cHduZWQ=\\x07, b\n" in res.stdout
    as_json = json.loads(dsreg_("show", "t@v", "--json").stdout)
    assert as_json["classes"] == ["a\x1b]52;c;cHduZWQ=\x07", "b"]
    table = dsreg_("sql", 'SELECT DISTINCT label_name FROM "t@v" ORDER BY 1')
    assert table.stdout.splitlines()[1] == b"a\\x1b]52;c;cHduZWQ=\\x07"


# -- any text, through every command that shows it -------------------------------------------------


def _write_sets(
    tmp: Path, classes: list[str], ids: list[str], notes: list[str]
) -> tuple[Path, Path, list[str]]:
    """Two tables of the same examples (the second relabelled: each row's next class), their
    labels as class names; returns the paths and the first table's labels."""
    labels = [classes[i % len(classes)] for i in range(len(ids))]
    moved = [classes[(i + 1) % len(classes)] for i in range(len(ids))]
    a, b = tmp / "a.parquet", tmp / "b.parquet"
    pq.write_table(pa.table({"example_id": ids, "label": labels, "note": notes}), a)
    pq.write_table(pa.table({"example_id": ids, "label": moved, "note": notes}), b)
    return a, b, labels


def _file_name(text: str) -> str:
    """``text`` as one path part: no "/" or NUL."""
    return text.replace("/", "_").replace("\x00", "_")


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    classes=st.lists(hostile, min_size=2, max_size=3, unique=True),
    id_texts=st.lists(hostile, min_size=4, max_size=6),
    notes=st.lists(hostile, min_size=6, max_size=6),
    credit=hostile,
)
def test_text_from_data_is_shown_escaped_and_json_is_exact(
    tmp_path_factory: pytest.TempPathFactory,
    classes: list[str],
    id_texts: list[str],
    notes: list[str],
    credit: str,
) -> None:
    tmp = tmp_path_factory.mktemp("t")
    reg = str(tmp / "reg")
    # Unique, safe ids: a row number first, one path part (no "/", backslash or NUL).
    ids = [f"r{i}-{_file_name(t).replace(chr(92), '_')}" for i, t in enumerate(id_texts)]
    notes = notes[: len(ids)]
    a, b, labels = _write_sets(tmp, classes, ids, notes)
    R = ("--registry", reg)
    shown(run("init", *R))
    credit = f"c {credit}"
    shown(run("add", "t", "--table", str(a), "--tag", "v", "--credit", credit, *R))
    shown(run("add", "t", "--table", str(b), "--tag", "w", *R))
    names = sorted(classes)

    # show: the classes line and the credit; --json exact.
    shown(run("show", "t@v", *R))
    info = shown(run("show", "t@v", "--json", *R)).json()
    assert info["classes"] == names
    assert info["source"]["credit"]["text"] == " ".join(credit.split())  # as --credit keeps it

    # sql: the text table, JSON, and CSV (exact into a pipe, escaped on a terminal).
    query = 'SELECT example_id, label_name, note FROM "t@v" ORDER BY row'
    shown(run("sql", query, *R))
    shown(run("sql", query, *R, tty=True))
    rows = shown(run("sql", query, "--json", *R)).json()
    assert rows == [
        {"example_id": i, "label_name": n, "note": c}
        for i, n, c in zip(ids, labels, notes, strict=True)
    ]
    shown(run("sql", query, "-f", "csv", *R, tty=True))
    piped = run("sql", query, "-f", "csv", *R)
    assert list(csv.reader(io.StringIO(piped.out, newline="")))[1:] == [
        [i, n, c] for i, n, c in zip(ids, labels, notes, strict=True)
    ]

    # diff: the from -> to table of class names, the ids of relabelled rows.
    shown(run("diff", "t@v", "t@w", *R))
    d = shown(run("diff", "t@v", "t@w", "--json", *R)).json()
    assert {(t["from"], t["to"]) for t in d["transitions"]} <= {
        (x, y) for x in names for y in names
    }
    assert set(d["samples"]["relabelled"]) <= set(ids)

    # ls and log (whose command line names the credit).
    shown(run("ls", *R))
    shown(run("log", "t", *R))

    # eval: a model named by its file, which holds the first class's name.
    preds = tmp / "preds"
    preds.mkdir()
    model = _file_name(classes[0])
    np.save(preds / f"{model}.npy", np.zeros(len(ids), dtype=np.int64))
    shown(run("eval", "t@v", str(preds / f"{model}.npy"), *R))
    report = shown(run("eval", "t@v", str(preds / f"{model}.npy"), "--json", *R)).json()
    assert [m["model"] for m in report["models"]] == [model]

    # An overlay of the hostile ids and names: show it; export its CSV (exact into a pipe,
    # escaped on a terminal).
    (tmp / "fix.csv").write_text("row,suggested_label\n0,1\n1,0\n")
    made = shown(
        run(
            "overlay", "import-labels", "t@v", str(tmp / "fix.csv"), "--format", "csv", "--json", *R
        )
    ).json()
    shown(run("overlay", "show", made["overlay"], *R))
    shown(run("overlay", "export", made["overlay"], *R, tty=True))
    exported = run("overlay", "export", made["overlay"], *R)
    assert exported.out == dsreg.overlay_export(made["overlay"], registry=reg)

    # cite: the credit, in each format, on a terminal; exact into a pipe.
    for fmt in ("bibtex", "cff", "text"):
        shown(run("cite", "t@v", "-f", fmt, *R, tty=True))
    assert " ".join(credit.split()) in run("cite", "t@v", "-f", "text", *R).out

    # An error quoting the data: the query's text is repeated.
    shown(run("sql", f"SELEC '{classes[0]}'", *R), code=1)


# -- the progress line and bar ---------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(task=hostile)
def test_a_progress_line_escapes_its_task(task: str) -> None:
    from dsreg.cli._common import progress_lines

    err = io.StringIO()
    with redirect_stderr(err):
        hook = progress_lines(interval=0.0)
        hook(task, 1, 2)
        hook(task, 2, 2)
    assert err.getvalue().count("\n") == 2
    assert not OBEYED.search(err.getvalue()), repr(err.getvalue())


def test_the_progress_bar_shows_markup_and_escapes_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the bar is rich's: a task named like rich markup is shown as written, and
    an escape sequence in it is shown escaped (rich's own sequences draw the bar)."""
    from dsreg.cli._common import progress_bar

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    task = "[bold red]x[/] \x1b]52;c;cHduZWQ=\x07"
    with progress_bar() as hook:
        assert hook is not None
        hook(task, 1, 2)
        time.sleep(0.2)
    drawn = err.getvalue()
    assert "[bold red]x[/]" in drawn and "\\x1b]52;c;cHduZWQ=\\x07" in drawn
    assert "\x1b]52" not in drawn


# -- error messages --------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(value=hostile)
def test_an_error_quoting_a_value_is_escaped(
    tmp_path_factory: pytest.TempPathFactory, value: str
) -> None:
    """Errors name the value they refuse: a registry path, a usage error's option value, an
    unknown command, a spec. None reaches the terminal raw; each exits 1."""
    where = tmp_path_factory.mktemp("e") / _file_name(value)
    shown(run("ls", "--registry", str(where)), code=1)
    shown(run("diff", "a@b", "a@c", "--top", value), code=1)
    shown(run(value.replace("\x00", "")), code=1)
    shown(run("show", value, "--registry", str(where)), code=1)


def test_an_ids_file_with_a_lone_surrogate_is_refused_not_a_traceback(tmp_path: Path) -> None:
    """JSON may escape half of a UTF-16 pair ("\\ud800"), which no UTF-8 text holds: the only
    way a lone surrogate reaches dsreg from data. Refused, naming it escaped; nothing stored."""
    np.save(tmp_path / "l.npy", np.array([0, 1]))
    (tmp_path / "ids.json").write_text('["\\ud800x", "b"]')
    reg = str(tmp_path / "reg")
    shown(run("init", "--registry", reg))
    res = shown(
        run(
            "add",
            "d",
            "--labels",
            str(tmp_path / "l.npy"),
            "--ids",
            str(tmp_path / "ids.json"),
            "--registry",
            reg,
        ),
        code=1,
    )
    assert "'\\ud800x'" in res.err and res.err.count("\n") == 1
    assert dsreg.ls(registry=reg) == []
