"""The library's porcelain, re-exported by ``dsreg``: one function per ``dsreg`` command.

Each mirrors its command: the command's arguments are positional, its options keywords of the
same names (``--overlay`` is ``overlays=``, a list; ``-r/--remote`` is ``remote=``), and
``registry=`` takes a path, a :class:`~dsreg.repo.registry.Registry` or ``None``. ``None`` means
``$DSREG_REGISTRY``, else ``.dsreg`` here or in a parent folder, else ``$DSREG_HOME``: the
command line finds its registry the same way, in the same place (``Registry.find``).

Functions that write the ref log take ``command=``, the line recorded there (default: the
call, e.g. ``dsreg.tag('pets@v1', 'pets@original')``); long ones take ``progress=``, a hook
``progress(task, done, total)``. Nothing here prints or exits.

Heavy modules (numpy, pyarrow, DuckDB, DVC) are imported inside the functions that need them:
``dsreg add`` of an unchanged tree answers without any of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias, cast, overload

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import InvalidInputError
from dsreg.repo.registry import Registry

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from dsreg.ingest.dvc import ImportResult
    from dsreg.ingest.result import AddResult
    from dsreg.model.manifests import View
    from dsreg.ops.checkout import CheckoutResult, LinkType
    from dsreg.ops.maintenance import GcResult, VerifyResult
    from dsreg.ops.overlay import OverlayResult
    from dsreg.ops.tag import TagResult
    from dsreg.overlays.inspect import OverlayInfo
    from dsreg.overlays.write import OverlayRecord
    from dsreg.remote.config import RemoteConfig
    from dsreg.remote.transfer import CloneResult, PullResult, PushResult
    from dsreg.repo.refs import RefLog
    from dsreg.report.cite import Citation
    from dsreg.report.diff import DiffResult
    from dsreg.report.evaluate import EvalReport
    from dsreg.report.predictions import Predictions
    from dsreg.report.show import ObjectInfo, RevisionInfo, TagRef
    from dsreg.views.dataset import Dataset
    from dsreg.views.sql import Connection

__all__ = [
    "add",
    "checkout",
    "cite",
    "clone",
    "connect",
    "detect",
    "diff",
    "evaluate",
    "find_registry",
    "gc",
    "import_dvc",
    "import_votes",
    "init",
    "log",
    "ls",
    "open",
    "overlay_ls",
    "overlay_show",
    "pull",
    "push",
    "remote_add",
    "remote_ls",
    "remote_remove",
    "show",
    "sql",
    "tag",
    "verify",
]

PathArg: TypeAlias = "str | os.PathLike[str]"
RegistryArg: TypeAlias = "Registry | str | os.PathLike[str] | None"
LINKS = ("hardlink", "symlink", "copy", "reflink")


# -- the registry, found in one place ----------------------------------------------------------


def find_registry(registry: RegistryArg = None) -> Registry:
    """The registry ``registry`` names (a path or a ``Registry``); for ``None``,
    ``$DSREG_REGISTRY``, else ``.dsreg`` here or above, else ``$DSREG_HOME``.

    Raises ``RegistryNotFoundError`` (a ``FileNotFoundError``) when there is none.
    """
    return registry if isinstance(registry, Registry) else Registry.find(registry)


def _command(name: str, *args: object) -> str:
    """What the ref log records of a library call."""
    return f"dsreg.{name}({', '.join(repr(a) for a in args)})"


def _specs(specs: str | Sequence[str] | None) -> tuple[str, ...]:
    if specs is None:
        return ()
    return (specs,) if isinstance(specs, str) else tuple(specs)


# -- registry commands -------------------------------------------------------------------------


def init(*, registry: PathArg | Registry | None = None) -> Registry:
    """Create a registry (idempotent) and return it.

    At ``registry``; else ``$DSREG_REGISTRY``; else ``$DSREG_HOME``; else ``./.dsreg``.
    """
    return Registry.init(registry.root if isinstance(registry, Registry) else registry)


def add(
    dataset: str,
    path: PathArg | None = None,
    *,
    labels: PathArg | None = None,
    table: PathArg | None = None,
    id_column: str = "example_id",
    label_column: str = "label",
    files: PathArg | None = None,
    classes: PathArg | Sequence[str] | None = None,
    tag: str | None = None,
    force: bool = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
) -> AddResult:
    """Add a test set as an immutable snapshot of ``dataset`` (content-addressed, deduplicated).

    Give exactly one source: ``path``, an ImageFolder tree (one folder per class); ``labels``,
    a label-only set (``.npy``, ``.csv`` or ``.parquet``); or ``table``, a table of examples
    (``.parquet`` or ``.csv``) with ``id_column`` and ``label_column``, its payloads found at
    ``files/<example id>`` when ``files`` is given. ``classes``: the class names, a list or a
    file with one per line (line i is class i; not for a tree, whose folders name them).
    ``tag`` points ``dataset@tag`` at the new revision (moving it needs ``force``).

    Returns
    -------
    AddResult
        ``revision`` (the full digest to pin), ``snapshot``, ``rows``, ``classes``, ``files``,
        ``new_objects``, …
    """
    from dsreg.ingest.add import add as do_add
    from dsreg.ingest.add import check_sources

    check_sources(path, labels=labels, table=table, files=files, classes=classes)
    source = next(x for x in (path, labels, table) if x is not None)
    return do_add(
        find_registry(registry),
        dataset,
        path,
        labels=labels,
        table=table,
        id_column=id_column,
        label_column=label_column,
        files=files,
        classes=classes,
        tag=tag,
        force=force,
        progress=progress or no_progress,
        command=command if command is not None else _command("add", dataset, os.fspath(source)),
    )


def ls(*, registry: RegistryArg = None) -> list[TagRef]:
    """Every tag of every dataset: ``dataset``, ``tag``, ``revision`` (full digest)."""
    from dsreg.report.show import list_tags

    return list_tags(find_registry(registry))


def show(spec: str, *, registry: RegistryArg = None) -> RevisionInfo | ObjectInfo:
    """Describe a revision (``dataset@tag``, ``dataset@<prefix>``, a revision or snapshot
    digest): its manifest, rows, classes, overlays and full digest; or any other stored object
    (an overlay, a payload, a table) by its digest or prefix."""
    from dsreg.report.show import describe

    return describe(find_registry(registry), spec)


def log(dataset: str, *, registry: RegistryArg = None) -> RefLog:
    """Who moved which tag of ``dataset`` when (the append-only ref log), oldest first: a list
    of entries whose ``damaged`` names the lines skipped (torn, not UTF-8, wrong types)."""
    from dsreg.repo.refs import RefLog
    from dsreg.report.show import dataset_log

    entries = dataset_log(find_registry(registry), dataset)
    return entries if isinstance(entries, RefLog) else RefLog(entries)


def tag(
    new: str,
    source: str,
    *,
    overlays: Sequence[str] | None = None,
    view: str | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> TagResult:
    """Name a revision, as ``git tag``: ``new`` (``dataset@tag``) at ``source`` (a spec or
    digest), plus ``overlays`` (digests or prefixes, applied in order) in ``view`` (default:
    the source's). Tags are immutable: moving one needs ``force`` (the log keeps the old)."""
    from dsreg.ops.tag import make_tag

    return make_tag(
        find_registry(registry),
        new,
        source,
        overlays=overlays or (),
        view=view,
        force=force,
        command=command if command is not None else _command("tag", new, source),
    )


def checkout(
    spec: str,
    path: PathArg,
    *,
    link: str | None = None,
    progress: ProgressHook | None = None,
    registry: RegistryArg = None,
) -> CheckoutResult:
    """Materialise revision ``spec`` as files in folder ``path`` (created if missing), with a
    pin file ``path/.dsreg.json``; switching a checkout touches only the files that differ.

    ``link``: ``reflink``, ``copy``, ``hardlink`` or ``symlink`` (default: the registry's
    ``core.checkout_link``, else ``reflink``: a copy-on-write clone where the file system has
    them, else a copy; either is the user's to edit). ``hardlink`` and ``symlink`` are faster
    and use no space, but the files are the store's objects: an edit through one (as root, or
    after ``chmod u+w``) corrupts the store (``dsreg verify`` finds it; adding the data again
    repairs it). An interrupted checkout is finished by the next one (docs/concepts.md).
    """
    from dsreg.ops.checkout import checkout as do_checkout

    reg = find_registry(registry)
    chosen = link or reg.config.get("core", {}).get("checkout_link", "reflink")
    if chosen not in LINKS:
        raise InvalidInputError(
            f"unknown --link {chosen!r}; choose reflink, copy, hardlink or symlink"
        )
    resolved = reg.resolve(spec)
    return do_checkout(
        reg, resolved, Path(path), link=cast("LinkType", chosen), progress=progress or no_progress
    )


def verify(
    spec: str | None = None,
    *,
    all: bool = False,
    progress: ProgressHook | None = None,
    registry: RegistryArg = None,
) -> VerifyResult:
    """Re-hash objects and check manifests against their schemas: what ``spec`` reaches, or
    (the default, ``all``) every object. The result's ``ok`` is False on any problem."""
    from dsreg.ops.maintenance import verify as do_verify

    if spec is not None and all:
        raise InvalidInputError("give a SPEC or --all, not both")
    reg = find_registry(registry)
    return do_verify(reg, specs=[spec] if spec else [], progress=progress or no_progress)


def gc(
    *,
    dry_run: bool = False,
    prune_log_older_than: str | timedelta | None = None,
    registry: RegistryArg = None,
) -> GcResult:
    """Remove objects that no tag, and no log line younger than the log's expiry, reaches;
    ``dry_run``: only say.

    A log line (a tag's old value, an overlay made) keeps what it names for the registry's
    ``[gc] log_expiry`` (default ``"90d"``, as git's reflog). ``prune_log_older_than``
    (``"90d"``, ``"2w"``, ``"now"``, or a ``timedelta``) is the explicit way to let lines older
    than that go now: what only they name is then removed."""
    from dsreg.ops.maintenance import collect_garbage

    if isinstance(prune_log_older_than, timedelta):
        seconds = prune_log_older_than.total_seconds()
        if seconds < 0:
            raise InvalidInputError(f"prune_log_older_than {prune_log_older_than} is negative")
        prune_log_older_than = f"{int(seconds)}s" if seconds else "now"
    return collect_garbage(
        find_registry(registry), dry_run=dry_run, prune_log_older_than=prune_log_older_than
    )


# -- reading -----------------------------------------------------------------------------------


def open(
    spec: str,
    *,
    remote: str | None = None,
    registry: RegistryArg = None,
) -> Dataset:
    """Open a pinned revision: ``"imagenet-val@original"``, ``"imagenet-val@3f9a2c1b7d0e"`` or
    ``"blake3:…"``. The result's ``digest`` is the full revision digest, the thing to cite.

    With ``remote``, objects missing here are fetched from that remote and verified first.
    """
    reg = find_registry(registry)
    if remote is not None:
        from dsreg.remote.transfer import fetch_for_open

        return fetch_for_open(reg, spec, remote)
    from dsreg.views.dataset import Dataset

    return Dataset(reg, reg.resolve(spec))


def connect(registry: RegistryArg = None, *, allow_files: bool = False) -> Connection:
    """A DuckDB connection that resolves ``"dataset@rev"`` quoted identifiers in queries.

    Read-only: its SQL reads revisions and nothing else (no file read or written, no ATTACH,
    INSTALL, LOAD or SET; a refused statement raises ``QueryError``). ``allow_files=True``
    gives DuckDB its full access, for your own files.

    >>> con = dsreg.connect()                                                # doctest: +SKIP
    >>> con.sql('SELECT label_name, count(*) FROM "cifar10-test@cleaned-v1" GROUP BY ALL')
    """
    from dsreg.views.sql import Connection

    return Connection(find_registry(registry), allow_files=allow_files)


@overload
def sql(
    query: str,
    *,
    format: str | None = None,
    output: None = None,
    allow_files: bool = False,
    registry: RegistryArg = None,
) -> pa.Table: ...
@overload
def sql(
    query: str,
    *,
    format: str | None = None,
    output: PathArg | IO[Any],
    allow_files: bool = False,
    registry: RegistryArg = None,
) -> int: ...
def sql(
    query: str,
    *,
    format: str | None = None,
    output: PathArg | IO[Any] | None = None,
    allow_files: bool = False,
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
    """
    from dsreg.report.export import check_format

    if format is not None:
        check_format(format)
    reg = find_registry(registry)
    if output is None:
        if format is not None:
            raise InvalidInputError(f"format {format!r} writes to output=: give a path or stream")
        from dsreg.views.sql import Connection

        with Connection(reg, allow_files=allow_files) as con:
            return con.table(query)
    from dsreg.report.export import write_query

    return write_query(reg, query, output, format=format, allow_files=allow_files)


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
    command: str | None = None,
    registry: RegistryArg = None,
) -> OverlayResult:
    """Find label issues of ``spec`` with confident learning; store a ``detected`` overlay.

    ``pred_probs``: out-of-sample probabilities aligned with the revision's rows, an ``(n, k)``
    array or a ``.npy`` (memory-mapped) or Parquet file (read in chunks). The options are
    cleanlab's (see :func:`dsreg.detector.detector.detect`). ``tag`` also tags
    ``<dataset>@<tag>``: the revision plus the overlay, in ``view`` (default ``cleaned``).

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
        command=command if command is not None else _command("detect", spec, where),
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
            command if command is not None else _command("import_votes", spec, os.fspath(votes))
        ),
    )


