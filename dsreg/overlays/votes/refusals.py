"""Why a votes file is refused, in words that name the records at fault.

The readers (``csvfile.py``, ``labelerrors.py``) and the match to the snapshot (``fit.py``)
decide whether a file is taken; when it is not, the functions here say why, and nothing is
stored. Each refusal counts every record at fault and names the first five: by the reference
the reader kept (``id 7``, ``url '…'``), or for a CSV by line (``line 12 ('img/3.png')``),
found by a pass of Python's csv reader that runs only then.

``explain_refusal`` streams a CSV with Python's csv reader, keeping no record, and raises the
first of: the file is not UTF-8 text or is empty; a CSV syntax error anywhere (reported before
any line's content); a header that is not the votes header; the first malformed line; every
label that is not a class; no votes at all. ``refuse_misfits`` refuses, after the match,
records that name no example, examples voted twice and given labels that are not the
snapshot's.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, NamedTuple, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsreg._util.inputs import shown
from dsreg.errors import VotesError
from dsreg.overlays.votes.model import (
    COUNT_COLUMNS,
    CSV_COLUMNS,
    CSV_HEADER,
    DIGITS,
    INT32_MAX,
    SHOWN,
    Classes,
    KeyRoute,
    RowMatch,
    RowRoute,
    VoteColumns,
    VoteSnapshot,
)

__all__ = [
    "UnknownLabel",
    "explain_refusal",
    "name_lines",
    "no_votes",
    "not_csv",
    "refuse_labels",
    "refuse_misfits",
    "refuse_unknown_labels",
    "refuse_unreadable",
]

_CHUNK: Final = 1 << 20


class UnknownLabel(NamedTuple):
    """A label cell that is not a class: its record (in file order), its column, and why."""

    record: int
    column: str  # "given" or "suggested"
    why: str


def refuse_labels(
    path: Path,
    unknown: Sequence[UnknownLabel],
    ids: pa.Array,
    classes: Classes,
    *,
    count: int,
    dataset: str,
) -> None:
    """Raise the refusal of label cells that are not classes: every one counted, the first
    `SHOWN` named by line. The whole file is read by Python's csv reader to find them, so a
    syntax error anywhere, which is reported first, is found too."""
    lines = name_lines(path, (u.record for u in unknown), ids, whole=True)
    if lines is None:
        refuse_unreadable(path, classes, dataset=dataset, why="its lines do not parse alike")
    problems = [f"{lines[u.record]}: {u.column} label {u.why}" for u in unknown]
    refuse_unknown_labels(path, problems, dataset, classes, count=count)


def refuse_unreadable(path: Path, classes: Classes, *, dataset: str, why: str) -> NoReturn:
    """Raise the refusal the record-by-record reading of the file gives, else one that says
    ``why`` the columnar reading refused it."""
    explain_refusal(path, classes, dataset=dataset)
    raise VotesError(f"{path} cannot be read as a votes CSV: {why}")


def no_votes(path: Path) -> VotesError:
    return VotesError(f"{path} holds no votes; expected at least one record")


def refuse_unknown_labels(
    path: Path, problems: Sequence[str], dataset: str, classes: Classes, *, count: int = 0
) -> None:
    """Label cells or values that are not classes (``count``: all of them, when ``problems``
    holds only the first few)."""
    names = list(classes.names[:10]) + (["…"] if len(classes.names) > 10 else [])
    refuse(
        path,
        problems,
        f"labels are not classes of {dataset!r}",
        f"Labels are class names (exact, or the only match ignoring case) or indices 0.."
        f"{len(classes.names) - 1} into the snapshot's classes {names}",
        count=count,
    )


def refuse_unknown_ids(
    path: Path, problems: Sequence[str], dataset: str, rows: int, hint: str, *, count: int
) -> None:
    """Records that name no example (``hint``: how to register a set named by row numbers)."""
    refuse(
        path,
        problems,
        f"records name no example of {dataset!r} ({rows} rows)",
        "A record names its example by the url path after /static/<name>/, a string id equal "
        "to an example id, or an integer id that is a row position; check that the file "
        "belongs to this dataset" + hint,
        count=count,
    )


def refuse_twice(path: Path, problems: Sequence[str], *, count: int) -> None:
    """Examples that more than one record votes on."""
    refuse(
        path,
        problems,
        "examples are voted more than once",
        "Keep one record per example, or merge their counts before importing",
        count=count,
    )


def refuse_label_mismatch(
    path: Path, problems: Sequence[str], dataset: str, hint: str, *, count: int
) -> None:
    """Records whose given label is not the snapshot's label of the row they name."""
    refuse(
        path,
        problems,
        f"records give a label that differs from the label of the row they name in {dataset!r}",
        "The records are mapped to the wrong examples (or the file belongs to another "
        "dataset, class order or revision); nothing was imported" + hint,
        count=count,
    )


def refuse(
    path: Path, problems: Sequence[str], headline: str, hint: str, *, count: int = 0
) -> None:
    """Raise a `VotesError` for ``problems`` (the first `SHOWN` of them named) unless there are
    none; ``count`` is their number when ``problems`` holds only the first few."""
    total = max(count, len(problems))
    if not total:
        return
    named = "; ".join(problems[:SHOWN])
    more = f"; and {total - SHOWN} more" if total > SHOWN else ""
    raise VotesError(f"{path}: {total} {headline}: {named}{more}. {hint}")


