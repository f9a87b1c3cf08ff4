"""The published pages' HTML: any text (names, reasons, class names, citations are user data)
shows as itself and never becomes markup; JSON-LD round-trips and cannot end its element;
links are relative."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.report.publish import html as h

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


class _Parsed(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def _parse(markup: str) -> _Parsed:
    p = _Parsed()
    p.feed(markup)
    p.close()
    return p


@settings(max_examples=300)
@given(cells=st.lists(TEXT, min_size=1, max_size=4), title=TEXT)
def test_text_in_a_table_shows_as_itself_and_makes_no_markup(cells: list[str], title: str) -> None:
    markup = h.section(title, h.table(["a"] * len(cells), [[h.esc(c) for c in cells]]))
    p = _parse(markup)
    assert p.tags == ["section", "h2", "div", "table", "thead", "tr"] + ["th"] * len(cells) + [
        "tbody",
        "tr",
    ] + ["td"] * len(cells)
    assert "".join(p.text) == title + "\n" + "a" * len(cells) + "".join(cells) + "\n"


@settings(max_examples=300)
@given(text=TEXT, href=TEXT)
def test_links_and_code_escape_text_and_attributes(text: str, href: str) -> None:
    p = _parse(h.link(href, text) + h.pre(text) + h.code(text))
    assert p.tags == ["a", "pre", "code"]
    assert "".join(p.text) == text * 3


@settings(max_examples=300)
@given(doc=st.dictionaries(TEXT, st.one_of(TEXT, st.lists(TEXT, max_size=3)), max_size=5))
def test_json_ld_round_trips_and_cannot_close_its_script(doc: dict[str, object]) -> None:
    p = _parse(h.json_ld(doc) + "<p>after</p>")
    assert p.tags == ["script", "p"]
    assert json.loads("".join(p.scripts)) == doc


@given(
    here=st.sampled_from(["index.html", "site/datasets/a.html", "site/tags/a/b.html"]),
    target=st.sampled_from(["index.html", "site/datasets/x.html", "site/tags/x/y.html"]),
)
def test_links_are_relative(here: str, target: str) -> None:
    import posixpath

    link = h.rel(here, target)
    assert not link.startswith("/") and "://" not in link
    assert posixpath.normpath(posixpath.join(posixpath.dirname(here), link)) == target


def test_a_published_page_shows_hostile_class_names_and_reasons_as_text(tmp_path: Path) -> None:
    import numpy as np

    reg = dsreg.init(registry=tmp_path / "reg")
    classes = ['<script>alert("x")</script>', "a & b", "</pre><b>bold</b>"]
    (tmp_path / "classes.txt").write_text("\n".join(classes) + "\n")
    np.save(tmp_path / "l.npy", np.array([0, 1, 2, 1], dtype=np.int64))
    dsreg.add("evil", labels=tmp_path / "l.npy", classes=tmp_path / "classes.txt", tag="v1",
              registry=reg)  # fmt: skip
    dsreg.tag("evil@v2", "evil@v1", registry=reg)
    dsreg.yank("evil@v2", reason='<img src=x onerror="alert(1)"> & more', registry=reg)
    dsreg.publish(str(tmp_path / "www"), registry=reg)
    for name in ("v1", "v2"):
        p = _parse((tmp_path / "www" / "site" / "tags" / "evil" / f"{name}.html").read_text())
        assert not {"img", "b"} & set(p.tags)
        assert p.tags.count("script") == 1  # the JSON-LD alone
        shown = "".join(p.text)
        assert ", ".join(classes) in shown
    assert '<img src=x onerror="alert(1)"> & more' in shown
