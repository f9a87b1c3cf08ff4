"""``dsreg review --corpus DIR``, the folder an audit read unregistered (``--against DIR``): its
errors name ``--corpus`` and the value given, never ``--media``, on one line from the command
line, whether a server starts or the review is finished or exported, and the page's message for
a match file missing from it names the ``--corpus`` folder."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pairset import PairSet, Untouched, build_pair_set, login
from reviewset import ReviewSet

import dsreg


@pytest.fixture
def corpus_set(tmp_path: Path) -> PairSet:
    return build_pair_set(tmp_path / "pairs", corpus=True)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# Each way of running a review: a server, --finish, --export (the refusals hold in each).
MODES = {
    "server": [],
    "finish": ["--finish", "--threshold", "1", "--tag", "checked"],
    "export": ["--export", "EXPORT"],
}


def _run(args: list[str], registry: Path, export: Path) -> subprocess.CompletedProcess[str]:
    """``dsreg`` in a process of its own, with a time limit: a server that started would
    serve until stopped, which fails the test rather than hang it."""
    main = "import sys; from dsreg.cli import main; main(sys.argv[1:])"
    args = [str(export) if a == "EXPORT" else a for a in args]
    try:
        return subprocess.run(
            [sys.executable, "-c", main, *args, "--registry", str(registry)],
            capture_output=True, text=True, timeout=60, check=False,
            env={"PYTHONPATH": str(Path(dsreg.__file__).resolve().parents[1]), "PATH": ""},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"dsreg {' '.join(args)} started serving instead of refusing")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_corpus_that_is_not_a_folder_is_refused_in_one_line(
    corpus_set: PairSet,
    tmp_path: Path,
    mode: str,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    (tmp_path / "a-file.png").write_bytes(b"not a folder")
    before = registry_state(corpus_set.registry)
    for given in (tmp_path / "nowhere", tmp_path / "a-file.png"):
        args = ["review", corpus_set.spec, "--audit", "--corpus", str(given), *MODES[mode]]
        refused = _run(args, corpus_set.registry, tmp_path / "votes.json")
        assert refused.returncode == 1 and refused.stdout == ""
        line = _one_line(refused.stderr)
        assert f"--corpus {str(given)!r} is not a folder" in line and "--media" not in line
        assert "--against DIR" in line
    assert registry_state(corpus_set.registry) == before
    assert not (tmp_path / "votes.json").exists()


@pytest.mark.parametrize("mode", list(MODES))
def test_a_corpus_without_an_audit_is_refused_in_one_line_in_every_mode(
    review_set: ReviewSet,
    tmp_path: Path,
    mode: str,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    """A label review has no matches to show: --corpus there is a mistake, said as one, when
    a server starts and when the votes are finished or exported alike (with votes to store,
    so that a finish that took it would store an overlay)."""
    _vote(review_set, {"ann": "guessed", "bob": "guessed"})
    folder = tmp_path / "corpus"
    folder.mkdir()
    before = registry_state(review_set.registry)
    args = ["review", review_set.spec, "--corpus", str(folder), *MODES[mode]]
    refused = _run(args, review_set.registry, tmp_path / "votes.json")
    assert refused.returncode == 1 and refused.stdout == ""
    line = _one_line(refused.stderr)
    assert f"--corpus {str(folder.resolve())!r}" in line and "is not an audit" in line
    assert "add --audit" in line and "drop --corpus" in line and "--media" not in line
    assert registry_state(review_set.registry) == before  # nothing written
    assert not (tmp_path / "votes.json").exists()


def _vote(review_set: ReviewSet, answers: dict[str, str]) -> None:
    """Each reviewer answers the first item, through the page's requests."""
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        client = login(server, server.url)
        for name, answer in answers.items():
            item = client.post("/api/next", json={"reviewer": name}).json()["item"]
            body = {"reviewer": name, "row": item["row"], "ticket": item["ticket"]}
            assert client.post("/api/vote", json={**body, "answer": answer}).status_code == 200


def test_a_match_missing_from_the_corpus_names_the_corpus_folder(corpus_set: PairSet) -> None:
    assert corpus_set.corpus is not None and corpus_set.findings[0]["match"] == "train003.png"
    (corpus_set.corpus / "train003.png").unlink()
    with dsreg.review(
        corpus_set.spec, audit=True, corpus=corpus_set.corpus, registry=corpus_set.registry
    ) as server:
        client = login(server, server.url)
        assert client.get("/payload/1/match").status_code == 200  # train005.png is there
        missing = client.get("/payload/0/match")
        assert missing.status_code == 404
        error = missing.json()["error"]
        assert "'train003.png' in the --corpus folder" in error and "--media" not in error


@pytest.mark.parametrize("mode", list(MODES))
def test_the_python_api_refuses_a_corpus_as_the_command_line_does(
    untouched: dict[str, Untouched],
    tmp_path: Path,
    mode: str,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    """``dsreg.review``, ``dsreg.review_finish`` and ``dsreg.review_export`` refuse
    ``corpus=`` as the command line does (an ``InvalidInputError`` of one line): for a label
    review, and a corpus that is not a folder for a pair review; each with a vote to store,
    and nothing stored or written."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (tmp_path / "a-file.png").write_bytes(b"not a folder")
    refusals = [
        (untouched["label"].review, folder, "is not an audit"),
        (untouched["pair"].review, tmp_path / "a-file.png", "is not a folder"),
        (untouched["pair"].review, tmp_path / "nowhere", "is not a folder"),
    ]
    for review, corpus, said in refusals:
        before = registry_state(review.registry)
        with pytest.raises(dsreg.InvalidInputError) as refused:
            if mode == "server":
                dsreg.review(review.spec, audit=review.audit, corpus=corpus,
                             registry=review.registry)  # fmt: skip
            elif mode == "finish":
                dsreg.review_finish(review.spec, threshold=1, tag="checked", audit=review.audit,
                                    corpus=corpus, registry=review.registry)  # fmt: skip
            else:
                dsreg.review_export(review.spec, tmp_path / "votes.json", audit=review.audit,
                                    corpus=corpus, registry=review.registry)  # fmt: skip
        message = str(refused.value)
        assert said in message and "--corpus" in message and "\n" not in message, message
        assert registry_state(review.registry) == before
        assert not (tmp_path / "votes.json").exists()
