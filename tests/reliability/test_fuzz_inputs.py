"""Every input file the command line reads, fuzzed with hypothesis (docs/concepts.md, "Exit
status" and "Guarantees").

Labels (.npy of any dtype, shape and bytes; CSV; Parquet), classes files, tables (--table),
votes (the label-errors MTurk JSON, and CSV), probabilities for ``detect``, predictions for
``eval``, ``config.toml`` and a checkout's pin file ``.dsreg.json``. Each example runs the
command line in-process (the ``cli`` fixture): the outcome is success, or exit 1 with
``Error: `` on stderr (after click's usage line, for an option value click cannot parse) and no
traceback, never another exit status; a refused command wrote nothing to the registry (files/,
refs/ and logs/ are as they were).

Example counts are kept moderate (``DSREG_FUZZ_EXAMPLES`` scales them); each test prints how
many examples it ran and how many of them were refused (``DSREG_FUZZ_DEBUG=1`` prints each
refusal's message).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import shutil
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
from hypothesis.extra import numpy as hnp

import dsreg

SCALE = float(os.environ.get("DSREG_FUZZ_EXAMPLES", "1"))
CLASSES = ("cat", "dog", "eel")
N = 9  # rows of the prepared dataset
LABELS = [0, 1, 2, 0, 1, 2, 0, 1, 1]
TALLY: Counter[str] = Counter()
NEW_TAGS = itertools.count()


def _settings(examples: int) -> Any:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if TALLY:
        print("\nfuzzed inputs (examples, refused):")
        for name in sorted({k.rsplit(":", 1)[0] for k in TALLY}):
            print(f"  {name}: {TALLY[name + ':run']} examples, {TALLY[name + ':refused']} refused")


CliResult = Any  # tests/conftest.py's CliResult: exit_code, stdout, stderr
Cli = Callable[..., CliResult]


def _state(reg: Path) -> dict[str, int]:
    """What a refused command must not change: every file under files/, refs/ and logs/."""
    out = {}
    for sub in ("files", "refs", "logs"):
        for p in (reg / sub).rglob("*") if (reg / sub).is_dir() else ():
            if p.is_file() and not p.name.startswith("."):  # logs/.<dataset>.lock
                out[p.relative_to(reg).as_posix()] = p.stat().st_size
    return out


def _run(cli: Cli, reg: Path, name: str, *args: str) -> CliResult:
    """Run ``dsreg ARGS``; success, or exit 1 with ``Error: `` and nothing written."""
    before = _state(reg)
    res = cli(*args)
    TALLY[name + ":run"] += 1
    assert res.exit_code in (0, 1), (args, res.exit_code, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, (args, res.stderr)
    if res.exit_code == 1:
        TALLY[name + ":refused"] += 1
        # A refusal, or click's usage message for an option value it cannot parse (exit 1 too:
        # docs/concepts.md, "Exit status").
        usage = res.stderr.startswith("Usage: ") and "\nError: " in res.stderr
        assert res.stderr.startswith("Error: ") or usage, (args, res.stderr)
        assert _state(reg) == before, (args, res.stderr, "a refused command wrote")
        if os.environ.get("DSREG_FUZZ_DEBUG"):
            print("REFUSED", name, res.stderr.strip()[:200])
    return res


@pytest.fixture
def reg(cli: Cli, tmp_path: Path) -> Path:
    """A registry holding lab@original: N label-only rows over CLASSES."""
    assert cli("init").exit_code == 0
    np.save(tmp_path / "ok.npy", np.array(LABELS))
    (tmp_path / "ok-classes.txt").write_text("\n".join(CLASSES) + "\n")
    res = cli(
        "add", "lab", "--labels", "ok.npy", "--classes", "ok-classes.txt", "--tag", "original"
    )
    assert res.exit_code == 0, res.stderr
    return tmp_path / ".dsreg"


# -- strategies -----------------------------------------------------------------------------------

DTYPES = [
    "i1",
    "i2",
    "i4",
    "i8",
    "u1",
    "u2",
    "u4",
    "u8",
    "f2",
    "f4",
    "f8",
    "c8",
    "?",
    "U3",
    "S2",
    "M8[s]",
    "m8[D]",
    "V4",
    [("a", "i4"), ("b", "f8")],
]


@st.composite
def npy_arrays(draw: st.DrawFn, max_rows: int = 12) -> np.ndarray:
    if draw(st.integers(0, 3)) == 0:  # plausible labels: 1-D integers, mostly in range
        dtype = draw(st.sampled_from(["i1", "i8", "u2", "u8"]))
        values = draw(
            st.lists(st.integers(0, 2) | st.integers(-1, 9), min_size=1, max_size=max_rows)
        )
        return np.array([v % 256 if dtype[0] == "u" else v for v in values], dtype=dtype)
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, max_rows), min_size=ndim, max_size=ndim)))
    if int(np.prod(shape)) > 200:
        shape = shape[:1]
    if dtype.kind == "V":
        return np.zeros(shape, dtype)
    return draw(hnp.arrays(dtype, shape))


def _damage(data: bytes, draw: st.DrawFn) -> bytes:
    """The bytes as they are, cut short, with bytes flipped, or with a header of lies."""
    how = draw(st.sampled_from(["keep"] * 6 + ["cut", "flip", "header"]))
    if how == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        b = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        return bytes(b)
    if how == "header":
        # A .npy header claiming another shape, dtype or order than the data holds.
        shape = draw(
            st.sampled_from(["(10**12,)", "(4, 5)", "()", "(-1,)", "(2**62, 2**62)", "(3,)", "'x'"])
        )
        descr = draw(st.sampled_from(["'<i8'", "'<f8'", "'|O'", "'<U9'", "'zz'", "[('a', '<i4')]"]))
        order = draw(st.sampled_from(["False", "True", "'no'"]))
        header = f"{{'descr': {descr}, 'fortran_order': {order}, 'shape': {shape}, }}"
        header = header.ljust(118) + "\n"
        return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    return data


@st.composite
def npy_bytes(draw: st.DrawFn, max_rows: int = 12) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    buf = io.BytesIO()
    np.save(buf, draw(npy_arrays(max_rows)), allow_pickle=False)
    return _damage(buf.getvalue(), draw)


CELLS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(-3, 12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "cat", "dog", "eel", "NA", "null", "nan", "-0", "1e400", "0x1", " 1"]),
    st.text(max_size=8),
)


@st.composite
def csv_text(draw: st.DrawFn, columns: list[str] | None = None) -> str:
    if columns is None and draw(st.integers(0, 3)) == 0:  # plausible: one label column
        values = draw(
            st.lists(st.sampled_from(["0", "1", "2", "cat", "dog", "eel"]), min_size=1, max_size=9)
        )
        return draw(st.sampled_from(["label\n", "label\n", ""])) + "\n".join(values) + "\n"
    if columns is None:
        names = ["label", "example_id", "x", "", "label "]
        columns = draw(st.lists(st.sampled_from(names) | st.text(max_size=5), max_size=4))
    rows = draw(
        st.lists(st.lists(CELLS, min_size=len(columns), max_size=len(columns) + 1), max_size=12)
    )
    out = io.StringIO()
    w = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n", "\r"])))
    if columns:
        w.writerow(columns)
    w.writerows(rows)
    return out.getvalue()


ARROW_TYPES = [
    pa.int8(),
    pa.int32(),
    pa.int64(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.bool_(),
    pa.null(),
    pa.binary(),
    pa.date32(),
    pa.timestamp("ms"),
    pa.list_(pa.int64()),
    pa.dictionary(pa.int8(), pa.string()),
    pa.decimal128(10, 2),
    pa.struct([("a", pa.int32())]),
]


@st.composite
def arrow_columns(draw: st.DrawFn, n: int) -> pa.Array:
    t = draw(st.sampled_from(ARROW_TYPES))
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if pa.types.is_integer(t):
        info = np.iinfo(t.to_pandas_dtype())
        small = st.integers(max(int(info.min), -2), 5)
        values: list[Any] = draw(
            st.lists(st.integers(int(info.min), int(info.max)) | small, min_size=n, max_size=n)
        )
    elif pa.types.is_floating(t):
        values = draw(st.lists(st.floats(width=32), min_size=n, max_size=n))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        values = draw(
            st.lists(
                st.sampled_from(
                    ["cat", "dog", "eel", "a/b", "../x", "/abs", "", ".", "x\\y", "a//b", "ok/1"]
                )
                | st.text(),
                min_size=n,
                max_size=n,
            )
        )
    elif t == pa.bool_():
        values = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    elif t == pa.binary():
        values = draw(st.lists(st.binary(max_size=6), min_size=n, max_size=n))
    elif pa.types.is_dictionary(t):
        return pa.array(
            draw(st.lists(st.sampled_from(["cat", "dog"]), min_size=n, max_size=n))
        ).dictionary_encode()
    elif pa.types.is_list(t):
        values = draw(st.lists(st.lists(st.integers(0, 3), max_size=3), min_size=n, max_size=n))
    elif pa.types.is_struct(t):
        values = [{"a": i} for i in range(n)]
    elif pa.types.is_decimal(t):
        import decimal

        values = [decimal.Decimal(i) for i in range(n)]
    elif t == pa.null():
        return pa.nulls(n)
    else:  # dates and timestamps
        values = list(range(n))
        return pa.array(values, pa.int32() if t == pa.date32() else pa.int64()).cast(t)
    return pa.array([None if z else v for v, z in zip(values, nulls, strict=True)], t)


@st.composite
def plausible_tables(draw: st.DrawFn) -> pa.Table:
    """Ids and labels that could become a snapshot, beside any other columns."""
    n = draw(st.integers(1, 8))
    ids = draw(
        st.lists(
            st.sampled_from(["cat", "a/b", "ok/1", "0", "1", "0/0", "x y", "ünï", "a" * 300])
            | st.text(min_size=1, max_size=5),
            min_size=n,
            max_size=n,
            unique=True,
        )
    )
    if draw(st.booleans()):
        labels = pa.array(draw(st.lists(st.sampled_from(CLASSES), min_size=n, max_size=n)))
    else:
        labels = pa.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), pa.int64())
    table = pa.table({"example_id": ids, "label": labels})
    for name in draw(
        st.lists(st.sampled_from(["x", "weight", "note", "row", "Score"]), max_size=2, unique=True)
    ):
        table = table.append_column(name, draw(arrow_columns(n)))
    return table


@st.composite
def arrow_tables(draw: st.DrawFn, must: tuple[str, ...] = ()) -> pa.Table:
    if must and draw(st.booleans()):
        return draw(plausible_tables())
    n = draw(st.integers(0, 10))
    names = draw(
        st.lists(
            st.sampled_from(
                ["label", "example_id", "x", "weight", "row", "__dsreg_v", "Label", "id", ""]
            )
            | st.text(max_size=4),
            max_size=4,
            unique=True,
        )
    )
    for m in must:
        if m not in names and draw(st.booleans()):
            names.append(m)
    cols = [draw(arrow_columns(n)) for _ in names]
    return pa.table(cols, names=names) if names else pa.table({})


def _write_table(path: Path, table: pa.Table) -> None:
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        import pyarrow.csv as pacsv

        try:
            pacsv.write_csv(table, path)
        except (pa.ArrowException, ValueError):
            path.write_text("")


# -- labels --------------------------------------------------------------------------------------


@_settings(100)
@given(data=npy_bytes(), with_classes=st.booleans())
def test_fuzzed_npy_labels(
    cli: Cli, reg: Path, tmp_path: Path, data: bytes, with_classes: bool
) -> None:
    (tmp_path / "f.npy").write_bytes(data)
    args = ["add", "fz", "--labels", "f.npy"]
    if with_classes:
        args += ["--classes", "ok-classes.txt"]
    _run(cli, reg, "labels .npy", *args)


@_settings(50)
@given(text=csv_text(), with_classes=st.booleans())
def test_fuzzed_csv_labels(
    cli: Cli, reg: Path, tmp_path: Path, text: str, with_classes: bool
) -> None:
    (tmp_path / "f.csv").write_text(text, encoding="utf-8", errors="surrogatepass")
    args = ["add", "fz", "--labels", "f.csv"] + (["--classes", "ok-classes.txt"] * with_classes)
    _run(cli, reg, "labels .csv", *args)


@_settings(50)
@given(table=arrow_tables(must=("label",)), with_classes=st.booleans())
def test_fuzzed_parquet_labels(
    cli: Cli, reg: Path, tmp_path: Path, table: pa.Table, with_classes: bool
) -> None:
    pq.write_table(table, tmp_path / "f.parquet")
    args = ["add", "fz", "--labels", "f.parquet"] + (["--classes", "ok-classes.txt"] * with_classes)
    _run(cli, reg, "labels .parquet", *args)


CLASS_LINES = st.one_of(
    st.sampled_from(
        [
            "cat",
            "dog",
            "eel",
            "",
            " ",
            "cat ",
            "a/b",
            "..",
            ".",
            "x\x00y",
            "\t",
            "ünï",
            "a" * 300,
            "CAT",
            "\u2028",
            "#",
        ]
    ),
    st.text(max_size=10),
)


@_settings(50)
@given(
    lines=st.lists(CLASS_LINES, max_size=6)
    | st.lists(st.text(min_size=1, max_size=6), min_size=3, max_size=4, unique=True),
    raw=st.none() | st.binary(max_size=40),
    ending=st.sampled_from(["\n", "\r\n", "\r", ""]),
)
def test_fuzzed_classes_files(
    cli: Cli, reg: Path, tmp_path: Path, lines: list[str], raw: bytes | None, ending: str
) -> None:
    data = raw if raw is not None else ending.join(lines).encode("utf-8", "surrogatepass")
    (tmp_path / "c.txt").write_bytes(data)
    _run(cli, reg, "classes files", "add", "fz", "--labels", "ok.npy", "--classes", "c.txt")


# -- tables --------------------------------------------------------------------------------------


@_settings(90)
@given(
    table=arrow_tables(must=("example_id", "label")),
    suffix=st.sampled_from([".parquet", ".csv"]),
    id_column=st.sampled_from(["example_id"] * 4 + ["x", "label"]),
    label_column=st.sampled_from(["label"] * 4 + ["x", "weight"]),
    with_files=st.booleans(),
)
def test_fuzzed_tables(
    cli: Cli,
    reg: Path,
    tmp_path: Path,
    table: pa.Table,
    suffix: str,
    id_column: str,
    label_column: str,
    with_files: bool,
) -> None:
    path = tmp_path / f"t{suffix}"
    _write_table(path, table)
    files = tmp_path / "payloads"
    if with_files and not files.exists():
        for rel in ("cat", "a/b", "ok/1", "0", "1"):
            (files / rel).parent.mkdir(parents=True, exist_ok=True)
            (files / rel).write_bytes(rel.encode())
    args = [
        "add",
        "fz",
        "--table",
        path.name,
        "--id-column",
        id_column,
        "--label-column",
        label_column,
    ] + (["--files", "payloads"] * with_files)
    _run(cli, reg, "tables", *args)


# -- votes ---------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
MTURK_KEYS = ["given", "guessed", "both", "neither", "neutral", "off-topic", "positive", "x"]


@st.composite
def vote_records(draw: st.DrawFn) -> list[Any]:
    """Records of the label-errors format, each field kept, dropped or replaced by any JSON."""
    out: list[Any] = []
    if draw(st.integers(0, 2)) == 0:  # plausible: records that fit the snapshot
        for row in draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=5, unique=True)):
            given = LABELS[row]
            out.append(
                {
                    "id": row,
                    "given_original_label": draw(st.sampled_from([given, CLASSES[given]])),
                    "our_guessed_label": draw(st.integers(0, 2)),
                    "mturk": {
                        "given": draw(st.integers(0, 5)),
                        "guessed": draw(st.integers(0, 5)),
                        "both": draw(st.integers(0, 2)),
                    },
                }
            )
        return out
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(JSON))
            continue
        given = draw(st.integers(0, 2) | st.sampled_from(["cat", "Dog", "eel", "zebra", -1, 3]))
        record: dict[str, Any] = {
            "id": draw(st.integers(-2, N + 1) | st.sampled_from(["3", "x", "0", None, 1.5])),
            "url": draw(
                st.sampled_from(
                    [
                        None,
                        "https://labelerrors.com/static/lab/3.png",
                        "https://x/static/a/b/../../c",
                        "",
                        7,
                    ]
                )
            ),
            "given_original_label": given,
            "our_guessed_label": draw(st.integers(-1, 3) | st.sampled_from(["cat", "dog", None])),
            "mturk": {
                k: draw(st.integers(-1, 6) | st.sampled_from([2**40, 1.0, "3", None, True]))
                for k in draw(st.lists(st.sampled_from(MTURK_KEYS), max_size=5, unique=True))
            },
        }
        for key in list(record):
            roll = draw(st.integers(0, 11))
            if roll == 0:
                del record[key]
            elif roll == 1:
                record[key] = draw(JSON)
        out.append(record)
    return out


@_settings(100)
@given(
    votes=vote_records() | vote_records() | JSON,
    fault=st.sampled_from(["none"] * 6 + ["threshold", "bytes", "text"]),
    data=st.data(),
)
def test_fuzzed_votes_json(
    cli: Cli, reg: Path, tmp_path: Path, votes: Any, fault: str, data: st.DataObject
) -> None:
    raw = json.dumps(votes).encode()
    if fault == "bytes":
        raw = data.draw(st.binary(max_size=30))
    elif fault == "text":
        raw = raw[: data.draw(st.integers(0, len(raw)))] + data.draw(st.text(max_size=5)).encode()
    (tmp_path / "v.json").write_bytes(raw)
    threshold = "3"
    if fault == "threshold":
        threshold = data.draw(st.sampled_from(["1", "0", "-2", "99", "2.5", "x"]))
    _run(
        cli,
        reg,
        "votes json",
        "overlay",
        "import-votes",
        "lab@original",
        "v.json",
        "--threshold",
        threshold,
    )


VOTES_HEADER = [
    "example_id",
    "given_label",
    "suggested_label",
    "given",
    "guessed",
    "both",
    "neither",
]


@st.composite
def votes_csv(draw: st.DrawFn) -> str:
    """Rows that fit the snapshot, a few cells replaced by anything."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(VOTES_HEADER)
    for row in draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=5, unique=True)):
        given = LABELS[row]
        cells = [
            str(row),
            draw(st.sampled_from([str(given), CLASSES[given]])),
            draw(st.sampled_from(CLASSES)),
            str(draw(st.integers(0, 5))),
            str(draw(st.integers(0, 5))),
            draw(st.sampled_from(["", "0", "1"])),
            draw(st.sampled_from(["", "0", "2"])),
        ]
        if draw(st.integers(0, 3)) == 0:
            cells[draw(st.integers(0, len(cells) - 1))] = draw(CELLS)
        w.writerow(cells)
    return out.getvalue()


