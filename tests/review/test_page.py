"""The review page as a rater and an operator meet it, in a real Chromium: the confirmation of
a saved answer and of an undo, a comment kept with the vote, errors that say what happened to
the answer, the live progress and done page, the phone layout, an audio payload, the example id
kept off a rater's page, the operator's order of the queue; and a damaged session file refused
from the command line."""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reviewset import FOLDERS, ReviewSet

import dsreg

pytestmark = pytest.mark.slow

ROWS = 30  # build_review_set's default
UNREACHABLE = (
    "Not saved: the server could not be reached. Your answer was not recorded; press the key "
    "again when the connection is back."
)


def _wait_for(page: Any, script: str, want: Any, seconds: float = 15) -> None:
    """Poll ``script`` until it gives ``want`` (the page's CSP forbids wait_for_function)."""
    deadline = time.monotonic() + seconds
    while (got := page.evaluate(script)) != want:
        assert time.monotonic() < deadline, f"{script} gave {got!r}, never {want!r}"
        time.sleep(0.02)


def _ready(page: Any) -> None:
    """Until the page takes answers: an item shown, drawn, and the guard after it over."""
    _wait_for(page, "() => !document.getElementById('card').hidden", True)
    _wait_for(page, "() => document.body.classList.contains('drawing')", False)


def _text(page: Any, selector: str) -> str:
    return page.text_content(selector) or ""


