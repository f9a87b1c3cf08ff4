"""Overlays read back: the lowest-scored corrections of one, and one described in full."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg._util.records import FieldDict
from dsreg.errors import InvalidInputError
from dsreg.formats.arrays import from_numpy
from dsreg.formats.manifests import VERDICTS, Overlay
from dsreg.formats.tables import as_numpy
from dsreg.registry.folder import Registry
from dsreg.registry.reader import OverlayRecord, Reader, dataset_overlays
from dsreg.registry.tables import read_corrections

__all__ = [
    "SHOW_ORDERS",
    "Issue",
    "OverlayInfo",
    "ShowOrder",
    "describe_overlay",
    "export_overlay",
    "list_overlays",
    "ranked_issues",
]

# How ``overlay show`` lists corrections: by row, or worst label quality first.
ShowOrder: TypeAlias = Literal["row", "score"]
SHOW_ORDERS: tuple[ShowOrder, ...] = get_args(ShowOrder)


@dataclass(frozen=True, slots=True, kw_only=True)
class Issue(FieldDict):
    """A flagged row: its position, id, given and suggested class names, label quality."""

    row: int
    example_id: str
    given: str
    suggested: str | None
    score: float | None


def ranked_issues(reg: Registry, digest: str, top: int) -> tuple[Issue, ...]:
    """The ``top`` corrections of overlay ``digest`` with the lowest label quality (ties: the
    lower row first; rows without a score last)."""
    ov = reg.overlay(digest)
    classes = reg.snapshot(ov.base).classes
    table = read_corrections(reg, ov)
    # Sorted in numpy, and only the rows shown become Python objects (a detected overlay of a
    # million rows flags tens of thousands). No score sorts as +inf: after every score.
    column = table.column("score")
    score = np.where(as_numpy(pc.is_valid(column)), as_numpy(column, fill=0), np.inf)
    order = np.lexsort((as_numpy(table.column("row")), score))[: max(top, 0)]
    rows = table.take(from_numpy(order, pa.int64())).to_pylist()
    return tuple(
        Issue(
            row=r["row"],
            example_id=r["example_id"],
            given=classes[r["given_label"]],
            suggested=classes[r["suggested_label"]] if r["suggested_label"] is not None else None,
            score=r["score"],
        )
        for r in rows
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlayInfo:
    """An overlay: digest, manifest, the dataset and classes of its base, its first corrections
    (``total``: how many corrections there are, or match the verdict asked for)."""

    digest: str
    overlay: Overlay
    dataset: str
    classes: tuple[str, ...]
    corrections: tuple[dict[str, Any], ...]
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "manifest": self.overlay.to_dict(),
            "corrections": list(self.corrections),
            "total": self.total,
        }


def describe_overlay(
    reg: Registry,
    digest: str,
    *,
    rows: int = 20,
    sort: ShowOrder = "row",
    verdict: str | None = None,
    category: str | None = None,
) -> OverlayInfo:
    """Overlay ``digest`` (or an unambiguous prefix) with its first ``rows`` corrections.

    ``verdict`` keeps only the corrections with that verdict, ``category`` those a published
    re-annotation gave that category (a version 4 overlay's; ``total`` counts those);
    ``sort="score"`` lists them worst first (lowest label quality; ties by row, rows without
    a score last), ``sort="row"`` in row order."""
    if sort not in SHOW_ORDERS:
        raise InvalidInputError(f"unknown sort {sort!r}; choose one of {', '.join(SHOW_ORDERS)}")
    if verdict is not None and verdict not in VERDICTS:
        raise InvalidInputError(f"unknown verdict {verdict!r}; choose one of {', '.join(VERDICTS)}")
    d = reg.resolve_object(digest)
    ov = reg.overlay(d)
    snap = reg.snapshot(ov.base)
    corr = read_corrections(reg, ov, base=snap)
    if verdict is not None:
        corr = corr.filter(pc.equal(corr.column("verdict"), verdict))
    if category is not None:
        if "category" not in corr.column_names:
            raise InvalidInputError(
                f"overlay {d} holds no categories (a published re-annotation's overlay does: "
                "'dsreg overlay import-labels --format mmlu-redux' or 'status'); drop --category"
            )
        corr = corr.filter(pc.fill_null(pc.equal(corr.column("category"), category), False))
    if sort == "score":
        score = corr.column("score")
        missing = score.is_null().to_numpy(zero_copy_only=False)
        value = score.fill_null(0.0).to_numpy()
        # lexsort: the last key first; rows without a score last, ties by row.
        order = np.lexsort((corr.column("row").to_numpy(), value, missing))
        corr = corr.take(pa.array(order))
    return OverlayInfo(
        digest=d,
        overlay=ov,
        dataset=snap.dataset,
        classes=snap.classes,
        corrections=tuple(corr.slice(0, max(rows, 0)).to_pylist()),
        total=corr.num_rows,
    )


def export_overlay(reg: Registry, digest: str) -> bytes:
    """Overlay ``digest``'s corrections as the CSV ``dsreg overlay import-labels --format csv``
    reads back (``overlays.corrections_csv``)."""
    from dsreg.overlays.corrections_csv import export_csv

    ov = reg.overlay(reg.resolve_object(digest))
    return export_csv(read_corrections(reg, ov))


def list_overlays(reader: Reader, dataset: str) -> list[OverlayRecord]:
    """A dataset's overlays, oldest first: those its log says were made for it
    (``dataset_overlays``), then those its tags apply."""
    listed = {r.digest: r for r in dataset_overlays(reader, dataset).held}
    reg = reader.registry
    for tagged in reader.tags(dataset).values():
        for d in reg.revision(tagged).overlays:
            if d not in listed and reg.store.has(d):
                listed[d] = OverlayRecord(digest=d, overlay=reg.overlay(d))
    return list(listed.values())
