"""Yanked tags and retired datasets, as PyPI yanks a release (PEP 592).

A yank is a file ``yanked/<dataset>/<tag>`` and a retirement a file ``retired/<dataset>``, each
canonical JSON (``{"reason", "revision"}``; ``{"reason", "successor"}``), written atomically
under the dataset's lock after its line in ``logs/<dataset>.jsonl`` (events ``yank``,
``unyank``, ``retire``), so ``dsreg log`` lists them among the tags' moves. A yanked tag is left
out of listings and of any default choice of tag, and still resolves when named exactly; its
reason (and a retired dataset's successor) is told on every resolve, as a ``YankedWarning``.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from dsreg._util.fs import write_atomic
from dsreg.errors import InvalidInputError, StorageError, YankedWarning
from dsreg.formats.names import check_name

__all__ = [
    "Retirement",
    "Yank",
    "check_reason",
    "read_retirement",
    "read_yanks",
    "warn_marks",
]

YANKED = "yanked"
RETIRED = "retired"
_MAX_REASON = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Yank:
    reason: str
    revision: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Retirement:
    reason: str
    successor: str


def check_reason(reason: str | None, *, what: str) -> str:
    """``reason`` stripped; ``InvalidInputError`` if it is empty, has control characters, or
    is longer than 1000 characters."""
    text = (reason or "").strip()
    if not text:
        raise InvalidInputError(f"{what} needs a reason: give --reason TEXT (not empty)")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidInputError(f"the reason for {what} holds a control character; write one line")
    if len(text) > _MAX_REASON:
        raise InvalidInputError(f"the reason for {what} is {len(text)} characters; at most 1000")
    return text


def mark_bytes(fields: dict[str, str]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def write_mark(path: Path, data: bytes | None) -> None:
    """Write (``data``) or remove (``None``) the mark at ``path``, durably."""
    if data is not None:
        write_atomic(path, data)
        return
    os.unlink(path)
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def _read(path: Path) -> dict[str, str] | None:
    """A mark's fields, or ``None`` if there is none or it is not a mark (a damaged mark
    hides nothing: the tag is served as if unmarked, and ``dsreg verify`` reads the refs)."""
    try:
        obj = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StorageError(f"cannot read {path}: {e}") from e
    if not isinstance(obj, dict) or not all(isinstance(v, str) for v in obj.values()):
        return None
    return obj


def yank_path(root: Path, dataset: str, tag: str) -> Path:
    return root / YANKED / check_name(dataset, what="dataset name") / check_name(tag, what="tag")


def retired_path(root: Path, dataset: str) -> Path:
    return root / RETIRED / check_name(dataset, what="dataset name")


def read_yanks(root: Path, dataset: str) -> dict[str, Yank]:
    """``{tag: Yank}`` of one dataset's yanked tags."""
    folder = root / YANKED / dataset
    if not folder.is_dir():
        return {}
    out = {}
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        fields = _read(p)
        if fields is not None and "reason" in fields:
            out[p.name] = Yank(reason=fields["reason"], revision=fields.get("revision", ""))
    return out


def read_retirement(root: Path, dataset: str) -> Retirement | None:
    fields = _read(retired_path(root, dataset))
    if fields is None or "reason" not in fields or "successor" not in fields:
        return None
    return Retirement(reason=fields["reason"], successor=fields["successor"])


def warn_marks(root: Path, dataset: str, tag: str) -> None:
    """Warn (``YankedWarning``) if ``dataset@tag`` is yanked or ``dataset`` retired."""
    yank = read_yanks(root, dataset).get(tag)
    if yank is not None:
        warnings.warn(f"{dataset}@{tag} is yanked: {yank.reason}", YankedWarning, stacklevel=3)
    retired = read_retirement(root, dataset)
    if retired is not None:
        warnings.warn(
            f"dataset {dataset} is retired: {retired.reason}; use {retired.successor} instead",
            YankedWarning,
            stacklevel=3,
        )
