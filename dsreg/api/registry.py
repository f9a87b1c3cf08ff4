"""The registry commands: init, add, ls, show, log, tag, checkout, verify, gc."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import LINKS, PathArg, RegistryArg, command_of, find_registry
from dsreg.errors import InvalidInputError
from dsreg.registry.folder import Registry

if TYPE_CHECKING:
    from dsreg.ingest.result import AddResult
    from dsreg.ops.checkout.apply import CheckoutResult, LinkType
    from dsreg.ops.maintenance import GcResult, VerifyResult
    from dsreg.ops.tag import TagResult
    from dsreg.registry.refs import RefLog
    from dsreg.report.show import ObjectInfo, RevisionInfo, TagList


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
    ids: PathArg | None = None,
    tag: str | None = None,
    force: bool = False,
    citation: PathArg | None = None,
    credit: str | None = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
    allow_lookalike_ids: bool = False,
) -> AddResult:
    """Add a test set as an immutable snapshot of ``dataset`` (content-addressed, deduplicated).

    Give exactly one source: ``path``, an ImageFolder tree (one folder per class); ``labels``,
    a label-only set (``.npy``, ``.csv`` or ``.parquet``); or ``table``, a table of examples
    (``.parquet`` or ``.csv``) with ``id_column`` and ``label_column``, its payloads found at
    ``files/<example id>`` when ``files`` is given. ``classes``: the class names, a list or a
    file with one per line (line i is class i; not for a tree, whose folders name them).
    ``ids``: with ``labels``, the example ids in row order (``ids.txt``, one per line, or
    ``ids.json``, a list of strings); without it a label-only set's ids are its row numbers.
    ``tag`` points ``dataset@tag`` at the new revision (moving it needs ``force``).
    Label-only sets (``labels``, or ``table`` without ``files``) are read, checked and written
    a row group at a time, in bounded memory.

    ``citation`` (a BibTeX file) and ``credit`` (plain text) record the dataset creators'
    reference in the snapshot's source (``source.credit``): every ``dsreg.cite`` of any
    revision of it repeats the reference. The same data with another credit is another snapshot.

    Example ids must be unique in their spelling: ids that differ only in Unicode normalisation
    (NFC and NFD) or in whitespace ending a path part (``"a.png"`` and ``"a.png "``) would be
    one file in a checkout on macOS or Windows, and are refused (``DatasetFormatError`` naming
    both; nothing is written). ``allow_lookalike_ids=True`` keeps them as they are. Ids that
    differ only in case are kept either way.

    Returns
    -------
    AddResult
        ``revision`` (the full digest to pin), ``snapshot``, ``rows``, ``classes``, ``files``,
        ``new_objects``, …
    """
    from dsreg.ingest.add import add as do_add
    from dsreg.ingest.add import check_sources

    check_sources(path, labels=labels, table=table, files=files, classes=classes, ids=ids)
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
        ids=ids,
        tag=tag,
        force=force,
        citation=citation,
        credit=credit,
        progress=progress or no_progress,
        command=command if command is not None else command_of("add", dataset, os.fspath(source)),
        allow_lookalike_ids=allow_lookalike_ids,
    )


def ls(
    *,
    remote: str | None = None,
    max_tags: int | None = None,
    progress: ProgressHook | None = None,
    registry: RegistryArg = None,
) -> TagList:
    """Every tag of every dataset: ``dataset``, ``tag``, ``revision`` (full digest).

    With ``remote`` (a name, or a URL: no registry needed), the tags that remote holds: one
    listing (or its ``info/refs``) names them, then the tag files are read, concurrently, at
    most ``max_tags`` of them (default ``$DSREG_MAX_TAGS``, else 10,000; 0 reads every one),
    the first by dataset and tag. The result (a list) says how many the remote names
    (``named``) and how many were left unread (``omitted``). ``progress("reading tags", done,
    total)`` hears of the reads."""
    from dsreg.report.show import TagList, TagRef, list_tags

    if remote is None:
        tags = list_tags(find_registry(registry))
        return TagList(tags, named=len(tags))
    from dsreg.api.reading import remote_store
    from dsreg.remote.read import remote_tags

    _reg, rs, _cached = remote_store(registry, remote)
    got = remote_tags(rs, max_tags=max_tags, progress=progress or no_progress)
    return TagList(
        (TagRef(dataset=ds, tag=t, revision=d) for ds, t, d in got.tags),
        named=got.named,
        omitted=got.omitted,
        max_tags=got.cap,
    )


def untagged_datasets(*, registry: RegistryArg = None) -> list[str]:
    """The datasets ``ls`` leaves out: those with a ref log but no tag (every tag deleted, or
    none ever set), sorted. Their history is ``log(dataset)``; a revision a deleted tag named
    stays until its log line is older than gc's log expiry, and ``tag`` brings it back."""
    reg = find_registry(registry)
    tagged = {ds for ds, _tag, _digest in reg.refs.all()}
    return [ds for ds in reg.refs.logged_datasets() if ds not in tagged]


def show(
    spec: str, *, remote: str | None = None, registry: RegistryArg = None
) -> RevisionInfo | ObjectInfo:
    """Describe a revision (``dataset@tag``, ``dataset@<prefix>``, a revision or snapshot
    digest): its manifest, rows, classes, overlays and full digest; or any other stored object
    (an overlay, a payload, a table) by its digest or prefix.

    With ``remote`` (a name, or a URL: no registry needed), a revision read from that remote:
    its manifests and tables are fetched, verified, never its payloads."""
    from dsreg.report.show import describe, describe_resolved

    if remote is not None:
        from dsreg.api.reading import remote_read

        with remote_read(registry, remote) as reader:
            return reader.repairing(
                lambda: describe_resolved(reader.reg, reader.revision(spec, payloads=False))
            )
    return describe(find_registry(registry), spec)