@pytest.fixture
def serve(review_set: ReviewSet) -> Iterator[Callable[..., Any]]:
    """``serve(**options)`` -> a running ``dsreg.review`` of the review set, stopped after."""
    started: list[Any] = []

    def start(spec: ReviewSet = review_set, **options: Any) -> Any:
        server = dsreg.review(spec.spec, registry=spec.registry, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_saved_answer_is_confirmed_and_undo_shows_it_selected_with_its_comment(
    browsers: Callable[[], Any], serve: Callable[..., Any], review_set: ReviewSet, tmp_path: Path
) -> None:
    server = serve(votes_per_item=2)
    page = browsers().new_page()
    page.goto(server.links["shared"] + "&reviewer=ann")
    _ready(page)
    assert _text(page, "#position") == "Example 1 of 8"
    page.fill("#comment", "  the ears look like a dog's  ")
    page.click("#card")  # out of the comment box: keys answer again
    page.keyboard.press("3")
    page.wait_for_selector("#saved:has-text('Saved')")
    assert _text(page, "#saved") == (
        "Saved: “Both fit” with your comment for example 1. Press U to undo."
    )
    assert page.input_value("#comment") == ""  # the next item's comment box is empty
    _ready(page)
    page.keyboard.press("u")
    page.wait_for_selector("#saved:has-text('Undone')")
    assert _text(page, "#saved") == (
        "Undone: your answer “Both fit” (shown selected) for example 1. Answer it again."
    )
    assert _text(page, "#position") == "Example 1 of 8"
    both = page.locator("button.answer[data-answer='both']")
    assert "selected" in (both.get_attribute("class") or "")
    assert both.get_attribute("aria-pressed") == "true"
    others = page.locator("button.answer[aria-pressed='true']")
    assert others.count() == 1
    assert page.input_value("#comment") == "the ears look like a dog's"
    _ready(page)
    page.fill("#comment", "on second look, a dog")
    page.click("#card")
    page.keyboard.press("2")
    page.wait_for_selector("#saved:has-text('Suggested label fits')")

    # The log keeps the comment with the vote; the export carries the standing vote's only.
    log = next((review_set.registry / "review").glob("*/votes.log")).read_text()
    votes = [json.loads(line.split(" ", 1)[1]) for line in log.splitlines()]
    commented = [v.get("comment") for v in votes if v["op"] == "vote"]
    assert commented == ["the ears look like a dog's", "on second look, a dog"]
    out = tmp_path / "votes.json"
    dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    (record,) = json.loads(out.read_text())
    assert record["comments"] == [{"reviewer": "ann", "comment": "on second look, a dog"}]
    assert record["mturk"] == {"given": 0, "guessed": 1, "both": 0, "neither": 0}


def test_an_answer_the_server_never_got_says_so_and_what_to_do(
    browsers: Callable[[], Any], serve: Callable[..., Any], review_set: ReviewSet
) -> None:
    server = serve()
    page = browsers().new_page()
    page.goto(server.url + "&reviewer=ann")
    _ready(page)
    server.stop()
    page.keyboard.press("1")
    page.wait_for_selector("#message:has-text('Not saved')")
    assert _text(page, "#message") == UNREACHABLE
    assert "fetch" not in (page.text_content("body") or "").lower()
    assert _text(page, "#saved") == ""
    log = next((review_set.registry / "review").glob("*/votes.log")).read_text()
    assert '"op":"vote"' not in log.replace(" ", "")


def test_the_done_page_counts_every_vote_live(
    browsers: Callable[[], Any], serve: Callable[..., Any], review_set: ReviewSet
) -> None:
    server = serve(votes_per_item=1)
    bob = browsers().new_page()
    bob.goto(server.links["shared"] + "&reviewer=bob")
    _ready(bob)  # bob holds the first item: alice is given the other seven
    alice = browsers().new_page()
    alice.goto(server.links["shared"] + "&reviewer=alice")
    for count in range(1, 8):
        _ready(alice)
        alice.keyboard.press("1")
        alice.wait_for_selector(f"#progress:has-text('You: {count} answered')")
    alice.wait_for_selector("#done:not([hidden])")
    assert _text(alice, "#done-counts") == (
        "Everyone: 7 votes · 7 of 8 items complete · 1 left (you answered 7)"
    )
    bob.keyboard.press("2")
    bob.wait_for_selector("#done:not([hidden])")
    # alice's page, untouched, catches up with bob's vote.
    alice.wait_for_selector("#done-counts:has-text('Everyone: 8 votes')", timeout=10_000)
    assert _text(alice, "#done-counts") == (
        "Everyone: 8 votes · 8 of 8 items complete · 0 left (you answered 7)"
    )
    assert _text(alice, "#progress") == (
        "You: 7 answered · Everyone: 8 votes · Remaining: 0 of 8 items (8 complete)"
    )
    assert alice.evaluate("() => document.getElementById('progress-bar').value") == 8


def test_on_a_phone_the_answers_are_in_reach_and_each_new_item_is_in_view(
    browsers: Callable[[], Any], serve: Callable[..., Any]
) -> None:
    server = serve()
    page = browsers().new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server.links["shared"] + "&reviewer=ann")
    _ready(page)
    assert page.evaluate("() => window.scrollY") == 0
    for selector in ("button.answer[data-answer='given']", "button.answer[data-answer='neither']",
                     "#skip", "#undo", "#example-image"):  # fmt: skip
        box = page.locator(selector).bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 844, selector
    # The example and the answer bar do not overlap: the image is seen whole.
    image = page.locator("#example-image").bounding_box()
    bar = page.locator("#answer-bar").bounding_box()
    assert image is not None and bar is not None and image["y"] + image["height"] <= bar["y"]

    # A smaller phone, scrolled to the bottom (the metadata, the comment box): the card's top
    # is out of sight when the answer is tapped.
    page.set_viewport_size({"width": 375, "height": 667})
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    assert page.evaluate("() => document.getElementById('card').getBoundingClientRect().top") < 0
    before = _text(page, "#position")
    page.click("button.answer[data-answer='guessed']")
    page.wait_for_selector("#saved:has-text('Saved')")
    assert _text(page, "#position") != before
    top = page.evaluate("() => document.getElementById('card').getBoundingClientRect().top")
    assert 0 <= top < 667 / 3


