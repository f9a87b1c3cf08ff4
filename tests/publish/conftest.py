"""The publish tests' fixtures: a registry to publish, a loopback ``python -m http.server``
over a folder, a registry published by URL and served (``urlset.py``, built once per session),
and Debian's Chromium through Playwright (``tests/chromium.py``, as tests/review drives it)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import launch, skip_without_chromium
from urlset import UrlSite, build_url_site, serving


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """``serve(folder)`` -> the URL (ending in ``/``) of ``python -m http.server`` serving
    ``folder`` on loopback, until the test ends; ``serve(folder, ranges=True)``: the same
    server answering byte ranges (``rangeserver.py``)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(folder: Path, *, ranges: bool = False) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        server = (
            [str(Path(__file__).with_name("rangeserver.py")), str(port), str(folder)]
            if ranges
            else ["-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)]
        )
        proc = subprocess.Popen(
            [sys.executable, *server], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1).close()
                return url
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"http.server on {url} did not start")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (a Playwright browser) with a fresh profile."""
    skip_without_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        b = launch(playwright)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def url_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UrlSite]:
    """``urlset``'s registry published with ``--url`` to a folder python's ``http.server``
    serves on loopback (for the session), and without ``--url`` to another folder."""
    root = tmp_path_factory.mktemp("url-site")
    www = root / "www"
    with serving(www) as url:
        yield build_url_site(root, url, www)