@_settings(50)
@given(text=votes_csv() | votes_csv() | csv_text(columns=VOTES_HEADER) | csv_text())
def test_fuzzed_votes_csv(cli: Cli, reg: Path, tmp_path: Path, text: str) -> None:
    (tmp_path / "v.csv").write_text(text, encoding="utf-8", errors="surrogatepass")
    _run(
        cli, reg, "votes csv", "overlay", "import-votes", "lab@original", "v.csv", "--format", "csv"
    )


# -- probabilities and predictions ---------------------------------------------------------------

SPECIAL = st.sampled_from([np.nan, np.inf, -np.inf, -0.5, 0.0, 1.0, 2.0, 1e-300, 1e300])
# One fault per example (or none), so that each is met on its own, next to inputs that work.
FAULTS = ["none"] * 4 + ["rows", "classes", "dtype", "values", "shape", "bytes", "format", "option"]


@st.composite
def prob_arrays(draw: st.DrawFn, fault: str) -> np.ndarray:
    """An (N, 3) row-stochastic matrix, with the fault drawn."""
    rows = draw(st.sampled_from([0, 1, N - 1, N + 1])) if fault == "rows" else N
    k = draw(st.sampled_from([0, 1, 2, 4])) if fault == "classes" else len(CLASSES)
    dtype = draw(st.sampled_from(["f4", "f2", "i8", "?", "u1", "O"])) if fault == "dtype" else "f8"
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random((rows, k))
    arr = raw / np.maximum(raw.sum(axis=1, keepdims=True), 1e-12)
    if fault == "values":
        for _ in range(draw(st.integers(1, 3))):
            if arr.size:
                arr.flat[draw(st.integers(0, arr.size - 1))] = draw(SPECIAL)
    if fault == "shape":
        arr = draw(st.sampled_from([arr.reshape(-1), arr[..., None], arr[None], np.float64(0.5)]))
    if dtype == "O":
        return np.asarray(arr).astype(object)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(arr).astype(dtype)


