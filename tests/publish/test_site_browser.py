"""``dsreg publish`` browsed in Chromium: a published registry served by ``python -m
http.server`` on loopback renders, every link on every page resolves, the JSON-LD parses, the
pages load nothing from elsewhere, and a fresh reader opens the digest a page shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

import numpy as np
import pytest
from siteset import OLD, REAL, SYNTH, build_site_set

import dsreg
from tests.conftest import SHARED_DATA


def _crawl(page: Any, start: str, base: str) -> dict[str, int]:
    """Every URL reachable by ``<a href>`` from ``start`` (pages below ``base`` followed),
    with its HTTP status; each page's JSON-LD parsed in the browser on the way."""
    seen: dict[str, int] = {}
    todo = [start]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        assert url.startswith(base), f"a link leaves the site: {url}"
        if not url.endswith(".html"):
            seen[url] = page.request.get(url).status
            continue
        resp = page.goto(url)
        seen[url] = resp.status
        docs = page.eval_on_selector_all(
            'script[type="application/ld+json"]', "els => els.map(e => JSON.parse(e.textContent))"
        )
        for doc in docs:
            assert doc["@context"] and doc["@type"], url
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        todo += [urldefrag(h).url for h in hrefs]
    return seen


def _publish(
    tmp_path: Path, serve: Callable[[Path], str], shared: Path | None
) -> tuple[Any, str, Path]:
    ss = build_site_set(tmp_path / "src", shared)
    www = tmp_path / "www"
    url = serve(www)
    dsreg.export(f"{SYNTH}@cleaned-v1", to=str(www), registry=ss.reg)
    dsreg.publish(str(www), url=url, registry=ss.reg)
    return ss, url, www


def _fresh_reader(tmp_path: Path, digest: str, url: str) -> list[int]:
    """The labels of ``dsreg.open(digest, remote=url)`` in a new process with an empty home and
    no registry anywhere."""
    home = tmp_path / "reader"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env |= {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    env["PYTHONPATH"] = str(Path(dsreg.__file__).resolve().parents[1])
    code = (
        "import json, sys, dsreg; ds = dsreg.open(sys.argv[1], remote=sys.argv[2]); "
        "print(json.dumps(ds.labels().column('label').to_pylist()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, digest, url],
        cwd=home, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (home / ".cache" / "dsreg").is_dir()  # the cache registry, not someone's registry
    return list(json.loads(done.stdout))


def _browse(browser: Any, tmp_path: Path, url: str, dataset: str, tag: str) -> tuple[str, Any]:
    """From the index to ``dataset@tag``'s page and back by clicking; the digest it shows."""
    page = browser.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(url)
    assert page.title() == "Datasets"
    page.click(f"a:text-is('{dataset}')")
    page.wait_for_url(f"{url}site/datasets/{dataset}.html")
    page.click(f"a:text-is('{tag}')")
    page.wait_for_url(f"{url}site/tags/{dataset}/{tag}.html")
    digest = page.inner_text("#revision-digest")
    assert page.inner_text("h1") == f"{dataset}@{tag}"
    assert digest in page.inner_text("#load-python")
    page.click("nav.crumbs >> a:text-is('datasets')")
    page.wait_for_url(f"{url}index.html")
    assert all(r.startswith(url) or r.startswith("data:") for r in requested), requested
    return digest, page


def test_published_synthetic_set_browses_from_index_to_revision_and_a_fresh_reader_opens_it(
    tmp_path: Path, serve: Callable[[Path], str], browser: Any
) -> None:
    ss, url, _www = _publish(tmp_path, serve, None)
    digest, page = _browse(browser, tmp_path, url, SYNTH, "cleaned-v1")
    assert digest == dsreg.show(f"{SYNTH}@cleaned-v1", registry=ss.reg).revision
    statuses = _crawl(page, url + "index.html", url)
    assert statuses and set(statuses.values()) == {200}, statuses
    pages = {u for u in statuses if u.endswith(".html")}
    # Every dataset and every tag (yanked ones too) has its page, reached by links alone.
    for ds in (SYNTH, OLD):
        assert f"{url}site/datasets/{ds}.html" in pages
        for t in dsreg.ls(registry=ss.reg, all=True):
            if t.dataset == ds:
                assert f"{url}site/tags/{ds}/{t.tag}.html" in pages
    assert any(u.endswith(".parquet") for u in statuses)  # the pinned view is listed
    assert any(u.endswith(".croissant.json") for u in statuses)
    # The yank and the retirement are shown with their reason and successor.
    page.goto(f"{url}site/tags/{SYNTH}/honeypot-v0.html")
    assert "too few rows <to score> & unvalidated" in page.inner_text("#yanked")
    page.goto(f"{url}site/datasets/{OLD}.html")
    assert "half the rows" in page.inner_text("#retired")
    page.click(f"#retired >> a:text-is('{SYNTH}')")
    page.wait_for_url(f"{url}site/datasets/{SYNTH}.html")
    want = dsreg.open(digest, registry=ss.reg).labels().column("label").to_pylist()
    assert _fresh_reader(tmp_path, digest, url) == want


def test_published_site_reads_from_file_urls(
    tmp_path: Path, serve: Callable[[Path], str], browser: Any
) -> None:
    ss, _url, www = _publish(tmp_path, serve, None)
    page = browser.new_page()
    page.goto((www / "index.html").as_uri())
    page.click(f"a:text-is('{SYNTH}')")
    page.wait_for_url((www / "site" / "datasets" / f"{SYNTH}.html").as_uri())
    page.click("a:text-is('corrected-v1')")
    page.wait_for_url((www / "site" / "tags" / SYNTH / "corrected-v1.html").as_uri())
    assert (
        page.inner_text("#revision-digest")
        == dsreg.show(f"{SYNTH}@corrected-v1", registry=ss.reg).revision
    )


def test_published_cifar10_label_errors_set_in_chromium(
    tmp_path: Path, serve: Callable[[Path], str], browser: Any
) -> None:
    if not (SHARED_DATA / "cifar10_mturk.json").is_file():
        pytest.skip(f"the label-errors CIFAR-10 files are not at {SHARED_DATA}")
    ss, url, _www = _publish(tmp_path, serve, SHARED_DATA)
    digest, page = _browse(browser, tmp_path, url, REAL, "cleaned-v1")
    page.goto(f"{url}site/tags/{REAL}/cleaned-v1.html")
    card = page.inner_text("#label-card")
    assert "54 errors in 275 rows checked" in card  # the paper's validated counts
    assert "9,946 of 10,000" in page.inner_text("main")
    assert "Removed here\t54" in page.inner_text("#diff")
    got = _fresh_reader(tmp_path, digest, url)
    given = np.load(SHARED_DATA / "cifar10_test_set_original_labels.npy")
    kept = dsreg.open(digest, registry=ss.reg).labels().column("row").to_numpy()
    assert len(got) == 9946
    assert got == given[kept].tolist()  # the cleaned view serves the given labels
