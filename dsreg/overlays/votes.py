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

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args
from urllib.parse import unquote, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg._util.inputs import INPUT_BYTES, read_input, shown
from dsreg._util.jsonread import loads
from dsreg.errors import VotesError
from dsreg.formats.corrections import CORRECTIONS_SCHEMA, COUNT_FIELDS, VOTES_TYPE
from dsreg.overlays.reviewed import check_queue, check_reviewers, queue_inputs
from dsreg.overlays.votes_base import (
    DIGITS,
    INT32_MAX,
    Record,
    VoteImport,
    VoteSnapshot,
    refuse_label_mismatch,
    refuse_twice,
    refuse_unknown_ids,
    refuse_unknown_labels,
)

__all__ = [
    "CORRECTIONS_SCHEMA",
    "COUNT_FIELDS",
    "VERDICTS",
    "VOTES_TYPE",
    "Verdict",
    "VoteFormat",
    "VoteImport",
    "import_votes",
    "verdict_for",
]

Verdict: TypeAlias = Literal["non_error", "correctable", "multi_label", "neither", "non_agreement"]
VoteFormat: TypeAlias = Literal["label-errors", "csv"]

VERDICTS: Final[tuple[Verdict, ...]] = get_args(Verdict)
# The release spells it "off-topic"; a dash in a struct field would need quoting in every query.
_MTURK_KEYS: Final = {name: name for name in COUNT_FIELDS} | {"off-topic": "off_topic"}


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
    snapshot = VoteSnapshot.build(dataset, example_ids, labels, classes)

    if format == "csv":
        from dsreg.overlays.votes_csv import csv_votes

        fast = csv_votes(
            path,
            threshold=threshold,
            examples=lambda: pa.table({"example_id": snapshot.ids, "label": snapshot.labels}),
            classes=snapshot.classes,
            dataset=snapshot.dataset,
        )
        if fast is not None:
            return fast

    text = _read_text(path)
    if format == "label-errors":
        records = _parse_label_errors(path, text, snapshot)
    else:
        from dsreg.overlays.votes_lines import parse_csv

        records = parse_csv(path, text, snapshot)
    if not records:
        from dsreg.overlays.votes_lines import no_votes

        raise no_votes(path)

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


def _read_text(path: Path) -> str:
    hint = "; for more votes than that, write them as CSV (read in blocks)"
    data = read_input(
        path, what=f"votes file {str(path)!r}", max_bytes=INPUT_BYTES, error=VotesError, hint=hint
    )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise VotesError(
            f"{path} is not UTF-8 text (byte {exc.start}); votes files are JSON or CSV"
        ) from exc
    if not text.strip():
        raise VotesError(f"{path} is empty; expected votes in JSON or CSV")
    return text


def _parse_label_errors(path: Path, text: str, snapshot: VoteSnapshot) -> list[Record]:
    hint = "; the label-errors format is a JSON list of one object per voted example"
    data = loads(text, what=str(path), error=VotesError, max_bytes=INPUT_BYTES, hint=hint)
    if not isinstance(data, list):
        raise VotesError(
            f"{path} holds a JSON {type(data).__name__}; the label-errors format is a list of "
            "records with id, url, given_original_label, our_guessed_label and mturk"
        )
    records: list[Record] = []
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
            raise VotesError(f"{where}: id must be an integer or a string; got {shown(record_id)}")
        url = raw.get("url")
        if not isinstance(url, str | None):
            raise VotesError(f"{where}: url must be a string; got {shown(url)}")
        if record_id is None and url is None:
            raise VotesError(f"{where} has neither id nor url, so it names no example")
        ref = f"id {shown(record_id)}" if record_id is not None else f"url {shown(url)}"
        for key in ("given_original_label", "our_guessed_label", "mturk"):
            if raw.get(key) is None:
                raise VotesError(f"{where} ({ref}) has no {key!r}")

        given = snapshot.class_index(raw["given_original_label"])
        guessed = snapshot.class_index(raw["our_guessed_label"])
        if given is None:
            unknown_labels.append(f"{ref}: given label {shown(raw['given_original_label'])}")
        if guessed is None:
            unknown_labels.append(f"{ref}: guessed label {shown(raw['our_guessed_label'])}")

        keys: list[str] = []
        if url is not None and (url_path := _static_path(url)) is not None:
            keys.append(url_path)
        if isinstance(record_id, str):
            keys.append(record_id)
        records.append(
            Record(
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
    refuse_unknown_labels(path, unknown_labels, snapshot)
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
        raise VotesError(f"{where}: mturk must be an object of vote counts; got {shown(mturk)}")
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
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
            raise VotesError(
                f"{where}: vote count {key!r} must be a whole number >= 0; got {shown(value)}"
            )
        counts[_MTURK_KEYS[key]] = value
    for required in ("given", "guessed"):
        if counts[required] is None:
            raise VotesError(f"{where}: mturk has no {required!r} count")
    return counts


def _locate(path: Path, records: Sequence[Record], snapshot: VoteSnapshot) -> list[int]:
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
    refuse_unknown_ids(
        path, unknown, snapshot.dataset, len(snapshot.ids), _ids_hint(records, snapshot)
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
    refuse_twice(path, twice)
    return rows


def _check_labels(
    path: Path, records: Sequence[Record], rows: Sequence[int], snapshot: VoteSnapshot
) -> None:
    mismatches: list[str] = []
    for record, row in zip(records, rows, strict=True):
        label = int(snapshot.labels[row])
        if record.given != label:
            mismatches.append(
                f"{record.ref} -> row {row} ({snapshot.example_id(row)!r}): file says "
                f"{snapshot.describe(record.given)}, snapshot says {snapshot.describe(label)}"
            )
    refuse_label_mismatch(path, mismatches, snapshot.dataset, _ids_hint(records, snapshot))


def _ids_hint(records: Sequence[Record], snapshot: VoteSnapshot) -> str:
    """When records name rows by number and the snapshot's ids are paths: how to register the
    set so that its ids are the release's (the numbers then name the right rows)."""
    if not len(snapshot.ids) or all(record.row_id is None for record in records):
        return ""
    first = snapshot.example_id(0)
    if DIGITS.fullmatch(first):
        return ""
    return (
        f". The records name examples by number (the release's file order), but the ids of "
        f"{snapshot.dataset!r} are paths such as {first!r}, in another order: register the "
        "set in the release's order with its ids, 'dsreg add NAME --labels labels.npy --ids "
        "ids.txt' (one id per line, in row order), or give records that name example ids"
    )


def _common_total(records: Iterable[Record]) -> int | None:
    """Raters per record, when every record's counts add up to the same positive number.

    Provenance only, never grounds for refusing: it is inferred, not declared. MNIST's file
    shows its limits: where the guessed label equals the given one a rater's vote is counted
    under both, so totals vary and the number stays unknown.
    """
    totals = {sum(count or 0 for count in record.counts.values()) for record in records}
    return totals.pop() if len(totals) == 1 and 0 not in totals else None
