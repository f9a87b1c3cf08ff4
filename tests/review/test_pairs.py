"""The pair review of an audit's findings, in process: each finding beside its match, answered
same or different, kept in the votes log like label votes, and finished into a validated
overlay that the decontaminated view follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pairset import PairSet, answer, build_pair_set, login

import dsreg
from dsreg.errors import InvalidInputError, VotesError


@pytest.fixture
def pair_set(tmp_path: Path) -> PairSet:
    return build_pair_set(tmp_path)


def _examples(spec: str, reg: Path) -> set[str]:
    return set(dsreg.open(spec, registry=reg).labels().column("example_id").to_pylist())


def test_pairs_are_shown_answered_and_finished_into_the_decontaminated_view(
    pair_set: PairSet,
) -> None:
    reg = pair_set.registry
    assert sorted(pair_set.findings) == [0, 1, 8, 9]
    # Row 9 repeats row 8 exactly, and both are brightened copies of a training row: its
    # verdict is contaminated, so its first match is the training row, not row 8.
    assert pair_set.findings[9]["match"] == "train001.png"
    with dsreg.review(
        pair_set.spec, audit=True, raters="ann,bob", votes_per_item=2, registry=reg
    ) as server:
        ann = login(server, server.links["raters"]["ann"])
        bob = login(server, server.links["raters"]["bob"])
        page = ann.get("/").text
        assert "Are these two the same item?" in page and "/static/pairs.js" in page
        # A label answer is no answer to a pair.
        first = ann.post("/api/next", json={}).json()["item"]
        wrong = ann.post(
            "/api/vote", json={"row": first["row"], "answer": "given", "ticket": first["ticket"]}
        )
        assert wrong.status_code == 400 and "same, different" in wrong.json()["error"]
        # Each finding, nearest first (the exact copy, then by distance), beside its best
        # match, with its tier and distance.
        plan = {0: ("same", "same"), 8: ("different", "different"), 9: ("same", "different"),
                1: ("same", "same")}  # fmt: skip
        for row, (a, b) in plan.items():
            shown = answer(ann, a)
            assert shown["row"] == row and shown["suggested"] is None
            pair = shown["pair"]
            assert isinstance(pair, dict)
            want = pair_set.findings[row]
            assert (pair["example_id"], pair["tier"], pair["distance"]) == (
                want["match"],
                want["tier"],
                want["distance"],
            )
            assert pair["verdict"] == want["verdict"]
            match = ann.get(str(pair["payload"]))
            assert match.status_code == 200 and match.headers["content-type"] == "image/png"
            source = "train" if str(want["match"]).startswith("train") else "test"
            stored = reg.parent / source / "files" / str(want["match"])
            assert match.content == stored.read_bytes()
            assert answer(bob, b)["row"] == row
    # The answers are in the votes log, as label votes are.
    log = next((reg / "review").glob("*/votes.log"))
    records = [json.loads(line.split(" ", 1)[1]) for line in log.read_text().splitlines()]
    votes = [(r["reviewer"], r["row"], r["answer"]) for r in records if r["op"] == "vote"]
    assert ("ann", 8, "different") in votes and len(votes) == 8
    assert records[0] == {**records[0], "op": "open", "queue": pair_set.audit}

    with pytest.raises(InvalidInputError, match="no label-errors export"):
        dsreg.review_export(pair_set.spec, reg / "x.json", audit=True, registry=reg)
    res = dsreg.review_finish(pair_set.spec, audit=True, threshold=2, tag="reviewed", registry=reg)
    assert res.kind == "validated"
    assert res.summary["contaminated"] == 2 and res.summary["non_error"] == 1
    assert res.summary["undecided"] == 1 and res.summary["rows"] == 3
    overlay = dsreg.open("test@reviewed", registry=reg)
    rev = overlay.revision
    assert rev.view == "decontaminated" and rev.overlays[0] == pair_set.audit
    # Confirmed findings stay out, the rejected one is back, the undecided one keeps the
    # audit's verdict; the other views keep every row.
    everything = _examples("test@v1", reg)
    assert _examples("test@reviewed", reg) == everything - {"test000.png", "test001.png",
                                                             "test009.png"}  # fmt: skip
    assert _examples("test@audited", reg) == everything - {
        f"test{r:03d}.png" for r in pair_set.findings
    }


def test_pair_votes_undo_and_resume_after_a_restart(pair_set: PairSet) -> None:
    reg = pair_set.registry
    with dsreg.review(pair_set.spec, audit=True, votes_per_item=1, registry=reg) as server:
        op = login(server, server.url)
        op.post("/api/next", json={"reviewer": "cy"})
        shown = answer(op, "different", reviewer="cy")["row"]
        assert shown == 0
        undone = op.post("/api/undo", json={"reviewer": "cy"}).json()
        assert undone["undone"] == {"row": 0, "answer": "different", "comment": ""}
        assert answer(op, "same", reviewer="cy")["row"] == 0
        assert answer(op, "same", reviewer="cy")["row"] == 8
    with dsreg.review(pair_set.spec, audit=True, registry=reg) as again:
        assert again.progress("cy").you == 2
        op = login(again, again.url)
        assert op.post("/api/next", json={"reviewer": "cy"}).json()["item"]["row"] == 9
    with pytest.raises(VotesError, match="no finding has 2 agreeing votes"):
        dsreg.review_finish(pair_set.spec, audit=True, threshold=2, registry=reg)
    res = dsreg.review_finish(pair_set.spec, audit=True, threshold=1, registry=reg)
    assert res.summary["contaminated"] == 2 and res.short == 2 and res.unvoted == 2


def test_review_without_an_audit_overlay_is_refused(pair_set: PairSet) -> None:
    with pytest.raises(InvalidInputError, match="has no audit overlay to review"):
        dsreg.review("test@v1", audit=True, registry=pair_set.registry)


def test_a_damaged_pair_vote_is_set_aside_and_reported(pair_set: PairSet) -> None:
    reg = pair_set.registry
    with dsreg.review(pair_set.spec, audit=True, votes_per_item=1, registry=reg) as server:
        op = login(server, server.url)
        rows = [answer(op, a, reviewer="cy")["row"] for a in ("same", "same", "different")]
        assert rows == [0, 8, 9]
    log = next((reg / "review").glob("*/votes.log"))
    lines = log.read_bytes().splitlines(keepends=True)
    assert b'"row":8' in lines[2]
    lines[2] = lines[2].replace(b'"same"', b'"sane"')  # a flipped byte: its CRC fails
    log.write_bytes(b"".join(lines))
    res = dsreg.review_finish(pair_set.spec, audit=True, threshold=1, registry=reg)
    assert [span.records for span in res.set_aside] == [1]
    assert res.summary["contaminated"] == 1 and res.summary["non_error"] == 1
    # The next server moves the span aside and keeps every other answer.
    with dsreg.review(pair_set.spec, audit=True, registry=reg) as again:
        assert [span.records for span in again.set_aside] == [1]
        assert again.progress("cy").you == 2
