"""What a registry holds, described: its tags (``ls``), one revision or object (``show``), the
history of a dataset's tags (``log``), and a revision's label card (``label_quality``: how clean
its labels are, as ``eval``, ``show`` and ``cite`` report it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsreg._util.records import FieldDict, field_dict
from dsreg.errors import RevisionNotFoundError
from dsreg.formats.manifests import Overlay, Revision
from dsreg.formats.names import check_name
from dsreg.registry.folder import Registry
from dsreg.registry.marks import read_yanks
from dsreg.registry.reader import LoggedOverlays, Reader, Resolved, dataset_overlays
from dsreg.registry.refs import RefLog

__all__ = [
    "LabelQuality",
    "ObjectInfo",
    "RevisionInfo",
    "TagRef",
    "dataset_log",
    "describe",
    "describe_object",
    "label_quality",
    "list_tags",
    "marks_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagRef(FieldDict):
    """A tag: ``dataset@tag`` and the full digest of the revision it names."""

    dataset: str
    tag: str
    revision: str
    yanked: dict[str, str] | None = None  # {"reason"} of a yanked tag, listed with --all

    def to_dict(self) -> dict[str, Any]:
        d = {"dataset": self.dataset, "tag": self.tag, "revision": self.revision}
        return d if self.yanked is None else d | {"yanked": self.yanked}


class TagList(list[TagRef]):
    """Tags, as ``ls`` returns them (a list, by dataset and tag), with what a listing of a
    remote left out: ``named``, how many tags there are; ``omitted``, how many of them were
    not read because the remote names more than ``max_tags`` (the cap the listing applied,
    ``None`` for none); ``retired``, ``{dataset: {"successor", "reason"}}`` of the retired
    datasets among them; ``unusable``, ``{"dataset@name": why}`` of a remote's yanks and
    retirements that are damaged there, and so not applied."""

    __slots__ = ("max_tags", "named", "omitted", "retired", "unusable")

    def __init__(
        self,
        tags: Iterable[TagRef] = (),
        *,
        named: int = 0,
        omitted: int = 0,
        max_tags: int | None = None,
        retired: dict[str, dict[str, str]] | None = None,
        unusable: dict[str, str] | None = None,
    ) -> None:
        super().__init__(tags)
        self.named = named
        self.omitted = omitted
        self.max_tags = max_tags
        self.retired = retired or {}
        self.unusable = unusable or {}


def list_tags(reg: Registry, *, all: bool = False) -> list[TagRef]:
    """Every tag of every dataset, by dataset and tag name; a yanked tag only with ``all``
    (and marked: its ``yanked`` holds the reason)."""
    out = []
    for ds in reg.refs.datasets():
        yanks = read_yanks(reg.root, ds)
        for t, d in reg.refs.tags(ds).items():
            yank = yanks.get(t)
            if yank is None or all:
                marked = None if yank is None else {"reason": yank.reason}
                out.append(TagRef(dataset=ds, tag=t, revision=d, yanked=marked))
    return out


def marks_of(resolved: Resolved) -> dict[str, Any]:
    """``{"yanked": {reason}}`` if the tag ``resolved`` was reached by is yanked,
    ``{"retired": {successor, reason}}`` if its dataset is retired (both, or neither: ``{}``),
    as its reader holds them."""
    out: dict[str, Any] = {}
    marks = resolved.reader.marks(resolved.dataset)
    reason = marks.yanks.get(resolved.tag) if resolved.tag is not None else None
    if reason is not None:
        out["yanked"] = {"reason": reason}
    if marks.retired is not None:
        successor, why = marks.retired
        out["retired"] = {"successor": successor, "reason": why}
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RevisionInfo:
    """A revision described: what it is made of, how many rows its view serves.

    ``overlays`` holds one ``{"digest", "kind", "producer", "rows"}`` per overlay, in order.
    """

    revision: str
    spec: str
    dataset: str
    tag: str | None
    view: str
    snapshot: str
    examples: str
    snapshot_rows: int
    rows: int
    classes: tuple[str, ...]
    source: dict[str, Any]
    overlays: tuple[dict[str, Any], ...]
    manifest: Revision
    several_labels: int | None = None  # multilabel view: rows with more than one label
    label_quality: LabelQuality | None = None
    marks: dict[str, Any] | None = None  # "yanked": {reason}, "retired": {successor, reason}
    # A question set's (docs/questions.md): its task, an exact-answer set's normalisation, and
    # the view's first questions ({"row", "question", "choices", "label"}).
    task: str = "multiclass"
    normalization: str | None = None
    questions: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.task != "multiclass":
            extra |= {
                "task": self.task,
                "normalization": self.normalization,
                "questions": [dict(q) for q in self.questions],
            }
        if self.several_labels is not None:
            extra["several_labels"] = self.several_labels
        if self.label_quality is not None:
            extra["label_quality"] = self.label_quality.to_dict()
        extra |= self.marks or {}
        return extra | {
            "revision": self.revision,
            "spec": self.spec,
            "dataset": self.dataset,
            "tag": self.tag,
            "view": self.view,
            "snapshot": self.snapshot,
            "examples": self.examples,
            "snapshot_rows": self.snapshot_rows,
            "rows": self.rows,
            "classes": list(self.classes),
            "source": self.source,
            "overlays": [dict(o) for o in self.overlays],
            "manifest": self.manifest.to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectInfo:
    """A stored object that is not a revision: an overlay manifest (``manifest`` and the
    ``dataset`` it corrects), or a payload or table (``size`` in bytes)."""

    digest: str
    type: str  # "overlay", or "object" for payloads and tables
    manifest: dict[str, Any] | None = None
    dataset: str | None = None
    size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"digest": self.digest, "type": self.type}
        if self.manifest is not None:
            d["manifest"] = self.manifest
        if self.dataset is not None:
            d["dataset"] = self.dataset
        if self.size is not None:
            d["size"] = self.size
        return d


def describe(resolved: Resolved) -> RevisionInfo:
    """A revision described (``show``): it needs the manifests and tables, never the
    payloads; its label card and marks come from its reader."""
    from dsreg.views.dataset import Dataset

    ds = Dataset(resolved)
    info = ds.describe()
    # What the dataset describes, key for field; the manifest as held rather than as JSON.
    return RevisionInfo(
        **info
        | {
            "classes": tuple(info["classes"]),
            "overlays": tuple(info["overlays"]),
            "questions": tuple(info.get("questions", ())),
            "manifest": ds.revision,
            "label_quality": label_quality(resolved),
            "marks": marks_of(resolved),
        }
    )


def describe_object(reg: Registry, digest: str) -> ObjectInfo:
    """A stored object that is not a revision (an overlay, a payload or a table)."""
    return _describe_object(reg, digest, reg.manifest(digest) if reg.is_manifest(digest) else None)


def _describe_object(reg: Registry, digest: str, m: Any) -> ObjectInfo:
    if m is None:
        return ObjectInfo(
            digest=digest, type="object", size=reg.store.verified_path(digest).stat().st_size
        )
    return ObjectInfo(
        digest=digest,
        type=type(m).__name__.lower(),
        manifest=m.to_dict(),
        dataset=reg.snapshot(m.base).dataset if isinstance(m, Overlay) else None,
    )


def dataset_log(reader: Reader, dataset: str) -> RefLog:
    """Who moved which tag of ``dataset`` when, and which overlays were made: oldest first."""
    check_name(dataset, what="dataset name")
    entries = reader.log(dataset)
    if not entries and not reader.tags(dataset) and not entries.damaged:
        raise RevisionNotFoundError(
            f"no dataset {dataset!r}"
            f"{reader.where or f' in this registry ({reader.registry.root})'}; see 'dsreg ls'",
            dataset=dataset,
        )
    return entries


# -- the label card -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelQuality(FieldDict):
    """How clean a revision's labels are, from its overlays (and the detected overlays of its
    snapshot that it does not apply).

    ``detected``: the newest detected overlay's estimated share of wrong labels (its noise rate,
    the figure ``dsreg detect`` prints), the rows it flagged for review (candidates, not a count
    of errors) and whether the revision applies it. ``validated``: rows people checked, errors they
    found and their share, and raters per row (None where it varies), summed over the
    revision's validated and manual overlays. ``agreement``: over the rows with raters' counts,
    the mean share of raters who chose the majority label. Each names its overlays."""

    rows: int
    detected: dict[str, Any] | None = None
    validated: dict[str, Any] | None = None
    agreement: dict[str, Any] | None = None
    unheld: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = field_dict(self)
        if not self.unheld:
            del out["unheld"]  # the card read where its whole record is: nothing to say
        else:
            out["unheld"] = list(self.unheld)
        return out

    def lines(self) -> list[str]:
        """The card as short lines of text (one per kind of figure)."""
        out = []
        d, v, a = self.detected, self.validated, self.agreement
        if v is not None:
            share = "" if v["share"] is None else f" ({100 * v['share']:.2f}%)"
            raters = "" if v["raters"] is None else f", {v['raters']} raters a row"
            out.append(f"validated: {v['errors']} errors in {v['checked']} rows checked{share}"
                       f"{raters} (overlays {_shorts(v['overlays'])})")  # fmt: skip
        if d is not None:
            state = "applied, unvalidated" if d["applied"] else "available, not applied"
            out.append(f"detector: {100 * d['rate']:.2f}% of labels estimated wrong (noise "
                       f"rate), {d['flagged']} rows flagged for review; {state} "
                       f"(overlay {_shorts([d['overlay']])})")  # fmt: skip
        if a is not None:
            out.append(f"raters: majority share {100 * a['mean_majority_share']:.2f}% on average "
                       f"over {a['rows']} rows (overlays {_shorts(a['overlays'])})")  # fmt: skip
        if not out:
            out.append("unknown: no detected, validated or rater overlay for this snapshot")
        if self.unheld:
            out.append(f"not here: {len(self.unheld)} overlays its dataset's log names are not "
                       f"held where this was read (overlays {_shorts(self.unheld)}), so what "
                       "they report is missing; read it where they were made, or push them "
                       "from there")  # fmt: skip
        return out


def _shorts(digests: Iterable[str]) -> str:
    return ", ".join(d.split(":", 1)[-1][:12] for d in digests)


def label_quality(resolved: Resolved) -> LabelQuality:
    """The label card of a revision: from its overlays' manifests, the rater counts of its
    version 2 and 4 overlays, and the newest detected overlay of its snapshot among those its
    dataset's record names (made for it, or applied by a tag), as its reader holds them."""
    reg, revision = resolved.registry, resolved.revision
    snap = reg.snapshot(revision.snapshot)
    applied = [(d, reg.overlay(d)) for d in revision.overlays]
    # The log's overlays are read only where the revision applies no detected overlay.
    logged = None
    if not any(o.kind == "detected" for _, o in applied):
        logged = dataset_overlays(resolved.reader, resolved.dataset)
    return LabelQuality(
        rows=snap.rows,
        detected=_detected(resolved, applied, logged),
        validated=_validated(applied),
        agreement=_agreement(reg, applied),
        unheld=() if logged is None else logged.unheld,
    )


