"""``dsreg diff`` (one snapshot or two), citations that carry every digest, the rank chart."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg import InvalidInputError
from dsreg.registry.reader import LocalReader
from dsreg.report.cite import FORMATS


def test_diff_of_two_views_of_one_snapshot_matches_rows(make_labelset: Any) -> None:
    ls = make_labelset(n=60, seed=7)
    a, b = ls.view("original"), ls.view("corrected")
    res = dsreg.diff("toy@original", "toy@corrected", registry=ls.reg)
    assert res.match == "row"
    assert (res.rows_a, res.rows_b) == (60, len(b))
    kept = set(b.column("row").to_pylist())
    assert res.only_a == 60 - len(kept) and res.only_b == 0
    changed = b.filter(np.asarray(b["label"]) != np.asarray(b["given_label"]))
    assert res.relabelled == len(changed) > 0
    names = ls.classes
    want = Counter(
        (names[g], names[lab])
        for g, lab in zip(
            changed["given_label"].to_pylist(), changed["label"].to_pylist(), strict=True
        )
    )
    assert {(t.source, t.target): t.count for t in res.transitions} == dict(want)
    counts = [t.count for t in res.transitions]
    assert counts == sorted(counts, reverse=True)
    assert res.unchanged == len(b) - len(changed)
    removed = [ls.ids[r] for r in range(60) if r not in kept]
    assert res.samples["only_a"] == removed[:10]
    assert res.samples["relabelled"] == changed["example_id"].to_pylist()[:10]
    assert a.num_rows == res.rows_a
    back = dsreg.diff("toy@corrected", "toy@original", registry=ls.reg)
    assert (back.only_a, back.only_b, back.relabelled) == (0, res.only_a, res.relabelled)
    same = dsreg.diff("toy@cleaned", "toy@cleaned", registry=ls.reg)
    assert (same.only_a, same.only_b, same.relabelled, same.transitions) == (0, 0, 0, ())


@pytest.mark.parametrize("seed", range(3))
def test_diff_by_rows_equals_a_full_outer_join_of_the_views(
    make_labelset: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsreg.report.diff import _diff_rows, _diff_sql
    from dsreg.views import sparse

    # The labels at the named rows are read a few rows at a time: many batches, some empty.
    monkeypatch.setattr(sparse, "LABELS_BATCH", 3 + seed * 4)
    ls = make_labelset(n=70, seed=seed, overlays=2)
    # Revisions over different overlay lists too: the first overlay only, in every view.
    for view in ("original", "cleaned", "corrected", "honeypot"):
        dsreg.tag(
            f"toy@first-{view}",
            "toy@original",
            overlays=ls.overlays[:1],
            view=view,
            registry=ls.reg,
        )
    specs = ["toy@original", "toy@cleaned", "toy@corrected", "toy@honeypot", "toy@first-cleaned",
             "toy@first-corrected", "toy@first-honeypot"]  # fmt: skip
    for a in specs:
        for b in specs:
            ra, rb = LocalReader(ls.reg).revision(a), LocalReader(ls.reg).revision(b)
            fast = _diff_rows(ls.reg, ra, rb).to_dict()
            # Only the row path compares the corrections themselves (one snapshot).
            compared = fast.pop("corrections")
            assert (compared is None) == (ra.revision.overlays == rb.revision.overlays)
            slow = _diff_sql(ls.reg, ra, rb, match="row").to_dict()
            assert slow.pop("corrections") is None
            assert fast == slow, (a, b)


def test_diff_of_two_snapshots_matches_example_ids(make_labelset: Any) -> None:
    ls = make_labelset(n=20, overlays=0)
    # A second snapshot of the set: ids 0-4 dropped, 3 new ones, rows 5-6 relabelled, reordered.
    ids = [f"img{i:04d}" for i in range(19, 4, -1)] + ["new1", "new2", "new3"]
    labels = np.asarray([ls.labels[int(i[3:])] if i.startswith("img") else 0 for i in ids])
    labels[ids.index("img0005")] = (ls.labels[5] + 1) % 4
    labels[ids.index("img0006")] = (ls.labels[6] + 2) % 4
    make_labelset(reg=ls.reg, ids=ids, labels=labels.astype(np.int32), overlays=0, tag="v2")
    res = dsreg.diff("toy@original", "toy@v2", registry=ls.reg)
    assert res.match == "example_id"
    assert (res.only_a, res.only_b, res.relabelled, res.unchanged) == (5, 3, 2, 13)
    assert res.samples["only_a"] == [f"img{i:04d}" for i in range(5)]
    assert res.samples["only_b"] == ["new1", "new2", "new3"]
    assert sorted(res.samples["relabelled"]) == ["img0005", "img0006"]
    doc = res.to_dict()
    assert doc["a"]["revision"] == dsreg.open("toy@original", registry=ls.reg).digest
    assert json.loads(json.dumps(doc)) == doc


def test_a_citation_carries_every_digest_and_the_version(make_labelset: Any) -> None:
    ls = make_labelset(n=30, seed=1)
    c = dsreg.cite("toy@corrected", authors=["Ada Lovelace", "ACME_Labs & co"], registry=ls.reg)
    rev = dsreg.open("toy@corrected", registry=ls.reg).digest
    assert c.digests() == [rev, ls.snapshot, *ls.overlays]
    assert c.rows == len(ls.view("corrected"))
    for fmt in FORMATS:
        text = c.render(fmt)
        for d in c.digests():
            assert d in text, (fmt, d)
        assert "toy@corrected" in text and dsreg.__version__ in text
        again = dsreg.cite("toy@corrected", authors=c.authors, registry=ls.reg)
        assert text == again.render(fmt)  # stable
    bib = c.bibtex()
    assert bib.startswith("@misc{toy-corrected-") and bib.count("{") == bib.count("}")
    assert r"ACME\_Labs \& co" in bib
    with pytest.raises(InvalidInputError, match="unknown citation format"):
        c.render("ris")


def test_citation_cff_is_valid_yaml_with_the_required_keys(make_labelset: Any) -> None:
    yaml = pytest.importorskip("yaml")
    ls = make_labelset(n=30, seed=1)
    doc = yaml.safe_load(dsreg.cite("toy@honeypot", registry=ls.reg).cff())
    assert doc["cff-version"] == "1.2.0" and doc["type"] == "dataset"
    assert {"message", "title", "authors", "version", "identifiers"} <= set(doc)
    assert doc["version"] == dsreg.open("toy@honeypot", registry=ls.reg).digest
    assert doc["authors"] == [{"name": "toy maintainers"}]
    assert [i["value"] for i in doc["identifiers"]] == [
        doc["version"],
        ls.snapshot,
        *ls.overlays,
    ]


def _report(ls: Any, plot: Path | None = None) -> Any:
    """``dsreg.evaluate`` of three random models on ``toy@corrected``, the chart at ``plot``."""
    rng = np.random.default_rng(0)
    preds = {f"model-{i}": rng.random((ls.n, len(ls.classes))) for i in range(3)}
    return dsreg.evaluate("toy@corrected", preds, plot=plot, registry=ls.reg)


def test_the_rank_chart_is_written_as_png(make_labelset: Any, tmp_path: Path) -> None:
    from PIL import Image

    ls = make_labelset(n=60, seed=2)
    out = tmp_path / "charts" / "ranks.png"
    _report(ls, plot=out)
    with Image.open(out) as img:
        assert img.format == "PNG" and img.width > 600 and img.height > 300
        # Not a blank canvas: coloured lines and text.
        colours = np.asarray(img.convert("RGB")).reshape(-1, 3)
        assert len(np.unique(colours, axis=0)) > 20


def test_the_svg_chart_is_stable_and_names_the_models(make_labelset: Any, tmp_path: Path) -> None:
    ls = make_labelset(n=60, seed=2)
    report = _report(ls, plot=tmp_path / "a.svg")
    _report(ls, plot=tmp_path / "b.svg")
    one = (tmp_path / "a.svg").read_bytes()
    two = (tmp_path / "b.svg").read_bytes()
    assert one == two
    text = one.decode()
    for m in ("model-0", "model-1", "model-2", "honeypot", "original", "corrected"):
        assert m in text
    assert report.revision in text


def test_the_chart_needs_png_or_svg(make_labelset: Any, tmp_path: Path) -> None:
    ls = make_labelset(n=20)
    with pytest.raises(InvalidInputError, match=r"\.png or \.svg"):
        _report(ls, plot=tmp_path / "ranks.jpg")
