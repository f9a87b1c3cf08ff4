"""The label-errors release's votes (``*_mturk.json``) read into `VoteColumns`.

A JSON list of records with ``id``, ``url``, ``given_original_label``, ``our_guessed_label`` and
``mturk`` counts. A record names its example by the first that fits: the path of its ``url``
after ``/static/<release name>/``, a string ``id`` (an example id), an integer ``id`` (a row
position). ``dsreg review --export`` adds ``reviewers`` (who voted) and ``queue`` (the overlay
whose rows were reviewed), and ``votes_wanted`` (the votes its review asked for) on a record
with fewer: such a record whose votes agree on nothing is ``unreviewed``, not
``non_agreement``. Other readers of the format ignore the three.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

import numpy as np

from dsreg._util.inputs import INPUT_BYTES, read_input, shown
from dsreg._util.jsonread import loads
from dsreg.errors import VotesError
from dsreg.formats.arrays import string_array
from dsreg.formats.corrections import COUNT_FIELDS
from dsreg.objects.digest import is_digest
from dsreg.overlays.votes.model import (
    INT32_MAX,
    Classes,
    Count,
    KeyRoute,
    RowRoute,
    VoteColumns,
)
from dsreg.overlays.votes.refusals import no_votes

__all__ = ["read_label_errors"]

# The release spells it "off-topic"; a dash in a struct field would need quoting in every query.
_MTURK_KEYS: Final = {name: name for name in COUNT_FIELDS} | {"off-topic": "off_topic"}
# Look-alike formats, told by their keys and refused: why, after where the record is.
_MULTI_LABEL: Final = (
    "is multi-label (given_original_labels / our_guessed_labels, as in AudioSet); an overlay "
    "corrects one label per example, so multi-label votes cannot be imported"
)
_AMAZON: Final = (
    "counts positive/negative/neutral/off-topic votes (the Amazon format); those do not say "
    "whether raters chose the given or the guessed label, so they cannot be categorised and are "
    "not supported"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    """One record as read, before it is matched to a row."""

    ref: str  # how messages name the record: its id, or its url
    url_path: str | None  # the example id its url names
    id_key: str | None  # a string id: an example id
    row: int | None  # an integer id: a row position
    given: int
    guessed: int
    counts: dict[str, int | None]
    reviewers: tuple[str, ...]
    queue: str | None
    wanted: int  # votes_wanted; 0 when the record does not say


def read_label_errors(path: Path, classes: Classes, *, dataset: str) -> VoteColumns:
    """Every record of a label-errors votes file, checked and read into columns.

    Raises
    ------
    VotesError
        The file is not UTF-8, empty, not a JSON list of records, or a record is malformed
        (the first one, by its position); no records. Labels that are not classes are listed in
        the columns' ``unknown``, for ``fit_votes`` to refuse.
    InputPathError
        The file cannot be read.
    """
    text = _text(path)
    records, unknown = _records(path, text, classes)
    if not records:
        raise no_votes(path)
    count = len(records)

    def route(keys: list[tuple[int, str]]) -> KeyRoute:
        at = np.array([i for i, _ in keys], dtype=np.int64)
        return KeyRoute(keys=string_array([key for _, key in keys]), records=at)

    at_row = [(i, r.row) for i, r in enumerate(records) if r.row is not None]
    routes = (
        route([(i, r.url_path) for i, r in enumerate(records) if r.url_path is not None]),
        route([(i, r.id_key) for i, r in enumerate(records) if r.id_key is not None]),
        RowRoute(
            rows=np.array([row for _, row in at_row], dtype=np.int64),
            records=np.array([i for i, _ in at_row], dtype=np.int64),
        ),
    )
    counts = {}
    for name in COUNT_FIELDS:
        values = [r.counts[name] for r in records]
        counts[name] = Count(
            values=np.array([v or 0 for v in values], dtype=np.int32),
            present=np.array([v is not None for v in values], dtype=bool),
        )
    return VoteColumns(
        routes=routes,
        given=np.array([r.given for r in records], dtype=np.int32),
        suggested=np.array([r.guessed for r in records], dtype=np.int32),
        has_suggested=np.ones(count, dtype=bool),
        counts=counts,
        refs=tuple(r.ref for r in records),
        reviewers=tuple(sorted({name for r in records for name in r.reviewers})),
        queues=tuple(r.queue for r in records),
        wanted=(
            np.array([r.wanted for r in records], dtype=np.int32)
            if any(r.wanted for r in records)
            else None
        ),
        unknown=tuple(unknown),
    )


def _text(path: Path) -> str:
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


def _records(path: Path, text: str, classes: Classes) -> tuple[list[_Record], list[str]]:
    """The records of the file, and its labels that are not classes (as messages name them)."""
    hint = "; the label-errors format is a JSON list of one object per voted example"
    data = loads(text, what=str(path), error=VotesError, max_bytes=INPUT_BYTES, hint=hint)
    if not isinstance(data, list):
        raise VotesError(
            f"{path} holds a JSON {type(data).__name__}; the label-errors format is a list of "
            "records with id, url, given_original_label, our_guessed_label and mturk"
        )
    records: list[_Record] = []
    unknown: list[str] = []
    for position, raw in enumerate(data):
        records.append(_record(f"{path}: record {position}", raw, classes, unknown))
    return records, unknown


def _record(where: str, raw: object, classes: Classes, unknown: list[str]) -> _Record:
    """One record, checked; its labels that are not classes are added to ``unknown``."""
    if not isinstance(raw, dict):
        raise VotesError(f"{where} is a JSON {type(raw).__name__}, not an object")
    if "given_original_labels" in raw or "our_guessed_labels" in raw:
        raise VotesError(f"{where} {_MULTI_LABEL}")
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
    counts = _mturk_counts(f"{where} ({ref})", raw["mturk"])
    reviewers = _reviewers(f"{where} ({ref})", raw.get("reviewers"))
    queue = _queue(f"{where} ({ref})", raw.get("queue"))
    wanted = _wanted(f"{where} ({ref})", raw.get("votes_wanted"))
    # Looked up once the record is known to be whole: an unknown label is counted, not raised.
    given = classes.index(raw["given_original_label"])
    guessed = classes.index(raw["our_guessed_label"])
    if given is None:
        unknown.append(f"{ref}: given label {shown(raw['given_original_label'])}")
    if guessed is None:
        unknown.append(f"{ref}: guessed label {shown(raw['our_guessed_label'])}")
    return _Record(
        ref=ref,
        url_path=None if url is None else _static_path(url),
        id_key=record_id if isinstance(record_id, str) else None,
        row=record_id if isinstance(record_id, int) else None,
        given=-1 if given is None else given,
        guessed=-1 if guessed is None else guessed,
        counts=counts,
        reviewers=reviewers,
        queue=queue,
        wanted=wanted,
    )


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
        raise VotesError(f"{where} {_AMAZON}")
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


def _reviewers(where: str, value: object) -> tuple[str, ...]:
    """A record's ``reviewers``: absent, or a list of non-empty names."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise VotesError(f"{where}: reviewers must be a list of names; got {value!r}")
    return tuple(value)


def _queue(where: str, value: object) -> str | None:
    """A record's ``queue``: absent, or a full overlay digest."""
    if value is None:
        return None
    if not isinstance(value, str) or not is_digest(value):
        raise VotesError(f"{where}: queue must be an overlay digest (blake3:…); got {value!r}")
    return value


def _wanted(where: str, value: object) -> int:
    """A record's ``votes_wanted``: absent (0), or a whole number of votes, at least 1."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT32_MAX:
        raise VotesError(f"{where}: votes_wanted must be a whole number >= 1; got {shown(value)}")
    return value
