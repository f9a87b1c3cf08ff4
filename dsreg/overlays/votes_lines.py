"""The record-by-record reader of a votes CSV: one record per line, and messages that name the
lines at fault.

``parse_csv`` reads text held in memory (``import_votes``' path for any file the columnar
reader of ``votes_csv`` does not take as it is). ``check_csv`` runs the same checks streaming
over the file, keeping no record: a file refused for a malformed line, a label that is not a
class or holding no votes is then refused in bounded memory (#15), with the same message, before
the snapshot's ids are read for the record-by-record path.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import numpy as np

from dsreg._util.inputs import shown
from dsreg.errors import VotesError
from dsreg.formats.corrections import COUNT_FIELDS
from dsreg.overlays.votes_base import (
    DIGITS,
    INT32_MAX,
    SHOWN,
    Record,
    VoteSnapshot,
    refuse_unknown_labels,
)

__all__ = ["CSV_COLUMNS", "CSV_HEADER", "check_csv", "csv_label", "no_votes", "parse_csv"]

CSV_HEADER: Final = "example_id,given_label,suggested_label,given,guessed,both,neither"
CSV_COLUMNS: Final = tuple(CSV_HEADER.split(","))


def no_votes(path: Path) -> VotesError:
    return VotesError(f"{path} holds no votes; expected at least one record")


class _Unknown:
    """Unknown labels as found: the first few worded, all of them counted."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.count = 0

    def add(self, problem: str) -> None:
        if len(self.shown) < SHOWN:
            self.shown.append(problem)
        self.count += 1

    def refuse(self, path: Path, snapshot: VoteSnapshot) -> None:
        refuse_unknown_labels(path, self.shown, snapshot, count=self.count)


def parse_csv(path: Path, text: str, snapshot: VoteSnapshot) -> list[Record]:
    """The records of a votes CSV, one per line; refuses the first malformed line by number
    and every unknown label at once."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
        lines = [(reader.line_num, line) for line in reader if any(cell.strip() for cell in line)]
    except csv.Error as exc:
        raise _not_csv(path, exc, reader.line_num) from exc
    _check_header(path, header)
    unknown = _Unknown()
    records = [_record(path, header, n, line, snapshot, unknown) for n, line in lines]
    unknown.refuse(path, snapshot)
    return records


def _not_csv(path: Path, exc: csv.Error, line: int) -> VotesError:
    """Python's csv error as the refusal says it; a cell past the csv module's limit is named
    with the limit (raising it is a process-wide setting, and no votes cell is that long)."""
    if "field larger than field limit" in str(exc):
        return VotesError(
            f"{path}: line {line} holds a cell longer than {csv.field_size_limit():,} "
            "characters, the most dsreg reads of one votes cell; check the file"
        )
    return VotesError(f"{path} is not valid CSV: {exc} (line {line})")


def check_csv(path: Path, *, dataset: str, classes: tuple[str, ...]) -> bool:
    """Refuse what ``parse_csv`` (and ``import_votes`` right after it: a file with no votes)
    refuses, with the same message, reading the file twice as a stream: once for the CSV
    syntax (a syntax error anywhere is reported before any line's content, as ``parse_csv``
    does), once for each line's cells. False when it cannot tell (the file is unreadable, not
    UTF-8 or empty: the full reader reports those), True when the file passes.

    Raises
    ------
    VotesError
        A malformed file or line, labels that are not classes, no votes.
    """
    snapshot = VoteSnapshot.build(dataset, [], np.empty(0, dtype=np.int64), classes)
    try:
        if not _has_text(path):
            return False
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            try:
                header = [name.strip() for name in next(reader)]
                for _ in reader:
                    pass
            except csv.Error as exc:
                raise _not_csv(path, exc, reader.line_num) from exc
        _check_header(path, header)
        unknown = _Unknown()
        records = 0
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            next(reader)
            for line in reader:
                if any(cell.strip() for cell in line):
                    _record(path, header, reader.line_num, line, snapshot, unknown)
                    records += 1
        unknown.refuse(path, snapshot)
    except (OSError, UnicodeDecodeError, StopIteration):
        return False
    if not records:
        raise no_votes(path)
    return True


def _has_text(path: Path) -> bool:
    """Whether the file holds anything but white space (``import_votes`` calls it empty)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        return any(chunk.strip() for chunk in iter(lambda: f.read(1 << 20), ""))


