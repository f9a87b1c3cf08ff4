"""Remotes: remote_add/ls/remove, push, pull, clone, import_dvc."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, TypeAlias

from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook
from dsreg.api.common import command_of, find_registry, hook, local_reader, options_of, specs_of
from dsreg.api.options import (
    AllowLookalikeIdsOpt,
    Arg,
    JobsOpt,
    MoveTagOpt,
    NewTagOpt,
    Opt,
    PathArg,
    RegistryArg,
    RegistryOpt,
    RemoteOptionsOpt,
    TransferRemoteOpt,
)
from dsreg.errors import InvalidInputError, YankedWarning
from dsreg.objects.digest import PREFIX
from dsreg.registry.folder import Registry
from dsreg.registry.reader import tagged

# A remote is reached through fsspec and DVC, and an import from DVC through DVC itself:
# imported when first used.
with lazy_imports():
    from dsreg.formats import credit as credits
    from dsreg.ingest import dvc as ingest_dvc
    from dsreg.remote import config as remote_config
    from dsreg.remote import transfer
    from dsreg.report.publish import site as publish_site

if TYPE_CHECKING:
    from dsreg.ingest.dvc import ImportResult
    from dsreg.remote.config import RemoteConfig
    from dsreg.remote.transfer import CloneResult, PullResult, PushResult
    from dsreg.report.publish.site import Published


# -- remotes -----------------------------------------------------------------------------------


def remote_add(
    name: Annotated[str, Arg("The remote's name, e.g. origin.")],
    url: Annotated[str, Arg("A folder path or a URL DVC accepts.")],
    *,
    default: Annotated[bool, Opt("--default", help="Make it the default remote.")] = False,
    options: RemoteOptionsOpt = None,
    force: Annotated[bool, Opt(help="Replace a remote of that name.")] = False,
    registry: RegistryOpt = None,
) -> RemoteConfig:
    """Add a remote: a folder or any URL a DVC remote accepts (``s3://``, ``gs://``, ``ssh://``,
    …), with DVC's options for it; recorded in config.toml, nothing is contacted. Secrets
    belong in the environment, never in ``options``."""
    return remote_config.add_remote(
        find_registry(registry),
        name,
        url,
        options=remote_config.parse_options(options),
        default=default,
        force=force,
    )


def remote_ls(*, registry: RegistryOpt = None) -> list[RemoteConfig]:
    """The remotes: name, URL, options, and which one is the default."""
    return remote_config.list_remotes(find_registry(registry))


def remote_remove(
    name: Annotated[str, Arg("The remote to forget (its data stays where it is).")],
    *,
    registry: RegistryOpt = None,
) -> RemoteConfig:
    """Forget a remote (nothing on it is deleted); return what it was."""
    return remote_config.remove_remote(find_registry(registry), name)


def _transfer(
    name: str, specs: str | Sequence[str] | None, registry: RegistryArg, command: str | None
) -> tuple[Registry, tuple[str, ...], str]:
    """What a push or pull starts from: the registry, the specs named, the ref log's line."""
    wanted = specs_of(specs)
    return find_registry(registry), wanted, command_of(command, name, *wanted)


