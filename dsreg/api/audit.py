"""The audit's library function: ``dsreg.audit_duplicates`` (``dsreg audit duplicates``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Literal

from dsreg._util.extras import require
from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook
from dsreg.api.common import command_of, find_registry, hook, specs_of
from dsreg.api.options import Arg, Opt, OverlayForceOpt, OverlayTagOpt, RegistryOpt
from dsreg.audit import DEFAULT_IMAGE_THRESHOLD, DEFAULT_TEXT_THRESHOLD

# The audit imports numpy, pyarrow and Pillow: imported when first used.
with lazy_imports():
    from dsreg.audit import duplicates, engines
    from dsreg.ops import overlay as overlay_ops
    from dsreg.ops import tag as tag_ops

if TYPE_CHECKING:
    from dsreg.audit.duplicates import AuditResult

__all__ = ["audit_duplicates"]

# The view an audit's tag serves unless told otherwise: the rows the audit did not name.
AUDIT_VIEW = "decontaminated"

EngineOpt = Annotated[
    Literal["local", "ray"],
    Opt(
        help="Where fingerprints are computed: 'local' (worker processes here) or 'ray' "
        "(Ray Data tasks on a Ray cluster; needs pip install 'dsreg[ray]').",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    Opt(
        "--ray-address",
        help="With --engine ray: the cluster, e.g. ray://HOST:10001 (default: Ray on this "
        "machine, or the cluster RAY_ADDRESS names).",
        show_default=False,
    ),
]


def audit_duplicates(
    spec: Annotated[str, Arg("The test set audited (a revision).")],
    *,
    against: Annotated[
        str | Sequence[str] | None,
        Opt(
            "--against",
            help="A dataset whose rows the test set must not contain: a revision (typically "
            "the training set), a folder of files, or a Parquet file of a corpus (columns id "
            "and image or text); repeat for several.",
            show_default=False,
        ),
    ] = None,
    within: Annotated[
        bool, Opt("--within", help="Also find rows that repeat rows of the test set.")
    ] = False,
    image_threshold: Annotated[
        int, Opt(help="Near-duplicate images: pHash Hamming bits, 0 to 32.")
    ] = DEFAULT_IMAGE_THRESHOLD,
    text_threshold: Annotated[
        float, Opt(help="Near-duplicate texts: shingle Jaccard similarity, above 0 to 1.")
    ] = DEFAULT_TEXT_THRESHOLD,
    tag: OverlayTagOpt = None,
    view: Annotated[str | None, Opt(help=f"With --tag: its view (default {AUDIT_VIEW}).")] = None,
    force: OverlayForceOpt = False,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> AuditResult:
    """Find the rows of ``spec`` that repeat one another (``within``) or rows of the datasets
    ``against`` (a training set: contamination), by exact payload, perceptual hash (images) and
    MinHash and 13-grams (text); store them as an ``audit`` overlay of verdicts ``duplicate``
    and ``contaminated``. ``tag`` also tags ``<dataset>@<tag>``: the revision plus the overlay,
    in ``view`` (default ``decontaminated``, which leaves those rows out).

    ``against``: revisions (specs), or folders of files or Parquet files of a corpus (an
    ``id`` column and an ``image`` or ``text`` column) that are not registered.
    ``engine``: where fingerprints are computed, ``"local"`` (worker processes) or ``"ray"``
    (Ray Data on the cluster at ``ray_address``; default: Ray on this machine); the findings
    and the overlay are the same on both.
    ``image_threshold``: Hamming bits; ``text_threshold``: shingle Jaccard similarity
    (docs/audit.md measures both). Labels-only rows are skipped and counted; unreadable
    payloads are counted and listed, never passed as clean.
    """
    require("audit", "dsreg audit duplicates")
    duplicates.check_thresholds(image_threshold, text_threshold)
    engines.check_engine(engine, ray_address)
    reg = find_registry(registry)
    line = command_of(command, "audit_duplicates", spec)
    tag_view = (view or AUDIT_VIEW) if tag is not None else view
    overlay_ops.check_tag_target(
        reg, spec, tag, tag_view, force=force, producer=duplicates.PRODUCER
    )
    result = duplicates.audit_duplicates(
        reg,
        spec,
        against=specs_of(against),
        within=within,
        image_threshold=image_threshold,
        text_threshold=text_threshold,
        engine=engines.Engine(engine, ray_address, hook(progress)),
        command=line,
    )
    if tag is None or result.digest is None:
        return result
    tagged = tag_ops.make_tag(
        reg,
        f"{result.dataset}@{tag}",
        spec,
        overlays=[result.digest],
        view=tag_view,
        force=force,
        command=line,
    )
    return replace(result, tagged=tagged)
