"""Why a votes CSV is refused, line by line: the record-by-record checks, run only on refusal.

The columnar reader (``csvfile.py``) decides whether a file is taken; when it is not, these
passes say why, in words that name the lines at fault. ``explain_refusal`` streams the file
with Python's csv reader, keeping no record, and raises the first of: the file is not UTF-8
text or is empty; a CSV syntax error anywhere (reported before any line's content); a header
that is not the votes header; the first malformed line; every label that is not a class (the
first five named); no votes at all. ``name_lines`` finds how those messages name given records
(``line 12 ('img/3.png')``) for refusals found by the join: unknown ids, examples voted twice,
given labels that differ from the snapshot's.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa

from dsreg._util.inputs import shown
from dsreg.errors import VotesError
from dsreg.overlays.votes.model import (
    DIGITS,
    INT32_MAX,
    SHOWN,
    Classes,
    no_votes,
    refuse_unknown_labels,
)

__all__ = ["CSV_COLUMNS", "CSV_HEADER", "explain_refusal", "name_lines", "not_csv"]

CSV_HEADER: Final = "example_id,given_label,suggested_label,given,guessed,both,neither"
CSV_COLUMNS: Final = tuple(CSV_HEADER.split(","))
# The counts a line holds, in the order a line's faults are looked for.
COUNT_COLUMNS: Final = CSV_COLUMNS[3:]
_CHUNK: Final = 1 << 20


def explain_refusal(path: Path, classes: Classes, *, dataset: str) -> None:
    """Raise the refusal of a votes CSV that the record-by-record reading of the file gives;
    return when it finds nothing to refuse.

    Raises
    ------
    VotesError
        Not UTF-8, empty, a CSV syntax error, a wrong header, a malformed line, labels that are
        not classes, no votes.
    InputPathError
        The file cannot be read.
    """
    _check_text(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        try:
            for _ in reader:
                pass
        except csv.Error as exc:
            raise not_csv(path, exc, reader.line_num) from exc
    unknown: list[str] = []
    unknown_count = 0
    records = 0
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = [name.strip() for name in next(reader)]
        _check_header(path, header)
        for line in reader:
            if any(cell.strip() for cell in line):
                found = _line_faults(path, header, reader.line_num, line, classes)
                unknown.extend(found[: SHOWN - len(unknown)])
                unknown_count += len(found)
                records += 1
    refuse_unknown_labels(path, unknown, dataset, classes, count=unknown_count)
    if not records:
        raise no_votes(path)


def not_csv(path: Path, exc: csv.Error, line: int) -> VotesError:
    """Python's csv error as the refusal says it; a cell past the csv module's limit is named
    with the limit (raising it is a process-wide setting, and no votes cell is that long)."""
    if "field larger than field limit" in str(exc):
        return VotesError(
            f"{path}: line {line} holds a cell longer than {csv.field_size_limit():,} "
            "characters, the most dsreg reads of one votes cell; check the file"
        )
    return VotesError(f"{path} is not valid CSV: {exc} (line {line})")


def name_lines(
    path: Path, records: Iterable[int], ids: pa.Array, *, whole: bool = False
) -> dict[int, str] | None:
    """How refusals name each of ``records`` (indices in file order, blank lines skipped):
    ``line N ('id')``, found by one streaming pass of Python's csv reader that stops after the
    last of them (with ``whole``, at the end of the file, so that a syntax error anywhere gives
    None). None also if a record's id there is not ``ids[record]``, as the columnar reader
    read it."""
    want = set(records)
    if not want:
        return {}
    last = max(want)
    out: dict[int, str] = {}
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = [name.strip() for name in next(reader)]
            column = header.index("example_id")
            record = 0
            for line in reader:
                if not any(cell.strip() for cell in line):
                    continue
                if record in want:
                    if len(line) != len(header) or line[column].strip() != ids[record].as_py():
                        return None
                    out[record] = f"line {reader.line_num} ({line[column].strip()!r})"
                    if record == last and not whole:
                        break
                record += 1
    except (OSError, UnicodeDecodeError, csv.Error, StopIteration, ValueError):
        return None
    return out if len(out) == len(want) else None


def _check_text(path: Path) -> None:
    """Refuse a file that is not UTF-8 (naming the first bad byte, counted after a byte-order
    mark) or holds nothing but white space, streaming it."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    fed = 0
    text = False
    with open(path, "rb") as f:
        chunk = f.read(_CHUNK)
        if chunk.startswith(codecs.BOM_UTF8):
            chunk = chunk[len(codecs.BOM_UTF8) :]
        while True:
            final = not chunk
            pending = len(decoder.getstate()[0])
            try:
                text = bool(decoder.decode(chunk, final=final).strip()) or text
            except UnicodeDecodeError as exc:
                raise VotesError(
                    f"{path} is not UTF-8 text (byte {fed - pending + exc.start}); votes files "
                    "are JSON or CSV"
                ) from exc
            if final:
                break
            fed += len(chunk)
            chunk = f.read(_CHUNK)
    if not text:
        raise VotesError(f"{path} is empty; expected votes in JSON or CSV")


def _check_header(path: Path, header: Sequence[str]) -> None:
    if sorted(header) != sorted(CSV_COLUMNS):
        missing = [name for name in CSV_COLUMNS if name not in header]
        extra = [name for name in header if name not in CSV_COLUMNS]
        raise VotesError(
            f"{path}: the CSV header must be {CSV_HEADER}; missing {missing}, unexpected {extra}"
        )


def _line_faults(
    path: Path, header: list[str], line_num: int, line: list[str], classes: Classes
) -> list[str]:
    """Raise for a malformed line; return its labels that are not classes, as the refusal
    names them (its given label before its suggested one)."""
    where = f"{path}: line {line_num}"
    if len(line) != len(header):
        raise VotesError(f"{where} has {len(line)} fields; the header has {len(header)}")
    cells = {name: cell.strip() for name, cell in zip(header, line, strict=True)}
    if not cells["example_id"]:
        raise VotesError(f"{where} has no example_id")
    ref = f"line {line_num} ({cells['example_id']!r})"
    unknown = []
    given = classes.cell(cells["given_label"])
    if isinstance(given, str):
        unknown.append(f"{ref}: given label {given}")
    if cells["suggested_label"]:
        suggested = classes.cell(cells["suggested_label"])
        if isinstance(suggested, str):
            unknown.append(f"{ref}: suggested label {suggested}")
    counts: dict[str, int | None] = dict.fromkeys(COUNT_COLUMNS)
    for name in COUNT_COLUMNS:
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
    return unknown
