"""The review tests' fixtures: a review set (``reviewset.py``) and a real Chromium
(``tests/chromium.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import launch_persistent, skip_without_chromium
from reviewset import ReviewSet, build_review_set


@pytest.fixture
def review_set(tmp_path: Path) -> ReviewSet:
    return build_review_set(tmp_path)


@pytest.fixture
def make_review_set(tmp_path: Path) -> Callable[..., ReviewSet]:
    def make(name: str = "set", **kwargs: object) -> ReviewSet:
        return build_review_set(tmp_path / name, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def browsers(tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """``browsers()`` -> a new browser (a Playwright persistent context on a fresh profile):
    each is a separate reviewer's browser, with its own cookies and localStorage."""
    skip_without_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        opened: list[Any] = []

        def launch() -> Any:
            profile = tmp_path / f"profile-{len(opened)}"
            context = launch_persistent(
                playwright, profile, viewport={"width": 1100, "height": 760}
            )
            context.set_default_timeout(15_000)
            opened.append(context)
            return context

        yield launch
        for context in opened:
            context.close()
