"""docs/review.md's refusals that apply in more than one mode, in each: a queue that is not an
audit's with ``--audit``, no votes yet, the label-errors export of an audit; and the refusals no
other test exercised: the shared link while the review names raters, a port in use."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pairset import BOTH_REVIEWS, PairSet, Review, Untouched, answer, build_pair_set, login
from reviewset import ReviewSet
from starlette.testclient import TestClient

import dsreg
from dsreg.errors import StorageError


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 60, 60)).save(buf, format="PNG")
    return buf.getvalue()


PNG = _png()

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


@BOTH_REVIEWS
def test_the_shared_link_is_refused_once_the_review_names_raters(review: Review) -> None:
    with dsreg.review(review.spec, audit=review.audit, registry=review.registry) as server:
        shared = server.links["shared"]
        assert login(server, shared).post("/api/next", json={"reviewer": "x"}).status_code == 200
    with dsreg.review(
        review.spec, audit=review.audit, raters="ann", registry=review.registry
    ) as server:
        assert "shared" not in server.links
        client = TestClient(server.asgi(), base_url="http://127.0.0.1")
        token = shared.split("token=")[1]
        assert client.get(f"/?token={token}", follow_redirects=False).status_code == 403
        ann = login(server, server.links["raters"]["ann"])
        assert ann.post("/api/next", json={}).status_code == 200


@BOTH_REVIEWS
def test_a_port_in_use_is_an_error_naming_port_0(review: Review) -> None:
    def start(**options: Any) -> dsreg.ReviewServer:
        return dsreg.review(review.spec, audit=review.audit, registry=review.registry, **options)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = start(port=port)
        try:
            with pytest.raises(StorageError, match=f"cannot listen on 127.0.0.1:{port}") as got:
                server.start()
            assert "--port" in str(got.value) and "0 picks a free port" in str(got.value)
        finally:
            server.stop()
        # The review keeps the port its last server had; with it taken, the error says so.
        with start(port=0) as kept:
            kept_port = kept.port
        taken.close()
    with socket.socket() as again:
        again.bind(("127.0.0.1", kept_port))
        again.listen()
        server = start()
        try:
            with pytest.raises(StorageError, match="--port 0 picks a free port and new links"):
                server.start()
        finally:
            server.stop()


@pytest.fixture
def refs(
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> Callable[[Path], dict[str, tuple[str, int, str]]]:
    """What a refusal must not change: the registry's tags, log and stored objects (a server
    that starts writes its session and votes log under ``review/``, which is not one)."""

    def state(registry: Path) -> dict[str, tuple[str, int, str]]:
        return {
            path: entry
            for path, entry in registry_state(registry).items()
            if path.split("/")[0] not in ("review", "state", "tmp")
        }

    return state


def test_a_raters_requests_for_the_operators_actions_are_403_in_a_pair_review(
    pair_set: PairSet, refs: Callable[[Path], dict[str, tuple[str, int, str]]]
) -> None:
    """Finish, the coordinator's view and its data, the queue's order and opening an item by
    row are the operator's in a pair review as in a label review."""
    before = refs(pair_set.registry)
    with dsreg.review(
        pair_set.spec, audit=True, raters="ann", votes_per_item=1, registry=pair_set.registry
    ) as server:
        operator = login(server, server.url)
        ann = login(server, server.links["raters"]["ann"])
        first = answer(ann, "same")
        refusals = {
            "finish": ann.post("/api/finish", json={"threshold": 1, "tag": "reviewed"}),
            "coordinator page": ann.get("/coordinator"),
            "coordinator data": ann.get("/api/coordinator"),
            "order": ann.post("/api/order", json={"sort": "best"}),
            "row": ann.post("/api/next", json={"row": first["row"]}),
        }
        for what, refused in refusals.items():
            assert refused.status_code == 403, (what, refused.text)
            assert "operator" in refused.json()["error"], what
        assert operator.get("/api/coordinator").json()["votes"] == 1
    assert refs(pair_set.registry) == before  # no overlay stored, no tag made