def push(
    specs: Annotated[
        str | Sequence[str] | None,
        Arg("dataset@tag, a dataset (all its tags) or a digest (default: all tags)."),
    ] = None,
    *,
    remote: TransferRemoteOpt = None,
    jobs: JobsOpt = None,
    force: Annotated[
        bool,
        Opt(help="Move tags the remote holds at another digest (its log keeps them)."),
    ] = False,
    delete: Annotated[
        bool,
        Opt(
            "--delete",
            help="Delete the named tags (dataset@tag) on the remote instead; logged there.",
        ),
    ] = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> PushResult:
    """Send revisions (``dataset@tag``, a dataset's tags, a digest; default: every tag), all
    they reach that ``remote`` (default: the default remote) lacks, then their tags. A tag the
    remote holds at another digest is refused unless ``force``.

    ``delete=True`` removes the tags ``specs`` names (``dataset@tag``) on the remote instead,
    each by compare-and-swap under the same lock as a move, logged there; a tag the remote does
    not hold raises ``RevisionNotFoundError`` and nothing is deleted."""
    reg, wanted, line = _transfer("push", specs, registry, command)
    if delete:
        if force or jobs is not None:
            raise InvalidInputError("push --delete takes the tags and --remote only")
        return transfer.push_delete(reg, wanted, remote=remote, command=line)
    reader = local_reader(reg)
    # A bare dataset name pushes every tag of it; anything else is a revision.
    asked = [w if "@" not in w and not w.startswith(PREFIX) else reader.revision(w) for w in wanted]
    return transfer.push(
        reg,
        transfer.push_targets(reg, asked),
        remote=remote,
        force=force,
        jobs=jobs,
        progress=hook(progress),
        command=line,
    )


def publish(
    to: Annotated[
        str | None,
        Arg(
            "Where: a remote's name, a folder (./site: a bare word naming both is refused) or "
            "a URL DVC accepts (default: the default remote)."
        ),
    ] = None,
    *,
    url: Annotated[
        str | None,
        Opt(
            help="The URL readers reach it at: the pages name it (dsreg.open, citations) and the "
            "Croissant documents link their files by it, so they load by URL (default: the "
            "remote's own URL or folder, and links relative to each document).",
            show_default=False,
        ),
    ] = None,
    authors: Annotated[
        Sequence[str] | None,
        Opt("--author", help="A creator the citations and Croissant name; repeat for several."),
    ] = None,
    license: Annotated[
        str | None,
        Opt(
            help="The licence of datasets whose snapshot records none (dsreg add --license): an "
            "SPDX id (e.g. CC-BY-4.0) or a URL.",
            show_default=False,
        ),
    ] = None,
    jobs: JobsOpt = None,
    force: Annotated[
        bool, Opt(help="Move tags the remote holds at another digest (as push --force).")
    ] = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> Published:
    """Push every tag to ``to`` (as ``push`` does: objects, tags, recorded results, yanks and
    retirements), then write a static website there: ``index.html``, a page per dataset and
    per tag (digest, label card, verdict counts, the diff to the revision it derives from, its
    citation, how to load it, the leaderboard and its rank chart, yanks and retirements,
    Croissant JSON-LD), each page's Croissant file and the files those name
    (docs/publish.md). The pages link relatively: any static web server, or ``file://``,
    serves them. With ``url``, the Croissant documents name their files and pages by URL, so
    ``mlcroissant`` loads them by URL; without, their links are relative to each document.
    ``authors`` and ``license`` (one SPDX id or a URL; a snapshot's own licence is never
    replaced) go into the citations and documents. An http(s) remote is read-only: refused
    before anything is sent, as is a licence that is not an SPDX id or a URL."""
    reg, _, line = _transfer("publish", None, registry, command)
    checked = None if license is None else credits.check_license(license)
    rs = transfer.writable_remote(reg, to)
    pushed = transfer.push(
        reg,
        transfer.push_targets(reg, ()),
        remote=to,
        force=force,
        jobs=jobs,
        progress=hook(progress),
        command=line,
    )
    reader = local_reader(reg)
    with warnings.catch_warnings():
        # Every tag has a page, yanked or retired ones too: the pages say so themselves.
        warnings.simplefilter("ignore", YankedWarning)
        revisions = {
            ds: tagged(reader, ds, yanked=True) for ds in reg.refs.datasets() if reader.tags(ds)
        }
    opts = publish_site.SiteOptions(
        url=url or rs.url, absolute=url is not None, authors=tuple(authors or ()), license=checked
    )
    site = publish_site.write_site(revisions, rs, opts)
    return publish_site.Published(push=pushed, site=site)


def pull(
    specs: Annotated[
        str | Sequence[str] | None,
        Arg("dataset@tag, a dataset, or a full digest (default: every remote tag)."),
    ] = None,
    *,
    remote: TransferRemoteOpt = None,
    jobs: JobsOpt = None,
    force: Annotated[
        bool, Opt(help="Move local tags to the remote's digests (the log keeps them).")
    ] = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> PullResult:
    """Fetch revisions (default: every tag of ``remote``) and what they reach that is missing
    here, verified; then set their tags here. A local tag at another digest is refused unless
    ``force``."""
    reg, wanted, line = _transfer("pull", specs, registry, command)
    return transfer.pull(
        reg, wanted, remote=remote, force=force, jobs=jobs, progress=hook(progress), command=line
    )


def clone(
    url: Annotated[str, Arg("The remote: a folder path or a URL DVC accepts.")],
    path: Annotated[PathArg | None, Arg("The new registry folder (default: ./.dsreg).")] = None,
    *,
    name: Annotated[str, Opt(help="Name of the remote in the new registry.")] = "origin",
    options: RemoteOptionsOpt = None,
    jobs: JobsOpt = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
) -> CloneResult:
    """A new registry at ``path`` (default ``./.dsreg``) with the remote's tags, logs and
    manifests; its remote ``name`` is the default. Payloads come on demand (``pull``,
    ``checkout``, ``open(..., remote=)``)."""
    return transfer.clone(
        url,
        path,
        name=name,
        options=remote_config.parse_options(options),
        jobs=jobs,
        progress=hook(progress),
        command=command_of(command, "clone", url),
    )


DvcClassesOpt: TypeAlias = Annotated[
    PathArg | Sequence[str] | None,
    Opt(
        help="A label file's class names, one per line (line i is class i), as for "
        "'dsreg add'; a folder's class folders name them."
    ),
]


def import_dvc(
    repo: Annotated[str, Arg("A git repository with DVC: a URL or a local path.")],
    path: Annotated[str, Arg("The DVC-tracked folder (or file) in it.")],
    *,
    dataset: Annotated[str, Opt("--as", help="The dataset name, e.g. imagenet-val.")],
    rev: Annotated[str, Opt(help="A git revision: commit, branch or tag.")] = "HEAD",
    tag: NewTagOpt = None,
    force: MoveTagOpt = False,
    jobs: JobsOpt = None,
    classes: DvcClassesOpt = None,
    allow_lookalike_ids: AllowLookalikeIdsOpt = False,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> ImportResult:
    """Import a DVC-tracked ImageFolder tree (or label file) ``path`` of git repository
    ``repo`` at ``rev`` as a snapshot of ``dataset`` (the command's ``--as``), with its
    provenance: repository, requested rev, commit, path and DVC's md5. ``classes``: a label
    file's class names, as ``add`` takes them (a list, or a file with one per line).
    ``allow_lookalike_ids``: as ``add``'s."""
    options = options_of(ingest_dvc.DvcImport, locals())
    line = command_of(command, "import_dvc", repo, path)
    return ingest_dvc.import_dvc(
        find_registry(registry), options, progress=hook(progress), command=line
    )
