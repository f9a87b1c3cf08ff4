"""Loaders with the real packages: a torch DataLoader under fork and spawn, a Hugging
Face ``datasets.Dataset``, pandas, label vectors aligned to the snapshot, and ``dsreg export``."""

from __future__ import annotations

import errno
import functools
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg.errors import InvalidInputError

CLASSES = ("cat", "dog", "owl")


@dataclass
class Pics:
    reg: dsreg.Registry
    tree: Path
    removed: list[int]  # snapshot rows the cleaned view removes


def _png(path: Path, seed: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)).save(path)


@pytest.fixture
def pics(make_registry: Callable[..., dsreg.Registry], tmp_path: Path) -> Pics:
    """12 PNG images in three classes, tagged original; ``pics@cleaned`` removes two rows
    (a correctable and a neither) by validated votes, ``pics@corrected`` relabels one."""
    tree = tmp_path / "tree"
    for c, name in enumerate(CLASSES):
        for i in range(4):
            _png(tree / name / f"{name}{i}.png", seed=10 * c + i)
    reg = make_registry()
    dsreg.add("pics", tree, tag="original", registry=reg)
    votes = tmp_path / "votes.csv"
    votes.write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        "cat/cat1.png,cat,dog,0,5,0,0\n"
        "dog/dog2.png,dog,owl,4,1,0,0\n"
        "owl/owl0.png,owl,cat,0,0,0,5\n"
    )
    dsreg.import_votes("pics@original", votes, format="csv", tag="cleaned", registry=reg)
    dsreg.tag("pics@corrected", "pics@cleaned", view="corrected", registry=reg)
    return Pics(reg=reg, tree=tree, removed=[1, 8])


def _pixels(tree: Path, example_id: str) -> np.ndarray:
    from PIL import Image

    with Image.open(tree / example_id) as img:
        return np.asarray(img.convert("RGB"))


def test_labels_array_is_aligned_to_the_snapshot_with_minus_one_for_removed_rows(
    pics: Pics,
) -> None:
    ds = dsreg.open("pics@cleaned", registry=pics.reg)
    t = ds.labels()
    full = ds.labels_array()
    assert full.dtype == np.int64 and len(full) == 12
    assert list(np.flatnonzero(full == -1)) == pics.removed
    rows = t.column("row").to_numpy()
    assert (full[rows] == t.column("label").to_numpy()).all()
    view = ds.labels_array(align="view")
    assert view.tolist() == t.column("label").to_pylist() and len(view) == 10
    corrected = dsreg.open("pics@corrected", registry=pics.reg).labels_array()
    assert corrected[1] == CLASSES.index("dog")  # cat1 relabelled; owl0 (neither) removed
    assert corrected[8] == -1
    with pytest.raises(InvalidInputError, match="unknown align 'rows'"):
        ds.labels_array(align="rows")
    frame = ds.to_pandas()
    assert frame["example_id"].tolist() == t.column("example_id").to_pylist()
    assert frame["label_name"].tolist() == t.column("label_name").to_pylist()
    assert str(frame["label_name"].dtype) == "category" and "score" not in frame.columns
    reviewed = dsreg.open("pics@corrected", registry=pics.reg).to_pandas(review=True)
    assert {"suggested_label", "score", "votes_given"} <= set(reviewed.columns)
    assert "dog" in reviewed["suggested_label_name"].dropna().tolist()  # cat1, relabelled


def _as_array(img: Any) -> np.ndarray:
    return np.asarray(img, dtype=np.uint8)


@pytest.mark.parametrize(
    "context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)], ids=["fork", "spawn"]
)
def test_a_dataloader_with_two_workers_yields_the_pinned_labels_and_pixels(
    pics: Pics, context: str
) -> None:
    import torch
    from torch.utils.data import DataLoader

    digest = dsreg.open("pics@cleaned", registry=pics.reg).digest
    ds = dsreg.open(digest, registry=pics.reg)  # pinned by its digest
    tds = ds.to_torch(transform=functools.partial(np.array, dtype=np.uint8))
    assert isinstance(tds, torch.utils.data.Dataset) and len(tds) == 10
    loader = DataLoader(tds, batch_size=3, num_workers=2, multiprocessing_context=context)
    images, labels = [], []
    for x, y in loader:
        images.append(x.numpy())
        labels.append(y.numpy())
    t = ds.labels()
    assert np.concatenate(labels).tolist() == t.column("label").to_pylist()
    want = np.stack([_pixels(pics.tree, i) for i in t.column("example_id").to_pylist()])
    assert (np.concatenate(images) == want).all()


def test_the_torch_dataset_pickles_without_the_open_registry(pics: Pics) -> None:
    ds = dsreg.open("pics@corrected", registry=pics.reg)
    tds = ds.to_torch(target_transform=CLASSES.__getitem__, image_mode=None)
    data = pickle.dumps(tds)
    assert b"pyarrow" not in data and len(data) < 2_000
    again = pickle.loads(data)
    img, name = again[0]
    assert img.mode == "RGB" and name == ds[0].label_name
    assert again.targets == ds.labels().column("label").to_pylist()
    assert again.classes == CLASSES


