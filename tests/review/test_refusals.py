"""docs/review.md's refusals that apply in more than one mode, in each: a queue that is not an
audit's with ``--audit``, no votes yet, the label-errors export of an audit; and the refusals no
other test exercised: the shared link while the review names raters, a port in use."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pairset import PairSet, build_pair_set, login
from reviewset import ReviewSet
from starlette.testclient import TestClient

import dsreg
from dsreg.errors import StorageError

# The modes of ``dsreg review`` that take no server: a server start is checked in process.
MODES = {
    "finish": ["--finish", "--threshold", "1"],
    "export": ["--export", "votes.json"],
}


def _refused(got: Any) -> str:
    assert got.exit_code == 1 and got.stdout == "", got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and "Traceback" not in got.stderr
    return str(got.stderr)


@pytest.mark.parametrize("mode", ["server", *MODES])
def test_audit_without_an_audit_overlay_is_refused_in_every_mode(
    cli: Any,
    review_set: ReviewSet,
    mode: str,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    reg = ["--registry", str(review_set.registry)]
    before = registry_state(review_set.registry)
    if mode == "server":
        with pytest.raises(dsreg.InvalidInputError, match="has no audit overlay to review"):
            dsreg.review(review_set.spec, audit=True, registry=review_set.registry)
        with pytest.raises(dsreg.InvalidInputError, match="reviews an audit's findings"):
            dsreg.review(
                review_set.spec,
                audit=True,
                overlay=review_set.overlay,
                registry=review_set.registry,
            )
    else:
        error = _refused(cli("review", review_set.spec, "--audit", *MODES[mode], *reg))
        assert "has no audit overlay to review" in error
        named = cli("review", review_set.spec, "--audit", "--overlay", review_set.overlay,
                    *MODES[mode], *reg)  # fmt: skip
        assert "reviews an audit's findings" in _refused(named)
    assert registry_state(review_set.registry) == before


@pytest.fixture
def pair_set(tmp_path: Path) -> PairSet:
    return build_pair_set(tmp_path / "pairs")


@pytest.mark.parametrize("mode", list(MODES))
def test_no_votes_yet_is_refused_by_finish_and_export(
    cli: Any, review_set: ReviewSet, pair_set: PairSet, mode: str, tmp_path: Path
) -> None:
    """A label review's and a pair review's: nothing to store or write (the export of a pair
    review is refused whatever its votes: label-errors JSON has no place for pairs)."""
    for spec, reg, audit in (
        (review_set.spec, review_set.registry, []),
        (pair_set.spec, pair_set.registry, ["--audit"]),
    ):
        error = _refused(cli("review", spec, *audit, *MODES[mode], "--registry", str(reg)))
        if mode == "export" and audit:
            assert "no label-errors export" in error and "--audit --finish" in error
        else:
            assert "no votes yet" in error
    assert not (tmp_path / "votes.json").exists()


def test_the_shared_link_is_refused_once_the_review_names_raters(review_set: ReviewSet) -> None:
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        shared = server.links["shared"]
        assert login(server, shared).post("/api/next", json={"reviewer": "x"}).status_code == 200
    with dsreg.review(review_set.spec, raters="ann", registry=review_set.registry) as server:
        assert "shared" not in server.links
        client = TestClient(server.asgi(), base_url="http://127.0.0.1")
        token = shared.split("token=")[1]
        assert client.get(f"/?token={token}", follow_redirects=False).status_code == 403
        ann = login(server, server.links["raters"]["ann"])
        assert ann.post("/api/next", json={}).status_code == 200


def test_a_port_in_use_is_an_error_naming_port_0(review_set: ReviewSet) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = dsreg.review(review_set.spec, port=port, registry=review_set.registry)
        try:
            with pytest.raises(StorageError, match=f"cannot listen on 127.0.0.1:{port}") as got:
                server.start()
            assert "--port" in str(got.value) and "0 picks a free port" in str(got.value)
        finally:
            server.stop()
        # The review keeps the port its last server had; with it taken, the error says so.
        with dsreg.review(review_set.spec, port=0, registry=review_set.registry) as kept:
            kept_port = kept.port
        taken.close()
    with socket.socket() as again:
        again.bind(("127.0.0.1", kept_port))
        again.listen()
        server = dsreg.review(review_set.spec, registry=review_set.registry)
        try:
            with pytest.raises(StorageError, match="--port 0 picks a free port and new links"):
                server.start()
        finally:
            server.stop()
