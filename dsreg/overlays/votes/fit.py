"""Votes read into columns, matched to the snapshot's rows, checked, and categorised.

Records are matched to rows by a DuckDB hash join of the ids they name against the snapshot's
examples: a table in memory, or the registry's examples object (re-hashed first), which DuckDB
reads with its own Parquet reader on up to four threads, so that 50 million ids are never
decoded into Python. The join runs on a private in-memory connection capped at 768 MB; beyond
that DuckDB spills to a temporary folder, removed afterwards. The join also returns each row's
label, against which every record's given label is checked.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.errors import VotesError
from dsreg.formats.arrays import from_numpy, string_array
from dsreg.formats.corrections import CORRECTIONS_SCHEMA, COUNT_FIELDS, VOTES_TYPE
from dsreg.overlays.votes.model import (
    KeyRoute,
    RowMatch,
    RowRoute,
    VoteColumns,
    VoteImport,
    VoteSnapshot,
    queue_inputs,
)
from dsreg.overlays.votes.refusals import refuse_misfits, refuse_unknown_labels

if TYPE_CHECKING:
    import duckdb

__all__ = ["VERDICTS", "Verdict", "fit_votes", "verdict_for"]

Verdict: TypeAlias = Literal[
    "non_error", "correctable", "multi_label", "neither", "non_agreement", "unreviewed"
]
VERDICTS: Final[tuple[Verdict, ...]] = get_args(Verdict)
_NO_AGREEMENT: Final = 4  # VERDICTS' index of non_agreement
_UNREVIEWED: Final = 5  # of unreviewed: no agreement yet, and fewer votes than the review wanted
# The rule, in its order: the first count at the threshold gives its verdict; none gives the last.
_RULE: Final = ("given", "guessed", "both", "neither")

# DuckDB's cap for the join: the hash table of 5 million votes' ids fits in it; beyond, it spills
# to a temporary folder that is removed afterwards. Two threads at most on a shared machine
# would leave cores idle on a bigger one: up to four.
_MEMORY_LIMIT: Final = "768MB"
_THREADS: Final = max(1, min(4, os.cpu_count() or 1))
_NO_PUSHDOWN: Final = "join_filter_pushdown"


def verdict_for(
    *, given: int, guessed: int, both: int = 0, neither: int = 0, threshold: int
) -> Verdict:
    """Categorise one example's votes (Northcutt et al., NeurIPS 2021).

    A count the source does not collect (MNIST has no ``both``; IMDB has neither ``both`` nor
    ``neither``) is passed as 0, so such an example can only be non_error, correctable or
    non_agreement.
    """
    counts = (given, guessed, both, neither)
    found = (VERDICTS[i] for i, count in enumerate(counts) if count >= threshold)
    return next(found, VERDICTS[_NO_AGREEMENT])


@dataclass(frozen=True, slots=True, kw_only=True)
class _Hits:
    """The rows one route found: record ``records[h]`` names row ``rows[h]`` (label
    ``labels[h]``), whose example id is ``ids[id_index[h]]``."""

    records: np.ndarray
    rows: np.ndarray
    labels: np.ndarray
    ids: pa.Array
    id_index: np.ndarray


def fit_votes(
    path: Path, columns: VoteColumns, snapshot: VoteSnapshot, *, format: str, threshold: int
) -> VoteImport:
    """The corrections table of ``columns``, once every record is matched to a row of the
    snapshot, no example is voted twice and every given label is the snapshot's.

    Raises
    ------
    VotesError
        An id the snapshot holds at two rows; labels that are not classes
        (``columns.unknown``, all counted); records that name no example, examples voted
        more than once, given labels that differ from the snapshot's (all counted, the first
        five named).
    """
    examples = snapshot.examples()
    match = _match(columns, examples, dataset=snapshot.dataset)
    refuse_unknown_labels(path, columns.unknown, snapshot.dataset, snapshot.classes)
    refuse_misfits(path, columns, match, snapshot, examples)
    params: dict[str, str | int | list[str] | None] = {
        "format": format,
        "threshold": threshold,
        "raters": _raters(columns),
    }
    if columns.reviewers:
        params["reviewers"] = list(columns.reviewers)
    rows = match.rows
    in_order = len(rows) < 2 or bool((rows[1:] > rows[:-1]).all())
    order = None if in_order else np.argsort(rows, kind="stable")
    table, per_verdict = _table(columns, match, order, threshold)
    return VoteImport(
        table=table,
        summary={
            "checked": table.num_rows,
            "errors": table.num_rows - per_verdict["non_error"] - per_verdict.get("unreviewed", 0),
            **per_verdict,
        },
        params=params,
        inputs=queue_inputs(path, columns.queues),
        joined_labels=match.labels if order is None else match.labels[order],
    )


@contextmanager
def _connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A private DuckDB connection, capped in memory, spilling to a folder of its own."""
    import duckdb

    spill = tempfile.mkdtemp(prefix="dsreg-votes-")
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET memory_limit = '{_MEMORY_LIMIT}'")
        con.execute(f"SET threads = {_THREADS}")
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET temp_directory = ?", [spill])
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _match(columns: VoteColumns, examples: Path | pa.Table, *, dataset: str) -> RowMatch:
    """Every route joined to the snapshot's rows, an earlier route's row winning."""
    with _connection() as con:
        if isinstance(examples, pa.Table):
            rows = from_numpy(np.arange(examples.num_rows), pa.int64())
            con.register("__dsreg_examples", examples.append_column("row", rows))
            source = "SELECT example_id, label, row FROM __dsreg_examples"
            params: list[Any] = []
        else:
            source = (
                "SELECT example_id, label, file_row_number AS row "
                "FROM read_parquet(?, file_row_number = true)"
            )
            params = [str(examples)]
        routes = [route for route in columns.routes if len(route)]
        hits = [_hits(con, route, source, params) for route in routes]
    _refuse_ids_at_two_rows(routes, hits, dataset)
    n = len(columns)
    rows = np.full(n, -1, dtype=np.int64)
    labels = np.full(n, -1, dtype=np.int64)
    id_at = np.full(n, -1, dtype=np.int64)
    parts: list[pa.Array] = []
    for found in reversed(hits):  # the first route that finds a record's row is the one kept
        rows[found.records] = found.rows
        labels[found.records] = found.labels
        id_at[found.records] = found.id_index + sum(len(part) for part in parts)
        parts.append(found.ids)
    ids = parts[0] if len(parts) == 1 else pa.concat_arrays([string_array([]), *parts])
    return RowMatch(rows=rows, labels=labels, ids=ids, id_at=id_at)


