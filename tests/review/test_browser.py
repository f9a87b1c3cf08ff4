"""The review page end to end in a real Chromium: two reviewers, mouse and keyboard, the server
killed with SIGKILL and restarted, finishing, escaping, the token and cross-site requests."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reviewset import XSS_CLASS, ReviewSet, Server

import dsreg

pytestmark = pytest.mark.slow

KEYS = {"given": "1", "guessed": "2", "both": "3", "neither": "4"}


@pytest.fixture
def server_process(review_set: ReviewSet) -> Iterator[Callable[[int], Server]]:
    made: list[Server] = []

    def make(votes_per_item: int) -> Server:
        server = Server(review_set, votes_per_item)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


class Reviewer:
    """One person at one browser."""

    def __init__(self, context: Any, name: str) -> None:
        self.page = context.new_page()
        self.name = name
        self.answered: list[tuple[int, str]] = []
        self.seen_script_class = False
        self.dialogs: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, url: str, *, type_name: bool) -> None:
        self.page.goto(url)
        if type_name:
            self.page.wait_for_selector("#name-input", state="visible")
            self.page.click("#name-input")
            self.page.keyboard.type(self.name)
            self.page.keyboard.press("Enter")
        self.page.wait_for_selector("#progress:has-text('You:')")
        assert self.page.text_content("#reviewer-name") == self.name

    def you(self) -> int:
        text = self.page.text_content("#progress") or ""
        return int(text.split("You: ")[1].split(" ")[0])

    def current(self) -> int | None:
        if self.page.is_visible("#done"):
            return None
        self.page.wait_for_selector("#card:not([hidden])")
        return int(self.page.text_content("#row") or "-1")

    def answer(self, answer: str, *, keyboard: bool) -> int:
        row = self.current()
        assert row is not None
        given = self.page.text_content("#given")
        suggested = self.page.text_content("#suggested")
        self.seen_script_class |= XSS_CLASS in (given, suggested)
        wait_until_drawn(self.page)
        before = self.you()
        if keyboard:
            self.page.keyboard.press(KEYS[answer])
        else:
            self.page.click(f"button[data-answer='{answer}']")
        self.page.wait_for_selector(f"#progress:has-text('You: {before + 1} answered')")
        self.answered.append((row, answer))
        return row


def wait_until_drawn(page: Any) -> None:
    """Until the page takes answers: the example, the PNG itself, decoded and drawn, and the
    guard after it over. (Polled from here: the page's CSP forbids the eval that
    wait_for_function's polling needs.)"""
    deadline = time.monotonic() + 15
    width = "() => document.getElementById('example-image')?.naturalWidth"
    while page.evaluate(width) != 32:
        assert time.monotonic() < deadline, "the example's image did not load"
        time.sleep(0.02)
    drawing = "() => document.body.classList.contains('drawing')"
    while page.evaluate(drawing):
        assert time.monotonic() < deadline, "the page did not take answers"
        time.sleep(0.02)


def _logged(review_set: ReviewSet, tmp_path: Path) -> set[tuple[str, int]]:
    """(reviewer, row) of every vote the registry holds, from its export."""
    out = tmp_path / "check.json"
    dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    index = {f"ex{row:05d}.png": row for row in review_set.flagged}
    return {
        (name, index[record["id"]])
        for record in json.loads(out.read_text())
        for name in record["reviewers"]
    }


def test_two_reviewers_survive_a_sigkill_and_finish(
    browsers: Callable[[], Any],
    server_process: Callable[[int], Server],
    review_set: ReviewSet,
    tmp_path: Path,
) -> None:
    server = server_process(2)
    url = server.start()
    alice = Reviewer(browsers(), "alice")
    bob = Reviewer(browsers(), "bob")
    alice.open(url, type_name=True)
    bob.open(url, type_name=True)

    # Both work the same queue at once; with two votes an item, both see it, once each.
    plan = ["given", "guessed", "both", "neither", "guessed", "given", "neither", "both"]
    for i in range(4):
        alice.answer(plan[i], keyboard=False)  # the mouse
        bob.answer(plan[i] if i < 3 else "guessed", keyboard=True)  # the keyboard

    # SIGKILL right after answers were acknowledged, then a torn line as a crash may leave.
    server.kill()
    log = next((review_set.registry / "review").glob("*/votes.log"))
    with log.open("ab") as f:
        f.write(b'1234abcd {"op":"vote","reviewer":"bob","ro')
    url = server.start()
    # The name is remembered by each browser; every answer is still there.
    alice.open(url, type_name=False)
    bob.open(url, type_name=False)
    assert alice.you() == 4 and bob.you() == 4
    assert _logged(review_set, tmp_path) == {
        (who.name, row) for who in (alice, bob) for row, _ in who.answered
    }

    # Undo by key, then the rest; nobody is shown an item twice.
    alice.answer(plan[4], keyboard=True)
    alice.page.keyboard.press("u")
    alice.page.wait_for_selector("#progress:has-text('You: 4 answered')")
    undone = alice.answered.pop()
    assert alice.current() == undone[0]
    for i in range(4, 8):
        alice.answer(plan[i], keyboard=i % 2 == 0)
        bob.answer(plan[i], keyboard=i % 2 == 1)
    assert alice.current() is None and bob.current() is None
    for who in (alice, bob):
        rows = [row for row, _ in who.answered]
        assert sorted(rows) == sorted(review_set.flagged) and len(set(rows)) == len(rows)
    alice.page.reload()  # the line counts bob's last vote too
    alice.page.wait_for_selector("#progress:has-text('Remaining: 0')")
    assert alice.page.text_content("#progress") == (
        "You: 8 answered · Everyone: 16 votes · Remaining: 0 of 8 items (8 complete)"
    )

    # The class named like a script tag was shown, as text, and ran nothing.
    assert alice.seen_script_class or bob.seen_script_class
    assert alice.dialogs == [] and bob.dialogs == []

    # Finish on the page: threshold 2 of 2 votes. Agreement on items 0-2 and 4-7 (given,
    # guessed, both, guessed, given, neither, both); item 3 split neither/guessed.
    page = alice.page
    page.click("#finish-panel summary")
    page.fill("#threshold", "2")
    page.click("#finish button[type=submit]")
    page.wait_for_selector("#finish-result:has-text('Stored validated overlay')")
    text = page.text_content("#finish-result") or ""
    assert "non_error 2" in text and "correctable 2" in text and "multi_label 2" in text
    assert "neither 1" in text and "non_agreement 1" in text
    stored = page.get_attribute("#finish-result", "data-overlay")
    again = dsreg.review_finish(review_set.spec, threshold=2, registry=review_set.registry)
    assert again.digest == stored


class _Attacker(http.server.BaseHTTPRequestHandler):
    """A page on another origin (same site: 127.0.0.1, another port) that posts to the review
    server, with the victim's SameSite cookie going along."""

    target = ""
    row = 0

    def do_GET(self) -> None:
        body = f"""<!doctype html><body>
<form id=f method=POST action="{self.target}/api/vote" enctype="text/plain">
<input name='{{"reviewer":"eve","row":{self.row},"answer":"given","x":"' value='"}}'></form>
<script>
fetch("{self.target}/api/vote", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}},
  body: JSON.stringify({{reviewer: "eve", row: {self.row}, answer: "given"}})}})
  .finally(() => document.getElementById("f").submit());
</script></body>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_no_token_gets_403_and_cross_site_posts_are_refused(
    browsers: Callable[[], Any],
    server_process: Callable[[int], Server],
    review_set: ReviewSet,
) -> None:
    url = server_process(5).start()
    origin = url.split("/?")[0]
    stranger = browsers().new_page()
    assert stranger.goto(origin + "/").status == 403
    assert "access token" in (stranger.text_content("body") or "")

    victim = browsers()
    page = victim.new_page()
    page.goto(url)  # logged in: the cookie is set
    page.wait_for_selector("#name-input", state="visible")
    _Attacker.target = origin
    _Attacker.row = review_set.flagged[0]
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        evil = victim.new_page()
        with evil.expect_navigation(url=f"{origin}/api/vote") as navigation:
            evil.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
        assert navigation.value.status == 403
    finally:
        attacker.shutdown()
        attacker.server_close()
    log = next((review_set.registry / "review").glob("*/votes.log"))
    assert b"eve" not in log.read_bytes()


def test_an_item_filled_while_its_lease_ran_out_moves_the_page_on(
    browsers: Callable[[], Any], review_set: ReviewSet
) -> None:
    with dsreg.review(
        review_set.spec, votes_per_item=1, lease_seconds=0.3, registry=review_set.registry
    ) as server:
        alice = browsers().new_page()
        alice.goto(server.url + "&reviewer=alice")
        alice.wait_for_selector("#progress:has-text('You: 0')")
        first = alice.text_content("#row")
        time.sleep(0.5)  # alice's lease runs out; bob is given the same item and answers it
        bob = browsers().new_page()
        bob.goto(server.url + "&reviewer=bob")
        bob.wait_for_selector("#progress:has-text('You: 0')")
        assert bob.text_content("#row") == first
        wait_until_drawn(bob)
        bob.click("button[data-answer='given']")
        bob.wait_for_selector("#progress:has-text('You: 1')")
        wait_until_drawn(alice)
        alice.click("button[data-answer='guessed']")
        alice.wait_for_selector("#message:has-text('has its 1 votes already')")
        deadline = time.monotonic() + 10
        while alice.text_content("#row") == first:
            assert time.monotonic() < deadline, "the page stayed on the filled item"
            time.sleep(0.05)
        assert "You: 0 answered" in (alice.text_content("#progress") or "")