def _write_matrix(
    path: Path, arr: np.ndarray, draw: st.DrawFn, *, fault: str, rows: str = "none"
) -> None:
    """``arr`` as .npy, or as a table with one column per class (named by the class, or not)
    and a 'row' or 'example_id' column (``rows``: none, row, example_id, any)."""
    if path.suffix == ".npy":
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=arr.dtype == object)
        path.write_bytes(_damage(buf.getvalue(), draw) if fault == "bytes" else buf.getvalue())
        return
    if arr.ndim == 1:
        cols = {"pred": arr}
    else:
        two = (
            arr.reshape(arr.shape[0], int(np.prod(arr.shape[1:])))
            if arr.ndim
            else arr.reshape(1, 1)
        )
        named = fault != "format" or draw(st.booleans())
        cols = {
            (CLASSES[j] if named and j < 3 else f"c{j}"): two[:, j] for j in range(two.shape[1])
        }
    n = len(next(iter(cols.values()))) if cols else 0
    if rows == "row" or (rows == "any" and draw(st.booleans())):
        cols["row"] = np.arange(n) if fault != "rows" else np.arange(n)[::-1] - 1
    elif rows == "example_id":
        cols["example_id"] = np.array([str(i) for i in range(n)])
    table = pa.table(
        {k: pa.array(v.astype(float) if v.dtype == object else v) for k, v in cols.items()}
    )
    if fault == "format" and draw(st.booleans()):
        table = table.append_column("model", pa.array((["m1", "m2"] * n)[:n]))
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        _write_table(path, table)
    if fault == "bytes":
        path.write_bytes(_damage(path.read_bytes(), draw))


