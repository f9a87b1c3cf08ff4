"""What every API function shares: the registry, found in one place, and the argument
types."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from dsreg.registry.folder import Registry

if TYPE_CHECKING:
    pass


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


def command_of(name: str, *args: object) -> str:
    """What the ref log records of a library call."""
    return f"dsreg.{name}({', '.join(repr(a) for a in args)})"


def specs_of(specs: str | Sequence[str] | None) -> tuple[str, ...]:
    if specs is None:
        return ()
    return (specs,) if isinstance(specs, str) else tuple(specs)
