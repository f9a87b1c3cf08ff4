"""Overlays made from votes and from the detector, stored, tagged and served as views."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg import CorruptObjectError, InvalidInputError, Registry, VotesError
from dsreg.formats.corrections import corrections_table
from dsreg.overlays.write import JoinedRows, write_overlay

CIFAR = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def add_labels(
    reg: Registry, tmp_path: Path, name: str, labels: np.ndarray, classes: list[str]
) -> str:
    np.save(tmp_path / f"{name}.npy", labels)
    (tmp_path / f"{name}.txt").write_text("\n".join(classes) + "\n")
    return dsreg.add(
        name,
        labels=tmp_path / f"{name}.npy",
        classes=tmp_path / f"{name}.txt",
        tag="original",
        registry=reg,
    ).revision


def corrections(reg: Registry, overlay: str) -> list[dict[str, object]]:
    """Every correction an overlay holds (``dsreg overlay show`` of all its rows)."""
    info = dsreg.overlay_show(overlay, rows=1 << 40, registry=reg)
    assert len(info.corrections) == info.total
    return list(info.corrections)


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
    made = dsreg.import_votes(
        "cifar10-test@original",
        shared_data / "cifar10_mturk.json",
        format="label-errors",
        threshold=3,
        registry=reg,
    )
    s = made.summary
    assert (s["checked"], s["errors"], s["non_error"], s["correctable"]) == (275, 54, 221, 18)
    assert (s["multi_label"], s["neither"], s["non_agreement"]) == (0, 4, 32)
    for view, rows in (("cleaned", 9946), ("corrected", 9964), ("honeypot", 18)):
        dsreg.tag(
            f"cifar10-test@{view}-v1",
            "cifar10-test@original",
            overlays=[made.digest],
            view=view,
            registry=reg,
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
        dsreg.import_votes(
            "cifar10-test@original",
            shared_data / "cifar10_mturk.json",
            format="label-errors",
            threshold=3,
            registry=reg,
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
        made = dsreg.detect("toy@original", tmp_path / "pyx.npy", registry=reg)
        digests.append(made.digest)
    assert digests[0] == digests[1], "same inputs must give the same overlay digest anywhere"
    reg = regs[0]
    det = detect(given, probs)
    assert det.rows.size > 0
    ov = dsreg.overlay_show(digests[0], registry=reg).overlay
    assert ov.kind == "detected"
    assert ov.producer["inputs"]["pred_probs"] == dsreg.objects.hashing.hash_file(
        tmp_path / "pyx.npy"
    )
    corr = corrections(reg, digests[0])
    assert sorted(c["row"] for c in corr) == sorted(det.rows.tolist())
    assert {c["verdict"] for c in corr} == {"suspected"}
    # The corrected revision carries the detector's suggestions.
    dsreg.tag(
        "toy@corrected", "toy@original", overlays=[digests[0]], view="corrected", registry=reg
    )
    t = dsreg.open("toy@corrected", registry=reg).labels()
    by_row = dict(zip(t.column("row").to_pylist(), t.column("label").to_pylist(), strict=True))
    for r, s in zip(det.rows.tolist(), det.suggested_labels.tolist(), strict=True):
        assert by_row[r] == s
    assert [r.digest for r in dsreg.overlay_ls("toy", registry=reg)] == [digests[0]]


def test_detect_on_a_cleaned_revision_maps_rows_back_to_the_snapshot(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    given, probs = noisy(400, 3, seed=2)
    add_labels(reg, tmp_path, "toy", given, ["a", "b", "c"])
    first = dsreg.detect("toy@original", probs, registry=reg)
    dsreg.tag("toy@cleaned", "toy@original", overlays=[first.digest], view="cleaned", registry=reg)
    ds = dsreg.open("toy@cleaned", registry=reg)
    kept = ds.view_rows().rows
    second = dsreg.detect("toy@cleaned", probs[kept], registry=reg)
    rows = np.asarray([c["row"] for c in corrections(reg, second.digest)])
    assert np.isin(rows, kept).all()


def test_an_overlay_of_another_snapshot_is_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    given, probs = noisy(300, 3, seed=3)
    add_labels(reg, tmp_path, "one", given, ["a", "b", "c"])
    add_labels(reg, tmp_path, "two", given[::-1].copy(), ["a", "b", "c"])
    ov = dsreg.detect("one@original", probs, registry=reg)
    with pytest.raises(InvalidInputError, match="overlay applies to its own snapshot"):
        dsreg.tag("two@cleaned", "two@original", overlays=[ov.digest], view="cleaned", registry=reg)
    assert ("two", "cleaned") not in {(t.dataset, t.tag) for t in dsreg.ls(registry=reg)}


def test_corrections_that_contradict_the_base_are_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    add_labels(reg, tmp_path, "toy", np.array([0, 1, 2, 0]), ["a", "b", "c"])
    base = dsreg.open("toy@original", registry=reg).snapshot_digest
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
    assert dsreg.overlay_ls("toy", registry=reg) == []


def test_a_joined_row_check_compares_the_labels_the_join_read(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    """A producer whose rows came from a join over the base's examples object hands over the
    labels that join read: given labels that differ from them, or a join over another examples
    object, are refused; labels that agree are stored."""
    reg = make_registry()
    add_labels(reg, tmp_path, "toy", np.array([0, 1, 2, 0]), ["a", "b", "c"])
    add_labels(reg, tmp_path, "other", np.array([0, 1, 2, 1]), ["a", "b", "c"])
    base = dsreg.open("toy@original", registry=reg).snapshot_digest
    examples = dsreg.open("toy@original", registry=reg).snapshot.examples
    elsewhere = dsreg.open("other@original", registry=reg).snapshot.examples
    producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
    table = corrections_table(
        rows=np.array([1, 2]),
        example_ids=["1", "2"],
        given_label=np.array([1, 2]),
        suggested_label=np.array([0, 0]),
        verdict=["correctable", "correctable"],
    )

    def store(examples: str, labels: list[int]) -> str:
        joined = JoinedRows(examples=examples, labels=np.array(labels))
        return write_overlay(
            reg, base=base, kind="manual", table=table, producer=producer, joined=joined
        )

    with pytest.raises(InvalidInputError, match="not the snapshot's"):
        store(examples, [1, 0])
    with pytest.raises(InvalidInputError, match="joined against examples"):
        store(elsewhere, [1, 2])
    with pytest.raises(InvalidInputError, match="joined against examples"):
        store(examples, [1])
    assert dsreg.overlay_ls("toy", registry=reg) == []
    digest = store(examples, [1, 2])
    assert [c["row"] for c in corrections(reg, digest)] == [1, 2]


def test_a_corrupted_overlay_is_never_served(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    given, probs = noisy(300, 3, seed=4)
    add_labels(reg, tmp_path, "toy", given, ["a", "b", "c"])
    ov = dsreg.detect("toy@original", probs, registry=reg)
    dsreg.tag("toy@cleaned", "toy@original", overlays=[ov.digest], view="cleaned", registry=reg)
    path = reg.store.path(dsreg.overlay_show(ov.digest, registry=reg).overlay.corrections)
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
