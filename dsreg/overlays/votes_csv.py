"""Votes CSV read column by column (#15): 5 million votes without a Python object per record.

``fast_csv`` reads the file with Arrow, checks every rule of ``votes._parse_csv`` and
``votes._locate`` / ``_check_labels`` on whole columns, matches ids to rows with the shared
join (``overlays.match.match_ids``) and builds the corrections table the record-by-record path
builds, value for value (so the overlay digest is the same). The snapshot comes in batches
(``overlays.create.votes_overlay`` streams them from the examples table: 50 million ids are
never decoded at once). It answers only for files that
pass every check: on the first thing it does not accept it returns None, and the caller runs the
record-by-record path, whose messages name the lines at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dsreg.model.corrections import CORRECTIONS_SCHEMA, COUNT_FIELDS, VOTES_TYPE
from dsreg.model.tables import as_numpy, from_numpy
from dsreg.overlays.match import match_ids

__all__ = ["fast_csv"]

_COLUMNS = ("example_id", "given_label", "suggested_label", "given", "guessed", "both", "neither")
_COUNTS = ("given", "guessed", "both", "neither")
_INT32_MAX = 2**31 - 1
_VERDICTS = ("non_error", "correctable", "multi_label", "neither", "non_agreement")


def fast_csv(
    path: Path,
    *,
    threshold: int,
    batches: Callable[[], Iterable[pa.Table | pa.RecordBatch]],
    classes: tuple[str, ...],
) -> tuple[pa.Table, dict[str, int], int | None] | None:
    """The corrections table, the verdict counts and the raters per record of a votes CSV, or
    None when the file needs the record-by-record path (anything unusual, every refusal).
    ``batches()`` yields the snapshot's ``example_id`` and ``label`` columns in row order, a
    batch at a time (read only once the votes themselves pass)."""
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(encoding="utf8"),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(_COLUMNS, pa.string()),
                strings_can_be_null=False,
                null_values=[],
            ),
        )
    except (pa.ArrowException, OSError, UnicodeDecodeError):
        return None
    names = table.column_names
    if names and names[0].startswith("\ufeff"):
        return None
    if sorted(names) != sorted(_COLUMNS) or not len(table):
        return None
    cols: dict[str, pa.Array] = {}
    for name in _COLUMNS:
        col = table.column(name).combine_chunks()
        if col.null_count or not pc.all(pc.equal(pc.utf8_trim_whitespace(col), col)).as_py():
            return None  # cells with spaces around them: the other path strips them
        cols[name] = col
    if not pc.all(pc.greater(pc.utf8_length(cols["example_id"]), 0)).as_py():
        return None
    given_label = _labels(cols["given_label"], classes)
    if given_label is None:
        return None
    has_sug = pc.greater(pc.utf8_length(cols["suggested_label"]), 0)
    sug = _labels(pc.if_else(has_sug, cols["suggested_label"], pa.scalar("0")), classes)
    if sug is None:
        return None
    counts: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    for name in _COUNTS:
        got = _count(cols[name])
        if got is None:
            return None
        counts[name], present[name] = got
    has_sug_np = as_numpy(has_sug)
    if not present["given"].all():
        return None
    if (~has_sug_np & (counts["guessed"] > 0)).any() or (has_sug_np & ~present["guessed"]).any():
        return None
    found = match_ids(batches(), cols["example_id"])
    rows = found.rows
    if found.twice or (rows < 0).any() or len(np.unique(rows)) != len(rows):
        return None
    if (found.labels != given_label).any():
        return None

    t = threshold
    g, q, b, n = (counts[k] for k in _COUNTS)
    verdict_code = np.select([g >= t, q >= t, b >= t, n >= t], [0, 1, 2, 3], default=4)
    order = np.argsort(rows, kind="stable")
    fields = []
    for name in COUNT_FIELDS:
        if name in counts:
            fields.append(from_numpy(counts[name][order], pa.int32(), valid=present[name][order]))
        else:
            fields.append(pa.nulls(len(rows), pa.int32()))
    votes = pa.StructArray.from_arrays(fields, fields=list(VOTES_TYPE))
    m = len(rows)
    out = pa.Table.from_arrays(
        [
            from_numpy(rows[order], pa.int64()),
            pc.take(cols["example_id"], from_numpy(order, pa.int64())),
            from_numpy(given_label[order], pa.int32()),
            from_numpy(sug[order], pa.int32(), valid=has_sug_np[order]),
            pc.take(pa.array(_VERDICTS, pa.string()), from_numpy(verdict_code[order], pa.int64())),
            pa.nulls(m, pa.float64()),
            votes,
        ],
        schema=CORRECTIONS_SCHEMA,
    )
    per = np.bincount(verdict_code, minlength=5)
    summary = {v: int(c) for v, c in zip(_VERDICTS, per, strict=True)}
    totals = np.unique(sum((counts[k] for k in _COUNTS), np.zeros(m, dtype=np.int64)))
    raters = int(totals[0]) if len(totals) == 1 and totals[0] != 0 else None
    return out, summary, raters


def _labels(cells: pa.Array, classes: tuple[str, ...]) -> np.ndarray | None:
    """Class indices of label cells (exact names, or digits below k, agreeing when both), or
    None for any cell that needs the other path (a name that matches only without case, an
    ambiguous or unknown label)."""
    k = len(classes)
    by_name = pc.index_in(cells, value_set=pa.array(classes, pa.string()))
    digits = pc.match_substring_regex(cells, "^[0-9]{1,9}$")
    as_int: Any = pc.if_else(digits, cells, pa.scalar("-1"))
    index = as_numpy(pc.cast(as_int, pa.int64()))
    index = np.where(index < k, index, -1)
    name = as_numpy(by_name, fill=-1).astype(np.int64)
    if ((name >= 0) & (index >= 0) & (name != index)).any():
        return None
    out = np.where(name >= 0, name, index)
    if (out < 0).any():
        return None
    return out


def _count(cells: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """Whole-number cells (empty: absent) as int64 values and a presence mask."""
    present = as_numpy(pc.greater(pc.utf8_length(cells), 0))
    if not pc.all(pc.match_substring_regex(cells, "^[0-9]{0,10}$")).as_py():
        return None
    values = as_numpy(
        pc.cast(pc.if_else(from_numpy(present, pa.bool_()), cells, pa.scalar("0")), pa.int64())
    )
    if (values > _INT32_MAX).any():
        return None
    return values, present
