"""Debian's Chromium as the browser tests (tests/review, tests/publish) and the docs' screenshot
scripts launch it through Playwright: one executable and one set of arguments for all. A
module of its own, not a conftest: two conftest.py files cannot import each other by name.

It is the system's chromium (the Makefile installs it), never a browser Playwright downloads;
headless, no sandbox (tests run as root in a container), no GPU, and no network of its own (no
QUIC, no background requests, updates or sync), on a fresh profile each launch."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
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


#: The accessibility checker the browser tests inject into pages (tests/review, tests/publish).
AXE: Final = "axe-core@4.14.1"


def axe_source() -> str:
    """The text of ``axe.min.js``, fetched once from the npm registry with ``npm pack`` into a
    cache folder (the system's temporary folder); skips the calling test, saying why, when npm
    is absent or the registry cannot be reached and nothing is cached."""
    import pytest

    cache = Path(tempfile.gettempdir()) / "dsreg-test-cache" / AXE.replace("@", "-")
    script = cache / "axe.min.js"
    if not script.is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not installed, and {AXE} is not cached in {cache}")
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            try:
                packed = subprocess.run(
                    [npm, "pack", AXE, "--pack-destination", tmp, "--silent"],
                    capture_output=True, text=True, timeout=120, check=False, cwd=tmp,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                pytest.skip(f"the npm registry did not answer within 120 s for {AXE}")
            tarballs = list(Path(tmp).glob("axe-core-*.tgz"))
            if packed.returncode != 0 or not tarballs:
                reason = (packed.stderr.strip().splitlines() or ["no tarball"])[-1]
                pytest.skip(f"cannot fetch {AXE} from the npm registry: {reason}")
            with tarfile.open(tarballs[0]) as tar:
                member = tar.extractfile("package/axe.min.js")
                assert member is not None
                (Path(tmp) / "axe.min.js").write_bytes(member.read())
            (Path(tmp) / "axe.min.js").replace(script)
    return script.read_text(encoding="utf-8")


#: Runs axe-core on the page: its serious and critical violations, one line each.
AXE_RUN: Final = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => v.id + " (" + v.impact + "): " + v.help + " at " +
      v.nodes.map((n) => n.target.join(" ")).join(", "));
}"""
