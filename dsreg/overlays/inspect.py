"""Overlays read back: the lowest-scored corrections of one, and one described in full."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsreg.model.manifests import Overlay
from dsreg.repo.registry import Registry
from dsreg.repo.tables import read_corrections

__all__ = ["Issue", "OverlayInfo", "describe_overlay", "ranked_issues"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Issue:
    """A flagged row: its position, id, given and suggested class names, label quality."""

    row: int
    example_id: str
    given: str
    suggested: str | None
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "example_id": self.example_id,
            "given": self.given,
            "suggested": self.suggested,
            "score": self.score,
        }


def ranked_issues(reg: Registry, digest: str, top: int) -> tuple[Issue, ...]:
    """The ``top`` corrections of overlay ``digest`` with the lowest label quality (ties: the
    lower row first; rows without a score last)."""
    ov = reg.overlay(digest)
    classes = reg.snapshot(ov.base).classes
    rows = read_corrections(reg, ov).to_pylist()
    rows.sort(key=lambda r: (r["score"] if r["score"] is not None else float("inf"), r["row"]))
    return tuple(
        Issue(
            row=r["row"],
            example_id=r["example_id"],
            given=classes[r["given_label"]],
            suggested=classes[r["suggested_label"]] if r["suggested_label"] is not None else None,
            score=r["score"],
        )
        for r in rows[: max(top, 0)]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlayInfo:
    """An overlay: digest, manifest, the dataset and classes of its base, first corrections."""

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
        }


def describe_overlay(reg: Registry, digest: str, *, rows: int = 20) -> OverlayInfo:
    """Overlay ``digest`` (or an unambiguous prefix) with its first ``rows`` corrections."""
    d = reg.resolve_object(digest)
    ov = reg.overlay(d)
    corr = read_corrections(reg, ov)
    snap = reg.snapshot(ov.base)
    return OverlayInfo(
        digest=d,
        overlay=ov,
        dataset=snap.dataset,
        classes=snap.classes,
        corrections=tuple(corr.slice(0, max(rows, 0)).to_pylist()),
        total=corr.num_rows,
    )
