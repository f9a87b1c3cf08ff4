"""Regenerate the review page's screenshots, docs/img/review-1366.png (a laptop, 1366x768)
and docs/img/review-390.png (a phone, 390x844):
`PYTHONPATH=. .venv/bin/python docs/gen_review_png.py` (needs /usr/bin/chromium and Pillow).

Builds a small image set with flagged rows in a temporary registry, casts a few votes, serves
the page and photographs it in Chromium as a rater sees it (the shared raters' link).
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import dsreg

HERE = Path(__file__).resolve().parent / "img"
sys.path.insert(0, str(HERE.parents[1] / "tests"))
from chromium import CHROMIUM_ARGS, launch_persistent  # noqa: E402

ARGS = list(CHROMIUM_ARGS)  # gen_review_coordination_png.py launches with these too
SIZES = {"1366": (1366, 768), "390": (390, 844)}
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse"]


def _image(rng: np.random.Generator, hue: int) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (64, 64), (200 - hue, 180, 120 + hue))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x, y = rng.integers(0, 56, 2)
        r = int(rng.integers(8, 20))
        color = tuple(int(c) for c in rng.integers(40, 230, 3))
        draw.ellipse((int(x), int(y), int(x) + r, int(y) + r), fill=color)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def build(root: Path) -> tuple[Path, str]:
    rng = np.random.default_rng(3)
    rows = 400
    labels = np.arange(rows) % len(CLASSES)
    files = root / "files"
    files.mkdir(parents=True)
    lines = ["example_id,label"]
    for i in range(rows):
        name = f"test/{i:05d}.png"
        (files / "test").mkdir(exist_ok=True)
        (files / name).write_bytes(_image(rng, int(labels[i]) * 12))
        lines.append(f"{name},{labels[i]}")
    (root / "examples.csv").write_text("\n".join(lines) + "\n")
    reg = root / "reg"
    dsreg.init(registry=reg)
    dsreg.add(
        "cifar-mini",
        table=root / "examples.csv",
        files=files,
        classes=CLASSES,
        tag="original",
        registry=reg,
    )
    probs = rng.dirichlet(np.ones(len(CLASSES)) * 0.3, rows) * 0.3
    probs[np.arange(rows), labels] += 0.7
    for row in rng.choice(rows, 60, replace=False):
        probs[row] = 0.01
        probs[row, (labels[row] + 3) % len(CLASSES)] = 0.9
    probs /= probs.sum(axis=1, keepdims=True)
    dsreg.detect("cifar-mini@original", probs, tag="detected-v1", registry=reg)
    return reg, "cifar-mini@detected-v1"


def _taking_answers(page: Any) -> None:
    """Until the page takes answers (its example drawn, the guard after it over)."""
    deadline = time.monotonic() + 15
    while page.evaluate("() => document.body.classList.contains('drawing')"):
        if time.monotonic() > deadline:
            raise RuntimeError("the page did not take answers")
        time.sleep(0.02)


def main() -> None:
    from playwright.sync_api import sync_playwright

    HERE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        reg, spec = build(Path(tmp))
        with dsreg.review(spec, votes_per_item=5, registry=reg) as server:
            queue = server.session.queue
            for name in ("bob", "carol", "dan"):
                for _ in range(7):
                    item = queue.next_item(name)
                    assert item is not None
                    queue.vote(name, item.row, "guessed")
            link = server.links["shared"]
            with sync_playwright() as p:
                for size, (width, height) in SIZES.items():
                    context = launch_persistent(
                        p,
                        Path(tmp) / f"profile-{size}",
                        viewport={"width": width, "height": height},
                        device_scale_factor=1,
                    )
                    page = context.new_page()
                    page.goto(link + f"&reviewer=alice{size}")
                    for count, answer in enumerate("21242", start=1):
                        page.wait_for_selector("#example-image")
                        _taking_answers(page)
                        page.keyboard.press(answer)
                        page.wait_for_selector(f"#progress:has-text('You: {count} answered')")
                    page.wait_for_selector("#example-image")
                    _taking_answers(page)
                    page.screenshot(path=str(HERE / f"review-{size}.png"))
                    context.close()
                    sys.stderr.write(f"wrote {HERE / f'review-{size}.png'}\n")


if __name__ == "__main__":
    main()
