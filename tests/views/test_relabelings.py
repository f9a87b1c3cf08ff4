"""Relabelings served by every loader: the recipes of docs/relabelings.md (label-errors votes,
ImageNet-ReaL label sets, CIFAR-10H counts), run on small files in the published formats,
give revisions whose SQL view, ``labels()``, pandas, polars, Hugging Face and torch records
carry the raters' label sets and counts, row for row equal; ``dsreg export`` writes them in
every format and they read back the same."""

from __future__ import annotations

import csv
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import Registry
from dsreg.views.loaders import rated_array

polars = pytest.importorskip(
    "polars", reason="to_polars needs polars (pip install 'dsreg[polars]')"
)
pytest.importorskip("pandas", reason="to_pandas needs pandas")
pytest.importorskip("datasets", reason="to_hf needs datasets")
torch = pytest.importorskip("torch", reason="to_torch needs torch")

RECIPES = ("votes", "real", "counts")
DATA = Path("/work/shared/data")


@dataclass(frozen=True, slots=True)
class Relabeling:
    """A drawn snapshot and one relabeling file's contents, in the recipe's format."""

    recipe: str
    k: int
    labels: list[int]  # the snapshot's given labels
    votes: list[tuple[int, int, dict[str, int]]]  # label-errors: (row, guessed, mturk counts)
    sets: list[list[int]]  # ReaL: one list of classes per row
    counts: list[list[int]]  # CIFAR-10H: n x k rater counts


@st.composite
def relabelings(draw: st.DrawFn) -> Relabeling:
    recipe = draw(st.sampled_from(RECIPES))
    k = draw(st.integers(2, 5), label="classes")
    n = draw(st.integers(1, 12), label="rows")
    cls = st.integers(0, k - 1)
    labels = draw(st.lists(cls, min_size=n, max_size=n))
    votes: list[tuple[int, int, dict[str, int]]] = []
    sets: list[list[int]] = []
    counts: list[list[int]] = []
    if recipe == "votes":
        for row in sorted(draw(st.sets(st.integers(0, n - 1), min_size=1))):
            split = draw(st.lists(st.integers(0, 3), min_size=5, max_size=5))
            mturk = {
                f: split.count(i) for i, f in enumerate(("given", "guessed", "both", "neither"))
            }
            guessed = (labels[row] + draw(st.integers(1, k - 1))) % k  # never the given label
            votes.append((row, guessed, mturk))
    elif recipe == "real":
        sets = draw(st.lists(st.lists(cls, unique=True, max_size=k), min_size=n, max_size=n))
    else:  # a row nobody rated (all zero) is left out of the overlay
        row = st.lists(st.integers(0, 9), min_size=k, max_size=k)
        counts = draw(st.lists(row, min_size=n, max_size=n))
    return Relabeling(recipe, k, labels, votes, sets, counts)


def run_recipe(root: Path, case: Relabeling) -> tuple[Registry, str]:
    """The recipe's commands on ``case``'s files: the snapshot, the overlay, the tag."""
    reg = dsreg.init(registry=root / "reg")
    np.save(root / "labels.npy", np.asarray(case.labels, np.int64))
    classes = [f"c<{i}>&" for i in range(case.k)]  # names HTML and CSV must keep as they are
    dsreg.add("ds", labels=root / "labels.npy", classes=classes, tag="original", registry=reg)
    if case.recipe == "votes":
        records = [
            {"id": r, "given_original_label": case.labels[r], "our_guessed_label": g, "mturk": m}
            for r, g, m in case.votes
        ]
        (root / "mturk.json").write_text(json.dumps(records))
        dsreg.import_votes("ds@original", root / "mturk.json", threshold=3, tag="validated",
                           view="cleaned", registry=reg)  # fmt: skip
        dsreg.tag("ds@validated-multilabel", "ds@validated", view="multilabel", registry=reg)
        return reg, "ds@validated-multilabel"
    if case.recipe == "real":
        (root / "real.json").write_text(json.dumps(case.sets))
        dsreg.import_labels("ds@original", root / "real.json", format="real", tag="real",
                            view="multilabel", registry=reg)  # fmt: skip
        return reg, "ds@real"
    np.save(root / "counts.npy", np.asarray(case.counts, np.int64))
    dsreg.import_labels("ds@original", root / "counts.npy", format="counts", tag="cifar10h",
                        view="corrected", registry=reg)  # fmt: skip
    return reg, "ds@cifar10h"


