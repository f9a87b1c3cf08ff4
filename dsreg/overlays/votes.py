"""Human validation votes in, the corrections table of a ``validated`` overlay out.

Pure logic: the caller passes the snapshot's example ids, labels and classes as plain values
and stores what comes back. Each voted example gets one of the verdicts of Northcutt, Athalye
and Mueller (NeurIPS 2021) for an agreement threshold ``t``, checked in this order:

``non_error`` if given >= t, ``correctable`` if guessed >= t, ``multi_label`` if both >= t,
``neither`` if neither >= t, else ``non_agreement``.

Nothing is imported unless every record fits the snapshot: a record whose given label differs
from the snapshot's label of the row it names means the record-to-row mapping is wrong, and an
overlay built on a wrong mapping would silently relabel the wrong examples.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args
from urllib.parse import unquote, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.errors import InputPathError, VotesError
from dsreg.model.corrections import CORRECTIONS_SCHEMA, COUNT_FIELDS, VOTES_TYPE
from dsreg.overlays.reviewed import check_queue, check_reviewers, queue_inputs

__all__ = [
    "CORRECTIONS_SCHEMA",
    "COUNT_FIELDS",
    "VERDICTS",
    "VOTES_TYPE",
    "Verdict",
    "VoteFormat",
    "VoteImport",
    "csv_votes",
    "import_votes",
    "verdict_for",
]

Verdict: TypeAlias = Literal["non_error", "correctable", "multi_label", "neither", "non_agreement"]
VoteFormat: TypeAlias = Literal["label-errors", "csv"]

VERDICTS: Final[tuple[Verdict, ...]] = get_args(Verdict)
_SHOWN: Final = 5
_INT32_MAX: Final = 2**31 - 1
_CSV_HEADER: Final = "example_id,given_label,suggested_label,given,guessed,both,neither"
_CSV_COLUMNS: Final = tuple(_CSV_HEADER.split(","))
# The release spells it "off-topic"; a dash in a struct field would need quoting in every query.
_MTURK_KEYS: Final = {name: name for name in COUNT_FIELDS} | {"off-topic": "off_topic"}
_DIGITS: Final = re.compile(r"[0-9]+")


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
    """

    table: pa.Table
    summary: dict[str, int]
    params: dict[str, str | int | list[str] | None]
    inputs: dict[str, str] = field(default_factory=dict)


def verdict_for(
    *, given: int, guessed: int, both: int = 0, neither: int = 0, threshold: int
) -> Verdict:
    """Categorise one example's votes (Northcutt et al., NeurIPS 2021).

    A count the source does not collect (MNIST has no ``both``; IMDB has neither ``both`` nor
    ``neither``) is passed as 0, so such an example can only be non_error, correctable or
    non_agreement.
    """
    if given >= threshold:
        return "non_error"
    if guessed >= threshold:
        return "correctable"
    if both >= threshold:
        return "multi_label"
    if neither >= threshold:
        return "neither"
    return "non_agreement"


