"""What an add returns, and the checks every kind of add shares (light: no numpy, no pyarrow)."""

from __future__ import annotations

from dataclasses import dataclass

from dsreg.errors import TagExistsError
from dsreg.formats.names import check_name
from dsreg.objects.digest import short

__all__ = ["AddResult", "check_names", "is_dry", "refuse_tag"]


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
