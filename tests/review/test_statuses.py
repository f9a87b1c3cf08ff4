"""The review API's error statuses follow one table (``app.STATUSES``, docs/review.md,
"Security"): finishing into a tag that exists is a conflict (409) with its message, shown on
the page, and nothing is stored; a request body's JSON nests at most 32 levels."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pairset import BOTH_REVIEWS, PairSet, Review, login
from reviewset import ReviewSet, Server
from test_browser import wait_until_drawn

import dsreg
from dsreg.errors import (
    AmbiguousDigestError,
    CorruptObjectError,
    DsregError,
    InvalidInputError,
    NotFoundError,
    ReviewConflictError,
    RevisionNotFoundError,
    StorageError,
    TagExistsError,
    VotesError,
)
from dsreg.reviewing.app import REQUEST_DEPTH, STATUSES, status_of
from dsreg.reviewing.media import MediaRefusedError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (MediaRefusedError("x"), 403),
        (ReviewConflictError("x"), 409),
        (TagExistsError("x"), 409),
        (RevisionNotFoundError("x"), 404),
        (NotFoundError("x"), 404),
        (AmbiguousDigestError("x"), 400),
        (VotesError("x"), 400),
        (InvalidInputError("x"), 400),
        (CorruptObjectError("x"), 500),
        (StorageError("x"), 500),
        (DsregError("x"), 500),
    ],
)
def test_each_kind_of_error_has_its_status(error: DsregError, status: int) -> None:
    assert status_of(error) == status


def test_the_status_table_is_the_documented_one() -> None:
    """docs/review.md lists each status the API answers and the errors that get it."""
    text = (REPO / "docs" / "review.md").read_text()
    table = text.split("| status | when |")[1].split("\n\n")[0]
    documented = {int(line.split("|")[1]) for line in table.splitlines()[2:]}
    assert {status for _, status in STATUSES} | {413, 500} == documented
    assert f"nested at most {REQUEST_DEPTH} deep" in text


def test_finishing_into_an_existing_tag_is_a_409_and_stores_nothing(
    review_set: ReviewSet,
    pair_set: PairSet,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    for spec, reg, audit, tag in (
        (review_set.spec, review_set.registry, False, "v1"),
        (pair_set.spec, pair_set.registry, True, "v1"),
    ):
        with dsreg.review(spec, audit=audit, registry=reg) as server:
            client = login(server, server.url)
            item = client.post("/api/next", json={"reviewer": "ann"}).json()["item"]
            answer = "same" if audit else "guessed"
            voted = {"reviewer": "ann", "row": item["row"], "ticket": item["ticket"]}
            assert client.post("/api/vote", json={**voted, "answer": answer}).status_code == 200
            before = registry_state(reg)
            refused = client.post("/api/finish", json={"threshold": 1, "tag": tag})
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert f"@{tag} exists at" in error and "--force" in error
            assert registry_state(reg) == before  # no overlay stored, no tag moved
            done = client.post("/api/finish", json={"threshold": 1, "tag": "reviewed"})
            assert done.status_code == 200 and done.json()["tagged"].endswith("@reviewed")


def _nested(depth: int) -> bytes:
    """A request body of ``depth`` levels: the object, then lists in one of its fields."""
    inner = depth - 1
    return b'{"reviewer": "ann", "x": ' + b"[" * inner + b"]" * inner + b"}"


def test_request_json_nests_at_most_the_documented_depth(review_set: ReviewSet) -> None:
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        client = login(server, server.url)
        headers = {"Content-Type": "application/json"}
        fits = client.post("/api/next", content=_nested(REQUEST_DEPTH), headers=headers)
        assert fits.status_code == 200, fits.text
        for depth in (REQUEST_DEPTH + 1, 64):
            deeper = client.post("/api/next", content=_nested(depth), headers=headers)
            assert deeper.status_code == 400
            assert deeper.json() == {
                "error": f"request body: JSON nested deeper than {REQUEST_DEPTH} levels"
            }


@pytest.fixture
def server(review_set: ReviewSet) -> Iterator[Server]:
    made = Server(review_set)
    yield made
    made.stop()


def test_the_page_shows_the_conflict_of_a_finish(
    server: Server, browsers: Callable[[], Any], review_set: ReviewSet
) -> None:
    """The operator's Finish panel, into a tag that exists: the page shows the server's
    message (the answer is a 409, not a server failure)."""
    url = server.start()
    page = browsers().new_page()
    page.goto(url)
    page.wait_for_selector("#name-input", state="visible")
    page.fill("#name-input", "op")
    page.keyboard.press("Enter")
    wait_until_drawn(page)
    page.click("#finish-panel summary")
    page.fill("#threshold", "1")
    page.fill("#tag", "v1")
    page.click("#finish button[type=submit]")
    page.wait_for_selector("#finish-result:has-text('exists at')")
    text = page.text_content("#finish-result") or ""
    assert "tag pets@v1 exists at" in text and "--force" in text
    assert "server failed" not in text and "500" not in text
    assert json.loads(json.dumps(text))  # one line of the server's words


@BOTH_REVIEWS
def test_a_damaged_payload_is_a_500_naming_it_and_never_served(
    review: Review, flip_byte: Callable[..., None]
) -> None:
    """docs/review.md, "Security": payload bytes are read from the store re-hashed; a damaged
    object is the server's own failure (500, with its message), and its bytes are not sent."""
    reg = dsreg.Registry.find(review.registry)
    dataset = review.spec.split("@")[0]
    blobs = dsreg.open(f"{dataset}@v1", registry=reg).labels().column("blob").to_pylist()
    with dsreg.review(review.spec, audit=review.audit, registry=review.registry) as server:
        client = login(server, server.url)
        row = client.post("/api/next", json={"reviewer": "ann"}).json()["item"]["row"]
        good = client.get(f"/payload/{row}")
        assert good.status_code == 200 and good.content.startswith(b"\x89PNG")
        flip_byte(reg, blobs[row])
        damaged = client.get(f"/payload/{row}")
        assert damaged.status_code == 500, damaged.text
        assert damaged.headers["content-type"] == "application/json"
        assert blobs[row][7:19] in damaged.json()["error"]
        assert b"PNG" not in damaged.content
