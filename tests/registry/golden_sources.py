"""Fixed label-file and table sources for the golden vectors of ``dsreg add --labels/--table``.

Generated from seeded numpy, so the same files (and therefore the same examples tables) come out
on every machine. Two of the sets span more than one Parquet row group (256 Ki rows), so the
streaming writer's row groups are pinned as well as a one-group table's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import dsreg
from dsreg import Registry

BIG = (1 << 18) + 4_321  # one full row group and a part of the next
NAMES = ("ant", "bee", "cat", "dog", "eel", "fox", "gnu")


def _table_parquet(path: Path) -> Path:
    rng = np.random.default_rng(15)
    order = rng.permutation(BIG)
    ids = pa.array([f"img/{i:07d}.jpg" for i in order.tolist()])
    labels = pa.array([NAMES[i] for i in rng.integers(0, len(NAMES), BIG).tolist()])
    weight = rng.random(BIG)
    k = rng.integers(-5, 5, BIG)
    k_valid = rng.random(BIG) > 0.1
    split = pa.array(["a" if x else "b" for x in (rng.random(BIG) > 0.5).tolist()])
    t = pa.table(
        {
            "split": split,
            "example_id": ids,
            "w": pa.array(weight),
            "label": labels,
            "k": pa.array(k, mask=~k_valid),
        }
    )
    pq.write_table(t, path, row_group_size=100_000)  # the source's groups differ from dsreg's
    return path


def _table_csv(path: Path) -> Path:
    rng = np.random.default_rng(16)
    n = 2_000
    t = pa.table(
        {
            "id": pa.array(rng.permutation(n) * 3),  # integer ids
            "y": pa.array(rng.integers(0, 4, n)),
            "note": pa.array([f"n{i % 13}" for i in range(n)]),
            "conf": pa.array(np.round(rng.random(n), 3)),
        }
    )
    pacsv.write_csv(t, path)
    return path


def _labels_npy(path: Path) -> Path:
    np.save(path, np.random.default_rng(17).integers(0, 345, BIG).astype(np.int16))
    return path


def _labels_csv(path: Path) -> Path:
    rng = np.random.default_rng(18)
    t = pa.table({"label": pa.array([NAMES[i] for i in rng.integers(0, 5, 500).tolist()])})
    pacsv.write_csv(t, path)
    return path


def source_digests(tmp: Path, reg: Registry) -> dict[str, Any]:
    """The examples / snapshot / revision digests of each fixed source, added as a user would."""
    out: dict[str, Any] = {}
    classes = [f"c{i}" for i in range(345)]
    adds = {
        "table_parquet": dict(table=_table_parquet(tmp / "t.parquet")),
        "table_csv": dict(table=_table_csv(tmp / "t.csv"), id_column="id", label_column="y"),
        "labels_npy": dict(labels=_labels_npy(tmp / "l.npy"), classes=classes),
        "labels_csv": dict(labels=_labels_csv(tmp / "l.csv"), classes=list(NAMES)),
    }
    for name, kw in adds.items():
        r = dsreg.add(f"golden-{name.replace('_', '-')}", tag="original", registry=reg, **kw)
        out[name] = {
            "rows": r.rows,
            "examples": r.examples,
            "snapshot": r.snapshot,
            "revision": r.revision,
        }
    return out