@_settings(80)
@given(fault=st.sampled_from(FAULTS), data=st.data())
def test_fuzzed_pred_probs_for_detect(
    cli: Cli, reg: Path, tmp_path: Path, fault: str, data: st.DataObject
) -> None:
    draw = data.draw
    suffix = draw(st.sampled_from([".npy", ".npy", ".parquet"]))
    if fault == "format":
        suffix = draw(st.sampled_from([".csv", ".parquet", ".txt"]))
    path = tmp_path / f"probs{suffix}"
    _write_matrix(path, draw(prob_arrays(fault)), draw, fault=fault)
    args = [
        "detect",
        "lab@original",
        "--pred-probs",
        path.name,
        "--filter-by",
        draw(
            st.sampled_from(
                [
                    "prune_by_noise_rate",
                    "both",
                    "prune_by_class",
                    "confident_learning",
                    "predicted_neq_given",
                    "low_normalized_margin",
                    "low_self_confidence",
                ]
            )
        ),
        "--rank-by",
        draw(
            st.sampled_from(["self_confidence", "normalized_margin", "confidence_weighted_entropy"])
        ),
    ]
    if fault == "option":
        args += draw(
            st.sampled_from(
                [
                    ["--frac-noise", "0"],
                    ["--frac-noise", "-1"],
                    ["--frac-noise", "nan"],
                    ["--frac-noise", "inf"],
                    ["--frac-noise", "2"],
                    ["--frac-noise", "1e-9"],
                    ["--num-to-remove-per-class", "1,1,1"],
                    ["--num-to-remove-per-class", "1"],
                    ["--num-to-remove-per-class", "-1,0,0"],
                    ["--num-to-remove-per-class", "a,b"],
                    ["--num-to-remove-per-class", ""],
                    ["--num-to-remove-per-class", "99,99,99"],
                    ["--min-examples-per-class", "-5"],
                    ["--min-examples-per-class", "100"],
                    ["--filter-by", "nope"],
                    ["--rank-by", "nope"],
                    ["--top", "-1"],
                    ["--top", "0"],
                    ["--view", "honeypot", "--tag", "new"],
                    ["--view", "cleaned"],
                ]
            )
        )
    if "new" in args:  # a new tag each time: one that exists is refused only after the overlay
        # is stored (test_a_refused_tag_option_writes_nothing)
        args[args.index("new")] = f"new{next(NEW_TAGS)}"
    _run(cli, reg, "probabilities (detect)", *args)


