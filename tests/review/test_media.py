"""Every set reviewable: a label-only set shown from a folder the team holds (``--media``) or
from an address template (``--media-url``), never a file outside the folder; text shown as
text; a set with nothing to show refused; an image's alt text that does not name its label."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reviewset import FOLDERS, ReviewSet
from test_queue import Page

import dsreg
from dsreg.reviewing.media import MediaRefusedError, find_media

ROWS = 30  # build_review_set's default
SECRET = b"\x89PNG\r\n\x1a\nTHE-SECRET-BYTES"


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 60, 60)).save(buf, format="PNG")
    return buf.getvalue()


def _example_id(row: int, ids: str) -> str:
    return f"ex{row:05d}" if ids == "plain" else f"{FOLDERS[row % 3]}/ex{row:05d}.png"


def _fill(folder: Path, ids: str, suffix: str, data: bytes) -> None:
    """One file per example of a review set built with ``ids``: its id plus ``suffix``."""
    for row in range(ROWS):
        path = folder / (_example_id(row, ids) + suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _wait_for(page: Any, script: str, want: Any) -> None:
    """Poll ``script`` until it gives ``want`` (the page's CSP forbids wait_for_function)."""
    deadline = time.monotonic() + 15
    while page.evaluate(script) != want:
        assert time.monotonic() < deadline, f"{script} never gave {want!r}"
        time.sleep(0.02)


def _ready(page: Any) -> None:
    _wait_for(page, "() => document.body.classList.contains('drawing')", False)


@pytest.mark.slow
def test_a_label_only_set_is_reviewed_with_media(
    browsers: Callable[[], Any], make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    labels = make_review_set("folders", payloads="none", ids="folders")
    media = tmp_path / "images"
    _fill(media, "folders", "", _png())
    missing = labels.flagged[0]  # the first item shown: its file is not there
    (media / _example_id(missing, "folders")).unlink()
    with dsreg.review(labels.spec, media=media, registry=labels.registry) as server:
        page = browsers().new_page()
        page.goto(server.url + "&reviewer=alice")
        page.wait_for_selector("#progress:has-text('You: 0')")
        assert int(page.text_content("#row") or -1) == missing
        page.wait_for_selector("#payload .missing")
        assert "no media file for example" in (page.text_content("#payload") or "")
        assert page.query_selector("#payload img") is None
        _ready(page)
        page.keyboard.press("s")  # the rater skips it
        page.wait_for_selector("#saved:has-text('Skip')")
        second = labels.flagged[1]
        assert int(page.text_content("#row") or -1) == second
        _wait_for(page, "() => document.getElementById('example-image')?.naturalWidth", 32)
        alt = page.get_attribute("#example-image", "alt") or ""
        assert alt == f"Example 2 of {len(labels.flagged)}"
        assert FOLDERS[second % 3] not in alt and "ex0" not in alt
        _ready(page)
        page.keyboard.press("1")
        page.wait_for_selector("#progress:has-text('You: 1 answered')")
        assert server.progress().everyone == 1
    log = next((labels.registry / "review").glob("*/votes.log")).read_text()
    assert f'"row":{second}' in log.replace(" ", "") and '"answer":"given"' in log.replace(" ", "")


@pytest.mark.slow
def test_a_text_payload_is_shown_as_text(
    browsers: Callable[[], Any], make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    labels = make_review_set("texts", payloads="none", ids="plain")
    media = tmp_path / "texts"
    _fill(media, "plain", ".txt", b"a review <b>not bold</b> <script>alert(1)</script>\n" * 80)
    with dsreg.review(labels.spec, media=media, registry=labels.registry) as server:
        page = browsers().new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        page.goto(server.url + "&reviewer=alice")
        page.wait_for_selector("#example-text")
        text = page.text_content("#example-text") or ""
        assert text.startswith("a review <b>not bold</b> <script>")
        assert page.query_selector("#payload b") is None and dialogs == []
        box = "() => { const e = document.getElementById('example-text'); "
        box += "return [getComputedStyle(e).overflowY, e.scrollHeight > e.clientHeight]; }"
        assert page.evaluate(box) == ["auto", True]  # a scrollable box
        _ready(page)
        page.keyboard.press("2")
        page.wait_for_selector("#progress:has-text('You: 1 answered')")


def test_a_media_file_outside_the_folder_is_never_served(
    make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    labels = make_review_set("links", payloads="none", ids="folders")
    media = tmp_path / "images"
    _fill(media, "folders", "", _png())
    secret = tmp_path / "secret.png"
    secret.write_bytes(SECRET)
    linked, folder_linked = labels.flagged[0], labels.flagged[1]
    target = media / _example_id(linked, "folders")
    target.unlink()
    target.symlink_to(secret)  # a file symlinked out
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / f"ex{folder_linked:05d}.png").write_bytes(SECRET)
    moved = media / FOLDERS[folder_linked % 3]
    for path in moved.iterdir():
        (outside / "x" / path.name).write_bytes(path.read_bytes())
        path.unlink()
    moved.rmdir()
    moved.symlink_to(outside / "x")  # a folder symlinked out
    with dsreg.review(labels.spec, media=media, registry=labels.registry) as server:
        page = Page(server, "alice")
        for row in (linked, folder_linked):
            got = page.client.get(f"/payload/{row}")
            assert got.status_code == 403, got.text
            assert "outside the --media folder" in got.json()["error"]
            assert b"SECRET" not in got.content
        fine = next(row for row in labels.flagged if row != linked and row % 3 != folder_linked % 3)
        assert page.client.get(f"/payload/{fine}").content == _png()
        # No request names a path: a row number is all the route takes.
        assert page.client.get("/payload/..%2F..%2Fsecret.png").status_code == 404
        assert page.client.get("/payload/-1").status_code in (400, 404)


_ID = st.lists(
    st.sampled_from(["..", ".", "secret.png", "a", "a.png", "", "/", "\\", "%2e%2e", "sub", "out"]),
    min_size=1,
    max_size=6,
).map("/".join)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(example_id=_ID)
def test_no_example_id_reads_outside_the_folder(tmp_path: Path, example_id: str) -> None:
    root = tmp_path / "prop"
    folder = root / "media"
    if not folder.exists():
        (folder / "sub").mkdir(parents=True)
        (folder / "a.png").write_bytes(b"inside")
        (folder / "sub" / "a.png").write_bytes(b"inside")
        (root / "secret.png").write_bytes(SECRET)
        (folder / "sub" / "out").symlink_to(root)
    try:
        data = find_media(folder.resolve(), example_id)
    except (dsreg.NotFoundError, MediaRefusedError):
        return
    assert data == b"inside"


def test_a_set_with_nothing_to_show_is_refused(
    cli: Any, make_review_set: Callable[..., ReviewSet], tmp_path: Path
) -> None:
    bare = make_review_set("bare", payloads="none", ids="plain", metadata=False)
    reg = ["--registry", str(bare.registry)]
    refused = cli("review", bare.spec, *reg)
    assert refused.exit_code == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--media DIR" in lines[0] and "--media-url" in lines[0]
    assert "Traceback" not in refused.stderr and refused.stdout == ""
    nowhere = cli("review", bare.spec, "--media", str(tmp_path / "nowhere"), *reg)
    assert nowhere.exit_code == 1 and "is not a folder" in nowhere.stderr
    bad = cli("review", bare.spec, "--media-url", "javascript:{example_id}", *reg)
    assert bad.exit_code == 1 and "not an http(s) address" in bad.stderr
    # With media, or with metadata, the set is reviewable.
    dsreg.review(bare.spec, media=tmp_path, registry=bare.registry).session.close()
    noted = make_review_set("noted", payloads="none", ids="plain")
    dsreg.review(noted.spec, registry=noted.registry).session.close()


def test_media_url_is_loaded_by_the_page_from_that_origin_only(
    make_review_set: Callable[..., ReviewSet],
) -> None:
    labels = make_review_set("remote", payloads="none", ids="folders")
    template = "https://files.example:8443/cifar/{example_id}?v=1"
    with dsreg.review(labels.spec, media_url=template, registry=labels.registry) as server:
        page = Page(server, "alice")
        item = page.next()["item"]
        row = item["row"]
        quoted = _example_id(row, "folders").replace("<", "%3C")
        assert item["payload"] == f"https://files.example:8443/cifar/{quoted}?v=1"
        assert item["remote"] is True
        csp = page.client.get("/").headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
        assert directives["img-src"] == "'self' blob: https://files.example:8443"
        assert directives["media-src"] == "'self' blob: https://files.example:8443"
        assert directives["connect-src"] == "'self'" and directives["script-src"] == "'self'"
