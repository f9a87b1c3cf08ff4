"""``dsreg audit duplicates``: tiers, verdicts, the overlay, the decontaminated view, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import ImageEnhance

import dsreg
from dsreg import Registry
from dsreg.audit.corpus import edit_text, jpeg, photo_tiles, stdlib_texts
from dsreg.errors import InvalidInputError
from dsreg.registry.reader import LocalReader


@pytest.fixture(scope="module")
def images() -> list[object]:
    return photo_tiles(24, seed=7, side=160)


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _image_sets(tmp_path: Path, images: list[object]) -> tuple[Path, Path]:
    """A training tree of tiles 0-15 and a test tree: tiles 0-3 re-encoded, resized or
    brightened (near), tile 4 byte for byte (exact), tiles 16-21 unrelated, tile 16 twice (a
    duplicate within)."""
    train = {f"c{i % 2}/t{i:02d}.jpg": jpeg(images[i]) for i in range(16)}  # type: ignore[arg-type]
    near = [
        jpeg(images[0], quality=30),  # type: ignore[arg-type]
        jpeg(images[1].resize((80, 80))),  # type: ignore[attr-defined]
        jpeg(ImageEnhance.Brightness(images[2]).enhance(1.2)),  # type: ignore[arg-type]
        jpeg(images[3].resize((320, 320)), quality=50),  # type: ignore[attr-defined]
    ]
    test = {f"c{i % 2}/near{i}.jpg": near[i] for i in range(4)}
    test["c0/exact4.jpg"] = train["c0/t04.jpg"]
    for i in range(16, 22):
        test[f"c{i % 2}/new{i}.jpg"] = jpeg(images[i])  # type: ignore[arg-type]
    test["c1/again16.jpg"] = jpeg(images[16], quality=60)  # type: ignore[arg-type]
    return _write(tmp_path / "train", train), _write(tmp_path / "test", test)


def _registered(reg: Registry, tmp_path: Path, images: list[object]) -> Registry:
    """``reg`` holding the two sets of ``_image_sets`` as ``train@v1`` and ``test@v1``."""
    train, test = _image_sets(tmp_path, images)
    dsreg.add("train", train, tag="v1", registry=reg)
    dsreg.add("test", test, tag="v1", registry=reg)
    return reg


def test_audit_finds_exact_and_near_copies_and_duplicates(
    make_registry: Callable[..., Registry], tmp_path: Path, images: list[object]
) -> None:
    reg = _registered(make_registry(), tmp_path, images)
    res = dsreg.audit_duplicates(
        "test@v1", against=["train@v1"], within=True, tag="clean", registry=reg
    )
    by_id = {f.example_id: f for f in res.findings}
    assert {i for i, f in by_id.items() if f.verdict == "contaminated"} == {
        "c0/exact4.jpg",
        "c0/near0.jpg",
        "c1/near1.jpg",
        "c0/near2.jpg",
        "c1/near3.jpg",
    }
    assert by_id["c0/exact4.jpg"].matches[0] == {
        "dataset": LocalReader(reg).revision("train@v1").digest,
        "example_id": "c0/t04.jpg",
        "tier": "exact",
        "distance": 0.0,
    }
    assert by_id["c0/near0.jpg"].matches[0]["example_id"] == "c0/t00.jpg"
    assert by_id["c0/near0.jpg"].matches[0]["tier"] == "image"
    # Of the two copies of tile 16, the first row is kept, the other is the duplicate.
    dups = [i for i, f in by_id.items() if f.verdict == "duplicate"]
    assert dups == ["c1/again16.jpg"]
    assert res.counts["contaminated"] == 5 and res.counts["duplicate"] == 1

    # The decontaminated view leaves those six rows out; the other views keep them.
    clean = dsreg.open("test@clean", registry=reg)
    assert len(clean) == 12 - 6
    assert set(clean.labels().column("example_id").to_pylist()).isdisjoint(by_id)
    assert len(dsreg.open("test@v1", registry=reg)) == 12
    rev = LocalReader(reg).revision("test@clean").revision
    assert rev.view == "decontaminated"
    overlay = reg.overlay(rev.overlays[-1])
    assert overlay.kind == "audit" and overlay.version == 3
    # Only the decontaminated view leaves them out: they are no label errors.
    for view in ("cleaned", "corrected", "multilabel"):
        dsreg.tag(f"test@{view}", "test@clean", view=view, registry=reg)
        assert len(dsreg.open(f"test@{view}", registry=reg)) == 12, view
    con = dsreg.sql('SELECT example_id FROM "test@clean" ORDER BY 1', registry=reg)
    assert con.column(0).to_pylist() == sorted(clean.labels().column("example_id").to_pylist())
    # dsreg eval scores the full set and the decontaminated rows side by side.
    given = dsreg.open("test@v1", registry=reg).labels().column("label").to_numpy()
    report = dsreg.evaluate(
        "test@clean", {"m": given}, views=["original", "decontaminated"], registry=reg
    )
    assert report.views == {"original": 12, "decontaminated": 6}


def test_a_reaudit_reuses_every_fingerprint(
    make_registry: Callable[..., Registry], tmp_path: Path, images: list[object]
) -> None:
    reg = _registered(make_registry(), tmp_path, images)
    first = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    again = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    # 12 test payloads, 16 training ones, one of them (tile 4) the same bytes: fingerprinted once.
    assert first.fingerprints["computed"] == 12 + 16 - 1
    assert again.fingerprints["computed"] == 0
    assert again.digest == first.digest


def test_fingerprints_are_objects_the_audit_overlay_holds(
    make_registry: Callable[..., Registry], tmp_path: Path, images: list[object]
) -> None:
    reg = _registered(make_registry(), tmp_path, images)
    first = dsreg.audit_duplicates("test@v1", against=["train@v1"], tag="clean", registry=reg)
    assert first.digest is not None
    overlay = reg.overlay(first.digest)
    inputs = overlay.producer["inputs"]
    test_table, train_table = inputs["fingerprints"], inputs["against0_fingerprints"]
    assert set(overlay.held) == {test_table, train_table}
    # The tag applying the overlay reaches both tables: gc keeps them, verify checks them.
    swept = dsreg.gc(registry=reg)
    assert not {test_table, train_table} & set(swept.removed)
    assert dsreg.verify("test@clean", registry=reg).ok

    # The index is a cache: without it, the audit finds the tables the overlay holds.
    shutil.rmtree(reg.root / "state" / "fingerprints")
    again = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    assert again.fingerprints["computed"] == 0
    assert (again.digest, again.findings) == (first.digest, first.findings)

    # A damaged table is named by verify and never read by the audit: its rows are recomputed
    # (tile 4's is in the training set's table) and the good bytes replace it.
    path = reg.store.path(test_table)
    path.chmod(0o644)
    path.write_bytes(b"not a fingerprints table")
    assert test_table in {p.digest for p in dsreg.verify("test@clean", registry=reg).problems}
    third = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    assert third.fingerprints["computed"] == 12 - 1
    assert (third.digest, third.findings) == (first.digest, first.findings)
    assert dsreg.verify(registry=reg).ok

    # Held by nothing any more (the tag deleted, the log let go): gc removes the tables and
    # the next audit computes every fingerprint again, to the same overlay.
    dsreg.tag("test@clean", delete=True, registry=reg)
    swept = dsreg.gc(prune_log_older_than="now", registry=reg)
    assert {first.digest, test_table, train_table} <= set(swept.removed)
    fourth = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    assert fourth.fingerprints["computed"] == 12 + 16 - 1
    assert (fourth.digest, fourth.findings) == (first.digest, first.findings)
    assert dsreg.verify(registry=reg).ok


def test_text_tiers_near_copies_and_13_grams(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    texts = stdlib_texts()[:40]
    rng = np.random.default_rng(2)
    vocab = " ".join(texts).split()
    train = {f"a/doc{i:02d}.txt": t.encode() for i, t in enumerate(texts[:30])}
    test = {
        "a/edited.txt": edit_text(texts[3], rng, vocab)[0].encode(),
        "a/quote.txt": ("Q: " + " ".join(texts[5].split()[2:20]) + "?").encode(),
        "a/fresh.txt": texts[35].encode(),
        "a/other.txt": texts[36].encode(),
    }
    reg = make_registry()
    dsreg.add("corpus", _write(tmp_path / "train", train), tag="v1", registry=reg)
    dsreg.add("bench", _write(tmp_path / "test", test), tag="v1", registry=reg)
    res = dsreg.audit_duplicates("bench@v1", against="corpus@v1", registry=reg)
    found = {f.example_id: f.matches[0] for f in res.findings}
    assert set(found) == {"a/edited.txt", "a/quote.txt"}
    assert (found["a/edited.txt"]["tier"], found["a/edited.txt"]["example_id"]) == (
        "text",
        "a/doc03.txt",
    )
    assert (found["a/quote.txt"]["tier"], found["a/quote.txt"]["example_id"]) == (
        "ngram",
        "a/doc05.txt",
    )


def test_labels_only_rows_are_skipped_and_bad_payloads_listed(
    make_registry: Callable[..., Registry], tmp_path: Path, images: list[object]
) -> None:
    reg = make_registry()
    good = jpeg(images[0])  # type: ignore[arg-type]
    files = {
        "x/good.jpg": good,
        "x/truncated.jpg": good[: len(good) // 2],
        "x/empty.txt": b"",
        "x/binary.bin": bytes(range(256)),
        "x/nul.txt": b"words\x00and more words",
    }
    test = _write(tmp_path / "test", files)
    dsreg.add("test", test, tag="v1", registry=reg)
    dsreg.add("train", _write(tmp_path / "train", {"y/a.jpg": good}), tag="v1", registry=reg)
    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([0, 1, 0]))
    dsreg.add("lo", labels=labels, tag="v1", registry=reg)

    res = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=reg)
    reasons = {i: why for _, i, why in res.unreadable}
    assert set(reasons) == {"x/truncated.jpg", "x/empty.txt", "x/binary.bin", "x/nul.txt"}
    assert reasons["x/empty.txt"] == "empty text (0 bytes)"
    assert reasons["x/truncated.jpg"].startswith("not a decodable image")
    assert reasons["x/binary.bin"] == "not UTF-8 text (byte 128 cannot be decoded)"
    assert reasons["x/nul.txt"] == "binary data, not text (control character U+0000)"
    assert res.audited == 1 and [f.example_id for f in res.findings] == ["x/good.jpg"]

    lo = dsreg.audit_duplicates("lo@v1", within=True, registry=reg)
    assert (lo.skipped_labels_only, lo.audited, lo.digest) == (3, 0, None)


def test_against_a_folder_lists_its_unreadable_files(
    make_registry: Callable[..., Registry], tmp_path: Path, images: list[object]
) -> None:
    reg = make_registry()
    _, test = _image_sets(tmp_path, images)
    dsreg.add("test", test, tag="v1", registry=reg)
    t04 = jpeg(images[4])  # type: ignore[arg-type]
    corpus = _write(
        tmp_path / "corpus",
        # Files read but not fingerprinted (never matched) are listed as the unread ones are.
        {"sub/t04.jpg": t04, "z.txt": b"words", "cut.jpg": t04[: len(t04) // 2], "empty.txt": b""},
    )
    (corpus / "gone.jpg").symlink_to(corpus / "missing.jpg")
    os.mkfifo(corpus / "pipe")
    res = dsreg.audit_duplicates("test@v1", against=[str(corpus)], registry=reg)
    assert [(f.example_id, f.matches[0]["example_id"]) for f in res.findings] == [
        ("c0/exact4.jpg", "sub/t04.jpg")
    ]
    reasons = dict(res.unreadable_against)
    assert reasons.pop(str(corpus / "cut.jpg")).startswith("not a decodable image (")
    assert reasons == {
        str(corpus / "empty.txt"): "empty text (0 bytes)",
        str(corpus / "gone.jpg"): "cannot be read (No such file or directory)",
        str(corpus / "pipe"): "not a regular file",
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"image_threshold": 40}, "image threshold 40 is out of range"),
        ({"image_threshold": -1}, "image threshold -1 is out of range"),
        ({"text_threshold": 1.5}, "Jaccard threshold 1.5 is out of range"),
        ({"text_threshold": 0.0}, "Jaccard threshold 0.0 is out of range"),
        ({}, "nothing to audit against"),
    ],
)
def test_bad_options_are_refused_before_any_work(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    images: list[object],
    options: dict[str, object],
    message: str,
) -> None:
    reg = make_registry()
    dsreg.add("test", _write(tmp_path / "t", {"a/x.jpg": jpeg(images[0])}), registry=reg)  # type: ignore[arg-type]
    within = {"within": True} if options else {}
    with pytest.raises(InvalidInputError, match=message):
        dsreg.audit_duplicates("test@latest", **within, **options, registry=reg)  # type: ignore[arg-type]
    assert not (reg.root / "state" / "fingerprints").exists()


def test_cli_json_and_errors(
    cli: Callable[..., object], tmp_path: Path, images: list[object]
) -> None:
    train, test = _image_sets(tmp_path, images)
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    cli("add", "train", str(train), "--tag", "v1")
    cli("add", "test", str(test), "--tag", "v1")
    res = cli("audit", "duplicates", "test@v1", "--against", "train@v1", "--within", "--json")
    assert res.exit_code == 0, res.stderr  # type: ignore[attr-defined]
    data = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert data["counts"]["contaminated"] == 5 and data["counts"]["duplicate"] == 1
    text = cli("audit", "duplicates", "test@v1", "--against", "train@v1")
    assert "contaminated   5" in text.stdout  # type: ignore[attr-defined]
    bad = cli("audit", "duplicates", "test@v1", "--within", "--image-threshold", "99")
    assert bad.exit_code == 1  # type: ignore[attr-defined]
    assert bad.stderr.strip().count("\n") == 0  # type: ignore[attr-defined]
    assert "image threshold 99 is out of range" in bad.stderr  # type: ignore[attr-defined]


def test_a_damaged_payload_is_refused_not_fingerprinted(
    make_registry: Callable[..., Registry],
    cli: Callable[..., Any],
    tmp_path: Path,
    images: list[object],
) -> None:
    reg = make_registry()
    files = {f"a/{i}.jpg": jpeg(images[i]) for i in range(3)}  # type: ignore[arg-type]
    dsreg.add("test", _write(tmp_path / "t", files), tag="v1", registry=reg)
    digest = dsreg.open("test@v1", registry=reg).labels().column("blob")[1].as_py()
    path = reg.store.path(digest)
    path.chmod(0o644)
    path.write_bytes(b"not the bytes that were added")
    args = ("--within", "--tag", "audited", "--registry", str(reg.root))
    refused = cli("audit", "duplicates", "test@v1", *args)
    assert refused.exit_code == 1 and refused.stdout == "", refused.stderr
    assert refused.stderr.count("\n") == 1 and digest[7:19] in refused.stderr
    with pytest.raises(dsreg.CorruptObjectError):
        dsreg.audit_duplicates("test@v1", within=True, tag="audited", registry=reg)
    assert not list((reg.root / "state").glob("fingerprints/*/*"))
    assert "audited" not in reg.refs.tags("test")


def test_leaderboard_scores_the_decontaminated_rows_once_audited(
    make_registry: Callable[..., Registry], tmp_path: Path, images: list[object]
) -> None:
    reg = _registered(make_registry(), tmp_path, images)
    given = dsreg.open("test@v1", registry=reg).labels().column("label").to_numpy()
    wrong = given.copy()
    wrong[:6] = 1 - wrong[:6]  # wrong on the first six rows, whichever the audit names
    dsreg.record("test@v1", {"given": given, "half": wrong}, registry=reg)
    # Before an audit no revision has the view, so the board does not show it.
    assert "decontaminated" not in dsreg.leaderboard("test", registry=reg, resamples=0).views

    dsreg.audit_duplicates("test@v1", against=["train@v1"], within=True, tag="clean", registry=reg)
    board = dsreg.leaderboard("test", registry=reg, resamples=0)
    assert board.views[-1] == "decontaminated"
    clean = next(b for b in board.revisions if b.tag == "clean")
    report = dsreg.evaluate(
        "test@clean", {"given": given, "half": wrong}, views=["decontaminated"], registry=reg
    )
    fig = clean.figure("decontaminated")
    assert fig.rows == report.views["decontaminated"] == 6
    scores = clean.to_dict()["scores"]
    by_model = {m.model: m.scores["decontaminated"].accuracy(1) for m in report.models}
    for model in ("given", "half"):
        assert scores[model]["decontaminated"]["accuracy"] == pytest.approx(by_model[model])
    assert by_model["given"] == 1.0
    # dsreg eval scores the rows the audit named beside the rows it left, and the full set.
    stats = dsreg.evaluate("test@clean", {"given": given, "half": wrong}, registry=reg)
    sig = stats.significance
    assert sig is not None
    full, left, named_rows = (sig.views[v] for v in ("original", "decontaminated", "contaminated"))
    assert (full.rows, left.rows, named_rows.rows) == (12, 6, 6)
    for model in ("given", "half"):
        f, a, b = (vs.models[model] for vs in (full, left, named_rows))
        assert f.accuracy * 12 == pytest.approx(a.accuracy * 6 + b.accuracy * 6)
    assert named_rows.models["given"].accuracy == 1.0
    assert any(c.source == "original" and c.target == "decontaminated" for c in sig.rank_changes)
    # Asked for by name, and refused with the choices when misspelt.
    named = dsreg.leaderboard("test", views=["decontaminated"], registry=reg, resamples=0)
    assert named.views == ("decontaminated",)
    with pytest.raises(InvalidInputError, match="decontaminated"):
        dsreg.leaderboard("test", views=["decontam"], registry=reg, resamples=0)


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--image-threshold", "-1", "image threshold -1 is out of range"),
        ("--image-threshold", "65", "image threshold 65 is out of range"),
        ("--text-threshold", "0", "Jaccard threshold 0.0 is out of range"),
        ("--text-threshold", "1.5", "Jaccard threshold 1.5 is out of range"),
    ],
)
def test_the_command_line_refuses_a_threshold_out_of_range_before_any_work(
    cli: Callable[..., object],
    tmp_path: Path,
    images: list[object],
    option: str,
    value: str,
    said: str,
) -> None:
    _write(tmp_path / "t", {"a/x.jpg": jpeg(images[0])})  # type: ignore[arg-type]
    assert cli("init").exit_code == 0  # type: ignore[attr-defined]
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    bad = cli("audit", "duplicates", "test@v1", "--within", option, value, "--tag", "audited")
    assert bad.exit_code == 1 and bad.stdout == ""  # type: ignore[attr-defined]
    assert bad.stderr.strip().count("\n") == 0, bad.stderr  # type: ignore[attr-defined]
    assert said in bad.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()
    listed = cli("ls").stdout  # type: ignore[attr-defined]
    assert "v1" in listed and "audited" not in listed


_WITHOUT = """
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None
import dsreg
try:
    dsreg.audit_duplicates("test@v1", within=True, engine=sys.argv[2], registry=sys.argv[3])
