"""The corrections table's column layout, shared by every producer of overlays.

One row per corrected example, sorted by ``row``: ``row``, ``example_id`` and ``given_label`` (all
three checked against the base snapshot), ``suggested_label`` (null when none), ``verdict``,
``score`` (label quality, lower is worse; null when none), ``votes`` (struct of counts; null for
detected overlays).

Version 2 (``dsreg/overlay/2`` manifests) adds two columns after ``votes``: ``labels`` (list of
class indices: every label that fits, as ImageNet-ReaL) and ``label_counts`` (list of
``{label, count}``: the raters' distribution, as CIFAR-10H), both null where a row has none. A
table without them is written exactly as before, so version 1 overlays keep their bytes.

Version 3 (``dsreg/overlay/3``, the audit's overlays) adds ``matches`` after ``votes``: per row
the list of ``{dataset, example_id, tier, distance}`` it matched (``dataset`` the revision
digest of the matched set, ``tier`` ``exact``, ``image``, ``text`` or ``ngram``).

Version 4 (``dsreg/overlay/4``, a published re-annotation's overlays) has version 2's columns
and ``category`` after them: the category the re-annotation gave the row (MMLU-Redux's error
type, a status file's status), as dsreg spells it (docs/questions.md), null where none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

import numpy as np
import pyarrow as pa

from dsreg.formats.arrays import from_numpy, string_array

__all__ = [
    "CORRECTIONS_SCHEMA",
    "CORRECTIONS_SCHEMA_2",
    "CORRECTIONS_SCHEMA_3",
    "CORRECTIONS_SCHEMA_4",
    "COUNT_FIELDS",
    "LABELS_TYPE",
    "LABEL_COUNTS_TYPE",
    "LABEL_SET_VERSIONS",
    "MATCHES_TYPE",
    "VOTES_TYPE",
    "LabelSets",
    "corrections_table",
    "corrections_version",
    "with_category",
]

COUNT_FIELDS: Final = ("given", "guessed", "both", "neither", "neutral", "off_topic")
VOTES_TYPE: Final = pa.struct([pa.field(name, pa.int32()) for name in COUNT_FIELDS])
CORRECTIONS_SCHEMA: Final = pa.schema(
    [
        pa.field("row", pa.int64(), nullable=False),
        pa.field("example_id", pa.string(), nullable=False),
        pa.field("given_label", pa.int32(), nullable=False),
        pa.field("suggested_label", pa.int32()),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("votes", VOTES_TYPE),
    ]
)


def _records_type(**fields: pa.DataType) -> pa.ListType:
    """A list of records whose ``fields`` are all present (no null record, no null field)."""
    struct = pa.struct([pa.field(name, t, nullable=False) for name, t in fields.items()])
    return pa.list_(pa.field("element", struct, nullable=False))


LABELS_TYPE: Final = pa.list_(pa.field("element", pa.int32(), nullable=False))
# Counts of raters are whole numbers (CIFAR-10H's counts file is integers): int32, not float.
LABEL_COUNTS_TYPE: Final = _records_type(label=pa.int32(), count=pa.int32())
CORRECTIONS_SCHEMA_2: Final = pa.schema(
    [
        *CORRECTIONS_SCHEMA,
        pa.field("labels", LABELS_TYPE),
        pa.field("label_counts", LABEL_COUNTS_TYPE),
    ]
)


MATCHES_TYPE: Final = _records_type(
    dataset=pa.string(), example_id=pa.string(), tier=pa.string(), distance=pa.float64()
)
CORRECTIONS_SCHEMA_3: Final = pa.schema([*CORRECTIONS_SCHEMA, pa.field("matches", MATCHES_TYPE)])
CORRECTIONS_SCHEMA_4: Final = pa.schema([*CORRECTIONS_SCHEMA_2, pa.field("category", pa.string())])
# The layouts with the ``labels`` and ``label_counts`` columns.
LABEL_SET_VERSIONS: Final = (2, 4)
_LAYOUTS: Final = (
    (1, CORRECTIONS_SCHEMA),
    (2, CORRECTIONS_SCHEMA_2),
    (3, CORRECTIONS_SCHEMA_3),
    (4, CORRECTIONS_SCHEMA_4),
)


def corrections_version(schema: pa.Schema) -> int | None:
    """1, 2, 3 or 4 for the layouts of a corrections table (None: none of them)."""
    return next((v for v, layout in _LAYOUTS if schema.equals(layout)), None)


def _strings(values: pa.Array | pa.ChunkedArray | Sequence[str]) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values.cast(pa.string())
    return string_array(list(values))


def _scores(score: np.ndarray | pa.Array | None, n: int) -> pa.Array:
    if score is None:
        return pa.nulls(n, pa.float64())
    if isinstance(score, pa.ChunkedArray):
        score = score.combine_chunks()
    if isinstance(score, pa.Array):
        return score.cast(pa.float64())
    return from_numpy(score, pa.float64())


class LabelSets(NamedTuple):
    """Version 2's two columns of a corrections table, each an Arrow list per row (null where
    the row has none), or None where the table has no such column (all null)."""

    labels: pa.Array | None = None
    label_counts: pa.Array | None = None


def corrections_table(
    *,
    rows: np.ndarray,
    example_ids: pa.Array | list[str],
    given_label: np.ndarray,
    suggested_label: np.ndarray | None,
    verdict: list[str] | pa.Array,
    score: np.ndarray | pa.Array | None = None,
    votes: pa.Array | None = None,
    label_sets: LabelSets | None = None,
) -> pa.Table:
    """Assemble a corrections table in the fixed schema, sorted by row.

    ``suggested_label`` entries below 0 mean "none" (null). With either of ``label_sets``'s
    columns the table has version 2's columns; without both it is a version 1 table, byte for
    byte what it always was (``with_category`` makes a version 4 table of either).
    """
    n = len(rows)
    # Built from numpy buffers (formats/arrays.py): no pandas import on the way.
    sug = (
        pa.nulls(n, pa.int32())
        if suggested_label is None
        else from_numpy(suggested_label, pa.int32(), valid=np.asarray(suggested_label) >= 0)
    )
    table = pa.Table.from_arrays(
        [
            from_numpy(np.asarray(rows), pa.int64()),
            _strings(example_ids),
            from_numpy(np.asarray(given_label), pa.int32()),
            sug,
            _strings(verdict),
            _scores(score, n),
            pa.nulls(n, VOTES_TYPE) if votes is None else votes.cast(VOTES_TYPE),
        ],
        schema=CORRECTIONS_SCHEMA,
    )
    labels, label_counts = label_sets or LabelSets()
    if labels is not None or label_counts is not None:
        table = table.append_column(
            CORRECTIONS_SCHEMA_2.field("labels"),
            pa.nulls(n, LABELS_TYPE) if labels is None else labels.cast(LABELS_TYPE),
        ).append_column(
            CORRECTIONS_SCHEMA_2.field("label_counts"),
            pa.nulls(n, LABEL_COUNTS_TYPE)
            if label_counts is None
            else label_counts.cast(LABEL_COUNTS_TYPE),
        )
    return table.sort_by("row")


def with_category(table: pa.Table, category: pa.Array) -> pa.Table:
    """A version 1 or 2 corrections table (sorted by row) as a version 4 one: version 2's
    columns (null where it had none) and ``category``, one per row in the table's order."""
    n = table.num_rows
    if corrections_version(table.schema) == 1:
        table = table.append_column(
            CORRECTIONS_SCHEMA_2.field("labels"), pa.nulls(n, LABELS_TYPE)
        ).append_column(CORRECTIONS_SCHEMA_2.field("label_counts"), pa.nulls(n, LABEL_COUNTS_TYPE))
    return table.append_column(CORRECTIONS_SCHEMA_4.field("category"), category.cast(pa.string()))
