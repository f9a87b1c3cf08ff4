"""docs/recipes-datasets.md runs as written: its CIFAR-10 and MNIST blocks, run by bash on the
label-errors release's files, register the sets, reproduce the paper's vote counts, export the
label vectors and cite a revision that resolves (skipped where the release's files are absent);
its CIFAR-100, ImageNet, IMDB and folder blocks run on miniature files of the release's formats."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest

import dsreg

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "recipes-datasets.md"


def recipe_script(name: str) -> str:
    """The block marked ``<!-- recipe-test: name -->`` as bash: a ``console`` block's ``$`` lines
    (with their backslash continuations), a ``python`` block run by this Python."""
    text = RECIPE.read_text(encoding="utf-8")
    m = re.search(rf"<!-- recipe-test: {name} -->\n```(console|python)\n(.*?)```", text, re.S)
    assert m is not None, f"no block marked {name} in {RECIPE}"
    if m.group(1) == "python":
        return f"\"$PYTHON\" - <<'PYTHON_EOF'\n{m.group(2)}PYTHON_EOF\n"
    lines, going = [], False
    for line in m.group(2).splitlines():
        if line.startswith("$ "):
            lines.append(line[2:])
        elif going:
            lines.append(line)
        going = line.endswith("\\")
    return "\n".join(lines) + "\n"


def run_recipe(
    names: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    script = "set -euo pipefail\n" + "".join(recipe_script(n) for n in names)
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _shim_env(tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]) -> dict[str, str]:
    """The environment of a shell in which ``dsreg`` (and ``$PYTHON``) is this dsreg."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "dsreg"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m dsreg "$@"\n')
    shim.chmod(0o755)
    return dsreg_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHON=sys.executable)


@pytest.mark.slow  # two registrations, votes, the detector and a push: ~20 s
def test_the_cifar10_and_mnist_recipes_run_as_written(
    shared_data: Path, tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "label-errors").symlink_to(shared_data)
    env = _shim_env(tmp_path, dsreg_env)
    proc = run_recipe(["cifar10", "mnist"], work, env)
    assert proc.returncode == 0, proc.stderr

    reg = work / ".dsreg"
    validated = dsreg.open("cifar10-test@validated", registry=reg)
    assert len(validated) == 9946
    assert len(dsreg.open("cifar10-test@validated-corrected", registry=reg)) == 9964
    summary = dsreg.overlay_show(validated.revision.overlays[0], registry=reg).overlay.summary
    assert {k: summary[k] for k in ("checked", "errors", "correctable", "neither")} == {
        "checked": 275,
        "errors": 54,
        "correctable": 18,
        "neither": 4,
    }
    y = np.load(work / "cifar10_validated.npy")
    given = np.load(shared_data / "cifar10_test_set_original_labels.npy")
    assert len(y) == 10000 and (y == -1).sum() == 54 and (y[y >= 0] == given[y >= 0]).all()
    assert "Learning Multiple Layers of Features from Tiny Images" in proc.stdout
    resolve = f"dsreg checkout {validated.digest} cifar10-test --remote {work / 'published'}"
    assert resolve in proc.stdout
    assert (work / "published" / "refs" / "cifar10-test" / "validated").is_file()

    mnist = pacsv.read_csv(work / "mnist_validated.csv")
    assert mnist.column_names == ["row", "example_id", "label", "label_name"]
    assert mnist.num_rows == 9985 == len(dsreg.open("mnist-test@validated", registry=reg))


def _votes(records: list[tuple[object, str, int | str, int | str, dict[str, int]]]) -> str:
    return json.dumps(
        [
            {
                "id": rid,
                "url": f"https://labelerrors.com/static/{path}",
                "given_original_label": given,
                "our_guessed_label": guessed,
                "mturk": counts,
            }
            for rid, path, given, guessed, counts in records
        ]
    )


