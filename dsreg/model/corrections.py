"""The corrections table's column layout, shared by every producer of overlays.

One row per corrected example, sorted by ``row``: ``row``, ``example_id`` and ``given_label`` (all
three checked against the base snapshot), ``suggested_label`` (null when none), ``verdict``,
``score`` (label quality, lower is worse; null when none), ``votes`` (struct of counts; null for
detected overlays).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa

__all__ = ["CORRECTIONS_SCHEMA", "COUNT_FIELDS", "VOTES_TYPE", "corrections_table"]

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


def corrections_table(
    *,
    rows: np.ndarray,
    example_ids: pa.Array | list[str],
    given_label: np.ndarray,
    suggested_label: np.ndarray | None,
    verdict: list[str] | pa.Array,
    score: np.ndarray | None = None,
    votes: pa.Array | None = None,
) -> pa.Table:
    """Assemble a corrections table in the fixed schema, sorted by row.

    ``suggested_label`` entries below 0 mean "none" (null).
    """
    n = len(rows)
    sug = (
        pa.nulls(n, pa.int32())
        if suggested_label is None
        else pa.array(
            np.asarray(suggested_label, dtype=np.int64),
            pa.int64(),
            mask=np.asarray(suggested_label) < 0,
        ).cast(pa.int32())
    )
    table = pa.Table.from_arrays(
        [
            pa.array(rows, pa.int64()),
            pa.array(example_ids, pa.string()),
            pa.array(given_label, pa.int32()),
            sug,
            pa.array(verdict, pa.string()),
            pa.nulls(n, pa.float64()) if score is None else pa.array(score, pa.float64()),
            pa.nulls(n, VOTES_TYPE) if votes is None else votes.cast(VOTES_TYPE),
        ],
        schema=CORRECTIONS_SCHEMA,
    )
    return table.sort_by("row")
