"""``dsreg tag NEW SRC``: name a revision, optionally adding overlays and choosing a view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsreg.errors import InvalidInputError
from dsreg.registry.digest import short
from dsreg.registry.manifests import VIEWS, Revision, View
from dsreg.registry.names import parse_tag_target
from dsreg.registry.registry import Registry

__all__ = ["TagResult", "make_revision", "make_tag"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagResult:
    dataset: str
    tag: str
    revision: str
    previous: str | None
    view: str
    overlays: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "previous": self.previous,
            "view": self.view,
            "overlays": list(self.overlays),
        }


def make_revision(
    reg: Registry, source: str, *, overlays: Sequence[str] = (), view: str | None = None
) -> tuple[str, Revision]:
    """The revision ``source`` plus ``overlays`` (digests or prefixes), in ``view``; stored."""
    base = reg.resolve(source)
    if view is not None and view not in VIEWS:
        raise InvalidInputError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    extra = tuple(reg.resolve_object(o) for o in overlays)
    for d in extra:
        reg.overlay(d)  # a clear error if the digest is not an overlay
    dup = sorted({short(d) for d in extra if d in base.revision.overlays or extra.count(d) > 1})
    if dup:
        raise InvalidInputError(f"overlays {dup} are already in this revision; name each once")
    chosen: View = view if view is not None else base.revision.view  # type: ignore[assignment]
    rev = Revision(
        snapshot=base.revision.snapshot, overlays=base.revision.overlays + extra, view=chosen
    )
    with reg.lock():
        digest = reg.store_revision(rev)
    assert digest == rev.digest
    return base.dataset, rev


def make_tag(
    reg: Registry,
    new: str,
    source: str,
    *,
    overlays: Sequence[str] = (),
    view: str | None = None,
    force: bool = False,
    command: str = "",
) -> TagResult:
    """Create tag ``new`` (``dataset@tag``) at ``source`` (+ overlays, view), as ``git tag``."""
    dataset, tag = parse_tag_target(new)
    src_dataset, rev = make_revision(reg, source, overlays=overlays, view=view)
    if src_dataset != dataset:
        raise InvalidInputError(
            f"{source!r} is a revision of {src_dataset!r}, not {dataset!r}; "
            f"tag it as {src_dataset}@{tag}"
        )
    with reg.lock():
        previous = reg.refs.set(dataset, tag, rev.digest, force=force, command=command)
    return TagResult(
        dataset=dataset,
        tag=tag,
        revision=rev.digest,
        previous=previous,
        view=rev.view,
        overlays=rev.overlays,
    )
