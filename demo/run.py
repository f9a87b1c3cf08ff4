"""`make demo`: the main job, end to end, offline, on scikit-learn's bundled handwritten digits.

It writes the 1,797 8x8 digit images as PNG files in an ImageFolder tree, adds them to a local
registry, tags, checks out, opens the revision from Python, runs the confident-learning detector
on out-of-sample probabilities from cross-validation, tags a cleaned and a corrected revision,
and (when `dsreg eval` is present) scores several models against original, cleaned and corrected
labels. Every step is a real `dsreg` command, echoed as a user would type it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
DSREG = str(Path(sys.executable).with_name("dsreg"))


def run(*args: str) -> str:
    """Run a dsreg command in the demo folder, echoing it; stop the demo if it fails."""
    print(f"\n$ dsreg {shlex.join(args)}", flush=True)
    proc = subprocess.run([DSREG, *args], cwd=OUT, text=True, capture_output=True)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    sys.stdout.flush()
    if proc.returncode != 0:
        sys.exit(f"demo: 'dsreg {shlex.join(args)}' failed with exit status {proc.returncode}")
    return proc.stdout.strip()


def write_digits(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """The digits as 8-bit grayscale PNGs, one folder per class, named by their index."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.clip(np.rint(digits.images * (255 / 16)), 0, 255).astype(np.uint8)
    for i, (img, y) in enumerate(zip(images, digits.target, strict=True)):
        d = root / str(int(y))
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img, mode="L").save(d / f"{i:04d}.png", optimize=False)
    return digits.data, digits.target


def out_of_sample(models: dict[str, object], x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """5-fold cross-validated probabilities: every row predicted by a model that never saw it."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            name: cross_val_predict(m, x, y, cv=folds, method="predict_proba")  # type: ignore[arg-type]
            for name, m in models.items()
        }


def main() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    os.environ.pop("DSREG_HOME", None)
    os.environ.pop("DSREG_REGISTRY", None)

    print("== 1. A test set: scikit-learn's handwritten digits as an ImageFolder tree")
    x, y = write_digits(OUT / "digits")
    print(f"wrote {len(y)} PNG files in 10 class folders under {OUT / 'digits'}")

    print("\n== 2. Register it: content-addressed, immutable, tagged")
    run("init")
    run("add", "digits", "digits", "--tag", "original")
    run("add", "digits", "digits", "--tag", "original")  # unchanged tree: nothing new
    run("tag", "digits@paper-2026", "digits@original")
    run("ls")
    run("show", "digits@original")

    print("\n== 3. Check it out: the ImageFolder layout back, byte-identical, pinned")
    run("checkout", "digits@original", "checkout", "--link", "hardlink")
    pin = (OUT / "checkout" / ".dsreg.json").read_text()
    print(pin)
    same = all(
        (OUT / "checkout" / p.relative_to(OUT / "digits")).read_bytes() == p.read_bytes()
        for p in (OUT / "digits").rglob("*.png")
    )
    print(f"checkout byte-identical to the source tree: {same}")
    if not same:
        sys.exit("demo: checkout differs from the source")

    print("\n== 4. A data loader opens the pinned revision")
    import dsreg

    os.chdir(OUT)
    ds = dsreg.open("digits@original")
    print(f">>> ds = dsreg.open('digits@original')\n>>> ds.digest\n{ds.digest!r}")
    print(f">>> len(ds)\n{len(ds)}\n>>> ds[0]\n{ds[0]!r}")
    print(f">>> ds[0].read_bytes()[:8]\n{ds[0].read_bytes()[:8]!r}")
    print(f">>> ds.labels().slice(0, 3).to_pylist()[0]\n{ds.labels().slice(0, 3).to_pylist()[0]}")

    # Rows of the snapshot are in ImageFolder order (class folder, then file name); line the
    # models' predictions up with them through the file names (which hold the source index).
    order = np.asarray([int(Path(e).stem) for e in ds.labels().column("example_id").to_pylist()])
    models = {
        "logreg": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
        "svm": make_pipeline(StandardScaler(), SVC(probability=True, random_state=0)),
        "knn": KNeighborsClassifier(n_neighbors=5),
        "naive-bayes": GaussianNB(),
    }
    print("\n== 5. Out-of-sample probabilities from 5-fold cross-validation (4 models)")
    probs = {name: p[order] for name, p in out_of_sample(models, x, y).items()}
    preds_dir = OUT / "predictions"
    preds_dir.mkdir()
    for name, p in probs.items():
        np.save(preds_dir / f"{name}.npy", p.astype(np.float64))
        acc = float((p.argmax(1) == y[order]).mean())
        print(f"{name:<12} cross-validated accuracy {acc:.4f}")
    # The detector takes one model's out-of-sample probabilities, as in the label-errors study.
    np.save(OUT / "pyx.npy", probs["logreg"])

    print("\n== 6. Confident learning finds likely label errors: a 'detected' overlay")
    run(
        "detect", "digits@original", "--pred-probs", "pyx.npy",
        "--tag", "cleaned-v1", "--view", "cleaned",
    )  # fmt: skip
    overlay = dsreg.open("digits@cleaned-v1").revision.overlays[0]
    run(
        "tag", "digits@corrected-v1", "digits@original",
        "--overlay", overlay[7:19], "--view", "corrected",
    )  # fmt: skip
    run("overlay", "ls", "digits")
    run("show", "digits@corrected-v1")

    print("\n== 7. Switch the checkout to the corrected labels: only relabelled files move")
    run("checkout", "digits@corrected-v1", "checkout")
    run("verify")

    help_text = subprocess.run([DSREG, "--help"], text=True, capture_output=True).stdout
    if " eval " in help_text or "\n  eval" in help_text or "│ eval" in help_text:
        print("\n== 8. Accuracy against original, cleaned and corrected labels, and the re-ranking")
        files = [str(preds_dir / f"{n}.npy") for n in probs]
        run("eval", "digits@corrected-v1", *files, "--plot", "ranks.png")
        print(f"rank plot written to {OUT / 'ranks.png'}")
        run("cite", "digits@corrected-v1", "--format", "text")
    print("\nDemo complete: registry at", OUT / ".dsreg")


if __name__ == "__main__":
    main()
