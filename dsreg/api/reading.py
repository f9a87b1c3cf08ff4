"""What the reading functions (``open``, ``show``, ``ls``, ``sql``, ``connect``, ``checkout``)
share when given ``remote=``: the registry they read into (the one found as ever, else the
per-user cache registry) and how a spec resolves there (``dsreg.remote.read``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import RegistryArg, find_registry
from dsreg.errors import RegistryNotFoundError
from dsreg.repo.registry import Registry, Resolved

if TYPE_CHECKING:
    from dsreg.remote.store import RemoteStore


def registry_for_remote(registry: RegistryArg) -> tuple[Registry, bool]:
    """``(registry, cached)``: the registry found as ever (``find_registry``); where there is
    none and none was named, the per-user cache registry (``$DSREG_CACHE``, else
    ``$XDG_CACHE_HOME/dsreg``, else ``~/.cache/dsreg``), made on first use."""
    try:
        return find_registry(registry), False
    except RegistryNotFoundError:
        if registry is not None:
            raise
        return Registry.cache(), True


def remote_store(registry: RegistryArg, remote: str) -> tuple[Registry, RemoteStore, bool]:
    """The registry to read into, the remote (a name configured there, or a URL), and whether
    the registry is the cache."""
    from dsreg.remote.read import reading_remote

    reg, cached = registry_for_remote(registry)
    return reg, reading_remote(reg, remote, cached=cached), cached


def read_remote_revision(
    spec: str,
    remote: str,
    registry: RegistryArg,
    *,
    payloads: bool,
    progress: ProgressHook = no_progress,
) -> tuple[Registry, Resolved]:
    """Resolve ``spec`` with ``remote`` and fetch what it lacks, verified: with ``payloads``
    everything (``open``, ``checkout``), else the manifests and tables (``show``).

    In a registry of one's own the spec resolves there first; a revision fetched whole for
    ``open`` or ``checkout`` has its remote tag recorded there, as a pull would. The cache
    registry records no tag: a tag is read from the remote each time."""
    from dsreg.remote.read import read_revision

    reg, rs, cached = remote_store(registry, remote)
    if payloads and not cached:
        from dsreg.remote.transfer import fetch_for_open

        return reg, fetch_for_open(reg, spec, remote).resolved
    resolved = read_revision(
        reg, rs, spec, payloads=payloads, local_first=not cached, progress=progress
    )
    return reg, resolved


def remote_resolver(
    registry: RegistryArg, remote: str
) -> tuple[Registry, Callable[[str], Resolved]]:
    """The registry a query over ``remote``'s revisions reads, and how a name in the query
    resolves: with the remote, fetching the revision's manifests and tables (never its
    payloads) before DuckDB reads them, verified."""
    from dsreg.remote.read import read_revision

    reg, rs, cached = remote_store(registry, remote)

    def resolve(spec: str) -> Resolved:
        return read_revision(reg, rs, spec, payloads=False, local_first=not cached)

    return reg, resolve
