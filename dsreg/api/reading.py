"""The door of every read: the ``Reader`` a call reads through, chosen once from its
``registry=`` and ``remote=`` (docs/architecture.md, "One door").

Without ``remote``, the local registry (``LocalReader``). With ``remote`` (a configured name,
or a URL or folder on any machine), a ``RemoteReader`` of that remote into the registry found
as ever, else the per-user cache registry, holding the registry's lock, shared, for the whole
read: a gc (which takes it exclusive) waits, and never removes what the read fetched and goes
on reading (docs/remotes.md, "Reading a remote"). Each spec is then resolved once, with
``reader.revision(spec)``, and the layers below take the ``Resolved`` handle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.common import find_registry, local_reader
from dsreg.api.options import RegistryArg
from dsreg.errors import RegistryNotFoundError
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Reader

# A remote's file systems import fsspec and DVC: only a read of a remote needs them.
with lazy_imports():
    from dsreg.remote import read as remote_reading

if TYPE_CHECKING:
    from dsreg.remote.read import RemoteReader
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
    registry: RegistryArg,
    remote: str,
    *,
    payloads: bool = False,
    progress: ProgressHook = no_progress,
) -> RemoteReader:
    """A read of ``remote`` into the registry found (or the cache), holding no lock: for a
    connection that lives as long as its caller wants (``connect``)."""
    reg, rs, cached = remote_store(registry, remote)
    return remote_reading.RemoteReader(
        reg, rs, remote=remote, cached=cached, payloads=payloads, progress=progress
    )


@contextlib.contextmanager
def reader(
    registry: RegistryArg,
    remote: str | None = None,
    *,
    payloads: bool = False,
    progress: ProgressHook = no_progress,
) -> Iterator[Reader]:
    """The reader of one call: the local registry, or (``remote``) that remote's, holding the
    registry's lock until the call's read ends. ``payloads``: a remote's revisions are
    fetched with their payloads (``open``, ``checkout``), else their manifests and tables."""
    if remote is None:
        yield local_reader(registry)
        return
    read = remote_reader(registry, remote, payloads=payloads, progress=progress)
    with read.locked():
        yield read
