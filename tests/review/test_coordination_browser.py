"""The coordinator's view and pair items in a real Chromium: the operator watches two raters'
counts and kappa update and opens a split item; a rater's link gets 403; a pair item shows
both images and the distance, its answers survive SIGKILL and a restart, and --finish makes
the validated overlay whose decontaminated view leaves out the confirmed findings only."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairset import PairSet, answer, build_pair_set, login
from reviewset import ReviewSet, Server
from statsmodels.stats.inter_rater import fleiss_kappa

import dsreg

pytestmark = pytest.mark.slow

ANSWERS = ["given", "guessed", "both", "neither"]


def _poll(page: Any, probe: str, want: object, what: str) -> None:
    """Until ``probe`` (a JS function) returns ``want``. (Polled from here: the page's CSP
    forbids the eval that wait_for_function's polling needs.)"""
    deadline = time.monotonic() + 15
    while page.evaluate(probe) != want:
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_coordinator_watches_two_raters(
    browsers: Callable[[], Any], review_set: ReviewSet, tmp_path: Path
) -> None:
    with dsreg.review(
        review_set.spec, raters="ann,bob", votes_per_item=2, registry=review_set.registry
    ) as server:
        ann = login(server, server.links["raters"]["ann"])
        bob = login(server, server.links["raters"]["bob"])
        plan_ann = ["given", "guessed", "both", "neither"]
        plan_bob = ["given", "guessed", "given", "neither", "both"]
        rows = [answer(ann, a)["row"] for a in plan_ann]
        rows_bob = [answer(bob, a)["row"] for a in plan_bob]
        assert rows_bob[:4] == rows
        pairs = zip(plan_ann, plan_bob[:4], strict=True)
        table = [[[a, b].count(x) for x in ANSWERS] for a, b in pairs]
        kappa = float(fleiss_kappa(np.asarray(table, dtype=np.float64)))

        page = browsers().new_page()
        page.goto(server.url)
        page.goto(f"{server.url.split('/?')[0]}/coordinator")
        page.wait_for_selector("#raters tr[data-rater='bob']")
        cells = "(n) => [...document.querySelectorAll('#raters tbody tr')].map(r => r.innerText)"
        assert page.evaluate(cells, None) == ["ann\t4\t0", "bob\t5\t0"]
        assert page.text_content("#complete") == "4 of 8"
        assert page.text_content("#partial") == "1" and page.text_content("#untouched") == "3"
        assert page.text_content("#kappa") == f"{kappa:.3f}"
        split = page.text_content("#disagreements tbody tr td") or ""
        assert f"(row {rows[2]})" in split
        # Live: the view follows the log as raters go on.
        answer(ann, "both")
        _poll(page, "() => document.getElementById('votes').textContent", "10", "no refresh")
        assert page.text_content("#complete") == "5 of 8"
        page.screenshot(path=str(tmp_path / "coordinator.png"), full_page=True)

        # The split item opens on the operator's page, with its votes so far.
        page.click("#disagreements tbody a")
        page.wait_for_selector("#name-input", state="visible")
        page.fill("#name-input", "olga")
        page.keyboard.press("Enter")
        page.wait_for_selector("#opened:has-text('Opened row')")
        assert page.text_content("#row") == str(rows[2])
        assert "(by ann, bob)" in (page.text_content("#opened") or "")
        assert "row=" not in page.url  # opened once: a reload gives the queue's next item

        # A rater's link gets 403 on the view.
        rater = browsers().new_page()
        rater.goto(server.links["raters"]["ann"])
        refused = rater.goto(f"{server.url.split('/?')[0]}/coordinator")
        assert refused is not None and refused.status == 403
        assert "operator" in (rater.text_content("body") or "")


@pytest.fixture
def pair_set(tmp_path: Path) -> PairSet:
    return build_pair_set(tmp_path)


@pytest.fixture
def pair_server(pair_set: PairSet) -> Iterator[Server]:
    as_review = ReviewSet(
        registry=pair_set.registry,
        spec=pair_set.spec,
        overlay=pair_set.audit,
        flagged=sorted(pair_set.findings),
    )
    server = Server(as_review, votes_per_item=2)
    server.args += ["--audit", "--raters", "ann,bob"]
    yield server
    server.stop()


def _drawn(page: Any) -> None:
    """Until the page takes answers: both images decoded and drawn, the guard over."""
    for image in ("example-image", "match-image"):
        probe = f"() => document.getElementById('{image}')?.naturalWidth"
        _poll(page, probe, 64, f"{image} did not load")
    probe = "() => document.body.classList.contains('drawing')"
    _poll(page, probe, False, "the page did not take answers")


def _answer(registry: Path, page: Any, answer: str, *, key: bool) -> int:
    """Answer the shown pair; the row the answer landed on, read from the votes log (a rater's
    page never shows the row or the example id)."""
    _drawn(page)
    before = page.text_content("#progress") or ""
    done = int(before.split("You: ")[1].split(" ")[0])
    if key:
        page.keyboard.press({"same": "1", "different": "2"}[answer])
    else:
        page.click(f"button[data-answer='{answer}']")
    page.wait_for_selector(f"#progress:has-text('You: {done + 1} answered')")
    log = next((registry / "review").glob("*/votes.log"))
    records = [json.loads(line.split(" ", 1)[1]) for line in log.read_text().splitlines()]
    return int([r for r in records if r["op"] == "vote"][-1]["row"])


def test_pairs_in_chromium_survive_a_sigkill_and_finish(
    browsers: Callable[[], Any], pair_set: PairSet, pair_server: Server, tmp_path: Path
) -> None:
    pair_server.start()
    links = pair_server.started["links"]
    assert isinstance(links, dict)
    ann = browsers().new_page()
    ann.goto(links["raters"]["ann"])
    ann.wait_for_selector("#card:not([hidden])")
    _drawn(ann)
    assert ann.text_content("#match-id") == "train003.png"
    assert ann.text_content("#pair-tier") == "exact"
    assert ann.text_content("#pair-distance") == "0 (the same bytes)"
    assert ann.text_content("#pair-verdict") == "contaminated"
    assert ann.is_hidden("button[data-answer='given']")
    assert _answer(pair_set.registry, ann, "same", key=True) == 0
    _drawn(ann)
    # Nearest first: the brightened copy (4 bits) before the noisy one (10 bits).
    assert ann.text_content("#pair-distance") == "4 of 64 bits differ"
    assert ann.get_attribute("#match-image", "alt") == "Match of example 2 of 4"
    ann.screenshot(path=str(tmp_path / "pair.png"), full_page=True)
    assert _answer(pair_set.registry, ann, "different", key=False) == 8

    # SIGKILL right after the answers were acknowledged: they are in the log, and back.
    pair_server.kill()
    log = next((pair_set.registry / "review").glob("*/votes.log"))
    records = [json.loads(line.split(" ", 1)[1]) for line in log.read_text().splitlines()]
    assert [(r["row"], r["answer"]) for r in records if r["op"] == "vote"] == [
        (0, "same"),
        (8, "different"),
    ]
    pair_server.start()
    ann.reload()
    ann.wait_for_selector("#progress:has-text('You: 2 answered')")
    assert _answer(pair_set.registry, ann, "same", key=True) == 9
    assert _answer(pair_set.registry, ann, "same", key=True) == 1
    bob = browsers().new_page()
    bob.goto(links["raters"]["bob"])
    bob.wait_for_selector("#card:not([hidden])")
    for given, row in (("same", 0), ("different", 8), ("same", 9), ("same", 1)):
        assert _answer(pair_set.registry, bob, given, key=given == "same") == row
    bob.wait_for_selector("#done:not([hidden])")

    finished = subprocess.run(
        [sys.executable, "-m", "dsreg", "review", pair_set.spec, "--audit", "--finish",
         "--threshold", "2", "--tag", "reviewed", "--registry", str(pair_set.registry)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert "contaminated   3" in finished.stdout and "non_error      1" in finished.stdout
    everything = {f"test{r:03d}.png" for r in range(pair_set.rows)}
    clean = dsreg.open("test@reviewed", registry=pair_set.registry)
    assert clean.revision.view == "decontaminated"
    kept = set(clean.labels().column("example_id").to_pylist())
    assert kept == everything - {"test000.png", "test001.png", "test009.png"}
