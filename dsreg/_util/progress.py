"""Progress reporting without printing: the library calls a hook, the CLI draws the bar."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ProgressHook", "no_progress"]

# hook(task, done, total): ``total`` is the number of units (files, rows) of ``task``.
ProgressHook = Callable[[str, int, int], None]


def no_progress(task: str, done: int, total: int) -> None:
    """The default hook: says nothing."""
