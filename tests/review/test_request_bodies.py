"""The review server reads at most 16 KiB of a request body, and any body gets a 4xx JSON
answer, never a 500 or a traceback: over real HTTP to a ``dsreg review`` process (raw sockets
for a 300 MB ``Content-Length`` and a 300 MB chunked body, the server's peak memory read from
``/proc``), and in process for every kind of malformed body (hypothesis)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pairset import build_pair_set
from reviewset import ReviewSet, Server
from starlette.testclient import TestClient

import dsreg
from dsreg.reviewing.app import REQUEST_DEPTH

HUGE = 300 << 20
PIECE = 1 << 20


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """``dsreg review`` of a label review; parametrized (indirectly) with ``"pair"``, of an
    audit's findings, reviewed as pairs: the same server, the same limits."""
    if getattr(request, "param", "label") == "pair":
        server = Server(build_pair_set(tmp_path / "pairs"), audit=True)
    else:
        server = Server(request.getfixturevalue("review_set"))
    server.start()
    yield server
    server.stop()


# The tests of a body's limits run on a label review's server and a pair review's.
BOTH_REVIEWS = pytest.mark.parametrize("served", ["label", "pair"], indirect=True)


@pytest.fixture
def connect(served: Server) -> Iterator[Callable[[], Raw]]:
    """``connect()``: a new connection to the served review (closed after the test)."""
    made: list[Raw] = []

    def make() -> Raw:
        made.append(Raw(served))
        return made[-1]

    yield make
    for raw in made:
        raw.sock.close()


