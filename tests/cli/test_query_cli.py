"""``dsreg sql``, ``eval``, ``diff`` and ``cite`` as a user runs them: data on stdout, messages on
stderr, ``--json`` for machines, errors exit 1 with ``Error: …``."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry
from dsreg.objects.hashing import hash_file

N = 30
LABELS = np.asarray([i % 3 for i in range(N)], dtype=np.int32)
CLASSES = ("ant", "bee", "cat")


# Five raters each: rows 0-2 correctable to the next class, rows 3-4 neither, row 5 no error.
VOTES = """example_id,given_label,suggested_label,given,guessed,both,neither
e00,ant,bee,0,5,0,0
e01,bee,cat,0,5,0,0
e02,cat,ant,0,5,0,0
e03,ant,,0,0,0,5
e04,bee,,0,0,0,5
e05,cat,,5,0,0,0
"""


@pytest.fixture
def reg(make_registry: Callable[..., Registry], tmp_path: Path) -> Registry:
    """``toy``: 30 rows over 3 classes; one overlay (rows 0-2 correctable to the next class,
    rows 3-4 neither, row 5 non_error) under tags original, cleaned-v1, corrected-v1."""
    r = make_registry()
    sources = tmp_path / "sources"
    sources.mkdir()
    table = sources / "toy.parquet"
    pq.write_table(
        pa.table({"example_id": [f"e{i:02d}" for i in range(N)], "label": LABELS}), table
    )
    dsreg.add("toy", table=table, classes=CLASSES, tag="original", registry=r)
    (sources / "votes.csv").write_text(VOTES)
    ov = dsreg.import_votes(
        "toy@original",
        sources / "votes.csv",
        format="csv",
        tag="cleaned-v1",
        view="cleaned",
        registry=r,
    )
    assert ov.summary["correctable"] == 3 and ov.summary["neither"] == 2
    dsreg.tag(
        "toy@corrected-v1", "toy@original", overlays=[ov.digest], view="corrected", registry=r
    )
    return r


def run(cli: Any, reg: Registry, *args: str) -> Any:
    return cli(*args, "--registry", str(reg.root))


def test_every_command_has_help(cli: Any) -> None:
    for cmd in ("sql", "eval", "diff", "cite"):
        res = cli(cmd, "-h")
        assert res.exit_code == 0 and "--json" in res.stdout, cmd


def test_sql_table_csv_json_and_parquet(cli: Any, reg: Registry, tmp_path: Path) -> None:
    q = 'SELECT label_name, count(*) AS n FROM "toy@cleaned-v1" GROUP BY ALL ORDER BY 1'
    res = run(cli, reg, "sql", q)
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["label_name", "n"]
    assert [ln.split() for ln in lines[1:]] == [["ant", "8"], ["bee", "8"], ["cat", "9"]]
    assert "(3 rows)" in res.stderr
    res = run(cli, reg, "sql", q, "--format", "csv")
    assert list(csv.reader(io.StringIO(res.stdout))) == [
        ["label_name", "n"],
        ["ant", "8"],
        ["bee", "8"],
        ["cat", "9"],
    ]
    res = run(cli, reg, "sql", q, "--json")
    assert json.loads(res.stdout) == [
        {"label_name": "ant", "n": 8},
        {"label_name": "bee", "n": 8},
        {"label_name": "cat", "n": 9},
    ]
    out = tmp_path / "rows.parquet"
    res = run(cli, reg, "sql", 'SELECT * FROM "toy@corrected-v1"', "-f", "parquet", "-o", str(out))
    assert res.exit_code == 0 and res.stdout == ""
    t = pq.read_table(out)
    assert t.num_rows == N - 2
    assert t.column_names[:6] == [
        "row",
        "example_id",
        "label",
        "label_name",
        "given_label",
        "verdict",
    ]


def test_sql_joins_two_revisions(cli: Any, reg: Registry) -> None:
    res = run(
        cli,
        reg,
        "sql",
        'SELECT o.example_id, o.label_name, c.label_name FROM "toy@original" o '
        'JOIN "toy@corrected-v1" c USING ("row") WHERE o.label <> c.label ORDER BY 1',
        "--format",
        "csv",
    )
    assert list(csv.reader(io.StringIO(res.stdout)))[1:] == [
        ["e00", "ant", "bee"],
        ["e01", "bee", "cat"],
        ["e02", "cat", "ant"],
    ]


def test_sql_errors_exit_1_with_a_message(cli: Any, reg: Registry) -> None:
    res = run(cli, reg, "sql", 'SELECT nope FROM "toy@original"')
    assert res.exit_code == 1 and res.stderr.startswith("Error: ") and "nope" in res.stderr
    res = run(cli, reg, "sql", 'SELECT * FROM "toy@v9"')
    assert res.exit_code == 1 and "no tag or revision 'v9'" in res.stderr
    res = run(cli, reg, "sql", "SELECT 1", "--format", "xml")
    assert res.exit_code == 1 and "unknown --format 'xml'" in res.stderr


def test_sql_is_read_only_unless_allow_files(cli: Any, reg: Registry, tmp_path: Path) -> None:
    mine = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"row": [0, 1], "pred": [2, 0]}), mine)
    tag = reg.root / "refs" / "toy" / "original"
    before = tag.read_bytes()
    res = run(cli, reg, "sql", f"COPY (SELECT 1 AS x) TO '{tag}' (FORMAT csv)")
    assert res.exit_code == 1 and res.stderr.startswith("Error: SQL is read-only")
    assert "--allow-files" in res.stderr and tag.read_bytes() == before
    res = run(cli, reg, "sql", f"SELECT count(*) AS n FROM '{mine}'")
    assert res.exit_code == 1 and "--allow-files" in res.stderr
    query = f'SELECT v.example_id, p.pred FROM "toy@original" v JOIN \'{mine}\' p USING ("row")'
    res = run(cli, reg, "sql", query + " ORDER BY 1", "--allow-files", "--format", "csv")
    assert res.exit_code == 0, res.stderr
    assert list(csv.reader(io.StringIO(res.stdout))) == [
        ["example_id", "pred"],
        ["e00", "2"],
        ["e01", "0"],
    ]
    assert "--allow-files" in run(cli, reg, "sql", "--help").stdout


def _preds(tmp_path: Path) -> list[str]:
    right = LABELS.copy()
    fixer = LABELS.copy()
    fixer[:3] = [1, 2, 0]  # the corrected labels of the correctable rows
    np.save(tmp_path / "given.npy", right)
    np.save(tmp_path / "fixer.npy", fixer)
    return [str(tmp_path / "given.npy"), str(tmp_path / "fixer.npy")]


def test_eval_table_json_and_plot(cli: Any, reg: Registry, tmp_path: Path) -> None:
    files = _preds(tmp_path)
    res = run(cli, reg, "eval", "toy@corrected-v1", *files, "--plot", str(tmp_path / "r.svg"))
    assert res.exit_code == 0, res.stderr
    digest = dsreg.open("toy@corrected-v1", registry=reg).digest
    assert digest in res.stdout and hash_file(files[0]) in res.stdout
    lines = res.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("MODEL"))
    assert lines[header].split()[:4] == ["MODEL", "VIEW", "ACCURACY", "95%"]
    # One line per model and view: accuracy, Wilson interval, rank, bootstrap rank interval.
    assert lines[header + 1].split()[:3] == ["given", "ORIGINAL", "100.00%"]
    fixer = next(i for i, ln in enumerate(lines) if ln.startswith("fixer"))
    assert lines[fixer].split()[:3] == ["fixer", "ORIGINAL", "90.00%"]
    assert lines[fixer + 2].split()[:2] == ["CORRECTED", "100.00%"]
    changes = {ln.split()[0]: ln for ln in lines if " -> " in ln and ln.startswith(("gi", "fi"))}
    assert "1 -> 2 (-1)" in changes["given"] and "2 -> 1 (+1)" in changes["fixer"]
    tables = [ln for ln in lines if not ln.startswith(("revision", "predictions"))]
    assert max(map(len, tables)) <= 100
    assert "Wrote the rank chart" in res.stderr and (tmp_path / "r.svg").stat().st_size > 0
    res = run(
        cli, reg, "eval", "toy@corrected-v1", *files, "--json", "--views", "original,honeypot"
    )
    doc = json.loads(res.stdout)
    assert doc["revision"] == digest and doc["views"] == {
        "original": {"rows": 30},
        "honeypot": {"rows": 3},
    }
    again = run(
        cli, reg, "eval", "toy@corrected-v1", *files, "--json", "--views", "original,honeypot"
    )
    assert again.stdout == res.stdout
    hp = {m["model"]: m["scores"]["honeypot"] for m in doc["models"]}
    assert (
        hp["fixer"]["accuracy"]["top1"] == 1.0 and hp["fixer"]["given"]["accuracy"]["top1"] == 0.0
    )


def test_eval_errors_exit_1(cli: Any, reg: Registry, tmp_path: Path) -> None:
    np.save(tmp_path / "short.npy", LABELS[:-1])
    res = run(cli, reg, "eval", "toy@corrected-v1", str(tmp_path / "short.npy"))
    assert res.exit_code == 1 and "29 labels, but the snapshot has 30" in res.stderr
    res = run(cli, reg, "eval", "toy@corrected-v1", str(tmp_path / "none.npy"))
    assert res.exit_code == 1 and "does not exist" in res.stderr
    np.save(tmp_path / "ok.npy", LABELS)
    res = run(cli, reg, "eval", "toy@corrected-v1", str(tmp_path / "ok.npy"), "--top-k", "x")
    assert res.exit_code == 1 and "--top-k" in res.stderr
    res = run(cli, reg, "eval", "toy@corrected-v1", str(tmp_path / "ok.npy"), "--plot", "r.gif")
    assert res.exit_code == 1 and ".png or .svg" in res.stderr


def test_diff_prints_counts_and_transitions(cli: Any, reg: Registry) -> None:
    res = run(cli, reg, "diff", "toy@original", "toy@corrected-v1")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "only in a   2" in out and "only in b   0" in out and "relabelled  3" in out
    assert [ln.split() for ln in out.splitlines() if ln.startswith(("ant", "bee", "cat"))] == [
        ["ant", "bee", "1"],
        ["bee", "cat", "1"],
        ["cat", "ant", "1"],
    ]
    doc = json.loads(run(cli, reg, "diff", "toy@original", "toy@corrected-v1", "--json").stdout)
    assert doc["samples"]["only_a"] == ["e03", "e04"] and doc["match"] == "row"


@pytest.mark.parametrize("fmt", ["bibtex", "cff", "text"])
def test_cite_and_every_digest_it_carries_resolves_with_show(
    cli: Any, reg: Registry, fmt: str
) -> None:
    res = run(cli, reg, "cite", "toy@cleaned-v1", "--format", fmt)
    assert res.exit_code == 0, res.stderr
    doc = json.loads(run(cli, reg, "cite", "toy@cleaned-v1", "--format", fmt, "--json").stdout)
    assert doc["citation"] == res.stdout
    digests = [doc["revision"], doc["snapshot"], *(o["digest"] for o in doc["overlays"])]
    assert len(digests) == 3
    for d in digests:
        assert d in res.stdout
        shown = run(cli, reg, "show", d)
        assert shown.exit_code == 0 and d in shown.stdout, shown.stderr
    assert "toy@cleaned-v1" in res.stdout and doc["dsreg_version"] in res.stdout


def test_cite_refuses_an_unknown_format(cli: Any, reg: Registry) -> None:
    res = run(cli, reg, "cite", "toy@original", "--format", "ris")
    assert res.exit_code == 1 and "unknown --format 'ris'" in res.stderr


# A query whose first 300,000 rows stream out before a cast fails on the next one.
FAILS_MIDWAY = (
    "SELECT i, CASE WHEN i < 300000 THEN i ELSE CAST('x' || i::VARCHAR AS INTEGER) END AS v "
    'FROM range(400000) t(i), (SELECT count(*) FROM "toy@original")'
)


def _beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_sql_output_failing_midway_keeps_the_old_file(
    cli: Any, reg: Registry, tmp_path: Path, fmt: str
) -> None:
    """A query failing after rows were written: exit 1, the existing -o FILE untouched, no
    temporary file left, and no FILE made where there was none."""
    out = tmp_path / f"rows.{fmt}"
    out.write_bytes(b"precious\n")
    res = run(cli, reg, "sql", FAILS_MIDWAY, "-f", fmt, "-o", str(out))
    assert res.exit_code == 1 and res.stderr.startswith("Error: "), res.stderr
    assert "Could not convert string 'x300000'" in res.stderr
    assert out.read_bytes() == b"precious\n" and _beside(out) == []
    fresh = tmp_path / f"new.{fmt}"
    assert run(cli, reg, "sql", FAILS_MIDWAY, "-f", fmt, "-o", str(fresh)).exit_code == 1
    assert not fresh.exists() and _beside(fresh) == []
    ok = run(cli, reg, "sql", 'SELECT count(*) AS n FROM "toy@original"', "-f", fmt, "-o", str(out))
    assert ok.exit_code == 0, ok.stderr
    assert out.read_bytes() != b"precious\n" and _beside(out) == []
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.slow
def test_sql_output_killed_midway_keeps_the_old_file(
    reg: Registry, tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]
) -> None:
    """dsreg sql -o FILE killed (SIGKILL) while it writes: FILE keeps its old bytes."""
    out = tmp_path / "rows.csv"
    out.write_bytes(b"precious\n")
    query = 'SELECT i, i * 2 AS j FROM range(20000000) t(i), (SELECT 1 FROM "toy@original" LIMIT 1)'
    args = ["sql", query, "-o", str(out), "--registry", str(reg.root)]
    with subprocess.Popen(
        [sys.executable, "-c", "from dsreg.cli import main; main()", *args],
        cwd=tmp_path,
        env=dsreg_env(),
    ) as proc:
        deadline = time.monotonic() + 60
        while not _beside(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert _beside(out), "the write never started (or finished before it was seen)"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert out.read_bytes() == b"precious\n"


def test_eval_plot_failing_keeps_the_old_chart(
    cli: Any, reg: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chart write failing midway (a full disk): exit 1, the old chart whole, nothing beside."""
    from matplotlib.figure import Figure

    chart = tmp_path / "r.svg"
    chart.write_bytes(b"<svg>old</svg>")

    def full_disk(self: Any, fname: Any, **kwargs: Any) -> None:
        fname.write(b"<svg>half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    res = run(cli, reg, "eval", "toy@corrected-v1", *_preds(tmp_path), "--plot", str(chart))
    assert res.exit_code == 1 and "No space left on device" in res.stderr, res.stderr
    assert chart.read_bytes() == b"<svg>old</svg>" and _beside(chart) == []


def test_sql_output_to_a_pipe_writes_through_it(cli: Any, reg: Registry, tmp_path: Path) -> None:
    """-o naming something that is not a regular file (a named pipe, /dev/stdout) writes into
    it: there is no file to replace, and the pipe stays a pipe."""
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = run(
        cli, reg, "sql", 'SELECT count(*) AS n FROM "toy@original"', "-f", "csv", "-o", str(fifo)
    )
    reader.join(timeout=30)
    assert res.exit_code == 0, res.stderr
    assert got == [b'"n"\n30\n'] and stat.S_ISFIFO(fifo.lstat().st_mode) and _beside(fifo) == []


def _five(tmp_path: Path) -> list[str]:
    """Five models on toy (honeypot rows 0-2, whose given labels are LABELS): given labels
    everywhere, the corrected labels, corrected on the first one or two honeypot rows, and
    one right on the honeypot's corrected labels but wrong on five correctly labelled rows."""
    corrected = LABELS.copy()
    corrected[:3] = [1, 2, 0]
    models = {"given": LABELS.copy(), "fixer": corrected.copy()}
    models["one"], models["two"] = LABELS.copy(), LABELS.copy()
    models["one"][:1], models["two"][:2] = corrected[:1], corrected[:2]
    models["swap"] = corrected.copy()
    models["swap"][10:15] = (LABELS[10:15] + 1) % 3
    for name, pred in models.items():
        np.save(tmp_path / f"{name}.npy", pred)
    return [str(tmp_path / f"{name}.npy") for name in models]


def test_eval_intervals_tests_and_flip_points(cli: Any, reg: Registry, tmp_path: Path) -> None:
    from statsmodels.stats.proportion import proportion_confint

    files = _five(tmp_path)
    res = run(cli, reg, "eval", "toy@corrected-v1", *files, "--flip-points")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    tables = [ln for ln in lines if not ln.startswith(("revision", "predictions"))]
    assert max(map(len, tables)) <= 100
    # swap leads given on all corrected rows, trails it on the corrected errors: it flips
    # once 40% of the correctly labelled rows are gone (r* = 3/5), at 3 errors in 18 rows.
    flip = next(ln for ln in lines if ln.startswith("given") and "swap" in ln and "%" in ln)
    assert flip.split()[:3] == ["given", "swap", "40.00%"]
    assert "16.67%" in flip
    assert "overfitting" in res.stderr and res.stderr.count("Warning:") == 1
    doc = json.loads(run(cli, reg, "eval", "toy@corrected-v1", *files, "--json").stdout)
    sig = doc["significance"]
    assert (sig["ci"], sig["resamples"], sig["seed"], sig["level"]) == ("wilson", 1000, 0, 0.95)
    fixer = sig["views"]["corrected"]["models"]["fixer"]
    assert fixer["correct"] == 28 and fixer["rank"] == 1 and fixer["rank_interval"] == [1, 1]
    assert fixer["interval"] == pytest.approx(
        list(proportion_confint(28, 28, alpha=0.05, method="wilson")), abs=1e-6
    )
    corr = sig["correlation"]
    assert (corr["from"], corr["to"], corr["models"]) == ("honeypot_given", "honeypot", 5)
    assert corr["spearman"] < 0 and corr["warning"] is True
    flips = {(f["a"], f["b"]): f for f in sig["flip_points"]}
    assert flips[("given", "swap")]["removed"] == pytest.approx(0.4)
    assert flips[("given", "swap")]["prevalence"] == pytest.approx(3 / 18, abs=1e-6)
    pairs = {(p["a"], p["b"]): p for p in sig["views"]["honeypot"]["pairs"]}
    assert (pairs[("given", "fixer")]["only_a"], pairs[("given", "fixer")]["only_b"]) == (0, 3)
    assert {c["model"] for c in sig["rank_changes"]} == {"given", "fixer", "one", "two", "swap"}


def test_eval_bootstrap_is_deterministic_for_a_seed(
    cli: Any, reg: Registry, tmp_path: Path
) -> None:
    files = _five(tmp_path)
    boot = ("--ci", "bootstrap", "--resamples", "300")
    one = run(cli, reg, "eval", "toy@corrected-v1", *files, *boot, "--seed", "5", "--json")
    two = run(cli, reg, "eval", "toy@corrected-v1", *files, *boot, "--seed", "5", "--json")
    other = run(cli, reg, "eval", "toy@corrected-v1", *files, *boot, "--seed", "6", "--json")
    assert one.exit_code == 0, one.stderr
    assert one.stdout == two.stdout and one.stdout != other.stdout
    assert json.loads(one.stdout)["significance"]["ci"] == "bootstrap"
    full = run(cli, reg, "eval", "toy@corrected-v1", *files, *boot, "--full")
    assert "ONLY A" in full.stdout and "P HOLM" in full.stdout
    for bad, said in [
        (("--ci", "normal"), "--ci 'normal'"),
        (("--resamples", "0"), "--resamples 0"),
        (("--seed", "-2"), "--seed -2"),
    ]:
        res = run(cli, reg, "eval", "toy@corrected-v1", files[0], *bad)
        assert res.exit_code == 1 and res.stderr.startswith("Error: ") and said in res.stderr
        assert res.stderr.count("\n") == 1 and not res.stdout
