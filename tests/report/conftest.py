"""A label-only dataset with overlapping overlays and a tag per view, and the reference scores
(from ``Dataset.labels()``, i.e. ``dsreg.views.rule``) that reports are checked against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry
from dsreg.formats.corrections import LabelSets, corrections_table
from dsreg.formats.manifests import VIEWS
from dsreg.overlays.write import write_overlay

PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}
NAMES = ("cat", "dog", "fox", "owl", "yak", "emu")


@dataclass
class LabelSet:
    reg: Registry
    name: str
    labels: np.ndarray
    ids: list[str]
    classes: tuple[str, ...]
    snapshot: str
    overlays: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.labels)

    def view(self, view: str) -> pa.Table:
        """The reference rows of a view: ``Dataset.labels()`` of ``<name>@<view>``."""
        return dsreg.open(f"{self.name}@{view}", registry=self.reg).labels()

    def reference(
        self, pred: np.ndarray, view: str, k: int = 1, *, given: bool = False
    ) -> tuple[int, int]:
        """(rows, correct) of predictions (labels, or probabilities for top-k) on ``view``,
        computed the plain way."""
        t = self.view(view)
        rows = t.column("row").to_numpy()
        if view == "multilabel":  # set accuracy: the top-1 prediction in the row's labels
            top1 = pred if pred.ndim == 1 else np.argmax(pred, axis=1)
            lists = t.column("labels").to_pylist()
            return len(rows), sum(int(top1[r]) in s for r, s in zip(rows, lists, strict=True))
        want = t.column("given_label" if given else "label").to_numpy()
        if pred.ndim == 1:
            return len(rows), int((pred[rows] == want).sum())
        top = np.argsort(-pred, axis=1, kind="stable")[:, :k]
        return len(rows), int((top[rows] == want[:, None]).any(axis=1).sum())


def build(
    reg: Registry,
    *,
    n: int = 60,
    k: int = 4,
    seed: int = 0,
    overlays: int = 2,
    name: str = "toy",
    ids: list[str] | None = None,
    labels: np.ndarray | None = None,
    tag: str = "original",
    sources: Path | None = None,
) -> LabelSet:
    rng = np.random.default_rng(seed)
    classes = NAMES[:k] if k <= len(NAMES) else tuple(f"c{i}" for i in range(k))
    if labels is None:
        labels = rng.integers(0, k, n).astype(np.int32)
    ids = ids or [f"img{i:04d}" for i in range(n)]
    # A label-only table of examples, added as a user would (``dsreg add --table``).
    # ``sources``: where the table is written (default: beside the registry).
    folder = sources if sources is not None else reg.root.parent / "sources"
    folder.mkdir(parents=True, exist_ok=True)
    table_path = folder / f"{name}-{tag}-examples.parquet"
    pq.write_table(pa.table({"example_id": ids, "label": pa.array(labels)}), table_path)
    snap = dsreg.add(name, table=table_path, classes=classes, tag=tag, registry=reg).snapshot
    ls = LabelSet(reg=reg, name=name, labels=labels, ids=ids, classes=classes, snapshot=snap)
    verdicts = np.asarray(
        ["suspected", "non_error", "correctable", "multi_label", "neither", "non_agreement"]
    )
    for i in range(overlays):
        rows = np.sort(rng.choice(len(ids), size=len(ids) // 3, replace=False))
        v = verdicts[rng.integers(0, len(verdicts), len(rows))]
        sug = (labels[rows] + rng.integers(1, max(k, 2), len(rows))) % k
        sug = np.where(
            np.isin(v, ["suspected", "correctable"]) | (rng.random(len(rows)) < 0.3), sug, -1
        )
        table = corrections_table(
            rows=rows,
            example_ids=[ids[r] for r in rows],
            given_label=labels[rows],
            suggested_label=sug,
            verdict=list(v),
            # The second overlay carries label sets (some rows none): the multilabel view.
            label_sets=LabelSets(
                labels=None
                if i != 1
                else pa.array(
                    [
                        None if rng.random() < 0.3 else sorted(set(rng.integers(0, k, 3).tolist()))
                        for _ in rows
                    ],
                    pa.list_(pa.int32()),
                )
            ),
        )
        d = write_overlay(reg, base=snap, kind="manual", table=table, producer=PRODUCER)
        if d not in ls.overlays:
            ls.overlays.append(d)
    if tag == "original":
        for view in VIEWS[1:]:
            dsreg.tag(
                f"{name}@{view}", f"{name}@original", overlays=ls.overlays, view=view, registry=reg
            )
    return ls


@pytest.fixture
def make_labelset(
    make_registry: Callable[..., Registry], tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., LabelSet]:
    """``make_labelset(n=60, k=4, seed=0, overlays=2)``: dataset ``toy`` tagged original,
    cleaned, corrected and honeypot over the same overlays."""
    regs: dict[str, Registry] = {}
    sources = tmp_path_factory.mktemp("labelset-sources")

    def make(reg: Registry | None = None, **kw: object) -> LabelSet:
        if reg is None:
            reg = regs.setdefault("reg", make_registry())
        return build(reg, sources=sources, **kw)  # type: ignore[arg-type]

    return make


def _write_table(path: Path, table: pa.Table) -> Path:
    if path.suffix == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    return path


@pytest.fixture
def write_table() -> Callable[[Path, pa.Table], Path]:
    """``write_table(path, table)``: a predictions file, CSV or Parquet by the suffix."""
    return _write_table
