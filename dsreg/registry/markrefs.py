"""Where yanks and retirements are stored: the ref folders ``yanked/<dataset>/<tag>`` and
``retired/<dataset>/<successor>`` (a registry's and a remote's), apart from the marks
themselves (``dsreg.registry.marks``) so that a resolve can look for one without reading any."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from dsreg.registry.refs import RefStore

__all__ = ["RETIRED", "YANKED", "may_be_marked", "retired_refs", "yank_refs"]

YANKED: Final = "yanked"
RETIRED: Final = "retired"


def yank_refs(root: Path) -> RefStore:
    return RefStore(
        root,
        refs=YANKED,
        name="the yank of {dataset}@{tag}",
        repair="yank it again with 'dsreg yank {dataset}@{tag} --reason TEXT', or remove the file",
    )


def retired_refs(root: Path) -> RefStore:
    return RefStore(
        root,
        refs=RETIRED,
        name="the retirement of {dataset} (successor {tag})",
        repair="retire it again with 'dsreg retire {dataset} --successor {tag} --reason TEXT', "
        "or remove the file",
    )


def may_be_marked(root: Path, dataset: str, tag: str) -> bool:
    """Whether ``dataset@tag`` may be yanked or ``dataset`` retired: a ref of either is in
    place. Two looks at the folders, so that a resolve of a tag nobody marked reads no mark."""
    return (root / YANKED / dataset / tag).is_file() or (root / RETIRED / dataset).is_dir()
