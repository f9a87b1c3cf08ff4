"""The published pages in Chromium on a phone (390 px) and a laptop (1366 px): the page itself
never scrolls sideways, and a table or chart wider than the screen scrolls sideways in its own
box (by touch, or by keyboard once focused) until its last column is in view, rather than being
cut off; and no page has a serious or critical accessibility violation (axe-core)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chromium import AXE_RUN, axe_source
from siteset import SYNTH
from urlset import RERANK, TREE, UrlSite

from dsreg.report.publish.revision import INDEX, dataset_page, tag_page

pytestmark = pytest.mark.slow

SIZES = [(390, 844), (1366, 768)]
PAGES = [
    INDEX,
    dataset_page(RERANK),
    dataset_page(SYNTH),
    tag_page(SYNTH, "cleaned-v1"),
    tag_page(TREE, "rated"),
]
# Each scrolling box: how it overflows, whether it is wider than itself, whether its last
# cell (or the chart's last label) comes into view once it is scrolled to its end, whether it
# takes the keyboard's focus.
_BOXES = """() => [...document.querySelectorAll(".scroll")].map((box) => {
  const wide = box.scrollWidth > box.clientWidth + 1;
  box.scrollLeft = box.scrollWidth;
  const right = Math.max(...[...box.querySelectorAll("th, td, text")].map(
    (c) => c.getBoundingClientRect().right));
  const reached = right <= box.getBoundingClientRect().right + 1;
  box.scrollLeft = 0;
  return {overflow: getComputedStyle(box).overflowX, wide, reached, tabindex: box.tabIndex,
          label: box.getAttribute("aria-label")};
})"""


@pytest.fixture(scope="module")
def axe_js() -> str:
    return axe_source()


@pytest.fixture
def screen(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.mark.parametrize("screen", SIZES, indirect=True, ids=["phone", "laptop"])
def test_wide_tables_scroll_sideways_in_their_box_and_the_page_does_not(
    url_site: UrlSite, screen: Any
) -> None:
    width = screen.viewport_size["width"]
    wide = []
    for path in PAGES:
        screen.goto(url_site.url + path)
        assert screen.evaluate("document.documentElement.scrollWidth") <= width, path
        boxes = screen.evaluate(_BOXES)
        assert boxes, path
        for box in boxes:
            assert box["overflow"] == "auto" and box["reached"], (path, box)
            assert box["tabindex"] == 0 and box["label"], (path, box)
        wide += [(path, b["label"]) for b in boxes if b["wide"]]
    if width == 390:
        # The leaderboard of three tags is wider than a phone: it scrolls, by keyboard too.
        assert (dataset_page(RERANK), "Leaderboard") in wide, wide
        screen.goto(url_site.url + dataset_page(RERANK))
        board = screen.locator(".scroll[aria-label='Leaderboard']")
        board.focus()
        screen.keyboard.press("ArrowRight")
        screen.wait_for_function(
            "() => document.querySelector(\".scroll[aria-label='Leaderboard']\").scrollLeft > 0"
        )
    else:
        assert wide == [], wide


@pytest.mark.parametrize("screen", SIZES, indirect=True, ids=["phone", "laptop"])
def test_no_published_page_has_a_serious_accessibility_violation(
    url_site: UrlSite, screen: Any, axe_js: str
) -> None:
    for path in PAGES:
        screen.goto(url_site.url + path)
        screen.add_script_tag(content=axe_js)
        assert screen.evaluate(AXE_RUN) == [], path
        assert screen.locator("h1").count() == 1 and screen.locator("main").count() == 1