def _overlay_args(command: str, tmp_path: Path) -> list[str]:
    """``dsreg COMMAND`` making an overlay of lab@original from a valid input file."""
    if command == "detect":
        raw = np.random.default_rng(0).random((N, len(CLASSES)))
        np.save(tmp_path / "p.npy", raw / raw.sum(axis=1, keepdims=True))
        return ["detect", "lab@original", "--pred-probs", "p.npy"]
    if command == "import-votes":
        votes = [
            {
                "id": 1,
                "given_original_label": 1,
                "our_guessed_label": 2,
                "mturk": {"given": 0, "guessed": 4},
            }
        ]
        (tmp_path / "v.json").write_text(json.dumps(votes))
        return ["overlay", "import-votes", "lab@original", "v.json"]
    (tmp_path / "mine.csv").write_text("row,suggested_label\n1,eel\n")
    return ["overlay", "import-labels", "lab@original", "mine.csv", "--format", "csv"]


COMMANDS = ["detect", "import-votes", "import-labels"]


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--tag", "Bad Name"], id="invalid-tag-name"),
        pytest.param(["--tag", "ok", "--view", "nope"], id="invalid-view"),
        pytest.param(["--tag", "original"], id="tag-exists"),
        pytest.param(["--view", "cleaned"], id="view-without-tag"),
    ],
)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_refused_tag_option_writes_nothing(
    cli: Cli, reg: Path, tmp_path: Path, command: str, options: list[str]
) -> None:
    """An overlay command refused for its --tag or --view stores no overlay and logs nothing
    (found by test_fuzzed_pred_probs_for_detect): an existing tag is refused before the work."""
    args = _overlay_args(command, tmp_path)
    before = _state(reg)
    res = cli(*args, *options)
    assert res.exit_code == 1 and res.stderr.startswith("Error: "), res.stderr
    assert _state(reg) == before, "a refused command wrote"
    if "original" in options:
        assert "tag lab@original exists" in res.stderr and "--force" in res.stderr, res.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_an_existing_tag_is_refused_unless_a_rerun_or_forced(
    cli: Cli, reg: Path, tmp_path: Path, command: str
) -> None:
    """The same command run again with the same --tag is a no-op; a tag naming something else
    (here a revision with an overlay of another command) is refused before any work, and
    --force moves it."""
    args = _overlay_args(command, tmp_path)
    first = cli(*args, "--tag", "fixed")
    assert first.exit_code == 0, first.stderr
    again = cli(*args, "--tag", "fixed", "--json")
    assert again.exit_code == 0, again.stderr
    other = "import-labels" if command != "import-labels" else "import-votes"
    assert cli(*_overlay_args(other, tmp_path), "--tag", "theirs").exit_code == 0
    before = _state(reg)
    refused = cli(*args, "--tag", "theirs")
    assert refused.exit_code == 1, refused.stderr
    assert "tag lab@theirs exists" in refused.stderr and "--force" in refused.stderr
    assert _state(reg) == before, "a refused command wrote"
    forced = cli(*args, "--tag", "theirs", "--force", "--json")
    assert forced.exit_code == 0, forced.stderr
    theirs = dsreg.show("lab@theirs", registry=reg).revision
    assert theirs == dsreg.show("lab@fixed", registry=reg).revision
    assert json.loads(again.stdout)["overlay"] == json.loads(forced.stdout)["overlay"]