def overlay_ls(dataset: str, *, registry: RegistryArg = None) -> list[OverlayRecord]:
    """A dataset's overlays, oldest first: those made for it and those its tags use."""
    from dsreg.model.names import check_name
    from dsreg.overlays.write import list_overlays

    reg = find_registry(registry)
    check_name(dataset, what="dataset name")
    return list_overlays(reg, dataset)


def overlay_show(digest: str, *, rows: int = 20, registry: RegistryArg = None) -> OverlayInfo:
    """An overlay (digest or prefix of at least 6 hex): manifest and first ``rows`` corrections."""
    from dsreg.overlays.inspect import describe_overlay

    return describe_overlay(find_registry(registry), digest, rows=rows)


# -- reports -----------------------------------------------------------------------------------


def evaluate(
    spec: str,
    predictions: Mapping[str, Predictions] | Sequence[PathArg] | Predictions,
    *,
    views: Sequence[View] | None = None,
    top_k: Sequence[int] = (1,),
    plot: PathArg | None = None,
    registry: RegistryArg = None,
) -> EvalReport:
    """Score model predictions on the original, cleaned, corrected and honeypot labels of
    ``spec``'s snapshot and overlays; rank the models on each view.

    ``predictions``: ``{model: predictions}`` (a path, a numpy array, an Arrow table or a
    pandas DataFrame), or a list of paths (the model is the file stem). ``plot`` also writes
    a slope chart of the ranks (``.png`` or ``.svg``). Raises ``PredictionsError`` when
    predictions miss rows of a view, name unknown example ids or classes, or have the wrong
    shape.

    >>> report = dsreg.evaluate("cifar10-test@corrected-v1", {"resnet": probs})  # doctest: +SKIP
    >>> report.to_arrow()                     # one row per (model, view)
    """
    from dsreg.model.manifests import VIEWS
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
    return report