def _detected(
    resolved: Resolved, applied: list[tuple[str, Overlay]], logged: LoggedOverlays | None
) -> dict[str, Any] | None:
    revision = resolved.revision
    found = [(d, o) for d, o in applied if o.kind == "detected"]
    if not found and logged is not None:
        found = [
            (r.digest, r.overlay)
            for r in logged.held
            if r.overlay.kind == "detected" and r.overlay.base == revision.snapshot
        ]
    if not found:
        return None
    digest, ov = found[-1]
    s = ov.summary
    rate = s.get("noise_rate")
    if not isinstance(rate, int | float):
        return None
    return {
        "overlay": digest,
        "applied": digest in revision.overlays,
        "rate": float(rate),
        "flagged": int(s.get("rows", 0)),
        "num_label_issues_estimate": s.get("num_label_issues_estimate"),
    }


def _validated(applied: list[tuple[str, Overlay]]) -> dict[str, Any] | None:
    found = [(d, o) for d, o in applied if o.kind in ("validated", "manual")]
    if not found:
        return None
    checked = sum(int(o.summary.get("checked", o.summary.get("rows", 0))) for _, o in found)
    errors = sum(int(o.summary.get("errors", 0)) for _, o in found)
    raters = {o.producer.get("params", {}).get("raters") for _, o in found}
    return {
        "overlays": [d for d, _ in found],
        "checked": checked,
        "errors": errors,
        "share": errors / checked if checked else None,
        "raters": raters.pop() if len(raters) == 1 else None,
    }


