"""The published dataset page's leaderboard: the rank chart (each point where the leaderboard
ranks the model, each line coloured by its move), drawn without matplotlib; and the star rule,
the same on the site's table and in ``dsreg eval``: a star only where a rank moves, the
footnote only when something is starred."""

from __future__ import annotations

import re
import sys
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from siteset import SYNTH
from urlset import RERANK, UrlSite

import dsreg
from dsreg.report.publish.revision import dataset_page
from tests.conftest import CliResult

SVG = "{http://www.w3.org/2000/svg}"


def _page(site: UrlSite, path: str) -> str:
    with urllib.request.urlopen(site.url + path, timeout=30) as r:
        return str(r.read().decode("utf-8"))


def _chart(page: str) -> ET.Element:
    found = re.search(r"<svg .*?</svg>", page, re.S)
    assert found is not None, "no chart on the page"
    return ET.fromstring(found.group(0))  # well-formed XML, or this raises


def _board_rows(page: str) -> dict[str, list[str]]:
    """The leaderboard table's cells, by model."""
    section = page.split('id="leaderboard"', 1)[-1] if 'id="leaderboard"' in page else page
    table = re.findall(r"<table>.*?</table>", section.split("<h2>Leaderboard</h2>", 1)[1], re.S)
    rows = re.findall(r"<tr>(.*?)</tr>", table[0], re.S)[1:]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.S) for r in rows]
    return {c[0]: c[1:] for c in cells}


def test_the_dataset_page_draws_each_models_rank_on_each_tag(url_site: UrlSite) -> None:
    chart = _chart(_page(url_site, dataset_page(RERANK)))
    board = dsreg.leaderboard(RERANK, registry=url_site.reg)
    views = {"original": "original", "relabeled": "corrected"}
    want = {
        (m, b.tag): int(b.figure(views[b.tag]).ranks[b.models.index(m)])  # type: ignore[arg-type]
        for b in board.revisions
        for m in b.models
    }
    points = {
        (c.get("data-model"), c.get("data-tag")): int(c.get("data-rank") or 0)
        for c in chart.iter(SVG + "circle")
    }
    assert points == want
    assert want[("memorizer", "original")] == 1 and want[("memorizer", "relabeled")] == 3
    # One segment a model: the fall red, the climb green, the level grey.
    colors = [
        ln.get("stroke") for ln in chart.iter(SVG + "line") if ln.get("stroke-width") == "2.5"
    ]
    assert sorted(colors) == sorted(["rgb(215, 48, 39)", "rgb(26, 152, 80)", "rgb(127, 127, 127)"])
    title = chart.find(SVG + "title")
    assert title is not None and RERANK in (title.text or "")
    desc = chart.find(SVG + "desc")
    assert desc is not None and "memorizer: rank 1 on original, rank 3 on relabeled" in (
        desc.text or ""
    )


def test_a_rank_is_starred_on_the_site_only_where_it_moves(url_site: UrlSite) -> None:
    page = _page(url_site, dataset_page(RERANK))
    rows = _board_rows(page)
    # middle keeps rank 2 though it changes order with both others, significantly: no star.
    assert rows["memorizer"][1].endswith("#3*") and rows["oracle"][1].endswith("#1*")
    assert rows["middle"][1].endswith("#2")
    assert not any(c.endswith("*") for r in rows.values() for c in r[:1])
    assert 'id="board-note"' in page and "Its rank moves against original" in page
    # Nothing moves on the synthetic set: no star, and no footnote.
    synth = _page(url_site, dataset_page(SYNTH))
    assert not any(c.endswith("*") for r in _board_rows(synth).values() for c in r)
    assert 'id="board-note"' not in synth


def _changes(stdout: str) -> dict[str, str]:
    """``eval``'s first rank change column (original -> corrected), by model."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"MODEL +RANK ", line))
    out = {}
    for line in lines[start + 1 :]:
        cells = re.split(r"  +", line.strip())
        if len(cells) < 2 or not re.fullmatch(r"\d+ -> \d+ \(.*", cells[1]):
            break
        out[cells[0]] = cells[1]
    return out


def test_eval_stars_a_rank_change_only_where_the_rank_moves(
    url_site: UrlSite, cli: Callable[..., CliResult]
) -> None:
    files = [str(url_site.predictions[m]) for m in ("memorizer", "middle", "oracle")]
    reg = ("--registry", str(url_site.reg.root))
    res = cli("eval", f"{RERANK}@relabeled", *files, "--views", "original,corrected", *reg)
    assert res.exit_code == 0, res.stderr
    moves = _changes(res.stdout)
    assert moves == {
        "memorizer": "1 -> 3 (-2)*",
        "middle": "2 -> 2 (=)",  # changes order with both, significantly: its rank stays
        "oracle": "3 -> 1 (+2)*",
    }
    assert "* significant: its rank moves" in res.stdout
    report = dsreg.evaluate(f"{RERANK}@relabeled", files, views=["original", "corrected"],
                            registry=url_site.reg)  # fmt: skip
    sig = report.significance
    assert sig is not None
    middle = sig.rank_change("original", "corrected", "middle")
    assert middle is not None and middle.significant and not middle.starred
    # Where nothing is starred, no footnote.
    alone = cli("eval", f"{RERANK}@relabeled", files[1], "--views", "original,corrected", *reg)
    assert alone.exit_code == 0, alone.stderr
    assert _changes(alone.stdout) == {"middle": "1 -> 1 (=)"}
    assert "* significant" not in alone.stdout


def test_the_chart_is_drawn_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    with pytest.raises(ImportError):
        import matplotlib  # noqa: F401
    reg = dsreg.init(registry=tmp_path / "reg")
    rng = np.random.default_rng(5)
    given = rng.integers(0, 3, 60)
    np.save(tmp_path / "l.npy", given)
    dsreg.add("toy", labels=tmp_path / "l.npy", classes=["a", "b", "c"], tag="original",
              registry=reg)  # fmt: skip
    np.save(tmp_path / "p.npy", np.eye(3)[(given + (rng.random(60) < 0.2)) % 3] * 0.91 + 0.03)
    made = dsreg.detect("toy@original", tmp_path / "p.npy", registry=reg)
    dsreg.tag("toy@cleaned", "toy@original", overlays=[made.digest], view="cleaned", registry=reg)
    dsreg.record("toy@original", given, model="given", registry=reg)
    dsreg.record("toy@original", (given + 1) % 3, model="shifted", registry=reg)
    dsreg.publish(str(tmp_path / "www"), registry=reg)
    page = (tmp_path / "www" / dataset_page("toy")).read_text()
    circles = _chart(page).findall(f"{SVG}circle")
    assert {c.get("data-tag") for c in circles} == {"original", "cleaned"}
