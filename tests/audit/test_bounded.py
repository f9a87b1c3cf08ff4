"""What the audit reads, it reads in bounded memory: a payload over the size limit is listed
with its reason and never read, a text is fingerprinted piece by piece, an image too large to
decode gets the decoder's reason; and the fingerprints cache is only a cache."""

from __future__ import annotations

import io
import json
import os
import resource
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import dsreg
from dsreg import Registry
from dsreg.audit import fingerprints, parquet_corpus, text
from dsreg.audit.corpus import jpeg, photo_tiles, stdlib_texts
from dsreg.audit.fingerprints import FILES_SCHEMA, METHOD, fingerprint_files
from dsreg.registry.reader import LocalReader
from dsreg.registry.tables import read_examples

GIB = 1 << 30
# Peak resident memory the audit may reach with a 3 GiB file in its corpus folder.
PEAK_LIMIT_MB = 1000
# The child's address space: a safety net for the machine should a read of the whole file come
# back (the audit itself maps about 2 GB of address space).
_ADDRESS_SPACE = 4 * GIB
# Reports the process's peak resident memory (its own, and its children's) on exit.
_MEASURED = (
    "import atexit, resource, sys\n"
    "def peak():\n"
    "    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "    sys.stderr.write(f'PEAK_KB {max(own, kids)}\\n')\n"
    "atexit.register(peak)\n"
    "from dsreg.cli import main\n"
    "main(sys.argv[1:])\n"
)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE, _ADDRESS_SPACE))


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` pixels (and holds none)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def _blobs(reg: Registry, spec: str) -> dict[str, str]:
    """Each example id of ``spec`` and its payload's digest."""
    rev = LocalReader(reg).revision(spec).revision
    table = read_examples(reg, reg.snapshot(rev.snapshot), columns=["example_id", "blob"])
    return dict(zip(*(table.column(c).to_pylist() for c in ("example_id", "blob")), strict=True))


@pytest.fixture(scope="module")
def tile() -> bytes:
    return jpeg(photo_tiles(1, seed=3, side=96)[0])


def test_a_3_gib_file_is_listed_with_its_reason_in_bounded_memory(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    tile: bytes,
    dsreg_env: Callable[..., dict[str, str]],
) -> None:
    reg = make_registry()
    (tmp_path / "test" / "a").mkdir(parents=True)
    (tmp_path / "test" / "a" / "t.jpg").write_bytes(tile)
    dsreg.add("test", tmp_path / "test", tag="v1", registry=reg)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "copy.jpg").write_bytes(tile)
    huge = corpus / "dump.bin"
    huge.touch()
    os.truncate(huge, 3 * GIB)  # sparse: no disk
    res = subprocess.run(
        [
            *(sys.executable, "-c", _MEASURED, "audit", "duplicates", "test@v1"),
            *("--against", str(corpus), "--registry", str(reg.root), "--json"),
        ],
        env={**dsreg_env(), "MALLOC_ARENA_MAX": "2"},
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limited,
    )
    assert res.returncode == 0, res.stderr
    peak_mb = int(res.stderr.split("PEAK_KB ")[1].split()[0]) / 1024
    print(f"peak resident memory: {peak_mb:.0f} MB")
    assert peak_mb < PEAK_LIMIT_MB
    out = json.loads(res.stdout)
    assert out["unreadable_against"] == [
        {
            "path": str(huge),
            "reason": "larger than 64 MiB (3,221,225,472 bytes): the audit reads no payload "
            "over that",
        }
    ]
    assert [(f["example_id"], f["matches"][0]["example_id"]) for f in out["findings"]] == [
        ("a/t.jpg", "copy.jpg")
    ]


def test_a_stored_payload_over_the_limit_is_unreadable_and_still_checked(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tile: bytes,
    flip_byte: Callable[..., None],
) -> None:
    """An object of the store over the limit is never read whole: its fingerprints row is
    ``unreadable`` with the reason, and it is re-hashed in chunks, so damage is still found."""
    reg = make_registry()
    words = " ".join(stdlib_texts()[:40]).encode()
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "big.txt").write_bytes(words)
    (tmp_path / "t" / "a" / "small.jpg").write_bytes(tile)
    dsreg.add("t", tmp_path / "t", tag="v1", registry=reg)
    monkeypatch.setattr(fingerprints, "MAX_PAYLOAD_BYTES", len(tile) + 1)
    res = dsreg.audit_duplicates("t@v1", within=True, registry=reg)
    size = f"{len(words):,}"
    assert [(r, i) for r, i, _ in res.unreadable] == [(0, "a/big.txt")]
    assert res.unreadable[0][2] == fingerprints.too_large(len(words))
    assert f"({size} bytes)" in res.unreadable[0][2]

    digest = _blobs(reg, "t@v1")["a/big.txt"]
    flip_byte(reg, digest)
    batch = pa.table({"path": [str(reg.store.path(digest))], "expect": [digest]}, FILES_SCHEMA)
    got = fingerprint_files(batch)
    assert got.column("read_error").to_pylist() == ["damaged: its bytes do not hash to its digest"]


def test_files_are_fingerprinted_in_groups_of_bounded_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tile: bytes
) -> None:
    """A batch holds at most GROUP_BYTES of payloads at once; its rows are the same however
    it is grouped."""
    paths = []
    for i in range(6):
        path = tmp_path / f"f{i}"
        path.write_bytes(tile if i % 2 else f"text number {i} of a few words".encode())
        paths.append(str(path))
    batch = pa.table({"path": paths, "expect": [None] * len(paths)}, FILES_SCHEMA)
    whole = fingerprint_files(batch)
    sizes: list[int] = []
    real = fingerprints.fingerprint_payloads

    def counted(digests: list[str], payloads: list[bytes]) -> pa.Table:
        sizes.append(sum(map(len, payloads)))
        return real(digests, payloads)

    monkeypatch.setattr(fingerprints, "fingerprint_payloads", counted)
    monkeypatch.setattr(fingerprints, "GROUP_BYTES", len(tile))
    assert fingerprint_files(batch).equals(whole)
    assert len(sizes) > 1 and max(sizes) < 2 * len(tile) + 100


def test_a_large_text_is_fingerprinted_in_bounded_memory(
    dsreg_env: Callable[..., dict[str, str]],
) -> None:
    """An 8 MiB text of 1.4 million words: its fingerprints take its bytes and its hash sets,
    not a string and a list of words of the whole (which took twenty times the text)."""
    code = (
        "import resource, numpy as np\n"
        "from dsreg.audit.text import fingerprint_texts\n"
        "rng = np.random.default_rng(0)\n"
        "vocab = np.array([f'w{i}' for i in range(50000)])\n"
        "data = ' '.join(rng.choice(vocab, size=1_400_000)).encode()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "fp = fingerprint_texts([data])\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(len(data) >> 20, (after - before) >> 10, len(fp.shingles[0]), fp.ok[0])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], env=dsreg_env(), capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    mib, grew_mb, shingles, ok = res.stdout.split()
    print(f"{mib} MiB of text: peak grew by {grew_mb} MB")
    assert ok == "True" and int(shingles) > 1_000_000
    assert int(grew_mb) < 200


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", "b", "é", "e\u0301", "\u0301", "ﬁ", "日本", " ", ",", "\n", "_", "x.y", "\u2028"]
        ),
        max_size=60,
    ).map("".join),
    st.integers(1, 9),
)
def test_a_text_read_in_pieces_has_the_fingerprints_of_the_whole(value: str, piece: int) -> None:
    data = value.encode()
    whole = text.fingerprint_texts([data])
    saved = text.PIECE_BYTES
    try:
        text.PIECE_BYTES = piece
        pieces = text.fingerprint_texts([data])
    finally:
        text.PIECE_BYTES = saved
    assert pieces.errors == whole.errors and pieces.ok.tolist() == whole.ok.tolist()
    assert np.array_equal(pieces.minhash, whole.minhash)
    assert all(np.array_equal(a, b) for a, b in zip(pieces.shingles, whole.shingles, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(pieces.grams, whole.grams, strict=True))


@pytest.mark.parametrize(
    "data", [b"abc \xff def", b"ab \xe6\x97", b"a\x80\x80\x80\x80\x80 b", b"\xf0\x9f\x98\x80\x80 k"]
)
@pytest.mark.parametrize("piece", [1, 2, 3, 4, 5])
def test_the_first_undecodable_byte_is_named_wherever_the_pieces_are_cut(
    data: bytes, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = text.fingerprint_texts([data]).errors
    monkeypatch.setattr(text, "PIECE_BYTES", piece)
    assert text.fingerprint_texts([data]).errors == whole


def test_undecodable_images_get_the_decoders_reason_not_not_utf8(
    make_registry: Callable[..., Registry], tmp_path: Path, tile: bytes
) -> None:
    reg = make_registry()
    damaged = tile.replace(b"\xff\xc4", b"\xff\x01")  # the Huffman tables' markers gone
    files = {
        "bomb.png": _png_header(30000, 30000),
        "large.png": _png_header(9000, 9000),
        "markers.jpg": damaged,
        "ok.jpg": tile,
    }
    (tmp_path / "t" / "a").mkdir(parents=True)
    for name, data in files.items():
        (tmp_path / "t" / "a" / name).write_bytes(data)
    dsreg.add("t", tmp_path / "t", tag="v1", registry=reg)
    res = dsreg.audit_duplicates("t@v1", within=True, registry=reg)
    reasons = {i.removeprefix("a/"): why for _, i, why in res.unreadable}
    assert reasons == {
        "bomb.png": "not a decodable image (DecompressionBombError: Image size (900000000 "
        "pixels) exceeds limit of 178956970 pixels, could be decompression bomb DOS attack.)",
        "large.png": "not a decodable image (ValueError: 9000 x 9000 pixels to decode, more "
        "than the 67,108,864 the audit decodes)",
        "markers.jpg": "not a decodable image (SyntaxError: no marker found)",
    }


def test_an_index_entry_naming_anything_but_a_fingerprints_table_is_a_cache_miss(
    make_registry: Callable[..., Registry], tmp_path: Path, tile: bytes
) -> None:
    """docs/audit.md calls the index a cache: an entry naming an intact object that is no
    fingerprints table (a manifest, a payload) is recomputed, and the entry replaced."""
    reg = make_registry()
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "x.jpg").write_bytes(tile)
    (tmp_path / "t" / "a" / "y.jpg").write_bytes(jpeg(Image.open(io.BytesIO(tile)), 40))
    dsreg.add("t", tmp_path / "t", tag="v1", registry=reg)
    first = dsreg.audit_duplicates("t@v1", within=True, registry=reg)
    rev = LocalReader(reg).revision("t@v1")
    entry = (
        reg.root / "state" / "fingerprints" / METHOD / rev.revision.snapshot.removeprefix("blake3:")
    )
    held = entry.read_text().strip()
    payload = _blobs(reg, "t@v1")["a/x.jpg"]
    for wrong in (rev.revision.snapshot, rev.digest, payload):
        entry.write_text(wrong + "\n")
        again = dsreg.audit_duplicates("t@v1", within=True, registry=reg)
        assert again.findings == first.findings
        assert again.fingerprints["computed"] == 2
        assert entry.read_text().strip() == held  # the same rows, the same table


def test_a_parquet_corpus_is_read_in_windows_and_its_large_items_listed(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tile: bytes,
) -> None:
    """A corpus file's payloads are read batch by batch into windows of at most
    WINDOW_BYTES (never the whole column); a payload over the size limit is listed with its
    reason, a null one as before; the findings are those of one window."""
    reg = make_registry()
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "x.jpg").write_bytes(tile)
    dsreg.add("t", tmp_path / "t", tag="v1", registry=reg)
    others = [jpeg(t) for t in photo_tiles(300, seed=9, side=64)]
    big = b"\xff\xd8\xff" + bytes(len(tile) * 3)
    payloads = [*others, tile, big, None]
    path = tmp_path / "corpus.parquet"
    ids = [f"item{i}" for i in range(len(payloads))]
    pq.write_table(pa.table({"id": ids, "image": pa.array(payloads, pa.binary())}), path)
    whole = dsreg.audit_duplicates("t@v1", against=[str(path)], registry=reg)

    monkeypatch.setattr(fingerprints, "MAX_PAYLOAD_BYTES", len(tile) * 2)
    corpus = parquet_corpus.read_corpus(path)
    monkeypatch.setattr(parquet_corpus, "WINDOW_BYTES", len(tile) * 8)
    sizes = [
        sum(map(len, w.blobs.column("bytes").to_pylist())) for w in parquet_corpus.windows(corpus)
    ]
    assert len(sizes) > 10 and max(sizes) < len(tile) * 8 + 2 * len(tile)
    res = dsreg.audit_duplicates("t@v1", against=[str(path)], registry=reg)
    for done in (whole, res):  # the corpus's listing differs by the item not read
        assert [(f.example_id, f.matches[0]["example_id"], f.tier) for f in done.findings] == [
            ("a/x.jpg", f"item{len(others)}", "exact")
        ]
    reasons = dict(res.unreadable_against)
    assert reasons[f"{path}: item{len(others) + 1}"] == fingerprints.too_large(len(big))
    assert reasons[f"{path}: item{len(others) + 2}"] == "no payload (null)"
