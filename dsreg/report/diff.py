"""``dsreg diff A B``: rows only in A, only in B, and relabelled, with a from -> to count table.

Two revisions of one snapshot are matched by ``row`` (the snapshot position) and compared at the
rows their overlays name only (the rest cannot differ): work in the size of the corrections.
Revisions of different snapshots are matched by ``example_id`` through their DuckDB views, and
labels are compared by class name, so snapshots whose class lists differ still diff sensibly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from dsreg.errors import InvalidInputError
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.report.agreement import Agreement, compare_corrections
from dsreg.views.sparse import (
    Named,
    SparseView,
    labels_at,
    load_corrections,
    sparse_views,
    union_rows,
)
from dsreg.views.sql import Connection

__all__ = ["TOP", "DiffResult", "Transition", "diff"]

#: How many example ids of each kind of change a diff lists by default (``--top``).
TOP = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """How many rows served label ``source`` in A and ``target`` in B."""

    source: str
    target: str
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "count": self.count}


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffResult:
    """The difference of two revisions' views; ``samples`` hold the first ``top`` example ids of
    each kind of change, in snapshot order (query the views for all of them)."""

    a: str
    b: str
    a_revision: str
    b_revision: str
    match: str  # "row" (one snapshot) or "example_id"
    rows_a: int
    rows_b: int
    only_a: int
    only_b: int
    relabelled: int
    transitions: tuple[Transition, ...]
    samples: dict[str, list[str]]
    # One snapshot, different overlays: how the two correction sets agree (report/agreement.py)
    corrections: Agreement | None = None

    @property
    def unchanged(self) -> int:
        return self.rows_a - self.only_a - self.relabelled

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": {"spec": self.a, "revision": self.a_revision, "rows": self.rows_a},
            "b": {"spec": self.b, "revision": self.b_revision, "rows": self.rows_b},
            "match": self.match,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "relabelled": self.relabelled,
            "unchanged": self.unchanged,
            "transitions": [t.to_dict() for t in self.transitions],
            "samples": self.samples,
            "corrections": None if self.corrections is None else self.corrections.to_dict(),
        }


class _Compared(TypedDict):
    """The fields of a ``DiffResult`` that name the two revisions compared."""

    a: str
    b: str
    a_revision: str
    b_revision: str


def _compared(ra: Resolved, rb: Resolved) -> _Compared:
    return _Compared(a=ra.spec, b=rb.spec, a_revision=ra.digest, b_revision=rb.digest)


def diff(ra: Resolved, rb: Resolved, *, top: int = TOP) -> DiffResult:
    """Compare the views of revisions ``ra`` and ``rb`` (both read by one reader); list the
    first ``top`` example ids of each kind of change."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise InvalidInputError(f"top {top!r} is not a count of rows: give 0 or more")
    reg = ra.registry
    if ra.revision.snapshot == rb.revision.snapshot:
        return _diff_rows(reg, ra, rb, top=top)
    return _diff_sql(reg, ra, rb, match="example_id", top=top)


