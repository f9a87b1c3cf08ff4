"""``dsreg export --format croissant``: a Croissant 1.1 folder that MLCommons' reader validates
and reads back as ``Dataset.labels()``; its checksums, provenance and credit; and
``--format datacite``."""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from creditset import CreditSet, build_credit_set
from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.objects.digest import hex_of
from dsreg.registry.reader import LocalReader
from dsreg.report.croissant import croissant_metadata
from dsreg.report.croissant.provenance import object_sha256

mlc = pytest.importorskip("mlcroissant")

# mlcroissant parses JSON-LD through a graph class rdflib has deprecated and reads tables with
# a pandas keyword pandas has deprecated: theirs to change, and nothing dsreg writes.
pytestmark = [
    pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame"),
]


@pytest.fixture(scope="module")
def credit_set(tmp_path_factory: pytest.TempPathFactory) -> CreditSet:
    return build_credit_set(tmp_path_factory.mktemp("croissant"))


def _plain(value: Any) -> Any:
    """A value as mlcroissant yields it, as Arrow's ``to_pylist`` gives it: text as str,
    arrays as lists."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _records(folder: Path, record_set: str) -> list[dict[str, Any]]:
    ds = mlc.Dataset(jsonld=str(folder / "croissant.json"))  # validates, raises on an error
    return [{k.split("/", 1)[1]: _plain(v) for k, v in r.items()} for r in ds.records(record_set)]


@pytest.mark.parametrize("what", ["original", "validated", "corrected", "multilabel", "manual"])
def test_mlcroissant_reads_every_revision_back_as_its_labels(
    what: str, credit_set: CreditSet, cli: Callable[..., Any], tmp_path: Path
) -> None:
    cs = credit_set
    spec = cs.specs[what]
    out = tmp_path / "export"
    r = cli("export", spec, "-o", str(out), "--format", "croissant", "--registry", str(cs.reg.root))
    assert r.exit_code == 0, r.stderr
    assert "Wrote the Croissant document of" in r.stderr
    ds = dsreg.open(spec, registry=cs.reg)
    assert r.stdout.strip() == ds.digest
    assert _records(out, "labels") == ds.labels().to_pylist()
    classes = _records(out, "classes")
    assert classes == [{"index": i, "name": c} for i, c in enumerate(ds.classes)]
    # Every file the document names has the sha256 it says, and every payload too.
    doc = json.loads((out / "croissant.json").read_text())
    named = [d for d in doc["distribution"] if d["@type"] == "cr:FileObject"]
    for d in named:
        data = (out / d["contentUrl"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == d["sha256"], d["contentUrl"]
        assert d["contentSize"] == f"{len(data)} B"
    payloads = _records(out, "payloads")
    assert {p["blob"] for p in payloads} == {b for b in ds.labels().column("blob").to_pylist()}
    for p in payloads:
        assert hashlib.sha256((out / p["path"]).read_bytes()).hexdigest() == p["sha256"]
    assert doc["identifier"] == ds.digest
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.1"


@st.composite
def rated_revisions(draw: st.DrawFn, recipe: str) -> tuple[int, list[int], list[list[int]], str]:
    """Classes, given labels, and a relabeling file's rows in the recipe's layout: ImageNet
    ReaL's label sets (served in the multilabel view, or the original view that keeps ``[]``)
    or CIFAR-10H's n x k counts (a row of zeros: nobody rated it), and the view."""
    k = draw(st.integers(2, 5), label="classes")
    n = draw(st.integers(1, 8), label="rows")
    labels = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    if recipe == "real":
        cls = st.integers(0, k - 1)
        rows = draw(st.lists(st.lists(cls, unique=True, max_size=k), min_size=n, max_size=n))
        return k, labels, rows, draw(st.sampled_from(["multilabel", "original"]))
    counts = st.lists(st.integers(0, 3), min_size=k, max_size=k)
    rows = draw(st.lists(counts, min_size=n, max_size=n))
    rows[0][labels[0]] += 1  # someone rated: the revision serves label_counts
    return k, labels, rows, "corrected"


