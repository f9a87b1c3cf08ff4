"""Regenerate the screenshots of a published registry in docs/img/ (docs/publish.md):
`PYTHONPATH=. .venv/bin/python docs/gen_site_png.py` (needs /usr/bin/chromium).

Builds the test suite's registry to publish (tests/publish/siteset.py: a synthetic CIFAR-10-like
set, and the real CIFAR-10 test set with its validated overlay when the label-errors release is
in $DSREG_SHARED_DATA), publishes it to a temporary folder, serves it on loopback and
photographs the index, a dataset page and a revision page in Chromium.
"""

from __future__ import annotations

import http.server
import os
import sys
import tempfile
import threading
from functools import partial
from pathlib import Path

import dsreg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "publish"))
from siteset import SYNTH, build_site_set  # noqa: E402

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = {
    "publish-index.png": "index.html",
    "publish-dataset.png": f"site/datasets/{SYNTH}.html",
    "publish-revision.png": f"site/tags/{SYNTH}/cleaned-v1.html",
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    from playwright.sync_api import sync_playwright

    shared = Path(os.environ.get("DSREG_SHARED_DATA", "/nonexistent"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        have = (shared / "cifar10_test_set_original_labels.npy").is_file()
        build_site_set(root, shared if have else None)
        www = root / "www"
        handler = partial(_Quiet, directory=str(www))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        url = f"http://127.0.0.1:{server.server_port}/"
        dsreg.export(f"{SYNTH}@cleaned-v1", to=str(www), registry=root / "reg")
        dsreg.publish(str(www), url=url, registry=root / "reg")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                view = browser.new_page(viewport={"width": 1100, "height": 900})
                for name, path in SHOTS.items():
                    view.goto(url + path)
                    view.screenshot(path=str(HERE / "img" / name), full_page=True)
                browser.close()
        finally:
            server.shutdown()


if __name__ == "__main__":
    main()
