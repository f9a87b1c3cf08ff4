"""What the two readers of votes files share (``votes`` for the label-errors JSON and the
record-by-record CSV path, ``votes_csv`` for the column-by-column CSV path): the result, one
record, the snapshot as plain values, and how a refusal is worded."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa

from dsreg.errors import VotesError

__all__ = [
    "DIGITS",
    "INT32_MAX",
    "SHOWN",
    "Record",
    "VoteImport",
    "VoteSnapshot",
    "describe_label",
    "refuse",
    "refuse_label_mismatch",
    "refuse_twice",
    "refuse_unknown_ids",
    "refuse_unknown_labels",
]

SHOWN: Final = 5
INT32_MAX: Final = 2**31 - 1
DIGITS: Final = re.compile(r"[0-9]+")


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
    joined_labels : ndarray of int64, shape (m,), or None
        The snapshot's label at each row of ``table`` (in its order) as the columnar reader's
        join read them from the examples it was given; None from the record-by-record reader.
        ``votes_overlay`` hands them to ``write_overlay`` as the row check (`JoinedRows`).
    """

    table: pa.Table
    summary: dict[str, int]
    params: dict[str, str | int | list[str] | None]
    inputs: dict[str, str] = field(default_factory=dict)
    joined_labels: np.ndarray | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One vote record as read, before it is matched to a row."""

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
class VoteSnapshot:
    """The snapshot the votes are about, as plain values, with its class-name lookups."""

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
    ) -> VoteSnapshot:
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
        return describe_label(self.classes, label)


def describe_label(classes: Sequence[str], label: int) -> str:
    """A label as messages show it: its index and its class name."""
    if 0 <= label < len(classes):
        return f"{label} ({classes[label]!r})"
    return str(label)


def refuse_unknown_labels(
    path: Path, problems: list[str], snapshot: VoteSnapshot, *, count: int = 0
) -> None:
    shown = list(snapshot.classes[:10]) + (["…"] if len(snapshot.classes) > 10 else [])
    refuse(
        path,
        problems,
        f"labels are not classes of {snapshot.dataset!r}",
        f"Labels are class names (exact, or the only match ignoring case) or indices 0.."
        f"{len(snapshot.classes) - 1} into the snapshot's classes {shown}",
        count=count,
    )


def refuse_unknown_ids(
    path: Path, problems: Sequence[str], dataset: str, rows: int, hint: str = "", *, count: int = 0
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


def refuse_twice(path: Path, problems: Sequence[str], *, count: int = 0) -> None:
    """Examples that more than one record votes on."""
    refuse(
        path,
        problems,
        "examples are voted more than once",
        "Keep one record per example, or merge their counts before importing",
        count=count,
    )


def refuse_label_mismatch(
    path: Path, problems: Sequence[str], dataset: str, hint: str = "", *, count: int = 0
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
    shown = "; ".join(problems[:SHOWN])
    more = f"; and {total - SHOWN} more" if total > SHOWN else ""
    raise VotesError(f"{path}: {total} {headline}: {shown}{more}. {hint}")
