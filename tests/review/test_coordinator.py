"""The coordinator's view: Fleiss' kappa against statsmodels, and the operator's data after two
raters voted (per-rater counts, items complete/partial/untouched, the items that disagree
most, each opened on the operator's page); raters get 403."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pairset import answer, login
from reviewset import ReviewSet
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_kappa

import dsreg
from dsreg.reviewing.agreement import fleiss_kappa, item_agreement, rater_counts


@st.composite
def _tables(draw: st.DrawFn) -> list[list[int]]:
    """Items x answers counts, every item with the same number of votes (statsmodels' case)."""
    answers = draw(st.integers(2, 4))
    votes = draw(st.integers(2, 7))
    items = draw(st.integers(1, 12))
    table = []
    for _ in range(items):
        cuts = sorted(draw(st.lists(st.integers(0, votes), min_size=answers - 1,
                                    max_size=answers - 1)))  # fmt: skip
        bounds = [0, *cuts, votes]
        table.append([bounds[j + 1] - bounds[j] for j in range(answers)])
    return table


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_fleiss_kappa_is_statsmodels(table: list[list[int]]) -> None:
    ours = fleiss_kappa(table)
    shares = np.asarray(table).sum(axis=0) / np.asarray(table).sum()
    if float((shares**2).sum()) >= 1.0:
        assert ours is None  # every vote names one answer: kappa is undefined
        return
    with np.errstate(all="ignore"):
        theirs = statsmodels_kappa(np.asarray(table, dtype=np.float64), method="fleiss")
    assert ours == pytest.approx(float(theirs), abs=1e-12)


def test_agreement_of_items_and_undone_records() -> None:
    assert item_agreement([3, 0]) == 1.0
    assert item_agreement([1, 1]) == 0.0
    assert item_agreement([2, 1]) == pytest.approx(1 / 3)
    assert item_agreement([1, 0]) is None
    assert fleiss_kappa([[1, 0], [0, 1]]) is None  # no item has two votes
    records = [
        {"seq": 1, "op": "vote", "reviewer": "Ann", "row": 3, "answer": "given"},
        {"seq": 2, "op": "skip", "reviewer": "ann", "row": 4},
        {"seq": 3, "op": "vote", "reviewer": "bob", "row": 3, "answer": "both"},
        {"seq": 4, "op": "undo", "reviewer": "bob", "target": 3},
    ]
    assert rater_counts(records) == {
        "ann": {"votes": 1, "skips": 1},
        "bob": {"votes": 0, "skips": 0},
    }


def test_the_operator_sees_each_raters_progress_and_kappa(review_set: ReviewSet) -> None:
    with dsreg.review(
        review_set.spec, raters="ann,bob,cy", votes_per_item=2, registry=review_set.registry
    ) as server:
        ann = login(server, server.links["raters"]["ann"])
        bob = login(server, server.links["raters"]["bob"])
        operator = login(server, server.url)
        before = operator.get("/api/coordinator").json()
        assert before["untouched"] == 8 and before["kappa"] is None
        assert [r["name"] for r in before["raters"]] == ["ann", "bob", "cy"]
        plan_ann = ["given", "guessed", "both", "given", "neither", None]
        plan_bob = ["given", "guessed", "given", "neither", "neither"]
        rows_ann = [answer(ann, a)["row"] for a in plan_ann]
        rows_bob = [answer(bob, a)["row"] for a in plan_bob]
        assert rows_ann[:5] == rows_bob  # both were given the same items, worst first

        state = operator.get("/api/coordinator").json()
        raters = {r["name"]: (r["votes"], r["skips"]) for r in state["raters"]}
        assert raters == {"ann": (5, 1), "bob": (5, 0), "cy": (0, 0)}
        assert (state["complete"], state["partial"], state["untouched"]) == (5, 0, 3)
        assert state["votes"] == 10
        answers = ["given", "guessed", "both", "neither"]
        pairs = zip(plan_ann[:5], plan_bob, strict=True)
        table = [[[a, b].count(x) for x in answers] for a, b in pairs]
        want = statsmodels_kappa(np.asarray(table, dtype=np.float64))
        assert state["kappa"] == pytest.approx(float(want))
        assert state["kappa_items"] == 5
        # The two items whose votes split, in queue order (equal agreement, equal votes).
        split = [d["row"] for d in state["disagreements"]]
        assert split == [rows_ann[2], rows_ann[3]]
        assert state["disagreements"][0]["counts"] == {"given": 1, "guessed": 0, "both": 1,
                                                       "neither": 0}  # fmt: skip

        # Raters get 403 on the view, its data, and on opening an item by row.
        for path in ("/coordinator", "/api/coordinator"):
            refused = ann.get(path)
            assert refused.status_code == 403 and "operator" in refused.json()["error"]
        assert ann.post("/api/next", json={"row": split[0]}).status_code == 403
        assert operator.get("/coordinator").status_code == 200
        # The operator opens a split item: it is shown with its votes so far.
        opened = operator.post("/api/next", json={"reviewer": "olga", "row": split[0]}).json()
        assert opened["item"]["row"] == split[0]
        assert opened["opened"]["reviewers"] == ["ann", "bob"]
        # Looking is no vote: the log holds the ten votes and the skip, no more.
        assert operator.get("/api/coordinator").json()["votes"] == 10
