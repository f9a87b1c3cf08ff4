"""``Dataset.to_torch`` in a ``DataLoader`` against what a user writes without dsreg: a map-style
Dataset in the manner of torchvision's ``ImageFolder`` (its loader: open the path, Pillow,
convert to RGB) over a checked-out copy of the same images.

    python benchmarks/bench_loaders.py                      # 10,000 PNGs of 32x32, 10 classes
    python benchmarks/bench_loaders.py --images 2000 --size 224 --reps 3

Both yield ``(numpy array, label)`` through the same transform and the default collate, batch
256, read in the same order; each full pass is timed with 0 workers and with 2 (fork), the two
loaders alternating, the median of ``--reps`` passes reported. dsreg re-hashes every payload it
reads (a corrupt object raises rather than returning wrong bytes); the folder Dataset trusts
the file system. No target: reported for information. The image tree,
the registry and the checkout are kept in ``--workdir`` and reused.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dsreg


class FolderDataset:
    """torchvision's ImageFolder, in the few lines a user writes: classes are the sorted folder
    names, samples sorted by path, each opened by path and decoded by Pillow as RGB."""

    def __init__(self, root: Path, transform: Any) -> None:
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.samples = [
            (str(root / c / f), i)
            for i, c in enumerate(self.classes)
            for f in sorted(os.listdir(root / c))
        ]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        from PIL import Image

        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return self.transform(img), label


def make_tree(root: Path, images: int, classes: int, size: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(images):
        folder = root / f"class{i % classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:07d}.png")


def one_pass(ds: Any, workers: int) -> tuple[float, list[int]]:
    from torch.utils.data import DataLoader

    loader = DataLoader(
        ds,
        batch_size=256,
        num_workers=workers,
        multiprocessing_context="fork" if workers else None,
    )
    start = time.perf_counter()
    labels: list[int] = []
    for _x, y in loader:
        labels += y.tolist()
    return time.perf_counter() - start, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=10_000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--size", type=int, default=32, help="image side in pixels")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.gettempdir()) / "dsreg-bench-loaders"
    tag = f"{args.images}-{args.classes}-{args.size}"
    tree, reg, checkout = work / f"tree-{tag}", work / f"reg-{tag}", work / f"checkout-{tag}"
    if not tree.is_dir():
        print(f"writing {args.images} PNGs of {args.size}x{args.size} to {tree}", file=sys.stderr)
        make_tree(tree, args.images, args.classes, args.size)
    if not reg.is_dir():
        dsreg.init(registry=reg)
        dsreg.add("bench", tree, tag="v1", registry=reg)
        dsreg.checkout("bench@v1", checkout, registry=reg)
    transform = functools.partial(np.array, dtype=np.uint8)
    ds = dsreg.open("bench@v1", registry=reg)
    loaders = {
        "dsreg to_torch": ds.to_torch(transform=transform),
        "folder Dataset": FolderDataset(checkout, transform),
    }
    want = ds.labels().column("label").to_pylist()
    print(
        f"{args.images} PNGs {args.size}x{args.size}, {args.classes} classes; batch 256; "
        f"median of {args.reps} passes; {os.cpu_count()} CPUs (shared, noisy)"
    )
    for workers in (0, 2):
        times: dict[str, list[float]] = {name: [] for name in loaders}
        for rep in range(args.reps):
            order = list(loaders) if rep % 2 == 0 else list(reversed(loaders))
            for name in order:
                seconds, labels = one_pass(loaders[name], workers)
                assert labels == want, f"{name} yielded other labels"
                times[name].append(seconds)
        med = {name: statistics.median(t) for name, t in times.items()}
        rate = {name: args.images / m for name, m in med.items()}
        print(
            f"workers={workers}: dsreg to_torch {med['dsreg to_torch']:.2f} s "
            f"({rate['dsreg to_torch']:.0f} images/s), folder Dataset "
            f"{med['folder Dataset']:.2f} s ({rate['folder Dataset']:.0f} images/s); "
            f"ratio {med['dsreg to_torch'] / med['folder Dataset']:.2f}x"
        )


if __name__ == "__main__":
    main()