def expected(case: Relabeling, row: int) -> dict[str, Any]:
    """What the relabeling file says of snapshot row ``row``, as the view serves it."""
    if case.recipe == "real":
        return {"labels": case.sets[row]}
    if case.recipe == "counts":
        return {"label_counts": case.counts[row] if sum(case.counts[row]) else None}
    return {}


def sql_columns(ds: dsreg.Dataset, names: list[str]) -> dict[str, list[Any]]:
    cols = ", ".join(['"row"', *names])
    got = ds.sql(f"SELECT {cols} FROM this ORDER BY row")
    return {name: got.column(name).to_pylist() for name in ["row", *names]}


def loader_columns(ds: dsreg.Dataset, names: list[str], cache: Path) -> dict[str, dict[str, Any]]:
    """Each loader's ``row`` and ``names`` columns, as Python lists."""
    out: dict[str, dict[str, Any]] = {"sql": sql_columns(ds, names)}
    table = ds.labels()
    out["labels()"] = {n: table.column(n).to_pylist() for n in ["row", *names]}
    batches = pa.Table.from_batches(list(ds.iter_batches(3)), schema=table.schema)
    out["iter_batches"] = {n: batches.column(n).to_pylist() for n in ["row", *names]}
    frame = ds.to_pandas()
    out["pandas"] = {
        n: [None if v is None else [int(x) for x in v] for v in frame[n]] if n != "row" else
        frame[n].tolist() for n in ["row", *names]
    }  # fmt: skip
    pl_frame = ds.to_polars()
    out["polars"] = {n: pl_frame[n].to_list() for n in ["row", *names]}
    hf = ds.to_hf(cache_dir=cache)
    out["hf"] = {n: hf[n] for n in ["row", *names]}
    return out


@settings(max_examples=30, deadline=None)
@given(case=relabelings())
def test_every_recipe_serves_its_relabeling_alike_in_every_loader(case: Relabeling) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reg, spec = run_recipe(root, case)
        ds = dsreg.open(spec, registry=reg)
        names = [n for n in ("labels", "label_counts") if n in ds.labels().column_names]
        # ReaL and votes: the multilabel view's sets; CIFAR-10H: the counts, when anyone rated.
        rated = any(sum(row) for row in case.counts)
        want_names = {"real": ["labels"], "counts": ["label_counts"] * rated, "votes": ["labels"]}
        assert names == want_names[case.recipe]
        got = loader_columns(ds, names, root / "hf-cache")
        reference = got["sql"]
        for loader, columns in got.items():
            assert columns == reference, loader
        rows = reference["row"]
        for name in names:
            for row, value in zip(rows, reference[name], strict=True):
                if name in expected(case, row):
                    assert value == expected(case, row)[name], (name, row)
        # torch: the same, as the arrays a model reads (-1 throughout where a row has none).
        tds = ds.to_torch(target=("label", *names))
        assert len(tds) == len(rows)
        for name_at, name in enumerate(names, start=1):
            dense = rated_array(name, pa.array(reference[name], pa.list_(pa.int32())), case.k)
            for i in range(len(tds)):
                assert tds[i][1][name_at].tolist() == dense[i].tolist(), (name, i)
        check_exports(ds, root, reg, spec, names, reference)


