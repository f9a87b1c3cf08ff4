"""Debian's Chromium as the browser tests (tests/review, tests/publish) and the docs' screenshot
scripts launch it through Playwright: one executable and one set of arguments for all. A
module of its own, not a conftest: two conftest.py files cannot import each other by name.

It is the system's chromium (the Makefile installs it), never a browser Playwright downloads;
headless, no sandbox (tests run as root in a container), no GPU, and no network of its own (no
QUIC, no background requests, updates or sync), on a fresh profile each launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
ABSENT: Final = f"{CHROMIUM} is absent: 'make test' installs Debian's chromium as root"


def skip_without_chromium() -> None:
    """Skip the calling test, saying why, when Chromium is not installed."""
    import pytest

    if not CHROMIUM.is_file():
        pytest.skip(ABSENT)


def launch(playwright: Any, **options: Any) -> Any:
    """A Chromium browser (its contexts share nothing with each other)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), **options
    )


def launch_persistent(playwright: Any, profile: Path, **options: Any) -> Any:
    """A Chromium context on the profile folder ``profile`` (a reviewer's own browser, with
    its cookies and localStorage); ``options`` such as ``viewport`` as Playwright takes them."""
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), **options
    )
