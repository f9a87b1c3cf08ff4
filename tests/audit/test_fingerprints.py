"""Fingerprints: the batch pHash is imagehash's, the MinHash datasketch's, on real data; bad
payloads are reported one by one; a snapshot's fingerprints are stored and reused."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import datasketch
import imagehash
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import dsreg
from dsreg import Registry
from dsreg.audit.corpus import jpeg, photo_tiles, stdlib_texts, transform_image
from dsreg.audit.fingerprints import fingerprint_payloads, fingerprints_of
from dsreg.audit.images import fingerprint_images, hashes_of_pixels
from dsreg.audit.text import NUM_PERM, SEED, fingerprint_texts, jaccard, words


def _imagehash(payload: bytes) -> int:
    return int(str(imagehash.phash(Image.open(io.BytesIO(payload)))), 16)


@pytest.fixture(scope="module")
def photos() -> list[bytes]:
    """Real photographs: tiles and transformed copies (JPEG q30-90, resize, crop, brightness)."""
    rng = np.random.default_rng(1)
    tiles = photo_tiles(40, seed=1, side=160)
    return [jpeg(t) for t in tiles] + [transform_image(t, rng)[0] for t in tiles]


def test_phash_is_imagehash_bit_for_bit_on_real_photos(photos: list[bytes]) -> None:
    got = fingerprint_images(photos, reduced_decode=False)
    assert got.ok.all()
    want = np.array([_imagehash(p) for p in photos], dtype=np.uint64)
    assert np.array_equal(got.hashes, want)


def test_reduced_decode_stays_within_a_few_bits_of_imagehash(photos: list[bytes]) -> None:
    got = fingerprint_images(photos)
    want = np.array([_imagehash(p) for p in photos], dtype=np.uint64)
    distance = np.bitwise_count(got.hashes ^ want)
    assert distance.max() <= 6, np.bincount(distance)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 5))
def test_batch_dct_equals_imagehash_on_any_pixels(seed: int, batch: int) -> None:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(batch, 32, 32), dtype=np.uint8)
    want = [int(str(imagehash.phash(Image.fromarray(p, "L"))), 16) for p in pixels]
    assert hashes_of_pixels(pixels).tolist() == want


@pytest.mark.parametrize("value", [0, 1, 128, 254, 255])
def test_a_flat_or_mirrored_image_hashes_as_imagehash(value: int) -> None:
    """Coefficients that are zero in exact arithmetic decide no bit by their rounding noise: a
    flat image (every AC coefficient 0) and mirrored ones (the odd ones 0) are imagehash's."""
    flat = np.full((32, 32), value, dtype=np.uint8)
    ramp = np.tile(np.concatenate([np.arange(16), np.arange(16)[::-1]]) * 8 + value // 4, (32, 1))
    mirrored = ramp.astype(np.uint8)
    for pixels in (flat, mirrored, mirrored.T):
        want = int(str(imagehash.phash(Image.fromarray(pixels, "L"))), 16)
        assert hashes_of_pixels(pixels[None]).tolist() == [want]


def test_undecodable_images_are_reported_each_with_a_reason(photos: list[bytes]) -> None:
    good = photos[0]
    batch = [good[: len(good) // 3], b"\x89PNG\r\n\x1a\n" + b"\0" * 40, good]
    got = fingerprint_images(batch)
    assert got.ok.tolist() == [False, False, True]
    assert all(e.startswith("not a decodable image") and "\n" not in e for e in got.errors[:2])
    assert got.hashes[2] == fingerprint_images([good]).hashes[0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "home"]
        ),
        max_size=60,
    )
)
def test_minhash_equals_datasketch(tokens: list[str]) -> None:
    fp = fingerprint_texts([" ".join(tokens).encode() or b"x"])
    reference = datasketch.MinHash(num_perm=NUM_PERM, seed=SEED, hashfunc=int)
    for h in fp.shingles[0]:
        reference.update(int(h) & 0xFFFFFFFF)
    assert np.array_equal(reference.hashvalues, fp.minhash[0])


def test_case_whitespace_and_punctuation_do_not_change_a_text_fingerprint() -> None:
    text = stdlib_texts()[3]
    changed = "  " + text.upper().replace(" ", " \n\t ").replace(",", " ;").replace(".", "!") + "?"
    a, b = fingerprint_texts([text.encode(), changed.encode()]).shingles
    assert np.array_equal(a, b)
    assert jaccard(a, b) == 1.0


def test_text_minhash_estimates_the_jaccard_of_real_texts() -> None:
    texts = stdlib_texts()[:40]
    fp = fingerprint_texts([t.encode() for t in texts])
    for i in range(0, 39):
        exact = jaccard(fp.shingles[i], fp.shingles[i + 1])
        estimate = float(np.mean(fp.minhash[i] == fp.minhash[i + 1]))
        assert abs(exact - estimate) < 0.2


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "empty text (0 bytes)"),
        (b" ,;. \n", "empty text (no words)"),
        (b"\xff\xfe\x00a", "not UTF-8 text (byte 0 cannot be decoded)"),
        (b"abc\x00def", "binary data, not text (control character U+0000)"),
    ],
)
def test_bad_text_is_reported(payload: bytes, reason: str) -> None:
    fp = fingerprint_texts([payload, b"fine words"])
    assert fp.ok.tolist() == [False, True]
    assert fp.errors[0] == reason


def test_words_fold_case_and_unicode_forms() -> None:
    assert words("Caf\u00e9 CAFE\u0301, ﬁne-tuned!") == ["café", "café", "fine", "tuned"]


