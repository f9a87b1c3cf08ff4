"""Every redirect of the review app stays on its server: the token exchange of any path, however
hostile (``//evil.example/x``, backslashes, ``%2F%2F``, tabs, schemes), and the router's own
redirects, whatever the Host header says, answer with a ``Location`` that is a path of this
server. Over real HTTP to a ``dsreg review`` process, and in process for hostile paths
(hypothesis, the ASGI app called with the path as the server hands it over)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reviewset import ReviewSet, Server

import dsreg

ORIGIN = "http://127.0.0.1:8765"


def _same_origin(location: str) -> None:
    """What a browser or a URL parser makes of ``location`` is a path on this server."""
    parts = urlsplit(location)
    assert parts.scheme == "" and parts.netloc == "", location
    assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
    # Browsers drop tabs and newlines anywhere and read a backslash as a slash.
    assert not any(c in location for c in "\t\n\r\\ ") and location.isprintable(), location
    assert urlsplit(urljoin(ORIGIN + "/a/b", location)).netloc == "127.0.0.1:8765", location


def _get(app: Any, path: str, query: bytes, host: bytes, cookie: bytes = b"") -> tuple[int, str]:
    """A GET as uvicorn hands it to the app (``path`` percent-decoded); status and Location."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": quote(path, safe="/%").encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", host), *([(b"cookie", cookie)] if cookie else [])],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8765),
        "state": {},
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    start = sent[0]
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in start["headers"]}
    return start["status"], headers.get("location", "")


HOSTILE = [
    "//evil.example/x",
    "///evil.example/x",
    "/\\evil.example/x",
    "/\\/evil.example",
    "/\t/evil.example",
    "/ /evil.example",
    "/%2F%2Fevil.example",  # as decoded once more by some proxy
    "//%2F%2Fevil.example",
    "/http://evil.example",
    "/javascript:alert(1)",
    "evil.example",
    "http://evil.example/x",
    "//@evil.example",
    "/.//evil.example",
    "//evil.example\\@127.0.0.1/",
    "/\x00//evil.example",
    "/\u3002evil.example",
    "/\uff0f\uff0fevil.example",
]
paths = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(alphabet=st.sampled_from("/\\%2Fevil.:@?#\t\n \x00x\u3002\uff0f"), max_size=30),
    st.text(max_size=30),
)
hosts = st.sampled_from([b"127.0.0.1:8765", b"evil.example", b"evil.example:80", b"a@evil", b""])


@pytest.fixture
def server(review_set: ReviewSet) -> Iterator[dsreg.ReviewServer]:
    made = dsreg.review(review_set.spec, registry=review_set.registry)
    yield made
    made.stop()


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=paths, host=hosts, reviewer=st.sampled_from(["", "al", "//evil.example"]))
def test_the_token_exchange_of_any_path_stays_on_the_server(
    server: dsreg.ReviewServer, path: str, host: bytes, reviewer: str
) -> None:
    query = f"token={server.token}" + (f"&reviewer={quote(reviewer)}" if reviewer else "")
    status, location = _get(server.asgi(), path, query.encode(), host)
    assert status == 303
    _same_origin(location)
    assert location.endswith(f"?reviewer={quote(reviewer, safe='')}" if reviewer else location)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(["/static/review.js/", "/api/next/", "/payload/3/", "//evil.example/"])
    | paths.map(lambda p: p + "/"),
    host=hosts,
)
def test_the_routers_own_redirects_stay_on_the_server(
    server: dsreg.ReviewServer, path: str, host: bytes
) -> None:
    cookie = f"dsreg-review-{server.port}={server.token}".encode()
    status, location = _get(server.asgi(), path, b"", host, cookie)
    if location:
        assert status in (301, 302, 303, 307, 308)
        _same_origin(location)


def test_a_double_slash_after_the_token_exchange_over_real_http(review_set: ReviewSet) -> None:
    served = Server(review_set)
    try:
        served.start()
        for target, expected in [
            ("//evil.example/x", "/evil.example/x"),
            ("/%2F%2Fevil.example/x", "/evil.example/x"),
            ("/\\evil.example/x", "/evil.example/x"),
            ("/?reviewer=al", "/?reviewer=al"),
        ]:
            path, _, rest = target.partition("?")
            query = f"token={served.token}" + (f"&{rest}" if rest else "")
            with socket.create_connection(("127.0.0.1", served.port), timeout=20) as sock:
                head = f"GET {path}?{query} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                sock.sendall((head + "Connection: close\r\n\r\n").encode())
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            lines = answer.decode("latin-1").split("\r\n")
            assert lines[0].split()[1] == "303", (target, lines[0])
            location = next(
                line.split(":", 1)[1].strip()
                for line in lines
                if line.lower().startswith("location:")
            )
            assert location == expected, target
            _same_origin(location)
    finally:
        served.stop()