def _agreement(reg: Registry, applied: list[tuple[str, Overlay]]) -> dict[str, Any] | None:
    """Mean majority share over the rows of the revision's overlays with ``label_counts``."""
    import numpy as np

    from dsreg.formats.corrections import LABEL_SET_VERSIONS
    from dsreg.formats.tables import as_numpy
    from dsreg.views.sparse import read_columns

    used, shares = [], []
    for digest, ov in applied:
        if ov.version not in LABEL_SET_VERSIONS:
            continue
        import pyarrow.compute as pc  # only where there are counts (0.1 s to import)

        path = reg.store.verified_path(ov.corrections)
        col = read_columns(path, ["label_counts"]).column("label_counts").combine_chunks()
        col = col.filter(pc.invert(pc.is_null(col)))
        if not len(col):
            continue
        counts = as_numpy(col.values.field("count")).astype(np.float64)
        offsets = as_numpy(col.offsets).astype(np.int64)
        nonempty = offsets[1:] > offsets[:-1]
        starts = offsets[:-1][nonempty]
        top = np.maximum.reduceat(counts, starts) if len(counts) else counts
        total = np.add.reduceat(counts, starts) if len(counts) else counts
        ok = total > 0
        shares.append(top[ok] / total[ok])
        used.append(digest)
    if not used:
        return None
    share = np.concatenate(shares)
    return {
        "overlays": used,
        "rows": len(share),
        "mean_majority_share": float(share.mean()) if len(share) else None,
    }
