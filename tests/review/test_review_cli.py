"""``dsreg review --export`` and ``--finish`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reviewset import ReviewSet

import dsreg


def _vote(review_set: ReviewSet, answers: dict[str, str]) -> None:
    """Each reviewer answers the first item, through the page's requests."""
    from starlette.testclient import TestClient

    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        client = TestClient(server.asgi(), base_url="http://127.0.0.1")
        client.get(f"/?token={server.token}", follow_redirects=False)
        headers = {"X-Dsreg-Token": server.token}
        for name, answer in answers.items():
            item = client.post("/api/next", json={"reviewer": name}, headers=headers)
            handed = item.json()["item"]
            body = {
                "reviewer": name,
                "row": handed["row"],
                "ticket": handed["ticket"],
                "answer": answer,
            }
            assert client.post("/api/vote", json=body, headers=headers).status_code == 200


def test_export_then_import_votes_equals_finish(
    cli: Any, review_set: ReviewSet, tmp_path: Path
) -> None:
    _vote(review_set, {"alice": "guessed", "bob": "guessed", "carol": "given"})
    reg = ["--registry", str(review_set.registry)]
    exported = cli("review", review_set.spec, "--export", str(tmp_path / "v.json"), *reg)
    assert exported.exit_code == 0, exported.stderr
    assert "Wrote 1 voted items" in exported.stderr
    imported = cli(
        "overlay",
        "import-votes",
        review_set.spec,
        str(tmp_path / "v.json"),
        "--threshold",
        "2",
        "--json",
        *reg,
    )
    assert imported.exit_code == 0, imported.stderr
    finished = cli(
        "review",
        review_set.spec,
        "--finish",
        "--threshold",
        "2",
        "--tag",
        "validated",
        "--view",
        "corrected",
        "--json",
        *reg,
    )
    assert finished.exit_code == 0, finished.stderr
    got = json.loads(finished.stdout)
    assert got["overlay"] == json.loads(imported.stdout)["overlay"]
    assert got["summary"]["correctable"] == 1
    assert "Tagged pets@validated" in finished.stderr
    # The votes file is the release's format: import-votes reads it like the paper's.
    record = json.loads((tmp_path / "v.json").read_text())[0]
    assert set(record) >= {"id", "given_original_label", "our_guessed_label", "mturk"}


def test_bad_options_exit_1(cli: Any, review_set: ReviewSet) -> None:
    reg = ["--registry", str(review_set.registry)]
    both = cli("review", review_set.spec, "--finish", "--export", "x.json", *reg)
    assert both.exit_code == 1 and "--finish or --export" in both.stderr
    tag_alone = cli("review", review_set.spec, "--tag", "x", *reg)
    assert tag_alone.exit_code == 1 and "go with --finish" in tag_alone.stderr
    nothing = cli("review", review_set.spec, "--finish", *reg)
    assert nothing.exit_code == 1 and "no votes yet" in nothing.stderr
    verdict = cli("review", review_set.spec, "--verdict", "bogus", *reg)
    assert verdict.exit_code == 1 and "unknown verdict 'bogus'" in verdict.stderr
    plain = cli("review", "pets@v1", *reg)
    assert plain.exit_code == 1 and "has no overlay to review" in plain.stderr


def test_finish_refuses_an_existing_tag_before_storing(
    cli: Any, review_set: ReviewSet, registry_state: Any
) -> None:
    """--finish --tag NAME where NAME already names another revision: refused, naming the tag
    and --force, with nothing stored or logged; --force then moves it."""
    _vote(review_set, {"alice": "guessed", "bob": "guessed", "carol": "given"})
    reg = ["--registry", str(review_set.registry)]
    before = registry_state(review_set.registry)
    refused = cli("review", review_set.spec, "--finish", "--threshold", "2", "--tag", "v1", *reg)
    assert refused.exit_code == 1, refused.stderr
    assert "tag pets@v1 exists" in refused.stderr and "--force" in refused.stderr
    assert registry_state(review_set.registry) == before
    forced = cli(
        "review", review_set.spec, "--finish", "--threshold", "2", "--tag", "v1", "--force", *reg
    )
    assert forced.exit_code == 0, forced.stderr
    assert len(dsreg.show("pets@v1", registry=review_set.registry).overlays) == 2


