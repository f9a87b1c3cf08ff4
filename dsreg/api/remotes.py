"""Remotes: remote_add/ls/remove, push, pull, clone, import_dvc."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import PathArg, RegistryArg, command_of, find_registry, specs_of

if TYPE_CHECKING:
    from dsreg.ingest.dvc import ImportResult
    from dsreg.remote.config import RemoteConfig
    from dsreg.remote.transfer import CloneResult, PullResult, PushResult


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
    wanted = specs_of(specs)
    return do_push(
        reg,
        wanted,
        remote=remote,
        force=force,
        jobs=jobs,
        progress=progress or no_progress,
        command=command if command is not None else command_of("push", *wanted),
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
    wanted = specs_of(specs)
    return do_pull(
        reg,
        wanted,
        remote=remote,
        force=force,
        jobs=jobs,
        progress=progress or no_progress,
        command=command if command is not None else command_of("pull", *wanted),
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
        command=command if command is not None else command_of("clone", url),
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
    classes: PathArg | Sequence[str] | None = None,
    progress: ProgressHook | None = None,
    command: str | None = None,
    registry: RegistryArg = None,
    allow_lookalike_ids: bool = False,
) -> ImportResult:
    """Import a DVC-tracked ImageFolder tree (or label file) ``path`` of git repository
    ``repo`` at ``rev`` as a snapshot of ``dataset`` (the command's ``--as``), with its
    provenance: repository, requested rev, commit, path and DVC's md5. ``classes``: a label
    file's class names, as ``add`` takes them (a list, or a file with one per line).
    ``allow_lookalike_ids``: as ``add``'s."""
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
        classes=classes,
        progress=progress or no_progress,
        command=command if command is not None else command_of("import_dvc", repo, path),
        allow_lookalike_ids=allow_lookalike_ids,
    )
