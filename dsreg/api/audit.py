"""The audit's library function: ``dsreg.audit_duplicates`` (``dsreg audit duplicates``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import RegistryArg, command_of, find_registry, specs_of

if TYPE_CHECKING:
    from dsreg.audit.duplicates import AuditResult

__all__ = ["audit_duplicates"]


def audit_duplicates(
    spec: str,
    *,
    against: str | Sequence[str] | None = None,
    within: bool = False,
    image_threshold: int | None = None,
    text_threshold: float | None = None,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
) -> AuditResult:
    """Find the rows of ``spec`` that repeat one another (``within``) or rows of the datasets
    ``against`` (a training set: contamination), by exact payload, perceptual hash (images) and
    MinHash and 13-grams (text); store them as an ``audit`` overlay of verdicts ``duplicate``
    and ``contaminated``. ``tag`` also tags ``<dataset>@<tag>``: the revision plus the overlay,
    in ``view`` (default ``decontaminated``, which leaves those rows out).

    ``image_threshold``: Hamming bits (default ``DEFAULT_IMAGE_THRESHOLD``); ``text_threshold``:
    shingle Jaccard similarity (default ``DEFAULT_TEXT_THRESHOLD``); docs/audit.md measures
    both. Labels-only rows are skipped and counted; unreadable payloads are counted and listed.
    """
    from dsreg.audit.duplicates import (
        DEFAULT_IMAGE_THRESHOLD,
        DEFAULT_TEXT_THRESHOLD,
        check_thresholds,
    )
    from dsreg.audit.duplicates import audit_duplicates as run
    from dsreg.ops.overlay import check_tag_target
    from dsreg.ops.tag import make_tag

    image = DEFAULT_IMAGE_THRESHOLD if image_threshold is None else image_threshold
    text = DEFAULT_TEXT_THRESHOLD if text_threshold is None else text_threshold
    check_thresholds(image, text)
    reg = find_registry(registry)
    others = specs_of(against)
    command = command or command_of("audit_duplicates", spec)
    # The tag's view defaults to decontaminated (the check compares a re-run's view with it).
    tag_view = view or "decontaminated" if tag is not None else view
    check_tag_target(reg, spec, tag, tag_view, force=force, producer="dsreg.audit-duplicates")
    result = run(
        reg,
        spec,
        against=others,
        within=within,
        image_threshold=image,
        text_threshold=text,
        progress=progress or no_progress,
        command=command,
    )
    if tag is None or result.digest is None:
        return result
    tagged = make_tag(
        reg,
        f"{result.dataset}@{tag}",
        spec,
        overlays=[result.digest],
        view=tag_view,
        force=force,
        command=command,
    )
    return replace(result, tagged=tagged)
