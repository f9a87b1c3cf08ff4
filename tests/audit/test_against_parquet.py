"""``--against FILE.parquet``: a corpus that is not registered, one item per row (an id and an
image or a text), audited against as a folder is; other files refused in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry
from dsreg.audit.corpus import edit_text, jpeg, photo_tiles, stdlib_texts
from dsreg.errors import InvalidInputError
from dsreg.objects.hashing import hash_bytes


@pytest.fixture(scope="module")
def tiles() -> list[bytes]:
    return [jpeg(t) for t in photo_tiles(8, seed=9, side=128)]


def _test_set(reg: Registry, root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    dsreg.add("test", root, tag="v1", registry=reg)


def test_a_parquet_corpus_of_images_is_audited_against_by_id(
    make_registry: Callable[..., Registry], tmp_path: Path, tiles: list[bytes]
) -> None:
    reg = make_registry()
    _test_set(reg, tmp_path / "test", {f"a/{i}.jpg": tiles[i] for i in range(4)})
    corpus = tmp_path / "corpus.parquet"
    ids = [101, 102, 103, 104]
    images = [tiles[1], None, tiles[6], tiles[7]]
    pq.write_table(pa.table({"id": ids, "image": pa.array(images, pa.binary()), "x": ids}), corpus)
    res = dsreg.audit_duplicates("test@v1", against=[str(corpus)], registry=reg)
    assert [(f.example_id, f.matches[0]["example_id"]) for f in res.findings] == [
        ("a/1.jpg", "101")
    ]
    listing = "".join(
        f"{i}\t{hash_bytes(b)}\n" for i, b in [(101, tiles[1]), (103, tiles[6]), (104, tiles[7])]
    )
    assert res.findings[0].matches[0]["dataset"] == hash_bytes(listing.encode())
    assert res.unreadable_against == ((f"{corpus}: 102", "no payload (null)"),)

    # Hugging Face's Image feature: a struct of bytes and path.
    hf = tmp_path / "hf.parquet"
    structs = [{"bytes": tiles[2], "path": "p.jpg"}, {"bytes": tiles[5], "path": "q.jpg"}]
    pq.write_table(pa.table({"id": ["u", "v"], "image": structs}), hf)
    res = dsreg.audit_duplicates("test@v1", against=[str(hf)], registry=reg)
    assert [(f.example_id, f.matches[0]["example_id"]) for f in res.findings] == [("a/2.jpg", "u")]


def test_a_parquet_corpus_of_texts(make_registry: Callable[..., Registry], tmp_path: Path) -> None:
    import numpy as np

    texts = stdlib_texts()[:12]
    rng = np.random.default_rng(4)
    edited = edit_text(texts[3], rng, " ".join(texts).split())[0]
    reg = make_registry()
    _test_set(reg, tmp_path / "test", {"a/e.txt": edited.encode(), "a/n.txt": texts[11].encode()})
    corpus = tmp_path / "texts.parquet"
    pq.write_table(pa.table({"text": texts[:10], "id": [f"doc{i}" for i in range(10)]}), corpus)
    res = dsreg.audit_duplicates("test@v1", against=str(corpus), registry=reg)
    assert [
        (f.example_id, f.matches[0]["example_id"], f.matches[0]["tier"]) for f in res.findings
    ] == [("a/e.txt", "doc3", "text")]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"name": ["a"], "image": [b"x"]}, "no 'id' column.*columns found: name, image"),
        ({"id": ["a"], "image": [b"x"], "text": ["t"]}, "not exactly one payload column"),
        ({"id": ["a"], "blob": [b"x"]}, "columns found: id, blob"),
        ({"id": ["a"], "image": ["not bytes"]}, "column 'image' holds string"),
        ({"id": ["a"], "text": [b"bytes"]}, "column 'text' holds binary"),
        ({"id": [1.5], "text": ["t"]}, "column 'id' holds double"),
        (
            {"id": ["a", None, "c", None], "text": ["t", "u", "v", "w"]},
            r"row 1 \(counted from 0\) has no id, and 2 of 4 rows have none; give every row",
        ),
        (
            {"id": ["a", "b", "a", "b"], "text": ["t", "u", "v", "w"]},
            r"id 'a' is given to rows 0 and 2 \(counted from 0\); give every row an id of its",
        ),
        ({"id": [7, 3, 3], "image": [b"x", b"y", b"z"]}, "id '3' is given to rows 1 and 2"),
    ],
)
def test_other_files_are_refused_in_one_line_before_any_work(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    tiles: list[bytes],
    table: dict[str, list[object]],
    message: str,
) -> None:
    reg = make_registry()
    _test_set(reg, tmp_path / "test", {"a/0.jpg": tiles[0]})
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(table), path)
    with pytest.raises(InvalidInputError, match=message) as caught:
        dsreg.audit_duplicates("test@v1", against=[str(path)], registry=reg)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert not (reg.root / "state" / "fingerprints").exists()


def _damaged(data: bytes) -> bytes:
    """A Parquet file whose footer (schema) still reads but whose data pages do not."""
    out = bytearray(data)
    for i in range(100, 3000):
        out[i] ^= 0x5A
    return bytes(out)


@pytest.mark.parametrize(
    ("name", "make", "detail"),
    [
        ("notes.csv", lambda good: b"id,text\n1,hello\n", "Parquet magic bytes not found"),
        ("empty.parquet", lambda good: b"", "Parquet file size is 0 bytes"),
        ("cut.parquet", lambda good: good[:5000], "Parquet magic bytes not found"),
        ("damaged.parquet", _damaged, "Corrupt snappy compressed data"),
    ],
)
def test_cli_refuses_a_file_that_is_not_parquet(
    cli: Callable[..., object],
    tmp_path: Path,
    tiles: list[bytes],
    name: str,
    make: Callable[[bytes], bytes],
    detail: str,
) -> None:
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "0.jpg").write_bytes(tiles[0])
    rows = pa.table(
        {"id": [str(i) for i in range(2000)], "text": [f"words {i}" for i in range(2000)]}
    )
    pq.write_table(rows, tmp_path / "good.parquet", compression="snappy")
    bad_file = tmp_path / name
    bad_file.write_bytes(make((tmp_path / "good.parquet").read_bytes()))
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    bad = cli("audit", "duplicates", "test@v1", "--against", str(bad_file))
    assert bad.exit_code == 1  # type: ignore[attr-defined]
    assert bad.stderr.strip().count("\n") == 0, bad.stderr  # type: ignore[attr-defined]
    assert f"--against {bad_file}: not a readable Parquet file ({detail}" in bad.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()


def test_payloads_that_cannot_be_fingerprinted_are_listed_never_matched(
    make_registry: Callable[..., Registry], tmp_path: Path, tiles: list[bytes]
) -> None:
    words = "a few plain words that are text and no image at all, in a row of bytes"
    reg = make_registry()
    _test_set(reg, tmp_path / "test", {"a/1.jpg": tiles[1], "a/w.txt": words.upper().encode()})
    images = tmp_path / "images.parquet"
    bad_images = {
        "junk": b"\xff\xd8\xff not the rest of a JPEG",
        # Text in the image column is no image: not read as the text it is.
        "words": words.encode(),
        "empty": b"",
        "cut": tiles[1][: len(tiles[1]) // 2],
    }
    table = {"id": ["ok", *bad_images], "image": [tiles[1], *bad_images.values()]}
    pq.write_table(pa.table(table), images)
    texts = tmp_path / "texts.parquet"
    bad_texts = {"e": "", "blank": " \n\t ", "nul": "some\x00words", "esc": "\x1b[31mred words"}
    pq.write_table(pa.table({"id": list(bad_texts), "text": list(bad_texts.values())}), texts)

    res = dsreg.audit_duplicates("test@v1", against=[str(images), str(texts)], registry=reg)
    assert [(f.example_id, f.matches[0]["example_id"]) for f in res.findings] == [("a/1.jpg", "ok")]
    reasons = dict(res.unreadable_against)
    assert reasons.pop(f"{images}: cut").startswith("not a decodable image (")
    not_image = "not an image (PIL recognises no image format in these bytes)"
    assert reasons == {
        # A JPEG's signature, then no markers: the decoder's own reason, not "no image".
        f"{images}: junk": "not a decodable image (SyntaxError: no marker found)",
        f"{images}: words": not_image,
        f"{images}: empty": not_image,
        f"{texts}: e": "empty text (0 bytes)",
        f"{texts}: blank": "empty text (no words)",
        f"{texts}: nul": "binary data, not text (control character U+0000)",
        f"{texts}: esc": "binary data, not text (control character U+001B)",
    }


def test_cli_lists_the_unreadable_items_of_a_parquet_corpus(
    cli: Callable[..., object], tmp_path: Path, tiles: list[bytes]
) -> None:
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "0.jpg").write_bytes(tiles[0])
    corpus = tmp_path / "c.parquet"
    ids = ["\x1b[2Jjunk", "zero", "fine"]
    pq.write_table(pa.table({"id": ids, "image": [b"junk", None, tiles[0]]}), corpus)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    res = cli("audit", "duplicates", "test@v1", "--against", str(corpus))
    assert res.exit_code == 0  # type: ignore[attr-defined]
    lines = res.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert lines == [
        f"Unreadable in --against: {corpus}: zero: no payload (null)",
        f"Unreadable in --against: {corpus}: \\x1b[2Jjunk: not an image (PIL recognises no image "
        "format in these bytes)",
    ]
    assert "unreadable     2 in --against (listed on stderr)" in res.stdout.splitlines()  # type: ignore[attr-defined]
    as_json = cli("audit", "duplicates", "test@v1", "--against", str(corpus), "--json")
    listed = json.loads(as_json.stdout)["unreadable_against"]  # type: ignore[attr-defined]
    assert [item["path"] for item in listed] == [f"{corpus}: zero", f"{corpus}: {ids[0]}"]


@pytest.mark.parametrize("shape", ["folder", "parquet"])
def test_an_empty_corpus_is_refused_in_one_line(
    cli: Callable[..., object], tmp_path: Path, tiles: list[bytes], shape: str
) -> None:
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "0.jpg").write_bytes(tiles[0])
    if shape == "folder":
        empty = tmp_path / "corpus"
        (empty / "sub" / ".cache").mkdir(parents=True)
        (empty / ".DS_Store").write_bytes(b"\0")
        (empty / "sub" / ".cache" / "x.jpg").write_bytes(tiles[1])
        said = "holds no file to audit against"
    else:
        empty = tmp_path / "corpus.parquet"
        pq.write_table(
            pa.table({"id": pa.array([], pa.string()), "image": pa.array([], pa.binary())}), empty
        )
        said = "has no rows"
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    bad = cli("audit", "duplicates", "test@v1", "--against", str(empty))
    assert bad.exit_code == 1  # type: ignore[attr-defined]
    assert bad.stderr.strip().count("\n") == 0, bad.stderr  # type: ignore[attr-defined]
    assert f"--against {empty}: " in bad.stderr and said in bad.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()
    assert cli("ls").exit_code == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", ["folder", "parquet"])
def test_an_empty_corpus_is_refused_by_the_python_api_too(
    make_registry: Callable[..., Registry], tmp_path: Path, tiles: list[bytes], shape: str
) -> None:
    reg = make_registry()
    _test_set(reg, tmp_path / "test", {"a/0.jpg": tiles[0]})
    if shape == "folder":
        empty = tmp_path / "corpus"
        (empty / ".cache").mkdir(parents=True)
        (empty / ".cache" / "x.jpg").write_bytes(tiles[1])
        said = "holds no file to audit against"
    else:
        empty = tmp_path / "corpus.parquet"
        pq.write_table(
            pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}), empty
        )
        said = "has no rows"
    with pytest.raises(InvalidInputError, match=said) as caught:
        dsreg.audit_duplicates("test@v1", against=[str(empty)], tag="audited", registry=reg)
    assert f"--against {empty}: " in str(caught.value) and "\n" not in str(caught.value)
    assert not (reg.root / "state" / "fingerprints").exists()
    assert [(t.dataset, t.tag) for t in dsreg.ls(registry=reg)] == [("test", "v1")]


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({"name": ["a"], "image": [b"x"]}, "columns found: name, image"),
        ({"id": ["a"], "image": ["not bytes"]}, "column 'image' holds string"),
        ({"id": ["a", "a"], "text": ["t", "u"]}, "id 'a' is given to rows 0 and 1"),
    ],
)
def test_the_command_line_refuses_a_corpus_file_of_other_columns_in_one_line(
    cli: Callable[..., object],
    tmp_path: Path,
    tiles: list[bytes],
    table: dict[str, list[object]],
    said: str,
) -> None:
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "0.jpg").write_bytes(tiles[0])
    bad_file = tmp_path / "corpus.parquet"
    pq.write_table(pa.table(table), bad_file)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    bad = cli("audit", "duplicates", "test@v1", "--against", str(bad_file), "--tag", "audited")
    assert bad.exit_code == 1 and bad.stdout == ""  # type: ignore[attr-defined]
    assert bad.stderr.strip().count("\n") == 0, bad.stderr  # type: ignore[attr-defined]
    assert str(bad_file) in bad.stderr and said in bad.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()
    listed = cli("ls").stdout  # type: ignore[attr-defined]
    assert "v1" in listed and "audited" not in listed
