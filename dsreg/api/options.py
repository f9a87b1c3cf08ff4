"""How the library's parameters appear on the command line, declared once, on the functions.

A parameter annotated ``Annotated[T, Arg("help")]`` is an argument of its function's command,
one annotated ``Annotated[T, Opt("--name", help="…")]`` an option: the CLI builds each command
from its function's signature, so an option's name, help text, default and type are written
once, here in the library. A parameter with neither marker is the library's alone: the CLI
fills ``command=`` and ``progress=`` itself, and never offers the others (``chunk_rows=``).

The options several commands share are the aliases below, with the argument types every
function takes (``PathArg``, ``RegistryArg``). The CLI runs each command inside
``on_command_line``, so a refusal that names what the caller used (a missing extra) names
the command, not the function.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeAlias

from dsreg._util.extras import on_command_line
from dsreg.formats.manifests import TAG_VIEWS
from dsreg.registry.folder import Registry

__all__ = [
    "AllowLookalikeIdsOpt",
    "Arg",
    "JobsOpt",
    "MoveTagOpt",
    "NewTagOpt",
    "Opt",
    "OverlayCitationOpt",
    "OverlayCreditOpt",
    "OverlayForceOpt",
    "OverlayTagOpt",
    "OverlayViewOpt",
    "PathArg",
    "ReadRemoteOpt",
    "RegistryArg",
    "RegistryOpt",
    "RemoteOptionsOpt",
    "SeedOpt",
    "TransferRemoteOpt",
    "on_command_line",
]

PathArg: TypeAlias = str | os.PathLike[str]
RegistryArg: TypeAlias = Registry | str | os.PathLike[str] | None


@dataclass(frozen=True, slots=True)
class Arg:
    """A command's argument. ``metavar``: the name shown, where it is not the parameter's;
    ``cli_type``: what the command line gives, where the parameter takes more (a path where a
    parameter also takes an array)."""

    help: str
    metavar: str | None = None
    cli_type: Any = None


@dataclass(frozen=True, slots=True, init=False)
class Opt:
    """A command's option: its names (default ``--parameter-name``; a bool option without names
    is a ``--name/--no-name`` pair), help text, and how the command line gives it.

    ``cli_type`` as for :class:`Arg`; ``comma_list``: the value is one text of items of that
    type separated by commas (``--top-k 1,5``), its default shown so; ``min``, ``metavar`` and
    ``show_default`` as click's."""

    decls: tuple[str, ...]
    help: str
    cli_type: Any = None
    comma_list: type[int] | type[str] | None = None
    min: int | None = None
    metavar: str | None = None
    show_default: bool = True

    def __init__(
        self,
        *decls: str,
        help: str,
        cli_type: Any = None,
        comma_list: type[int] | type[str] | None = None,
        min: int | None = None,
        metavar: str | None = None,
        show_default: bool = True,
    ) -> None:
        for name, value in (
            ("decls", decls),
            ("help", help),
            ("cli_type", cli_type),
            ("comma_list", comma_list),
            ("min", min),
            ("metavar", metavar),
            ("show_default", show_default),
        ):
            object.__setattr__(self, name, value)


# The library finds the registry (``Registry.find``: the option, else $DSREG_REGISTRY, else
# .dsreg here or above, else $DSREG_HOME) in the one place a Python caller's is found, so the
# option reads no environment variable itself; its help names the variable as click would.
RegistryOpt: TypeAlias = Annotated[
    RegistryArg,
    Opt(
        "--registry",
        help="Registry folder (default: .dsreg here or above, else $DSREG_HOME).  "
        "[env var: DSREG_REGISTRY]",
        show_default=False,
    ),
]

# A reading command's remote: no registry is needed with a URL (the per-user cache holds what
# is fetched; docs/remotes.md, "Reading a remote").
ReadRemoteOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        "--remote",
        "-r",
        help="Read from this remote: a remote's name, or a URL or folder (no registry needed: "
        "objects go to the per-user cache, $DSREG_CACHE).",
        show_default=False,
    ),
]

# push and pull.
TransferRemoteOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        "--remote",
        "-r",
        help="Remote name or URL (default: the default remote).",
        show_default=False,
    ),
]
JobsOpt: TypeAlias = Annotated[
    int | None,
    Opt("--jobs", "-j", help="Parallel transfers (default: per remote type).", min=1),
]
RemoteOptionsOpt: TypeAlias = Annotated[
    Mapping[str, Any] | Sequence[str] | None,
    Opt(
        "--option",
        "-o",
        help="A DVC remote option KEY=VALUE (e.g. endpointurl=…, region=…, profile=…); "
        "repeat for several. Secrets belong in the environment, never here.",
    ),
]

# add and import-dvc: the tag of the new revision; ids that look alike are refused unless
# allowed.
NewTagOpt: TypeAlias = Annotated[str | None, Opt(help="Tag the new revision, e.g. original.")]
MoveTagOpt: TypeAlias = Annotated[bool, Opt(help="Move --tag if it exists (the log keeps it).")]
AllowLookalikeIdsOpt: TypeAlias = Annotated[
    bool,
    Opt(
        "--allow-lookalike-ids",
        help="Keep example ids that differ only in Unicode normalisation (NFC/NFD) or in "
        "trailing whitespace of a path part, which are otherwise refused: a checkout on macOS "
        "or Windows writes them to one file.",
    ),
]

# Every overlay producer can tag a revision with the overlay it makes.
OverlayTagOpt: TypeAlias = Annotated[
    str | None, Opt(help="Also tag a revision with the new overlay.")
]
OverlayViewOpt: TypeAlias = Annotated[
    str | None, Opt(help=f"With --tag: its view (default {TAG_VIEWS['dsreg.detect']}).")
]
OverlayForceOpt: TypeAlias = Annotated[bool, Opt(help="With --tag: move it if it exists.")]
OverlayCitationOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="The reference of the corrections' source (the relabeling's or the votes' "
        "publication), a BibTeX file (.bib): kept in the overlay, repeated by every "
        "'dsreg cite' of a revision applying it."
    ),
]
OverlayCreditOpt: TypeAlias = Annotated[
    str | None,
    Opt(help="The reference of the corrections' source as plain text (as --citation)."),
]
SeedOpt: TypeAlias = Annotated[int, Opt(help="Seed of the bootstrap: the same seed, the same.")]