def import_votes(
    path: Path,
    *,
    format: VoteFormat,
    threshold: int,
    dataset: str,
    example_ids: Sequence[str] | pa.Array | pa.ChunkedArray,
    labels: np.ndarray[Any, np.dtype[np.integer[Any]]],
    classes: Sequence[str],
) -> VoteImport:
    """Read a votes file and categorise every voted example of one snapshot.

    Parameters
    ----------
    path : Path
        The votes file: a label-errors release JSON (``*_mturk.json``) or a CSV with the header
        ``example_id,given_label,suggested_label,given,guessed,both,neither``.
    format : {"label-errors", "csv"}
    threshold : int
        Agreement threshold t, at least 1 (the paper uses 3 of 5 raters).
    dataset : str
        The snapshot's dataset name; used in messages only.
    example_ids : sequence of str or pyarrow string array, shape (n,)
        The snapshot's example ids in row order.
    labels : ndarray of int, shape (n,)
        The snapshot's labels; ``labels[i]`` belongs to row i.
    classes : sequence of str, shape (k,)
        The snapshot's class names; labels are indices into it.

    Returns
    -------
    VoteImport

    Raises
    ------
    VotesError
        The file is empty or malformed, or a record does not fit the snapshot: an unknown
        example or row, an example voted twice, a label outside ``classes``, or a given label
        that differs from the snapshot's. Nothing is imported in any of these cases.
    InputPathError
        The file cannot be read.
    """
    if format not in ("label-errors", "csv"):
        raise VotesError(f"unknown votes format {format!r}; use 'label-errors' or 'csv'")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise VotesError(
            f"threshold must be a whole number of raters, at least 1; got {threshold!r}"
        )
    snapshot = _Snapshot.build(dataset, example_ids, labels, classes)

    if format == "csv":
        ids, labels_ = snapshot.ids, snapshot.labels

        def batches() -> Iterator[pa.Table]:
            start = 0
            for chunk in ids.chunks:
                lab = pa.array(np.asarray(labels_[start : start + len(chunk)], dtype=np.int64))
                start += len(chunk)
                yield pa.Table.from_arrays([chunk, lab], names=["example_id", "label"])

        fast = csv_votes(path, threshold=threshold, batches=batches, classes=snapshot.classes)
        if fast is not None:
            return fast

    text = _read_text(path)
    if format == "label-errors":
        records = _parse_label_errors(path, text, snapshot)
    else:
        records = _parse_csv(path, text, snapshot)
    if not records:
        raise VotesError(f"{path} holds no votes; expected at least one record")

    rows = _locate(path, records, snapshot)
    _check_labels(path, records, rows, snapshot)

    # Parsing guarantees a suggested label wherever guessed votes exist, so a correctable
    # row always carries the label it is corrected to.
    verdicts: list[Verdict] = [
        verdict_for(
            given=record.counts["given"] or 0,
            guessed=record.counts["guessed"] or 0,
            both=record.counts["both"] or 0,
            neither=record.counts["neither"] or 0,
            threshold=threshold,
        )
        for record in records
    ]

    order = sorted(range(len(records)), key=lambda i: rows[i])
    table = pa.Table.from_arrays(
        [
            pa.array([rows[i] for i in order], pa.int64()),
            pa.array([snapshot.example_id(rows[i]) for i in order], pa.string()),
            pa.array([records[i].given for i in order], pa.int32()),
            pa.array([records[i].guessed for i in order], pa.int32()),
            pa.array([verdicts[i] for i in order], pa.string()),
            pa.nulls(len(order), pa.float64()),
            pa.array([records[i].counts for i in order], VOTES_TYPE),
        ],
        schema=CORRECTIONS_SCHEMA,
    )
    counts: dict[str, int] = {verdict: verdicts.count(verdict) for verdict in VERDICTS}
    summary: dict[str, int] = {
        "checked": len(records),
        "errors": len(records) - counts["non_error"],
        **counts,
    }
    params: dict[str, str | int | list[str] | None] = {
        "format": format,
        "threshold": threshold,
        "raters": _common_total(records),
    }
    reviewers = sorted({name for record in records for name in record.reviewers})
    if reviewers:
        params["reviewers"] = reviewers
    inputs = queue_inputs(path, [record.queue for record in records])
    return VoteImport(table=table, summary=summary, params=params, inputs=inputs)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    ref: str  # how messages name the record: its id, or its CSV line
    keys: tuple[str, ...]  # example ids this record may name, tried in order
    row_id: int | None  # an integer id, read as a row position when no key matches
    given: int
    guessed: int | None
    counts: dict[str, int | None]
    # dsreg review's additions to the release's records: who voted, and about which queue.
    reviewers: tuple[str, ...] = ()
    queue: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Snapshot:
    dataset: str
    ids: pa.ChunkedArray
    labels: np.ndarray[Any, np.dtype[np.integer[Any]]]
    classes: tuple[str, ...]
    by_name: dict[str, int]
    by_folded: dict[str, int]

    @classmethod
    def build(
        cls,
        dataset: str,
        example_ids: Sequence[str] | pa.Array | pa.ChunkedArray,
        labels: np.ndarray[Any, np.dtype[np.integer[Any]]],
        classes: Sequence[str],
    ) -> _Snapshot:
        try:
            # A chunked column stays chunked: 50 million ids are not copied into one array.
            ids = (
                pa.chunked_array([example_ids]).cast(pa.string())
                if isinstance(example_ids, pa.Array)
                else example_ids.cast(pa.string())
                if isinstance(example_ids, pa.ChunkedArray)
                else pa.chunked_array([pa.array(list(example_ids), pa.string())])
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise VotesError(f"example ids of {dataset!r} are not strings: {exc}") from exc
        labels = np.asarray(labels)
        if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
            raise VotesError(
                f"labels of {dataset!r} must be a 1-d integer array; got dtype {labels.dtype} "
                f"and shape {labels.shape}"
            )
        if len(ids) != len(labels):
            raise VotesError(
                f"{dataset!r} has {len(ids)} example ids but {len(labels)} labels; pass both "
                "columns of the same snapshot"
            )
        names = tuple(classes)
        if not names or len(set(names)) != len(names):
            raise VotesError(f"classes of {dataset!r} must be non-empty and unique; got {names}")
        folded: dict[str, list[int]] = {}
        for index, name in enumerate(names):
            folded.setdefault(name.casefold(), []).append(index)
        return cls(
            dataset=dataset,
            ids=ids,
            labels=labels,
            classes=names,
            by_name={name: index for index, name in enumerate(names)},
            # Only names that stay unique without case: "Negative" may mean "negative", but
            # never one of two classes that differ by case.
            by_folded={key: found[0] for key, found in folded.items() if len(found) == 1},
        )

    def example_id(self, row: int) -> str:
        value = self.ids[row].as_py()
        return "" if value is None else str(value)

    def class_index(self, value: object) -> int | None:
        """A JSON label: an integer is an index, a string a class name."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value if 0 <= value < len(self.classes) else None
        if isinstance(value, str):
            found = self.by_name.get(value)
            return found if found is not None else self.by_folded.get(value.casefold())
        return None

    def describe(self, label: int) -> str:
        if 0 <= label < len(self.classes):
            return f"{label} ({self.classes[label]!r})"
        return str(label)


def _read_text(path: Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputPathError(
            f"cannot read votes file {path}: {exc.strerror or exc}; check the path"
        ) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise VotesError(
            f"{path} is not UTF-8 text (byte {exc.start}); votes files are JSON or CSV"
        ) from exc
    if not text.strip():
        raise VotesError(f"{path} is empty; expected votes in JSON or CSV")
    return text


def _parse_label_errors(path: Path, text: str, snapshot: _Snapshot) -> list[_Record]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VotesError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from exc
    if not isinstance(data, list):
        raise VotesError(
            f"{path} holds a JSON {type(data).__name__}; the label-errors format is a list of "
            "records with id, url, given_original_label, our_guessed_label and mturk"
        )
    records: list[_Record] = []
    unknown_labels: list[str] = []
    for position, raw in enumerate(data):
        where = f"{path}: record {position}"
        if not isinstance(raw, dict):
            raise VotesError(f"{where} is a JSON {type(raw).__name__}, not an object")
        if "given_original_labels" in raw or "our_guessed_labels" in raw:
            raise VotesError(
                f"{where} is multi-label (given_original_labels / our_guessed_labels, as in "
                "AudioSet); an overlay corrects one label per example, so multi-label votes "
                "cannot be imported"
            )
        record_id = raw.get("id")
        if isinstance(record_id, bool) or not isinstance(record_id, int | str | None):
            raise VotesError(f"{where}: id must be an integer or a string; got {record_id!r}")
        url = raw.get("url")
        if not isinstance(url, str | None):
            raise VotesError(f"{where}: url must be a string; got {url!r}")
        if record_id is None and url is None:
            raise VotesError(f"{where} has neither id nor url, so it names no example")
        ref = f"id {record_id!r}" if record_id is not None else f"url {url!r}"
        for key in ("given_original_label", "our_guessed_label", "mturk"):
            if raw.get(key) is None:
                raise VotesError(f"{where} ({ref}) has no {key!r}")

        given = snapshot.class_index(raw["given_original_label"])
        guessed = snapshot.class_index(raw["our_guessed_label"])
        if given is None:
            unknown_labels.append(f"{ref}: given label {raw['given_original_label']!r}")
        if guessed is None:
            unknown_labels.append(f"{ref}: guessed label {raw['our_guessed_label']!r}")

        keys: list[str] = []
        if url is not None and (url_path := _static_path(url)) is not None:
            keys.append(url_path)
        if isinstance(record_id, str):
            keys.append(record_id)
        records.append(
            _Record(
                ref=ref,
                keys=tuple(keys),
                row_id=record_id if isinstance(record_id, int) else None,
                given=-1 if given is None else given,
                guessed=guessed,
                counts=_mturk_counts(f"{where} ({ref})", raw["mturk"]),
                reviewers=check_reviewers(f"{where} ({ref})", raw.get("reviewers")),
                queue=check_queue(f"{where} ({ref})", raw.get("queue")),
            )
        )
    _refuse_unknown_labels(path, unknown_labels, snapshot)
    return records


def _static_path(url: str) -> str | None:
    """The example path of a labelerrors.com url: what follows ``/static/<release name>/``.

    Empty segments are dropped because the ImageNet file spells its urls ``.com//static/``.
    """
    parts = [part for part in urlsplit(url).path.split("/") if part]
    if "static" not in parts:
        return None
    rest = parts[parts.index("static") + 2 :]
    return unquote("/".join(rest)) if rest else None


def _mturk_counts(where: str, mturk: object) -> dict[str, int | None]:
    if not isinstance(mturk, dict):
        raise VotesError(f"{where}: mturk must be an object of vote counts; got {mturk!r}")
    if "positive" in mturk or "negative" in mturk:
        raise VotesError(
            f"{where} counts positive/negative/neutral/off-topic votes (the Amazon format); "
            "those do not say whether raters chose the given or the guessed label, so they "
            "cannot be categorised and are not supported"
        )
    unknown = sorted(set(mturk) - set(_MTURK_KEYS))
    if unknown:
        raise VotesError(
            f"{where}: unknown vote counts {unknown}; expected some of "
            "given, guessed, both, neither, neutral, off-topic"
        )
    counts: dict[str, int | None] = dict.fromkeys(COUNT_FIELDS)
    for key, value in mturk.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT32_MAX:
            raise VotesError(
                f"{where}: vote count {key!r} must be a whole number >= 0; got {value!r}"
            )
        counts[_MTURK_KEYS[key]] = value
    for required in ("given", "guessed"):
        if counts[required] is None:
            raise VotesError(f"{where}: mturk has no {required!r} count")
    return counts


def _parse_csv(path: Path, text: str, snapshot: _Snapshot) -> list[_Record]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
        lines = [(reader.line_num, line) for line in reader if any(cell.strip() for cell in line)]
    except csv.Error as exc:
        raise VotesError(f"{path} is not valid CSV: {exc} (line {reader.line_num})") from exc
    if sorted(header) != sorted(_CSV_COLUMNS):
        missing = [name for name in _CSV_COLUMNS if name not in header]
        extra = [name for name in header if name not in _CSV_COLUMNS]
        raise VotesError(
            f"{path}: the CSV header must be {_CSV_HEADER}; missing {missing}, unexpected {extra}"
        )
    records: list[_Record] = []
    unknown_labels: list[str] = []
    for line_num, line in lines:
        where = f"{path}: line {line_num}"
        if len(line) != len(header):
            raise VotesError(f"{where} has {len(line)} fields; the header has {len(header)}")
        cells = {name: cell.strip() for name, cell in zip(header, line, strict=True)}
        example_id = cells["example_id"]
        if not example_id:
            raise VotesError(f"{where} has no example_id")
        ref = f"line {line_num} ({example_id!r})"

        given = _csv_label(snapshot, cells["given_label"])
        if isinstance(given, str):
            unknown_labels.append(f"{ref}: given label {given}")
        guessed: int | str | None = None
        if cells["suggested_label"]:
            guessed = _csv_label(snapshot, cells["suggested_label"])
            if isinstance(guessed, str):
                unknown_labels.append(f"{ref}: suggested label {guessed}")

        counts: dict[str, int | None] = dict.fromkeys(COUNT_FIELDS)
        for name in ("given", "guessed", "both", "neither"):
            cell = cells[name]
            if not cell:
                continue
            if not _DIGITS.fullmatch(cell) or int(cell) > _INT32_MAX:
                raise VotesError(f"{where}: {name} must be a whole number >= 0; got {cell!r}")
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
        records.append(
            _Record(
                ref=ref,
                keys=(example_id,),
                row_id=None,
                given=given if isinstance(given, int) else -1,
                guessed=guessed if isinstance(guessed, int) else None,
                counts=counts,
            )
        )
    _refuse_unknown_labels(path, unknown_labels, snapshot)
    return records


def _csv_label(snapshot: _Snapshot, cell: str) -> int | str:
    """A class index, or why the cell is not one.

    A CSV cell has no type, so ``"3"`` may be a class name or an index; when both readings
    exist they must agree, else the cell is ambiguous (classes ``["1", "0"]``).
    """
    by_name = snapshot.class_index(cell)
    by_index = int(cell) if _DIGITS.fullmatch(cell) else None
    if by_index is not None and by_index >= len(snapshot.classes):
        by_index = None
    if by_name is not None and by_index is not None and by_name != by_index:
        return f"{cell!r} (class {by_name} by name, class {by_index} by index: ambiguous)"
    found = by_name if by_name is not None else by_index
    return found if found is not None else repr(cell)


def _refuse_unknown_labels(path: Path, problems: list[str], snapshot: _Snapshot) -> None:
    shown = list(snapshot.classes[:10]) + (["…"] if len(snapshot.classes) > 10 else [])
    _refuse(
        path,
        problems,
        f"labels are not classes of {snapshot.dataset!r}",
        f"Labels are class names (exact, or the only match ignoring case) or indices 0.."
        f"{len(snapshot.classes) - 1} into the snapshot's classes {shown}",
    )


def _locate(path: Path, records: Sequence[_Record], snapshot: _Snapshot) -> list[int]:
    """The snapshot row each record names; refuses unknown and doubly voted examples."""
    wanted = sorted({key for record in records for key in record.keys})
    found: dict[str, int] = {}
    if wanted:
        # index_in scans the id column once in Arrow, instead of a Python dict over every id.
        positions = pc.index_in(snapshot.ids, value_set=pa.array(wanted, pa.string()))
        valid = pc.is_valid(positions)
        hit_rows = pc.indices_nonzero(valid).to_pylist()
        hit_keys = pc.filter(positions, valid).to_pylist()
        for row, key_index in zip(hit_rows, hit_keys, strict=True):
            key = wanted[key_index]
            if key in found:
                raise VotesError(
                    f"example id {key!r} appears at rows {found[key]} and {row} of "
                    f"{snapshot.dataset!r}; example ids must be unique"
                )
            found[key] = row

    rows: list[int] = []
    unknown: list[str] = []
    for record in records:
        row = next((found[key] for key in record.keys if key in found), None)
        if row is None and record.row_id is not None and 0 <= record.row_id < len(snapshot.ids):
            row = record.row_id
        if row is None:
            tried = [repr(key) for key in record.keys]
            if record.row_id is not None:
                tried.append(f"row {record.row_id}")
            unknown.append(f"{record.ref} (tried {', '.join(tried) or 'nothing'})")
        rows.append(-1 if row is None else row)
    _refuse(
        path,
        unknown,
        f"records name no example of {snapshot.dataset!r} ({len(snapshot.ids)} rows)",
        "A record names its example by the url path after /static/<name>/, a string id equal "
        "to an example id, or an integer id that is a row position; check that the file "
        "belongs to this dataset" + _ids_hint(records, snapshot),
    )

    first: dict[int, str] = {}
    twice: list[str] = []
    for record, row in zip(records, rows, strict=True):
        if row in first:
            twice.append(
                f"row {row} ({snapshot.example_id(row)!r}) by {first[row]} and {record.ref}"
            )
        else:
            first[row] = record.ref
    _refuse(
        path,
        twice,
        "examples are voted more than once",
        "Keep one record per example, or merge their counts before importing",
    )
    return rows


def _check_labels(
    path: Path, records: Sequence[_Record], rows: Sequence[int], snapshot: _Snapshot
) -> None:
    mismatches: list[str] = []
    for record, row in zip(records, rows, strict=True):
        label = int(snapshot.labels[row])
        if record.given != label:
            mismatches.append(
                f"{record.ref} -> row {row} ({snapshot.example_id(row)!r}): file says "
                f"{snapshot.describe(record.given)}, snapshot says {snapshot.describe(label)}"
            )
    _refuse(
        path,
        mismatches,
        "records give a label that differs from the label of the row they name in "
        f"{snapshot.dataset!r}",
        "The records are mapped to the wrong examples (or the file belongs to another "
        "dataset, class order or revision); nothing was imported" + _ids_hint(records, snapshot),
    )


def csv_votes(
    path: Path,
    *,
    threshold: int,
    batches: Callable[[], Iterable[pa.Table | pa.RecordBatch]],
    classes: tuple[str, ...],
) -> VoteImport | None:
    """A votes CSV imported column by column (``votes_csv.fast_csv``) against a snapshot read
    in ``batches()`` (``example_id``, ``label``), or None when the file needs ``import_votes``'s
    record-by-record path (every refusal goes there, for its messages)."""
    from dsreg.overlays.votes_csv import fast_csv

    fast = fast_csv(path, threshold=threshold, batches=batches, classes=classes)
    if fast is None:
        return None
    table, per_verdict, raters = fast
    return VoteImport(
        table=table,
        summary={
            "checked": table.num_rows,
            "errors": table.num_rows - per_verdict["non_error"],
            **per_verdict,
        },
        params={"format": "csv", "threshold": threshold, "raters": raters},
        inputs={},
    )


def _ids_hint(records: Sequence[_Record], snapshot: _Snapshot) -> str:
    """When records name rows by number and the snapshot's ids are paths: how to register the
    set so that its ids are the release's (the numbers then name the right rows)."""
    if not len(snapshot.ids) or all(record.row_id is None for record in records):
        return ""
    first = snapshot.example_id(0)
    if _DIGITS.fullmatch(first):
        return ""
    return (
        f". The records name examples by number (the release's file order), but the ids of "
        f"{snapshot.dataset!r} are paths such as {first!r}, in another order: register the "
        "set in the release's order with its ids, 'dsreg add NAME --labels labels.npy --ids "
        "ids.txt' (one id per line, in row order), or give records that name example ids"
    )


def _common_total(records: Iterable[_Record]) -> int | None:
    """Raters per record, when every record's counts add up to the same positive number.

    Provenance only, never grounds for refusing: it is inferred, not declared. MNIST's file
    shows its limits: where the guessed label equals the given one a rater's vote is counted
    under both, so totals vary and the number stays unknown.
    """
    totals = {sum(count or 0 for count in record.counts.values()) for record in records}
    return totals.pop() if len(totals) == 1 and 0 not in totals else None


def _refuse(path: Path, problems: Sequence[str], headline: str, hint: str) -> None:
    if not problems:
        return
    shown = "; ".join(problems[:_SHOWN])
    more = f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
    raise VotesError(f"{path}: {len(problems)} {headline}: {shown}{more}. {hint}")
