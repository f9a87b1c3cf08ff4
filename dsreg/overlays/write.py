"""Overlay manifests and their corrections tables: immutable label corrections of one snapshot.

Corrections table (Parquet), one row per corrected example, sorted by ``row``: ``row``,
``example_id`` and ``given_label`` (all three checked against the base snapshot),
``suggested_label`` (null when none), ``verdict``, ``score`` (label quality, lower is worse;
null when none), ``votes`` (struct of counts; null for detected overlays).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa

from dsreg._util.lazy import lazy_imports
from dsreg.errors import InvalidInputError, ManifestError
from dsreg.formats.arrays import from_numpy, string_array
from dsreg.formats.corrections import (
    CORRECTIONS_SCHEMA,
    LABEL_SET_VERSIONS,
    VOTES_TYPE,
    corrections_table,
    corrections_version,
)
from dsreg.formats.manifests import (
    AUDIT_VERDICTS,
    SUMMARIZED_VERDICTS,
    VERDICTS,
    Overlay,
    OverlayKind,
    Snapshot,
)
from dsreg.formats.tables import as_numpy, parquet_bytes
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.tables import examples_parquet

# Imported when first called: a command reading a table seldom needs it (0.1 s to import).
with lazy_imports():
    import pyarrow.compute as pc

__all__ = [
    "CORRECTIONS_SCHEMA",
    "VOTES_TYPE",
    "JoinedRows",
    "corrections_table",
    "write_overlay",
]

_AUDITED = frozenset(AUDIT_VERDICTS)
_LABEL_VERDICTS = frozenset(VERDICTS) - _AUDITED
# The kinds whose corrections table may hold the matches column (version 3).
_MATCHED: Final = frozenset({"audit", "validated"})
_ALLOWED: dict[str, frozenset[str]] = {
    "detected": frozenset({"suspected"}),
    # A review of an audit's findings (``dsreg review --audit``) keeps the confirmed ones'
    # verdicts: a validated overlay may hold the audit's verdicts too.
    "validated": (_LABEL_VERDICTS - {"suspected"}) | _AUDITED,
    "manual": _LABEL_VERDICTS,
    "audit": _AUDITED,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinedRows:
    """What a producer's join read from the base snapshot's examples object: the row check of a
    table whose rows came from that join, so that ``write_overlay`` does not decode the same
    examples a second time.

    The producer joined its records to the snapshot's examples, on ``example_id`` or on the row
    position, reading the examples object ``examples`` after re-hashing it, and took each
    matched row's position as ``row``, its id as ``example_id`` and its label as ``labels``: by
    construction each ``row`` holds the table's ``example_id``, and ``write_overlay`` checks
    ``given_label`` against ``labels``.

    Attributes
    ----------
    examples : str
        Digest of the examples object the join read; must be the base snapshot's.
    labels : ndarray of int, shape (m,)
        The snapshot's label at each row of the table, in the table's order.
    """

    examples: str
    labels: np.ndarray


def _check(
    table: pa.Table,
    *,
    kind: str,
    snap: Snapshot,
    gather: Callable[[np.ndarray], tuple[pa.Array | None, np.ndarray]],
) -> None:
    version = corrections_version(table.schema)
    if version is None:
        raise InvalidInputError(f"corrections table has schema {table.schema}, not the overlay's")
    if (kind == "audit" and version != 3) or (version == 3 and kind not in _MATCHED):
        raise InvalidInputError(
            f"a {kind} overlay cannot have a version {version} corrections table: the matches "
            "column (version 3) is the audit's, and the review of an audit's (validated)"
        )
    rows = as_numpy(table.column("row")).astype(np.int64, copy=False)
    n = snap.rows
    if len(rows) and (rows.min() < 0 or rows.max() >= n):
        bad = rows[(rows < 0) | (rows >= n)]
        raise InvalidInputError(
            f"{len(bad)} corrections name rows outside [0, {n}), first {bad[:5].tolist()}"
        )
    if len(rows) > 1 and not np.all(np.diff(rows) > 0):
        dup = np.unique(rows[1:][np.diff(rows) == 0])
        raise InvalidInputError(f"rows {dup[:5].tolist()} are corrected twice in one overlay")
    want_ids, at_labels = gather(rows)
    if (
        want_ids is not None
        and len(rows)
        and not pc.all(pc.equal(want_ids, table.column("example_id"))).as_py()
    ):
        mism = np.flatnonzero(~as_numpy(pc.equal(want_ids, table.column("example_id"))))
        first = [(int(rows[i]), table.column("example_id")[i].as_py()) for i in mism[:3]]
        raise InvalidInputError(
            f"{len(mism)} corrections name an example id that is not the base's at that row, "
            f"first (row, id) {first}"
        )
    given = as_numpy(table.column("given_label"))
    bad = np.flatnonzero(at_labels != given)
    if len(bad):
        raise InvalidInputError(
            f"{len(bad)} corrections give a label that is not the snapshot's, first rows "
            f"{rows[bad[:5]].tolist()}"
        )
    k = len(snap.classes)
    sug = table.column("suggested_label")
    if sug.null_count < len(sug):
        s = as_numpy(sug.drop_null())
        if s.min() < 0 or s.max() >= k:
            raise InvalidInputError(
                f"suggested labels outside [0, {k}): {s[(s < 0) | (s >= k)][:5]}"
            )
    if version in LABEL_SET_VERSIONS:
        _check_label_lists(table, k)
    verdicts = set(pc.unique(table.column("verdict")).to_pylist())
    wrong = sorted(verdicts - _ALLOWED[kind])
    if wrong:
        audit = " ('dsreg audit duplicates' makes the audit's)" if set(wrong) & _AUDITED else ""
        raise InvalidInputError(
            f"a {kind} overlay cannot hold verdicts {wrong}; allowed: {sorted(_ALLOWED[kind])}"
            + audit
        )
    needs = pc.and_(
        pc.is_in(table.column("verdict"), string_array(["suspected", "correctable"])),
        pc.is_null(sug),
    )
    if pc.any(needs).as_py():
        raise InvalidInputError("suspected and correctable rows need a suggested label")


def _check_label_lists(table: pa.Table, k: int) -> None:
    """``labels`` and ``label_counts`` name classes of the snapshot, each once per row, with
    counts of at least 0 (vectorised over the flattened lists)."""
    for name, values in (
        ("labels", pc.list_flatten(table.column("labels"))),
        ("label_counts", pc.struct_field(pc.list_flatten(table.column("label_counts")), "label")),
    ):
        if len(values):
            lo_hi = pc.min_max(values).as_py()
            if lo_hi["min"] < 0 or lo_hi["max"] >= k:
                raise InvalidInputError(
                    f"{name} hold classes outside [0, {k}) (from {lo_hi['min']} to "
                    f"{lo_hi['max']}); the snapshot names {k} classes"
                )
        col = table.column(name).combine_chunks()
        parents = as_numpy(pc.list_parent_indices(col)).astype(np.int64)
        key = parents * k + as_numpy(values).astype(np.int64)
        if len(key) > 1 and len(np.unique(key)) != len(key):
            raise InvalidInputError(f"a row's {name} names the same class twice; name it once")
    counts = pc.struct_field(pc.list_flatten(table.column("label_counts")), "count")
    if len(counts) and pc.min(counts).as_py() < 0:
        raise InvalidInputError("label_counts hold a negative count; counts are raters (>= 0)")


def _at_rows(reg: Registry, snap: Snapshot, rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The example ids and labels at ``rows`` (sorted, inside the snapshot), read a row group at
    a time from the verified examples table: a check of 5 million corrections against 50
    million rows holds two row groups at a time, not the snapshot's ids."""
    import pyarrow.parquet as pq

    data, pf = examples_parquet(reg, snap)
    what = f"examples table {short(snap.examples)} of {snap.dataset!r}"
    try:
        spans = []
        start = 0
        for g in range(pf.num_row_groups):
            m = pf.metadata.row_group(g).num_rows
            lo, hi = np.searchsorted(rows, [start, start + m])
            if hi > lo:
                spans.append((g, start, int(lo), int(hi)))
            start += m

        def gather(span: tuple[int, int, int, int]) -> tuple[pa.Array, np.ndarray]:
            g, start, lo, hi = span
            # A reader per call: one ParquetFile is not read from two threads at once.
            own = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False)
            t = own.read_row_group(g, columns=["example_id", "label"], use_threads=False)
            local = from_numpy(rows[lo:hi] - start, pa.int64())
            got = t.column(0).take(local).combine_chunks().cast(pa.string())
            return got, as_numpy(t.column(1).take(local)).astype(np.int64)

        # Two row groups decoded at once (Arrow releases the GIL): at 50 million rows the ids
        # of every group are decoded, 2.6 s on one thread.
        with ThreadPoolExecutor(2) as pool:
            parts = list(pool.map(gather, spans))
        ids = [p[0] for p in parts]
        labels = [p[1] for p in parts]
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"{what} is not readable Parquet: {e}") from e
    if not ids:
        return pa.array([], pa.string()), np.empty(0, dtype=np.int64)
    return pa.concat_arrays(ids), np.concatenate(labels)


