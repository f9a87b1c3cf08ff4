"""Withdrawing what a registry offers: ``yank`` a tag, ``retire`` a dataset."""

from __future__ import annotations

from typing import Annotated

from dsreg.api.common import command_of, find_registry
from dsreg.api.options import Arg, Opt, RegistryOpt
from dsreg.ops.marks import MarkResult, retire_dataset, yank_tag

__all__ = ["retire", "yank"]

ReasonOpt = Annotated[
    str | None, Opt("--reason", help="Why, in one line: shown wherever it resolves.")
]


def yank(
    name: Annotated[str, Arg("The tag to yank: dataset@tag.")],
    *,
    reason: ReasonOpt = None,
    undo: Annotated[
        bool, Opt("--undo", help="Lift the yank (logged too); no reason needed.")
    ] = False,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> MarkResult:
    """Yank tag ``name`` (``dataset@tag``) for ``reason``, as PyPI yanks a release: ``ls``
    leaves it out (``ls --all`` lists it, marked yanked), and it still resolves when named
    exactly, warning with its reason (``YankedWarning``; the CLI prints one line on stderr).
    ``undo=True`` lifts the yank. Both are logged in the dataset's ref log. An unknown tag
    raises ``RevisionNotFoundError``; an empty reason ``InvalidInputError``."""
    recorded = command_of(command, "yank", name)
    return yank_tag(find_registry(registry), name, reason, undo=undo, command=recorded)


def retire(
    dataset: Annotated[str, Arg("The dataset to retire.")],
    *,
    successor: Annotated[
        str | None, Opt("--successor", help="The dataset that replaces it (held here).")
    ] = None,
    reason: ReasonOpt = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> MarkResult:
    """Retire ``dataset`` in favour of ``successor`` for ``reason``: every resolve of one of
    its tags warns, naming the successor (``YankedWarning``). Logged in the dataset's ref
    log. A missing successor dataset raises ``RevisionNotFoundError``; an empty reason
    ``InvalidInputError``."""
    if successor is None:
        from dsreg.errors import InvalidInputError

        raise InvalidInputError(f"retiring {dataset!r} needs --successor OTHER (a dataset here)")
    recorded = command_of(command, "retire", dataset)
    return retire_dataset(find_registry(registry), dataset, successor, reason, command=recorded)