def diff(a: str, b: str, *, registry: RegistryArg = None) -> DiffResult:
    """Rows only in ``a``, only in ``b``, and relabelled (with from -> to counts). Revisions of
    one snapshot are matched by row, of different snapshots by ``example_id``."""
    from dsreg.report.diff import diff as do_diff

    return do_diff(find_registry(registry), a, b)


def cite(
    spec: str,
    *,
    format: str = "bibtex",
    authors: Sequence[str] | None = None,
    registry: RegistryArg = None,
) -> Citation:
    """A citation of ``spec``'s revision carrying the dataset, tag, full revision, snapshot and
    overlay digests and the dsreg version. ``str()`` of it is the text in ``format``
    (``bibtex``, ``cff`` or ``text``)."""
    from dsreg.report.cite import check_format
    from dsreg.report.cite import cite as do_cite

    check_format(format)
    return do_cite(find_registry(registry), spec, authors=authors or (), format=format)


# -- remotes -----------------------------------------------------------------------------------


def remote_add(
    name: str,
    url: str,
    *,
    default: bool = False,
    options: Mapping[str, Any] | Sequence[str] | None = None,
    force: bool = False,
    registry: RegistryArg = None,
) -> RemoteConfig:
    """Add a remote: a folder or any URL a DVC remote accepts (``s3://``, ``gs://``, ``ssh://``,
    …), with DVC's options for it; recorded in config.toml, nothing is contacted. Secrets
    belong in the environment, never in ``options``."""
    from dsreg.remote.config import add_remote, parse_options

    opts = parse_options(options)
    return add_remote(
        find_registry(registry), name, url, options=opts, default=default, force=force
    )


