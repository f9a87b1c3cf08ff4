"""The journal of a checkout under way: ``.dsreg.journal`` in the checkout folder.

A checkout that will touch its folder first writes the journal (atomically, fsynced, the
folder too): the revision the folder held and the one it is becoming, with their link types.
It removes the journal after the pin is written. A checkout interrupted in between (killed,
disk full, power lost) leaves it behind, and the folder may then hold files of either
revision, or of both. The next checkout, of any revision, finds it under the folder's lock
(``folder.read_folder`` reads it) and plans against both revisions (``plan.plan``): every file
either of them could have put there is compared, replaced or removed, and leftover temporary
files are removed; so the folder ends as exactly the new revision's view, and only then is the
journal removed.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dsreg._util.fs import write_durable
from dsreg.errors import StorageError

__all__ = ["JOURNAL", "Journal", "clear_journal", "journaled", "write_journal"]

JOURNAL = ".dsreg.journal"


@dataclass(frozen=True, slots=True, kw_only=True)
class Journal:
    """A switch from ``from_revision`` (``None``: an empty folder) to ``to_revision``, with the
    link type each revision's files were (or are being) put there with."""

    from_revision: str | None
    from_link: str | None
    to_revision: str
    link: str

    def to_bytes(self) -> bytes:
        """The journal file's bytes: a ``dsreg/journal/1`` document, keys sorted."""
        doc: dict[str, str | None] = {
            "schema": "dsreg/journal/1",
            "from": self.from_revision,
            "from_link": self.from_link,
            "to": self.to_revision,
            "link": self.link,
        }
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    def held(self) -> dict[str, str]:
        """``{revision: link type}`` of each revision whose files the folder may hold."""
        held = {self.to_revision: self.link}
        if self.from_revision is not None:
            held[self.from_revision] = self.from_link or ""
        return held


def write_journal(target: Path, data: bytes) -> None:
    """Write a journal (``Journal.to_bytes``) and make it durable (the file, then the folder
    naming it) before the folder is touched: one small file and two fsyncs per checkout,
    whatever its size."""
    path = target / JOURNAL
    try:
        write_durable(path, data)
    except OSError as e:
        raise StorageError(
            f"cannot write {path}: {e.strerror}; nothing in {target} was changed"
        ) from e


def clear_journal(target: Path) -> None:
    """Remove the journal: the folder holds exactly what its pin says."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target / JOURNAL)
    except OSError as e:
        # The folder holds the revision its pin names; the journal left says so to the next
        # checkout of it, which finishes (and removes it).
        raise StorageError(
            f"cannot remove {target / JOURNAL}: {e.strerror}; run 'dsreg checkout' into it "
            "again, of any revision, to finish"
        ) from e


@contextlib.contextmanager
def journaled(target: Path, journal: Journal | None, *, recovering: bool) -> Iterator[None]:
    """The journal around the work on a folder: ``journal`` (``None``: the plan touches
    nothing) is written, durably, before the block, and removed after it, as is one an
    interrupted checkout left (``recovering``). A block that fails leaves it: the folder may
    hold files of both revisions, and the next checkout, of any revision, finishes the switch."""
    if journal is not None:
        write_journal(target, journal.to_bytes())
    yield
    if journal is not None or recovering:
        clear_journal(target)