def _rated_revision(root: Path, recipe: str, case: tuple[Any, ...]) -> tuple[dsreg.Registry, str]:
    """The docs/relabelings.md recipe's commands on ``case``'s files."""
    k, labels, rows, view = case
    reg = dsreg.init(registry=root / "reg")
    np.save(root / "labels.npy", np.asarray(labels, np.int64))
    dsreg.add("ds", labels=root / "labels.npy", classes=[f"c{i}" for i in range(k)],
              tag="original", registry=reg)  # fmt: skip
    if recipe == "real":
        (root / "real.json").write_text(json.dumps(rows))
        dsreg.import_labels("ds@original", root / "real.json", format="real", tag="rated",
                            view="multilabel", registry=reg)  # fmt: skip
    else:
        np.save(root / "counts.npy", np.asarray(rows, np.int64))
        dsreg.import_labels("ds@original", root / "counts.npy", format="counts", tag="rated",
                            view="corrected", registry=reg)  # fmt: skip
    dsreg.tag("ds@rated-view", "ds@rated", view=view, registry=reg)
    return reg, "ds@rated-view"


@pytest.mark.parametrize("recipe", ["real", "counts"])
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_label_sets_and_rater_counts_are_array_fields_mlcroissant_reads_back(
    recipe: str, data: st.DataObject
) -> None:
    case = data.draw(rated_revisions(recipe), label="case")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reg, spec = _rated_revision(root, recipe, case)
        ds = dsreg.open(spec, registry=reg)
        view = ds.labels()
        name = "labels" if recipe == "real" else "label_counts"
        assert name in view.column_names
        out = root / "export"
        dsreg.export(spec, out, format="croissant", registry=reg)
        assert pq.read_table(out / "labels.parquet").column(name).to_pylist() == (
            view.column(name).to_pylist()
        )
        assert _records(out, "labels") == view.to_pylist()  # validated, row for row
        doc = json.loads((out / "croissant.json").read_text())
        field = next(f for f in doc["recordSet"][1]["field"] if f["name"] == name)
        assert field["isArray"] is True
        if recipe == "real":  # a set of any size, of classes
            assert field["arrayShape"] == "-1"
            assert field["dataType"] == ["sc:Integer", "cr:Label"]
            assert field["references"] == {"field": {"@id": "classes/index"}}
        else:  # one count per class, not class indexes
            assert field["arrayShape"] == str(len(ds.classes))
            assert field["dataType"] == "sc:Integer" and "references" not in field
            assert "raters' counts per class" in field["description"]


def test_a_corrected_revision_names_what_it_derives_from_and_credits_both(
    credit_set: CreditSet,
) -> None:
    cs = credit_set
    original = dsreg.open(cs.specs["original"], registry=cs.reg).digest
    plain = croissant_metadata(LocalReader(cs.reg).revision(cs.specs["original"]))
    assert "prov:wasDerivedFrom" not in plain and "rai:dataAnnotationProtocol" not in plain
    doc = croissant_metadata(LocalReader(cs.reg).revision(cs.specs["corrected"]))
    assert doc["prov:wasDerivedFrom"] == {"@id": f"urn:dsreg:{original}"}
    assert doc["isBasedOn"] == f"urn:dsreg:{original}"
    (activity,) = doc["prov:wasGeneratedBy"]
    assert activity["@id"] == f"urn:dsreg:{cs.overlays['corrected']}"
    assert "krizhevsky2009learning" in doc["citeAs"] and "peterson2019human" in doc["citeAs"]
    assert "rater counts per class" in doc["rai:dataAnnotationProtocol"][0]
    counts = np.load(cs.inputs["corrected"]).sum(axis=1)
    lo, hi = int(counts.min()), int(counts.max())
    assert doc["rai:annotationsPerItem"].startswith(f"{lo} to {hi} " if lo != hi else f"{lo} ")
    votes = croissant_metadata(LocalReader(cs.reg).revision(cs.specs["validated"]))
    assert votes["rai:annotationsPerItem"].startswith("5 (overlay ")  # every line sums to 5
    assert "agreement threshold 3" in votes["rai:dataAnnotationProtocol"][0]
    assert "non_error 1" in votes["rai:dataAnnotationAnalysis"][0]
    label = next(f for f in votes["recordSet"][1]["field"] if f["name"] == "label")
    assert label["dataType"] == ["sc:Integer", "cr:Label"]
    assert label["references"] == {"field": {"@id": "classes/index"}}


