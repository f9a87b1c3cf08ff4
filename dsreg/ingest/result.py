"""What an add returns, and the checks every kind of add shares (light: no numpy, no pyarrow)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsreg.errors import TagExistsError
from dsreg.formats.names import check_name
from dsreg.objects.digest import short

if TYPE_CHECKING:
    from dsreg.registry.folder import Registry

__all__ = [
    "AddResult",
    "AddTarget",
    "check_names",
    "is_dry",
    "refuse_moved_tag",
    "refuse_tag",
    "set_tag",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AddTarget:
    """Where an add goes and how it is recorded: the dataset, the tag to point at the new
    revision (``None``: untagged), whether an existing tag may move, the command the ref log
    records, and provenance merged into the snapshot's ``source`` (a credit, a DVC origin)."""

    dataset: str
    tag: str | None
    force: bool = False
    command: str = ""
    extra_provenance: dict[str, object] | None = None

    def existing(self, reg: Registry) -> str | None:
        """The revision the tag points at now (``None``: no tag asked for, or a new one)."""
        return reg.refs.get(self.dataset, self.tag) if self.tag is not None else None

    def provenance(self, source: Mapping[str, object]) -> dict[str, object]:
        """The snapshot's ``source``: what the source says of itself, then the extra."""
        return {**source, **(self.extra_provenance or {})}


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    dataset: str
    tag: str | None
    revision: str
    snapshot: str
    examples: str
    rows: int
    classes: tuple[str, ...]
    files: int
    new_objects: int
    bytes: int
    previous: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "snapshot": self.snapshot,
            "examples": self.examples,
            "rows": self.rows,
            "classes": list(self.classes),
            "files": self.files,
            "new_objects": self.new_objects,
            "bytes": self.bytes,
        }


def check_names(dataset: str, tag: str | None) -> None:
    check_name(dataset, what="dataset name")
    if tag is not None:
        check_name(tag, what="tag name")


def is_dry(existing: str | None, force: bool) -> bool:
    """An existing tag may still be re-added to the same content (a no-op), so payloads are
    hashed first and nothing is written until the add is known to be accepted."""
    return existing is not None and not force


def refuse_tag(dataset: str, tag: str, existing: str, new: str) -> None:
    raise TagExistsError(
        f"tag {dataset}@{tag} exists at {short(existing)}, and this content is "
        f"{short(new)}; tags are immutable: choose another --tag, or move it "
        "with --force (the log keeps the old value)",
        dataset=dataset,
        tag=tag,
        existing=existing,
        new=new,
    )


def refuse_moved_tag(target: AddTarget, existing: str | None, revision: str) -> None:
    """Refuse, before anything is written, an add that would move an existing tag without
    ``force`` (re-adding the same content is a no-op)."""
    if is_dry(existing, target.force) and existing != revision:
        assert existing is not None and target.tag is not None
        refuse_tag(target.dataset, target.tag, existing, revision)


def set_tag(reg: Registry, target: AddTarget, revision: str) -> str | None:
    """Point the tag (if one is asked for) at ``revision``; its previous revision."""
    if target.tag is None:
        return None
    return reg.refs.set(
        target.dataset, target.tag, revision, force=target.force, command=target.command
    )