@pytest.mark.parametrize("review", ["label", "pair"])
def test_a_bad_comment_a_stale_ticket_or_a_full_item_saves_nothing(
    review_set: ReviewSet, pair_set: PairSet, review: str
) -> None:
    """The vote refusals (400 for a comment, 409 for a ticket or a full item) hold for a pair
    review's answers as for a label review's, and none of them is counted."""
    spec, reg, fits = (
        (review_set.spec, review_set.registry, "given")
        if review == "label"
        else (pair_set.spec, pair_set.registry, "same")
    )
    with dsreg.review(
        spec, audit=review == "pair", raters="ann,bob", votes_per_item=1, registry=reg
    ) as server:
        ann = login(server, server.links["raters"]["ann"])
        bob = login(server, server.links["raters"]["bob"])
        item = ann.post("/api/next", json={}).json()["item"]
        body = {"row": item["row"], "answer": fits, "ticket": item["ticket"]}
        for comment in ("bell\x07", "x" * 1001):
            refused = ann.post("/api/vote", json={**body, "comment": comment})
            assert refused.status_code == 400, refused.text
            assert "NOT saved" in refused.json()["error"]
        stale = ann.post("/api/vote", json={**body, "ticket": "0" * len(item["ticket"])})
        assert stale.status_code == 409 and "NOT saved" in stale.json()["error"]
        assert server.progress().everyone == 0
        assert ann.post("/api/vote", json=body).status_code == 200
        # Bob was never given the item (it is full): his answer to it is refused.
        full = bob.post("/api/vote", json=body)
        assert full.status_code == 409 and "NOT saved" in full.json()["error"]
        again = ann.post("/api/vote", json=body)
        assert again.status_code == 409 and "NOT saved" in again.json()["error"]
        assert server.progress().everyone == 1


def test_a_pair_answer_to_a_label_item_is_a_400(review_set: ReviewSet) -> None:
    with dsreg.review(review_set.spec, raters="ann", registry=review_set.registry) as server:
        ann = login(server, server.links["raters"]["ann"])
        item = ann.post("/api/next", json={}).json()["item"]
        body = {"row": item["row"], "answer": "same", "ticket": item["ticket"]}
        refused = ann.post("/api/vote", json=body)
        assert refused.status_code == 400 and "'same'" in refused.json()["error"]
        assert server.progress().everyone == 0


