"""``dsreg diff A B``: rows only in A, only in B, and relabelled, with a from -> to count table.

Two revisions of one snapshot are matched by ``row`` (the snapshot position); revisions of
different snapshots by ``example_id``. Labels are compared by class name, so snapshots whose class
lists differ still diff sensibly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsreg.registry.registry import Registry
from dsreg.registry.views import Connection

__all__ = ["DiffResult", "Transition", "diff"]

_SAMPLES = 10


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
    """The difference of two revisions' views; ``samples`` hold the first example ids of each
    kind of change, in snapshot order (query the views for all of them)."""

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
        }


def diff(reg: Registry, a: str, b: str) -> DiffResult:
    """Compare the views of revisions ``a`` and ``b`` (specs)."""
    ra, rb = reg.resolve(a), reg.resolve(b)
    match = "row" if ra.revision.snapshot == rb.revision.snapshot else "example_id"
    with Connection(reg) as con:
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
                f"example_id LIMIT {_SAMPLES}",
                [kind],
            ).fetchall()
            samples[kind] = [r[0] for r in got]
    return DiffResult(
        a=a,
        b=b,
        a_revision=ra.digest,
        b_revision=rb.digest,
        match=match,
        rows_a=rows_a,
        rows_b=rows_b,
        only_a=int(counts.get("only_a", 0)),
        only_b=int(counts.get("only_b", 0)),
        relabelled=int(counts.get("relabelled", 0)),
        transitions=tuple(Transition(source=f, target=t, count=int(c)) for f, t, c in trans),
        samples=samples,
    )
