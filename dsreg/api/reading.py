"""What the reading functions (``open``, ``show``, ``ls``, ``sql``, ``connect``, ``checkout``)
share when given ``remote=``: the registry they read into (the one found as ever, else the
per-user cache registry), how a spec resolves there and how objects that vanish or break there
during the read come again (``dsreg.remote.read``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import find_registry
from dsreg.api.options import RegistryArg
from dsreg.errors import RegistryNotFoundError
from dsreg.registry.folder import Registry, Resolved

# A remote's file systems import fsspec and DVC: only a read of a remote needs them.
with lazy_imports():
    from dsreg.remote import read as remote_reading
    from dsreg.remote import transfer

if TYPE_CHECKING:
    from dsreg.remote.read import RemoteRead
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
    reg, cached = registry_for_remote(registry)
    return reg, remote_reading.reading_remote(reg, remote, cached=cached), cached


def remote_reader(
    registry: RegistryArg, remote: str, *, progress: ProgressHook = no_progress
) -> RemoteRead:
    """A read of ``remote`` into the registry found (or the cache), holding no lock: for a
    connection that lives as long as its caller wants (``connect``)."""
    reg, rs, cached = remote_store(registry, remote)
    return remote_reading.RemoteRead(reg, rs, cached=cached, progress=progress)


@contextlib.contextmanager
def remote_read(
    registry: RegistryArg, remote: str, *, progress: ProgressHook = no_progress
) -> Iterator[RemoteRead]:
    """A command's read of ``remote``, holding the registry's lock, shared, until it ends: a gc
    (which takes the lock exclusive) waits for the read, and never removes what the read
    fetched and goes on reading (docs/remotes.md, "Reading a remote")."""
    reader = remote_reader(registry, remote, progress=progress)
    with reader.locked():
        yield reader


def read_remote_revision(reader: RemoteRead, spec: str, remote: str, *, payloads: bool) -> Resolved:
    """Resolve ``spec`` with the remote and fetch what it lacks, verified: with ``payloads``
    everything (``open``, ``checkout``), else the manifests and tables (``show``).

    In a registry of one's own the spec resolves there first; a revision fetched whole for
    ``open`` or ``checkout`` has its remote tag recorded there, as a pull would. The cache
    registry records no tag: a tag is read from the remote each time."""
    if payloads and not reader.cached:
        return transfer.fetch_for_open(reader.reg, spec, remote).resolved
    return reader.revision(spec, payloads=payloads)
