"""Findings a reviewer can trust: on flat synthetic images (shapes on flat backgrounds, whose
pHashes crowd together) the default thresholds name copies and not look-alikes; findings come
nearest first, each with its tier and distance; a contaminated row names the other dataset's
match first."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image, ImageEnhance

import dsreg
from dsreg import Registry
from dsreg.audit.corpus import jpeg, photo_tiles, png, shape_images
from dsreg.registry.reader import LocalReader


def _put(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.mark.parametrize("seed", [0, 1])
def test_flat_synthetic_images_precision_at_the_defaults(
    make_registry: Callable[..., Registry], tmp_path: Path, seed: int
) -> None:
    """95 training images and 60 test images: 20 copies of training images (the bytes, a JPEG
    re-encoding, a resize, a brightened copy) and 40 other images of the same kind. A pHash
    alone names a third of the others (different images 6 to 10 bits apart)."""
    shapes = shape_images(155, seed=seed)
    train = {f"c{i % 3}/t{i:03d}.png": png(im) for i, im in enumerate(shapes[:95])}
    made = []
    for i, im in enumerate(shapes[:20]):
        kind = i % 4
        if kind == 0:
            made.append(png(im))
        elif kind == 1:
            made.append(jpeg(im, 40 + 10 * (i % 5)))
        elif kind == 2:
            made.append(png(im.resize((60 + 8 * (i % 10),) * 2, Image.Resampling.BICUBIC)))
        else:
            made.append(png(ImageEnhance.Brightness(im).enhance(0.85 if i % 8 == 3 else 1.15)))
    test = {f"c0/copy{i:02d}.png": data for i, data in enumerate(made)}
    test.update({f"c1/new{i:03d}.png": png(im) for i, im in enumerate(shapes[95:])})
    reg = make_registry()
    dsreg.add("train", _put(tmp_path / "train", train), tag="v1", registry=reg)
    dsreg.add("test", _put(tmp_path / "test", test), tag="v1", registry=reg)
    res = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    source = {f"c0/copy{i:02d}.png": f"c{i % 3}/t{i:03d}.png" for i in range(20)}
    right = [f for f in res.findings if source.get(f.example_id) == f.matches[0]["example_id"]]
    wrong = [(f.example_id, f.matches[0]["example_id"], f.distance) for f in res.findings]
    wrong = [w for w in wrong if source.get(w[0]) != w[1]]
    precision, recall = len(right) / len(res.findings), len(right) / len(source)
    print(f"seed {seed}: precision {precision:.3f}, recall {recall:.3f}, wrong: {wrong}")
    assert precision >= 0.95 and recall >= 0.95


@pytest.fixture
def audited(make_registry: Callable[..., Registry], tmp_path: Path) -> Registry:
    """A test set whose rows, in row order, are: training tile 0 cropped and darkened (a near
    copy, 4 bits away), tile 1's bytes (an exact copy), tile 3 brightened (near, 2 bits), and
    row 2's bytes again (contaminated by tile 3, and an exact duplicate of row 2)."""
    tiles = [Image.open(io.BytesIO(jpeg(t))) for t in photo_tiles(6, seed=4, side=128)]
    train = {f"a/t{i}.jpg": jpeg(t) for i, t in enumerate(tiles)}
    bright = jpeg(ImageEnhance.Brightness(tiles[3]).enhance(1.15), 80)
    darker = ImageEnhance.Brightness(tiles[0].crop((10, 6, 122, 124))).enhance(0.85)
    test = {
        "a/r0.jpg": jpeg(darker, 50),
        "a/r1.jpg": train["a/t1.jpg"],
        "a/r2.jpg": bright,
        "a/r3.jpg": bright,
    }
    reg = make_registry()
    dsreg.add("train", _put(tmp_path / "train", train), tag="v1", registry=reg)
    dsreg.add("test", _put(tmp_path / "test", test), tag="v1", registry=reg)
    return reg


def test_findings_are_nearest_first_in_the_result_json_and_table(
    audited: Registry, cli: Callable[..., object]
) -> None:
    res = dsreg.audit_duplicates("test@v1", against=["train@v1"], within=True, registry=audited)
    order = [(f.row, f.tier, f.distance) for f in res.findings]
    # The exact copy, then the near ones by distance (rows 2 and 3 tie: by row), not row order.
    assert order == [(1, "exact", 0.0), (2, "image", 2.0), (3, "image", 2.0), (0, "image", 4.0)]

    got = cli("audit", "duplicates", "test@v1", "--against", "train@v1", "--within",
              "--registry", str(audited.root), "--json")  # fmt: skip
    assert got.exit_code == 0, got.stderr  # type: ignore[attr-defined]
    findings = json.loads(got.stdout)["findings"]  # type: ignore[attr-defined]
    assert [(f["row"], f["tier"], f["distance"]) for f in findings] == order
    assert all(
        (f["tier"], f["distance"]) == (f["matches"][0]["tier"], f["matches"][0]["distance"])
        for f in findings
    )

    table = cli("audit", "duplicates", "test@v1", "--against", "train@v1", "--within",
                "--registry", str(audited.root))  # fmt: skip
    lines = table.stdout.splitlines()  # type: ignore[attr-defined]
    head = next(i for i, line in enumerate(lines) if line.startswith("ROW"))
    shown = [line.split() for line in lines[head + 1 :] if line.strip()]
    assert [(int(r[0]), r[3], float(r[4])) for r in shown] == order


def test_a_contaminated_row_names_the_other_datasets_match_first(audited: Registry) -> None:
    res = dsreg.audit_duplicates("test@v1", against=["train@v1"], within=True, registry=audited)
    train = LocalReader(audited).revision("train@v1").digest
    row3 = next(f for f in res.findings if f.row == 3)
    assert row3.verdict == "contaminated"
    assert [(m["dataset"], m["example_id"], m["tier"]) for m in row3.matches] == [
        (train, "a/t3.jpg", "image"),
        (LocalReader(audited).revision("test@v1").digest, "a/r2.jpg", "exact"),
    ]
    assert (row3.tier, row3.distance) == ("image", row3.matches[0]["distance"])