def test_to_hf_has_class_labels_and_image_features(pics: Pics, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    ds = dsreg.open("pics@cleaned", registry=pics.reg)
    hf = ds.to_hf(cache_dir=tmp_path / "hf")
    assert isinstance(hf, datasets.Dataset) and len(hf) == len(ds)
    assert isinstance(hf.features["label"], datasets.ClassLabel)
    assert hf.features["label"].names == list(CLASSES)
    assert isinstance(hf.features["image"], datasets.Image)
    t = ds.labels()
    assert hf["label"] == t.column("label").to_pylist()
    assert hf["example_id"] == t.column("example_id").to_pylist()
    first = hf[0]
    assert (np.asarray(first["image"]) == _pixels(pics.tree, first["example_id"])).all()
    assert hf.features["label"].int2str(first["label"]) == t.column("label_name")[0].as_py()
    dsreg.tag("pics@multilabel", "pics@cleaned", view="multilabel", registry=pics.reg)
    ml = dsreg.open("pics@multilabel", registry=pics.reg)
    hf = ml.to_hf(cache_dir=tmp_path / "hf")
    assert hf.features["labels"] == datasets.Sequence(datasets.ClassLabel(names=list(CLASSES)))
    assert hf["labels"] == ml.labels().column("labels").to_pylist() and len(hf) == 11


def test_to_hf_of_a_label_only_set_has_no_payload_column(
    make_registry: Callable[..., dsreg.Registry], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    datasets = pytest.importorskip("datasets")
    reg = make_registry()
    np.save(tmp_path / "labels.npy", np.array([2, 0, 1, 1]))
    dsreg.add("tiny", labels=tmp_path / "labels.npy", classes=list(CLASSES), tag="v1", registry=reg)
    hf = dsreg.open("tiny@v1", registry=reg).to_hf(cache_dir=tmp_path / "hf")
    assert hf["label"] == [2, 0, 1, 1] and "image" not in hf.features
    assert capfd.readouterr().err == ""  # the library prints nothing: no progress bar
    assert hf.features["given_label"] == datasets.ClassLabel(names=list(CLASSES))
    tds = dsreg.open("tiny@v1", registry=reg).to_torch()
    assert [tds[i] for i in range(4)] == [("0", 2), ("1", 0), ("2", 1), ("3", 1)]


@pytest.mark.parametrize("fmt", ["npy", "csv", "parquet"])
@pytest.mark.parametrize("align", ["snapshot", "view"])
def test_export_writes_each_format_and_alignment(
    pics: Pics, cli: Callable[..., Any], tmp_path: Path, fmt: str, align: str
) -> None:
    ds = dsreg.open("pics@cleaned", registry=pics.reg)
    out = tmp_path / f"labels.{fmt}"
    reg = str(pics.reg.root)
    r = cli("export", "pics@cleaned", "-o", str(out), "--align", align, "--registry", reg)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == ds.digest
    want = ds.labels_array(align=align)
    if fmt == "npy":
        got = np.load(out)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()
        return
    if fmt == "csv":  # a removed row's name is an empty field
        table = pacsv.read_csv(out, convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    else:
        table = pq.read_table(out)
    assert table.column_names == ["row", "example_id", "label", "label_name"]
    assert table.column("label").to_pylist() == want.tolist()
    t = ds.labels()
    if align == "view":
        assert table.column("example_id").to_pylist() == t.column("example_id").to_pylist()
    else:
        assert table.column("row").to_pylist() == list(range(12))
        names = table.column("label_name").to_pylist()
        assert [names[i] for i in pics.removed] == [None, None]
    doc = json.loads(
        cli("export", "pics@cleaned", "-o", str(out), "--registry", reg, "--json").stdout
    )
    assert doc["rows"] == 12 and doc["removed"] == 2 and doc["format"] == fmt


def test_export_refuses_bad_options_and_writes_nothing(
    pics: Pics, cli: Callable[..., Any], tmp_path: Path
) -> None:
    reg = str(pics.reg.root)
    for args, message in [
        (["-o", str(tmp_path / "l.txt")], "cannot tell the format"),
        (["-o", str(tmp_path / "l.npy"), "--format", "h5"], "unknown --format 'h5'"),
        (["-o", str(tmp_path / "l.npy"), "--align", "rows"], "unknown align 'rows'"),
        (["-o", str(tmp_path), "-f", "npy"], "is a folder"),
        (["-o", str(tmp_path / "no" / "l.npy")], "cannot write"),
    ]:
        r = cli("export", "pics@cleaned", *args, "--registry", reg)
        assert r.exit_code == 1 and r.stderr.startswith("Error: ") and message in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["votes.csv"]


def test_reading_labels_imports_no_loader_library(pics: Pics) -> None:
    code = (
        "import sys, dsreg\n"
        f"ds = dsreg.open('pics@cleaned', registry={str(pics.reg.root)!r})\n"
        "ds.labels_array(); ds.labels()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'datasets', 'PIL'}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.strip() == "[]"


def test_export_failing_midway_keeps_the_old_file(
    pics: Pics, cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write failing after some bytes (a full disk): exit 1 naming the file, the existing
    file whole, nothing left beside it; a symbolic link's target is what gets replaced."""
    out = tmp_path / "labels.npy"
    out.write_bytes(b"precious")
    real_save = np.save

    def full_disk(f: Any, arr: Any, *args: Any, **kwargs: Any) -> None:
        f.write(b"\x93NUMPY half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full_disk)
    reg = str(pics.reg.root)
    r = cli("export", "pics@cleaned", "-o", str(out), "--registry", reg)
    assert r.exit_code == 1 and f"cannot write {out}: No space left" in r.stderr, r.stderr
    assert out.read_bytes() == b"precious"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".labels.npy.")]
    monkeypatch.setattr(np, "save", real_save)
    link = tmp_path / "link.npy"
    link.symlink_to(out)
    assert cli("export", "pics@cleaned", "-o", str(link), "--registry", reg).exit_code == 0
    assert (
        link.is_symlink()
        and np.load(out).tolist()
        == dsreg.open("pics@cleaned", registry=pics.reg).labels_array(align="snapshot").tolist()
    )
