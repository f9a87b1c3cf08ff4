"""What ``dsreg review --export`` adds to the records of a label-errors votes file: who voted
(``reviewers``) and about which queue overlay (``queue``). Other readers of the format ignore
both; ``votes.py`` puts them in the overlay's producer (``params.reviewers``, ``inputs.queue``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dsreg.errors import VotesError
from dsreg.objects.digest import is_digest

__all__ = ["check_queue", "check_reviewers", "queue_inputs"]


def check_reviewers(where: str, value: object) -> tuple[str, ...]:
    """A record's ``reviewers``: absent, or a list of non-empty names."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise VotesError(f"{where}: reviewers must be a list of names; got {value!r}")
    return tuple(value)


def check_queue(where: str, value: object) -> str | None:
    """A record's ``queue``: absent, or a full overlay digest."""
    if value is None:
        return None
    if not isinstance(value, str) or not is_digest(value):
        raise VotesError(f"{where}: queue must be an overlay digest (blake3:…); got {value!r}")
    return value


def queue_inputs(path: Path, queues: Sequence[str | None]) -> dict[str, str]:
    """The producer inputs the records' queues give: ``{"queue": digest}`` when every record
    names the same one, nothing when none names one; a mix is refused."""
    found = set(queues)
    if found == {None}:
        return {}
    if len(found) != 1:
        raise VotesError(
            f"{path}: records name {len(found)} different review queues "
            f"({sorted(str(q) for q in found)}); export one queue's votes per file"
        )
    queue = found.pop()
    return {} if queue is None else {"queue": queue}