def _wav(seconds: float = 0.25, rate: int = 8000) -> bytes:
    """A mono 16-bit PCM WAV of a quiet tone, written by hand (the test's own file)."""
    frames = int(seconds * rate)
    samples = b"".join(struct.pack("<h", 1000 if (i // 20) % 2 else -1000) for i in range(frames))
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(samples), b"WAVE", b"fmt ", 16, 1, 1, rate,
        rate * 2, 2, 16, b"data", len(samples),
    )  # fmt: skip
    return header + samples


def test_an_audio_payload_plays_in_the_page(
    browsers: Callable[[], Any], make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    sounds = make_review_set("sounds", payloads="none", ids="plain")
    media = tmp_path / "media"
    media.mkdir()
    for row in range(ROWS):
        (media / f"ex{row:05d}.wav").write_bytes(_wav())
    with dsreg.review(sounds.spec, media=media, registry=sounds.registry) as server:
        page = browsers().new_page()
        page.goto(server.links["shared"] + "&reviewer=ann")
        _ready(page)
        assert page.locator("#payload audio").count() == 1
        audio = page.locator("#example-audio")
        assert audio.get_attribute("controls") is not None
        assert audio.get_attribute("aria-label") == "Example 1 of 8"
        # Chromium decodes it: the player knows its length.
        _wait_for(page, "() => document.getElementById('example-audio').readyState >= 1", True)
        duration = page.evaluate("() => document.getElementById('example-audio').duration")
        assert abs(duration - 0.25) < 0.01
        page.keyboard.press("1")
        page.wait_for_selector("#progress:has-text('You: 1 answered')")


def _png(size: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (size, size), (90, 140, 200)).save(buf, format="PNG")
    return buf.getvalue()


def test_a_rater_never_sees_the_example_id_and_the_operator_does(
    browsers: Callable[[], Any], make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    # ImageFolder-like ids name the class: "cat/ex00007.png".
    folders = make_review_set("folders", payloads="none", ids="folders")
    media = tmp_path / "media"
    for row in range(ROWS):
        path = media / FOLDERS[row % 3] / f"ex{row:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_png(32))
    ids = {f"{FOLDERS[row % 3]}/ex{row:05d}.png" for row in folders.flagged}
    with dsreg.review(folders.spec, media=media, raters="ann", registry=folders.registry) as server:
        rater = browsers().new_page()
        rater.goto(server.links["raters"]["ann"])
        seen = 0
        while rater.is_hidden("#done"):
            _ready(rater)
            html = rater.evaluate("() => document.documentElement.outerHTML")
            text = rater.evaluate("() => document.body.innerText")
            alt = rater.get_attribute("#example-image", "alt") or ""
            assert not [i for i in ids if i in html or i in text], "an id is on the page"
            assert "ex0" not in text and "ex0" not in alt and "/" not in alt
            assert alt == _text(rater, "#position")
            assert rater.locator("#example-id").count() == 0
            seen += 1
            rater.keyboard.press("4")
            rater.wait_for_selector(f"#progress:has-text('You: {seen} answered')")
        assert seen == len(folders.flagged)

        operator = browsers().new_page()
        operator.goto(server.url + "&reviewer=olga")
        _ready(operator)
        assert _text(operator, "#example-id") in ids


def test_the_image_fits_the_window_and_opens_at_its_own_size(
    browsers: Callable[[], Any], make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    sizes = make_review_set("sizes", payloads="none", ids="plain")
    media = tmp_path / "media"
    media.mkdir()
    for row in range(ROWS):  # a large photo-sized image for every example
        (media / f"ex{row:05d}.png").write_bytes(_png(1600))
    with dsreg.review(sizes.spec, media=media, registry=sizes.registry) as server:
        page = browsers().new_page()
        page.set_viewport_size({"width": 1366, "height": 768})
        page.goto(server.links["shared"] + "&reviewer=ann")
        _ready(page)
        box = page.locator("#example-image").bounding_box()
        assert box is not None and box["y"] + box["height"] <= 768 and box["width"] < 1600
        # Scaled down smoothly: a photo is not pixelated.
        rendering = (
            "() => getComputedStyle(document.getElementById('example-image')).imageRendering"
        )
        assert page.evaluate(rendering) == "auto"
        page.click("#example-image")
        page.wait_for_selector("#zoom-view:not([hidden])")
        width = "() => document.querySelector('#zoom-box img').getBoundingClientRect().width"
        assert page.evaluate(width) == 1600
        page.keyboard.press("Escape")
        page.wait_for_selector("#zoom-view", state="hidden")


def test_a_tiny_image_is_scaled_up_crisply(
    browsers: Callable[[], Any], serve: Callable[..., Any]
) -> None:
    server = serve()
    page = browsers().new_page()
    page.goto(server.links["shared"] + "&reviewer=ann")
    _ready(page)  # the review set's images are 32x32
    box = page.locator("#example-image").bounding_box()
    assert box is not None and box["width"] >= 4 * 32
    rendering = "() => getComputedStyle(document.getElementById('example-image')).imageRendering"
    assert page.evaluate(rendering) == "pixelated"


def test_a_rank_shared_by_items_of_the_same_score_says_so(
    browsers: Callable[[], Any], serve: Callable[..., Any], make_review_set: Callable[..., Any]
) -> None:
    # The three worst items share one score: each is "tied 1st", the next is 4th, alone.
    server = serve(make_review_set("tied", tied=3), votes_per_item=1)
    items = server.session.queue.items
    assert len({it.score for it in items[:3]}) == 1 and items[3].score > items[0].score
    page = browsers().new_page()
    page.goto(server.links["shared"] + "&reviewer=ann")
    for n, item in enumerate(items[:4], 1):
        _ready(page)
        assert _text(page, "#position") == f"Example {n} of 8"
        want = "4th most suspicious of 8"
        if n <= 3:
            want = "tied 1st most suspicious of 8 (3 items share this score)"
        assert _text(page, "#rank") == want
        assert page.get_attribute("#rank", "title") == f"score {item.score:.6g}"
        page.keyboard.press("1")
        page.wait_for_selector(f"#progress:has-text('You: {n} answered')")


_LOOK = """() => [getComputedStyle(document.documentElement).backgroundColor,
  getComputedStyle(document.querySelector(".panel")).borderTopLeftRadius,
  getComputedStyle(document.querySelector(".brand")).color]"""
_STYLED = ["rgb(244, 246, 249)", "10px", "rgb(40, 97, 67)"]  # review.css's, not the browser's


def test_the_error_pages_are_styled_without_the_token(
    browsers: Callable[[], Any], serve: Callable[..., Any]
) -> None:
    server = serve(raters="ann")
    origin = server.url.split("/?")[0]
    refused: list[str] = []
    stranger = browsers().new_page()  # no token: it may load nothing from /static
    stranger.on("console", lambda m: refused.append(m.text) if "Security" in m.text else None)
    assert stranger.goto(origin + "/").status == 403
    assert "access token" in _text(stranger, "#error-message")
    assert stranger.evaluate(_LOOK) == _STYLED
    rater = browsers().new_page()  # a rater opening the operator's view gets the page, not JSON
    rater.on("console", lambda m: refused.append(m.text) if "Security" in m.text else None)
    rater.goto(server.links["raters"]["ann"])
    _ready(rater)
    assert rater.goto(origin + "/coordinator").status == 403
    assert _text(rater, "#error-message").startswith("The coordinator's view is the operator's")
    assert rater.evaluate(_LOOK) == _STYLED
    assert rater.goto(origin + "/no/such/page").status == 404
    assert rater.evaluate(_LOOK) == _STYLED
    assert refused == []  # the page's Content-Security-Policy let its own style apply


def test_the_score_shows_as_a_rank_and_the_operator_orders_the_queue(
    browsers: Callable[[], Any], serve: Callable[..., Any], review_set: ReviewSet
) -> None:
    server = serve()
    items = server.session.queue.items
    page = browsers().new_page()
    page.goto(server.url + "&reviewer=olga")
    _ready(page)
    assert _text(page, "#rank") == "1st most suspicious of 8"
    assert page.get_attribute("#rank", "title") == f"score {items[0].score:.6g}"
    page.select_option("#sort", "best")
    page.wait_for_selector(f"#row:text-is('{items[-1].row}')")
    _ready(page)
    assert _text(page, "#rank") == "8th most suspicious of 8"
    pair = f"{items[2].given},{items[2].suggested}"
    page.select_option("#pair", pair)
    want = [it.row for it in reversed(items) if f"{it.given},{it.suggested}" == pair]
    page.wait_for_selector(f"#row:text-is('{want[0]}')")
    for count, row in enumerate(want, 1):
        _ready(page)
        assert _text(page, "#row") == str(row)
        page.keyboard.press("1")
        page.wait_for_selector(f"#progress:has-text('You: {count} answered')")
    page.wait_for_selector("#done:not([hidden])")  # nothing left of that pair

    # A rater cannot reorder: the control is not on their page, and the request is refused.
    rater = browsers().new_page()
    rater.goto(server.links["shared"] + "&reviewer=ann")
    _ready(rater)
    assert rater.locator("#sort").count() == 0
    token = rater.get_attribute("meta[name='dsreg-token']", "content")
    status = rater.evaluate(
        """async (token) => (await fetch("/api/order", {method: "POST",
             headers: {"Content-Type": "application/json", "X-Dsreg-Token": token},
             body: JSON.stringify({reviewer: "ann", sort: "best"})})).status""",
        token,
    )
    assert status == 403
