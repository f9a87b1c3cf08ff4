"""Adding test sets: ImageFolder trees, label files, tables; dedup; immutable tags."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry, TagExistsError


def _objects(reg: Registry) -> set[str]:
    return set(reg.store)


def test_imagefolder_becomes_a_snapshot_whose_rows_are_the_files(
    make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    tree = make_imagefolder(classes=["tench", "goldfish", "shark"], per_class=3)
    (tree / "tench" / ".DS_Store").write_bytes(b"hidden")  # hidden files are not examples
    (tree / "shark" / "deep").mkdir()
    (tree / "shark" / "deep" / "x.bin").write_bytes(b"nested")
    res = dsreg.add("fish", tree, tag="original", registry=reg)

    ds = dsreg.open("fish@original", registry=reg)
    assert ds.digest == res.revision
    # Classes are the folder names, sorted (torchvision's ImageFolder order).
    assert ds.classes == ("goldfish", "shark", "tench")
    t = ds.labels()
    ids = t.column("example_id").to_pylist()
    # Rows go class by class, in class order; files below a class folder are all found.
    assert [ds.classes.index(i.split("/")[0]) for i in ids] == sorted(t.column("label").to_pylist())
    assert "shark/deep/x.bin" in ids and not any(".DS_Store" in i for i in ids)
    assert len(ds) == res.rows == 10
    for i in range(len(ds)):
        ex = ds[i]
        assert ex.label_name == ex.example_id.split("/")[0]
        assert ex.read_bytes() == (tree / ex.example_id).read_bytes()
        assert ex.size == (tree / ex.example_id).stat().st_size


def test_same_bytes_give_the_same_digests_anywhere_and_are_stored_once(
    tmp_path: Path, make_imagefolder: Callable[..., Path]
) -> None:
    tree = make_imagefolder(per_class=4)
    # A copy of one file under another class: one object for both.
    (tree / "class1" / "copy.bin").write_bytes((tree / "class0" / "img000.bin").read_bytes())
    reg = dsreg.init(registry=tmp_path / "a")
    first = dsreg.add("ds", tree, tag="original", registry=reg)
    blobs = {d for d in _objects(reg) if not reg.is_manifest(d)}
    assert len(blobs) == first.files - 1 + 1  # distinct payloads, plus the examples table

    again = dsreg.add("ds", tree, tag="again", registry=reg)
    assert (again.revision, again.new_objects) == (first.revision, 0)

    # Another person, another registry, another copy of the tree: the same digests.
    other_tree = tmp_path / "copy"
    for p in tree.rglob("*"):
        if p.is_file():
            dst = other_tree / p.relative_to(tree)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(p.read_bytes())
    other = dsreg.add(
        "ds", other_tree, tag="original", registry=dsreg.init(registry=tmp_path / "b")
    )
    assert (other.revision, other.snapshot, other.examples) == (
        first.revision,
        first.snapshot,
        first.examples,
    )


@pytest.mark.parametrize("fmt", ["npy", "csv", "parquet"])
def test_label_only_sets_from_npy_csv_parquet(
    make_registry: Callable[..., Registry], tmp_path: Path, fmt: str
) -> None:
    reg = make_registry()
    labels = np.array([2, 0, 1, 1, 0, 2], dtype=np.int64)
    classes = tmp_path / "classes.txt"
    classes.write_text("airplane\nautomobile\nbird\n")
    path = tmp_path / f"labels.{fmt}"
    if fmt == "npy":
        np.save(path, labels)
    elif fmt == "csv":
        path.write_text("label\n" + "".join(f"{v}\n" for v in labels))
    else:
        pq.write_table(pa.table({"label": labels}), path)
    res = dsreg.add("cifar", labels=path, classes=classes, tag="original", registry=reg)

    ds = dsreg.open("cifar@original", registry=reg)
    assert ds.digest == res.revision
    t = ds.labels()
    assert t.column("label").to_pylist() == labels.tolist()
    assert t.column("label_name").to_pylist() == [
        ["airplane", "automobile", "bird"][v] for v in labels
    ]
    assert t.column("example_id").to_pylist() == [str(i) for i in range(6)]
    assert t.column("blob").null_count == 6
    assert ds[0].path is None
    assert ds.snapshot.source == {"kind": "labels", "format": fmt}


def test_label_only_without_classes_names_them_by_index(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    np.save(tmp_path / "l.npy", np.array([0, 3, 1], dtype=np.int16))
    dsreg.add("x", labels=tmp_path / "l.npy", tag="original", registry=reg)
    assert dsreg.open("x@original", registry=reg).classes == ("0", "1", "2", "3")


def test_table_with_files_string_labels_and_metadata(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    files = tmp_path / "files"
    (files / "sub").mkdir(parents=True)
    payloads = {"a.png": b"AAA", "sub/b.png": b"BB", "c.png": b"C"}
    for name, data in payloads.items():
        (files / name).write_bytes(data)
    pq.write_table(
        pa.table(
            {
                "path": list(payloads),
                "label": ["dog", "cat", "dog"],
                "annotator": ["x", "y", "z"],
            }
        ),
        tmp_path / "examples.parquet",
    )
    (tmp_path / "classes.txt").write_text("cat\ndog\nbird\n")
    dsreg.add(
        "pets",
        table=tmp_path / "examples.parquet",
        id_column="path",
        label_column="label",
        classes=tmp_path / "classes.txt",
        files=files,
        tag="original",
        registry=reg,
    )
    ds = dsreg.open("pets@original", registry=reg)
    t = ds.labels()
    # Mapped through --classes (line i is class i), not sorted names.
    assert t.column("label").to_pylist() == [1, 0, 1]
    assert ds.classes == ("cat", "dog", "bird")
    assert t.column("annotator").to_pylist() == ["x", "y", "z"]
    assert [ds[i].read_bytes() for i in range(3)] == list(payloads.values())

    # The same table without --files is a label-only set.
    dsreg.add(
        "pets-labels",
        table=tmp_path / "examples.parquet",
        id_column="path",
        label_column="label",
        tag="original",
        registry=reg,
    )
    ds2 = dsreg.open("pets-labels@original", registry=reg)
    assert ds2.labels().column("blob").null_count == 3
    assert ds2.classes == ("cat", "dog")  # sorted names when no --classes is given


def test_csv_table(make_registry: Callable[..., Registry], tmp_path: Path) -> None:
    reg = make_registry()
    (tmp_path / "t.csv").write_text("id,y\n0007,2\n0003,0\n")
    dsreg.add(
        "t",
        table=tmp_path / "t.csv",
        id_column="id",
        label_column="y",
        tag="original",
        registry=reg,
    )
    t = dsreg.open("t@original", registry=reg).labels()
    assert t.column("label").to_pylist() == [2, 0]
    # Ids are kept as text as far as the CSV reader allows (here read as integers).
    assert t.column("example_id").to_pylist() == ["7", "3"]


def test_an_existing_tag_is_never_moved_without_force(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> None:
    reg = make_registry()
    a = dsreg.add("ds", make_imagefolder("a", seed=1), tag="original", registry=reg)
    other = make_imagefolder("b", seed=2)
    before = registry_state(reg.root)
    with pytest.raises(TagExistsError, match=r"ds@original exists at " + a.revision[7:19]):
        dsreg.add("ds", other, tag="original", registry=reg)
    after = registry_state(reg.root)
    # Nothing of the refused content was stored; refs and log unchanged. (The stat cache of the
    # user's files may learn their hashes: it is a cache, not registry content.)
    assert {k: v for k, v in after.items() if not k.startswith("state")} == {
        k: v for k, v in before.items() if not k.startswith("state")
    }

    # Re-adding the same content under the same tag is a no-op, not an error.
    same = dsreg.add("ds", make_imagefolder("a", seed=1), tag="original", registry=reg)
    assert same.revision == a.revision and same.previous == a.revision

    moved = dsreg.add("ds", other, tag="original", force=True, registry=reg)
    assert moved.previous == a.revision
    assert dsreg.open("ds@original", registry=reg).digest == moved.revision
    log = dsreg.log("ds", registry=reg)
    assert [(e.tag, e.old, e.new) for e in log] == [
        ("original", None, a.revision),
        ("original", a.revision, moved.revision),
    ]


def test_symlink_inside_the_tree_is_followed(
    make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]
) -> None:
    reg = make_registry()
    tree = make_imagefolder(per_class=2)
    os.symlink(tree / "class0" / "img000.bin", tree / "class1" / "link.bin")
    dsreg.add("ds", tree, tag="original", registry=reg)
    ds = dsreg.open("ds@original", registry=reg)
    by_id = {ds[i].example_id: ds[i] for i in range(len(ds))}
    assert by_id["class1/link.bin"].read_bytes() == (tree / "class0" / "img000.bin").read_bytes()