def check_exports(
    ds: dsreg.Dataset,
    root: Path,
    reg: Registry,
    spec: str,
    names: list[str],
    reference: dict[str, list[Any]],
) -> None:
    """Every export format, snapshot-aligned, reads back the view's lists (null: none)."""
    n = ds.snapshot.rows
    full: dict[str, list[Any]] = {name: [None] * n for name in names}
    for name in names:
        for row, value in zip(reference["row"], reference[name], strict=True):
            full[name][row] = value
    for fmt in ("npy", "csv", "parquet", "jsonl"):
        out = root / f"out.{fmt}"
        res = dsreg.export(spec, out, registry=reg)
        assert res.columns == tuple(names)
        if fmt == "npy":
            assert [Path(p).name for p in res.beside] == [f"out.{name}.npy" for name in names]
            for name in names:
                array = np.load(root / f"out.{name}.npy")
                want = rated_array(name, pa.array(full[name], pa.list_(pa.int32())), ds_k(ds))
                assert array.tolist() == want.tolist(), name
            continue
        back = read_back(out, fmt)
        for name in names:
            assert back[name] == full[name], (fmt, name)


def ds_k(ds: dsreg.Dataset) -> int:
    return len(ds.classes)


def read_back(path: Path, fmt: str) -> dict[str, list[Any]]:
    """An exported file's list columns, as Python lists (CSV: ``;``-joined, ``[]`` empty)."""
    if fmt == "parquet":
        return pq.read_table(path).to_pydict()
    if fmt == "jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return {key: [r[key] for r in rows] for key in rows[0]} if rows else {}
    with path.open(newline="") as f:
        records = list(csv.DictReader(f))

    def cell(text: str) -> list[int] | None:
        if text == "":
            return None
        return [] if text == "[]" else [int(x) for x in text.split(";")]

    return {
        key: [cell(r[key]) for r in records]
        for key in ("labels", "label_counts")
        if records and key in records[0]
    }


def test_a_revision_without_relabelings_keeps_its_columns(tmp_path: Path) -> None:
    """Votes in the cleaned view (no label sets, no counts): the columns of before."""
    case = Relabeling("votes", 3, [0, 1, 2], [(1, 0, {"given": 0, "guessed": 5})], [], [])
    reg, _ = run_recipe(tmp_path, case)
    ds = dsreg.open("ds@validated", registry=reg)
    before = ["row", "example_id", "label", "label_name", "given_label", "verdict", "blob", "size"]
    assert ds.labels().column_names == before
    assert ds.sql("SELECT * FROM this").column_names[:8] == before
    assert not {"labels", "label_counts"} & set(ds.sql("SELECT * FROM this").column_names)
    with pytest.raises(dsreg.InvalidInputError, match="holds no label_counts"):
        ds.to_torch(target="label_counts")
    res = dsreg.export("ds@validated", tmp_path / "l.npy", registry=reg)
    assert res.columns == () and res.beside == ()
    assert sorted(p.name for p in tmp_path.glob("l.*npy")) == ["l.npy"]


def test_votes_counts_ride_in_the_review_columns_of_sql_pandas_and_polars(
    tmp_path: Path,
) -> None:
    case = Relabeling(
        "votes", 3, [0, 1, 2, 0], [(1, 0, {"given": 1, "guessed": 1, "both": 3}),
                                   (3, 2, {"given": 0, "guessed": 4, "neither": 1})], [], []
    )  # fmt: skip
    reg, spec = run_recipe(tmp_path, case)
    ds = dsreg.open(spec, registry=reg)
    cols = ["row", "labels", "votes_given", "votes_guessed", "votes_both", "votes_neither"]
    sql = ds.sql(f"SELECT {', '.join(cols)} FROM this ORDER BY row").to_pydict()
    assert sql["labels"] == [[0], [0, 1], [2], [2]]  # row 1: both fit; row 3 relabelled
    assert sql["votes_both"] == [None, 3, None, None]  # row 3: no "both" in the file
    pl_frame = ds.to_polars(review=True)
    pd_frame = ds.to_pandas(review=True)
    for name in cols[2:]:
        assert pl_frame[name].to_list() == sql[name]
        assert [None if v != v else int(v) for v in pd_frame[name]] == sql[name]