@st.composite
def prediction_arrays(draw: st.DrawFn, fault: str) -> np.ndarray:
    """Probabilities (as for detect), or predicted labels: indices or class names."""
    if draw(st.booleans()):
        return draw(prob_arrays(fault))
    rows = draw(st.sampled_from([0, 1, N - 1, N + 1])) if fault == "rows" else N
    kind = draw(st.sampled_from(["int", "str"]))
    if fault == "dtype":
        kind = draw(st.sampled_from(["float", "bool", "object", "bytes"]))
    if fault == "values":
        values = draw(
            st.lists(
                st.integers(-2, 4)
                | st.integers(-(2**63), 2**63 - 1)
                | st.sampled_from(["emu", "", "CAT"]),
                min_size=rows,
                max_size=rows,
            )
        )
        return (
            np.array([str(v) for v in values])
            if kind == "str"
            else np.array([v if isinstance(v, int) else -1 for v in values], dtype=np.int64)
        )
    labels = draw(st.lists(st.integers(0, 2), min_size=rows, max_size=rows))
    if kind == "int":
        return np.array(labels, dtype=np.int64)
    if kind == "str":
        return np.array([CLASSES[v] for v in labels])
    if kind == "float":
        return np.array(labels, dtype=float)
    if kind == "bool":
        return np.array(labels, dtype=bool)
    if kind == "bytes":
        return np.array([CLASSES[v].encode() for v in labels])
    return np.array(labels, dtype=object)


@_settings(80)
@given(fault=st.sampled_from(FAULTS), data=st.data())
def test_fuzzed_predictions_for_eval(
    cli: Cli, reg: Path, tmp_path: Path, fault: str, data: st.DataObject
) -> None:
    draw = data.draw
    suffix = draw(st.sampled_from([".npy", ".npy", ".parquet", ".csv"]))
    if fault == "format":
        suffix = draw(st.sampled_from([".csv", ".parquet", ".txt", ".json"]))
    path = tmp_path / f"model{suffix}"
    rows = "row" if fault == "none" else draw(st.sampled_from(["row", "example_id", "any"]))
    _write_matrix(path, draw(prediction_arrays(fault)), draw, fault=fault, rows=rows)
    args = ["eval", "lab@original", path.name]
    if fault == "option":
        args += draw(
            st.sampled_from(
                [
                    ["--top-k", "1,2"],
                    ["--top-k", "0"],
                    ["--top-k", "5"],
                    ["--top-k", "x"],
                    ["--top-k", "-1"],
                    ["--top-k", "1,1"],
                    ["--views", "nope"],
                    ["--views", ""],
                    ["--views", "original"],
                    ["--views", "honeypot,honeypot"],
                    ["--plot", "x.gif"],
                ]
            )
        )
    before = _state(reg)
    _run(cli, reg, "predictions (eval)", *args)
    assert _state(reg) == before  # eval writes nothing, ever


