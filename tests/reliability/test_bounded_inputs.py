"""Every importer's reader is bounded (docs/concepts.md, "Guarantees": every input file is read
within bounds): hostile inputs to ``add``, ``overlay import-labels``, ``overlay import-votes``,
``detect`` and ``eval`` give exit 1, one line starting ``Error:``, no traceback and no raw
warning (pytest turns warnings into errors, which the in-process command line would let
escape), and nothing written to the registry (files/, refs/ and logs/ as they were).

The classes, each drawn by hypothesis where its inputs vary: JSON nested around and far
beyond the limit, integers of any number of digits (in JSON and in CSV cells), ``.npy`` headers
claiming shapes the data does not hold, tables with two columns of one name, counts and
probabilities of every dtype with extreme values, cells longer than a CSV reader's block, and
input paths that are named pipes, devices or folders (in a fresh process with a timeout: a
reader that waits on a pipe must fail the test, not hang it).
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg

CLASSES = ("cat", "dog", "eel")
LABELS = [0, 1, 2, 0, 1, 2, 0, 1, 1]
N = len(LABELS)
MAX_DEPTH = 64  # the documented limit (dsreg._util.jsonread.MAX_DEPTH)
TALLY: Counter[str] = Counter()
Cli = Callable[..., Any]


def _settings(n: int) -> Any:
    return settings(
        max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if TALLY:
        print("\nhypothesis examples:", ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))


def _labelled(root: Path) -> Path:
    """A registry in ``root`` holding lab@original (N label-only rows over CLASSES), made
    through the library; ``ok.npy`` beside it. Its folder."""
    np.save(root / "ok.npy", np.array(LABELS))
    (root / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    reg = dsreg.init(registry=root / ".dsreg").root
    dsreg.add("lab", labels=root / "ok.npy", classes=root / "classes.txt", tag="original",
              registry=reg)  # fmt: skip
    return reg


@pytest.fixture
def reg(cli: Cli, tmp_path: Path) -> Path:
    return _labelled(tmp_path)


def _state(reg: Path) -> dict[str, int]:
    """What a refused command must not change: the size of every file of files/, refs/, logs/."""
    found = (p for sub in ("files", "refs", "logs") for p in (reg / sub).rglob("*"))
    return {
        p.relative_to(reg).as_posix(): p.stat().st_size
        for p in found
        if p.is_file() and not p.name.startswith(".")  # not logs/.<dataset>.lock
    }


def _outcome(cli: Cli, reg: Path, name: str, *args: str) -> str | None:
    """Run ``dsreg ARGS``: success (None), or a refusal of one short line that wrote nothing
    (its message)."""
    TALLY[name] += 1
    before = _state(reg)
    res = cli(*args)
    assert res.exit_code in (0, 1), (args, res.exit_code, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "Warning" not in res.stderr, res.stderr[-2000:]
    if res.exit_code == 0:
        return None
    err = res.stderr.strip()
    assert err.startswith("Error: ") and "\n" not in err, err[:2000]
    assert len(err) < 2000, f"a message of {len(err):,} characters: {err[:300]}"
    assert "straddl" not in err and "set_int_max_str_digits" not in err, err
    assert _state(reg) == before, (args, err, "a refused command wrote")
    return err


def _refused(cli: Cli, reg: Path, name: str, *args: str) -> str:
    err = _outcome(cli, reg, name, *args)
    assert err is not None, (args, "was accepted")
    return err


# -- JSON nested without end, integers without end ------------------------------------------------


def _nest(depth: int, inner: str, closed: bool) -> str:
    """``inner`` inside ``depth`` levels of arrays and objects (left open or closed)."""
    opens = ["[" if i % 3 else '{"k":' for i in range(depth)]
    tail = "".join("]" if o == "[" else "}" for o in reversed(opens)) if closed else ""
    return "".join(opens) + inner + tail


DEPTHS = st.integers(1, 2 * MAX_DEPTH) | st.integers(1_000, 200_000)
DIGITS = st.integers(1, 6_000)


@_settings(40)
@given(kind=st.sampled_from(["nest", "integer"]), depth=DEPTHS, digits=DIGITS, data=st.data())
def test_real_json_of_any_depth_or_integer_is_refused_in_one_line(
    cli: Cli, reg: Path, tmp_path: Path, kind: str, depth: int, digits: int, data: st.DataObject
) -> None:
    row = data.draw(st.integers(0, N - 1))
    closed = data.draw(st.booleans())
    value = _nest(depth, "1", closed) if kind == "nest" else "9" * digits
    # The hostile value stands in for row ``row``'s only label (left open: the file ends there).
    parts = [json.dumps([label]) for label in LABELS]
    parts[row] = f"[{value}"
    if kind == "nest" and not closed:
        text = "[" + ",".join(parts[: row + 1])
    else:
        parts[row] += "]"
        text = "[" + ",".join(parts) + "]"
    (tmp_path / "real.json").write_text(text)
    err = _refused(
        cli, reg, "real.json", "overlay", "import-labels", "lab@original", "real.json",
        "--format", "real",
    )  # fmt: skip
    if kind == "nest" and depth + 2 > MAX_DEPTH:
        assert f"JSON nested deeper than {MAX_DEPTH} levels" in err, err
    if kind == "integer" and digits > 4300:
        assert "4300 digits" in err, err
    elif kind == "integer" and digits > 20:
        assert f"an integer of {digits:,} digits" in err, err


@_settings(30)
@given(depth=DEPTHS, where=st.sampled_from(["document", "mturk", "id"]), closed=st.booleans())
def test_votes_json_of_any_depth_is_refused_in_one_line(
    cli: Cli, reg: Path, tmp_path: Path, depth: int, where: str, closed: bool
) -> None:
    record = {"id": 0, "given_original_label": "cat", "our_guessed_label": "dog"}
    counts = '{"given": 1, "guessed": 4}'
    if where == "document":
        text = _nest(depth, json.dumps([record | {"mturk": {}}]), closed)
    else:
        inner = _nest(depth, "1", closed)
        body = json.dumps(record)[:-1]
        field = f', "mturk": {inner}' if where == "mturk" else f', "mturk": {counts}, "x": {inner}'
        text = f"[{body}{field}" + ("}]" if closed else "")
    (tmp_path / "v.json").write_text(text)
    err = _outcome(cli, reg, "votes json", "overlay", "import-votes", "lab@original", "v.json")
    levels = depth + (1 if where == "document" else 2)
    if levels > MAX_DEPTH:
        assert err is not None and f"JSON nested deeper than {MAX_DEPTH} levels" in err, err


@_settings(40)
@given(
    column=st.sampled_from(["row", "suggested_label", "label_counts", "given_label"]),
    digits=st.integers(1, 40),
    csv_for=st.sampled_from(["corrections", "predictions"]),
)
def test_integer_cells_of_any_size_are_checked_before_conversion(
    cli: Cli, reg: Path, tmp_path: Path, column: str, digits: int, csv_for: str
) -> None:
    number = "9" * digits
    if csv_for == "predictions":
        (tmp_path / "p.csv").write_text(f"row,pred\n0,{number}\n1,0\n")
        err = _outcome(cli, reg, "csv integers (eval)", "eval", "lab@original", "p.csv")
    else:
        cells = {"row": "0", "suggested_label": "1", "label_counts": "1:3", "given_label": "0"}
        cells[column] = f"1:{number}" if column == "label_counts" else number
        text = ",".join(cells) + "\n" + ",".join(cells.values()) + "\n"
        (tmp_path / "c.csv").write_text(text)
        err = _outcome(
            cli, reg, "csv integers (corrections)", "overlay", "import-labels", "lab@original",
            "c.csv", "--format", "csv",
        )  # fmt: skip
    counts = csv_for == "corrections" and column == "label_counts"
    if digits > 18 or (counts and digits > 9):
        assert err is not None and "digits" in err, err


# -- .npy headers against the file's size ---------------------------------------------------------


def _npy_with_header(data: np.ndarray, shape: tuple[int, ...]) -> bytes:
    """``data``'s bytes behind a version 1 header stating ``shape``."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": np.lib.format.dtype_to_descr(data.dtype), "fortran_order": False,
               "shape": shape}
    )  # fmt: skip
    return head.getvalue() + data.tobytes()