def test_repr_html_escapes_ids_and_class_names(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "labels.npy", np.asarray([0, 1], np.int64))
    (tmp_path / "ids.txt").write_text("<script>alert(1)</script>\na&b\n")
    dsreg.add("h", labels=tmp_path / "labels.npy", ids=tmp_path / "ids.txt",
              classes=["<b>cat</b>", "dog\"'"], tag="v1", registry=reg)  # fmt: skip
    ds = dsreg.open("h@v1", registry=reg)
    page = ds._repr_html_()
    assert "<script>" not in page and "<b>cat" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;cat&lt;/b&gt;" in page and "a&amp;b" in page
    assert ds.digest in page and "h" in page
    # The first rows: both, each with its label's name.
    assert page.count("<tr><td>") == 2


# -- the published files, where present ---------------------------------------------------------


def _published(*names: str) -> list[Path]:
    paths = [DATA / name for name in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        pytest.skip(f"needs the published files, absent here: {', '.join(missing)}")
    return paths


CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def test_cifar10_votes_multilabel_sets_agree_across_loaders(tmp_path: Path) -> None:
    labels, votes = _published(
        "label-errors/cifar10_test_set_original_labels.npy", "label-errors/cifar10_mturk.json"
    )
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("cifar10-test", labels=labels, classes=CIFAR10, tag="original", registry=reg)
    dsreg.import_votes("cifar10-test@original", votes, threshold=3, tag="validated",
                       view="cleaned", registry=reg)  # fmt: skip
    dsreg.tag("cifar10-test@validated-multilabel", "cifar10-test@validated", view="multilabel",
              registry=reg)  # fmt: skip
    ds = dsreg.open("cifar10-test@validated-multilabel", registry=reg)
    assert len(ds) == 9996  # the 4 neither rows left out (docs/relabelings.md)
    got = loader_columns(ds, ["labels"], tmp_path / "hf")
    for loader, columns in got.items():
        assert columns == got["sql"], loader
    tds = ds.to_torch(target="labels")
    assert (
        tds[0][1].tolist()
        == rated_array("labels", pa.array(got["sql"]["labels"][:1]), 10)[0].tolist()
    )


def test_cifar10h_counts_agree_across_loaders(tmp_path: Path) -> None:
    labels, counts = _published(
        "label-errors/cifar10_test_set_original_labels.npy", "cifar-10h/cifar10h-counts.npy"
    )
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("cifar10-test", labels=labels, classes=CIFAR10, tag="original", registry=reg)
    dsreg.import_labels("cifar10-test@original", counts, format="counts", tag="cifar10h",
                        view="corrected", registry=reg)  # fmt: skip
    ds = dsreg.open("cifar10-test@cifar10h", registry=reg)
    got = loader_columns(ds, ["label_counts"], tmp_path / "hf")
    for loader, columns in got.items():
        assert columns == got["sql"], loader
    array = np.load(counts)
    for row, value in zip(got["sql"]["row"], got["sql"]["label_counts"], strict=True):
        assert value == array[row].tolist()


def test_real_sets_in_the_original_view_keep_empty_lists_apart_from_none(tmp_path: Path) -> None:
    """Outside the multilabel view a row's set is the overlay's, as stored: ``[]`` (ReaL's
    "no label fits") is not null, in SQL, the loaders and every export."""
    case = Relabeling("real", 3, [0, 1, 2], [], [[0], [], [1, 2]], [])
    reg, _ = run_recipe(tmp_path, case)
    dsreg.tag("ds@real-original", "ds@real", view="original", registry=reg)
    ds = dsreg.open("ds@real-original", registry=reg)
    assert ds.sql("SELECT labels FROM this ORDER BY row").column(0).to_pylist() == case.sets
    assert ds.to_polars()["labels"].to_list() == case.sets
    assert [ex.labels for ex in ds] == [(0,), (), (1, 2)]
    assert "label_counts" not in ds.labels().column_names
    dsreg.export("ds@real-original", tmp_path / "o.csv", registry=reg)
    assert read_back(tmp_path / "o.csv", "csv")["labels"] == case.sets
    assert (tmp_path / "o.csv").read_text().splitlines()[2].endswith(',"[]"')
    dsreg.export("ds@real-original", tmp_path / "o.npy", registry=reg)
    assert np.load(tmp_path / "o.labels.npy").tolist() == [[1, 0, 0], [0, 0, 0], [0, 1, 1]]
