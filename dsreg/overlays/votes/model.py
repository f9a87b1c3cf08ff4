"""What reading a votes file produces, for both formats, and the votes CSV's columns.

A file is read into `VoteColumns`: one entry per record, in file order, its labels as class
indices and its counts as numbers, with the routes by which its records name examples. Matching
those routes to the snapshot's rows, checking that every record fits, and building the
corrections table are the same for every format (``fit.py``); why a file is refused is
worded in one place (``refusals.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa

from dsreg._util.inputs import shown
from dsreg.errors import VotesError

__all__ = [
    "COUNT_COLUMNS",
    "CSV_COLUMNS",
    "CSV_HEADER",
    "DIGITS",
    "INT32_MAX",
    "SHOWN",
    "Classes",
    "Count",
    "Examples",
    "KeyRoute",
    "RowMatch",
    "RowRoute",
    "VoteColumns",
    "VoteImport",
    "VoteSnapshot",
    "queue_inputs",
]

SHOWN: Final = 5
INT32_MAX: Final = 2**31 - 1
DIGITS: Final = re.compile(r"[0-9]+")

# The header of a votes CSV, and its columns of counts in the order a line's faults are looked for.
CSV_HEADER: Final = "example_id,given_label,suggested_label,given,guessed,both,neither"
CSV_COLUMNS: Final = tuple(CSV_HEADER.split(","))
COUNT_COLUMNS: Final = CSV_COLUMNS[3:]

# The snapshot's ``example_id`` and ``label`` columns in row order: the path of a verified
# Parquet file (the registry's examples object) or an Arrow table. Called once the votes pass.
Examples = Callable[[], "Path | pa.Table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteImport:
    """The corrections of a ``validated`` overlay, ready to be stored.

    Attributes
    ----------
    table : pyarrow.Table
        One row per voted example, sorted by ``row``, with the columns and types of
        `CORRECTIONS_SCHEMA`: ``row``, ``example_id``, ``given_label``, ``suggested_label``,
        ``verdict``, ``score`` (always null: votes carry no score), ``votes``.
    summary : dict of str to int
        ``checked`` (records), ``errors`` (checked minus non_error) and one count per verdict,
        every verdict present even when 0.
    params : dict
        Provenance for the overlay's producer: ``format``, ``threshold`` and ``raters`` (the
        votes per record when every record has the same total, else None); ``reviewers``
        (sorted) when the records name them, as ``dsreg review --export`` writes them.
    inputs : dict of str to str
        Digests the votes were cast about, for the producer's inputs: ``queue``, the overlay
        whose flagged rows were reviewed, when the records name it (``dsreg review``).
    joined_labels : ndarray of int64, shape (m,)
        The snapshot's label at each row of ``table`` (in its order), as the join that matched
        the records read them from the examples it was given. ``votes_overlay`` hands them to
        ``write_overlay`` as the row check (`JoinedRows`).
    """

    table: pa.Table
    summary: dict[str, int]
    params: dict[str, str | int | list[str] | None]
    inputs: dict[str, str]
    joined_labels: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class Classes:
    """A snapshot's class names and the two ways a votes file may name a class."""

    names: tuple[str, ...]
    by_name: dict[str, int]
    # Only names that stay unique without case: "Negative" may mean "negative", but never one
    # of two classes that differ by case.
    by_folded: dict[str, int]

    @classmethod
    def of(cls, names: Sequence[str], *, dataset: str) -> Classes:
        """The lookups of ``names``, which must be non-empty and unique."""
        names = tuple(names)
        if not names or len(set(names)) != len(names):
            raise VotesError(f"classes of {dataset!r} must be non-empty and unique; got {names}")
        folded: dict[str, list[int]] = {}
        for index, name in enumerate(names):
            folded.setdefault(name.casefold(), []).append(index)
        return cls(
            names=names,
            by_name={name: index for index, name in enumerate(names)},
            by_folded={key: found[0] for key, found in folded.items() if len(found) == 1},
        )

    def index(self, value: object) -> int | None:
        """A JSON label: an integer is an index, a string a class name (exact, or the only one
        matching without case)."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value if 0 <= value < len(self.names) else None
        if isinstance(value, str):
            found = self.by_name.get(value)
            return found if found is not None else self.by_folded.get(value.casefold())
        return None

    def cell(self, cell: str) -> int | str:
        """A CSV label cell (stripped): a class index, or why the cell is not one.

        A CSV cell has no type, so ``"3"`` may be a class name or an index; when both readings
        exist they must agree, else the cell is ambiguous (classes ``["1", "0"]``).
        """
        by_name = self.index(cell)
        # An index of more than 18 digits names no class (and Python will not convert 4,300).
        by_index = int(cell) if DIGITS.fullmatch(cell) and len(cell) <= 18 else None
        if by_index is not None and by_index >= len(self.names):
            by_index = None
        if by_name is not None and by_index is not None and by_name != by_index:
            return f"{shown(cell)} (class {by_name} by name, class {by_index} by index: ambiguous)"
        found = by_name if by_name is not None else by_index
        return found if found is not None else shown(cell)

    def any_name_is_an_index(self) -> bool:
        """Whether some class name is all digits, so that a digit cell may be ambiguous."""
        return any(DIGITS.fullmatch(name) for name in self.names)

    def describe(self, label: int) -> str:
        """A label as messages show it: its index and its class name."""
        if 0 <= label < len(self.names):
            return f"{label} ({self.names[label]!r})"
        return str(label)


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteSnapshot:
    """The snapshot the votes are about: its name (for messages), its classes, and its examples,
    read only once the votes themselves pass."""

    dataset: str
    classes: Classes
    examples: Examples


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRoute:
    """Records that name their example by id: ``keys[j]`` is the id record ``records[j]``
    names (``records`` None: every record, in order)."""

    keys: pa.Array
    records: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True, slots=True, kw_only=True)
class RowRoute:
    """Records that name their example by position: ``rows[j]`` for record ``records[j]``."""

    rows: np.ndarray
    records: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    """One vote count of every record: its value (0 where absent), and where it is present."""

    values: np.ndarray
    present: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteColumns:
    """A votes file read: one entry per record, in file order.

    Attributes
    ----------
    routes : tuple of KeyRoute or RowRoute
        How records name their examples, tried in this order: a record's example is found by
        the first route that holds the record and finds a row.
    given : ndarray of int32
        The label each record says its example has (a class index).
    suggested : ndarray of int32
        The label raters were asked about, where ``has_suggested``.
    has_suggested : ndarray of bool
    counts : dict of str to Count
        The vote counts the format holds, by name (``COUNT_FIELDS``); the others are null.
    refs : tuple of str, or None
        How messages name each record (``id 7``, ``url '…'``); None for a CSV, whose records
        are named by line (``line 12 ('img/3.png')``), found only when a refusal needs them.
    reviewers : tuple of str
        Every name the records give as reviewers, sorted (``dsreg review --export``).
    queues : tuple of str or None
        The review queue each record names (``dsreg review --export``), or none at all.
    wanted : ndarray of int32, or None
        The votes each record's review asked for, where the record has fewer (its
        ``votes_wanted``, ``dsreg review --export``); 0 elsewhere. None when no record says.
    unknown : tuple of str
        The records' labels that are not classes, as messages name them; refused by
        ``fit_votes`` with the other ways a record may not fit the snapshot.
    """

    routes: tuple[KeyRoute | RowRoute, ...]
    given: np.ndarray
    suggested: np.ndarray
    has_suggested: np.ndarray
    counts: dict[str, Count]
    refs: tuple[str, ...] | None = None
    reviewers: tuple[str, ...] = ()
    queues: tuple[str | None, ...] = ()
    wanted: np.ndarray | None = None
    unknown: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.given)


def queue_inputs(path: Path, queues: Sequence[str | None]) -> dict[str, str]:
    """The producer inputs the records' queues give: ``{"queue": digest}`` when every record
    names the same one, nothing when none names one; a mix is refused."""
    found = set(queues)
    if found <= {None}:
        return {}
    if len(found) != 1:
        raise VotesError(
            f"{path}: records name {len(found)} different review queues "
            f"({sorted(str(q) for q in found)}); export one queue's votes per file"
        )
    queue = found.pop()
    return {} if queue is None else {"queue": queue}


@dataclass(frozen=True, slots=True, kw_only=True)
class RowMatch:
    """Each record's row (-1: none found), the snapshot's label there, and its example id,
    ``ids[id_at[i]]`` for record i."""

    rows: np.ndarray
    labels: np.ndarray
    ids: pa.Array
    id_at: np.ndarray