except dsreg.DsregError as e:
    print(type(e).__name__, e)
"""


@pytest.mark.parametrize(
    ("blocked", "engine", "said"),
    [
        (["numba", "PIL"], "local", "dsreg.audit_duplicates needs: pip install 'dsreg[audit]'"),
        (["ray"], "ray", "dsreg.audit_duplicates(engine='ray') needs: pip install 'dsreg[ray]'"),
    ],
)
def test_the_python_api_without_an_extra_names_it_before_any_work(
    tmp_path: Path,
    images: list[object],
    dsreg_env: Callable[..., dict[str, str]],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
    blocked: list[str],
    engine: str,
    said: str,
) -> None:
    """The audit extra (Pillow, numba) and the ray extra, missing (blocked in a fresh
    process, as tests/packaging does): one line naming the function called and the install
    command, nothing written."""
    reg = dsreg.init(registry=tmp_path / "reg")
    dsreg.add("test", _write(tmp_path / "t", {"a/x.jpg": jpeg(images[0])}), tag="v1",  # type: ignore[arg-type]
              registry=reg)  # fmt: skip
    before = registry_state(reg.root)
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT, json.dumps(blocked), engine, str(reg.root)],
        env=dsreg_env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # The function called, not the command line's `dsreg audit duplicates`.
    assert proc.stdout == f"MissingExtraError {said}\n"
    assert registry_state(reg.root) == before


def test_a_tag_that_exists_is_refused_before_any_work(
    cli: Callable[..., Any],
    tmp_path: Path,
    images: list[object],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    """``--tag`` naming a tag that exists (without ``--force``) is refused in one line, from
    the command line and from Python, before any fingerprint is computed: with a duplicate
    in the set, so that an audit that went on would store an overlay."""
    copy = jpeg(images[0])  # type: ignore[arg-type]
    _write(tmp_path / "t", {"a/x.jpg": copy, "a/y.jpg": copy})
    assert cli("init").exit_code == 0
    assert cli("add", "test", str(tmp_path / "t"), "--tag", "v1").exit_code == 0
    before = registry_state(tmp_path / ".dsreg")
    bad = cli("audit", "duplicates", "test@v1", "--within", "--tag", "v1")
    assert bad.exit_code == 1 and bad.stdout == "", bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert "tag test@v1 exists at" in bad.stderr and "--force" in bad.stderr
    with pytest.raises(dsreg.TagExistsError, match="tag test@v1 exists at"):
        dsreg.audit_duplicates("test@v1", within=True, tag="v1", registry=tmp_path / ".dsreg")
    assert registry_state(tmp_path / ".dsreg") == before