def _hits(
    con: duckdb.DuckDBPyConnection, route: KeyRoute | RowRoute, source: str, params: list[Any]
) -> _Hits:
    """One route's records joined to the snapshot's rows, on the id or on the position (whose
    example id the join then reads too: the ids of those few rows only)."""
    by_id = isinstance(route, KeyRoute)
    key = "example_id" if by_id else "row"
    values = route.keys if isinstance(route, KeyRoute) else from_numpy(route.rows, pa.int64())
    at = from_numpy(np.arange(len(values)), pa.int64())
    # Joining on ids, the filter DuckDB pushes into the scan of the examples (a Bloom filter of
    # the votes' ids, and their least and greatest, which ids spread across every row group)
    # costs the scan more CPU than it saves the join: a fifth of the join's. Joining on row
    # positions, the least and greatest skip whole row groups: it stays.
    con.execute(f"SET disabled_optimizers = '{_NO_PUSHDOWN if by_id else ''}'")
    con.register("__dsreg_votes", pa.table({"j": at, key: values}))
    got = con.execute(
        f"SELECT v.j, e.row, e.label{'' if by_id else ', e.example_id'} "
        f"FROM __dsreg_votes AS v JOIN ({source}) AS e ON e.{key} = v.{key}",
        params,
    ).fetchnumpy()
    con.unregister("__dsreg_votes")
    j = np.asarray(got["j"], dtype=np.int64)
    if isinstance(route, KeyRoute):
        ids, id_index = route.keys, j
    else:
        ids = string_array([str(v) for v in got["example_id"].tolist()])
        id_index = np.arange(len(j), dtype=np.int64)
    return _Hits(
        records=j if route.records is None else route.records[j],
        rows=np.asarray(got["row"], dtype=np.int64),
        labels=np.asarray(got["label"], dtype=np.int64),
        ids=ids,
        id_index=id_index,
    )


