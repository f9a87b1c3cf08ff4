"""Reading and correcting: open, connect, sql, detect, import_votes, overlay_ls/show, and the
reports (evaluate, diff, cite)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import IO, TYPE_CHECKING, Any, Literal, overload

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import PathArg, RegistryArg, command_of, find_registry
from dsreg.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from dsreg.formats.manifests import View
    from dsreg.ops.overlay import OverlayResult
    from dsreg.overlays.inspect import OverlayInfo
    from dsreg.overlays.write import OverlayRecord
    from dsreg.registry.folder import Registry, Resolved
    from dsreg.remote.read import RemoteRead
    from dsreg.report.cite import Citation
    from dsreg.report.diff import DiffResult
    from dsreg.report.evaluate import EvalReport
    from dsreg.report.labelexport import ExportResult
    from dsreg.report.predictions import Predictions
    from dsreg.views.dataset import Dataset
    from dsreg.views.sql import Connection


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
    from dsreg.views.dataset import Dataset

    if remote is not None:
        from dsreg.api.reading import read_remote_revision, remote_read

        with remote_read(registry, remote) as reader:
            resolved = reader.repairing(
                lambda: read_remote_revision(reader, spec, remote, payloads=True)
            )
            return Dataset(reader.reg, resolved)
    reg = find_registry(registry)
    return Dataset(reg, reg.resolve(spec))


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
    from dsreg.views.sql import Connection

    if remote is not None:
        from dsreg.api.reading import remote_reader

        # No lock is held for a connection's life: each revision named is fetched when a
        # query names it, and an object found missing or corrupt when read is fetched again.
        reader = remote_reader(registry, remote)
        return Connection(
            reader.reg,
            allow_files=allow_files,
            resolve=partial(reader.revision, payloads=False),
            repairing=reader.repairing,
        )
    return Connection(find_registry(registry), allow_files=allow_files)


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
    query: str,
    *,
    format: str | None = None,
    output: PathArg | IO[Any] | None = None,
    allow_files: bool = False,
    remote: str | None = None,
    registry: RegistryArg = None,
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
    from dsreg.report.export import check_format

    if format is not None:
        check_format(format)
    if output is None and format is not None:
        raise InvalidInputError(f"format {format!r} writes to output=: give a path or stream")
    if remote is None:
        return _sql(find_registry(registry), query, output, format, allow_files)
    from dsreg.api.reading import remote_read

    # The registry's lock is held until the last row is written: a gc waits for the query.
    with remote_read(registry, remote) as reader:
        return _sql(reader.reg, query, output, format, allow_files, reader=reader)


def _sql(
    reg: Registry,
    query: str,
    output: PathArg | IO[Any] | None,
    format: str | None,
    allow_files: bool,
    *,
    reader: RemoteRead | None = None,
) -> pa.Table | int:
    """``sql`` in ``reg``; with ``reader``, the revisions named resolve on its remote and a
    table found missing or corrupt is fetched again from there."""
    from dsreg.views.sql import Connection

    resolve: Callable[[str], Resolved] | None = None
    repairing = None
    if reader is not None:
        resolve, repairing = partial(reader.revision, payloads=False), reader.repairing
    if output is None:
        with Connection(reg, allow_files=allow_files, resolve=resolve, repairing=repairing) as con:
            return con.table(query)
    from dsreg.report.export import write_query

    return write_query(
        reg,
        query,
        output,
        format=format,
        allow_files=allow_files,
        resolve=resolve,
        repairing=repairing,
    )


# -- overlays ----------------------------------------------------------------------------------


def detect(
    spec: str,
    pred_probs: np.ndarray | PathArg,
    *,
    filter_by: str = "prune_by_noise_rate",
    rank_by: str = "self_confidence",
    rank_by_kwargs: dict[str, Any] | None = None,
    frac_noise: float = 1.0,
    num_to_remove_per_class: Sequence[int] | None = None,
    min_examples_per_class: int = 1,
    estimation_method: str = "off_diagonal",
    chunk_rows: int | None = None,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    top: int = 10,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
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
    from dsreg.ops.overlay import check_detect_options, check_tag_options
    from dsreg.ops.overlay import detect as do_detect

    check_detect_options(filter_by, rank_by)
    check_tag_options(tag, view)
    options: dict[str, Any] = {
        "filter_by": filter_by,
        "rank_by": rank_by,
        "rank_by_kwargs": rank_by_kwargs,
        "frac_noise": frac_noise,
        "num_to_remove_per_class": (
            list(num_to_remove_per_class) if num_to_remove_per_class is not None else None
        ),
        "min_examples_per_class": min_examples_per_class,
        "estimation_method": estimation_method,
        "chunk_rows": chunk_rows,
    }
    where = pred_probs if isinstance(pred_probs, str | os.PathLike) else "<array>"
    return do_detect(
        find_registry(registry),
        spec,
        pred_probs,
        options=options,
        tag=tag,
        view=view,
        force=force,
        top=top,
        progress=progress or no_progress,
        command=command if command is not None else command_of("detect", spec, where),
    )


def import_votes(
    spec: str,
    votes: PathArg,
    *,
    format: str = "label-errors",
    threshold: int = 3,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> OverlayResult:
    """Store human validation votes about ``spec``'s snapshot as a ``validated`` overlay, with
    the categories of Northcutt et al. (2021) at agreement ``threshold``.

    ``format``: ``label-errors`` (the release's JSON) or ``csv``. ``tag`` also tags
    ``<dataset>@<tag>``: the revision plus the overlay, in ``view`` (default ``cleaned``).
    """
    from dsreg.ops.overlay import check_tag_options, check_vote_format
    from dsreg.ops.overlay import import_votes as do_import

    check_vote_format(format)
    check_tag_options(tag, view)
    return do_import(
        find_registry(registry),
        spec,
        votes,
        format=format,
        threshold=threshold,
        tag=tag,
        view=view,
        force=force,
        command=(
            command if command is not None else command_of("import_votes", spec, os.fspath(votes))
        ),
    )


def import_labels(
    spec: str,
    path: PathArg,
    *,
    format: str,
    threshold: float = 0.5,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> OverlayResult:
    """Store a relabeling of ``spec``'s snapshot as an overlay with label sets or label
    distributions (docs/recipes-relabelings.md).

    ``format``: ``real`` (ImageNet-ReaL's ``real.json``: a ``validated`` overlay, every row's
    list in ``labels``), ``counts`` (an n x k ``.npy`` or Parquet of rater counts, as
    CIFAR-10H's: ``validated``, the majority at share ``threshold`` decides, every row's
    distribution in ``label_counts``) or ``csv`` (a user's corrections: a ``manual``
    overlay). ``tag`` also tags ``<dataset>@<tag>`` in ``view`` (default ``cleaned``). The
    result's ``summary`` counts each verdict under its name and says how rows were matched
    (``match``: ``file_name``, ``position``, ``row`` or ``example_id``).
    """
    from dsreg.ops.overlay import import_labels as do_import

    return do_import(
        find_registry(registry),
        spec,
        path,
        format=format,
        threshold=threshold,
        tag=tag,
        view=view,
        force=force,
        command=(
            command if command is not None else command_of("import_labels", spec, os.fspath(path))
        ),
    )


def overlay_export(
    digest: str, output: PathArg | None = None, *, registry: RegistryArg = None
) -> str:
    """Overlay ``digest``'s corrections as CSV (class indices; lists joined by ``;``), the
    format ``import_labels(..., format="csv")`` reads back to the same overlay. Written to
    ``output`` (atomically) when given; returned either way."""
    from dsreg._util.fs import replacing
    from dsreg.overlays.inspect import export_overlay

    data = export_overlay(find_registry(registry), digest)
    if output is not None:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with replacing(output) as f:
            f.write(data)
    return data.decode("utf-8")


def overlay_ls(dataset: str, *, registry: RegistryArg = None) -> list[OverlayRecord]:
    """A dataset's overlays, oldest first: those made for it and those its tags use."""
    from dsreg.formats.names import check_name
    from dsreg.overlays.write import list_overlays

    reg = find_registry(registry)
    check_name(dataset, what="dataset name")
    return list_overlays(reg, dataset)


def overlay_show(
    digest: str,
    *,
    rows: int = 20,
    sort: Literal["row", "score"] = "row",
    verdict: str | None = None,
    registry: RegistryArg = None,
) -> OverlayInfo:
    """An overlay (digest or prefix of at least 6 hex): manifest and first ``rows`` corrections,
    in row order or (``sort="score"``) worst label quality first, rows without a score last;
    ``verdict`` keeps only the corrections with that verdict. An unknown sort or verdict
    raises ``InvalidInputError``."""
    from dsreg.overlays.inspect import describe_overlay

    return describe_overlay(find_registry(registry), digest, rows=rows, sort=sort, verdict=verdict)


# -- reports -----------------------------------------------------------------------------------


def evaluate(
    spec: str,
    predictions: Mapping[str, Predictions] | Sequence[PathArg] | Predictions,
    *,
    views: Sequence[View] | None = None,
    top_k: Sequence[int] = (1,),
    plot: PathArg | None = None,
    record: bool = False,
    model: str | None = None,
    meta: Mapping[str, str] | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> EvalReport:
    """Score model predictions on the original, cleaned, corrected and honeypot labels of
    ``spec``'s snapshot and overlays; rank the models on each view.

    ``predictions``: ``{model: predictions}`` (a path, a numpy array, an Arrow table or a
    pandas DataFrame), or a list of paths (the model is the file stem). ``plot`` also writes
    a slope chart of the ranks (``.png`` or ``.svg``). Raises ``PredictionsError`` when
    predictions miss rows of a view, name unknown example ids or classes, or have the wrong
    shape.

    ``record=True`` also keeps the predictions in the registry (``.npy`` files or arrays
    aligned with the snapshot's rows) under ``model`` (one input) or each input's name, with
    ``meta``, for ``dsreg.leaderboard`` (``dsreg.record``: ``force`` replaces a model
    recorded with other predictions, logged as a move).

    >>> report = dsreg.evaluate("cifar10-test@corrected-v1", {"resnet": probs})  # doctest: +SKIP
    >>> report.to_arrow()                     # one row per (model, view)
    """
    from dsreg.formats.manifests import VIEWS
    from dsreg.report.evaluate import evaluate as do_evaluate

    report = do_evaluate(
        spec,
        predictions,
        views=VIEWS if views is None else views,
        top_k=top_k,
        registry=find_registry(registry),
    )
    if plot is not None:
        from dsreg.report.plot import plot_ranks

        plot_ranks(report, plot)
    if record:
        from dsreg.api.results import record as do_record

        do_record(
            spec,
            predictions,
            model=model,
            meta=meta,
            force=force,
            command=command,
            registry=registry,
        )
    return report


def diff(a: str, b: str, *, top: int = 10, registry: RegistryArg = None) -> DiffResult:
    """Rows only in ``a``, only in ``b``, and relabelled (with from -> to counts). Revisions of
    one snapshot are matched by row, of different snapshots by ``example_id``. ``samples``
    lists the first ``top`` example ids of each kind of change, in snapshot order."""
    from dsreg.report.diff import diff as do_diff

    return do_diff(find_registry(registry), a, b, top=top)


def cite(
    spec: str,
    *,
    format: str = "bibtex",
    authors: Sequence[str] | None = None,
    remote: str | None = None,
    registry: RegistryArg = None,
) -> Citation:
    """A citation of ``spec``'s revision carrying the dataset, tag, year, full revision,
    snapshot and overlay digests, the URL of ``remote`` (a name, URL or path; default: the
    default remote, if any; not contacted) with the ``dsreg checkout <digest> DIR --remote URL``
    that fetches it on a fresh machine, the dataset creators' credit recorded at ``add``, and
    the dsreg version. ``str()`` of it is the text in ``format`` (``bibtex``, ``cff`` or
    ``text``)."""
    from dsreg.report.cite import check_format
    from dsreg.report.cite import cite as do_cite

    check_format(format)
    return do_cite(
        find_registry(registry), spec, authors=authors or (), format=format, remote=remote
    )


def export(
    spec: str,
    output: PathArg,
    *,
    format: str | None = None,
    align: str = "snapshot",
    registry: RegistryArg = None,
) -> ExportResult:
    """Write ``spec``'s labels to ``output`` as ``npy`` (an int64 vector), ``csv`` or
    ``parquet`` (``row, example_id, label, label_name``); ``format`` defaults to the output's
    suffix. ``align="snapshot"``: one entry per snapshot row, label -1 (and no name) where the
    view removes the row; ``align="view"``: the view's rows only. Streamed in batches; the file
    appears whole or not at all."""
    from dsreg.report.labelexport import export_labels

    return export_labels(find_registry(registry), spec, output, format=format, align=align)
