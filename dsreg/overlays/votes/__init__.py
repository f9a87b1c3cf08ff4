"""Human validation votes in, the corrections table of a ``validated`` overlay out.

Each voted example gets one of the verdicts of Northcutt, Athalye and Mueller (NeurIPS 2021)
for an agreement threshold ``t``, checked in this order: ``non_error`` if given >= t,
``correctable`` if guessed >= t, ``multi_label`` if both >= t, ``neither`` if neither >= t,
else ``non_agreement``.

One reader for both formats: the file is read into columns (``labelerrors.py`` for the
release's JSON, ``csvfile.py`` for CSV, a block at a time), its records are matched to the
snapshot's rows by one join and checked (``fit.py``). Nothing is imported unless every record
fits the snapshot: a record whose given label differs from the snapshot's label of the row it
names means the record-to-row mapping is wrong, and an overlay built on a wrong mapping would
silently relabel the wrong examples.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args

import numpy as np
import pyarrow as pa

from dsreg._util.inputs import input_file
from dsreg.errors import VotesError
from dsreg.formats.arrays import from_numpy
from dsreg.formats.corrections import CORRECTIONS_SCHEMA, COUNT_FIELDS, VOTES_TYPE
from dsreg.overlays.votes.csvfile import read_csv_votes
from dsreg.overlays.votes.fit import VERDICTS, Verdict, fit_votes, verdict_for
from dsreg.overlays.votes.labelerrors import read_label_errors
from dsreg.overlays.votes.model import Classes, Examples, VoteImport, VoteSnapshot

__all__ = [
    "CORRECTIONS_SCHEMA",
    "COUNT_FIELDS",
    "VERDICTS",
    "VOTES_TYPE",
    "VOTE_FORMATS",
    "Verdict",
    "VoteFormat",
    "VoteImport",
    "check_threshold",
    "import_votes",
    "read_votes",
    "verdict_for",
]

VoteFormat: TypeAlias = Literal["label-errors", "csv"]
VOTE_FORMATS: Final[tuple[VoteFormat, ...]] = get_args(VoteFormat)


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
    _check_request(format, threshold)
    input_file(path, what=f"votes file {str(path)!r}")
    examples = _examples_table(dataset, example_ids, labels)
    snapshot = VoteSnapshot(
        dataset=dataset, classes=Classes.of(classes, dataset=dataset), examples=lambda: examples
    )
    return _read(path, format, threshold, snapshot)


def read_votes(
    path: Path,
    *,
    format: str,
    threshold: int,
    dataset: str,
    classes: Sequence[str],
    examples: Examples,
) -> VoteImport:
    """`import_votes` of a snapshot whose ``example_id`` and ``label`` columns ``examples()``
    gives (the registry's verified examples object, which the join reads from its path),
    called once the votes themselves pass and ``path`` is known to be a regular file
    (``dsreg._util.inputs.input_file``)."""
    _check_request(format, threshold)
    classes_ = Classes.of(classes, dataset=dataset)
    snapshot = VoteSnapshot(dataset=dataset, classes=classes_, examples=examples)
    return _read(path, format, threshold, snapshot)


def _check_request(format: str, threshold: object) -> None:
    if format not in VOTE_FORMATS:
        raise VotesError(f"unknown votes format {format!r}; use 'label-errors' or 'csv'")
    check_threshold(threshold)


def check_threshold(threshold: object) -> None:
    """The agreement threshold of every vote rule (an import's, a pair review's finish): a
    whole number of raters, at least 1."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise VotesError(
            f"threshold must be a whole number of raters, at least 1; got {threshold!r}"
        )


def _read(path: Path, format: str, threshold: int, snapshot: VoteSnapshot) -> VoteImport:
    if format == "csv":
        columns = read_csv_votes(path, snapshot.classes, dataset=snapshot.dataset)
    else:
        columns = read_label_errors(path, snapshot.classes, dataset=snapshot.dataset)
    return fit_votes(path, columns, snapshot, format=format, threshold=threshold)


def _examples_table(
    dataset: str,
    example_ids: Sequence[str] | pa.Array | pa.ChunkedArray,
    labels: np.ndarray[Any, np.dtype[np.integer[Any]]],
) -> pa.Table:
    """The snapshot's ids and labels as the join reads them, checked to be one snapshot's."""
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
    return pa.table({"example_id": ids, "label": from_numpy(labels, pa.int64())})
