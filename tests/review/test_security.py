"""The review app's guards: token, cross-site requests, payload types, errors as 4xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pairset import PairSet
from reviewset import ReviewSet
from starlette.testclient import TestClient

import dsreg

BASE = "http://127.0.0.1"


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[dsreg.ReviewServer]:
    """A label review's server (``review_set``); parametrized (indirectly) with ``"pair"``, a
    pair review's: the guards are the app's, whatever the queue."""
    if getattr(request, "param", "label") == "pair":
        pairs: PairSet = request.getfixturevalue("pair_set")
        spec, registry, audit = pairs.spec, pairs.registry, True
    else:
        labels: ReviewSet = request.getfixturevalue("review_set")
        spec, registry, audit = labels.spec, labels.registry, False
    with dsreg.review(spec, audit=audit, registry=registry) as server:
        yield server


# A guard tested on a label review's server and a pair review's.
BOTH_SERVERS = pytest.mark.parametrize("server", ["label", "pair"], indirect=True)


def _client(server: dsreg.ReviewServer, *, login: bool = True) -> TestClient:
    client = TestClient(server.asgi(), base_url=BASE, raise_server_exceptions=False)
    if login:
        first = client.get(f"/?token={server.token}&reviewer=al", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"] == "/?reviewer=al"  # the token leaves the address
        cookie = first.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
    return client


@BOTH_SERVERS
def test_every_request_needs_the_token(server: dsreg.ReviewServer) -> None:
    bare = _client(server, login=False)
    for path in ("/", "/static/review.js", "/payload/0", "/payload/0/match", "/nope"):
        response = bare.get(path)
        assert response.status_code == 403, path
        assert "access token" in response.json()["error"]
    assert bare.get("/?token=wrong").status_code == 403
    ok = _client(server).get("/")
    assert ok.status_code == 200
    assert ok.headers["content-security-policy"].startswith("default-src 'none'")
    assert ok.headers["x-content-type-options"] == "nosniff"


@BOTH_SERVERS
def test_cross_site_posts_are_refused(server: dsreg.ReviewServer) -> None:
    client = _client(server)
    header = {"X-Dsreg-Token": server.token}
    item = client.post("/api/next", json={"reviewer": "eve"}, headers=header).json()["item"]
    fits = "given" if item["pair"] is None else "same"
    body = {"reviewer": "eve", "row": item["row"], "ticket": item["ticket"], "answer": fits}
    # A form or script on another site carries the cookie but cannot set the header.
    no_header = client.post("/api/vote", json=body, headers={"Origin": "http://evil.example"})
    assert no_header.status_code == 403
    other_origin = client.post(
        "/api/vote", json=body, headers={**header, "Origin": "http://evil.example"}
    )
    assert other_origin.status_code == 403 and "cross-origin" in other_origin.json()["error"]
    cross_site = client.post(
        "/api/vote", json=body, headers={**header, "Sec-Fetch-Site": "cross-site"}
    )
    assert cross_site.status_code == 403
    form = client.post("/api/vote", data=body, headers=header)
    assert form.status_code == 400 and "application/json" in form.json()["error"]
    assert client.get("/api/vote").status_code == 405
    assert server.progress().everyone == 0
    handed = client.post("/api/next", json={"reviewer": "eve"}, headers=header).json()["item"]
    assert handed["row"] == body["row"]
    body["ticket"] = handed["ticket"]
    same = client.post("/api/vote", json=body, headers={**header, "Origin": BASE})
    assert same.status_code == 200


def test_payloads_by_row_with_a_sniffed_type(
    server: dsreg.ReviewServer, review_set: ReviewSet
) -> None:
    client = _client(server)
    got = client.get(f"/payload/{review_set.flagged[0]}")
    assert got.status_code == 200
    assert got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.content.startswith(b"\x89PNG")
    unflagged = next(r for r in range(30) if r not in review_set.flagged)
    assert client.get(f"/payload/{unflagged}").status_code == 400
    assert client.get("/payload/..%2f..%2fconfig.toml").status_code == 404
    assert client.get("/static/..%2fapp.py").status_code == 404


def test_bad_requests_get_a_message_not_a_traceback(
    server: dsreg.ReviewServer, review_set: ReviewSet
) -> None:
    client = _client(server)
    header = {"X-Dsreg-Token": server.token}
    cases = [
        ("/api/vote", {"reviewer": "al", "row": 10**9, "answer": "given"}, 400, "not an item"),
        (
            "/api/vote",
            {"reviewer": "al", "row": review_set.flagged[0], "answer": "x"},
            400,
            "not one of",
        ),
        ("/api/vote", {"reviewer": "", "row": 1, "answer": "given"}, 400, "reviewer name"),
        ("/api/next", {"reviewer": "a\x00b"}, 400, "printable"),
        ("/api/finish", {"threshold": "3"}, 400, "threshold"),
        ("/api/finish", {"threshold": 3}, 400, "no votes yet"),
    ]
    for path, body, status, text in cases:
        response = client.post(path, json=body, headers=header)
        assert response.status_code == status, (path, body, response.text)
        assert text in response.json()["error"]
        assert "Traceback" not in response.text
    raw = client.post(
        "/api/next", content=b"{not json", headers={**header, "Content-Type": "application/json"}
    )
    assert raw.status_code == 400 and "not valid JSON" in raw.json()["error"]


def test_class_names_are_escaped_in_the_page(server: dsreg.ReviewServer) -> None:
    page = _client(server).get("/")
    assert "<script>alert" not in page.text
    assert page.text.count("<script") == 1  # the page's own script, from /static


def test_the_real_server_listens_on_loopback_and_guards_too(review_set: ReviewSet) -> None:
    import httpx

    with dsreg.review(review_set.spec, reviewer="al", registry=review_set.registry) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert "reviewer=al" in server.url and f"token={server.token}" in server.url
        base = server.url.split("/?")[0]
        with httpx.Client(base_url=base) as client:
            assert client.get("/").status_code == 403
            page = client.get(server.url.removeprefix(base), follow_redirects=True)
            assert page.status_code == 200 and "dsreg review" in page.text
            posted = client.post(
                "/api/next", json={"reviewer": "al"}, headers={"X-Dsreg-Token": server.token}
            )
            assert posted.status_code == 200
            assert posted.json()["item"]["row"] == review_set.flagged[0]
    assert not server.running
