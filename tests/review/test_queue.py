"""The review queue and its votes log through the app (Starlette's TestClient): assignment,
leases, undo, durability, torn-log repair, export and finish."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reviewset import ReviewSet
from starlette.testclient import TestClient

import dsreg

BASE = "http://127.0.0.1"


class Page:
    """One reviewer's browser, as the page's script talks to the server: a vote or skip
    carries the ticket the server handed out with the item it names."""

    def __init__(self, server: dsreg.ReviewServer, reviewer: str) -> None:
        self.client = TestClient(server.asgi(), base_url=BASE)
        self.reviewer = reviewer
        assert self.client.get(f"/?token={server.token}", follow_redirects=False).status_code == 303
        self.headers = {"X-Dsreg-Token": server.token, "Origin": BASE}
        self.tickets: dict[int, str] = {}

    def post(self, path: str, **body: Any) -> Any:
        if path in ("/api/vote", "/api/skip") and body.get("row") in self.tickets:
            body.setdefault("ticket", self.tickets[body["row"]])
        response = self.client.post(
            path, json={"reviewer": self.reviewer, **body}, headers=self.headers
        )
        item = response.json().get("item") if response.status_code == 200 else None
        if item:
            self.tickets[item["row"]] = item["ticket"]
        return response

    def next(self) -> dict[str, Any]:
        response = self.post("/api/next")
        assert response.status_code == 200, response.text
        return response.json()

    def vote(self, row: int, answer: str) -> dict[str, Any]:
        response = self.post("/api/vote", row=row, answer=answer)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
def serve(review_set: ReviewSet) -> Iterator[Any]:
    servers: list[dsreg.ReviewServer] = []

    def make(**kwargs: Any) -> dsreg.ReviewServer:
        server = dsreg.review(review_set.spec, registry=review_set.registry, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def _log(review_set: ReviewSet) -> Path:
    return review_set.registry / "review" / review_set.overlay.removeprefix("blake3:") / "votes.log"


def test_worst_first_and_nobody_sees_an_item_twice(serve: Any, review_set: ReviewSet) -> None:
    server = serve(votes_per_item=2)
    alice, bob = Page(server, "alice"), Page(server, "bob")
    seen: dict[str, list[int]] = {"alice": [], "bob": []}
    for _ in range(len(review_set.flagged)):
        for page in (alice, bob):
            item = page.next()["item"]
            seen[page.reviewer].append(item["row"])
            page.vote(item["row"], "given")
    # Two votes per item: each reviewer sees every item once, worst score first.
    assert seen["alice"] == review_set.flagged
    assert seen["bob"] == review_set.flagged
    final = alice.next()
    assert final["item"] is None
    assert final["progress"] == {
        "you": 8,
        "everyone": 16,
        "complete": 8,
        "remaining": 0,
        "items": 8,
    }


def test_a_lease_keeps_an_item_from_others_until_it_expires(
    serve: Any, review_set: ReviewSet
) -> None:
    server = serve(votes_per_item=1, lease_seconds=0.3)
    alice, bob = Page(server, "alice"), Page(server, "bob")
    first = alice.next()["item"]["row"]
    assert bob.next()["item"]["row"] != first  # one vote left, alice holds it
    assert alice.next()["item"]["row"] == first  # a reload shows alice the same item
    time.sleep(0.4)
    carol = Page(server, "carol")
    assert carol.next()["item"]["row"] == first  # alice's lease ran out
    # The item takes no vote beyond its one.
    alice.vote(first, "guessed")
    refused = carol.post("/api/vote", row=first, answer="given")
    assert refused.status_code == 409
    assert "has its 1 votes already" in refused.json()["error"]
    # Nor one from a rater it was never handed to: not saved.
    stranger = Page(server, "dave").post("/api/vote", row=first, answer="given")
    assert stranger.status_code == 409 and "NOT saved" in stranger.json()["error"]


def test_undo_is_a_record_and_brings_the_item_back(serve: Any, review_set: ReviewSet) -> None:
    server = serve()
    alice = Page(server, "alice")
    row = alice.next()["item"]["row"]
    after = alice.vote(row, "neither")
    assert after["progress"]["you"] == 1 and after["item"]["row"] != row
    undone = alice.post("/api/undo")
    assert undone.status_code == 200
    assert undone.json()["item"]["row"] == row
    assert undone.json()["progress"]["you"] == 0
    alice.vote(row, "both")
    ops = [json.loads(line[9:])["op"] for line in _log(review_set).read_text().splitlines()]
    assert ops == ["open", "vote", "undo", "vote"]
    # Skip: not shown again; undo brings it back.
    skipped = alice.next()["item"]["row"]
    assert alice.post("/api/skip", row=skipped).json()["item"]["row"] != skipped
    assert alice.post("/api/undo").json()["item"]["row"] == skipped
    assert Page(server, "bob").post("/api/undo").status_code == 409


def test_votes_survive_a_restart_and_a_torn_tail_is_cut(serve: Any, review_set: ReviewSet) -> None:
    server = serve()
    alice = Page(server, "alice")
    for answer in ("given", "guessed", "both"):
        alice.vote(alice.next()["item"]["row"], answer)
    server.stop()
    log = _log(review_set)
    intact = log.read_bytes()
    # A crash mid-write: a torn line, then a line that looks whole after it (never trusted).
    with log.open("ab") as f:
        f.write(b'0badc0de {"op":"vote","reviewer":"mallory","row":')
        f.write(b'\n00000000 {"op":"vote"}\n')
    again = serve()
    assert log.read_bytes() == intact  # cut back to the last complete, checked record
    assert again.session.log.repaired > 0
    assert Page(again, "alice").next()["progress"]["you"] == 3
    assert Page(again, "bob").next()["progress"]["everyone"] == 3


def test_one_server_per_queue(serve: Any) -> None:
    serve()
    with pytest.raises(dsreg.StorageError, match="another review server"):
        serve()


def test_export_imports_to_the_finish_digest(
    serve: Any, review_set: ReviewSet, tmp_path: Path
) -> None:
    server = serve(votes_per_item=3)
    answers = {
        "alice": ["given", "guessed", "both", "neither", "guessed"],
        "bob": ["given", "guessed", "both", "neither", "given"],
        "carol": ["given", "guessed", "both", "given", "neither"],
    }
    rows: list[int] = []
    for name, theirs in answers.items():
        page = Page(server, name)
        for index, answer in enumerate(theirs):
            row = page.next()["item"]["row"]
            if name == "alice":
                rows.append(row)
            assert row == rows[index]
            page.vote(row, answer)
    out = tmp_path / "votes.json"
    assert dsreg.review_export(review_set.spec, out, registry=review_set.registry) == 5
    records = {r["id"]: r for r in json.loads(out.read_text())}
    worst = records[f"ex{rows[0]:05d}.png"]
    assert worst["mturk"] == {"given": 3, "guessed": 0, "both": 0, "neither": 0}
    assert worst["reviewers"] == ["alice", "bob", "carol"]
    assert worst["queue"] == review_set.overlay
    imported = dsreg.import_votes(review_set.spec, out, threshold=2, registry=review_set.registry)
    finished = dsreg.review_finish(review_set.spec, threshold=2, registry=review_set.registry)
    assert finished.digest == imported.digest
    # The rule of import-votes at t=2: given 3 -> non_error; guessed 3 -> correctable; both 3
    # -> multi_label; neither 2 -> neither; guessed 1 given 1 neither 1 -> non_agreement.
    assert {k: finished.summary[k] for k in ("non_error", "correctable", "multi_label")} == {
        "non_error": 1,
        "correctable": 1,
        "multi_label": 1,
    }
    assert finished.summary["neither"] == 1 and finished.summary["non_agreement"] == 1
    manifest = dsreg.overlay_show(finished.digest, registry=review_set.registry).overlay
    assert manifest.producer["inputs"]["queue"] == review_set.overlay
    assert manifest.producer["params"]["reviewers"] == ["alice", "bob", "carol"]
    # The page's button stores the same overlay.
    page = Page(server, "alice")
    stored = page.post("/api/finish", threshold=2)
    assert stored.status_code == 200 and stored.json()["overlay"] == finished.digest


def test_finish_without_votes_is_refused(review_set: ReviewSet) -> None:
    with pytest.raises(dsreg.VotesError, match="no votes yet"):
        dsreg.review_finish(review_set.spec, registry=review_set.registry)


def test_label_only_and_text_items(make_review_set: Any) -> None:
    label_only = make_review_set("labels", payloads="none")
    with dsreg.review(label_only.spec, registry=label_only.registry) as server:
        page = Page(server, "alice")
        item = page.next()["item"]
        assert item["payload"] is None
        assert item["metadata"] == [["note", f"note {item['row']}"]]
    texts = make_review_set("texts", payloads="text")
    with dsreg.review(texts.spec, registry=texts.registry) as server:
        page = Page(server, "alice")
        item = page.next()["item"]
        got = page.client.get(item["payload"])
        assert got.headers["content-type"] == "text/plain; charset=utf-8"
        assert got.text.startswith(f"text of example {item['row']} <b>")


def test_an_export_naming_two_queues_is_refused(
    serve: Any, review_set: ReviewSet, tmp_path: Path
) -> None:
    server = serve()
    alice = Page(server, "alice")
    for _ in range(2):
        alice.vote(alice.next()["item"]["row"], "guessed")
    out = tmp_path / "votes.json"
    dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    records = json.loads(out.read_text())
    records[1]["queue"] = "blake3:" + "0" * 64
    out.write_text(json.dumps(records))
    with pytest.raises(dsreg.VotesError, match="2 different review queues"):
        dsreg.import_votes(review_set.spec, out, registry=review_set.registry)
    records[1]["queue"] = "not a digest"
    out.write_text(json.dumps(records))
    with pytest.raises(dsreg.VotesError, match="queue must be an overlay digest"):
        dsreg.import_votes(review_set.spec, out, registry=review_set.registry)


def test_random_interleavings_keep_the_rules_and_replay_alike(
    make_review_set: Any, tmp_path: Path
) -> None:
    import numpy as np

    review_set = make_review_set("random", rows=30, flagged=6)
    rng = np.random.default_rng(7)
    names = ["ann", "bo", "cy"]
    server = dsreg.review(review_set.spec, votes_per_item=2, registry=review_set.registry)
    try:
        pages = {name: Page(server, name) for name in names}
        for _ in range(80):
            page = pages[names[int(rng.integers(3))]]
            op = rng.choice(["next", "vote", "skip", "undo"], p=[0.2, 0.5, 0.1, 0.2])
            item = page.next()["item"]
            if op == "vote" and item is not None:
                answer = ("given", "guessed", "both", "neither")[int(rng.integers(4))]
                response = page.post("/api/vote", row=item["row"], answer=answer)
            elif op == "skip" and item is not None:
                response = page.post("/api/skip", row=item["row"])
            elif op == "undo":
                response = page.post("/api/undo")
            else:
                continue
            assert response.status_code in (200, 409), response.text
        before = {name: page.next()["progress"] for name, page in pages.items()}
    finally:
        server.stop()
    out = tmp_path / "random.json"
    dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    counts = []
    for record in json.loads(out.read_text()):
        votes = sum(record["mturk"].values())
        # One vote per reviewer per item, and never more than the item takes.
        assert votes == len(record["reviewers"]) <= 2
        counts.append(votes)
    # The progress every page shows is the votes the export holds, after votes and undos.
    shown = next(iter(before.values()))
    assert shown["everyone"] == sum(counts)
    assert shown["complete"] == sum(c >= 2 for c in counts)
    assert shown["remaining"] == shown["items"] - shown["complete"]
    with dsreg.review(review_set.spec, votes_per_item=2, registry=review_set.registry) as again:
        after = {name: Page(again, name).next()["progress"] for name in names}
    assert after == before


_SCORES = st.lists(st.one_of(st.none(), st.sampled_from([0.1, 0.2, 0.25, 0.5])), max_size=30)


@settings(max_examples=200, deadline=None)
@given(scores=_SCORES)
def test_a_rank_counts_the_items_of_lower_score_and_those_sharing_its_own(
    scores: list[float | None],
) -> None:
    from dsreg.reviewing.queue import Item
    from dsreg.reviewing.session import _ranks

    items = [Item(row=r, example_id=f"e{r}", given=0, suggested=1, score=s, blob=None, size=None)
             for r, s in enumerate(scores)]  # fmt: skip
    ranks = _ranks(items)
    scored = [s for s in scores if s is not None]
    assert set(ranks) == {r for r, s in enumerate(scores) if s is not None}
    for row, (rank, tied) in ranks.items():
        score = scores[row]
        assert rank == 1 + sum(s < score for s in scored)  # type: ignore[operator]
        assert tied == scored.count(score) >= 1
