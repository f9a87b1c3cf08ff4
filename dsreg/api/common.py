"""What every API function shares: the registry, found in one place, and what it records of a
call."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.api.options import PathArg, RegistryArg
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from dsreg.ops.overlay import Recording

__all__ = [
    "LINKS",
    "command_of",
    "find_registry",
    "hook",
    "local_reader",
    "options_of",
    "overlay_credit",
    "overlay_recording",
    "specs_of",
]

LINKS = ("hardlink", "symlink", "copy", "reflink")

Options = TypeVar("Options", bound="DataclassInstance")


def find_registry(registry: RegistryArg = None) -> Registry:
    """The registry ``registry`` names (a path or a ``Registry``); for ``None``,
    ``$DSREG_REGISTRY``, else ``.dsreg`` here or above, else ``$DSREG_HOME``.

    Raises ``RegistryNotFoundError`` (a ``FileNotFoundError``) when there is none.
    """
    return registry if isinstance(registry, Registry) else Registry.find(registry)


def local_reader(registry: RegistryArg = None) -> LocalReader:
    """The reader of the local registry (``find_registry``): where a command that writes
    resolves its specs, and every read without a remote."""
    return LocalReader(find_registry(registry))


def command_of(command: str | None, name: str, *args: object) -> str:
    """What the ref log records of a call: ``command`` when the caller gave one (the command
    line, as typed), else the library call, ``dsreg.name(args…)``."""
    if command is not None:
        return command
    return f"dsreg.{name}({', '.join(repr(a) for a in args)})"


def hook(progress: ProgressHook | None) -> ProgressHook:
    """The progress hook to call: ``progress``, or one that says nothing."""
    return progress or no_progress


def options_of(cls: type[Options], call: Mapping[str, Any]) -> Options:
    """The options dataclass ``cls`` from a call's own arguments (``call``, the function's
    ``locals()``): each field is the argument of its name, which the call must have. The public
    functions take the options one keyword each, as the command line offers them, and pass
    them on as one value."""
    return cls(**{f.name: call[f.name] for f in dataclasses.fields(cls) if f.init})


def specs_of(specs: str | Sequence[str] | None) -> tuple[str, ...]:
    if specs is None:
        return ()
    return (specs,) if isinstance(specs, str) else tuple(specs)


def overlay_credit(citation: PathArg | None, credit: str | None) -> dict[str, str] | None:
    """The ``credit`` an overlay's producer keeps, from ``--citation FILE.bib`` and
    ``--credit TEXT`` (read and checked as ``add`` reads them: a malformed file is refused
    before any work), or ``None`` when neither is given."""
    if citation is None and credit is None:
        return None  # without importing the ingest modules that read them
    from dsreg.ingest.add import read_credit

    read = read_credit(citation, credit)
    if read is None:
        return None
    made: dict[str, str] = read["credit"]  # type: ignore[assignment]
    return made


def overlay_recording(command: str, citation: PathArg | None, credit: str | None) -> Recording:
    """What a new overlay records of how it was made: ``command`` and the credit of
    ``overlay_credit(citation, credit)``."""
    from dsreg.ops.overlay import Recording

    return Recording(command=command, credit=overlay_credit(citation, credit))
