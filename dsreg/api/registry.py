"""The registry commands: init, add, ls, show, log, tag, checkout, verify, gc."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeAlias, cast

from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook
from dsreg.api.common import LINKS, command_of, find_registry, hook, local_reader, options_of
from dsreg.api.options import (
    AllowLookalikeIdsOpt,
    Arg,
    MoveTagOpt,
    NewTagOpt,
    Opt,
    PathArg,
    ReadRemoteOpt,
    RegistryOpt,
)
from dsreg.errors import InvalidInputError
from dsreg.formats.manifests import VIEWS
from dsreg.formats.names import TagName, parse_tag_target
from dsreg.ops.tag import delete_tag, make_tag
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Reader
from dsreg.registry.refs import RefLog

# What only some of these commands need, imported when first used: the checkout and the
# maintenance walk import numpy and pyarrow; the add of a tree must not import them, nor a tag
# the remote reads and the marks (which ls reads).
with lazy_imports():
    from dsreg.api import reading
    from dsreg.ingest import add as ingest_add
    from dsreg.ops import maintenance
    from dsreg.ops.checkout import apply as checkout_ops
    from dsreg.registry import marks as registry_marks
    from dsreg.remote import read as remote_reading
    from dsreg.report import show as report_show

if TYPE_CHECKING:
    from dsreg.ingest.result import AddResult
    from dsreg.ops.checkout.apply import CheckoutResult, LinkType
    from dsreg.ops.maintenance import GcResult, VerifyResult
    from dsreg.ops.tag import TagResult
    from dsreg.report.show import ObjectInfo, RevisionInfo, TagList


def init(*, registry: RegistryOpt = None) -> Registry:
    """Create a registry (idempotent) and return it.

    At ``registry``; else ``$DSREG_REGISTRY``; else ``$DSREG_HOME``; else ``./.dsreg``.
    """
    return Registry.init(registry.root if isinstance(registry, Registry) else registry)


# add's options with the longest help texts.
IdsOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="With --labels: the example ids in row order, ids.txt (one per line) or "
        "ids.json (a list of strings); default: the row numbers."
    ),
]
CitationOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="The dataset creators' reference, a BibTeX file (.bib): recorded in the "
        "snapshot, repeated by every 'dsreg cite' of its revisions."
    ),
]
QuestionsOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="A multiple-choice question set (.csv, .jsonl or .parquet): a question, a list "
        "of choices and the answer per row; the classes are the answer letters A, B, ..."
    ),
]
IdColumnOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        help="With --table: the example id column (default example_id); with --questions "
        "or --answers: the id column (default: the row numbers).",
        show_default=False,
    ),
]
AnswerColumnOpt: TypeAlias = Annotated[
    str,
    Opt(
        help="With --questions: the answer column (0-based position or letter); with "
        "--answers: the answer column (text)."
    ),
]
NormalizeOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        help="With --answers: how answers are compared, text (case and white space) or "
        "gsm8k (also numbers: 1,000 = 1000.0, $, %, the text after ####); default text. "
        "Recorded in the snapshot.",
        show_default=False,
    ),
]
AnswersOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="An exact-answer question set (.csv, .jsonl or .parquet): a question and its "
        "answer per row; the classes are the normalised answers (--normalize)."
    ),
]
LicenseOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        help="The dataset's licence: an SPDX id (e.g. CC-BY-4.0) or a URL; recorded in the "
        "snapshot, repeated by Croissant, CFF and DataCite.",
        show_default=False,
    ),
]


def add(
    dataset: Annotated[str, Arg("Dataset name, e.g. imagenet-val.")],
    path: Annotated[PathArg | None, Arg("An ImageFolder tree: one folder per class.")] = None,
    *,
    labels: Annotated[
        PathArg | None, Opt(help="Label-only set: labels as .npy, .csv or .parquet.")
    ] = None,
    ids: IdsOpt = None,
    table: Annotated[PathArg | None, Opt(help="A table of examples (.parquet or .csv).")] = None,
    questions: QuestionsOpt = None,
    answers: AnswersOpt = None,
    id_column: IdColumnOpt = None,
    label_column: Annotated[str, Opt(help="With --table: the label column.")] = "label",
    question_column: Annotated[
        str, Opt(help="With --questions or --answers: the question column.")
    ] = "question",
    choices_column: Annotated[
        str, Opt(help="With --questions: the choices column (a list of texts per row).")
    ] = "choices",
    answer_column: AnswerColumnOpt = "answer",
    normalize: NormalizeOpt = None,
    files: Annotated[
        PathArg | None, Opt(help="With --table: payload files, found at FILES/<example id>.")
    ] = None,
    classes: Annotated[
        PathArg | Sequence[str] | None,
        Opt(
            help="Class names, one per line (line i is class i); with --answers: answers the "
            "classes hold besides the rows' (normalised as theirs)."
        ),
    ] = None,
    tag: NewTagOpt = None,
    force: MoveTagOpt = False,
    citation: CitationOpt = None,
    credit: Annotated[
        str | None, Opt(help="The dataset creators' reference as plain text (as --citation).")
    ] = None,
    license: LicenseOpt = None,
    allow_lookalike_ids: AllowLookalikeIdsOpt = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> AddResult:
    """Add a test set as an immutable snapshot of ``dataset`` (content-addressed, deduplicated).

    Give exactly one source: ``path``, an ImageFolder tree (one folder per class); ``labels``,
    a label-only set (``.npy``, ``.csv`` or ``.parquet``), its example ids in row order in
    ``ids`` (``ids.txt``, one per line, or ``ids.json``, a list; default: the row numbers);
    ``table``, a table of examples (``.parquet`` or ``.csv``) with ``id_column`` (default
    ``example_id``) and ``label_column``, its payloads at ``files/<example id>`` when ``files``
    is given; or a question set (docs/questions.md, ``.csv``, ``.jsonl`` or ``.parquet``):
    ``questions``, multiple choice (``question_column``, ``choices_column``: a list of texts,
    ``answer_column``: the answer's 0-based position or letter; the classes are the letters
    ``A``, ``B``, ...), or ``answers``, exact answers (``question_column``, ``answer_column``;
    the classes are the answers normalised by ``normalize``, ``text`` or ``gsm8k``, recorded
    in the snapshot), their ids in ``id_column`` (default: the row numbers).
    ``classes``: the class names, a list or a file with one per line (line i is class i; not
    for a tree, whose folders name them, nor for ``questions``); with ``answers``, answers the
    classes hold besides the rows' (a correction may then name them). ``tag`` points
    ``dataset@tag`` at the new revision (moving it needs ``force``). Label-only sets
    (``labels``, or ``table`` without ``files``) are read, checked and written a row group at
    a time, in bounded memory; a question set is read whole.

    ``citation`` (a BibTeX file) and ``credit`` (plain text) record the dataset creators'
    reference in the snapshot's source (``source.credit``), repeated by every ``dsreg.cite`` of
    its revisions: the same data with another credit is another snapshot. ``license`` (one
    SPDX licence identifier, e.g. ``CC-BY-4.0``, or a licence's URL) is recorded there too
    (``source.license``), repeated by its Croissant, CFF and DataCite records; a snapshot made
    without one has no such key.

    Example ids that differ only in Unicode normalisation (NFC and NFD) or in whitespace ending
    a path part (``"a.png"`` and ``"a.png "``) would be one file in a checkout on macOS or
    Windows: they are refused (``DatasetFormatError`` naming both; nothing is written) unless
    ``allow_lookalike_ids``. Ids that differ only in case are kept either way.

    Returns an ``AddResult``: ``revision`` (the full digest to pin), ``snapshot``, ``rows``, …
    """
    options = options_of(ingest_add.AddOptions, locals())
    line = command_of(command, "add", dataset, os.fspath(options.source))
    return ingest_add.add(find_registry(registry), options, progress=hook(progress), command=line)


def ls(
    *,
    remote: ReadRemoteOpt = None,
    max_tags: Annotated[
        int | None,
        Opt(
            "--max-tags",
            min=0,
            help="With --remote: read at most N tags, the first by dataset and tag (default "
            "$DSREG_MAX_TAGS, else 10,000; 0 reads every one).",
            show_default=False,
        ),
    ] = None,
    all: Annotated[bool, Opt("--all", help="List yanked tags too, marked yanked.")] = False,
    registry: RegistryOpt = None,
    progress: ProgressHook | None = None,
) -> TagList:
    """Every tag of every dataset: ``dataset``, ``tag``, ``revision`` (full digest).

    With ``remote`` (a name, or a URL: no registry needed), the tags that remote holds: one
    listing (or its ``info/refs``) names them, then the tag files are read, concurrently, at
    most ``max_tags`` of them (default ``$DSREG_MAX_TAGS``, else 10,000; 0 reads every one),
    the first by dataset and tag. The result (a list) says how many the remote names
    (``named``) and how many were left unread (``omitted``). ``progress("reading tags", done,
    total)`` hears of the reads. ``max_tags`` without ``remote`` is refused. A yanked tag (the
    remote's yanks with ``remote``) is left out unless ``all`` (then its ``yanked`` holds the
    reason); the result's ``retired`` names each retired dataset's successor and reason."""
    if remote is None:
        if max_tags is not None:
            raise InvalidInputError("--max-tags caps a remote's listing: give --remote too")
        reg = find_registry(registry)
        tags = report_show.list_tags(reg, all=all)
        retired = {
            ds: registry_marks.read_retirement(reg.root, ds) for ds in {t.dataset for t in tags}
        }
        return report_show.TagList(
            tags,
            named=len(tags),
            retired={
                ds: {"successor": r.successor, "reason": r.reason}
                for ds, r in sorted(retired.items())
                if r is not None
            },
        )
    reg, rs, _cached = reading.remote_store(registry, remote)
    got = remote_reading.remote_tags(rs, max_tags=max_tags, progress=hook(progress))
    marks = remote_reading.remote_marks(reg, rs)
    yanks = marks.yanks()
    listed = []
    for t in got.tags:
        reason = yanks.get(TagName(t.dataset, t.tag))
        if reason is None or all:
            marked = None if reason is None else {"reason": reason}
            listed.append(
                report_show.TagRef(dataset=t.dataset, tag=t.tag, revision=t.revision, yanked=marked)
            )
    return report_show.TagList(
        listed,
        named=got.named,
        omitted=got.omitted,
        max_tags=got.cap,
        retired={
            ds: {"successor": successor, "reason": reason}
            for ds, (successor, reason) in marks.retired().items()
        },
        unusable={f"{n.dataset}@{n.tag}": why for n, why in marks.refused.items()},
    )


def untagged_datasets(*, registry: RegistryOpt = None) -> list[str]:
    """The datasets ``ls`` leaves out: those with a ref log but no tag (every tag deleted, or
    none ever set), sorted. Their history is ``log(dataset)``; a revision a deleted tag named
    stays until its log line is older than gc's log expiry, and ``tag`` brings it back."""
    reg = find_registry(registry)
    tagged = {ds for ds, _tag, _digest in reg.refs.all()}
    return [ds for ds in reg.refs.logged_datasets() if ds not in tagged]


def show(
    spec: Annotated[str, Arg("dataset@tag, dataset@<prefix>, or any digest.")],
    *,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> RevisionInfo | ObjectInfo:
    """Describe a revision (``dataset@tag``, ``dataset@<prefix>``, a revision or snapshot
    digest): its manifest, rows, classes, overlays and full digest; or any other stored object
    (an overlay, a payload, a table) by its digest or prefix.

    With ``remote`` (a name, or a URL: no registry needed), a revision read from that remote:
    its manifests and tables are fetched, verified, never its payloads."""
    with reading.reader(registry, remote) as reader:
        return reader.repairing(lambda: _describe(reader, spec, anything=remote is None))


def _describe(reader: Reader, spec: str, *, anything: bool) -> RevisionInfo | ObjectInfo:
    """``show``'s spec described: with ``anything``, a bare digest or prefix names any object
    of the registry (a revision or snapshot is described as its revision); else a revision."""
    if anything and "@" not in spec:
        reg = reader.registry
        digest = reg.resolve_object(spec)
        if reg.manifest_kind(digest) not in ("revision", "snapshot"):
            return report_show.describe_object(reg, digest)
        spec = digest
    return report_show.describe(reader.revision(spec))


def log(
    dataset: Annotated[str, Arg("Dataset name.")],
    *,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> RefLog:
    """Who moved which tag of ``dataset`` when (the append-only ref log), oldest first: a list
    of entries whose ``damaged`` names the lines skipped (torn, not UTF-8, wrong types). With
    ``remote`` (a name, or a URL: no registry needed), the log that remote holds, which push,
    pull and clone carry."""
    with reading.reader(registry, remote) as reader:
        return report_show.dataset_log(reader, dataset)


def tag(
    new: Annotated[str, Arg("The tag to create (or delete): dataset@tag.")],
    source: Annotated[
        str | None, Arg("What it names: a spec or digest (not with --delete).")
    ] = None,
    *,
    overlays: Annotated[
        Sequence[str] | None,
        Opt(
            "--overlay",
            help="Add an overlay (digest or prefix); repeat for several, applied in order.",
        ),
    ] = None,
    view: Annotated[
        str | None,
        Opt(help=", ".join(VIEWS[:-1]) + f" or {VIEWS[-1]} (default: the source's)."),
    ] = None,
    force: Annotated[bool, Opt(help="Move the tag if it exists (the log keeps it).")] = False,
    delete: Annotated[
        bool,
        Opt(
            "--delete",
            "-d",
            help="Delete the tag, as git tag -d. Logged; no object is removed: gc decides, "
            "once the log line is older than the log's expiry.",
        ),
    ] = False,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> TagResult:
    """Name a revision, as ``git tag``: ``new`` (``dataset@tag``) at ``source`` (a spec or
    digest), plus ``overlays`` (digests or prefixes, applied in order) in ``view`` (default:
    the source's). Tags are immutable: moving one needs ``force`` (the log keeps the old).

    ``delete=True`` removes tag ``new`` instead, as ``git tag -d`` (give no ``source``): the
    ref log records it, no object is removed (the revision stays a gc root through that log
    line until the log's expiry; ``gc`` decides), and the result's ``revision`` is what the
    tag named. An unknown tag raises ``RevisionNotFoundError``."""
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
        recorded = command if command is not None else f"dsreg.tag({new!r}, delete=True)"
        return delete_tag(find_registry(registry), parse_tag_target(new), command=recorded)
    if source is None:
        raise InvalidInputError(
            f"tag {new!r} needs the revision it names: dsreg tag {new} DATASET@TAG|DIGEST "
            "(or --delete to remove it)"
        )
    name = parse_tag_target(new)
    return make_tag(
        name,
        local_reader(registry).revision(source),
        overlays=overlays or (),
        view=view,
        force=force,
        command=command_of(command, "tag", new, source),
    )


# checkout's option with the longest help text, as add's above.
VerifyOpt: TypeAlias = Annotated[
    bool,
    Opt(
        "--verify",
        help="Re-hash every object before it is linked, even one whose stat is unchanged "
        "since it was last verified (a copy always re-hashes).",
    ),
]


def checkout(
    spec: Annotated[str, Arg("The revision: dataset@tag, dataset@<prefix>, blake3:<hex>.")],
    path: Annotated[PathArg, Arg("The folder to fill (created if missing).")],
    *,
    link: Annotated[
        str | None,
        Opt(
            help="reflink (copy-on-write, else a copy), copy, hardlink or symlink (default: "
            "config, else reflink). Hard and symbolic links are the store's own files: editing "
            "one corrupts the store."
        ),
    ] = None,
    remote: ReadRemoteOpt = None,
    verify: VerifyOpt = False,
    progress: ProgressHook | None = None,
    registry: RegistryOpt = None,
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
    _link_type(None, link)  # refused before anything is read or fetched
    # With a remote, the registry's lock is held from the fetch until the files are placed, so
    # a gc waits; an object found missing or corrupt all the same is fetched again.
    with reading.reader(registry, remote, payloads=True, progress=hook(progress)) as reader:
        return reader.repairing(
            lambda: checkout_ops.checkout(
                reader.revision(spec),
                Path(path),
                link=_link_type(reader.registry, link),
                verify=verify,
                progress=hook(progress),
            )
        )


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
    spec: Annotated[str | None, Arg("Verify what this revision reaches.")] = None,
    *,
    all: Annotated[bool, Opt("--all", help="Verify every object (the default).")] = False,
    progress: ProgressHook | None = None,
    registry: RegistryOpt = None,
) -> VerifyResult:
    """Re-hash objects and check manifests against their schemas: what ``spec`` reaches, or
    (the default, ``all``) every object. The result's ``ok`` is False on any problem."""
    if spec is not None and all:
        raise InvalidInputError("give a SPEC or --all, not both")
    reader = local_reader(registry)
    revisions = [reader.revision(spec)] if spec else []
    return maintenance.verify(reader.registry, revisions=revisions, progress=hook(progress))


# gc's option with the longest help text.
PruneLogOpt: TypeAlias = Annotated[
    str | timedelta | None,
    Opt(
        "--prune-log-older-than",
        metavar="DURATION",
        help="Let log lines older than DURATION (90d, 2w, 12h, now) keep nothing: what "
        "only they name is removed (default: the config's [gc] log_expiry, else 90d).",
    ),
]


def gc(
    *,
    dry_run: Annotated[
        bool, Opt("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    prune_log_older_than: PruneLogOpt = None,
    progress: ProgressHook | None = None,
    registry: RegistryOpt = None,
) -> GcResult:
    """Remove objects that no tag, and no log line younger than the log's expiry, reaches;
    ``dry_run``: only say.

    A log line (a tag's old value, an overlay made) keeps what it names for the registry's
    ``[gc] log_expiry`` (default ``"90d"``, as git's reflog). ``prune_log_older_than``
    (``"90d"``, ``"2w"``, ``"now"``, or a ``timedelta``) is the explicit way to let lines older
    than that go now: what only they name is then removed. ``progress(task, done, total)``
    hears of each object removed."""
    if isinstance(prune_log_older_than, timedelta):
        seconds = prune_log_older_than.total_seconds()
        if seconds < 0:
            raise InvalidInputError(f"prune_log_older_than {prune_log_older_than} is negative")
        prune_log_older_than = f"{int(seconds)}s" if seconds else "now"
    return maintenance.collect_garbage(
        find_registry(registry),
        dry_run=dry_run,
        prune_log_older_than=prune_log_older_than,
        progress=hook(progress),
    )