def remote_ls(*, registry: RegistryArg = None) -> list[RemoteConfig]:
    """The remotes: name, URL, options, and which one is the default."""
    from dsreg.remote.config import list_remotes

    return list_remotes(find_registry(registry))


def remote_remove(name: str, *, registry: RegistryArg = None) -> RemoteConfig:
    """Forget a remote (nothing on it is deleted); return what it was."""
    from dsreg.remote.config import remove_remote

    return remove_remote(find_registry(registry), name)


def push(
    specs: str | Sequence[str] | None = None,
    *,
    remote: str | None = None,
    jobs: int | None = None,
    force: bool = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
) -> PushResult:
    """Send revisions (``dataset@tag``, a dataset's tags, a digest; default: every tag), all
    they reach that ``remote`` (default: the default remote) lacks, then their tags. A tag the
    remote holds at another digest is refused unless ``force``."""
    from dsreg.remote.transfer import push as do_push

    reg = find_registry(registry)
    wanted = _specs(specs)
    return do_push(
        reg,
        wanted,
        remote=remote,
        force=force,
        jobs=jobs,
        progress=progress or no_progress,
        command=command if command is not None else _command("push", *wanted),
    )


def pull(
    specs: str | Sequence[str] | None = None,
    *,
    remote: str | None = None,
    jobs: int | None = None,
    force: bool = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
) -> PullResult:
    """Fetch revisions (default: every tag of ``remote``) and what they reach that is missing
    here, verified; then set their tags here. A local tag at another digest is refused unless
    ``force``."""
    from dsreg.remote.transfer import pull as do_pull

    reg = find_registry(registry)
    wanted = _specs(specs)
    return do_pull(
        reg,
        wanted,
        remote=remote,
        force=force,
        jobs=jobs,
        progress=progress or no_progress,
        command=command if command is not None else _command("pull", *wanted),
    )


