"""What a registry holds, described: its tags (``ls``), one revision or object (``show``), the
history of a dataset's tags (``log``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsreg.errors import RevisionNotFoundError
from dsreg.formats.manifests import Overlay, Revision, Snapshot
from dsreg.formats.names import check_name
from dsreg.registry.folder import Registry, Resolved
from dsreg.registry.refs import LogEntry

__all__ = [
    "ObjectInfo",
    "RevisionInfo",
    "TagRef",
    "dataset_log",
    "describe",
    "describe_resolved",
    "list_tags",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagRef:
    """A tag: ``dataset@tag`` and the full digest of the revision it names."""

    dataset: str
    tag: str
    revision: str

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "tag": self.tag, "revision": self.revision}


class TagList(list[TagRef]):
    """Tags, as ``ls`` returns them (a list, by dataset and tag), with what a listing of a
    remote left out: ``named``, how many tags there are; ``omitted``, how many of them were
    not read because the remote names more than ``max_tags`` (the cap the listing applied,
    ``None`` for none)."""

    __slots__ = ("max_tags", "named", "omitted")

    def __init__(
        self,
        tags: Iterable[TagRef] = (),
        *,
        named: int = 0,
        omitted: int = 0,
        max_tags: int | None = None,
    ) -> None:
        super().__init__(tags)
        self.named = named
        self.omitted = omitted
        self.max_tags = max_tags


def list_tags(reg: Registry) -> list[TagRef]:
    """Every tag of every dataset, by dataset and tag name."""
    return [TagRef(dataset=ds, tag=t, revision=d) for ds, t, d in reg.refs.all()]


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

    def to_dict(self) -> dict[str, Any]:
        extra = {} if self.several_labels is None else {"several_labels": self.several_labels}
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


def describe(reg: Registry, spec: str) -> RevisionInfo | ObjectInfo:
    """``spec`` (``dataset@tag``, ``dataset@<prefix>``) as a revision; a bare digest or prefix
    names any object: a revision or snapshot (its revision), an overlay, a payload or table."""
    if "@" not in spec:
        digest = reg.resolve_object(spec)
        m = reg.manifest(digest) if reg.is_manifest(digest) else None
        if not isinstance(m, Revision | Snapshot):
            return _describe_object(reg, digest, m)
        spec = digest
    return describe_resolved(reg, reg.resolve(spec))


def describe_resolved(reg: Registry, resolved: Resolved) -> RevisionInfo:
    """A resolved revision described (``show``, and ``show --remote`` of a revision read from a
    remote: it needs the manifests and tables, never the payloads)."""
    from dsreg.views.dataset import Dataset

    ds = Dataset(reg, resolved)
    info = ds.describe()
    return RevisionInfo(
        revision=info["revision"],
        spec=info["spec"],
        dataset=info["dataset"],
        tag=info["tag"],
        view=info["view"],
        snapshot=info["snapshot"],
        examples=info["examples"],
        snapshot_rows=info["snapshot_rows"],
        rows=info["rows"],
        classes=tuple(info["classes"]),
        source=info["source"],
        overlays=tuple(info["overlays"]),
        manifest=ds.revision,
        several_labels=info["several_labels"],
    )


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


def dataset_log(reg: Registry, dataset: str) -> list[LogEntry]:
    """Who moved which tag of ``dataset`` when, and which overlays were made: oldest first."""
    check_name(dataset, what="dataset name")
    entries = reg.refs.log(dataset)
    if not entries and dataset not in reg.refs.datasets():
        raise RevisionNotFoundError(
            f"no dataset {dataset!r} in this registry ({reg.root}); see 'dsreg ls'",
            dataset=dataset,
        )
    return entries
