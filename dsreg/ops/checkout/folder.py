"""What a checkout folder holds before a checkout: dsreg's own names in it, its pin file
``.dsreg.json`` and the journal an interrupted checkout left (``journal``), read once, under
the folder's lock, into one ``FolderState`` that ``plan`` compares with the target.

A folder dsreg may not fill is refused here, before anything is touched: a path that is not a
folder, a folder of the user's own (files, and neither a pin nor a journal), a pin or journal
that does not validate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsreg.errors import DsregError, InputPathError, StorageError
from dsreg.formats.canonical import parse_json
from dsreg.formats.schemas import validate
from dsreg.ops.checkout.journal import JOURNAL, Journal

__all__ = [
    "LABELS_CSV",
    "PIN",
    "FolderState",
    "check_folder",
    "is_own_temp",
    "read_folder",
    "read_journal",
    "read_pin",
]

PIN = ".dsreg.json"
LABELS_CSV = "labels.csv"
# What an atomic write (``write_atomic``: ``.NAME.`` and ``mkstemp``'s 8 characters) of
# dsreg's own files in the folder's root leaves when the checkout is killed mid-write.
_OWN_TEMP = re.compile(
    "|".join(rf"\.{re.escape(n)}\.[a-z0-9_]{{8}}" for n in (PIN, JOURNAL, LABELS_CSV))
)


def is_own_temp(name: str) -> bool:
    """Whether ``name`` (in a checkout folder's root) is what a killed atomic write of the pin,
    the journal or ``labels.csv`` left: removed by the next checkout, never the user's."""
    return _OWN_TEMP.fullmatch(name) is not None


def check_folder(target: Path) -> None:
    """Refuse a ``target`` that exists and is not a folder."""
    if target.exists() and not target.is_dir():
        raise InputPathError(f"{target} exists and is not a folder; choose another path")


@dataclass(frozen=True, slots=True, kw_only=True)
class FolderState:
    """What a checkout folder holds before a checkout: its pin (``None``: none), the revision
    and link type the pin names, the journal an interrupted checkout left (``None``: none), and
    ``held``, ``{revision: link type}`` of every revision whose files the folder may hold (the
    pin's, and an interrupted switch's two)."""

    pin: dict[str, Any] | None
    revision: str | None
    link: str | None
    journal: Journal | None
    held: dict[str, str]


def read_folder(target: Path) -> FolderState:
    """The folder's pin and journal, validated; refuses a path that is not a folder and a
    folder of the user's own (files, and neither)."""
    check_folder(target)
    if not target.exists():
        return FolderState(pin=None, revision=None, link=None, journal=None, held={})
    pin = read_pin(target)
    journal = read_journal(target)
    if pin is None and journal is None and any(not is_own_temp(p.name) for p in target.iterdir()):
        raise InputPathError(
            f"{target} is not empty and holds no {PIN}; check out into an empty or new folder"
        )
    held = {} if journal is None else journal.held()
    if pin is not None:
        held[pin["revision"]] = pin.get("link", "")
    return FolderState(
        pin=pin,
        revision=None if pin is None else str(pin["revision"]),
        link=None if pin is None else pin.get("link"),
        journal=journal,
        held=held,
    )


def read_pin(target: Path) -> dict[str, Any] | None:
    """The pin file of a checkout folder, validated; ``None`` if it has none."""
    try:
        data = (target / PIN).read_bytes()
    except FileNotFoundError:
        return None
    pin = parse_json(data, what=str(target / PIN))
    validate(pin, "pin", what=str(target / PIN))
    assert isinstance(pin, dict)
    return pin


def read_journal(target: Path) -> Journal | None:
    """The folder's journal, validated; ``None`` if it has none. A damaged one is refused: the
    folder's content cannot be told from the user's own any more."""
    path = target / JOURNAL
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e.strerror}") from e
    try:
        obj = parse_json(data, what=str(path))
        validate(obj, "journal", what=str(path))
    except DsregError as e:
        raise InputPathError(
            f"{path} is damaged ({e}): dsreg cannot tell which files of {target} an "
            "interrupted checkout put there; check out into a new folder",
            path=str(path),
        ) from e
    assert isinstance(obj, dict)
    return Journal(
        from_revision=obj["from"],
        from_link=obj["from_link"],
        to_revision=obj["to"],
        link=obj["link"],
    )