def _peak(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")  # pragma: no cover


class Raw:
    """One HTTP/1.1 connection to the server, written and read by hand."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
        # The cookie the token buys (its own connection, closed).
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as login:
            login.sendall(self._head("GET", f"/?token={server.token}", []))
            status, headers, _ = _response(login)
        assert status == 303
        cookie: SimpleCookie = SimpleCookie(headers["set-cookie"])
        self.cookie = "; ".join(f"{k}={m.value}" for k, m in cookie.items())

    def _head(self, method: str, path: str, extra: list[str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.server.port}", *extra]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def post(self, path: str, extra: list[str]) -> None:
        """Send a POST's head, with the token, the cookie and the JSON content type."""
        auth = [
            f"Cookie: {self.cookie}",
            f"X-Dsreg-Token: {self.server.token}",
            "Content-Type: application/json",
        ]
        self.sock.sendall(self._head("POST", path, auth + extra))


def _response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one response (read to its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(status_line.split()[1]), headers, body


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


@BOTH_REVIEWS
def test_a_content_length_over_the_limit_is_refused_before_any_body(
    connect: Callable[[], Raw],
) -> None:
    raw = connect()
    raw.post("/api/next", [f"Content-Length: {HUGE}"])  # and not a byte of the body
    status, headers, body = _response(raw.sock)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert "too large" in json.loads(body)["error"]
    assert headers["connection"] == "close" and _closed(raw.sock)


def _send_huge(raw: Raw, chunked: bool) -> int:
    """Send 300 MB of body (or as much as the server takes before it closes); bytes sent."""
    raw.post("/api/vote", ["Transfer-Encoding: chunked" if chunked else f"Content-Length: {HUGE}"])
    piece = b"[" * PIECE
    if chunked:
        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
    sent = 0
    try:
        while sent < HUGE:
            raw.sock.sendall(piece)
            sent += PIECE
        if chunked:
            raw.sock.sendall(b"0\r\n\r\n")
        _response(raw.sock)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_300_mb_body_does_not_grow_the_server(
    served: Server, connect: Callable[[], Raw], chunked: bool
) -> None:
    before = _peak(served.pid)
    sent = _send_huge(connect(), chunked)
    grown = _peak(served.pid) - before
    assert grown < 16 << 20, f"the server's peak memory grew by {grown >> 20} MiB"
    assert sent < HUGE // 4, f"the server read {sent >> 20} MiB before it closed"
    # It still answers.
    raw = connect()
    raw.post("/api/next", ["Content-Length: 20"])
    raw.sock.sendall(b'{"reviewer": "ann"} ')
    status, _, body = _response(raw.sock)
    assert status == 200 and json.loads(body)["progress"]["items"] == 8


DEEP = {
    "brackets": b"[" * 16_000,
    "objects": b'{"a":' * 3_000,
    "just too deep": b"[" * (REQUEST_DEPTH + 1) + b"]" * (REQUEST_DEPTH + 1),
    "unclosed": b'{"reviewer":' + b"[" * 5000,
}


@BOTH_REVIEWS
def test_deep_json_gets_a_400_and_no_traceback(served: Server, connect: Callable[[], Raw]) -> None:
    for name, body in DEEP.items():
        raw = connect()
        raw.post("/api/next", [f"Content-Length: {len(body)}"])
        raw.sock.sendall(body)
        status, headers, answer = _response(raw.sock)
        assert status == 400 and headers["content-type"] == "application/json", name
        assert f"nested deeper than {REQUEST_DEPTH} levels" in json.loads(answer)["error"], name
    assert "Traceback" not in served.stderr() and "RecursionError" not in served.stderr()
    flat = connect()
    flat.post("/api/next", ["Content-Length: 36"])
    flat.sock.sendall(b'{"reviewer": "ann", "x": [[[[1]]]]} ')
    assert _response(flat.sock)[0] == 200


MALFORMED = {
    "not JSON": (b"{'reviewer': 'ann'}", "request body"),
    "cut short": (b'{"reviewer": "ann", ', "request body"),
    "not UTF-8": (b'{"reviewer": "\xff\xfe"}', "UTF-8"),
    "not an object": (b'["reviewer", "ann"]', "request body must be a JSON object"),
}


@BOTH_REVIEWS
def test_a_malformed_body_gets_a_400_and_saves_nothing(
    served: Server, connect: Callable[[], Raw]
) -> None:
    for name, (body, said) in MALFORMED.items():
        for path in ("/api/next", "/api/vote", "/api/finish"):
            raw = connect()
            raw.post(path, [f"Content-Length: {len(body)}"])
            raw.sock.sendall(body)
            status, headers, answer = _response(raw.sock)
            assert status == 400 and headers["content-type"] == "application/json", (name, path)
            assert said in json.loads(answer)["error"], (name, path, answer)
    assert "Traceback" not in served.stderr()
    raw = connect()
    raw.post("/api/progress", ["Content-Length: 19"])
    raw.sock.sendall(b'{"reviewer": "ann"}')
    status, _, answer = _response(raw.sock)
    assert status == 200 and json.loads(answer)["progress"]["everyone"] == 0


def _nested(depth: int, kind: str) -> bytes:
    opener = {"list": "[", "object": '{"x":', "mixed": '[{"y":'}[kind]
    return (opener * depth).encode()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
bodies = st.one_of(
    st.binary(max_size=300),
    st.builds(_nested, st.integers(1, 8000), st.sampled_from(["list", "object", "mixed"])),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"reviewer": json_values | st.text(max_size=70)},
        optional={"row": json_values | st.integers(), "answer": json_values},
    ).map(lambda v: json.dumps(v).encode()),
    st.binary(min_size=16_000, max_size=17_000),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=bodies, path=st.sampled_from(["/api/next", "/api/vote", "/api/skip", "/api/undo"]))
def test_no_body_gets_a_500(review_set: ReviewSet, body: bytes, path: str) -> None:
    server = _in_process(review_set)
    client = _client(server)
    response = client.post(
        path,
        content=body,
        headers={"X-Dsreg-Token": server.token, "Content-Type": "application/json"},
    )
    assert response.status_code in (200, 400, 409, 413), (response.status_code, response.text)
    answer = response.json()
    assert response.status_code == 200 or isinstance(answer["error"], str)


_SERVERS: dict[Path, dsreg.ReviewServer] = {}


def _in_process(review_set: ReviewSet) -> dsreg.ReviewServer:
    """One server (not listening) per review set, for every example of a test."""
    if review_set.registry not in _SERVERS:
        _SERVERS[review_set.registry] = dsreg.review(review_set.spec, registry=review_set.registry)
    return _SERVERS[review_set.registry]


def _client(server: dsreg.ReviewServer) -> Any:
    client = TestClient(server.asgi(), base_url="http://127.0.0.1", raise_server_exceptions=False)
    assert client.get(f"/?token={server.token}", follow_redirects=False).status_code == 303
    return client


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    while _SERVERS:
        _SERVERS.popitem()[1].stop()
