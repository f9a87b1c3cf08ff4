"""``dsreg tag NEW SRC``: name a revision, optionally adding overlays and choosing a view;
``dsreg tag --delete NAME``: remove a name (logged; no object is removed, gc decides)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsreg.errors import DsregError, InvalidInputError
from dsreg.formats.manifests import VIEWS, Revision, View
from dsreg.formats.names import TagName
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.registry.refs import move_refused

__all__ = ["TagResult", "delete_tag", "make_tag"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagResult:
    dataset: str
    tag: str
    revision: str
    previous: str | None
    view: str
    overlays: tuple[str, ...]
    deleted: bool = False  # the tag was removed; ``revision`` is what it pointed at

    def to_dict(self) -> dict[str, object]:
        return {
            "deleted": self.deleted,
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "previous": self.previous,
            "view": self.view,
            "overlays": list(self.overlays),
        }


def _build_revision(base: Resolved, *, overlays: Sequence[str], view: str | None) -> Revision:
    """Check and assemble the revision; store nothing (a refused tag writes nothing)."""
    reg = base.registry
    if view is not None and view not in VIEWS:
        raise InvalidInputError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    extra = tuple(reg.resolve_object(o) for o in overlays)
    for d in extra:
        reg.overlay(d)  # a clear error if the digest is not an overlay
    dup = sorted({short(d) for d in extra if d in base.revision.overlays or extra.count(d) > 1})
    if dup:
        raise InvalidInputError(f"overlays {dup} are already in this revision; name each once")
    chosen: View = view if view is not None else base.revision.view
    return Revision(
        snapshot=base.revision.snapshot, overlays=base.revision.overlays + extra, view=chosen
    )


def make_tag(
    new: TagName,
    base: Resolved,
    *,
    overlays: Sequence[str] = (),
    view: str | None = None,
    force: bool = False,
    command: str = "",
) -> TagResult:
    """Create tag ``new`` at ``base``'s revision (+ overlays, view), as ``git tag``, in the
    registry ``base`` is read from."""
    dataset, tag = new
    reg = base.registry
    # One shared lock from storing the revision to setting the tag: a gc in between would see
    # an untagged revision manifest and remove it, leaving the tag pointing at nothing.
    with reg.lock():
        rev = _build_revision(base, overlays=overlays, view=view)
        if base.dataset != dataset:
            raise InvalidInputError(
                f"{base.spec!r} is a revision of {base.dataset!r}, not {dataset!r}; "
                f"tag it as {base.dataset}@{tag}"
            )
        old = reg.refs.current(dataset, tag, force=force)  # force repairs a damaged tag
        digest = reg.digest_of(rev)
        if old is not None and old != digest and not force:
            # Refused before the revision is stored; refs.set refuses again under its lock.
            raise move_refused(dataset, tag, old, digest)
        reg.store_revision(rev)
        previous = reg.refs.set(dataset, tag, digest, force=force, command=command)
    return TagResult(
        dataset=dataset,
        tag=tag,
        revision=digest,
        previous=previous,
        view=rev.view,
        overlays=rev.overlays,
    )


def delete_tag(reg: Registry, name: TagName, *, command: str = "") -> TagResult:
    """Remove tag ``name`` (``dataset@tag``), as ``git tag -d``: the ref log records it and
    nothing else changes; the revision it named stays a gc root through that log line until
    the log's expiry (``gc --prune-log-older-than``). ``RevisionNotFoundError`` if there is no
    such tag."""
    dataset, tag = name
    with reg.lock():
        old = reg.refs.delete(dataset, tag, command=command)
    try:
        rev = reg.revision(old)
        view, overlays = str(rev.view), rev.overlays
    except DsregError:  # a tag naming a damaged or missing manifest is deleted all the same
        view, overlays = "", ()
    return TagResult(
        dataset=dataset,
        tag=tag,
        revision=old,
        previous=old,
        view=view,
        overlays=overlays,
        deleted=True,
    )