def test_datacite_relates_a_corrected_revision_to_the_original(
    credit_set: CreditSet, cli: Callable[..., Any], tmp_path: Path
) -> None:
    cs = credit_set
    out = tmp_path / "zenodo.json"
    r = cli("export", cs.specs["corrected"], "-o", str(out), "--format", "datacite",
            "--author", "Doe, Jane", "--registry", str(cs.reg.root))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    attrs = json.loads(out.read_text())["data"]["attributes"]
    original = dsreg.open(cs.specs["original"], registry=cs.reg).digest
    related = {(x["relationType"], x["relatedIdentifier"]) for x in attrs["relatedIdentifiers"]}
    assert ("IsNewVersionOf", f"urn:dsreg:{original}") in related
    assert ("IsDerivedFrom", f"urn:dsreg:{original}") in related
    assert attrs["version"] == dsreg.open(cs.specs["corrected"], registry=cs.reg).digest
    assert attrs["creators"] == [{"name": "Doe, Jane", "nameType": "Personal"}]
    assert attrs["types"]["resourceTypeGeneral"] == "Dataset"
    # The original is derived from nothing.
    plain = tmp_path / "plain.json"
    assert cli("export", cs.specs["original"], "-o", str(plain), "--format", "datacite",
               "--registry", str(cs.reg.root)).exit_code == 0  # fmt: skip
    assert json.loads(plain.read_text())["data"]["attributes"]["relatedIdentifiers"] == []


def test_sha256_is_computed_once_and_a_damaged_line_is_a_miss(
    credit_set: CreditSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = credit_set.reg
    digests = [d for d in reg.store if reg.manifest_kind(d) is None][:5]
    want = {d: hashlib.sha256(reg.store.read_bytes(d)).hexdigest() for d in digests}
    assert object_sha256(reg, digests) == want
    reads: list[str] = []
    real = type(reg.store).read_bytes

    def counting(store: Any, digest: str) -> bytes:
        reads.append(digest)
        return real(store, digest)

    monkeypatch.setattr(type(reg.store), "read_bytes", counting)
    assert object_sha256(reg, digests) == want and reads == []  # from the state
    # A line whose check fails (a flipped bit) is a miss: the object is hashed again.
    import sqlite3

    con = sqlite3.connect(reg.state.path)
    key = bytes.fromhex(hex_of(digests[0]))
    (value,) = con.execute("SELECT sha256 FROM sha256_v1 WHERE digest = ?", (key,)).fetchone()
    con.execute(
        "UPDATE sha256_v1 SET sha256 = ? WHERE digest = ?", (bytes([value[0] ^ 1]) + value[1:], key)
    )
    con.commit()
    con.close()
    assert object_sha256(reg, digests) == want and reads == [digests[0]]


def test_writers_of_the_sha256_cache_at_once_agree(credit_set: CreditSet) -> None:
    reg = credit_set.reg
    digests = [d for d in reg.store if reg.manifest_kind(d) is None]
    want = {hex_of(d): hashlib.sha256(reg.store.read_bytes(d)).hexdigest() for d in digests}
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(20):
                dsreg.Registry.find(reg.root).state.put_sha256s(want.items())
        except BaseException as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert reg.state.sha256s(list(want)) == want


def test_a_damaged_payload_is_refused_and_no_folder_is_left(
    cli: Callable[..., Any],
    tmp_path: Path,
    flip_byte: Callable[..., None],
) -> None:
    cs = build_credit_set(tmp_path / "set")
    blob = dsreg.open(cs.specs["original"], registry=cs.reg)[0].blob
    assert blob is not None
    flip_byte(cs.reg, blob)
    out = tmp_path / "export"
    r = cli("export", cs.specs["original"], "-o", str(out), "--format", "croissant",
            "--registry", str(cs.reg.root))  # fmt: skip
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert blob[7:19] in r.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["set"]


def test_an_export_into_a_folder_that_holds_files_is_refused(
    credit_set: CreditSet, cli: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = cli("export", credit_set.specs["original"], "-o", str(out), "--format", "croissant",
            "--registry", str(credit_set.reg.root))  # fmt: skip
    assert r.exit_code == 1 and "is a folder that is not empty" in r.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    ok = cli("export", credit_set.specs["original"], "-o", str(empty), "--format", "croissant",
             "--registry", str(credit_set.reg.root))  # fmt: skip
    assert ok.exit_code == 0 and (empty / "croissant.json").is_file()
