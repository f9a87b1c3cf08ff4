"""Papercuts as a user meets them: ``--version``, ``tag --delete``,
``diff --top``, what ``sql -o`` and a label-only checkout say they wrote, scores printed so
that they differ, the renormalisation note, and progress when stderr is not a terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry

Cli = Callable[..., Any]
DSREG = "import sys; from dsreg.cli import main; main(sys.argv[1:])"


@pytest.fixture
def toy(cli: Cli, tmp_path: Path) -> Path:
    """A registry in tmp_path (the cli's working folder): ``toy@v1``, 6 label-only rows."""
    assert cli("init").exit_code == 0
    np.save(tmp_path / "labels.npy", np.array([0, 0, 0, 1, 1, 1]))
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    r = cli("add", "toy", "--labels", "labels.npy", "--classes", "classes.txt", "--tag", "v1")
    assert r.exit_code == 0, r.stderr
    return tmp_path / ".dsreg"


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "lock" not in p.name
    }


# -- --version ----------------------------------------------------------------------------------


def test_version_prints_dsregs_version_fast(tmp_path: Path) -> None:
    for flag in ("--version", "-V"):
        proc = subprocess.run(
            [sys.executable, "-c", DSREG, flag],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"dsreg {dsreg.__version__}\n"
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+.*", dsreg.__version__)


# -- tag --delete -------------------------------------------------------------------------------


def test_tag_delete_is_logged_keeps_objects_and_gc_decides(cli: Cli, toy: Path) -> None:
    rev = cli("tag", "toy@v2", "toy@v1").stdout.strip()
    r = cli("tag", "--delete", "toy@v2")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == rev  # the digest the tag named, to re-tag it if needed
    assert f"Deleted tag toy@v2 (was {rev[7:19]})" in r.stderr
    shown = json.loads(cli("ls", "--json").stdout)
    assert "v2" not in json.dumps(shown) and "v1" in json.dumps(shown)
    last = json.loads(cli("log", "toy", "--json").stdout)[-1]
    assert (last["event"], last["tag"], last["old"], last["new"]) == ("delete", "v2", rev, None)
    assert last["command"] == "dsreg tag --delete toy@v2"

    # Deleting the last tag: the objects stay (a log line names them) until the log lets go.
    r = cli("tag", "-d", "toy@v1", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["deleted"] is True
    assert cli("show", rev).exit_code == 0
    kept = json.loads(cli("gc", "--json").stdout)
    assert kept["removed"] == [] and cli("show", rev).exit_code == 0
    gone = json.loads(cli("gc", "--prune-log-older-than", "now", "--json").stdout)
    assert rev in gone["removed"]
    assert cli("show", rev).exit_code == 1


def test_tag_delete_refuses_what_it_cannot_do_and_writes_nothing(cli: Cli, toy: Path) -> None:
    before = files(toy)
    r = cli("tag", "--delete", "toy@nope")
    assert r.exit_code == 1
    assert r.stderr == "Error: no tag toy@nope to delete (tags of 'toy': v1); see 'dsreg ls'\n"
    r = cli("tag", "--delete", "toy@v1", "toy@v1")
    assert r.exit_code == 1 and "takes only the tag, not the source 'toy@v1'" in r.stderr
    r = cli("tag", "toy@v3")
    assert r.exit_code == 1 and "needs the revision it names" in r.stderr
    assert files(toy) == before


def test_tag_delete_api(toy: Path) -> None:
    dsreg.tag("toy@v2", "toy@v1", registry=toy)
    res = dsreg.tag("toy@v2", delete=True, registry=toy)
    assert (
        res.deleted
        and res.tag == "v2"
        and res.revision == dsreg.open("toy@v1", registry=toy).digest
    )
    assert dsreg.log("toy", registry=toy)[-1].command == "dsreg.tag('toy@v2', delete=True)"
    with pytest.raises(dsreg.RevisionNotFoundError, match="no tag toy@v2 to delete"):
        dsreg.tag("toy@v2", delete=True, registry=toy)
    with pytest.raises(dsreg.InvalidInputError, match="not force"):
        dsreg.tag("toy@v1", delete=True, force=True, registry=toy)


# -- diff --top ---------------------------------------------------------------------------------


def test_diff_top_lists_that_many_changed_rows(cli: Cli, toy: Path, tmp_path: Path) -> None:
    probs = np.array([[0.1, 0.9]] * 3 + [[0.9, 0.1]] * 3)  # every row flagged, relabelled
    np.save(tmp_path / "p.npy", probs)
    r = cli("detect", "toy@v1", "--pred-probs", "p.npy", "--filter-by", "predicted_neq_given",
            "--tag", "fixed", "--view", "corrected")  # fmt: skip
    assert r.exit_code == 0, r.stderr

    def listed(*args: str) -> list[str]:
        r = cli("diff", "toy@v1", "toy@fixed", *args)
        assert r.exit_code == 0, r.stderr
        assert "relabelled  6" in r.stdout
        line = [x for x in r.stderr.splitlines() if x.startswith("first relabelled: ")]
        return line[0].removeprefix("first relabelled: ").split(", ") if line else []

    assert listed() == ["0", "1", "2", "3", "4", "5"]
    assert listed("--top", "2") == ["0", "1"]
    assert listed("--top", "0") == []
    r = cli("diff", "toy@v1", "toy@fixed", "--top", "-1")
    assert r.exit_code == 1 and "top -1 is not a count of rows" in r.stderr
    res = dsreg.diff("toy@v1", "toy@fixed", top=3, registry=toy)
    assert res.samples["relabelled"] == ["0", "1", "2"] and res.relabelled == 6


def test_diff_lists_the_most_frequent_label_pairs_first(
    cli: Cli, toy: Path, tmp_path: Path
) -> None:
    probs = np.array([[0.1, 0.9]] * 3 + [[0.9, 0.1]] * 2 + [[0.1, 0.9]])  # 3 cat->dog, 2 dog->cat
    np.save(tmp_path / "p.npy", probs)
    r = cli("detect", "toy@v1", "--pred-probs", "p.npy", "--filter-by", "predicted_neq_given",
            "--tag", "fixed", "--view", "corrected")  # fmt: skip
    assert r.exit_code == 0, r.stderr

    def pairs(*args: str) -> tuple[list[list[str]], str]:
        r = cli("diff", "toy@v1", "toy@fixed", *args)
        assert r.exit_code == 0, r.stderr
        lines = r.stdout.splitlines()
        at = next(i for i, x in enumerate(lines) if x.split() == ["FROM", "TO", "ROWS"])
        end = next((i for i in range(at + 1, len(lines)) if not lines[i].strip()), len(lines))
        rows = [x.split() for x in lines[at + 1 : end] if not x.startswith("...")]
        more = [x for x in lines if x.startswith("...")]
        return rows, more[0] if more else ""

    assert pairs() == ([["cat", "dog", "3"], ["dog", "cat", "2"]], "")
    assert pairs("--pairs", "1") == (
        [["cat", "dog", "3"]],
        "... 1 more pairs (2 rows): --pairs 0 or --json lists them all",
    )
    assert pairs("--pairs", "0")[0] == [["cat", "dog", "3"], ["dog", "cat", "2"]]
    r = cli("diff", "toy@v1", "toy@fixed", "--pairs", "-1")
    assert r.exit_code == 1 and "--pairs" in r.stderr


# -- what was written ---------------------------------------------------------------------------


def test_sql_output_says_rows_path_and_format(cli: Cli, toy: Path, tmp_path: Path) -> None:
    r = cli("sql", 'SELECT "row", label_name FROM "toy@v1"', "-o", "out.csv", "-f", "csv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr == "Wrote 6 rows to out.csv (csv)\n"
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == '"row","label_name"'
    r = cli("sql", 'SELECT 1 AS one FROM "toy@v1" LIMIT 1', "--output", "one.txt")
    assert r.stderr == "Wrote 1 row to one.txt (table)\n"
    # Without --format, the output's suffix says which (as dsreg.sql decides for a path).
    r = cli("sql", 'SELECT "row" FROM "toy@v1"', "-o", "rows.parquet")
    assert r.stderr == "Wrote 6 rows to rows.parquet (parquet)\n"
    assert pq.read_table(tmp_path / "rows.parquet").column("row").to_pylist() == list(range(6))
    r = cli("sql", 'SELECT "row" FROM "toy@v1" LIMIT 2', "-o", "rows.json")
    assert r.stderr == "Wrote 2 rows to rows.json (json)\n"
    assert json.loads((tmp_path / "rows.json").read_text()) == [{"row": 0}, {"row": 1}]


def test_a_label_only_checkout_says_it_wrote_labels_csv(
    cli: Cli, toy: Path, tmp_path: Path
) -> None:
    r = cli("checkout", "toy@v1", "co")
    assert r.exit_code == 0, r.stderr
    written = tmp_path / "co" / "labels.csv"
    assert f"wrote {written} (6 rows: row, example_id, label, label_name" in r.stderr
    assert len(written.read_text().splitlines()) == 7
    doc = json.loads(cli("checkout", "toy@v1", "co", "--json").stdout)
    assert doc["labels_csv"] == str(written) and doc["labels_rows"] == 6
    res = dsreg.checkout("toy@v1", tmp_path / "co2", registry=toy)
    assert res.labels_csv == str(tmp_path / "co2" / "labels.csv") and res.labels_rows == 6


# -- scores and the renormalisation note --------------------------------------------------------


def test_small_scores_are_printed_apart(cli: Cli, toy: Path, tmp_path: Path) -> None:
    # Self-confidence 0.00004, 0.00002 and 0.3 for the flagged rows 0, 1 and 3.
    probs = np.array(
        [[0.00004, 0.99996], [0.00002, 0.99998], [0.9, 0.1], [0.7, 0.3], [0.1, 0.9], [0.1, 0.9]]
    )
    np.save(tmp_path / "p.npy", probs)
    r = cli("detect", "toy@v1", "--pred-probs", "p.npy", "--filter-by", "predicted_neq_given")
    assert r.exit_code == 0, r.stderr
    table = r.stdout.split("\n\n", 1)[1]
    scores = [line.split()[-1] for line in table.splitlines()[1:]]
    assert scores == ["2e-05", "4e-05", "0.3"]
    assert "0.0000" not in r.stdout
    digest = r.stdout.split()[1]
    shown = cli("overlay", "show", digest, "--sort", "score").stdout
    assert [line.split()[-1] for line in shown.split("\n\n", 1)[1].splitlines()[1:]] == scores


def test_renormalisation_note_only_beyond_the_stated_tolerance(
    cli: Cli, toy: Path, tmp_path: Path
) -> None:
    base = np.array([[0.9, 0.1]] * 3 + [[0.1, 0.9]] * 3)
    rounding = base.copy()
    rounding[0, 0] += 4e-6  # float rounding of a float32 softmax: not a note
    np.save(tmp_path / "rounding.npy", rounding)
    r = cli("detect", "toy@v1", "--pred-probs", "rounding.npy")
    assert r.exit_code == 0, r.stderr
    assert "Note:" not in r.stderr
    off = base.copy()
    off[0, 0] += 4e-4  # further than rounding (1e-05 for float64, 2 classes), within 1e-3
    off[4, 1] += 2e-4
    np.save(tmp_path / "off.npy", off)
    r = cli("detect", "toy@v1", "--pred-probs", "off.npy")
    assert r.exit_code == 0, r.stderr
    assert (
        "Note: 2 rows of probabilities summed to 1 only within 1e-3, further off than float "
        "rounding (1e-05 for this dtype and 2 classes), and were divided by their sum before "
        "detection."
    ) in r.stderr
    single = base.copy()
    single[5, 1] += 4e-4
    np.save(tmp_path / "single.npy", single.astype(np.float32))
    r = cli("detect", "toy@v1", "--pred-probs", "single.npy")
    assert "Note: 1 row of probabilities" in r.stderr and "was divided by its sum" in r.stderr


# -- progress -----------------------------------------------------------------------------------


def test_progress_lines_on_stderr_when_not_a_terminal_and_quiet_silences_them(
    cli: Cli,
    toy: Path,
    tmp_path: Path,
    make_imagefolder: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = make_imagefolder("tree", per_class=4)
    line = re.compile(
        r"^(adding|checking out|verifying|removing|detecting, pass [0-9]+): [0-9,]+/[0-9,]+ "
        r"\([0-9]+%, [0-9]+s\)$"
    )
    np.save(tmp_path / "p.npy", np.array([[0.9, 0.1]] * 3 + [[0.2, 0.8]] * 3))
    # The default: a line every 5 s; a step this short says nothing but its result.
    r = cli("add", "pets", str(tree), "--tag", "v1")
    assert r.exit_code == 0 and not any(line.match(x) for x in r.stderr.splitlines())
    monkeypatch.setenv("DSREG_PROGRESS_INTERVAL", "0")  # every report, for the test
    for args, last in (
        (("add", "pets2", str(tree), "--tag", "v1"), "adding: 12/12 (100%"),
        (("checkout", "pets@v1", "out"), "checking out: 12/12 (100%"),
        (("verify",), "verifying: "),
        (("detect", "toy@v1", "--pred-probs", "p.npy"), "detecting, pass "),
        (("gc", "--prune-log-older-than", "now"), "removing: "),
    ):
        if args[0] == "gc":  # something to remove: the tree added twice, one name left
            assert cli("tag", "-d", "pets2@v1").exit_code == 0
        r = cli(*args)
        assert r.exit_code == 0, r.stderr
        shown = [x for x in r.stderr.splitlines() if line.match(x)]
        assert shown and shown[-1].startswith(last), (args, r.stderr)
        assert not any(line.match(x) for x in r.stdout.splitlines())  # stdout is data only
        if args[0] == "detect":  # every pass over the probabilities, to the last row
            assert {x.split(":")[0] for x in shown} >= {"detecting, pass 1", "detecting, pass 2"}
            assert all(x.split(": ")[1].startswith("6/6 (100%") for x in shown)
        quiet = cli(*args, "--quiet")
        assert quiet.exit_code == 0
        assert not any(line.match(x) for x in quiet.stderr.splitlines()), quiet.stderr


def test_the_library_reports_progress_through_its_hook_and_prints_nothing(
    make_imagefolder: Callable[..., Path],
    make_registry: Callable[..., Registry],
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    reg = make_registry()
    seen: list[tuple[str, int, int]] = []
    tree = make_imagefolder("tree", per_class=3)
    dsreg.add("pets", tree, tag="v1", progress=lambda *a: seen.append(a), registry=reg)
    dsreg.checkout("pets@v1", tmp_path / "co", progress=lambda *a: seen.append(a), registry=reg)
    assert ("adding", 9, 9) in seen and ("checking out", 9, 9) in seen
    probs = np.full((9, 3), 1 / 3)
    dsreg.detect("pets@v1", probs, progress=lambda *a: seen.append(a), registry=reg)
    assert ("detecting, pass 1", 9, 9) in seen
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert os.environ.get("DSREG_PROGRESS_INTERVAL") is None


# -- add without --tag -----------------------------------------------------------------------


def test_add_without_tag_says_how_to_name_the_revision(cli: Cli, toy: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "more.npy", np.array([1, 0, 1]))
    r = cli("add", "more", "--labels", "more.npy", "--classes", "classes.txt")
    assert r.exit_code == 0, r.stderr
    revision = r.stdout.strip()
    assert f"dsreg tag more@<tag> {revision}" in r.stderr
    assert "'dsreg ls' does not list it" in r.stderr
    # the command it prints works, and then ls lists the dataset
    assert cli("tag", "more@v1", revision).exit_code == 0
    assert "more" in cli("ls").stdout
    # with --tag, no such line
    r = cli("add", "other", "--labels", "more.npy", "--classes", "classes.txt", "--tag", "v1")
    assert r.exit_code == 0 and "Not tagged" not in r.stderr