def _refuse_ids_at_two_rows(
    routes: Sequence[KeyRoute | RowRoute], hits: Sequence[_Hits], dataset: str
) -> None:
    """Refuse ids that the snapshot holds at more than one row, naming the id whose second row
    comes first (a registry's snapshot never has any: ``add`` proves its ids unique)."""
    rows_of: dict[str, set[int]] = {}
    for route, found in zip(routes, hits, strict=True):
        if not isinstance(route, KeyRoute) or not len(found.id_index):
            continue
        repeated = np.flatnonzero(np.bincount(found.id_index) > 1)
        if not len(repeated):
            continue
        at = np.isin(found.id_index, repeated)
        for j, row in zip(found.id_index[at].tolist(), found.rows[at].tolist(), strict=True):
            rows_of.setdefault(str(route.keys[j].as_py()), set()).add(row)
    if rows_of:
        key, (first, second) = min(
            ((key, sorted(rows)[:2]) for key, rows in rows_of.items()), key=lambda kv: kv[1][1]
        )
        raise VotesError(
            f"example id {key!r} appears at rows {first} and {second} of {dataset!r}; "
            "example ids must be unique"
        )


def _table(
    columns: VoteColumns, match: RowMatch, order: np.ndarray | None, threshold: int
) -> tuple[pa.Table, dict[str, int]]:
    """The corrections table sorted by row (``order`` sorts the records by row; None when they
    are sorted already, as in a file written in row order), and the count of each verdict."""

    def by_row(values: np.ndarray) -> np.ndarray:
        return values if order is None else values[order]

    # The rule's first match wins: the codes are set from the last test to the first.
    verdict_code = np.full(len(columns), len(_RULE), dtype=np.int8)
    for code in reversed(range(len(_RULE))):
        verdict_code[columns.counts[_RULE[code]].values >= threshold] = code
    if columns.wanted is not None:
        # A review finished early: a record with no agreement and fewer votes than its review
        # wanted is not judged yet, not a disagreement.
        totals = sum(count.values.astype(np.int64) for count in columns.counts.values())
        verdict_code[(verdict_code == _NO_AGREEMENT) & (totals < columns.wanted)] = _UNREVIEWED
    fields = []
    for name in COUNT_FIELDS:
        count = columns.counts.get(name)
        if count is None:
            fields.append(pa.nulls(len(columns), pa.int32()))
        else:
            valid = by_row(count.present)
            fields.append(from_numpy(by_row(count.values), pa.int32(), valid=valid))
    table = pa.Table.from_arrays(
        [
            from_numpy(by_row(match.rows), pa.int64()),
            _take(match.ids, by_row(match.id_at)),
            from_numpy(by_row(columns.given), pa.int32()),
            from_numpy(by_row(columns.suggested), pa.int32(), valid=by_row(columns.has_suggested)),
            pc.take(string_array(VERDICTS), from_numpy(by_row(verdict_code), pa.int8())),
            pa.nulls(len(columns), pa.float64()),
            pa.StructArray.from_arrays(fields, fields=list(VOTES_TYPE)),
        ],
        schema=CORRECTIONS_SCHEMA,
    )
    per = np.bincount(verdict_code, minlength=len(VERDICTS))
    counted: dict[str, int] = {v: int(n) for v, n in zip(VERDICTS, per, strict=True)}
    if not counted["unreviewed"]:
        del counted["unreviewed"]  # summaries made before the verdict keep their bytes
    return table, counted


def _take(values: pa.Array, index: np.ndarray) -> pa.Array:
    """``values`` at ``index``; the array itself when the index takes each value in order."""
    if len(index) == len(values) and bool((index == np.arange(len(index))).all()):
        return values
    return pc.take(values, from_numpy(index, pa.int64()))


def _raters(columns: VoteColumns) -> int | None:
    """Raters per record, when every record's counts add up to the same positive number.

    Provenance only, never grounds for refusing: it is inferred, not declared. MNIST's file
    shows its limits: where the guessed label equals the given one a rater's vote is counted
    under both, so totals vary and the number stays unknown.
    """
    totals = np.zeros(len(columns), dtype=np.int64)
    for count in columns.counts.values():
        totals += count.values
    # np.unique of 5 million totals: seconds (numpy hashes them); a min and a max instead.
    same = len(totals) > 0 and totals.min() == totals.max() != 0
    return int(totals[0]) if same else None
