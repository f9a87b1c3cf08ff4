"""Cropped copies: every image is also hashed by crops of itself, so a copy cropped by up to 10%
per side is found at the default threshold, and the full-image hash stays imagehash's."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import imagehash
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import dsreg
from dsreg import Registry
from dsreg.audit.corpus import jpeg, photo_tiles
from dsreg.audit.images import fingerprint_images


def _crop(image: Image.Image, fractions: tuple[float, ...]) -> Image.Image:
    w, h = image.size
    left, top, right, bottom = fractions
    return image.crop((int(left * w), int(top * h), w - int(right * w), h - int(bottom * h)))


def test_copies_cropped_up_to_10_percent_per_side_are_found(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    tiles = photo_tiles(40, seed=5, side=160)
    rng = np.random.default_rng(3)
    (tmp_path / "train" / "x").mkdir(parents=True)
    for i in range(30):
        (tmp_path / "train" / f"x/t{i:02d}.jpg").write_bytes(jpeg(tiles[i]))
    (tmp_path / "test" / "x").mkdir(parents=True)
    crops = {}
    for i in range(20):
        # Every copy cropped by 3-10% on each side: pHash alone moves by more than 10 bits.
        fractions = tuple(float(f) for f in rng.uniform(0.03, 0.1, size=4))
        crops[f"x/crop{i:02d}.jpg"] = f"x/t{i:02d}.jpg"
        data = jpeg(_crop(tiles[i], fractions), quality=int(rng.integers(50, 91)))
        (tmp_path / "test" / f"x/crop{i:02d}.jpg").write_bytes(data)
    for i in range(30, 40):
        (tmp_path / "test" / f"x/new{i}.jpg").write_bytes(jpeg(tiles[i]))
    reg = make_registry()
    dsreg.add("train", tmp_path / "train", tag="v1", registry=reg)
    dsreg.add("test", tmp_path / "test", tag="v1", registry=reg)
    res = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    found = {f.example_id: f.matches[0] for f in res.findings}
    own = [found.get(c, {}).get("example_id") == src for c, src in crops.items()]
    assert sum(own) >= 19, (sum(own), found)
    assert all(m["tier"] == "image" and m["distance"] <= 10 for m in found.values())
    assert not {i for i in found if "new" in i}, found


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.integers(40, 200), height=st.integers(40, 200))
def test_each_crop_hash_is_the_phash_of_that_crop(seed: int, width: int, height: int) -> None:
    """The full hash is imagehash's bit for bit, and each crop's is imagehash's pHash of the
    crop (its box in sub-pixel coordinates, as PIL resizes a box)."""
    from dsreg.audit.images import CROPS

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(height, width), dtype=np.uint8)
    image = Image.fromarray(pixels, "L")
    buf = io.BytesIO()
    image.save(buf, "PNG")
    got = fingerprint_images([buf.getvalue()])
    assert got.ok.tolist() == [True]
    assert int(got.hashes[0]) == int(str(imagehash.phash(image)), 16)
    for k, (left, top, right, bottom) in enumerate(CROPS):
        box = (left * width, top * height, width - right * width, height - bottom * height)
        thumb = image.resize((32, 32), Image.Resampling.LANCZOS, box=box)
        assert int(got.crops[0, k]) == int(str(imagehash.phash(thumb)), 16), k


def test_an_image_too_small_to_crop_is_its_own_crop() -> None:
    """Under ``CROP_MIN_SIDE`` pixels a side no crop leaves out a whole pixel: the crop hashes
    are the full image's, so a thumbnail-sized set gets no chance matches from resampling."""
    import io

    from PIL import Image

    from dsreg.audit.images import CROP_MIN_SIDE, fingerprint_images

    rng = np.random.default_rng(3)
    payloads = []
    for side in (8, CROP_MIN_SIDE - 1, CROP_MIN_SIDE):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side), dtype=np.uint8)).save(buf, "PNG")
        payloads.append(buf.getvalue())
    fp = fingerprint_images(payloads)
    assert fp.ok.all()
    assert (fp.crops[0] == fp.hashes[0]).all() and (fp.crops[1] == fp.hashes[1]).all()
    assert (fp.crops[2] != fp.hashes[2]).any()  # from 40 pixels a side, real crops