def test_raters_differing_only_in_case_are_refused_and_a_file_gives_links(
    cli: Any, review_set: ReviewSet, tmp_path: Path
) -> None:
    reg = ["--registry", str(review_set.registry)]
    twice = cli("review", review_set.spec, "--raters", "ann,Bob,ANN", *reg)
    assert twice.exit_code == 1 and "'ANN' is given twice" in twice.stderr
    empty = cli("review", review_set.spec, "--raters", " , ", *reg)
    assert empty.exit_code == 1 and "names no rater" in empty.stderr
    names = tmp_path / "raters.txt"
    names.write_text("Ann\n\nbob\n")
    with dsreg.review(review_set.spec, raters=f"@{names}", registry=review_set.registry) as server:
        links = server.links
    assert sorted(links["raters"]) == ["ann", "bob"] and "shared" not in links
    assert len({links["operator"], *links["raters"].values()}) == 3


def test_an_early_finish_warns_and_leaves_split_items_unreviewed(
    cli: Any, review_set: ReviewSet, tmp_path: Path
) -> None:
    """Three votes of five on one item, split: non_agreement once it had all five, but
    finished early it is unreviewed, which the cleaned view keeps; export then import-votes
    gives the same overlay."""
    _vote(review_set, {"alice": "guessed", "bob": "given", "carol": "both"})
    reg = ["--registry", str(review_set.registry)]
    finished = cli(
        "review", review_set.spec, "--finish", "--threshold", "2", "--tag", "early", "--json", *reg
    )
    assert finished.exit_code == 0, finished.stderr
    flagged = len(review_set.flagged)
    assert f"Warning: finished early: {flagged} items have fewer than 5 votes" in finished.stderr
    summary = json.loads(finished.stdout)["summary"]
    assert summary["unreviewed"] == 1 and summary["non_agreement"] == 0 and summary["errors"] == 0
    row = review_set.flagged[0]
    kept = dsreg.open("pets@early", registry=review_set.registry).labels()
    assert row in kept.column("row").to_pylist()

    cli("review", review_set.spec, "--export", str(tmp_path / "v.json"), *reg)
    assert json.loads((tmp_path / "v.json").read_text())[0]["votes_wanted"] == 5
    imported = cli(
        "overlay",
        "import-votes",
        review_set.spec,
        str(tmp_path / "v.json"),
        "--threshold",
        "2",
        "--json",
        *reg,
    )
    assert json.loads(imported.stdout)["overlay"] == json.loads(finished.stdout)["overlay"]
    # Counted with all its votes (--votes-per-item 3), the same votes are a disagreement.
    full = cli(
        "review",
        review_set.spec,
        "--finish",
        "--threshold",
        "2",
        "--votes-per-item",
        "3",
        "--json",
        *reg,
    )
    assert json.loads(full.stdout)["summary"]["non_agreement"] == 1


def test_finish_keeps_the_citation_as_import_votes_does(
    cli: Any, review_set: ReviewSet, tmp_path: Path, registry_state: Any
) -> None:
    _vote(review_set, {"alice": "guessed", "bob": "guessed", "carol": "given"})
    reg = ["--registry", str(review_set.registry)]
    bib = tmp_path / "raters.bib"
    bib.write_text("@misc{ourraters2026, title = {Our review}, author = {Lab, The}, year = 2026}")
    credit = ["--citation", str(bib), "--credit", "Reviewed in the lab"]
    refused = cli("review", review_set.spec, *credit, *reg)
    assert refused.exit_code == 1 and "--citation and --credit go with --finish" in refused.stderr
    bad = tmp_path / "bad.bib"
    bad.write_text("@misc{x, title = {no end")
    before = registry_state(review_set.registry)
    broken = cli("review", review_set.spec, "--finish", "--citation", str(bad), *reg)
    assert broken.exit_code == 1 and len(broken.stderr.strip().splitlines()) == 1
    assert f"--citation {bad}, line 1" in broken.stderr
    assert registry_state(review_set.registry) == before
    assert cli("review", review_set.spec, "--export", str(tmp_path / "v.json"), *reg).exit_code == 0
    imported = cli("overlay", "import-votes", review_set.spec, str(tmp_path / "v.json"),
                   "--threshold", "2", "--json", *credit, *reg)  # fmt: skip
    finished = cli("review", review_set.spec, "--finish", "--threshold", "2", "--tag", "checked",
                   "--json", *credit, *reg)  # fmt: skip
    assert finished.exit_code == 0, finished.stderr
    digest = json.loads(finished.stdout)["overlay"]
    assert digest == json.loads(imported.stdout)["overlay"]
    registry = dsreg.Registry.find(review_set.registry)
    assert registry.overlay(digest).producer["credit"]["text"] == "Reviewed in the lab"
    cited = dsreg.cite(f"{review_set.spec.split('@')[0]}@checked", registry=registry)
    assert "ourraters2026" in cited.bibtex() and "Reviewed in the lab" in cited.text()