@pytest.mark.parametrize("review", ["label", "pair"])
@pytest.mark.parametrize("threshold", ["0", "-1"])
def test_a_threshold_under_1_is_refused_on_the_command_line_and_the_page(
    cli: Any,
    review_set: ReviewSet,
    pair_set: PairSet,
    review: str,
    threshold: str,
    refs: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    """``--finish --threshold`` (and ``dsreg.review_finish``) takes what the page's finish
    takes: a whole number, at least 1; with votes to store, so that a finish that took it
    would store an overlay."""
    spec, reg, audit, fits = (
        (review_set.spec, review_set.registry, False, "given")
        if review == "label"
        else (pair_set.spec, pair_set.registry, True, "same")
    )
    with dsreg.review(spec, audit=audit, votes_per_item=1, registry=reg) as server:
        operator = login(server, server.url)
        answer(operator, fits, reviewer="olga")
        page = operator.post("/api/finish", json={"threshold": int(threshold)})
        assert page.status_code == 400 and "at least 1" in page.json()["error"]
    before = refs(reg)
    flags = ["--audit"] if audit else []
    error = _refused(cli("review", spec, *flags, "--finish", "--threshold", threshold,
                         "--tag", "reviewed", "--registry", str(reg)))  # fmt: skip
    assert threshold in error and "at least 1" in error
    with pytest.raises(dsreg.DsregError, match="at least 1") as raised:
        dsreg.review_finish(spec, audit=audit, threshold=int(threshold), tag="reviewed",
                            registry=reg)  # fmt: skip
    assert threshold in str(raised.value) and "\n" not in str(raised.value)
    assert refs(reg) == before


def test_a_pair_finish_into_an_existing_tag_is_refused_before_storing(
    cli: Any, pair_set: PairSet, refs: Callable[[Path], dict[str, tuple[str, int, str]]]
) -> None:
    with dsreg.review(pair_set.spec, audit=True, registry=pair_set.registry) as server:
        answer(login(server, server.url), "same", reviewer="olga")
    before = refs(pair_set.registry)
    reg = ["--registry", str(pair_set.registry)]
    args = ["review", pair_set.spec, "--audit", "--finish", "--threshold", "1", *reg]
    error = _refused(cli(*args, "--tag", "v1"))
    assert "tag test@v1 exists" in error and "--force" in error
    assert refs(pair_set.registry) == before
    with dsreg.review(pair_set.spec, audit=True, registry=pair_set.registry) as server:
        refused = login(server, server.url).post("/api/finish", json={"threshold": 1, "tag": "v1"})
        assert refused.status_code == 409 and "exists" in refused.json()["error"]
    assert refs(pair_set.registry) == before
    # Into a new tag it stores, warning (as a label review's finish does) of the findings short
    # of their votes: 4 findings, 1 vote of 5 on one.
    finished = cli(*args, "--tag", "reviewed")
    assert finished.exit_code == 0, finished.stderr
    assert "Warning: finished early: 4 findings have fewer than 5 votes (3 with none)" in (
        finished.stderr
    )


@BOTH_REVIEWS
def test_the_command_line_refuses_a_second_server_and_a_port_in_use_in_one_line(
    cli: Any, review: Review, registry_state: Callable[[Path], dict[str, tuple[str, int, str]]]
) -> None:
    args = ["review", review.spec, *review.flags, "--registry", str(review.registry)]
    with dsreg.review(review.spec, audit=review.audit, registry=review.registry) as first:
        before = registry_state(review.registry)
        error = _refused(cli(*args))
        assert "another review server" in error
        assert registry_state(review.registry) == before  # the first one's files untouched
        assert login(first, first.url).post("/api/next", json={"reviewer": "a"}).status_code == 200
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        error = _refused(cli(*args, "--port", port))
        assert f"127.0.0.1:{port}" in error and "--port" in error and "0 picks" in error


def test_raters_given_twice_are_refused_by_the_python_api(
    review_set: ReviewSet, registry_state: Callable[[Path], dict[str, tuple[str, int, str]]]
) -> None:
    before = registry_state(review_set.registry)
    with pytest.raises(dsreg.InvalidInputError, match="'ANN' is given twice") as got:
        dsreg.review(review_set.spec, raters="ann,ANN", registry=review_set.registry)
    assert "\n" not in str(got.value) and "give each rater once" in str(got.value)
    with pytest.raises(dsreg.InvalidInputError, match="names no rater; give NAME,NAME or @FILE"):
        dsreg.review(review_set.spec, raters=" , ", registry=review_set.registry)
    assert registry_state(review_set.registry) == before


def _spoil(path: Path, kind: str, outside: Path) -> None:
    """Make the file at ``path`` one the review must not serve: a symlink out of its folder, a
    named pipe (which a read would wait on forever), or a file over 64 MiB (sparse)."""
    path.unlink()
    if kind == "symlink out":
        outside.write_bytes(b"\x89PNG\r\n\x1a\nTHE-SECRET-BYTES")
        path.symlink_to(outside)
    elif kind == "named pipe":
        os.mkfifo(path)
    else:
        with path.open("wb") as f:
            f.truncate((64 << 20) + 1)


@pytest.mark.parametrize("kind", ["symlink out", "named pipe", "over 64 MiB"])
@pytest.mark.parametrize("option", ["--media", "--corpus"])
def test_a_file_the_folder_must_not_serve_is_a_403_for_media_and_corpus_alike(
    make_review_set: Callable[..., ReviewSet], tmp_path: Path, kind: str, option: str
) -> None:
    """docs/review.md: a ``--media`` file (and a ``--corpus`` one, read as ``--media`` reads)
    whose resolved path is outside the folder, that is not a regular file or is over 64 MiB
    is refused (403, "not served") and never read; the others are served."""
    if option == "--media":
        labels = make_review_set("labels", payloads="none", ids="plain")
        folder = tmp_path / "media"
        folder.mkdir()
        for row in labels.flagged:
            (folder / f"ex{row:05d}.png").write_bytes(PNG)
        spoiled, fine = labels.flagged[0], labels.flagged[1]
        _spoil(folder / f"ex{spoiled:05d}.png", kind, tmp_path / "secret.png")
        server = dsreg.review(labels.spec, media=folder, registry=labels.registry)
        paths = (f"/payload/{spoiled}", f"/payload/{fine}")
    else:
        pairs = build_pair_set(tmp_path / "pairs", corpus=True)
        assert pairs.corpus is not None and pairs.findings[0]["match"] == "train003.png"
        _spoil(pairs.corpus / "train003.png", kind, tmp_path / "secret.png")
        server = dsreg.review(pairs.spec, audit=True, corpus=pairs.corpus, registry=pairs.registry)
        paths = ("/payload/0/match", "/payload/1/match")
    with server:
        client = login(server, server.url)
        refused = client.get(paths[0])
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert "not served" in error and b"SECRET" not in refused.content
        if kind == "symlink out":
            assert f"outside the {option} folder" in error
        assert client.get(paths[1]).status_code == 200


_WITHOUT_REVIEW_EXTRA = """
import sys
for name in ("starlette", "uvicorn", "jinja2"):
    sys.modules[name] = None
from dsreg.cli import main
main(sys.argv[1:])
"""


def test_only_the_server_needs_the_review_extra(
    review_set: ReviewSet,
    tmp_path: Path,
    dsreg_env: Callable[..., dict[str, str]],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
    refs: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    """Without Starlette, uvicorn and Jinja2 (blocked in a fresh process, as
    tests/packaging does), a server start is refused naming the extra and writing nothing;
    ``--export`` and ``--finish`` work."""
    with dsreg.review(review_set.spec, votes_per_item=1, registry=review_set.registry) as server:
        answer(login(server, server.url), "guessed", reviewer="olga")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _WITHOUT_REVIEW_EXTRA, "review", review_set.spec, *args,
             "--registry", str(review_set.registry)],
            cwd=tmp_path, env=dsreg_env(), capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    before = registry_state(review_set.registry)
    served = run()
    assert served.returncode == 1 and served.stdout == ""
    assert served.stderr == "Error: dsreg review needs: pip install 'dsreg[review]'\n"
    assert registry_state(review_set.registry) == before
    exported = run("--export", str(tmp_path / "votes.json"))
    assert exported.returncode == 0, exported.stderr
    assert len(json.loads((tmp_path / "votes.json").read_text())) == 1
    before = refs(review_set.registry)
    finished = run("--finish", "--threshold", "1", "--tag", "reviewed")
    assert finished.returncode == 0, finished.stderr
    assert refs(review_set.registry) != before
    assert "reviewed" in finished.stderr


def _damage_second_vote(registry: Path) -> None:
    """Flip a byte of the votes log's second vote (its CRC-32 no longer holds)."""
    log = next((registry / "review").glob("*/votes.log"))
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"answer"', b'"answeR"')
    log.write_bytes(b"".join(lines))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("review", ["label", "pair"])
def test_damage_found_before_a_server_is_said_with_its_repair_in_every_mode(
    cli: Any, review_set: ReviewSet, pair_set: PairSet, tmp_path: Path, mode: str, review: str
) -> None:
    """``--export`` and ``--finish`` run before a server reopened a damaged log say what is not
    counted and that the next start moves it; the server then moves it and says where."""
    spec, reg, audit, fits = (
        (review_set.spec, review_set.registry, [], ("given", "guessed"))
        if review == "label"
        else (pair_set.spec, pair_set.registry, ["--audit"], ("same", "different"))
    )
    with dsreg.review(spec, audit=bool(audit), votes_per_item=1, registry=reg) as server:
        operator = login(server, server.url)
        for fit in fits:
            answer(operator, fit, reviewer="olga")
    _damage_second_vote(reg)
    said = cli("review", spec, *audit, *MODES[mode], "--registry", str(reg))
    if review == "pair" and mode == "export":
        assert "no label-errors export" in _refused(said)
        return
    assert said.exit_code == 0, said.stderr
    assert "1 damaged span set aside, holding 1 record" in said.stderr
    assert "still in the log; the next 'dsreg review' moves it to a file of its own" in (
        said.stderr
    )
    with dsreg.review(spec, audit=bool(audit), registry=reg) as server:
        (span,) = server.set_aside
        assert span.file is not None and Path(span.file).exists()
        assert span.describe().endswith(f"moved to {span.file}")


def test_a_label_only_set_with_nothing_to_show_is_refused_by_the_python_api(
    make_review_set: Callable[..., ReviewSet],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    """As on the command line (tests/review/test_media.py): raters would judge ids alone; a
    ``media_url`` that is not an http(s) address with a host is refused too."""
    bare = make_review_set("bare", payloads="none", ids="plain", metadata=False)
    before = registry_state(bare.registry)
    with pytest.raises(dsreg.InvalidInputError) as got:
        dsreg.review(bare.spec, registry=bare.registry)
    assert "--media DIR" in str(got.value) and "\n" not in str(got.value)
    for template in ("javascript:{example_id}", "https:///{example_id}"):
        with pytest.raises(dsreg.InvalidInputError, match="http") as got:
            dsreg.review(bare.spec, media_url=template, registry=bare.registry)
        assert repr(template) in str(got.value) or template in str(got.value)
    assert registry_state(bare.registry) == before


@pytest.mark.parametrize("mode", ["server", *MODES])
@pytest.mark.parametrize("kind", ["label", "pair"])
def test_an_ambiguous_overlay_prefix_is_refused_in_one_line_in_every_mode(
    cli: Any,
    run_dsreg: Callable[..., subprocess.CompletedProcess[str]],
    untouched: dict[str, Untouched],
    tmp_path: Path,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
    kind: str,
    mode: str,
) -> None:
    """docs/review.md, "Security": no request of the page names an object by digest (an item
    is named by its row), so a digest prefix is read only where the review is started,
    finished or exported (``--overlay``): one naming several objects is refused there, from
    the command line and from Python, naming the candidates, and nothing is written."""
    review, prefix = untouched[kind]
    before = registry_state(review.registry)
    calls: dict[str, Callable[[], object]] = {
        "server": lambda: dsreg.review(
            review.spec, overlay=prefix, audit=review.audit, registry=review.registry
        ),
        "finish": lambda: dsreg.review_finish(
            review.spec, overlay=prefix, threshold=1, tag="reviewed", audit=review.audit,
            registry=review.registry,
        ),
        "export": lambda: dsreg.review_export(
            review.spec, tmp_path / "votes.json", overlay=prefix, audit=review.audit,
            registry=review.registry,
        ),
    }  # fmt: skip
    with pytest.raises(dsreg.AmbiguousDigestError) as raised:
        calls[mode]()
    said = [str(raised.value)]
    args = ["review", review.spec, *review.flags, "--overlay", prefix, *MODES.get(mode, [])]
    args += ["--registry", str(review.registry)]
    if mode == "server":  # in a process of its own: a server that started would not return
        proc = run_dsreg(*args, cwd=tmp_path)
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        said.append(proc.stderr)
    else:
        said.append(_refused(cli(*args)))
    for message in said:
        assert f"digest prefix {prefix!r} is ambiguous" in message, message
        assert "type more characters" in message
    assert registry_state(review.registry) == before
    assert not (tmp_path / "votes.json").exists()
