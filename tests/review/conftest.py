"""The review tests' fixtures: a review set (``reviewset.py``) and a real Chromium."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reviewset import ReviewSet, build_review_set


@pytest.fixture
def review_set(tmp_path: Path) -> ReviewSet:
    return build_review_set(tmp_path)


@pytest.fixture
def make_review_set(tmp_path: Path) -> Callable[..., ReviewSet]:
    def make(name: str = "set", **kwargs: object) -> ReviewSet:
        return build_review_set(tmp_path / name, **kwargs)  # type: ignore[arg-type]

    return make


CHROMIUM = Path("/usr/bin/chromium")
# Debian's chromium (the Makefile installs it), never a browser Playwright downloads; no
# network of its own, no GPU, a fresh profile each launch.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browsers(tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """``browsers()`` -> a new browser (a Playwright persistent context on a fresh profile):
    each is a separate reviewer's browser, with its own cookies and localStorage."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is absent: 'make test' installs Debian's chromium as root")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        opened: list[Any] = []

        def launch() -> Any:
            profile = tmp_path / f"profile-{len(opened)}"
            context = playwright.chromium.launch_persistent_context(
                str(profile),
                executable_path=str(CHROMIUM),
                args=CHROMIUM_ARGS,
                viewport={"width": 1100, "height": 760},
            )
            context.set_default_timeout(15_000)
            opened.append(context)
            return context

        yield launch
        for context in opened:
            context.close()