def _diff_rows(reg: Registry, ra: Resolved, rb: Resolved, *, top: int = TOP) -> DiffResult:
    """One snapshot: two views can differ only at rows some overlay names, so only those rows
    (and the count of the rest) are compared: the snapshot's labels are read at those rows, a
    batch at a time, and its ids for the samples only (memory in the size of the corrections)."""
    snap = reg.snapshot(ra.revision.snapshot)
    ma, mb = load_corrections(reg, ra.revision), load_corrections(reg, rb.revision)
    n = snap.rows
    va = sparse_views(n, ma, [ra.revision.view])[ra.revision.view]
    vb = sparse_views(n, mb, [rb.revision.view])[rb.revision.view]
    named = union_rows(ma.named, mb.named)
    given = labels_at(reg, snap, named)
    served_a, label_a = _side(named, va, ma, given)
    served_b, label_b = _side(named, vb, mb, given)
    # Rows no overlay names: served by a view that keeps "every row except", with given labels.
    rest = n - len(named)
    only_a = served_a & ~served_b
    only_b = served_b & ~served_a
    changed = served_a & served_b & (label_a != label_b)
    names = snap.classes
    k = len(names)
    pairs = np.bincount(label_a[changed].astype(np.int64) * k + label_b[changed], minlength=k * k)
    trans = sorted(
        ((names[int(c) // k], names[int(c) % k], int(pairs[c])) for c in np.flatnonzero(pairs)),
        key=lambda x: (-x[2], x[0], x[1]),
    )
    rest_a = rest if va.complement and not vb.complement else 0
    rest_b = rest if vb.complement and not va.complement else 0
    first = {
        "only_a": _first(named[only_a], named if rest_a else None, n, top),
        "only_b": _first(named[only_b], named if rest_b else None, n, top),
        "relabelled": named[changed][:top],
    }
    return DiffResult(
        **_compared(ra, rb),
        match="row",
        rows_a=va.size,
        rows_b=vb.size,
        only_a=int(only_a.sum()) + rest_a,
        only_b=int(only_b.sum()) + rest_b,
        relabelled=int(changed.sum()),
        transitions=tuple(Transition(source=f, target=t, count=c) for f, t, c in trans),
        samples=_ids_at(reg.store.path(snap.examples), first),
        corrections=(
            compare_corrections(ma, mb) if ra.revision.overlays != rb.revision.overlays else None
        ),
    )


def _member(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each of ``a``, whether it is in ``b`` (``b`` sorted)."""
    if not len(b):
        return np.zeros(len(a), dtype=bool)
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return np.asarray(b[at] == a)


def _side(
    named: np.ndarray, vw: SparseView, merged: Named, given: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """At the ``named`` rows (``given``: their snapshot labels): whether ``vw`` serves each,
    and the label it serves."""
    listed = _member(named, vw.rows)
    served = ~listed if vw.complement else listed
    label = given.copy()
    rel = _member(named, vw.relabel)
    at = np.searchsorted(merged.named, named[rel])
    label[rel] = merged.suggested[at]
    return served, label


def _first(rows: np.ndarray, excluded: np.ndarray | None, n: int, top: int) -> np.ndarray:
    """The first ``top`` sample rows: ``rows``, plus (when ``excluded`` is given) the rows
    outside it."""
    if excluded is None:
        return rows[:top]
    # The first `top` rows outside `excluded` lie below len(excluded) + top.
    upto = np.arange(min(n, len(excluded) + top))
    outside = upto[~_member(upto, excluded)][:top]
    return np.union1d(rows[:top], outside)[:top]


def _ids_at(path: Path, rows: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """The example ids at a few rows, reading only the row groups that hold them."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
    cache: dict[int, list[str]] = {}
    out: dict[str, list[str]] = {}
    for kind, rs in rows.items():
        ids = []
        for r in rs.tolist():
            g = int(np.searchsorted(starts, r, side="right")) - 1
            if g not in cache:
                cache[g] = pf.read_row_group(g, columns=["example_id"]).column(0).to_pylist()
            ids.append(cache[g][r - int(starts[g])])
        out[kind] = ids
    return out


def _diff_sql(
    reg: Registry, ra: Resolved, rb: Resolved, *, match: str, top: int = TOP
) -> DiffResult:
    """Any two revisions, through their DuckDB views, matched on ``match`` (a full outer join)."""
    with Connection(ra.reader) as con:
        con.create_view("__dsreg_a", ra.revision)
        con.create_view("__dsreg_b", rb.revision)
        # One pass over both views keeps only the rows that differ; the counts come from those.
        con.execute(
            f"""
            CREATE TEMP TABLE __dsreg_diff AS
            SELECT coalesce(x."row", y."row") AS "row", coalesce(x.example_id, y.example_id)
                   AS example_id, x.label_name AS a_label, y.label_name AS b_label,
                   CASE WHEN y."{match}" IS NULL THEN 'only_a'
                        WHEN x."{match}" IS NULL THEN 'only_b' ELSE 'relabelled' END AS change
            FROM (SELECT "row", example_id, label_name FROM __dsreg_a) AS x
            FULL OUTER JOIN (SELECT "row", example_id, label_name FROM __dsreg_b) AS y
              ON x."{match}" = y."{match}"
            WHERE x."{match}" IS NULL OR y."{match}" IS NULL OR x.label_name <> y.label_name
            """
        )
        rows_a = int(con.execute("SELECT count(*) FROM __dsreg_a").fetchall()[0][0])
        rows_b = int(con.execute("SELECT count(*) FROM __dsreg_b").fetchall()[0][0])
        counts = dict(
            con.execute("SELECT change, count(*) FROM __dsreg_diff GROUP BY ALL").fetchall()
        )
        trans = con.execute(
            "SELECT a_label, b_label, count(*) FROM __dsreg_diff WHERE change = 'relabelled' "
            "GROUP BY ALL ORDER BY 3 DESC, 1, 2"
        ).fetchall()
        samples: dict[str, list[str]] = {}
        for kind in ("only_a", "only_b", "relabelled"):
            got = con.execute(
                'SELECT example_id FROM __dsreg_diff WHERE change = ? ORDER BY "row", '
                f"example_id LIMIT {int(top)}",
                [kind],
            ).fetchall()
            samples[kind] = [r[0] for r in got]
    return DiffResult(
        **_compared(ra, rb),
        match=match,
        rows_a=rows_a,
        rows_b=rows_b,
        only_a=int(counts.get("only_a", 0)),
        only_b=int(counts.get("only_b", 0)),
        relabelled=int(counts.get("relabelled", 0)),
        transitions=tuple(Transition(source=f, target=t, count=int(c)) for f, t, c in trans),
        samples=samples,
    )
