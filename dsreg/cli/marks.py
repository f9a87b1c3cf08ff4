"""The marks' commands: yank (and its undoing) and retire.

Apart from the other registry commands so that a command which only reads marks (a tag's
resolve, which warns of them) does not import the functions that write them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsreg.api import marks as marks_api
from dsreg.cli._command import command
from dsreg.cli._common import command_line, json_shown, printable, say

if TYPE_CHECKING:
    from dsreg.api import MarkResult


@command(
    marks_api.yank,
)
def yank(name: str, *, json: bool, **options: Any) -> None:
    """Yank a tag: left out of ls, still resolved when named exactly, with its reason."""
    show_marked(marks_api.yank(name, command=command_line(), **options), json=json)


@command(
    marks_api.retire,
)
def retire(dataset: str, *, json: bool, **options: Any) -> None:
    """Retire a dataset: every resolve of its tags names its successor and the reason."""
    show_marked(marks_api.retire(dataset, command=command_line(), **options), json=json)


def show_marked(res: MarkResult, *, json: bool) -> None:
    if json_shown(res, json=json):
        return
    if res.successor is not None:
        say(f"Retired {res.dataset} (successor {res.successor}): {printable(res.reason)}")
    elif res.undone:
        say(f"Lifted the yank of {res.dataset}@{res.tag}; 'dsreg ls' lists it again")
    else:
        say(f"Yanked {res.dataset}@{res.tag}: {printable(res.reason)} (see 'dsreg ls --all')")
