"""Regenerate docs/img/review-coordinator.png and docs/img/review-pair.png, the coordinator's
view and a pair item of `dsreg review`:
`PYTHONPATH=. .venv/bin/python docs/gen_review_coordination_png.py` (needs /usr/bin/chromium,
Pillow and Playwright).

The coordinator's view: the label review of docs/gen_review_png.py's set, three raters' votes
cast. The pair item: a small set audited against a training set with copies in it.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from gen_review_png import ARGS, build

import dsreg

OUT = Path(__file__).resolve().parent / "img"


def _picture(rng: np.random.Generator) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (64, 64), tuple(int(c) for c in rng.integers(60, 200, 3)))
    draw = ImageDraw.Draw(img)
    for _ in range(5):
        x, y = (int(v) for v in rng.integers(0, 50, 2))
        r = int(rng.integers(10, 24))
        draw.rectangle((x, y, x + r, y + r), fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
    return img


def _png(img: Any) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _add(reg: Path, root: Path, name: str, images: list[bytes]) -> None:
    files = root / name
    files.mkdir(parents=True)
    lines = ["example_id,label"]
    for i, data in enumerate(images):
        (files / f"{name}{i:03d}.png").write_bytes(data)
        lines.append(f"{name}{i:03d}.png,{i % 2}")
    (root / f"{name}.csv").write_text("\n".join(lines) + "\n")
    dsreg.add(name, table=root / f"{name}.csv", files=files, classes=["cat", "dog"], tag="v1",
              registry=reg)  # fmt: skip


def build_audited(root: Path) -> tuple[Path, str]:
    from PIL import ImageEnhance

    rng = np.random.default_rng(5)
    train = [_picture(rng) for _ in range(40)]
    test = [_picture(rng) for _ in range(30)]
    test[3] = ImageEnhance.Brightness(train[7]).enhance(1.15)
    test[11] = train[20]
    test[17] = test[16]
    reg = root / "reg"
    dsreg.init(registry=reg)
    _add(reg, root, "train", [_png(p) for p in train])
    _add(reg, root, "test", [_png(p) for p in test])
    dsreg.audit_duplicates("test@v1", against=["train@v1"], within=True, tag="audited",
                           registry=reg)  # fmt: skip
    return reg, "test@audited"


def _browser(playwright: Any, profile: Path, height: int) -> Any:
    return playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path="/usr/bin/chromium",
        args=ARGS,
        viewport={"width": 1100, "height": height},
        device_scale_factor=1,
    )


def coordinator(playwright: Any, tmp: Path) -> None:
    reg, spec = build(tmp / "labels")
    with dsreg.review(spec, votes_per_item=3, raters="ann,bob,carol", registry=reg) as server:
        queue = server.session.queue
        rng = np.random.default_rng(1)
        for name, n in (("ann", 14), ("bob", 11), ("carol", 6)):
            for _ in range(n):
                item = queue.next_item(name)
                assert item is not None
                answer = "guessed" if rng.random() < 0.8 else str(rng.choice(queue.answers))
                queue.vote(name, item.row, answer)
        context = _browser(playwright, tmp / "profile-c", 900)
        page = context.new_page()
        page.goto(server.url)
        page.goto(server.url.split("/?")[0] + "/coordinator")
        page.wait_for_selector("#raters tr[data-rater='carol']")
        page.screenshot(path=str(OUT / "review-coordinator.png"), full_page=True)
        context.close()


def pair(playwright: Any, tmp: Path) -> None:
    reg, spec = build_audited(tmp / "pairs")
    with dsreg.review(spec, audit=True, registry=reg) as server:
        context = _browser(playwright, tmp / "profile-p", 560)
        page = context.new_page()
        page.goto(server.url + "&reviewer=alice")
        page.wait_for_selector("#match-image")
        page.wait_for_timeout(500)
        page.screenshot(path=str(OUT / "review-pair.png"), full_page=True)
        context.close()


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        coordinator(playwright, Path(tmp))
        pair(playwright, Path(tmp))
    sys.stderr.write(f"wrote {OUT / 'review-coordinator.png'} and {OUT / 'review-pair.png'}\n")


if __name__ == "__main__":
    main()
