"""Published relabelings (ImageNet-ReaL lists, CIFAR-10H counts) and a user's corrections CSV
become overlays with label sets and distributions, served by the multilabel view."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import InvalidInputError, Registry, RelabelingError
from dsreg.overlays.match import match_ids
from dsreg.overlays.relabel import import_real
from dsreg.registry.reader import LocalReader

CLASSES = ["tench", "goldfish", "shark", "cock", "hen"]


def val_name(i: int) -> str:
    return f"ILSVRC2012_val_{i:08d}.JPEG"


def add_imagenet_like(reg: Registry, tmp: Path, labels: list[int], *, by_class: bool) -> str:
    """A label-only snapshot whose ids end in ImageNet validation file names; ``by_class``
    orders rows by class folder (as an ImageFolder tree sorts them), not by file number."""
    n = len(labels)
    ids = [f"val/n{labels[i]:08d}/{val_name(i + 1)}" for i in range(n)]
    order = sorted(range(n), key=lambda i: (ids[i], i)) if by_class else list(range(n))
    table = pa.table(
        {
            "example_id": [ids[i] for i in order],
            "label": pa.array([labels[i] for i in order], pa.int32()),
        }
    )
    pq.write_table(table, tmp / "examples.parquet")
    (tmp / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    dsreg.add(
        "inval",
        table=tmp / "examples.parquet",
        classes=tmp / "classes.txt",
        tag="original",
        registry=reg,
    )
    return "inval@original"


# labels of 8 images in file-number order, and their ReaL lists (same order)
LABELS = [0, 1, 2, 3, 4, 0, 1, 2]
REAL = [[0], [1, 3], [4], [0, 4], [], [0, 1], [], [2]]
VERDICT = ["non_error", "non_error", "correctable", "multi_label", "neither", "non_error",
           "neither", "non_error"]  # fmt: skip


def test_real_json_matched_by_file_name_serves_the_multilabel_view_everywhere(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    spec = add_imagenet_like(reg, tmp_path, LABELS, by_class=True)
    (tmp_path / "real.json").write_text(json.dumps(REAL))
    res = dsreg.import_labels(
        spec, tmp_path / "real.json", format="real", tag="real", view="multilabel", registry=reg
    )
    assert res.kind == "validated"
    s = res.summary
    assert s["match"] == "file_name"
    assert (s["non_error"], s["correctable"], s["multi_label"], s["neither"]) == (4, 1, 1, 2)
    assert reg.overlay(res.digest).to_dict()["schema"] == "dsreg/overlay/2"
    params = reg.overlay(res.digest).producer
    assert params["params"] == {"format": "real", "match": "file_name"}
    assert params["inputs"]["labels"] == dsreg.Registry.find(reg.root).store.put_bytes(
        (tmp_path / "real.json").read_bytes()
    )

    ds = dsreg.open("inval@real", registry=reg)
    t = ds.labels()
    by_name = {
        eid.rsplit("/", 1)[1]: (lab, lists, v)
        for eid, lab, lists, v in zip(
            t.column("example_id").to_pylist(),
            t.column("label").to_pylist(),
            t.column("labels").to_pylist(),
            t.column("verdict").to_pylist(),
            strict=True,
        )
    }
    # every image but the two "neither" ones, each with its whole ReaL list
    want = {
        val_name(i + 1): (
            REAL[i][0] if VERDICT[i] == "correctable" else LABELS[i],
            REAL[i],
            VERDICT[i],
        )
        for i in range(len(LABELS))
        if VERDICT[i] != "neither"
    }
    assert by_name == want
    # SQL serves the same table
    got = ds.sql('SELECT * FROM this ORDER BY "row"')
    assert ds.labels(review=True).cast(got.schema).equals(got)  # names: dictionaries
    # dsreg show counts rows with several labels; checkout writes them to labels.csv
    info = dsreg.show("inval@real", registry=reg)
    assert info.several_labels == 3 and info.view == "multilabel" and info.rows == 6
    dsreg.checkout("inval@real", tmp_path / "co", registry=reg)
    lines = list(csv.DictReader(io.StringIO((tmp_path / "co" / "labels.csv").read_text())))
    assert {r["example_id"].rsplit("/", 1)[1]: r["labels"] for r in lines} == {
        k: ";".join(map(str, v[1])) for k, v in want.items()
    }


def test_real_by_position_and_a_file_of_another_length_is_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    np.save(tmp_path / "l.npy", np.asarray(LABELS, np.int32))
    (tmp_path / "c.txt").write_text("\n".join(CLASSES) + "\n")
    dsreg.add(
        "plain", labels=tmp_path / "l.npy", classes=tmp_path / "c.txt", tag="v1", registry=reg
    )
    (tmp_path / "real.json").write_text(json.dumps(REAL))
    res = dsreg.import_labels("plain@v1", tmp_path / "real.json", format="real", registry=reg)
    assert res.summary["match"] == "position"
    assert res.summary["correctable"] == 1
    (tmp_path / "short.json").write_text(json.dumps(REAL[:-1]))
    with pytest.raises(RelabelingError, match="holds 7 label lists, but the snapshot has 8"):
        dsreg.import_labels("plain@v1", tmp_path / "short.json", format="real", registry=reg)
    (tmp_path / "bad.json").write_text(json.dumps([[9]] * 8))
    with pytest.raises(RelabelingError, match="outside the snapshot's"):
        dsreg.import_labels("plain@v1", tmp_path / "bad.json", format="real", registry=reg)
    assert [r.digest for r in dsreg.overlay_ls("plain", registry=reg)] == [res.digest]


COUNTS = np.array(
    [
        [30, 20, 0, 0, 0],  # given 0: 0.6 -> non_error
        [26, 24, 0, 0, 0],  # given 1: 0.48; other 0.52 -> correctable 0
        [10, 10, 10, 10, 10],  # non_agreement
        [0, 0, 0, 0, 0],  # no raters: left out
        [0, 0, 0, 0, 50],  # given 4 -> non_error
    ]
)


def test_counts_keep_every_distribution_and_the_threshold_decides(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    np.save(tmp_path / "l.npy", np.asarray([0, 1, 2, 3, 4], np.int32))
    (tmp_path / "c.txt").write_text("\n".join(CLASSES) + "\n")
    dsreg.add("c10", labels=tmp_path / "l.npy", classes=tmp_path / "c.txt", tag="v1", registry=reg)
    np.save(tmp_path / "counts.npy", COUNTS)
    res = dsreg.import_labels("c10@v1", tmp_path / "counts.npy", format="counts", registry=reg)
    s = res.summary
    assert (s["non_error"], s["correctable"], s["non_agreement"], s["unrated"]) == (2, 1, 1, 1)
    rows = dsreg.overlay_show(res.digest, rows=10, registry=reg).corrections
    assert [r["row"] for r in rows] == [0, 1, 2, 4]
    assert rows[1]["suggested_label"] == 0 and rows[1]["verdict"] == "correctable"
    assert rows[1]["label_counts"] == [{"label": 0, "count": 26}, {"label": 1, "count": 24}]
    assert len(rows[2]["label_counts"]) == 5
    # a stricter threshold: row 1 is then non_agreement
    strict = dsreg.import_labels(
        "c10@v1", tmp_path / "counts.npy", format="counts", threshold=0.55, registry=reg
    )
    assert strict.summary["correctable"] == 0 and strict.summary["non_agreement"] == 2
    # the same counts as Parquet, columns named by class, give the same corrections
    pq.write_table(
        pa.table({c: COUNTS[:, i] for i, c in enumerate(CLASSES)}), tmp_path / "c.parquet"
    )
    again = dsreg.import_labels("c10@v1", tmp_path / "c.parquet", format="counts", registry=reg)
    assert reg.overlay(again.digest).corrections == reg.overlay(res.digest).corrections
    np.save(tmp_path / "probs.npy", COUNTS / 50)
    with pytest.raises(RelabelingError, match="not probabilities"):
        dsreg.import_labels("c10@v1", tmp_path / "probs.npy", format="counts", registry=reg)


# -- property tests ----------------------------------------------------------------------------


def real_reference(given: list[int], lists: list[list[int]]) -> list[tuple[str, int | None]]:
    """The ReaL rule as the issue states it, one row at a time."""
    out: list[tuple[str, int | None]] = []
    for g, labels in zip(given, lists, strict=True):
        if not labels:
            out.append(("neither", None))
        elif g in labels:
            out.append(("non_error", None))
        elif len(labels) == 1:
            out.append(("correctable", labels[0]))
        else:
            out.append(("multi_label", None))
    return out


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    data=st.integers(1, 4).flatmap(
        lambda k: st.lists(
            st.tuples(
                st.integers(0, k - 1), st.lists(st.integers(0, k - 1), unique=True, max_size=k)
            ),
            min_size=1,
            max_size=25,
        ).map(lambda rows: (k, rows))
    )
)
def test_real_rule_matches_a_plain_python_reference(data: tuple[int, list]) -> None:
    k, rows = data
    given_labels = [g for g, _ in rows]
    lists = [s for _, s in rows]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "real.json"
        path.write_text(json.dumps(lists))
        res = import_real(
            path,
            example_ids=pa.array([f"x{i}" for i in range(len(rows))]),
            labels=np.asarray(given_labels, np.int32),
            classes=[f"c{i}" for i in range(k)],
        )
    t = res.table
    got = list(
        zip(t.column("verdict").to_pylist(), t.column("suggested_label").to_pylist(), strict=True)
    )
    assert got == real_reference(given_labels, lists)
    assert t.column("labels").to_pylist() == lists


LABEL_VERDICTS = [
    v for v in dsreg.formats.manifests.VERDICTS if v not in dsreg.formats.manifests.AUDIT_VERDICTS
]


@st.composite
def corrections_csv(draw: st.DrawFn) -> str:
    n = len(LABELS)
    rows = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1)))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["example_id", "suggested_label", "verdict", "labels", "label_counts"])
    cls = st.sampled_from(range(len(CLASSES)))
    for r in rows:
        # A manual overlay's verdicts: the audit's are its own overlays' alone.
        verdict = draw(st.sampled_from(LABEL_VERDICTS))
        sug = draw(cls) if verdict in ("correctable", "suspected") else draw(st.none() | cls)
        labels = draw(st.none() | st.lists(cls, unique=True, max_size=3))
        counts = draw(st.none() | st.dictionaries(cls, st.integers(0, 60), max_size=3))
        name = draw(st.booleans())  # a class name or an index
        w.writerow(
            [
                str(r),
                "" if sug is None else (CLASSES[sug] if name else str(sug)),
                verdict,
                "" if labels is None else (";".join(CLASSES[x] for x in labels) or "[]"),
                "" if counts is None else (";".join(f"{a}:{b}" for a, b in counts.items()) or "[]"),
            ]
        )
    return out.getvalue()


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(text=corrections_csv())
def test_csv_import_then_export_is_lossless(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reg = dsreg.init(registry=root / "reg")
        np.save(root / "l.npy", np.asarray(LABELS, np.int32))
        dsreg.add("toy", labels=root / "l.npy", classes=CLASSES, tag="v1", registry=reg)
        (root / "mine.csv").write_text(text)
        first = dsreg.import_labels("toy@v1", root / "mine.csv", format="csv", registry=reg)
        assert first.kind == "manual"
        exported = dsreg.overlay_export(first.digest, root / "out.csv", registry=reg)
        assert (root / "out.csv").read_text() == exported
        again = dsreg.import_labels("toy@v1", root / "out.csv", format="csv", registry=reg)
        a, b = reg.overlay(first.digest), reg.overlay(again.digest)
        assert a.corrections == b.corrections  # the same table, byte for byte
        assert dsreg.overlay_export(again.digest, registry=reg) == exported


def test_a_corrections_csv_with_the_audits_verdicts_is_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    np.save(tmp_path / "l.npy", np.asarray(LABELS, np.int32))
    dsreg.add("toy", labels=tmp_path / "l.npy", classes=CLASSES, tag="v1", registry=reg)
    (tmp_path / "mine.csv").write_text("example_id,verdict\n0,duplicate\n1,non_error\n")
    before = set(reg.store)
    with pytest.raises(InvalidInputError, match="cannot hold verdicts") as err:
        dsreg.import_labels("toy@v1", tmp_path / "mine.csv", format="csv", registry=reg)
    assert "'duplicate'" in str(err.value) and "dsreg audit duplicates" in str(err.value)
    assert "\n" not in str(err.value)
    assert set(reg.store) == before


def test_cli_import_labels_json_counts_verdicts_and_export_prints_csv(
    make_registry: Callable[..., Registry], tmp_path: Path, cli: Callable[..., object]
) -> None:
    reg = make_registry()
    spec = add_imagenet_like(reg, tmp_path, LABELS, by_class=False)
    (tmp_path / "real.json").write_text(json.dumps(REAL))
    r = cli("overlay", "import-labels", spec, str(tmp_path / "real.json"), "--format", "real",
            "--registry", str(reg.root), "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["summary"]["neither"] == 2 and d["summary"]["multi_label"] == 1
    r = cli("overlay", "show", d["overlay"][:14], "--registry", str(reg.root))
    assert r.exit_code == 0, r.stderr
    assert "LABELS" in r.stdout and "goldfish;cock" in r.stdout  # row 1's ReaL set, by name
    r = cli("overlay", "export", d["overlay"][:14], "--registry", str(reg.root))
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split(",") == ["row", "example_id", "given_label", "suggested_label",
                                   "verdict", "labels", "label_counts"]  # fmt: skip
    assert len(lines) == 9 and lines[4].endswith(",multi_label,0;4,")
    out = tmp_path / "new" / "real.csv"  # -o: the folder is made; the file replaced whole
    r = cli("overlay", "export", d["overlay"][:14], "-o", str(out), "--registry", str(reg.root))
    assert r.exit_code == 0, r.stderr
    assert out.read_text().splitlines() == lines and os.listdir(out.parent) == ["real.csv"]
    r = cli("overlay", "import-labels", spec, str(tmp_path / "real.json"), "--format", "xml",
            "--registry", str(reg.root))  # fmt: skip
    assert r.exit_code == 1 and "Error: unknown --format 'xml'" in r.stderr


def test_diff_of_two_relabelings_compares_their_corrections(
    make_registry: Callable[..., Registry], tmp_path: Path, cli: Callable[..., Any]
) -> None:
    reg = make_registry()
    spec = add_imagenet_like(reg, tmp_path, LABELS, by_class=False)
    (tmp_path / "real.json").write_text(json.dumps(REAL))
    (tmp_path / "mine.csv").write_text(
        "row,suggested_label,verdict\n2,4,correctable\n3,tench,\n4,1,correctable\n6,,non_error\n"
    )
    mine = dsreg.import_labels(spec, tmp_path / "mine.csv", format="csv", tag="mine",
                               view="corrected", registry=reg)  # fmt: skip
    dsreg.import_labels(spec, tmp_path / "real.json", format="real", tag="real",
                        view="multilabel", registry=reg)  # fmt: skip
    assert mine.summary["match"] == "row" and mine.summary["correctable"] == 3
    res = dsreg.diff("inval@mine", "inval@real", registry=reg)
    c = res.corrections
    assert c is not None
    assert (c.named_a, c.named_b, c.named_both) == (4, 8, 4)
    assert {(v.a, v.b): v.rows for v in c.verdicts} == {
        (None, "non_error"): 4,
        ("correctable", "correctable"): 1,
        ("correctable", "multi_label"): 1,
        ("correctable", "neither"): 1,
        ("non_error", "neither"): 1,
    }
    assert c.both_errors == 3
    assert (c.both_relabel, c.same_suggestion) == (1, 1)
    # mine relabels rows 2 (4 in [4]), 3 (0 in [0, 4]) and 4 (1 not in [])
    assert c.a_in_b_labels == (3, 2) and c.b_in_a_labels == (0, 0)
    r = cli("diff", "inval@mine", "inval@real", "--registry", str(reg.root), "--json")
    assert json.loads(r.stdout)["corrections"]["a_in_b_labels"] == {"rows": 3, "agree": 2}
    r = cli("diff", "inval@mine", "inval@real", "--registry", str(reg.root))
    assert "a's label in b's set    2 of 3 (66.7%)" in r.stdout
    assert "both call errors        3" in r.stdout
    # the same overlays on both sides: nothing to compare
    assert dsreg.diff("inval@real", "inval@real", registry=reg).corrections is None


def test_a_table_that_does_not_match_its_manifest_version_is_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    """A version 2 manifest over a version 1 table (or the reverse), made by other code, is
    refused on read: a reader never serves a table its manifest does not describe."""
    from dsreg import ManifestError, Overlay, Revision
    from dsreg.formats.corrections import LabelSets, corrections_table
    from dsreg.formats.tables import parquet_bytes

    reg = make_registry()
    spec = add_imagenet_like(reg, tmp_path, LABELS, by_class=False)
    snap = LocalReader(reg).revision(spec).revision.snapshot
    plain = corrections_table(
        rows=np.array([0]),
        example_ids=[reg_ids(reg, spec)[0]],
        given_label=np.array([LABELS[0]]),
        suggested_label=None,
        verdict=["non_error"],
    )
    with_sets = corrections_table(
        rows=np.array([0]),
        example_ids=[reg_ids(reg, spec)[0]],
        given_label=np.array([LABELS[0]]),
        suggested_label=None,
        verdict=["non_error"],
        label_sets=LabelSets(labels=pa.array([[0, 1]], pa.list_(pa.int32()))),
    )
    producer = {"name": "x", "version": "1", "params": {}, "inputs": {}}
    for table, version in ((plain, 2), (with_sets, 1)):
        ov = reg.put_manifest(
            Overlay(
                base=snap,
                kind="manual",
                corrections=reg.store.put_bytes(parquet_bytes(table)),
                producer=producer,
                summary={"rows": 1},
                version=version,
            )
        )
        rev = reg.put_manifest(Revision(snapshot=snap, overlays=(ov,), view="multilabel"))
        with pytest.raises(ManifestError, match="corrections version"):
            dsreg.open(rev, registry=reg).labels()


def reg_ids(reg: Registry, spec: str) -> list[str]:
    return dsreg.open(spec, registry=reg).labels().column("example_id").to_pylist()


def test_match_ids_streams_the_snapshot_past_the_wanted_ids() -> None:
    """Wanted ids (repeated, missing) find their rows across batches of the snapshot's ids; an
    id the snapshot holds at two rows is reported with both."""
    ids = [f"img/{i:03d}.png" for i in range(40)]
    batches = [pa.table({"example_id": ids[lo : lo + 7]}) for lo in range(0, 40, 7)]
    got = match_ids(batches, pa.array([ids[30], "missing", ids[0], ids[30]]))
    assert got.rows.tolist() == [30, -1, 0, 30] and got.twice == []
    dup = match_ids(
        [pa.table({"example_id": ["a", "b"]}), pa.table({"example_id": ["a"]})], pa.array(["a"])
    )
    assert dup.rows.tolist() == [0] and dup.twice == [("a", 0, 2)]
