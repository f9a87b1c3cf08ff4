"""Every page of the review (the name form, an item, the done page, the error pages, the
operator's with its panels) has no serious or critical accessibility violation by axe-core, on
a laptop (1366x768) and a phone (390x844) screen; and each has an ``h1`` and a ``main``.

axe-core is fetched once from the npm registry with ``npm pack`` into a cache folder (the
system's temporary folder), and injected into the page; the tests skip, saying why, when npm is
absent or the registry cannot be reached and nothing is cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import AXE_RUN, axe_source, launch, skip_without_chromium
from reviewset import ReviewSet

import dsreg

pytestmark = pytest.mark.slow

SIZES = [(1366, 768), (390, 844)]
_RUN = AXE_RUN


@pytest.fixture(scope="session")
def axe_js() -> str:
    """The text of ``axe.min.js``, from the cache or fetched into it with ``npm pack``."""
    return axe_source()


@pytest.fixture
def axe_pages(tmp_path: Path, axe_js: str) -> Iterator[Callable[[int, int], Any]]:
    """``new_page(width, height)``: a page whose browser lets the test inject axe-core past
    the page's Content-Security-Policy (the page itself loads its own script only)."""
    skip_without_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        contexts: list[Any] = []

        def new_page(width: int, height: int) -> Any:
            context = browser.new_context(
                viewport={"width": width, "height": height}, bypass_csp=True
            )
            context.set_default_timeout(15_000)
            contexts.append(context)
            return context.new_page()

        yield new_page
        for context in contexts:
            context.close()
        browser.close()


def _check(page: Any, axe_js: str, what: str) -> None:
    """No serious or critical axe violation on the page as it is now; one h1, one main."""
    page.add_script_tag(content=axe_js)
    violations = page.evaluate(_RUN)
    assert violations == [], f"{what}: {violations}"
    assert page.locator("h1").count() == 1, what
    assert page.locator("main").count() == 1, what


def _ready(page: Any) -> None:
    deadline = time.monotonic() + 15
    script = "() => document.body.classList.contains('drawing')"
    page.wait_for_selector("#card:not([hidden])")
    while page.evaluate(script):
        assert time.monotonic() < deadline, "the page did not take answers"
        time.sleep(0.02)


@pytest.mark.parametrize(("width", "height"), SIZES, ids=["laptop", "phone"])
def test_every_page_has_no_serious_violation(
    axe_pages: Callable[[int, int], Any],
    axe_js: str,
    review_set: ReviewSet,
    width: int,
    height: int,
) -> None:
    with dsreg.review(review_set.spec, votes_per_item=1, registry=review_set.registry) as server:
        origin = server.url.split("/?")[0]
        shared = server.links["shared"]

        page = axe_pages(width, height)  # the name form
        page.goto(shared)
        page.wait_for_selector("#name-input", state="visible")
        assert page.locator("label[for='name-input']").text_content() == "Your name"
        _check(page, axe_js, "name form")

        page.fill("#name-input", "ann")
        page.keyboard.press("Enter")  # an item, with the confirmation of a saved answer
        _ready(page)
        page.keyboard.press("2")
        page.wait_for_selector("#saved:has-text('Saved')")
        _ready(page)
        _check(page, axe_js, "item page")
        assert "Given label: " in (page.text_content("#announce") or "")

        operator = axe_pages(width, height)  # the operator's item page, panels open
        operator.goto(server.url + "&reviewer=olga")
        _ready(operator)
        operator.click("#finish-panel summary")
        _check(operator, axe_js, "operator's item page")
        operator.click("#example-image")
        operator.wait_for_selector("#zoom-view:not([hidden])")
        _check(operator, axe_js, "zoomed example")
        operator.keyboard.press("Escape")
        operator.click("#coordinator-link")  # the coordinator's view, once it has its figures
        operator.wait_for_selector("#raters tr[data-rater='ann']")
        _check(operator, axe_js, "coordinator's view")

        page.close()  # the pages poll: closed, so no request is served while the queue is
        operator.close()  # changed here, the rest of the items voted
        queue = server.session.queue
        while (item := queue.next_item("bob")) is not None:
            queue.vote("bob", item.row, "given")
        done = axe_pages(width, height)
        done.goto(shared.replace("token=", "reviewer=carol&token="))
        done.wait_for_selector("#done:not([hidden])")
        _check(done, axe_js, "done page")

        stranger = axe_pages(width, height)  # no token: the 403 page
        assert stranger.goto(origin + "/").status == 403
        assert "access token" in (stranger.text_content("#error-message") or "")
        _check(stranger, axe_js, "403 page")
        assert done.goto(origin + "/no/such/page").status == 404
        _check(done, axe_js, "404 page")


@pytest.mark.parametrize(("width", "height"), SIZES, ids=["laptop", "phone"])
def test_a_pair_item_has_no_serious_violation(
    axe_pages: Callable[[int, int], Any], axe_js: str, tmp_path: Path, width: int, height: int
) -> None:
    from pairset import build_pair_set

    pairs = build_pair_set(tmp_path)
    with dsreg.review(pairs.spec, audit=True, registry=pairs.registry) as server:
        page = axe_pages(width, height)
        page.goto(server.links["shared"].replace("token=", "reviewer=ann&token="))
        _ready(page)
        page.wait_for_selector("#pair-distance:not(:empty)")
        _check(page, axe_js, "pair item")
