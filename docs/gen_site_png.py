"""Regenerate the screenshots of a published registry in docs/img/ (docs/publish.md):
`PYTHONPATH=. .venv/bin/python docs/gen_site_png.py` (needs /usr/bin/chromium).

Builds the registry the tests publish by URL (tests/publish/urlset.py: a synthetic CIFAR-10-like
set, a tree, and a relabeled set that re-ranks three recorded models), publishes it with --url
to a temporary folder served on loopback, and photographs the index, a dataset page and a
revision page on a laptop's screen, and the re-ranked leaderboard on a phone's (390 px).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "publish"))
sys.path.insert(0, str(HERE.parent))
from siteset import SYNTH  # noqa: E402
from urlset import RERANK, build_url_site, serving  # noqa: E402

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# name: (page, viewport width, the element photographed: None for the whole page)
SHOTS: dict[str, tuple[str, int, str | None]] = {
    "publish-index.png": ("index.html", 1100, None),
    "publish-dataset.png": (f"site/datasets/{SYNTH}.html", 1100, None),
    "publish-revision.png": (f"site/tags/{SYNTH}/cleaned-v1.html", 1100, None),
    "publish-rerank-390.png": (f"site/datasets/{RERANK}.html", 390, "#leaderboard"),
}


def main() -> None:
    from playwright.sync_api import sync_playwright

    os.environ.pop("DSREG_REGISTRY", None)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with serving(root / "www") as url:
            build_url_site(root, url, root / "www")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                for name, (path, width, element) in SHOTS.items():
                    view = browser.new_page(viewport={"width": width, "height": 900})
                    view.goto(url + path)
                    if element is None:
                        view.screenshot(path=str(HERE / "img" / name), full_page=True)
                    else:
                        view.locator(element).screenshot(path=str(HERE / "img" / name))
                    view.close()
                browser.close()


if __name__ == "__main__":
    main()
