"""Every vote deliberate, in a real Chromium: a double press, a held key and a press while the
image loads each cast no extra vote; names differing in case are one rater; a restart keeps the
links and the port, so an open page keeps voting; finishing is the operator's, and an early
finish leaves the items without agreement ``unreviewed``, which the cleaned view keeps."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from reviewset import ReviewSet
from test_browser import wait_until_drawn

import dsreg

pytestmark = pytest.mark.slow


@pytest.fixture
def serving(review_set: ReviewSet) -> Iterator[Callable[..., dsreg.ReviewServer]]:
    started: list[dsreg.ReviewServer] = []

    def start(**kwargs: Any) -> dsreg.ReviewServer:
        server = dsreg.review(review_set.spec, registry=review_set.registry, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _open(context: Any, url: str, name: str | None = None) -> Any:
    page = context.new_page()
    page.goto(url)
    if name is not None:
        page.wait_for_selector("#name-input", state="visible")
        page.fill("#name-input", name)
        page.keyboard.press("Enter")
    page.wait_for_selector("#progress:has-text('You:')")
    return page


def _row(page: Any) -> int:
    return int(page.text_content("#row") or "-1")


def _settle(server: dsreg.ReviewServer, seconds: float = 1.0) -> int:
    """The votes everyone cast, once requests in flight had ``seconds`` to land."""
    time.sleep(seconds)
    return server.progress().everyone


def test_a_double_press_60_ms_apart_casts_one_vote(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving()
    page = _open(browsers(), server.url + "&reviewer=alice")
    first = _row(page)
    wait_until_drawn(page)
    page.keyboard.press("1")
    time.sleep(0.06)
    page.keyboard.press("1")
    assert _settle(server) == 1
    assert page.text_content("#progress", timeout=5000).startswith("You: 1 answered")
    assert _row(page) != first
    assert "Not taken" in (page.text_content("#message") or "")


def test_a_held_key_casts_one_vote(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving()
    page = _open(browsers(), server.url + "&reviewer=alice")
    wait_until_drawn(page)
    page.keyboard.down("2")
    # Held for 1.5 s: the browser's repeats, long after the next item is drawn.
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        page.keyboard.down("2")  # a repeat: Playwright sets event.repeat
        time.sleep(0.03)
    page.keyboard.up("2")
    assert _settle(server) == 1


def test_a_press_while_the_image_loads_is_not_taken(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving()
    page = browsers().new_page()
    held: list[Any] = []
    page.route("**/payload/**", lambda route: held.append(route))  # the image waits
    page.goto(server.url + "&reviewer=alice")
    page.wait_for_selector("#progress:has-text('You:')")
    first = _row(page)
    deadline = time.monotonic() + 10
    while not held:
        assert time.monotonic() < deadline, "the page did not ask for the image"
        page.wait_for_timeout(20)
    page.keyboard.press("1")
    page.click("button[data-answer='guessed']")
    assert _settle(server, 0.5) == 0
    assert "Not taken" in (page.text_content("#message") or "")
    for route in held:
        route.continue_()
    page.unroute("**/payload/**")
    wait_until_drawn(page)
    assert _row(page) == first
    page.keyboard.press("1")
    page.wait_for_selector("#progress:has-text('You: 1 answered')")
    assert server.progress().everyone == 1


def test_a_saved_vote_is_confirmed_and_undo_shows_the_earlier_answer(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving()
    page = _open(browsers(), server.url + "&reviewer=alice")
    first = _row(page)
    wait_until_drawn(page)
    page.keyboard.press("3")
    page.wait_for_selector("#saved:has-text('Saved')")
    assert "Both fit" in (page.text_content("#saved") or "")
    assert "U to undo" in (page.text_content("#saved") or "")
    wait_until_drawn(page)
    page.keyboard.press("u")
    page.wait_for_selector("#saved:has-text('Undone')")
    assert _row(page) == first
    selected = page.locator("button.answer.selected")
    assert selected.count() == 1 and selected.get_attribute("data-answer") == "both"
    assert selected.get_attribute("aria-pressed") == "true"


def test_names_differing_only_in_case_are_one_rater(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving()
    shared = server.url  # the page where a rater names themselves
    first = _open(browsers(), shared, "rater1")
    row = _row(first)
    wait_until_drawn(first)
    first.keyboard.press("1")
    first.wait_for_selector("#progress:has-text('You: 1 answered')")
    for spelling in ("Rater1", "RATER1"):
        page = _open(browsers(), shared, spelling)
        assert page.text_content("#reviewer-name") == "rater1"
        assert (page.text_content("#progress") or "").startswith("You: 1 answered")
        assert _row(page) != row  # never shown the item "they" answered
    assert server.progress().everyone == 1
    assert {names for _, names in server.session.queue.tallies().values()} == {("rater1",)}


def test_a_restart_keeps_the_token_and_the_port_and_the_page_votes_on(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving()
    page = _open(browsers(), server.url + "&reviewer=ann")
    wait_until_drawn(page)
    page.keyboard.press("2")
    page.wait_for_selector("#progress:has-text('You: 1 answered')")
    port, token = server.port, server.token
    server.stop()

    again = serving()  # no --port: the review's
    assert (again.port, again.token) == (port, token)
    wait_until_drawn(page)  # the page stayed open on its item; it answers it now
    page.keyboard.press("1")
    page.wait_for_selector("#progress:has-text('You: 2 answered')")
    assert (page.text_content("#message") or "") == ""
    assert again.progress("ann").you == 2


def test_named_raters_get_links_that_survive_a_restart(
    browsers: Callable[[], Any], serving: Callable[..., dsreg.ReviewServer]
) -> None:
    server = serving(raters="Ann,bob")
    links = server.links
    assert sorted(links["raters"]) == ["ann", "bob"] and "shared" not in links
    page = _open(browsers(), links["raters"]["ann"])
    assert page.text_content("#reviewer-name") == "ann"
    assert page.is_hidden("#rename")
    wait_until_drawn(page)
    page.keyboard.press("2")
    page.wait_for_selector("#progress:has-text('You: 1 answered')")
    server.stop()

    again = serving()  # no --raters: the review's
    assert again.links == links
    wait_until_drawn(page)
    page.keyboard.press("1")
    page.wait_for_selector("#progress:has-text('You: 2 answered')")
    assert again.progress("ann").you == 2


def _finish_from(page: Any) -> tuple[int, str]:
    status, error = page.evaluate(
        """async () => {
          const token = document.querySelector('meta[name="dsreg-token"]').content;
          const r = await fetch('/api/finish', {method: 'POST', headers: {
            'Content-Type': 'application/json', 'X-Dsreg-Token': token},
            body: JSON.stringify({threshold: 1})});
          return [r.status, (await r.json()).error || ''];
        }"""
    )
    return int(status), str(error)


def test_finishing_is_the_operators_and_an_early_finish_leaves_items_unreviewed(
    browsers: Callable[[], Any],
    serving: Callable[..., dsreg.ReviewServer],
    review_set: ReviewSet,
) -> None:
    server = serving(votes_per_item=3)
    rater = _open(browsers(), server.links["shared"], "carol")
    # carol answers two items: one vote each, of three wanted.
    for answer in ("2", "1"):
        before = server.progress().everyone
        wait_until_drawn(rater)
        rater.keyboard.press(answer)
        rater.wait_for_selector(f"#progress:has-text('You: {before + 1} answered')")
    assert rater.locator("#finish-panel").count() == 0
    status, error = _finish_from(rater)
    assert status == 403 and "operator" in error

    operator = _open(browsers(), server.url + "&reviewer=olga")
    operator.click("#finish-panel summary")
    warning = operator.text_content("#finish-warning") or ""
    assert f"{len(review_set.flagged)} of {len(review_set.flagged)} items" in warning
    operator.fill("#threshold", "2")
    operator.fill("#tag", "early")
    operator.click("#finish button[type=submit]")
    operator.wait_for_selector("#finish-result:has-text('Stored validated overlay')")
    result = operator.text_content("#finish-result") or ""
    assert "unreviewed 2" in result and "errors 0" in result
    assert "non_agreement 0" in result and "Finished early" in result

    # Both voted rows are kept by the cleaned view, with their given labels.
    voted = set(server.session.queue.tallies())
    cleaned = dsreg.open("pets@early", registry=review_set.registry).labels()
    assert voted <= set(cleaned.column("row").to_pylist())
