"""Make an overlay (from the detector or from human votes) and, when asked, tag a revision
with it in the same call: what ``dsreg detect`` and ``dsreg overlay import-votes`` do."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.detector.options import FILTER_BY, RANK_BY, DetectorOptions
from dsreg.errors import DsregError, InvalidInputError, TagExistsError
from dsreg.formats.manifests import VIEWS
from dsreg.formats.names import check_name
from dsreg.objects.digest import short
from dsreg.ops.tag import TagResult, make_tag
from dsreg.overlays.create import CreatedOverlay
from dsreg.overlays.inspect import Issue
from dsreg.registry.folder import Registry

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "VOTE_FORMATS",
    "NewTag",
    "OverlayResult",
    "check_detect_options",
    "check_tag_options",
    "check_tag_target",
    "check_vote_format",
    "detect",
    "import_labels",
    "import_votes",
]

VOTE_FORMATS = ("label-errors", "csv")


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlayResult(CreatedOverlay):
    """An overlay just stored (a :class:`CreatedOverlay`), the tag made with it when one was
    asked for, and (from the detector) its ``top`` lowest-scored rows."""

    tagged: TagResult | None = None
    top: tuple[Issue, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTag:
    """The tag a command makes with the overlay it stores: ``<dataset>@<name>``, the revision
    plus the overlay, in ``view`` (default cleaned); an existing tag is moved only if
    ``force``."""

    name: str
    view: str | None = None
    force: bool = False


def check_detect_options(filter_by: str, rank_by: str) -> None:
    if filter_by not in FILTER_BY:
        raise InvalidInputError(
            f"unknown --filter-by {filter_by!r}; choose one of {', '.join(FILTER_BY)}"
        )
    if rank_by not in RANK_BY:
        raise InvalidInputError(
            f"unknown --rank-by {rank_by!r}; choose one of {', '.join(RANK_BY)}"
        )


def check_tag_options(tag: str | None, view: str | None) -> None:
    """``view`` names the view of the revision ``tag`` makes: alone, it means nothing. Both are
    checked before the overlay is made, so a refused option writes nothing (an existing tag
    is refused later, under the lock, unless the new revision is the one it names)."""
    if tag is None and view is not None:
        raise InvalidInputError("--view goes with --tag: it names the view of the new revision")
    if tag is not None:
        check_name(tag, what="tag name")
    if view is not None and view not in VIEWS:
        raise InvalidInputError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")


def check_tag_target(
    reg: Registry,
    spec: str,
    tag: str | None,
    view: str | None,
    *,
    force: bool,
    producer: str,
) -> None:
    """Refuse, before any work, a ``tag`` that exists (unless ``force``): the overlay is neither
    made nor stored. The one exception is a likely re-run: the tag names ``spec``'s revision
    plus one overlay of ``spec``'s snapshot made by the same ``producer``, in the same view;
    the work goes on and the tag is a no-op if the new overlay is that one (same inputs, same
    digest), refused under the lock otherwise (``make_tag``, the guard against races too)."""
    check_tag_options(tag, view)
    if tag is None or force:
        return
    base = reg.resolve(spec)
    old = reg.refs.get(base.dataset, tag)
    if old is None:
        return
    try:
        rev = reg.revision(old)
        last = reg.overlay(rev.overlays[-1]) if rev.overlays else None
    except DsregError:  # a damaged tag is refused like any other existing one
        rev, last = None, None
    if (
        rev is not None
        and last is not None
        and rev.snapshot == base.revision.snapshot
        and rev.overlays[:-1] == base.revision.overlays
        and rev.view == (view or "cleaned")
        and last.producer.get("name") == producer
    ):
        return
    raise TagExistsError(
        f"tag {base.dataset}@{tag} exists at {short(old)}; tags are immutable: choose another "
        f"--tag name, or move it with --force (the log keeps {short(old)}). Nothing was done.",
        dataset=base.dataset,
        tag=tag,
        existing=old,
    )


def _tag(
    reg: Registry,
    spec: str,
    made: CreatedOverlay,
    tag: str | None,
    view: str | None,
    force: bool,
    command: str,
) -> TagResult | None:
    if tag is None:
        return None
    # The new revision is the one the overlay was made for, plus the overlay, in ``view``.
    return make_tag(
        reg,
        f"{made.dataset}@{tag}",
        spec,
        overlays=[made.digest],
        view=view or "cleaned",
        force=force,
        command=command,
    )


def detect(
    reg: Registry,
    spec: str,
    pred_probs: np.ndarray | str | os.PathLike[str],
    *,
    options: DetectorOptions,
    tag: NewTag | None = None,
    top: int = 10,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> OverlayResult:
    """A ``detected`` overlay of ``spec`` made with the detector's ``options``, and ``tag``
    made with it when given; ``top`` of its rows, lowest-scored first, come back with it."""
    from dsreg.overlays.create import detect_overlay
    from dsreg.overlays.inspect import ranked_issues

    check_detect_options(options.filter_by, options.rank_by)
    name, view, force = (tag.name, tag.view, tag.force) if tag else (None, None, False)
    check_tag_target(reg, spec, name, view, force=force, producer="dsreg.detect")
    probs = Path(pred_probs) if isinstance(pred_probs, str | os.PathLike) else pred_probs
    made = detect_overlay(reg, spec, probs, options=options, progress=progress, command=command)
    tagged = _tag(reg, spec, made, name, view, force, command)
    return _result(made, tagged, ranked_issues(reg, made.digest, top))


def check_vote_format(format: str) -> None:
    if format not in VOTE_FORMATS:
        raise InvalidInputError(f"unknown --format {format!r}; choose label-errors or csv")


def import_votes(
    reg: Registry,
    spec: str,
    votes: str | os.PathLike[str],
    *,
    format: str = "label-errors",
    threshold: int = 3,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    command: str = "",
) -> OverlayResult:
    """A ``validated`` overlay of ``spec``'s snapshot from a votes file, tagged as
    ``<dataset>@<tag>`` in ``view`` (default cleaned) when ``tag`` is given."""
    from dsreg.overlays.create import votes_overlay

    check_vote_format(format)
    check_tag_target(reg, spec, tag, view, force=force, producer="dsreg.import-votes")
    made = votes_overlay(
        reg, spec, Path(votes), format=format, threshold=threshold, command=command
    )
    return _result(made, _tag(reg, spec, made, tag, view, force, command), ())


def import_labels(
    reg: Registry,
    spec: str,
    path: str | os.PathLike[str],
    *,
    format: str,
    threshold: float = 0.5,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    command: str = "",
) -> OverlayResult:
    """An overlay of ``spec``'s snapshot from a relabeling file (``real``, ``counts``) or a
    corrections CSV (``csv``), tagged as ``<dataset>@<tag>`` in ``view`` (default cleaned)
    when ``tag`` is given."""
    from dsreg.overlays.create import LABEL_FORMATS, labels_overlay

    if format not in LABEL_FORMATS:
        raise InvalidInputError(
            f"unknown --format {format!r}; choose one of {', '.join(LABEL_FORMATS)}"
        )
    check_tag_target(reg, spec, tag, view, force=force, producer="dsreg.import-labels")
    made = labels_overlay(
        reg, spec, Path(path), format=format, threshold=threshold, command=command
    )
    return _result(made, _tag(reg, spec, made, tag, view, force, command), ())


def _result(
    made: CreatedOverlay, tagged: TagResult | None, top: tuple[Issue, ...]
) -> OverlayResult:
    fields = {f: getattr(made, f) for f in CreatedOverlay.__dataclass_fields__}
    return OverlayResult(**fields, tagged=tagged, top=top)