def log(dataset: str, *, registry: RegistryArg = None) -> RefLog:
    """Who moved which tag of ``dataset`` when (the append-only ref log), oldest first: a list
    of entries whose ``damaged`` names the lines skipped (torn, not UTF-8, wrong types)."""
    from dsreg.registry.refs import RefLog
    from dsreg.report.show import dataset_log

    entries = dataset_log(find_registry(registry), dataset)
    return entries if isinstance(entries, RefLog) else RefLog(entries)


def tag(
    new: str,
    source: str | None = None,
    *,
    overlays: Sequence[str] | None = None,
    view: str | None = None,
    force: bool = False,
    delete: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> TagResult:
    """Name a revision, as ``git tag``: ``new`` (``dataset@tag``) at ``source`` (a spec or
    digest), plus ``overlays`` (digests or prefixes, applied in order) in ``view`` (default:
    the source's). Tags are immutable: moving one needs ``force`` (the log keeps the old).

    ``delete=True`` removes tag ``new`` instead, as ``git tag -d`` (give no ``source``): the
    ref log records it, no object is removed (the revision stays a gc root through that log
    line until the log's expiry; ``gc`` decides), and the result's ``revision`` is what the
    tag named. An unknown tag raises ``RevisionNotFoundError``."""
    from dsreg.ops.tag import delete_tag, make_tag

    if delete:
        given = [
            name
            for name, value in (
                (f"the source {source!r}", source),
                ("overlays", overlays),
                ("a view", view),
                ("force", force),
            )
            if value
        ]
        if given:
            raise InvalidInputError(
                f"deleting tag {new!r} takes only the tag, not {' or '.join(given)}"
            )
        return delete_tag(
            find_registry(registry),
            new,
            command=command if command is not None else f"dsreg.tag({new!r}, delete=True)",
        )
    if source is None:
        raise InvalidInputError(
            f"tag {new!r} needs the revision it names: dsreg tag {new} DATASET@TAG|DIGEST "
            "(or --delete to remove it)"
        )
    return make_tag(
        find_registry(registry),
        new,
        source,
        overlays=overlays or (),
        view=view,
        force=force,
        command=command if command is not None else command_of("tag", new, source),
    )


def checkout(
    spec: str,
    path: PathArg,
    *,
    link: str | None = None,
    remote: str | None = None,
    verify: bool = False,
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

    ``remote`` (a name, or a URL: no registry needed, the per-user cache holds the objects):
    the revision is resolved with that remote and what it lacks fetched, verified, first.

    A copy (or reflink) re-hashes every object as it reads it. A hard or symbolic link is made
    without reading an object whose stat is unchanged since its bytes were last found to hash
    to its digest (by the add that wrote them, or a re-hash since); ``verify=True`` re-hashes
    every object anyway (docs/concepts.md, "Guarantees": what the stat cannot see).
    """
    from dsreg.ops.checkout.apply import checkout as do_checkout

    hook = progress or no_progress
    if remote is None:
        reg = find_registry(registry)
        chosen = _link_type(reg, link)
        return do_checkout(
            reg, reg.resolve(spec), Path(path), link=chosen, verify=verify, progress=hook
        )
    if link is not None:
        _link_type(None, link)  # refused before anything is fetched
    from dsreg.api.reading import read_remote_revision, remote_read

    # The registry's lock is held from the fetch until the files are placed, so a gc waits;
    # an object found missing or corrupt all the same is fetched again from the remote.
    with remote_read(registry, remote, progress=hook) as reader:

        def run() -> CheckoutResult:
            resolved = read_remote_revision(reader, spec, remote, payloads=True)
            chosen = _link_type(reader.reg, link)
            return do_checkout(
                reader.reg,
                resolved,
                Path(path),
                link=chosen,
                verify=verify,
                progress=hook,
                refetch=reader.refetch,
            )

        return reader.repairing(run)


def _link_type(reg: Registry | None, link: str | None) -> LinkType:
    """``link``, else the registry's ``core.checkout_link``, else ``reflink``; an unknown one is
    an ``InvalidInputError``."""
    chosen = link or (reg.config.get("core", {}).get("checkout_link") if reg else None)
    chosen = chosen or "reflink"
    if chosen not in LINKS:
        raise InvalidInputError(
            f"unknown --link {chosen!r}; choose reflink, copy, hardlink or symlink"
        )
    return cast("LinkType", chosen)


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
    progress: ProgressHook | None = None,
    registry: RegistryArg = None,
) -> GcResult:
    """Remove objects that no tag, and no log line younger than the log's expiry, reaches;
    ``dry_run``: only say.

    A log line (a tag's old value, an overlay made) keeps what it names for the registry's
    ``[gc] log_expiry`` (default ``"90d"``, as git's reflog). ``prune_log_older_than``
    (``"90d"``, ``"2w"``, ``"now"``, or a ``timedelta``) is the explicit way to let lines older
    than that go now: what only they name is then removed. ``progress(task, done, total)``
    hears of each object removed."""
    from dsreg.ops.maintenance import collect_garbage

    if isinstance(prune_log_older_than, timedelta):
        seconds = prune_log_older_than.total_seconds()
        if seconds < 0:
            raise InvalidInputError(f"prune_log_older_than {prune_log_older_than} is negative")
        prune_log_older_than = f"{int(seconds)}s" if seconds else "now"
    return collect_garbage(
        find_registry(registry),
        dry_run=dry_run,
        prune_log_older_than=prune_log_older_than,
        progress=progress or no_progress,
    )
