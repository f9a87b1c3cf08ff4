"""Reading and correcting: open, connect, sql, detect, import_votes and import_labels, and the
overlays' export, ls and show. The reports on a revision are in ``dsreg.api.reports``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, overload

from dsreg._util.fs import replacing
from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook
from dsreg.api import reading
from dsreg.api.common import (
    command_of,
    find_registry,
    hook,
    local_reader,
    options_of,
    overlay_recording,
)
from dsreg.api.options import (
    Arg,
    Opt,
    OverlayCitationOpt,
    OverlayCreditOpt,
    OverlayForceOpt,
    OverlayTagOpt,
    OverlayViewOpt,
    PathArg,
    ReadRemoteOpt,
    RegistryArg,
    RegistryOpt,
)
from dsreg.detector.options import FILTER_BY, RANK_BY, DetectorOptions
from dsreg.errors import InvalidInputError
from dsreg.formats.names import check_name
from dsreg.objects.hashing import start_file_digest

# Each of these imports numpy and pyarrow (DuckDB, matplotlib): imported when first used.
with lazy_imports():
    from dsreg.ops import overlay as overlay_ops
    from dsreg.overlays import inspect as overlay_inspect
    from dsreg.report import export as report_export
    from dsreg.views import dataset as views_dataset
    from dsreg.views import sql as views_sql

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from dsreg.ops.overlay import OverlayResult
    from dsreg.overlays.inspect import OverlayInfo
    from dsreg.registry.reader import OverlayRecord
    from dsreg.views.dataset import Dataset
    from dsreg.views.sql import Connection

# What the command line cannot give (an array, a DataFrame): named, not imported, at run time.
Probabilities: TypeAlias = "np.ndarray | PathArg"


# -- reading -----------------------------------------------------------------------------------


def open(
    spec: str,
    *,
    remote: str | None = None,
    registry: RegistryArg = None,
) -> Dataset:
    """Open a pinned revision: ``"imagenet-val@original"``, ``"imagenet-val@3f9a2c1b7d0e"`` or
    ``"blake3:…"``. The result's ``digest`` is the full revision digest, the thing to cite.

    With ``remote`` (a remote's name, or a URL on any machine: with no registry here, the
    objects go to the per-user cache registry), objects missing here are fetched from that
    remote and verified first (docs/remotes.md, "Reading a remote").
    """
    with reading.reader(registry, remote, payloads=True) as reader:
        return reader.repairing(lambda: views_dataset.Dataset(reader.revision(spec)))


def connect(
    registry: RegistryArg = None, *, allow_files: bool = False, remote: str | None = None
) -> Connection:
    """A DuckDB connection that resolves ``"dataset@rev"`` quoted identifiers in queries.

    Read-only: its SQL reads revisions and nothing else (no file read or written, no ATTACH,
    INSTALL, LOAD or SET; a refused statement raises ``QueryError``). ``allow_files=True``
    gives DuckDB its full access, for your own files. With ``remote`` (a name or a URL), the
    revisions a query names resolve with that remote, which gives their manifests and tables,
    never their payloads (no registry needed: the per-user cache holds them).

    >>> con = dsreg.connect()                                                # doctest: +SKIP
    >>> con.sql('SELECT label_name, count(*) FROM "cifar10-test@cleaned-v1" GROUP BY ALL')
    """
    if remote is None:
        return views_sql.Connection(local_reader(registry), allow_files=allow_files)
    # No lock is held for a connection's life: each revision named is fetched when a query
    # names it, and an object found missing or corrupt when read is fetched again.
    return views_sql.Connection(reading.remote_reader(registry, remote), allow_files=allow_files)


SqlFormatOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        "--format",
        "-f",
        help="table, csv, json or parquet (default: --output's suffix if one of those, "
        "else table).",
        show_default=False,
    ),
]
AllowFilesOpt: TypeAlias = Annotated[
    bool,
    Opt(
        "--allow-files",
        help="Give DuckDB its full access: read and write your own files, ATTACH, "
        "INSTALL/LOAD, SET. Without it SQL is read-only and reads revisions only.",
    ),
]


@overload
def sql(
    query: str,
    *,
    format: str | None = None,
    output: None = None,
    allow_files: bool = False,
    remote: str | None = None,
    registry: RegistryArg = None,
) -> pa.Table: ...
@overload
def sql(
    query: str,
    *,
    format: str | None = None,
    output: PathArg | IO[Any],
    allow_files: bool = False,
    remote: str | None = None,
    registry: RegistryArg = None,
) -> int: ...
def sql(
    query: Annotated[str, Arg('SQL; name a revision as a quoted identifier: "dataset@tag".')],
    *,
    format: SqlFormatOpt = None,
    output: Annotated[
        PathArg | IO[Any] | None, Opt("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    allow_files: AllowFilesOpt = False,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> pa.Table | int:
    """Run DuckDB SQL over revisions, each named as a quoted identifier:
    ``SELECT label_name, count(*) FROM "cifar10-test@cleaned-v1" GROUP BY ALL``.

    Without ``output``, the result as an Arrow table. With ``output`` (a path, or a text or
    binary stream), its rows are streamed there as ``format`` (``table``, ``csv``, ``json`` or
    ``parquet``; default: from the file's suffix, else ``table``) and their count returned.

    Read-only: the query reads revisions and nothing else (no file read or written, no ATTACH,
    INSTALL, LOAD or SET; a refused statement raises ``QueryError``). ``allow_files=True``
    gives DuckDB its full access, for your own files.

    With ``remote`` (a name or a URL), the revisions the query names resolve with that remote:
    only their manifests and Parquet tables are fetched (never payloads), verified, and DuckDB
    reads them from the registry, or the per-user cache where there is none.
    """
    if output is None and format is not None:
        raise InvalidInputError(f"format {format!r} writes to output=: give a path or stream")
    # With a remote, the registry's lock is held until the last row is written: a gc waits.
    with reading.reader(registry, remote) as reader:
        if output is None:
            with views_sql.Connection(reader, allow_files=allow_files) as con:
                return con.table(query)
        return report_export.write_query(
            reader, query, output, format=format, allow_files=allow_files
        )


# -- overlays ----------------------------------------------------------------------------------


def detect(
    spec: Annotated[str, Arg("The revision whose labels are checked.")],
    pred_probs: Annotated[
        Probabilities,
        Opt(
            "--pred-probs",
            cli_type=Path,
            help="Out-of-sample predicted probabilities, n x k, aligned with the revision's rows "
            "(.npy, memory-mapped; or .parquet).",
        ),
    ],
    *,
    filter_by: Annotated[
        str, Opt(help="cleanlab's filter_by: " + ", ".join(FILTER_BY) + ".")
    ] = "prune_by_noise_rate",
    rank_by: Annotated[
        str, Opt(help="Label-quality score: " + ", ".join(RANK_BY) + ".")
    ] = "self_confidence",
    rank_by_kwargs: dict[str, Any] | None = None,
    frac_noise: Annotated[float, Opt(help="Fraction of the estimated issues to flag.")] = 1.0,
    num_to_remove_per_class: Annotated[
        Sequence[int] | None,
        Opt(
            comma_list=int,
            help="Comma-separated counts, one per class (filter_by prune_by_class/both/…).",
        ),
    ] = None,
    min_examples_per_class: Annotated[
        int, Opt(help="Never flag a class below this many remaining examples.")
    ] = 1,
    estimation_method: str = "off_diagonal",
    chunk_rows: int | None = None,
    tag: OverlayTagOpt = None,
    view: OverlayViewOpt = None,
    force: OverlayForceOpt = False,
    top: Annotated[int, Opt(help="How many of the ranked issues to print.")] = 10,
    citation: OverlayCitationOpt = None,
    credit: OverlayCreditOpt = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> OverlayResult:
    """Find label issues of ``spec`` with confident learning; store a ``detected`` overlay.

    ``pred_probs``: out-of-sample probabilities aligned with the revision's rows, an ``(n, k)``
    array or a ``.npy`` (memory-mapped) or Parquet file (read in chunks). The options are
    cleanlab's (see :func:`dsreg.detector.detector.detect`). ``tag`` also tags
    ``<dataset>@<tag>``: the revision plus the overlay, in ``view`` (default ``cleaned``).
    ``progress(task, rows_done, n)`` hears of each pass over the probabilities.

    Returns
    -------
    OverlayResult
        ``digest`` names the overlay; ``summary`` has the counts; ``details`` is the full
        :class:`~dsreg.detector.detector.Detection`; ``top`` the ``top`` lowest-scored rows;
        ``tagged`` the tag made, if any.
    """
    options = options_of(DetectorOptions, locals())
    is_path = isinstance(pred_probs, str | os.PathLike)
    where = pred_probs if is_path else "<array>"
    # The file's digest (the overlay's provenance) begins at once, on a core of its own, while
    # this thread imports the detector and reads the revision; the detector then has every core.
    digest = start_file_digest(pred_probs) if isinstance(pred_probs, str | os.PathLike) else None
    try:
        return overlay_ops.detect(
            local_reader(registry).revision(spec),
            pred_probs,
            options=options,
            tagging=overlay_ops.Tagging(tag=tag, view=view, force=force),
            top=top,
            progress=hook(progress),
            record=overlay_recording(command_of(command, "detect", spec, where), citation, credit),
            digest=digest,
        )
    finally:
        if digest is not None:
            digest.stop()


def import_votes(
    spec: Annotated[str, Arg("The revision whose snapshot the votes are about.")],
    votes: Annotated[PathArg, Arg("The votes file.")],
    *,
    format: Annotated[
        str, Opt("--format", help="label-errors (the release's JSON) or csv.")
    ] = "label-errors",
    threshold: Annotated[int, Opt(help="Agreement threshold t (of n raters).")] = 3,
    tag: OverlayTagOpt = None,
    view: OverlayViewOpt = None,
    force: OverlayForceOpt = False,
    citation: OverlayCitationOpt = None,
    credit: OverlayCreditOpt = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> OverlayResult:
    """Store human validation votes about ``spec``'s snapshot as a ``validated`` overlay, with
    the categories of Northcutt et al. (2021) at agreement ``threshold``.

    ``format``: ``label-errors`` (the release's JSON) or ``csv``. ``tag`` also tags
    ``<dataset>@<tag>``: the revision plus the overlay, in ``view`` (default ``cleaned``).

    ``citation`` (a BibTeX file) and ``credit`` (plain text) record the reference of the votes'
    source in the overlay's producer (``producer.credit``), repeated by every ``dsreg.cite``
    of a revision applying it; an overlay made without them has no ``credit`` key. A
    malformed file is refused before anything is read or written.
    """
    record = _recording(locals(), "import_votes", votes)
    return overlay_ops.import_votes(
        local_reader(registry).revision(spec),
        votes,
        format=format,
        threshold=threshold,
        tagging=options_of(overlay_ops.Tagging, locals()),
        record=record,
    )


def import_labels(
    spec: Annotated[str, Arg("The revision whose snapshot the file is about.")],
    path: Annotated[PathArg, Arg("The relabeling or corrections file.", metavar="file")],
    *,
    format: Annotated[
        str,
        Opt(
            "--format",
            help="real (ImageNet-ReaL real.json), counts (n x k rater counts, .npy or "
            ".parquet, as CIFAR-10H), mmlu-redux (MMLU-Redux's error types, of a "
            "multiple-choice set), status (keep/revise/reject per row, as the Platinum "
            "benchmarks publish, of a question set) or csv (your own corrections: a manual "
            "overlay).",
        ),
    ],
    threshold: Annotated[
        float, Opt(help="counts: the share of raters a label needs to decide.")
    ] = 0.5,
    tag: OverlayTagOpt = None,
    view: OverlayViewOpt = None,
    force: OverlayForceOpt = False,
    citation: OverlayCitationOpt = None,
    credit: OverlayCreditOpt = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> OverlayResult:
    """Store a relabeling of ``spec``'s snapshot as an overlay with label sets or label
    distributions (docs/recipes-relabelings.md).

    ``format``: ``real`` (ImageNet-ReaL's ``real.json``: a ``validated`` overlay, every row's
    list in ``labels``), ``counts`` (an n x k ``.npy`` or Parquet of rater counts, as
    CIFAR-10H's: ``validated``, the majority at share ``threshold`` decides, every row's
    distribution in ``label_counts``), ``mmlu-redux`` or ``status`` (a published
    re-annotation of a question set, docs/questions.md: ``validated``, each row's category in
    the corrections' ``category`` column and counted in the summary) or ``csv`` (a user's
    corrections: a ``manual`` overlay). ``tag`` also tags ``<dataset>@<tag>`` in ``view``
    (default ``cleaned``). The result's ``summary`` counts each verdict under its name and
    says how rows were matched (``match``: ``file_name``, ``position``, ``row``,
    ``example_id`` or ``content``). ``citation`` and ``credit``: the relabeling's published
    reference, kept as ``import_votes`` keeps it.
    """
    record = _recording(locals(), "import_labels", path)
    return overlay_ops.import_labels(
        local_reader(registry).revision(spec),
        path,
        format=format,
        threshold=threshold,
        tagging=options_of(overlay_ops.Tagging, locals()),
        record=record,
    )


def _recording(call: Mapping[str, Any], name: str, file: PathArg) -> overlay_ops.Recording:
    """What an overlay made from ``file`` by the call ``name`` (whose arguments are ``call``,
    its ``locals()``) records: its command, and the credit of its ``citation`` and ``credit``
    (read, and a malformed one refused, before the registry is looked for)."""
    command = command_of(call["command"], name, call["spec"], os.fspath(file))
    return overlay_recording(command, call["citation"], call["credit"])


OverlayDigestArg: TypeAlias = Annotated[str, Arg("Overlay digest or prefix (>= 6 hex).")]


def overlay_export(
    digest: OverlayDigestArg,
    output: Annotated[
        PathArg | None, Opt("-o", "--output", help="Write to FILE (default: stdout).")
    ] = None,
    *,
    registry: RegistryOpt = None,
) -> str:
    """Overlay ``digest``'s corrections as CSV (class indices; lists joined by ``;``), the
    format ``import_labels(..., format="csv")`` reads back to the same overlay. Written to
    ``output`` (atomically) when given; returned either way."""
    data = overlay_inspect.export_overlay(find_registry(registry), digest)
    if output is not None:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with replacing(output) as f:
            f.write(data)
    return data.decode("utf-8")


def overlay_ls(
    dataset: Annotated[str, Arg("Dataset name.")], *, registry: RegistryOpt = None
) -> list[OverlayRecord]:
    """A dataset's overlays, oldest first: those made for it and those its tags use."""
    check_name(dataset, what="dataset name")
    return overlay_inspect.list_overlays(local_reader(registry), dataset)


def overlay_show(
    digest: OverlayDigestArg,
    *,
    rows: Annotated[int, Opt(help="How many corrections to print.")] = 20,
    sort: Annotated[
        Literal["row", "score"],
        Opt(
            help="row: in row order; score: worst label quality first (rows without a score last)."
        ),
    ] = "row",
    verdict: Annotated[
        str | None,
        Opt(
            help="Only the corrections with this verdict (suspected, non_error, correctable, "
            "multi_label, neither, non_agreement)."
        ),
    ] = None,
    category: Annotated[
        str | None,
        Opt(
            help="Only the corrections a published re-annotation gave this category (an "
            "MMLU-Redux error type such as wrong_groundtruth, or keep, revise, reject)."
        ),
    ] = None,
    registry: RegistryOpt = None,
) -> OverlayInfo:
    """An overlay (digest or prefix of at least 6 hex): manifest and first ``rows`` corrections,
    in row order or (``sort="score"``) worst label quality first, rows without a score last;
    ``verdict`` keeps only the corrections with that verdict, ``category`` those a published
    re-annotation (``import_labels`` of ``mmlu-redux`` or ``status``) gave that category. An
    unknown sort or verdict, or a category asked of an overlay without categories, raises
    ``InvalidInputError``."""
    return overlay_inspect.describe_overlay(
        find_registry(registry), digest, rows=rows, sort=sort, verdict=verdict, category=category
    )