def test_one_table_holds_images_texts_and_unreadable_payloads(photos: list[bytes]) -> None:
    table = fingerprint_payloads(["a", "b", "c"], [photos[0], b"some words here", b"\x00\x01"])
    rows = table.to_pylist()
    assert [r["kind"] for r in rows] == ["image", "text", "unreadable"]
    assert rows[0]["phash"] == int(fingerprint_images([photos[0]]).hashes[0])
    assert rows[1]["minhash"] is not None and rows[1]["phash"] is None
    assert rows[2]["error"].startswith("binary data") and rows[2]["minhash"] is None


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.text(max_size=60).map(str.encode),
            st.integers(0, 79).map(lambda i: ("photo", i)),
            st.integers(0, 79).map(lambda i: ("cut", i)),
        ),
        max_size=6,
    )
)
def test_a_declared_kind_keeps_each_payload_to_that_kind(
    photos: list[bytes], picks: list[bytes | tuple[str, int]]
) -> None:
    # Photographs, photographs cut short, and arbitrary bytes and texts, mixed in a batch.
    payloads = [
        p if isinstance(p, bytes) else photos[p[1]][: None if p[0] == "photo" else 900]
        for p in picks
    ]
    names = [f"p{i}" for i in range(len(payloads))]
    found = fingerprint_payloads(names, payloads).to_pylist()
    as_image = fingerprint_payloads(names, payloads, as_kind="image").to_pylist()
    as_text = fingerprint_payloads(names, payloads, as_kind="text").to_pylist()
    not_image = "not an image (PIL recognises no image format in these bytes)"
    for auto, image, text in zip(found, as_image, as_text, strict=True):
        assert image["kind"] in ("image", "unreadable") and text["kind"] in ("text", "unreadable")
        # What PIL recognises (decodable or not) is fingerprinted the same given as an image;
        # the rest, given as an image, is unreadable rather than read as the text it may be.
        if auto["kind"] == "image" or (auto["error"] or "").startswith("not a decodable image"):
            assert image == auto
        else:
            assert text == auto
            assert (image["kind"], image["error"]) == ("unreadable", not_image)


def _tree(root: Path, photos: list[bytes], n: int) -> Path:
    for i in range(n):
        folder = root / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.jpg").write_bytes(photos[i])
    return root


def test_fingerprints_are_stored_per_payload_and_reused(
    make_registry: Callable[..., Registry], tmp_path: Path, photos: list[bytes]
) -> None:
    reg = make_registry()
    first = dsreg.add("train", _tree(tmp_path / "t1", photos, 40), registry=reg)
    blobs = dsreg.open(f"train@{first.revision}", registry=reg).labels().column("blob")
    done = fingerprints_of(reg, first.snapshot, blobs.combine_chunks())
    assert done.computed == 40 and done.table.num_rows == 40
    assert reg.store.has(done.digest)
    again = fingerprints_of(reg, first.snapshot, blobs.combine_chunks())
    assert (again.computed, again.digest) == (0, done.digest)

    # One more payload in a new snapshot: only it is fingerprinted.
    second = dsreg.add("train", _tree(tmp_path / "t2", photos, 41), registry=reg)
    names = dsreg.open(f"train@{second.revision}", registry=reg).labels().column("blob")
    grown = fingerprints_of(reg, second.snapshot, names.combine_chunks())
    assert grown.computed == 1 and grown.table.num_rows == 41
    digests = names.to_pylist()
    fresh = fingerprint_payloads(digests, [reg.store.read_bytes(d) for d in digests])
    assert grown.table.equals(fresh.sort_by("payload"))


def test_index_entries_of_tables_gc_removed_are_dropped(
    make_registry: Callable[..., Registry], tmp_path: Path, photos: list[bytes]
) -> None:
    """A table held by nothing (no overlay names it) is removed by gc; the index entry naming
    it is dropped at the next look, not left to name an object that is gone."""
    reg = make_registry()
    first = dsreg.add("a", _tree(tmp_path / "a", photos, 4), registry=reg)
    blobs = dsreg.open(f"a@{first.revision}", registry=reg).labels().column("blob")
    done = fingerprints_of(reg, first.snapshot, blobs.combine_chunks())
    folder = next((reg.root / "state" / "fingerprints").iterdir())
    entry = folder / first.snapshot.removeprefix("blake3:")
    assert entry.read_text().strip() == done.digest
    assert done.digest in dsreg.gc(registry=reg).removed
    second = dsreg.add("b", _tree(tmp_path / "b", photos[4:], 3), registry=reg)
    names = dsreg.open(f"b@{second.revision}", registry=reg).labels().column("blob")
    other = fingerprints_of(reg, second.snapshot, names.combine_chunks())
    assert [p.name for p in folder.iterdir()] == [second.snapshot.removeprefix("blake3:")]
    assert reg.store.has(other.digest)


def test_tables_of_another_method_are_never_read_as_this_ones(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    photos: list[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An overlay records the fingerprint method its tables were made with; after a change of
    method (a new name), the tables it holds are not indexed for the new one: recomputed."""
    import dsreg.audit.fingerprints as fingerprints

    reg = make_registry()
    (tmp_path / "t" / "a").mkdir(parents=True)
    for i in (0, 1, 2, 40):  # photos[40] is a transformed copy of photos[0]
        (tmp_path / "t" / "a" / f"{i}.jpg").write_bytes(photos[i])
    dsreg.add("test", tmp_path / "t", tag="v1", registry=reg)
    first = dsreg.audit_duplicates("test@v1", within=True, tag="audited", registry=reg)
    assert first.digest is not None and first.fingerprints["computed"] == 4
    monkeypatch.setattr(fingerprints, "METHOD", fingerprints.METHOD + "-next")
    again = dsreg.audit_duplicates("test@v1", within=True, registry=reg)
    assert again.fingerprints["computed"] == 4
