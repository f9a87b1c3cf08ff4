"""The audit's library function: ``dsreg.audit_duplicates`` (``dsreg audit duplicates``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Literal

from dsreg._util.extras import require
from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook
from dsreg.api.common import command_of, hook, local_reader, specs_of
from dsreg.api.options import Arg, Opt, OverlayForceOpt, OverlayTagOpt, RegistryOpt
from dsreg.audit import DEFAULT_IMAGE_THRESHOLD, DEFAULT_TEXT_THRESHOLD
from dsreg.formats.manifests import TAG_VIEWS

# The audit imports numpy, pyarrow and Pillow: imported when first used.
with lazy_imports():
    from dsreg.audit import duplicates, engines
    from dsreg.ops import overlay as overlay_ops

if TYPE_CHECKING:
    from dsreg.audit.duplicates import AuditResult

__all__ = ["audit_duplicates"]

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
    view: Annotated[
        str | None,
        Opt(help=f"With --tag: its view (default {TAG_VIEWS['dsreg.audit-duplicates']})."),
    ] = None,
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
    require("audit", "dsreg audit duplicates", python="dsreg.audit_duplicates")
    duplicates.check_thresholds(image_threshold, text_threshold)
    engines.check_engine(engine, ray_address)
    duplicates.check_sides(specs_of(against), within=within)
    reader = local_reader(registry)
    base = reader.revision(spec)
    others = [duplicates.corpus_of(a) or reader.revision(a) for a in specs_of(against)]
    tagging = overlay_ops.Tagging(tag=tag, view=view, force=force)
    overlay_ops.check_tagging(base, tagging, producer=duplicates.PRODUCER)
    record = overlay_ops.Recording(command=command_of(command, "audit_duplicates", spec))
    # Held from the first fingerprints table stored until the overlay naming them is: a gc
    # waits, and never removes a table the overlay is about to hold.
    with reader.registry.lock():
        found = duplicates.audit_duplicates(
            base,
            against=others,
            within=within,
            image_threshold=image_threshold,
            text_threshold=text_threshold,
            engine=engines.Engine(engine, ray_address, hook(progress)),
        )
        if found.draft is None:
            return found
        stored = overlay_ops.store_overlay(base, found.draft, tagging, record)
    return replace(found, digest=stored.digest, tagged=stored.tagged, draft=None)
