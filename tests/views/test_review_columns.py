"""What a reviewer reads of a revision: the suggested label, its name, the detector's score, the
verdict and the vote counts of the last overlay naming each row, in SQL and in
``Dataset.labels()`` alike; and ``overlay show --sort score --verdict V``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dsreg
from dsreg import Registry

REVIEW = (
    "verdict",
    "suggested_label",
    "suggested_label_name",
    "score",
    "votes_given",
    "votes_guessed",
    "votes_both",
    "votes_neither",
    "votes_neutral",
    "votes_off_topic",
)
NO_VOTES = dict.fromkeys(REVIEW[4:])


@pytest.fixture
def reviewed(tmp_path: Path) -> tuple[Registry, str, str]:
    """``toy`` (6 rows, cat/dog), a detected overlay flagging rows 0, 3 and 5 and a validated
    one voting on rows 0 and 1 after it; ``toy@reviewed`` serves both in the original view.
    Returns (registry, detected digest, validated digest)."""
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "labels.npy", np.array([0, 0, 0, 1, 1, 1]))
    dsreg.add("toy", labels=tmp_path / "labels.npy", classes=["cat", "dog"], tag="original",
              registry=reg)  # fmt: skip
    probs = np.array([[0.1, 0.9], [0.9, 0.1], [0.8, 0.2], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    detected = dsreg.detect(
        "toy@original", probs, filter_by="predicted_neq_given", registry=reg
    ).digest
    (tmp_path / "votes.csv").write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        "0,cat,dog,0,4,1,0\n"
        "1,cat,dog,5,0,0,0\n"
    )
    validated = dsreg.import_votes(
        "toy@original", tmp_path / "votes.csv", format="csv", registry=reg
    ).digest
    dsreg.tag("toy@reviewed", "toy@original", overlays=[detected, validated], view="original",
              registry=reg)  # fmt: skip
    return reg, detected, validated


def by_row(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["row"]: {k: r[k] for k in REVIEW} for r in rows}


def test_views_carry_the_last_overlays_suggestion_score_verdict_and_votes(
    reviewed: tuple[Registry, str, str],
) -> None:
    reg, _, _ = reviewed
    got = by_row(dsreg.sql('SELECT * FROM "toy@reviewed" ORDER BY "row"', registry=reg).to_pylist())
    # Row 0: flagged by the detector, then voted on: the votes' overlay, named last, wins (its
    # verdict, suggestion and counts; it holds no score).
    assert got[0] == {
        "verdict": "correctable",
        "suggested_label": 1,
        "suggested_label_name": "dog",
        "score": None,
        "votes_given": 0,
        "votes_guessed": 4,
        "votes_both": 1,
        "votes_neither": 0,
        "votes_neutral": None,  # the csv format has no such column
        "votes_off_topic": None,
    }
    assert got[1]["verdict"] == "non_error" and got[1]["votes_given"] == 5
    # Rows only the detector names: its suggestion and score (self-confidence), no votes.
    assert got[3] == {
        "verdict": "suspected",
        "suggested_label": 0,
        "suggested_label_name": "cat",
        "score": pytest.approx(0.2),
        **NO_VOTES,
    }
    assert got[5]["score"] == pytest.approx(0.4) and got[5]["suggested_label_name"] == "cat"
    # Rows no overlay names: nulls.
    assert got[2] == dict.fromkeys(REVIEW) == got[4]


def test_dataset_labels_has_the_same_columns_and_values_as_sql(
    reviewed: tuple[Registry, str, str],
) -> None:
    reg, _, _ = reviewed
    for view in ("original", "cleaned", "corrected", "honeypot"):
        dsreg.tag(f"toy@r-{view}", "toy@reviewed", view=view, registry=reg)
        ds = dsreg.open(f"toy@r-{view}", registry=reg)
        served = ds.labels(review=True)
        got = ds.sql('SELECT * FROM this ORDER BY "row"')
        # The names and verdicts are dictionaries (a category in pandas), strings in SQL.
        assert served.schema.field("suggested_label_name").type == pa.dictionary(
            pa.int32(), pa.string()
        )
        assert served.cast(got.schema).equals(got), view
        assert got.to_pylist() == served.to_pylist(), view
    # verdict where it was; the others after size, before the snapshot's metadata.
    names = dsreg.open("toy@reviewed", registry=reg).labels(review=True).column_names
    assert names[5:8] == ["verdict", "blob", "size"]
    assert names[8 : 7 + len(REVIEW)] == list(REVIEW[1:])


def test_a_revision_without_overlays_has_null_review_columns(
    reviewed: tuple[Registry, str, str],
) -> None:
    reg, _, _ = reviewed
    rows = dsreg.sql('SELECT * FROM "toy@original"', registry=reg).to_pylist()
    assert len(rows) == 6
    assert all(by_row([r])[r["row"]] == dict.fromkeys(REVIEW) for r in rows)


def test_overlay_show_sort_score_and_verdict_api(reviewed: tuple[Registry, str, str]) -> None:
    reg, detected, validated = reviewed
    info = dsreg.overlay_show(detected, sort="score", registry=reg)
    assert [c["row"] for c in info.corrections] == [0, 3, 5]  # 0.1, 0.2, 0.4: worst first
    assert [c["row"] for c in dsreg.overlay_show(detected, registry=reg).corrections] == [0, 3, 5]
    info = dsreg.overlay_show(validated, verdict="correctable", registry=reg)
    assert [c["row"] for c in info.corrections] == [0] and info.total == 1
    with pytest.raises(dsreg.InvalidInputError, match=r"'bogus'.*non_error"):
        dsreg.overlay_show(validated, verdict="bogus", registry=reg)
    with pytest.raises(dsreg.InvalidInputError, match=r"'worst'.*row, score"):
        dsreg.overlay_show(validated, sort="worst", registry=reg)  # type: ignore[arg-type]


def test_overlay_show_sort_score_and_verdict_cli(cli: Callable[..., Any], tmp_path: Path) -> None:
    assert cli("init").exit_code == 0
    np.save(tmp_path / "labels.npy", np.array([0, 0, 0, 0, 1, 1, 1, 1]))
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    r = cli("add", "toy", "--labels", "labels.npy", "--classes", "classes.txt", "--tag", "v1")
    assert r.exit_code == 0, r.stderr
    # Rows 1, 2, 4 and 6 flagged; self-confidence scores 0.3, 0.05, 0.2, 0.00004.
    probs = [[.9, .1], [.3, .7], [.05, .95], [.8, .2], [.8, .2], [.2, .8], [.99996, .00004],
             [.1, .9]]  # fmt: skip
    np.save(tmp_path / "p.npy", np.array(probs))
    r = cli("detect", "toy@v1", "--pred-probs", "p.npy", "--filter-by", "predicted_neq_given",
            "--tag", "detected", "--view", "original", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    digest = json.loads(r.stdout)["overlay"]
    query = (
        'SELECT "row", suggested_label_name, score, votes_given FROM "toy@detected" '
        "WHERE verdict = 'suspected' ORDER BY score"
    )
    r = cli("sql", query, "--format", "csv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.replace('"', "").splitlines() == [
        "row,suggested_label_name,score,votes_given",
        "6,cat,0.00004,",
        "2,dog,0.05,",
        "4,cat,0.2,",
        "1,dog,0.3,",
    ]

    def rows_shown(*args: str) -> list[str]:
        r = cli("overlay", "show", digest, *args)
        assert r.exit_code == 0, r.stderr
        table = r.stdout.split("\n\n", 1)[1].splitlines()
        assert table[0].split() == ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "VERDICT", "SCORE"]
        return [line.split()[0] for line in table[1:] if line.strip()]

    assert rows_shown() == ["1", "2", "4", "6"]
    assert rows_shown("--sort", "score") == ["6", "2", "4", "1"]
    assert rows_shown("--sort", "score", "--rows", "2") == ["6", "2"]
    assert rows_shown("--verdict", "suspected", "--sort", "score") == ["6", "2", "4", "1"]
    r = cli("overlay", "show", digest, "--verdict", "correctable")
    assert r.exit_code == 0 and "No corrections with verdict 'correctable'" in r.stderr
    r = cli("overlay", "show", digest, "--verdict", "wrong")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: unknown verdict 'wrong'; choose one of suspected,")
    r = cli("overlay", "show", digest, "--sort", "worst")
    assert r.exit_code == 1 and "unknown sort 'worst'; choose one of row, score" in r.stderr
    r = cli("overlay", "show", "--help")
    for verdict in ("suspected", "non_error", "correctable", "multi_label", "neither"):
        assert verdict in r.stdout