NPY_COMMANDS = {
    "counts": ("f8", (N, 3), ["overlay", "import-labels", "lab@original", "x.npy", "--format",
                              "counts"]),
    "labels": ("i8", (N,), ["add", "lab2", "--labels", "x.npy"]),
    "pred-probs": ("f8", (N, 3), ["detect", "lab@original", "--pred-probs", "x.npy"]),
    "predictions": ("f8", (N, 3), ["eval", "lab@original", "x.npy"]),
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(NPY_COMMANDS))
@_settings(15)
@given(
    rows=st.integers(0, 10**12) | st.integers(0, 2 * N),
    cols=st.integers(0, 10**6) | st.integers(0, 6),
    held=st.integers(0, 3 * N),
)
def test_npy_headers_are_checked_against_the_file_size(
    cli: Cli, reg: Path, tmp_path: Path, command: str, rows: int, cols: int, held: int
) -> None:
    dtype, shape, args = NPY_COMMANDS[command]
    claimed = (rows,) if len(shape) == 1 else (rows, cols)
    data = (np.arange(held * (shape[1] if len(shape) == 2 else 1)) % 3).astype(dtype)
    (tmp_path / "x.npy").write_bytes(_npy_with_header(data, claimed))
    err = _outcome(cli, reg, f"npy header ({command})", *args)
    need = int(np.prod(claimed, dtype=object)) * np.dtype(dtype).itemsize
    if need > data.nbytes:
        assert err is not None and "its header says" in err, err


