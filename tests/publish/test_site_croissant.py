"""The Croissant of every published tag, read by URL from python's ``http.server`` (no byte
ranges) as a reader with no dsreg reads it: ``mlcroissant`` gives every record set of every
document, equal row for row to ``dsreg.open(spec).labels()``; every file a document names is on
the site, answers 200 and has the sha256 and size it says; the documents carry the page's URL,
the revision as version, the licence and the authors; without ``--url`` the links are relative
and the documents read from disk."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from siteset import SYNTH
from urlset import AUTHORS, LICENSE, RERANK, TREE, TREE_LICENSE, UrlSite

import dsreg
from dsreg.report.publish.revision import SITE_FILES, dataset_page, tag_page
from tests.conftest import CliResult

pytest.importorskip("mlcroissant")

# Every tag is published and read, the yanked one and the retired dataset's too.
pytestmark = pytest.mark.filterwarnings("ignore::dsreg.errors.YankedWarning")

# The reader runs in a process of its own that never imports dsreg, its download cache in a
# folder of the test's own (mlcroissant keeps files by URL, and a port is reused).
READ = r"""
import json, sys
import numpy as np
import mlcroissant as mlc

def plain(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return v.item()
    return v

out = {}
for url in sys.argv[1:]:
    ds = mlc.Dataset(url)
    out[url] = {
        rs.name: [{k.split("/", 1)[1]: plain(v) for k, v in r.items()} for r in ds.records(rs.name)]
        for rs in ds.metadata.record_sets
    }
assert "dsreg" not in sys.modules
print(json.dumps(out))
"""


def _reader_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DSREG")}
    return env | {"CROISSANT_CACHE": str(tmp / "croissant-cache"), "HOME": str(tmp)}


def _read_with_mlcroissant(urls: list[str], tmp: Path) -> dict[str, dict[str, list[Any]]]:
    done = subprocess.run(
        [sys.executable, "-c", READ, *urls], env=_reader_env(tmp), cwd=tmp,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout))


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200, url
        return bytes(r.read())


def _doc(site: UrlSite, page: str) -> dict[str, Any]:
    path = page.removesuffix(".html") + ".croissant.json"
    return dict(json.loads(_fetch(site.url + quote(path))))


def _payloads(spec: str, site: UrlSite) -> list[dict[str, Any]]:
    """The payloads record set as it should read: each distinct payload of the view, in first
    appearance order, its sha256, size and URL."""
    table = dsreg.open(spec, registry=site.reg).labels()
    if "blob" not in table.column_names:
        return []
    out: dict[str, dict[str, Any]] = {}
    for blob, size in zip(table.column("blob").to_pylist(), table.column("size").to_pylist(),
                          strict=True):  # fmt: skip
        if blob is None:
            continue  # a label-only set's rows have no payload
        hexd = blob.removeprefix("blake3:")
        data = site.reg.store.read_bytes(blob)
        out.setdefault(blob, {
            "blob": blob, "sha256": hashlib.sha256(data).hexdigest(), "size": size,
            "path": f"{site.url}files/blake3/{hexd[:2]}/{hexd[2:]}",
        })  # fmt: skip
    return list(out.values())


def test_mlcroissant_reads_every_published_tag_by_url_as_its_labels(
    url_site: UrlSite, tmp_path: Path
) -> None:
    specs = url_site.specs()
    assert {s.split("@")[0] for s in specs} >= {SYNTH, TREE, RERANK}
    tags = {s: url_site.url + tag_page(*s.split("@")).removesuffix(".html") + ".croissant.json"
            for s in specs}  # fmt: skip
    datasets = {d: url_site.url + dataset_page(d).removesuffix(".html") + ".croissant.json"
                for d in {s.split("@")[0] for s in specs}}  # fmt: skip
    read = _read_with_mlcroissant([*tags.values(), *datasets.values()], tmp_path)
    for spec, url in tags.items():
        ds = dsreg.open(spec, registry=url_site.reg)
        records = read[url]
        assert records["labels"] == ds.labels().to_pylist(), spec
        assert records["classes"] == [{"index": i, "name": c} for i, c in enumerate(ds.classes)]
        assert records.get("payloads", []) == _payloads(spec, url_site), spec
        assert set(records) <= {"labels", "classes", "payloads"}
    # A dataset's page carries its newest tag's document (its sameAs): the same records.
    for dataset, url in datasets.items():
        same_as = _doc(url_site, dataset_page(dataset))["sameAs"]
        assert read[url] == read[same_as.removesuffix(".html") + ".croissant.json"], dataset


def test_every_file_a_document_names_is_on_the_site_with_its_sha256_and_size(
    url_site: UrlSite,
) -> None:
    named: set[str] = set()
    for spec in url_site.specs():
        doc = _doc(url_site, tag_page(*spec.split("@")))
        kinds = {d["@type"] for d in doc["distribution"]}
        # Croissant's FileObject is its subclass of schema.org's DataDownload; no FileSet: a
        # web server does not list its folders (the payloads are listed in the CSV instead).
        assert kinds == {"cr:FileObject"}, spec
        for d in doc["distribution"]:
            assert d["contentUrl"].startswith(url_site.url), d
            data = _fetch(d["contentUrl"])
            assert hashlib.sha256(data).hexdigest() == d["sha256"], d["contentUrl"]
            assert d["contentSize"] == f"{len(data)} B"
            assert d["encodingFormat"] in ("application/x-parquet", "text/csv")
            named.add(d["contentUrl"].removeprefix(url_site.url))
    # The site's own files are named by their sha256, each written once; the tables are the
    # remote's objects, which the push sent.
    written = {p.relative_to(url_site.www).as_posix()
               for p in (url_site.www / SITE_FILES).iterdir()}  # fmt: skip
    assert written == {p for p in named if p.startswith(SITE_FILES)}
    for p in written:
        assert hashlib.sha256((url_site.www / p).read_bytes()).hexdigest() in p
    assert {p for p in named if not p.startswith(SITE_FILES)} == {
        p for p in named if p.startswith("files/blake3/")
    }


def test_a_document_names_its_page_its_revision_its_licence_and_authors(
    url_site: UrlSite,
) -> None:
    for spec in url_site.specs():
        dataset, tag = spec.split("@")
        page = url_site.url + tag_page(dataset, tag)
        doc = _doc(url_site, tag_page(dataset, tag))
        digest = dsreg.show(spec, registry=url_site.reg).revision
        assert doc["url"] == page and doc["sameAs"] == page
        assert doc["identifier"] == digest and doc["version"] == digest
        want = TREE_LICENSE if dataset == TREE else LICENSE  # the snapshot's wins
        assert doc["license"] == f"https://spdx.org/licenses/{want}.html"
        assert [c["name"] for c in doc["creator"]] == list(AUTHORS)
        assert [c["@type"] for c in doc["creator"]] == ["sc:Person", "sc:Organization"]
        assert f"url          = {{{url_site.url}}}" in doc["citeAs"]
    doc = _doc(url_site, dataset_page(RERANK))
    assert doc["url"] == url_site.url + dataset_page(RERANK)
    assert doc["sameAs"] == url_site.url + tag_page(RERANK, "relabeled")
    # The page's citation carries the licence and the authors too.
    page = _fetch(url_site.url + tag_page(TREE, "rated")).decode()
    assert f"License: {TREE_LICENSE}." in page
    assert "Doe, Jane, Example Lab." in page


def test_without_url_the_links_are_relative_and_the_documents_read_from_disk(
    url_site: UrlSite, tmp_path: Path
) -> None:
    spec = f"{TREE}@rated"
    page = tag_page(*spec.split("@"))
    path = url_site.relative / (page.removesuffix(".html") + ".croissant.json")
    doc = json.loads(path.read_text())
    for d in doc["distribution"]:
        assert d["contentUrl"].startswith("../../../"), d
        assert (path.parent / d["contentUrl"]).is_file()
    assert doc["url"] == doc["sameAs"] == "urn:dsreg:" + doc["identifier"]
    read = _read_with_mlcroissant([str(path)], tmp_path)[str(path)]
    ds = dsreg.open(spec, registry=url_site.reg)
    assert read["labels"] == ds.labels().to_pylist()
    assert [p["path"] for p in read["payloads"]] == [
        p["path"].removeprefix(url_site.url) for p in _payloads(spec, url_site)
    ]


def test_publish_without_url_says_how_to_make_documents_that_load_by_url(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "l.npy", np.array([0, 1, 1], dtype=np.int64))
    dsreg.add("toy", labels=tmp_path / "l.npy", classes=["a", "b"], tag="v1", registry=reg)
    res = cli("publish", str(tmp_path / "www"), "--registry", str(reg.root))
    assert res.exit_code == 0, res.stderr
    assert "Note: without --url the Croissant documents link their files relative" in res.stderr
    url = "https://data.example.org/dsreg/"
    res = cli("publish", str(tmp_path / "www"), "--url", url, "--registry", str(reg.root))
    assert res.exit_code == 0 and "Note:" not in res.stderr
    doc = json.loads((tmp_path / "www" / "site/tags/toy/v1.croissant.json").read_text())
    assert doc["url"] == url + "site/tags/toy/v1.html"
    assert all(d["contentUrl"].startswith(url) for d in doc["distribution"])


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("CC-BY-40", "not on the SPDX list"),
        ("MIT OR Apache-2.0", "not an expression"),
        ("LicenseRef-mine", "not an expression or a LicenseRef"),
        ("https://example.org/a licence", "a space"),
    ],
)
def test_a_licence_that_is_not_one_spdx_id_or_a_url_is_refused_before_anything_is_sent(
    url_site: UrlSite, tmp_path: Path, cli: Callable[..., CliResult], given: str, error: str
) -> None:
    out = tmp_path / "www"
    res = cli("publish", str(out), "--license", given, "--registry", str(url_site.reg.root))
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and error in res.stderr and repr(given) in res.stderr
    assert not out.exists()


def test_the_revision_page_offers_a_fallback_that_works_and_names_the_engines_needing_ranges(
    url_site: UrlSite, tmp_path: Path
) -> None:
    page = _fetch(url_site.url + tag_page(SYNTH, "cleaned-v1")).decode()
    fallback = re.search(r'<pre id="load-fallback">(.*?)</pre>', page, re.S)
    ranges = re.search(r'<p id="ranges">(.*?)</p>', page, re.S)
    assert fallback is not None and ranges is not None
    assert all(e in ranges.group(1) for e in ("Polars", "pyarrow", "DuckDB", "range request"))
    curl, check, read = html.unescape(fallback.group(1)).splitlines()
    # The reader's three steps, done: download, check the sha256, read the file.
    link = curl.split()[-1]
    assert link.startswith(url_site.url + "views/sha256/")  # the pinned view
    sha, name = re.fullmatch(r'echo "([0-9a-f]{64})  (\S+)" \| sha256sum -c -', check).groups()
    (tmp_path / name).write_bytes(_fetch(link))
    done = subprocess.run(["sha256sum", "-c", "-"], input=f"{sha}  {name}\n", cwd=tmp_path,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == f"{name}: OK"
    import pyarrow.parquet as pq

    assert name in read
    got = pq.read_table(tmp_path / name).column("label").to_pylist()
    want = dsreg.open(f"{SYNTH}@cleaned-v1", registry=url_site.reg).labels()
    assert got == want.column("label").to_pylist()
