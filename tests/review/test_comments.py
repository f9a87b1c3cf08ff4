"""A vote's comment through the app: kept in its log record and the export exactly (trimmed),
or refused whole (nothing written); votes without comments exported as they always were; an
item's rank; the example id on the operator's item only; the progress endpoint; and a damaged
or hand-edited ``session.json`` refused from the command line with one line, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reviewset import ReviewSet
from starlette.testclient import TestClient
from test_queue import BASE, Page

import dsreg


def _log(review_set: ReviewSet) -> Path:
    return next((review_set.registry / "review").glob("*/votes.log"))


def _records(review_set: ReviewSet) -> list[dict[str, Any]]:
    lines = _log(review_set).read_text(encoding="utf-8").splitlines()
    return [json.loads(line.split(" ", 1)[1]) for line in lines]


COMMENTS = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=990, max_size=1010),
    st.integers(),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(comment=COMMENTS)
def test_a_comment_is_kept_exactly_or_the_answer_refused(
    review_set: ReviewSet, tmp_path_factory: pytest.TempPathFactory, comment: object
) -> None:
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        page = Page(server, "ann")
        row = page.next()["item"]["row"]
        before = _log(review_set).read_bytes()
        response = page.post("/api/vote", row=row, answer="both", comment=comment)
        text = comment.strip() if isinstance(comment, str) else ""
        fine = comment is None or (
            isinstance(comment, str)
            and len(text) <= 1000
            and text.replace("\n", " ").replace("\t", " ").isprintable()
        )
        if not fine:
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert "NOT saved" in error or "must be text" in error
            assert _log(review_set).read_bytes() == before
            return
        assert response.status_code == 200, response.text
        assert response.json()["saved"]["comment"] == text
        vote = [r for r in _records(review_set) if r["op"] == "vote"][-1]  # this example's
        assert vote["row"] == row
        assert vote.get("comment") == (text or None)
        assert ("comment" in vote) == bool(text)
        out = tmp_path_factory.mktemp("export") / "votes.json"
        dsreg.review_export(review_set.spec, out, registry=review_set.registry)
        (record,) = json.loads(out.read_text(encoding="utf-8"))  # the earlier ones undone
        if text:
            assert record["comments"] == [{"reviewer": "ann", "comment": text}]
        else:
            assert "comments" not in record
        assert page.post("/api/undo").status_code == 200  # the next example starts afresh


def test_votes_without_comments_export_as_before(review_set: ReviewSet, tmp_path: Path) -> None:
    """Votes without comments (as every log written before comments existed): the export has
    the keys it always had (test_review_cli checks finish equals importing it)."""
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        for name in ("ann", "bob", "cy"):
            page = Page(server, name)
            page.vote(page.next()["item"]["row"], "guessed")
    assert all("comment" not in r for r in _records(review_set))
    out = tmp_path / "votes.json"
    dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    records = json.loads(out.read_text(encoding="utf-8"))
    assert records and all(set(r) <= {
        "id", "given_original_label", "given_original_label_name", "our_guessed_label",
        "our_guessed_label_name", "mturk", "reviewers", "queue", "votes_wanted",
    } for r in records)  # fmt: skip


def test_rank_progress_and_the_id_for_the_operator_only(review_set: ReviewSet) -> None:
    with dsreg.review(review_set.spec, raters="ann", registry=review_set.registry) as server:
        operator = Page(server, "olga")
        item = operator.next()["item"]
        assert item["rank"] == 1 and item["ranked"] == len(review_set.flagged)
        assert item["example_id"] == f"ex{item['row']:05d}.png"
        client = TestClient(server.asgi(), base_url=BASE)
        token = server.session.access.raters["ann"]
        client.get(f"/?token={token}", follow_redirects=False)
        headers = {"X-Dsreg-Token": token, "Origin": BASE}
        rater = client.post("/api/next", json={}, headers=headers).json()["item"]
        assert "example_id" not in rater
        assert "ex0" not in json.dumps(rater)
        operator.vote(item["row"], "given")
        progress = client.post("/api/progress", json={}, headers=headers).json()["progress"]
        assert progress == {"you": 0, "everyone": 1, "complete": 0, "remaining": 8, "items": 8}
        refused = client.post("/api/order", json={"sort": "best"}, headers=headers)
        assert refused.status_code == 403
        bad = operator.post("/api/order", sort="sideways")
        assert bad.status_code == 400 and "sideways" in bad.json()["error"]


EDITS = {
    "not json": lambda text: text[: len(text) // 2],
    "no operator token": lambda text: json.dumps(
        {k: v for k, v in json.loads(text).items() if k != "operator"}
    ),
    "a short token": lambda text: json.dumps({**json.loads(text), "shared": "abc"}),
    "an unknown version": lambda text: json.dumps({**json.loads(text), "version": 9}),
    "a secret that is not hex": lambda text: json.dumps({**json.loads(text), "secret": "zz"}),
    "a list": lambda text: "[1, 2]",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_damaged_session_file_is_refused_and_nothing_is_lost(
    cli: Any, review_set: ReviewSet, edit: str
) -> None:
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        page = Page(server, "ann")
        page.vote(page.next()["item"]["row"], "given")
    session = _log(review_set).parent / "session.json"
    session.write_text(EDITS[edit](session.read_text()))
    folder = {p.name: p.read_bytes() for p in session.parent.iterdir()}
    result = cli("review", review_set.spec, "--registry", str(review_set.registry))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(session) in lines[0] and "delete the file" in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert {p.name: p.read_bytes() for p in session.parent.iterdir()} == folder
