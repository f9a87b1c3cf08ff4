"""A small image dataset with the revisions a paper cites: the original (with the dataset
creators' BibTeX), a votes-validated one (the votes' publication as --citation), one corrected
by a relabeling of rater counts (its publication as --citation), the same relabeling's
multilabel view, and one corrected by hand (a plain-text credit)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import dsreg
from dsreg import Registry

DATASET_BIB = """@techreport{krizhevsky2009learning,
  title       = {Learning Multiple Layers of Features from Tiny Images},
  author      = {Krizhevsky, Alex},
  institution = {University of Toronto},
  year        = {2009},
}
"""
VOTES_BIB = """@inproceedings{northcutt2021pervasive,
  title     = {Pervasive Label Errors in Test Sets Destabilize Machine Learning Benchmarks},
  author    = {Northcutt, Curtis G. and Athalye, Anish and Mueller, Jonas},
  booktitle = {NeurIPS Datasets and Benchmarks},
  year      = {2021},
  url       = {https://arxiv.org/abs/2103.14749},
}
"""
CIFAR10H_BIB = """@inproceedings{peterson2019human,
  title     = {Human uncertainty makes classification more robust},
  author    = {Peterson, Joshua C. and Battleday, Ruairidh M. and Griffiths, Thomas L. and
               Russakovsky, Olga},
  booktitle = {Proceedings of the IEEE/CVF International Conference on Computer Vision (ICCV)},
  year      = {2019},
}
"""
CLASSES = ("cat", "dog", "fox")
VOTES = (
    "example_id,given_label,suggested_label,given,guessed,both,neither\n"
    "cat/img0.bin,cat,dog,0,4,1,0\n"
    "dog/img1.bin,dog,,4,,,1\n"
    "fox/img2.bin,fox,cat,1,1,0,3\n"
)
FIXES = "row,suggested_label,verdict\n0,1,correctable\n4,2,correctable\n"


@dataclass
class CreditSet:
    reg: Registry
    root: Path
    specs: dict[str, str]  # what -> spec: original, validated, corrected, counts
    overlays: dict[str, str]  # what -> overlay digest
    inputs: dict[str, Path]  # what -> the file the overlay was made from


def build_credit_set(root: Path) -> CreditSet:
    rng = np.random.default_rng(7)
    tree = root / "tree"
    for c in CLASSES:
        (tree / c).mkdir(parents=True)
        for i in range(4):
            (tree / c / f"img{i}.bin").write_bytes(rng.bytes(int(rng.integers(60, 300))))
    files = {
        "dataset.bib": DATASET_BIB,
        "votes.bib": VOTES_BIB,
        "cifar10h.bib": CIFAR10H_BIB,
        "votes.csv": VOTES,
        "fixes.csv": FIXES,
    }
    for name, text in files.items():
        (root / name).write_text(text)
    counts = rng.integers(0, 3, size=(12, 3))
    counts[:, 0] += 1  # every row rated
    np.save(root / "counts.npy", counts)
    reg = dsreg.init(registry=root / "reg")
    dsreg.add("toy", tree, tag="original", citation=root / "dataset.bib", registry=reg)
    votes = dsreg.import_votes("toy@original", root / "votes.csv", format="csv",
                               tag="validated", view="cleaned", citation=root / "votes.bib",
                               registry=reg)  # fmt: skip
    relabeled = dsreg.import_labels("toy@original", root / "counts.npy", format="counts",
                                    tag="corrected", view="corrected",
                                    citation=root / "cifar10h.bib", registry=reg)  # fmt: skip
    dsreg.tag("toy@multilabel", "toy@original", overlays=[relabeled.digest], view="multilabel",
              registry=reg)  # fmt: skip
    manual = dsreg.import_labels("toy@original", root / "fixes.csv", format="csv", tag="manual",
                                 view="corrected", credit="Fixed by hand, 2026",
                                 registry=reg)  # fmt: skip
    return CreditSet(
        reg=reg,
        root=root,
        specs={
            w: f"toy@{w}" for w in ("original", "validated", "corrected", "multilabel", "manual")
        },
        overlays={
            "validated": votes.digest,
            "corrected": relabeled.digest,
            "manual": manual.digest,
        },
        inputs={
            "validated": root / "votes.csv",
            "corrected": root / "counts.npy",
            "manual": root / "fixes.csv",
        },
    )
