"""Store an overlay and, when asked, tag a revision with it in the same call: the one way
``dsreg detect``, ``overlay import-votes``, ``overlay import-labels``, ``audit duplicates`` and
``review --finish`` end (``store_overlay``), each tag in the view ``TAG_VIEWS`` gives its
producer unless ``--view`` names one."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsreg._util.choices import check_choice
from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.detector.options import FILTER_BY, RANK_BY, DetectorOptions
from dsreg.errors import DsregError, InvalidInputError, TagExistsError
from dsreg.formats.manifests import TAG_VIEWS, VIEWS
from dsreg.formats.names import TagName, check_name
from dsreg.objects.digest import short
from dsreg.objects.hashing import FileDigest
from dsreg.ops.tag import TagResult, make_tag
from dsreg.overlays.create import (
    LABEL_FORMATS,
    CreatedOverlay,
    OverlayDraft,
    detect_draft,
    labels_draft,
    store_draft,
    votes_draft,
)
from dsreg.overlays.inspect import Issue, ranked_issues
from dsreg.registry.reader import Resolved

# The votes readers only for import_votes.
with lazy_imports():
    from dsreg.overlays import votes as overlay_votes

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "OverlayResult",
    "Recording",
    "Tagging",
    "check_detect_options",
    "check_tag_options",
    "check_tagging",
    "detect",
    "import_labels",
    "import_votes",
    "store_overlay",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Tagging:
    """The tag asked for with a new overlay: ``<dataset>@<tag>`` names the revision plus the
    overlay, in ``view`` (default: its producer's, ``TAG_VIEWS``); ``force`` moves a tag that
    exists. No ``tag``: no tag is made."""

    tag: str | None = None
    view: str | None = None
    force: bool = False

    def view_for(self, producer: str) -> str:
        """The view of the tag made with an overlay of ``producer``."""
        return self.view or TAG_VIEWS[producer]


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


def check_tagging(base: Resolved, tagging: Tagging, *, producer: str) -> None:
    """Refuse, before any work, a tag that exists (unless ``force``): the overlay is neither
    made nor stored. The one exception is a likely re-run: the tag names ``base``'s revision
    plus one overlay of its snapshot made by the same ``producer``, in the same view; the work
    goes on and the tag is a no-op if the new overlay is that one (same inputs, same digest),
    refused under the lock otherwise (``make_tag``, the guard against races too)."""
    check_tag_options(tagging.tag, tagging.view)
    tag = tagging.tag
    if tag is None or tagging.force:
        return
    reg = base.registry
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
        and rev.view == tagging.view_for(producer)
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


def store_overlay(
    base: Resolved, draft: OverlayDraft, tagging: Tagging, record: Recording
) -> OverlayResult:
    """Store ``draft`` as an overlay of ``base``'s snapshot, recording ``record``'s command and
    credit, then make the tag ``tagging`` asks for (checked beforehand by ``check_tagging``):
    ``base``'s revision plus the overlay, in ``tagging.view_for`` its producer."""
    reg = base.registry
    snapshot = base.revision.snapshot
    digest = store_draft(reg, snapshot, draft, command=record.command, credit=record.credit)
    tagged = None
    if tagging.tag is not None:
        tagged = make_tag(
            TagName(base.dataset, tagging.tag),
            base,
            overlays=[digest],
            view=tagging.view_for(draft.producer),
            force=tagging.force,
            command=record.command,
        )
    return OverlayResult(
        digest=digest,
        dataset=base.dataset,
        base=snapshot,
        revision=base.digest,
        kind=draft.kind,
        summary={"rows": draft.table.num_rows, **draft.summary},
        details=draft.details,
        tagged=tagged,
    )


def detect(
    base: Resolved,
    pred_probs: np.ndarray | str | os.PathLike[str],
    *,
    options: DetectorOptions,
    tagging: Tagging = Tagging(),
    top: int = 10,
    progress: ProgressHook = no_progress,
    record: Recording = Recording(),
    digest: FileDigest | None = None,
) -> OverlayResult:
    """A ``detected`` overlay of ``base`` (options: those of the detector), tagged as
    ``tagging`` asks, with its ``top`` lowest-scored rows; ``record``: its command and credit;
    ``digest``: the probabilities file's digest, begun by the caller
    (:func:`dsreg.objects.hashing.start_file_digest`)."""
    check_detect_options(options.filter_by, options.rank_by)
    check_tagging(base, tagging, producer="dsreg.detect")
    probs = Path(pred_probs) if isinstance(pred_probs, str | os.PathLike) else pred_probs
    draft = detect_draft(base, probs, options=options, progress=progress, digest=digest)
    stored = store_overlay(base, draft, tagging, record)
    return dataclasses.replace(stored, top=ranked_issues(base.registry, stored.digest, top))


def import_votes(
    base: Resolved,
    votes: str | os.PathLike[str],
    *,
    format: str = "label-errors",
    threshold: int = 3,
    tagging: Tagging = Tagging(),
    record: Recording = Recording(),
) -> OverlayResult:
    """A ``validated`` overlay of ``base``'s snapshot from a votes file, tagged as ``tagging``
    asks; ``record``: its command and credit."""
    check_choice(format, overlay_votes.VOTE_FORMATS, option="--format")
    check_tagging(base, tagging, producer="dsreg.import-votes")
    draft = votes_draft(base, Path(votes), format=format, threshold=threshold)
    return store_overlay(base, draft, tagging, record)


def import_labels(
    base: Resolved,
    path: str | os.PathLike[str],
    *,
    format: str,
    threshold: float = 0.5,
    tagging: Tagging = Tagging(),
    record: Recording = Recording(),
) -> OverlayResult:
    """An overlay of ``base``'s snapshot from a relabeling file (``real``, ``counts``) or a
    corrections CSV (``csv``), tagged as ``tagging`` asks; ``record``: its command and
    credit."""
    check_choice(format, LABEL_FORMATS, option="--format")
    check_tagging(base, tagging, producer="dsreg.import-labels")
    draft = labels_draft(base, Path(path), format=format, threshold=threshold)
    return store_overlay(base, draft, tagging, record)