def _check_header(path: Path, header: Iterable[str]) -> None:
    header = list(header)
    if sorted(header) != sorted(CSV_COLUMNS):
        missing = [name for name in CSV_COLUMNS if name not in header]
        extra = [name for name in header if name not in CSV_COLUMNS]
        raise VotesError(
            f"{path}: the CSV header must be {CSV_HEADER}; missing {missing}, unexpected {extra}"
        )


def _record(
    path: Path,
    header: list[str],
    line_num: int,
    line: list[str],
    snapshot: VoteSnapshot,
    unknown: _Unknown,
) -> Record:
    """One line's record; raises for a malformed line, adds its labels that are not classes to
    ``unknown``."""
    where = f"{path}: line {line_num}"
    if len(line) != len(header):
        raise VotesError(f"{where} has {len(line)} fields; the header has {len(header)}")
    cells = {name: cell.strip() for name, cell in zip(header, line, strict=True)}
    example_id = cells["example_id"]
    if not example_id:
        raise VotesError(f"{where} has no example_id")
    ref = f"line {line_num} ({example_id!r})"

    given = csv_label(snapshot, cells["given_label"])
    if isinstance(given, str):
        unknown.add(f"{ref}: given label {given}")
    guessed: int | str | None = None
    if cells["suggested_label"]:
        guessed = csv_label(snapshot, cells["suggested_label"])
        if isinstance(guessed, str):
            unknown.add(f"{ref}: suggested label {guessed}")

    counts: dict[str, int | None] = dict.fromkeys(COUNT_FIELDS)
    for name in ("given", "guessed", "both", "neither"):
        cell = cells[name]
        if not cell:
            continue
        # Ten digits at most before int(): Python refuses to convert 4,300.
        if not DIGITS.fullmatch(cell) or len(cell) > 10 or int(cell) > INT32_MAX:
            raise VotesError(f"{where}: {name} must be a whole number >= 0; got {shown(cell)}")
        counts[name] = int(cell)
    if counts["given"] is None:
        raise VotesError(f"{where} has no 'given' count")
    if not cells["suggested_label"] and counts["guessed"]:
        raise VotesError(
            f"{where} counts {counts['guessed']} votes for the suggested label but names "
            "none; fill suggested_label or leave guessed empty"
        )
    if cells["suggested_label"] and counts["guessed"] is None:
        raise VotesError(f"{where} names a suggested label but has no 'guessed' count")
    return Record(
        ref=ref,
        keys=(example_id,),
        row_id=None,
        given=given if isinstance(given, int) else -1,
        guessed=guessed if isinstance(guessed, int) else None,
        counts=counts,
    )


def csv_label(snapshot: VoteSnapshot, cell: str) -> int | str:
    """A class index, or why the cell is not one.

    A CSV cell has no type, so ``"3"`` may be a class name or an index; when both readings
    exist they must agree, else the cell is ambiguous (classes ``["1", "0"]``).
    """
    by_name = snapshot.class_index(cell)
    # An index of more than 18 digits names no class (and Python will not convert 4,300).
    by_index = int(cell) if DIGITS.fullmatch(cell) and len(cell) <= 18 else None
    if by_index is not None and by_index >= len(snapshot.classes):
        by_index = None
    if by_name is not None and by_index is not None and by_name != by_index:
        return f"{shown(cell)} (class {by_name} by name, class {by_index} by index: ambiguous)"
    found = by_name if by_name is not None else by_index
    return found if found is not None else shown(cell)