# -- config.toml and the pin file ----------------------------------------------------------------

TOML_VALUES = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        [
            "hardlink",
            "copy",
            "nope",
            "90d",
            "now",
            "never",
            "999999999w",
            "0s",
            "origin",
            "/tmp/x",
            "",
            "s3://b/p",
            "https://u:p@h/x",
        ]
    ),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is a JSON string
    if isinstance(v, float):
        return repr(v) if "e" in repr(v) or "." in repr(v) else repr(v) + ".0"
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


@st.composite
def config_texts(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=60))
    sections = draw(
        st.lists(
            st.sampled_from(
                ["core", "gc", "remote.origin", "remote.Bad", "remote", "other", "core.x"]
            ),
            max_size=3,
            unique=True,
        )
    )
    keys = ["remote", "checkout_link", "jobs", "log_expiry", "url", "x", "region"]
    out = []
    for s in sections:
        out.append(f"[{s}]")
        for k in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
            out.append(f"{k} = {_toml_value(draw(TOML_VALUES))}")
    return "\n".join(out).encode() + b"\n"


@_settings(50)
@given(text=config_texts(), data=st.data())
def test_fuzzed_config_toml(
    cli: Cli, reg: Path, tmp_path: Path, text: bytes, data: st.DataObject
) -> None:
    saved = (reg / "config.toml").read_bytes()
    (reg / "config.toml").write_bytes(text)
    try:
        target = tmp_path / "co"
        shutil.rmtree(target, ignore_errors=True)
        command = data.draw(
            st.sampled_from(
                [
                    ("ls",),
                    ("remote", "ls"),
                    ("gc", "--dry-run"),
                    ("gc",),
                    ("checkout", "lab@original", "co"),
                    ("add", "fz", "--labels", "ok.npy", "--tag", "t"),
                    ("push",),
                    ("tag", "lab@again", "lab@original"),
                    ("verify",),
                ]
            )
        )
        _run(cli, reg, "config.toml", *command)
    finally:
        (reg / "config.toml").write_bytes(saved)


PIN_FIELDS = [
    "schema",
    "revision",
    "dataset",
    "spec",
    "snapshot",
    "view",
    "layout",
    "link",
    "files",
    "extra",
]


@st.composite
def pins(draw: st.DrawFn, good: dict[str, Any], lies: dict[str, list[Any]]) -> bytes:
    """A pin: the real one; one that keeps to the schema but lies (another revision, dataset,
    layout, view, link or count); the real one with fields dropped, replaced or added; any
    JSON; any bytes."""
    roll = draw(st.integers(0, 9))
    if roll == 0:
        return draw(st.binary(max_size=40))
    if roll == 1:
        return json.dumps(draw(JSON)).encode()
    pin = dict(good)
    if roll in (2, 3):
        return json.dumps(pin).encode()
    if roll in (4, 5, 6):
        for key in draw(
            st.lists(st.sampled_from(sorted(lies)), min_size=1, max_size=3, unique=True)
        ):
            pin[key] = draw(st.sampled_from(lies[key]))
        return json.dumps(pin).encode()
    for key in draw(st.lists(st.sampled_from(PIN_FIELDS), max_size=4, unique=True)):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            pin.pop(key, None)
        else:
            pin[key] = draw(
                JSON
                | st.sampled_from(
                    [
                        "blake3:" + "0" * 64,
                        good["snapshot"],
                        good["revision"],
                        "lab",
                        "other",
                        "cleaned",
                        "files",
                        "imagefolder",
                        "symlink",
                        -1,
                        10**30,
                    ]
                )
            )
    return json.dumps(pin).encode()


@pytest.fixture
def checked_out(cli: Cli, reg: Path, tmp_path: Path) -> dict[str, Any]:
    """pics@original and pics@other (an ImageFolder dataset), pics@original checked out."""
    for c in ("a", "b"):
        for i in range(2):
            p = tmp_path / "pics" / c / f"{i}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f"{c}{i}".encode())
    assert cli("add", "pics", "pics", "--tag", "original").exit_code == 0
    (tmp_path / "pics" / "a" / "new.bin").write_bytes(b"new")
    assert cli("add", "pics", "pics", "--tag", "other").exit_code == 0
    assert cli("checkout", "pics@original", "co", "--link", "copy").exit_code == 0
    good = json.loads((tmp_path / "co" / ".dsreg.json").read_text())
    other = {t.tag: t.revision for t in dsreg.ls(registry=reg) if t.dataset == "pics"}["other"]
    lab = dsreg.open("lab@original", registry=reg)
    zero = "blake3:" + "0" * 64
    lies = {
        "revision": [other, lab.digest, zero, good["snapshot"]],
        "snapshot": [lab.snapshot_digest, zero, good["revision"]],
        "dataset": ["lab", "other", "pics"],
        "spec": ["lab@original", "pics@other", "", "x@y@z"],
        "view": ["cleaned", "honeypot"],
        "layout": ["files", "labels"],
        "link": ["symlink", "hardlink", "reflink"],
        "files": [0, 1, 10**9],
    }
    return {"good": good, "lies": lies}