def refuse_misfits(
    path: Path,
    columns: VoteColumns,
    match: RowMatch,
    snapshot: VoteSnapshot,
    examples: Path | pa.Table,
) -> None:
    """Refuse, in this order, records that name no example, examples voted more than once and
    given labels that are not the snapshot's: every one counted, the first five named."""
    unknown = np.flatnonzero(match.rows < 0)
    if len(unknown):
        names = _names(path, columns, snapshot, unknown[:SHOWN])
        problems = [f"{names[i]} (tried {_tried(columns, i)})" for i in unknown[:SHOWN].tolist()]
        hint = _ids_hint(columns, examples, snapshot.dataset)
        refuse_unknown_ids(
            path, problems, snapshot.dataset, _rows(examples), hint, count=len(unknown)
        )
    order = np.argsort(match.rows, kind="stable")  # fast on rows sorted already
    again = np.flatnonzero(match.rows[order][1:] == match.rows[order][:-1]) + 1
    if len(again):
        # ``order`` sorts the rows stably, so the record before each repeat in ``order`` is
        # either the first record voting on that row or another repeat of it.
        starts = np.ones(len(order), dtype=bool)
        starts[again] = False
        first_at = order[np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))]
        repeats = order[again]
        by_file = np.argsort(repeats, kind="stable")[:SHOWN]
        pairs = [(int(first_at[again[j]]), int(repeats[j])) for j in by_file.tolist()]
        names = _names(path, columns, snapshot, sorted({i for pair in pairs for i in pair}))
        problems = [
            f"row {int(match.rows[b])} ({_id(match, b)!r}) by {names[a]} and {names[b]}"
            for a, b in pairs
        ]
        refuse_twice(path, problems, count=len(again))
    wrong = np.flatnonzero(match.labels != columns.given)
    if len(wrong):
        names = _names(path, columns, snapshot, wrong[:SHOWN])
        describe = snapshot.classes.describe
        problems = [
            f"{names[i]} -> row {int(match.rows[i])} ({_id(match, i)!r}): file says "
            f"{describe(int(columns.given[i]))}, snapshot says {describe(int(match.labels[i]))}"
            for i in wrong[:SHOWN].tolist()
        ]
        hint = _ids_hint(columns, examples, snapshot.dataset)
        refuse_label_mismatch(path, problems, snapshot.dataset, hint, count=len(wrong))


def _names(
    path: Path, columns: VoteColumns, snapshot: VoteSnapshot, records: Sequence[int] | np.ndarray
) -> dict[int, str]:
    """How refusals name ``records``: by the refs the reader kept, or by CSV line."""
    wanted = [int(i) for i in records]
    if columns.refs is not None:
        return {i: columns.refs[i] for i in wanted}
    ids = next(route.keys for route in columns.routes if isinstance(route, KeyRoute))
    lines = name_lines(path, wanted, ids)
    if lines is None:
        why = "its lines do not parse alike"
        refuse_unreadable(path, snapshot.classes, dataset=snapshot.dataset, why=why)
    return lines


def _tried(columns: VoteColumns, record: int) -> str:
    """What a record names, as a refusal lists it: its ids, then its row position."""
    tried = []
    for route in columns.routes:
        if isinstance(route, KeyRoute):
            at = [record] if route.records is None else np.flatnonzero(route.records == record)
            tried += [repr(route.keys[j].as_py()) for j in at]
        else:
            tried += [f"row {route.rows[j]}" for j in np.flatnonzero(route.records == record)]
    return ", ".join(tried) or "nothing"


def _id(match: RowMatch, record: int) -> str:
    return str(match.ids[int(match.id_at[record])].as_py())


def _rows(examples: Path | pa.Table) -> int:
    """The number of rows of the snapshot's examples."""
    if isinstance(examples, pa.Table):
        return int(examples.num_rows)
    return int(pq.ParquetFile(examples).metadata.num_rows)


def _ids_hint(columns: VoteColumns, examples: Path | pa.Table, dataset: str) -> str:
    """When records name rows by number and the snapshot's ids are paths: how to register the
    set so that its ids are the release's (the numbers then name the right rows)."""
    if not any(isinstance(route, RowRoute) and len(route) for route in columns.routes):
        return ""
    if isinstance(examples, pa.Table):
        ids = examples.column("example_id")
        first = ids[0].as_py() if len(ids) else None
    else:
        batches = pq.ParquetFile(examples).iter_batches(batch_size=1, columns=["example_id"])
        first = next((b.column(0)[0].as_py() for b in batches if b.num_rows), None)
    if first is None or DIGITS.fullmatch(str(first)):
        return ""
    return (
        f". The records name examples by number (the release's file order), but the ids of "
        f"{dataset!r} are paths such as {str(first)!r}, in another order: register the "
        "set in the release's order with its ids, 'dsreg add NAME --labels labels.npy --ids "
        "ids.txt' (one id per line, in row order), or give records that name example ids"
    )


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
