"""A registry to publish: a synthetic CIFAR-10-like set (10 classes, detected and cleaned
revisions, two recorded models, a yanked tag) and a retired predecessor, plus, when the
label-errors release is at hand, the real CIFAR-10 test set with its human-validated overlay."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import dsreg
from dsreg import Registry

CIFAR = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
SYNTH = "cifar10-synth"
OLD = "cifar10-old"
REAL = "cifar10-test"


@dataclass
class SiteSet:
    reg: Registry
    datasets: tuple[str, ...]


def _add(reg: Registry, where: Path, name: str, labels: np.ndarray) -> None:
    np.save(where / f"{name}.npy", labels)
    (where / "classes.txt").write_text("\n".join(CIFAR) + "\n")
    dsreg.add(
        name,
        labels=where / f"{name}.npy",
        classes=where / "classes.txt",
        tag="original",
        registry=reg,
    )


def _noisy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true = rng.integers(0, 10, n)
    probs = rng.dirichlet(np.ones(10) * 0.3, n)
    probs[np.arange(n), true] += 1.5
    probs /= probs.sum(1, keepdims=True)
    given = true.copy()
    flip = rng.random(n) < 0.08
    given[flip] = rng.integers(0, 10, int(flip.sum()))
    return given.astype(np.int64), probs


def build_site_set(root: Path, shared: Path | None = None, *, n: int = 600) -> SiteSet:
    """The registry at ``root / "reg"``; ``shared``: the label-errors folder, if present."""
    root.mkdir(parents=True, exist_ok=True)
    reg = dsreg.init(registry=root / "reg")
    given, probs = _noisy(n, seed=7)
    _add(reg, root, SYNTH, given)
    np.save(root / "pyx.npy", probs)
    made = dsreg.detect(f"{SYNTH}@original", root / "pyx.npy", registry=reg)
    for view in ("cleaned", "corrected"):
        dsreg.tag(
            f"{SYNTH}@{view}-v1", f"{SYNTH}@original", overlays=[made.digest], view=view,
            registry=reg,
        )  # fmt: skip
    dsreg.tag(f"{SYNTH}@honeypot-v0", f"{SYNTH}@original", overlays=[made.digest],
              view="honeypot", registry=reg)  # fmt: skip
    dsreg.yank(f"{SYNTH}@honeypot-v0", reason="too few rows <to score> & unvalidated",
               registry=reg)  # fmt: skip
    rng = np.random.default_rng(3)
    strong = np.where(rng.random(n) < 0.9, probs.argmax(1), rng.integers(0, 10, n))
    weak = np.where(rng.random(n) < 0.6, probs.argmax(1), rng.integers(0, 10, n))
    dsreg.record(f"{SYNTH}@original", strong, model="resnet-18", registry=reg)
    dsreg.record(f"{SYNTH}@original", weak, model="linear-probe", registry=reg)
    _add(reg, root, OLD, given[: n // 2])
    dsreg.retire(OLD, successor=SYNTH, reason="half the rows; use the full synthetic set",
                 registry=reg)  # fmt: skip
    datasets = [SYNTH, OLD]
    if shared is not None:
        _add(reg, root, REAL, np.load(shared / "cifar10_test_set_original_labels.npy"))
        votes = dsreg.import_votes(
            f"{REAL}@original", shared / "cifar10_mturk.json", format="label-errors",
            threshold=3, registry=reg,
        )  # fmt: skip
        dsreg.tag(f"{REAL}@cleaned-v1", f"{REAL}@original", overlays=[votes.digest],
                  view="cleaned", registry=reg)  # fmt: skip
        datasets.append(REAL)
    return SiteSet(reg=reg, datasets=tuple(datasets))