@_settings(70)
@given(data=st.data())
def test_fuzzed_pin_files(
    cli: Cli, reg: Path, tmp_path: Path, checked_out: dict[str, Any], data: st.DataObject
) -> None:
    co = tmp_path / "co"
    keep = tmp_path / "keep.txt"
    keep.write_text("the user's own file, beside the checkout")
    if not co.is_dir():
        assert cli("checkout", "pics@original", "co", "--link", "copy").exit_code == 0
    (co / ".dsreg.json").write_bytes(data.draw(pins(checked_out["good"], checked_out["lies"])))
    spec = data.draw(st.sampled_from(["pics@original", "pics@other", "lab@original"]))
    res = _run(cli, reg, "pin files", "checkout", spec, "co", "--link", "copy")
    assert keep.read_text() == "the user's own file, beside the checkout"
    if res.exit_code == 0:
        assert json.loads((co / ".dsreg.json").read_text())["spec"] == spec
    else:
        # A refused switch leaves the folder as a checkout of something, to be fixed or removed.
        shutil.rmtree(co)


# -- what the fuzzing found, kept as plain cases -------------------------------------------------


def _npy_header(header: str, data: bytes = b"") -> bytes:
    header = header.ljust(117) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data


def _damaged_parquet() -> bytes:
    raw = np.random.default_rng(0).random((N, len(CLASSES)))
    buf = io.BytesIO()
    pq.write_table(pa.table({c: raw[:, j] for j, c in enumerate(CLASSES)}), buf)
    data = bytearray(buf.getvalue())
    data[10] ^= 0xFF  # inside the first data page's header
    return bytes(data)


FOUND = {
    # numpy re-tokenizes a damaged version 1 header: tokenize.TokenError, not a ValueError
    "npy-header-tokens": (
        "x.npy",
        _npy_header("\x00'descr': '|i1', 'fortran_order': False, 'shape': (), }", b"\x00"),
    ),
    # a header claiming 10**12 rows: numpy allocated 7 TiB before reading (MemoryError)
    "npy-header-huge": (
        "x.npy",
        _npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000000,), }"),
    ),
    "npy-empty-file": ("x.npy", b""),  # EOFError: click's "Aborted." for eval
    "csv-header-not-utf8": ("x.csv", b"\x93ab,label\n1,0\n"),  # UnicodeDecodeError
    "parquet-damaged-page": ("x.parquet", _damaged_parquet()),  # OSError on reading a page
}


@pytest.mark.parametrize("found", sorted(FOUND))
@pytest.mark.parametrize("command", ["add --labels", "add --table", "detect", "eval"])
def test_what_fuzzing_found_is_refused_clearly(
    cli: Cli, reg: Path, tmp_path: Path, command: str, found: str
) -> None:
    name, data = FOUND[found]
    (tmp_path / name).write_bytes(data)
    args = {
        "add --labels": ["add", "fz", "--labels", name],
        "add --table": ["add", "fz", "--table", name, "--id-column", "ab"],
        "detect": ["detect", "lab@original", "--pred-probs", name],
        "eval": ["eval", "lab@original", name],
    }[command]
    res = _run(cli, reg, "found", *args)
    assert res.exit_code == 1, res.stdout


@pytest.mark.parametrize(
    ("table", "args"),
    [
        # two columns of one name: a KeyError from pyarrow
        ("label,label\n0,1\n", ["--labels", "t.csv"]),
        ("example_id,label,label\na,0,1\n", ["--table", "t.csv"]),
        # --id-column and --label-column naming one column: pyarrow's "Invalid column index"
        ("example_id,label\na,0\n", ["--table", "t.csv", "--id-column", "label"]),
        # ids of a type that is not text: ArrowNotImplementedError
        (pa.table({"example_id": [[1], [2]], "label": [0, 1]}), ["--table", "t.parquet"]),
        # --files holds a file where an id names a folder: NotADirectoryError
        ("example_id,label\n0/0,0\n", ["--table", "t.csv", "--files", "payloads"]),
        # an id longer than a file name may be: OSError (ENAMETOOLONG)
        (f"example_id,label\n{'a' * 300},0\n", ["--table", "t.csv", "--files", "payloads"]),
    ],
    ids=[
        "duplicate-label-columns",
        "duplicate-table-columns",
        "same-id-and-label-column",
        "list-ids",
        "file-as-folder",
        "long-id",
    ],
)
def test_what_fuzzing_found_in_tables_is_refused_clearly(
    cli: Cli, reg: Path, tmp_path: Path, table: str | pa.Table, args: list[str]
) -> None:
    (tmp_path / "payloads").mkdir()
    (tmp_path / "payloads" / "0").write_bytes(b"a file, not a folder")
    if isinstance(table, str):
        (tmp_path / "t.csv").write_text(table)
    else:
        pq.write_table(table, tmp_path / "t.parquet")
    res = _run(cli, reg, "found", "add", "fz", *args)
    assert res.exit_code == 1, res.stdout