def _jpeg(path: Path, seed: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(path, "JPEG")


def _miniatures(work: Path) -> None:
    """The release's files for CIFAR-100, ImageNet val and IMDB in miniature, same names and
    layouts (IMDB's index repeats a file name), plus an ImageNet val folder and a pet folder."""
    rng = np.random.default_rng(0)
    # CIFAR-100: votes name rows by integer id.
    np.save(work / "cifar100_test_set_original_labels.npy", np.array([0, 1, 2, 1], np.uint16))
    (work / "cifar100_classes.txt").write_text("apple\naquarium_fish\nbaby\n")
    four = {"given": 0, "guessed": 4, "neither": 0, "both": 1}
    (work / "cifar100_mturk.json").write_text(_votes([(1, "cifar100/1.png", 1, 2, four)]))
    # ImageNet val: prepared folders, the index of paths, votes by file number and URL path.
    wnids = ["n01440764", "n01443537", "n01484850"]
    paths = []
    for c, wnid in enumerate(wnids):
        for k in range(2):
            rel = f"val/{wnid}/ILSVRC2012_val_{100 * c + k + 1:08d}.JPEG"
            _jpeg(work / "imagenet" / rel, seed=10 * c + k)
            paths.append(rel)
    (work / "imagenet_val_set_index_to_filepath.json").write_text(json.dumps(paths))
    labels = np.repeat(np.arange(3, dtype=np.uint16), 2)
    np.save(work / "imagenet_val_set_original_labels.npy", labels)
    pyx = rng.random((6, 3))
    # The release's probabilities come in four parts, the rows in order.
    for i, part in enumerate(np.array_split(pyx / pyx.sum(axis=1, keepdims=True), 4), 1):
        np.save(work / f"imagenet_val_set_pyx.part{i}_of_4.npy", part)
    (work / "imagenet_mturk.json").write_text(
        _votes(
            [
                (102, f"imagenet/{paths[1]}", 0, 2, four),
                (201, f"imagenet/{paths[2]}", 1, 0, {**four, "given": 4, "guessed": 0}),
            ]
        )
    )
    # IMDB: the index repeats neg/1_1.txt; votes name files by URL path and string id.
    index = ["neg/1_1.txt", "neg/2_3.txt", "neg/1_1.txt", "pos/5_9.txt"]
    (work / "imdb_test_set_index_to_filename.json").write_text(json.dumps(index))
    np.save(work / "imdb_test_set_original_labels.npy", np.array([0, 0, 0, 1], np.uint16))
    imdb = {"given": 0, "guessed": 4, "neutral": 1, "off-topic": 0}
    (work / "imdb_mturk.json").write_text(
        _votes([("test/neg/1_1", "imdb/test/neg/1_1.txt", "Negative", "Positive", imdb)])
    )
    # A torchvision-style folder.
    for c, name in enumerate(["cat", "dog"]):
        for k in range(3):
            _jpeg(work / "pets" / "test" / name / f"{k:04d}.jpg", seed=100 + 10 * c + k)


@pytest.mark.slow  # five registrations, two of images, in bash: ~20 s
def test_the_cifar100_imagenet_imdb_and_folder_recipes_run_as_written(
    tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]
) -> None:
    env = _shim_env(tmp_path, dsreg_env)
    work = tmp_path / "work"
    work.mkdir()
    _miniatures(work)
    # A label-only user has the release's files, not the images: the class names come from
    # the index (val.classes below).
    shutil.rmtree(work / "imagenet")
    subprocess.run([sys.executable, "-m", "dsreg", "init"], cwd=work, env=env, check=True)
    recipes = ["cifar100", "imagenet-classes", "imagenet", "imdb-ids", "imdb", "folder"]
    proc = run_recipe(recipes, work, env)
    assert proc.returncode == 0, proc.stderr
    reg = work / ".dsreg"
    cifar100 = dsreg.open("cifar100-test@validated", registry=reg)
    assert cifar100.labels_array().tolist() == [0, -1, 2, 1]

    index = json.loads((work / "imagenet_val_set_index_to_filepath.json").read_text())
    val = dsreg.open("imagenet-val@validated", registry=reg)
    assert val.classes == ("n01440764", "n01443537", "n01484850")
    # The vote by file number 102 and URL path removed the row of that path (a correctable).
    assert val.labels().column("example_id").to_pylist() == index[:1] + index[2:]
    tags = {t.tag for t in dsreg.ls(registry=reg) if t.dataset == "imagenet-val"}
    assert tags == {"original", "validated", "detected"}
    # The four parts of the probabilities join into one matrix, in row order.
    parts = [np.load(work / f"imagenet_val_set_pyx.part{i}_of_4.npy") for i in range(1, 5)]
    assert (np.load(work / "imagenet_val_set_pyx.npy") == np.concatenate(parts)).all()

    names = json.loads((work / "imdb_test_set_index_to_filename.json").read_text())
    ids = [f"test/{n}" for n in names]
    ids[2] += "#2"
    original = dsreg.open("imdb-test@original", registry=reg)
    assert original.labels().column("example_id").to_pylist() == ids
    # The vote about the repeated file names its first row; the repeat keeps its label.
    assert dsreg.open("imdb-test@validated", registry=reg).labels_array().tolist() == [-1, 0, 0, 1]

    pets = dsreg.open("pets-test@original", registry=reg)
    assert pets.classes == ("cat", "dog") and len(pets) == 6
    assert pets[3].example_id == "dog/0000.jpg"

    # The ImageNet images, registered by the table recipe (in a registry of their own: it is
    # the other way to register the same set, under the same tag).
    images = tmp_path / "images"
    images.mkdir()
    _miniatures(images)
    subprocess.run([sys.executable, "-m", "dsreg", "init"], cwd=images, env=env, check=True)
    proc = run_recipe(["imagenet-classes", "imagenet-table", "imagenet-images"], images, env)
    assert proc.returncode == 0, proc.stderr
    with_images = dsreg.open("imagenet-val@original", registry=images / ".dsreg")
    assert with_images.labels().column("example_id").to_pylist() == index
    assert with_images[1].read_bytes() == (images / "imagenet" / index[1]).read_bytes()
    assert with_images.labels_array().tolist() == [0, 0, 1, 1, 2, 2]
