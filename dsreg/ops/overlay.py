"""Make an overlay (from the detector or from human votes) and, when asked, tag a revision
with it in the same call: what ``dsreg detect`` and ``dsreg overlay import-votes`` do."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsreg._util.choices import check_choice
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.detector.options import FILTER_BY, RANK_BY, DetectorOptions
from dsreg.errors import DsregError, InvalidInputError, TagExistsError
from dsreg.formats.manifests import VIEWS
from dsreg.formats.names import check_name
from dsreg.objects.digest import short
from dsreg.ops.tag import TagResult, make_tag
from dsreg.overlays.create import (
    LABEL_FORMATS,
    CreatedOverlay,
    detect_overlay,
    labels_overlay,
    votes_overlay,
)
from dsreg.overlays.inspect import Issue, ranked_issues
from dsreg.overlays.votes import VOTE_FORMATS
from dsreg.registry.folder import Registry

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "VOTE_FORMATS",
    "OverlayResult",
    "Recording",
    "Tagging",
    "check_detect_options",
    "check_tag_options",
    "check_tag_target",
    "check_tagging",
    "detect",
    "import_labels",
    "import_votes",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlayResult(CreatedOverlay):
    """An overlay just stored (a :class:`CreatedOverlay`), the tag made with it when one was
    asked for, and (from the detector) its ``top`` lowest-scored rows."""

    tagged: TagResult | None = None
    top: tuple[Issue, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    """What is recorded of how a new overlay was made: ``command``, the command line (or
    library call) the ref log keeps, and ``credit``, the reference of the corrections' source
    (``dsreg.formats.credit.make_credit``) the overlay's producer keeps; none: no ``credit``
    key, so the overlay's digest is the one it has without the option."""

    command: str = ""
    credit: Mapping[str, str] | None = None

    def made_by(self) -> dict[str, Any]:
        """The keywords of ``dsreg.overlays.create``'s makers that say this."""
        return {"command": self.command, "credit": self.credit}


@dataclass(frozen=True, slots=True, kw_only=True)
class Tagging:
    """The tag asked for with a new overlay: ``<dataset>@<tag>`` names the revision plus the
    overlay, in ``view`` (default cleaned); ``force`` moves a tag that exists. No ``tag``: no
    tag is made."""

    tag: str | None = None
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
    reg: Registry, spec: str, made: CreatedOverlay, tagging: Tagging, command: str
) -> TagResult | None:
    if tagging.tag is None:
        return None
    # The new revision is the one the overlay was made for, plus the overlay, in its view.
    return make_tag(
        reg,
        f"{made.dataset}@{tagging.tag}",
        spec,
        overlays=[made.digest],
        view=tagging.view or "cleaned",
        force=tagging.force,
        command=command,
    )


def detect(
    reg: Registry,
    spec: str,
    pred_probs: np.ndarray | str | os.PathLike[str],
    *,
    options: DetectorOptions,
    tagging: Tagging = Tagging(),
    top: int = 10,
    progress: ProgressHook = no_progress,
    record: Recording = Recording(),
) -> OverlayResult:
    """A ``detected`` overlay of ``spec`` (options: those of the detector), tagged as
    ``tagging`` asks, with its ``top`` lowest-scored rows; ``record``: its command and credit."""
    check_detect_options(options.filter_by, options.rank_by)
    check_tagging(reg, spec, tagging, producer="dsreg.detect")
    probs = Path(pred_probs) if isinstance(pred_probs, str | os.PathLike) else pred_probs
    made = detect_overlay(reg, spec, probs, options=options, progress=progress, **record.made_by())
    return _stored(reg, spec, made, tagging, command=record.command, top=top)


def import_votes(
    reg: Registry,
    spec: str,
    votes: str | os.PathLike[str],
    *,
    format: str = "label-errors",
    threshold: int = 3,
    tagging: Tagging = Tagging(),
    record: Recording = Recording(),
) -> OverlayResult:
    """A ``validated`` overlay of ``spec``'s snapshot from a votes file, tagged as ``tagging``
    asks; ``record``: its command and credit."""
    check_choice(format, VOTE_FORMATS, option="--format")
    check_tagging(reg, spec, tagging, producer="dsreg.import-votes")
    made = votes_overlay(
        reg, spec, Path(votes), format=format, threshold=threshold, **record.made_by()
    )
    return _stored(reg, spec, made, tagging, command=record.command)


def import_labels(
    reg: Registry,
    spec: str,
    path: str | os.PathLike[str],
    *,
    format: str,
    threshold: float = 0.5,
    tagging: Tagging = Tagging(),
    record: Recording = Recording(),
) -> OverlayResult:
    """An overlay of ``spec``'s snapshot from a relabeling file (``real``, ``counts``) or a
    corrections CSV (``csv``), tagged as ``tagging`` asks; ``record``: its command and
    credit."""
    if format not in LABEL_FORMATS:
        raise InvalidInputError(
            f"unknown --format {format!r}; choose one of {', '.join(LABEL_FORMATS)}"
        )
    check_tagging(reg, spec, tagging, producer="dsreg.import-labels")
    made = labels_overlay(
        reg, spec, Path(path), format=format, threshold=threshold, **record.made_by()
    )
    return _stored(reg, spec, made, tagging, command=record.command)


def check_tagging(reg: Registry, spec: str, tagging: Tagging, *, producer: str) -> None:
    """The tag ``tagging`` asks for, checked before any work: one that exists is refused
    (`check_tag_target`) before an overlay is computed and stored."""
    check_tag_target(reg, spec, tagging.tag, tagging.view, force=tagging.force, producer=producer)


def _stored(
    reg: Registry,
    spec: str,
    made: CreatedOverlay,
    tagging: Tagging,
    *,
    command: str,
    top: int | None = None,
) -> OverlayResult:
    """The overlay ``made`` just stored, the tag ``tagging`` asks for (checked beforehand by
    `check_tagging`) and (``top`` given) the overlay's ``top`` lowest-scored rows."""
    tagged = _tag(reg, spec, made, tagging, command)
    return _result(made, tagged, ranked_issues(reg, made.digest, top) if top is not None else ())


def _result(
    made: CreatedOverlay, tagged: TagResult | None, top: tuple[Issue, ...]
) -> OverlayResult:
    fields = {f: getattr(made, f) for f in CreatedOverlay.__dataclass_fields__}
    return OverlayResult(**fields, tagged=tagged, top=top)
