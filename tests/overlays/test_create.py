"""Overlays made from votes and from the detector, stored, tagged and served as views."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg.errors import CorruptObjectError, InvalidInputError, VotesError
from dsreg.ingest.snapshot import add_source
from dsreg.ingest.sources import read_classes, scan_labels
from dsreg.model.corrections import corrections_table
from dsreg.ops.tag import make_tag
from dsreg.overlays.create import detect_overlay, votes_overlay
from dsreg.overlays.write import list_overlays, write_overlay
from dsreg.repo.registry import Registry
from dsreg.repo.tables import read_corrections

CIFAR = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def add_labels(
    reg: Registry, tmp_path: Path, name: str, labels: np.ndarray, classes: list[str]
) -> str:
    np.save(tmp_path / f"{name}.npy", labels)
    (tmp_path / f"{name}.txt").write_text("\n".join(classes) + "\n")
    src = scan_labels(tmp_path / f"{name}.npy", classes=read_classes(tmp_path / f"{name}.txt"))
    return add_source(reg, name, src, tag="original").revision


def noisy(n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true = rng.integers(0, k, n)
    probs = rng.dirichlet(np.ones(k) * 0.3, n)
    probs[np.arange(n), true] += 1.5
    probs /= probs.sum(1, keepdims=True)
    given = true.copy()
    flip = rng.random(n) < 0.1
    given[flip] = rng.integers(0, k, flip.sum())
    return given.astype(np.int64), probs


def test_cifar10_votes_reproduce_the_paper_and_the_cleaned_revision_has_9946_rows(
    make_registry: Callable[..., Registry], tmp_path: Path, shared_data: Path
) -> None:
    reg = make_registry()
    labels = np.load(shared_data / "cifar10_test_set_original_labels.npy")
    add_labels(reg, tmp_path, "cifar10-test", labels, CIFAR)
    made = votes_overlay(
        reg,
        "cifar10-test@original",
        shared_data / "cifar10_mturk.json",
        format="label-errors",
        threshold=3,
    )
    s = made.summary
    assert (s["checked"], s["errors"], s["non_error"], s["correctable"]) == (275, 54, 221, 18)
    assert (s["multi_label"], s["neither"], s["non_agreement"]) == (0, 4, 32)
    for view, rows in (("cleaned", 9946), ("corrected", 9964), ("honeypot", 18)):
        make_tag(
            reg,
            f"cifar10-test@{view}-v1",
            "cifar10-test@original",
            overlays=[made.digest],
            view=view,
        )
        ds = dsreg.open(f"cifar10-test@{view}-v1", registry=reg)
        assert len(ds) == rows
    honey = dsreg.open("cifar10-test@honeypot-v1", registry=reg).labels()
    assert (honey.column("label").to_numpy() != honey.column("given_label").to_numpy()).all()
    assert set(honey.column("verdict").to_pylist()) == {"correctable"}


def test_votes_for_mismatched_labels_never_become_an_overlay(
    make_registry: Callable[..., Registry], tmp_path: Path, shared_data: Path
) -> None:
    reg = make_registry()
    labels = np.load(shared_data / "cifar10_test_set_original_labels.npy")
    add_labels(reg, tmp_path, "cifar10-test", (labels + 1) % 10, CIFAR)
    before = sorted(p for p in reg.root.rglob("*") if p.is_file())
    with pytest.raises(VotesError, match=r"mismatch|snapshot says"):
        votes_overlay(
            reg,
            "cifar10-test@original",
            shared_data / "cifar10_mturk.json",
            format="label-errors",
            threshold=3,
        )
    assert sorted(p for p in reg.root.rglob("*") if p.is_file()) == before


def test_detected_overlay_matches_the_detector_and_is_reproducible(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    from dsreg.detector.detector import detect

    given, probs = noisy(600, 4, seed=1)
    np.save(tmp_path / "pyx.npy", probs)
    regs = [make_registry("a"), make_registry("b")]
    digests = []
    for reg in regs:
        add_labels(reg, tmp_path, "toy", given, ["a", "b", "c", "d"])
        made = detect_overlay(reg, "toy@original", tmp_path / "pyx.npy")
        digests.append(made.digest)
    assert digests[0] == digests[1], "same inputs must give the same overlay digest anywhere"
    reg = regs[0]
    det = detect(given, probs)
    assert det.rows.size > 0
    ov = reg.overlay(digests[0])
    assert ov.kind == "detected"
    assert ov.producer["inputs"]["pred_probs"] == dsreg.objects.hashing.hash_file(
        tmp_path / "pyx.npy"
    )
    corr = read_corrections(reg, ov)
    assert sorted(corr.column("row").to_pylist()) == sorted(det.rows.tolist())
    assert set(corr.column("verdict").to_pylist()) == {"suspected"}
    # The corrected revision carries the detector's suggestions.
    make_tag(reg, "toy@corrected", "toy@original", overlays=[digests[0]], view="corrected")
    t = dsreg.open("toy@corrected", registry=reg).labels()
    by_row = dict(zip(t.column("row").to_pylist(), t.column("label").to_pylist(), strict=True))
    for r, s in zip(det.rows.tolist(), det.suggested_labels.tolist(), strict=True):
        assert by_row[r] == s
    assert [r.digest for r in list_overlays(reg, "toy")] == [digests[0]]


def test_detect_on_a_cleaned_revision_maps_rows_back_to_the_snapshot(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    given, probs = noisy(400, 3, seed=2)
    add_labels(reg, tmp_path, "toy", given, ["a", "b", "c"])
    first = detect_overlay(reg, "toy@original", probs)
    make_tag(reg, "toy@cleaned", "toy@original", overlays=[first.digest], view="cleaned")
    ds = dsreg.open("toy@cleaned", registry=reg)
    kept = ds.view_rows().rows
    second = detect_overlay(reg, "toy@cleaned", probs[kept])
    rows = read_corrections(reg, reg.overlay(second.digest)).column("row").to_numpy()
    assert np.isin(rows, kept).all()


def test_an_overlay_of_another_snapshot_is_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    given, probs = noisy(300, 3, seed=3)
    add_labels(reg, tmp_path, "one", given, ["a", "b", "c"])
    add_labels(reg, tmp_path, "two", given[::-1].copy(), ["a", "b", "c"])
    ov = detect_overlay(reg, "one@original", probs)
    with pytest.raises(InvalidInputError, match="overlay applies to its own snapshot"):
        make_tag(reg, "two@cleaned", "two@original", overlays=[ov.digest], view="cleaned")
    assert reg.refs.get("two", "cleaned") is None


def test_corrections_that_contradict_the_base_are_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    add_labels(reg, tmp_path, "toy", np.array([0, 1, 2, 0]), ["a", "b", "c"])
    base = reg.resolve("toy@original").revision.snapshot
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    wrong_label = corrections_table(
        rows=np.array([1]),
        example_ids=["1"],
        given_label=np.array([2]),
        suggested_label=np.array([0]),
        verdict=["correctable"],
    )
    with pytest.raises(InvalidInputError, match="not the snapshot's"):
        write_overlay(reg, base=base, kind="manual", table=wrong_label, producer=producer)
    wrong_id = corrections_table(
        rows=np.array([1]),
        example_ids=["x"],
        given_label=np.array([1]),
        suggested_label=np.array([0]),
        verdict=["correctable"],
    )
    with pytest.raises(InvalidInputError, match="example id"):
        write_overlay(reg, base=base, kind="manual", table=wrong_id, producer=producer)
    suspected_in_validated = corrections_table(
        rows=np.array([1]),
        example_ids=["1"],
        given_label=np.array([1]),
        suggested_label=np.array([0]),
        verdict=["suspected"],
    )
    with pytest.raises(InvalidInputError, match="cannot hold verdicts"):
        write_overlay(
            reg, base=base, kind="validated", table=suspected_in_validated, producer=producer
        )
    assert list_overlays(reg, "toy") == []


def test_a_corrupted_overlay_is_never_served(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    given, probs = noisy(300, 3, seed=4)
    add_labels(reg, tmp_path, "toy", given, ["a", "b", "c"])
    ov = detect_overlay(reg, "toy@original", probs)
    make_tag(reg, "toy@cleaned", "toy@original", overlays=[ov.digest], view="cleaned")
    path = reg.store.path(reg.overlay(ov.digest).corrections)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptObjectError):
        dsreg.open("toy@cleaned", registry=reg).labels()


def test_python_api_detects_from_an_in_memory_array_and_imports_votes(
    make_registry: Callable[..., Registry], tmp_path: Path, shared_data: Path
) -> None:
    reg = make_registry()
    labels = np.load(shared_data / "cifar10_test_set_original_labels.npy")
    add_labels(reg, tmp_path, "cifar10-test", labels, CIFAR)
    pyx = np.load(shared_data / "cifar10_test_set_pyx.npy")
    made = dsreg.detect("cifar10-test@original", pyx, registry=reg, filter_by="both")
    from_file = dsreg.detect(
        "cifar10-test@original",
        shared_data / "cifar10_test_set_pyx.npy",
        registry=reg,
        filter_by="both",
    )
    # The same probabilities in memory or on disk: the same overlay, digest included.
    assert made.digest == from_file.digest
    assert made.details.params["filter_by"] == "both"
    votes = dsreg.import_votes(
        "cifar10-test@original", shared_data / "cifar10_mturk.json", registry=reg
    )
    assert votes.summary["correctable"] == 18
