"""The view rule's three implementations serve the same views.

``dsreg.views.rule`` (numpy over every row: what ``Dataset`` serves to ``dsreg.open`` and
``checkout``), ``dsreg.views.sql`` (DuckDB over the Parquet objects: ``dsreg.connect`` and
``dsreg query``) and ``dsreg.views.sparse`` (the rows overlays name only: what ``dsreg eval`` and
``dsreg diff`` score) must agree row for row on every view of every revision. This is the one
test that holds them equal: random snapshots, random stacks of overlays over every verdict, with
and without suggested labels, and every view.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.formats.corrections import (
    COUNT_FIELDS,
    LABEL_COUNTS_TYPE,
    VOTES_TYPE,
    LabelSets,
    corrections_table,
    corrections_version,
)
from dsreg.formats.manifests import AUDIT_VERDICTS, VERDICTS, VIEWS, Overlay, Revision
from dsreg.formats.tables import parquet_bytes
from dsreg.ingest.snapshot import add_source
from dsreg.ingest.sources import Source
from dsreg.overlays.write import write_overlay
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader
from dsreg.registry.tables import read_corrections
from dsreg.views.dataset import Dataset
from dsreg.views.rule import apply_view, merge_overlays
from dsreg.views.sparse import load_revision, sparse_views, view_rows
from dsreg.views.sql import Connection

PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}
RELABEL = ("suspected", "correctable")


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    labels: np.ndarray  # int32, the snapshot's labels
    k: int  # classes
    metadata: bool  # the examples table has metadata columns after the fixed ones
    overlays: list[pa.Table]  # corrections tables, applied in order


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 30), label="rows")
    k = draw(st.integers(1, 4), label="classes")
    labels = np.asarray(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)), np.int32)
    overlays = []
    for _ in range(draw(st.integers(0, 3), label="overlays")):
        rows = sorted(draw(st.sets(st.integers(0, n - 1), max_size=n)))
        # A votes-like overlay (as import-votes writes it): the five categories, multi_label
        # often, a suggested label (the raters' guessed label) on every row, no label sets.
        votes_like = draw(st.booleans(), label="votes-like")
        if votes_like:
            pool = (*VERDICTS[1:], "multi_label", "multi_label")
            verdicts = [draw(st.sampled_from(pool)) for _ in rows]
            suggested = [draw(st.integers(0, k - 1)) for _ in rows]
        else:
            verdicts = [draw(st.sampled_from(VERDICTS)) for _ in rows]
            # -1: no suggestion, for any verdict (a suspected or correctable row without one
            # is served as if it had none of its own; see store_overlay).
            suggested = [draw(st.integers(-1, k - 1)) for _ in rows]
        # Scores and votes ride along with the verdict (the review columns), null or not.
        scores = [draw(st.one_of(st.none(), st.floats(0, 1))) for _ in rows]
        votes = [
            draw(
                st.one_of(
                    st.none(), st.fixed_dictionaries({f: st.integers(0, 5) for f in COUNT_FIELDS})
                )
            )
            for _ in rows
        ]
        r = np.asarray(rows, dtype=np.int64)
        # Some overlays carry label sets (version 2): a list, empty or not, or none per row.
        lists = counts = None
        if not votes_like and draw(st.booleans(), label="label sets"):
            sets = [
                draw(st.none() | st.lists(st.integers(0, k - 1), unique=True, max_size=k))
                for _ in rows
            ]
            lists = pa.array(sets, pa.list_(pa.int32()))
        # And raters' counts (a {label, count} per class counted, any order), or none per row.
        if not votes_like and draw(st.booleans(), label="counts"):
            counted = st.dictionaries(st.integers(0, k - 1), st.integers(0, 50), max_size=k)
            raw = [draw(st.none() | counted) for _ in rows]
            counts = pa.array(
                [
                    None if d is None else [{"label": c, "count": n} for c, n in d.items()]
                    for d in raw
                ],
                LABEL_COUNTS_TYPE,
            )
        overlays.append(
            corrections_table(
                rows=r,
                example_ids=[f"x{i}" for i in rows],
                given_label=labels[r],
                suggested_label=np.asarray(suggested, dtype=np.int64),
                verdict=verdicts,
                score=pa.array(scores, pa.float64()),
                votes=pa.array(votes, VOTES_TYPE),
                label_sets=LabelSets(labels=lists, label_counts=counts),
            )
        )
    return Case(
        labels=labels, k=k, metadata=draw(st.booleans(), label="metadata"), overlays=overlays
    )


def add_set(reg: Registry, case: Case) -> str:
    """A label-only snapshot (ids ``x0``…), optionally with metadata columns; its digest."""
    n = len(case.labels)
    meta = (
        pa.table({"split": [f"s{i % 3}" for i in range(n)], "weight": [i / 2 for i in range(n)]})
        if case.metadata
        else None
    )
    src = Source(
        ids=[f"x{i}" for i in range(n)],
        labels=case.labels,
        classes=tuple(f"c'{i}" for i in range(case.k)),  # a quote: SQL literal escaping
        payloads=[None] * n,
        metadata=meta,
        provenance={"kind": "table"},
    )
    return add_source(reg, "toy", src, tag="original").snapshot


def store_overlay(reg: Registry, snapshot: str, table: pa.Table) -> str:
    """Store a corrections table as a manual overlay; its digest.

    ``write_overlay`` refuses a suspected or correctable row without a suggested label, but an
    overlay written by another program (or cloned from one) may hold one, and the three must
    serve it alike: such a table is stored without those checks. So is a table mixing label
    verdicts with the audit's (``write_overlay`` keeps those to audit overlays).
    """
    verdicts = table.column("verdict").to_pylist()
    suggested = table.column("suggested_label").to_pylist()
    mixed = bool(set(verdicts) & set(AUDIT_VERDICTS))
    if not mixed and all(
        s is not None for v, s in zip(verdicts, suggested, strict=True) if v in RELABEL
    ):
        return write_overlay(reg, base=snapshot, kind="manual", table=table, producer=PRODUCER)
    corrections = reg.store.put_bytes(parquet_bytes(table))
    overlay = Overlay(
        base=snapshot,
        kind="manual",
        corrections=corrections,
        producer=PRODUCER,
        summary={"rows": table.num_rows},
        version=corrections_version(table.schema) or 1,
    )
    return reg.put_manifest(overlay)


@settings(max_examples=50, deadline=None)
@given(case=cases(), batch=st.integers(1, 8))
def test_numpy_sql_and_sparse_serve_the_same_view(case: Case, batch: int) -> None:
    n = len(case.labels)
    with tempfile.TemporaryDirectory() as tmp:
        reg = Registry.init(Path(tmp) / "reg")
        snap = add_set(reg, case)
        overlays: list[str] = []
        for table in case.overlays:
            digest = store_overlay(reg, snap, table)
            if digest not in overlays:  # the same corrections twice are one overlay
                overlays.append(digest)
        # The sparse form reads the revision once for every view, as eval and diff do.
        loaded = load_revision(reg, Revision(snapshot=snap, overlays=tuple(overlays)))
        # Read once in order, a row group at a time; then again, from the whole column.
        column = loaded.labels
        for _ in range(2):
            got = [column[g] for g in column.groups]
            assert np.concatenate([np.empty(0, np.int32), *got]).tolist() == case.labels.tolist()
        assert column.whole().tolist() == case.labels.tolist()
        named = loaded.merged
        has_suggestion = named.suggested >= 0
        cand_rows, cand_labels = named.named[has_suggestion], named.suggested[has_suggestion]
        sparse = sparse_views(n, named, VIEWS)
        code = np.zeros(n, dtype=np.int64)  # per row: 1 + the verdict's index, 0 for none
        code[named.named] = named.verdict
        # In memory, over the stack as drawn (the same table may come twice, which a revision
        # cannot hold): evaluate's view_rows against the numpy rule.
        merged = merge_overlays(n, case.overlays)
        con = Connection(LocalReader(reg))
        try:
            for view in VIEWS:
                revision = Revision(snapshot=snap, overlays=tuple(overlays), view=view)
                ds = Dataset(LocalReader(reg).revision(reg.put_manifest(revision)))

                # numpy: the reference.
                want = ds.view_rows()
                served = ds.labels(review=True)
                # A fresh Dataset reads the examples at the view's rows only (the mask from
                # the overlays first): the same table as after view_rows() above.
                fresh = Dataset(LocalReader(reg).revision(reg.put_manifest(revision)))
                assert fresh.labels(review=True).equals(served), view

                # DuckDB: the same table, column for column (ids, names, metadata included).
                con.create_view("v", revision)
                got = con.table('SELECT * FROM v ORDER BY "row"')
                # Names and verdicts: dictionaries in labels(), strings in SQL; same values.
                for name in ("label_name", "verdict", "suggested_label_name"):
                    assert pa.types.is_dictionary(served.schema.field(name).type), name
                assert served.cast(got.schema).equals(got), (view, got.to_pylist())

                # Sparse: the same rows, labels, given labels and verdicts.
                sv = sparse[view]
                rows = sv.served(n)
                assert rows.tolist() == want.rows.tolist(), view
                assert sv.size == len(rows)
                # A relabelled row's label is its candidate's suggestion, as evaluate reads it.
                assert cand_rows[sv.relabel_cand].tolist() == sv.relabel.tolist()
                label = case.labels.copy()
                label[sv.relabel] = cand_labels[sv.relabel_cand]
                assert label[rows].tolist() == want.label.tolist(), view
                assert case.labels[rows].tolist() == want.given_label.tolist(), view
                verdicts = [VERDICTS[c - 1] if c else None for c in code[rows]]
                assert verdicts == want.verdict.to_pylist(), view
                if view == "multilabel":
                    # Every label that fits: the last overlay's list; else, on a multi_label
                    # row with a suggestion, the given and the suggested label; else the label.
                    lists = {int(r): [int(label[r])] for r in rows}
                    assert named.sets is not None or not len(sv.set_rows)
                    for r, i in zip(sv.set_rows.tolist(), sv.set_index.tolist(), strict=True):
                        lists[r] = named.sets[i].as_py()  # type: ignore[index]
                    for r, c in zip(sv.pair_rows.tolist(), sv.pair_cand.tolist(), strict=True):
                        assert r not in sv.set_rows
                        lists[r] = sorted({int(case.labels[r]), int(cand_labels[c])})
                    assert [lists[int(r)] for r in rows] == served.column("labels").to_pylist()
                    assert want.labels is not None
                    assert want.labels.to_pylist() == served.column("labels").to_pylist()
                    assert "labels" in got.column_names
                    assert want.labels.to_pylist() == python_lists(case, want.rows, want.label)
                # Label sets outside the multilabel view, and raters' counts in every view:
                # served exactly when some overlay of the revision holds one, the last overlay
                # naming the row deciding (null where it holds none).
                tables = [read_corrections(reg, reg.overlay(d)) for d in overlays]
                for name in ("labels", "label_counts"):
                    held = any(
                        name in t.column_names and t.column(name).null_count < t.num_rows
                        for t in tables
                    )
                    if name == "labels" and view == "multilabel":
                        continue
                    assert (name in served.column_names) == held, (view, name)
                    assert (name in got.column_names) == held, (view, name)
                    if held:
                        want_rated = python_rated(tables, want.rows, name, case.k)
                        assert served.column(name).to_pylist() == want_rated, (view, name)

                # Streamed in batches (iter_batches: rule.apply_view per batch): the same
                # columns as labels(), batch boundaries anywhere.
                # labels() without the review columns is exactly the stream.
                plain = ds.labels()
                assert plain.equals(served.select(plain.column_names)), view
                assert not {"score", "suggested_label"} & set(plain.column_names)
                batches = list(ds.iter_batches(batch))
                if batches:
                    assert pa.Table.from_batches(batches).equals(plain), view
                else:
                    assert served.num_rows == 0, view

                # Sparse from the tables in memory, against the numpy rule over the same stack.
                ref = apply_view(view, case.labels, merged)
                rows_mem, relabel = view_rows(n, case.overlays, view)
                label = case.labels.copy()
                label[relabel] = merged.suggested[relabel]
                assert rows_mem.tolist() == ref.rows.tolist(), view
                assert label[rows_mem].tolist() == ref.label.tolist(), view
                if view == "multilabel":
                    assert ref.labels is not None
                    assert ref.labels.to_pylist() == python_lists(case, ref.rows, ref.label)

        finally:
            con.close()


def python_rated(
    tables: list[pa.Table], rows: np.ndarray, name: str, k: int
) -> list[list[int] | None]:
    """``labels`` or ``label_counts`` of the last overlay naming each row, in plain Python:
    counts as one per class (0 for a class nobody chose), null where that overlay has none."""
    out: list[list[int] | None] = []
    for r in rows.tolist():
        found = None
        for t in tables:
            hit = t.column("row").to_pylist()
            if r in hit:
                at = hit.index(r)
                found = t.column(name)[at].as_py() if name in t.column_names else None
        if name == "label_counts" and found is not None:
            dense = [0] * k
            for pair in found:
                dense[pair["label"]] = pair["count"]
            found = dense
        out.append(found)
    return out


def python_lists(case: Case, rows: np.ndarray, label: np.ndarray) -> list[list[int]]:
    """The multilabel view's lists by the rule in plain Python: the last overlay naming the row
    decides; its list if it has one; else, for a multi_label row with a suggested label, the
    given and the suggested label, ascending, once each; else the served label alone."""
    out = []
    for r, lab in zip(rows.tolist(), label.tolist(), strict=True):
        found: list[int] | None = None
        for t in case.overlays:
            hit = t.column("row").to_pylist()
            if r in hit:
                at = hit.index(r)
                found = t.column("labels")[at].as_py() if "labels" in t.column_names else None
                suggested = t.column("suggested_label")[at].as_py()
                verdict = t.column("verdict")[at].as_py()
                if found is None and verdict == "multi_label" and suggested is not None:
                    found = sorted({int(case.labels[r]), suggested})
        out.append([lab] if found is None else found)
    return out
