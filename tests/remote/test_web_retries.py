"""A registry on a web server is read through fsspec's HTTP file system, retried as DVC's HTTP
remote retried it: an answer a server gives when it is briefly unwell (a 503) is asked again,
and the read goes on; a file that is not there (404) is absent at once, never asked again."""

from __future__ import annotations

import http.server
import threading
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

import dsreg
from dsreg.remote.filesystem import WebFS, open_filesystem


class _Flaky(http.server.SimpleHTTPRequestHandler):
    """Answers 503 to the first request for each path, then serves it; counts requests."""

    asked: Counter[str]
    lock: threading.Lock

    def do_GET(self) -> None:
        with self.lock:
            self.asked[self.path] += 1
            first = self.asked[self.path] == 1
        if first:
            self.send_error(503, "Busy")
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def flaky(tmp_path: Path) -> Iterator[tuple[str, Counter[str]]]:
    """``tmp_path/shared`` served by a server that fails each path's first request."""
    (tmp_path / "shared").mkdir()
    asked: Counter[str] = Counter()
    handler = type("Handler", (_Flaky,), {"asked": asked, "lock": threading.Lock()})
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(tmp_path / "shared"))
    )
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", asked
    srv.shutdown()
    srv.server_close()


def test_a_web_remote_is_fsspecs_http_file_system_without_dvc() -> None:
    opened = open_filesystem("https://data.example.org/dsreg", {})
    assert isinstance(opened.fs, WebFS) and opened.fs.protocol == "https"
    assert opened.root == "https://data.example.org/dsreg"


def test_a_server_error_is_asked_again_and_a_missing_file_is_not(
    tmp_path: Path, flaky: tuple[str, Counter[str]]
) -> None:
    url, asked = flaky
    labels = tmp_path / "labels.csv"
    labels.write_text("label\ncat\ndog\ncat\n")
    reg = dsreg.init(registry=tmp_path / "origin")
    added = dsreg.add("pets", labels=labels, tag="v1", registry=reg)
    dsreg.push(remote=str(tmp_path / "shared"), registry=reg)
    clone = dsreg.clone(url, tmp_path / "clone")
    assert dsreg.open("pets@v1", registry=clone.registry).digest == added.revision
    # Each file was refused once (503) and asked again: read (200) if the remote has it, absent
    # (404) if not, and then not asked a third time.
    missing = [p for p in asked if not (tmp_path / "shared" / p.lstrip("/")).is_file()]
    assert "/refs/pets/v1" in asked and missing, asked
    assert set(asked.values()) == {2}, asked