def clone(
    url: str,
    path: PathArg | None = None,
    *,
    name: str = "origin",
    options: Mapping[str, Any] | Sequence[str] | None = None,
    jobs: int | None = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
) -> CloneResult:
    """A new registry at ``path`` (default ``./.dsreg``) with the remote's tags, logs and
    manifests; its remote ``name`` is the default. Payloads come on demand (``pull``,
    ``checkout``, ``open(..., remote=)``)."""
    from dsreg.remote.config import parse_options
    from dsreg.remote.transfer import clone as do_clone

    return do_clone(
        url,
        path,
        name=name,
        options=parse_options(options),
        jobs=jobs,
        progress=progress or no_progress,
        command=command if command is not None else _command("clone", url),
    )


def import_dvc(
    repo: str,
    path: str,
    *,
    dataset: str,
    rev: str = "HEAD",
    tag: str | None = None,
    force: bool = False,
    jobs: int | None = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
) -> ImportResult:
    """Import a DVC-tracked ImageFolder tree (or label file) ``path`` of git repository
    ``repo`` at ``rev`` as a snapshot of ``dataset`` (the command's ``--as``), with its
    provenance: repository, requested rev, commit, path and DVC's md5."""
    from dsreg.ingest.dvc import import_dvc as do_import

    return do_import(
        find_registry(registry),
        repo,
        path,
        dataset=dataset,
        rev=rev,
        tag=tag,
        force=force,
        jobs=jobs,
        progress=progress or no_progress,
        command=command if command is not None else _command("import_dvc", repo, path),
    )