# -- duplicate column names -----------------------------------------------------------------------

NAMES = st.sampled_from(["row", "pred", "label", "example_id", *CLASSES, "probs", "x"])


def _table_args(use: str) -> tuple[str, list[str]]:
    return {
        "counts": ("parquet", ["overlay", "import-labels", "lab@original", "t.parquet",
                               "--format", "counts"]),
        "add --table": ("parquet", ["add", "tab", "--table", "t.parquet"]),
        "add --labels": ("parquet", ["add", "lab3", "--labels", "t.parquet"]),
        "eval parquet": ("parquet", ["eval", "lab@original", "t.parquet"]),
        "eval csv": ("csv", ["eval", "lab@original", "t.csv"]),
        "detect": ("parquet", ["detect", "lab@original", "--pred-probs", "t.parquet"]),
        "corrections csv": ("csv", ["overlay", "import-labels", "lab@original", "t.csv",
                                    "--format", "csv"]),
    }[use]  # fmt: skip


@pytest.mark.parametrize(
    "use",
    ["counts", "add --table", "add --labels", "eval parquet", "eval csv", "detect",
     "corrections csv"],
)  # fmt: skip
@_settings(8)
@given(names=st.lists(NAMES, min_size=1, max_size=5), twice=NAMES)
def test_two_columns_of_one_name_are_refused_by_name(
    cli: Cli, reg: Path, tmp_path: Path, use: str, names: list[str], twice: str
) -> None:
    columns = [*names, twice, twice]
    suffix, args = _table_args(use)
    values = [pa.array([float(i % 3) / 2 for i in range(N)]) for _ in columns]
    if suffix == "parquet":
        pq.write_table(pa.Table.from_arrays(values, names=columns), tmp_path / "t.parquet")
    else:
        rows = [",".join(columns)] + [",".join(["0"] * len(columns))] * 2
        (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    err = _refused(cli, reg, f"duplicate columns ({use})", *args)
    assert "more than once" in err and repr(twice) in err, err


# -- arrays of every dtype: no raw warning --------------------------------------------------------

SPECIAL = st.sampled_from([0.0, 1.0, 3.0, -1.0, 0.5, 65504.0, 1e10, 1e300, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("use", ["counts", "pred-probs", "predictions"])
@_settings(20)
@given(
    dtype=st.sampled_from(["f2", "f4", "f8", "i1", "i8", "u1", "u8"]),
    values=st.lists(SPECIAL | st.integers(0, 40).map(float), min_size=N * 3, max_size=N * 3),
)
def test_arrays_of_any_dtype_and_value_give_no_raw_warning(
    cli: Cli, reg: Path, tmp_path: Path, use: str, dtype: str, values: list[float]
) -> None:
    with np.errstate(all="ignore"):
        arr = np.array(values, dtype=np.float64).reshape(N, 3).astype(dtype)
    np.save(tmp_path / "x.npy", arr)
    _, _, args = NPY_COMMANDS[use]
    _outcome(cli, reg, f"dtypes ({use})", *args)


# -- CSV lines longer than a block ----------------------------------------------------------------


@pytest.mark.parametrize("use", ["corrections", "predictions", "table", "votes"])
@_settings(2)
@given(size=st.integers(1 << 20, 5 << 20))
def test_a_long_csv_cell_is_read_or_refused_with_its_limit(
    cli: Cli, reg: Path, tmp_path: Path, use: str, size: int
) -> None:
    cell = "x" * size
    if use == "corrections":
        (tmp_path / "c.csv").write_text(f"row,suggested_label\n0,{cell}\n")
        args = ["overlay", "import-labels", "lab@original", "c.csv", "--format", "csv"]
    elif use == "predictions":
        (tmp_path / "c.csv").write_text(f"example_id,pred\n{cell},cat\n")
        args = ["eval", "lab@original", "c.csv"]
    elif use == "table":
        (tmp_path / "c.csv").write_text(f"example_id,label,note\na,cat,{cell}\n")
        args = ["add", "tab", "--table", "c.csv"]
    else:
        header = "example_id,given_label,suggested_label,given,guessed,both,neither"
        (tmp_path / "c.csv").write_text(f"{header}\n0,cat,{cell},1,4,0,0\n")
        args = ["overlay", "import-votes", "lab@original", "c.csv", "--format", "csv"]
    err = _outcome(cli, reg, f"long cell ({use})", *args)
    if use == "table":
        # Arrow reads a line across one block boundary, not across two: named with the block.
        assert err is None or "longer than 1,048,576 bytes" in err, err
    elif use == "votes":
        assert err is not None and "holds a cell longer than 131,072 characters" in err, err
    else:
        assert err is not None and "xxxxxxxxxx…" in err, err  # refused, the cell cut short


# -- inputs that are no regular files -------------------------------------------------------------

SPECIAL_INPUTS = {
    "add --labels": ["add", "lab2", "--labels", "{}.npy"],
    "add --labels csv": ["add", "lab2", "--labels", "{}.csv"],
    "add --table": ["add", "tab", "--table", "{}.parquet"],
    "add --classes": ["add", "lab2", "--labels", "ok.npy", "--classes", "{}.txt"],
    "add --ids": ["add", "lab2", "--labels", "ok.npy", "--ids", "{}.json"],
    "import-votes json": ["overlay", "import-votes", "lab@original", "{}.json"],
    "import-votes csv": ["overlay", "import-votes", "lab@original", "{}.csv", "--format", "csv"],
    "import-labels real": [
        "overlay", "import-labels", "lab@original", "{}.json", "--format", "real",
    ],
    "import-labels counts": [
        "overlay", "import-labels", "lab@original", "{}.npy", "--format", "counts",
    ],
    "import-labels csv": ["overlay", "import-labels", "lab@original", "{}.csv", "--format", "csv"],
    "detect": ["detect", "lab@original", "--pred-probs", "{}.npy"],
    "eval": ["eval", "lab@original", "{}.npy"],
}  # fmt: skip


# A reader that waits on a pipe is stopped after this long, and one that reads a device without
# end stops at this much memory: the test then fails, and never hangs or starves the machine.
_TIMEOUT = 30
_MEMORY = 3 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY, _MEMORY))


def _fresh(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dsreg ARGS`` in a fresh Python process importing the dsreg these tests import."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(Path(dsreg.__file__).resolve().parents[1])
    code = "import sys; from dsreg.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=_TIMEOUT,
        preexec_fn=_limit_memory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a registry holding lab@original."""
    root = tmp_path_factory.mktemp("special")
    _labelled(root)
    return root


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
@pytest.mark.parametrize("use", sorted(SPECIAL_INPUTS))
def test_an_input_that_is_no_regular_file_is_named_and_never_read(
    plain: Path, use: str, kind: str
) -> None:
    TALLY["no regular file"] += 1
    args = [a.format(f"in-{kind}-{use.replace(' ', '-')}") for a in SPECIAL_INPUTS[use]]
    path = plain / next(a for a in args if a.startswith("in-"))
    if not path.exists() and not path.is_symlink():
        if kind == "fifo":
            os.mkfifo(path)  # nobody writes it: a reader that opens it waits forever
        elif kind == "device":
            path.symlink_to("/dev/zero")  # a reader of it never ends
        else:
            path.mkdir()
    before = _state(plain / ".dsreg")
    try:
        res = _fresh(args, plain)
    except subprocess.TimeoutExpired:
        pytest.fail(f"dsreg {' '.join(args)} read {kind} {path.name} without end")
    said = {"fifo": "a named pipe (FIFO)", "device": "a character device", "folder": "a folder"}
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    err = res.stderr.strip()
    assert err.startswith("Error: ") and "\n" not in err, err[-2000:]
    assert f"is {said[kind]}, not a regular file" in err, err
    assert _state(plain / ".dsreg") == before


@_settings(20)
@given(depth=DEPTHS, inline=st.booleans())
def test_a_config_toml_of_any_depth_is_refused_in_one_line(
    cli: Cli, reg: Path, depth: int, inline: bool
) -> None:
    """config.toml is TOML, not JSON, but nests the same way (tomllib recurses per level)."""
    config = reg / "config.toml"
    saved = config.read_bytes() if config.exists() else None
    opens, closes = ("{a = ", "}") if inline else ("[", "]")
    config.write_text(f"x = {opens * depth}1{closes * depth}\n")
    try:
        err = _outcome(cli, reg, "config.toml", "remote", "ls")
        if depth > 900:
            assert err is not None and "too deeply" in err, err
    finally:
        if saved is None:
            config.unlink()
        else:
            config.write_bytes(saved)