def _summarized(kind: str, verdict: str) -> bool:
    """Whether a ``kind`` overlay's summary counts ``verdict`` when no row has it: the audit's
    verdicts in a validated overlay only when a row has one, so every validated overlay of
    label votes keeps its summary, and its digest."""
    if kind != "audit" and verdict in _AUDITED:
        return False
    return verdict in SUMMARIZED_VERDICTS


def write_overlay(
    reg: Registry,
    *,
    base: str,
    kind: OverlayKind,
    table: pa.Table,
    producer: dict[str, Any],
    summary: dict[str, Any] | None = None,
    command: str = "",
    joined: JoinedRows | None = None,
) -> str:
    """Check ``table`` against the base snapshot, store it and the overlay; return its digest.

    Each correction's ``example_id`` and ``given_label`` are checked against the examples table
    at its ``row``, re-read a row group at a time; or, when the rows came from a join over the
    base's verified examples object (``joined``), against what that join read: the ids are its
    keys, and the labels it returned are compared with ``given_label``.
    """
    snap = reg.snapshot(base)
    if joined is not None and (
        joined.examples != snap.examples or len(joined.labels) != table.num_rows
    ):
        raise InvalidInputError(
            f"the rows were joined against examples {short(joined.examples)} "
            f"({len(joined.labels)} labels), not the {table.num_rows} rows of "
            f"{short(snap.examples)}, the examples of {short(base)}"
        )

    def gather(rows: np.ndarray) -> tuple[pa.Array | None, np.ndarray]:
        if joined is None:
            return _at_rows(reg, snap, rows)
        return None, np.asarray(joined.labels)

    # The canonical encoding (pyarrow, one thread, the GIL released) runs on a second thread
    # while the table is checked; its bytes are used only once the check has passed.
    with ThreadPoolExecutor(1) as pool:
        encoded = pool.submit(parquet_bytes, table)
        _check(table, kind=kind, snap=snap, gather=gather)
        data = encoded.result()
    vc = pc.value_counts(table.column("verdict"))
    counts = dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True))
    full_summary: dict[str, Any] = {"rows": table.num_rows}
    full_summary.update(
        {
            v: counts.get(v, 0)
            for v in VERDICTS
            if v in _ALLOWED[kind] and (v in counts or _summarized(kind, v))
        }
    )
    full_summary.update(summary or {})
    with reg.lock():
        ov = Overlay(
            base=base,
            kind=kind,
            corrections=reg.store.put_bytes(data),
            producer=producer,
            summary=full_summary,
            version=corrections_version(table.schema) or 1,
        )
        digest = reg.put_manifest(ov)
        reg.refs.record(snap.dataset, event="overlay", new=digest, command=command)
    return digest
