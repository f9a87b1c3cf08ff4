"""The view rule: overlays in order (later wins), then original / cleaned / corrected / honeypot.

These hold the numpy reference (``dsreg.views.rule``) to the paper's categories; that the DuckDB
and sparse implementations serve the same views is tests/views/test_rule_parity.py's to hold."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.formats.corrections import corrections_table
from dsreg.formats.manifests import AUDIT_VERDICTS, ERRORS, VERDICTS
from dsreg.views.rule import apply_view, merge_overlays


def table(rows: list[int], verdicts: list[str], suggested: list[int]) -> pa.Table:
    return corrections_table(
        rows=np.asarray(rows),
        example_ids=[str(r) for r in rows],
        given_label=np.zeros(len(rows), dtype=np.int32),
        suggested_label=np.asarray(suggested),
        verdict=verdicts,
    )


LABELS = np.array([0, 1, 2, 0, 1, 2], dtype=np.int32)


def test_views_follow_the_paper_categories() -> None:
    t = table(
        [0, 1, 2, 3, 4],
        ["non_error", "correctable", "multi_label", "neither", "suspected"],
        [1, 2, 0, 1, 0],
    )
    merged = merge_overlays(6, [t])
    orig = apply_view("original", LABELS, merged)
    assert orig.rows.tolist() == [0, 1, 2, 3, 4, 5]
    assert orig.label.tolist() == LABELS.tolist()
    cleaned = apply_view("cleaned", LABELS, merged)
    assert cleaned.rows.tolist() == [0, 5]  # every error verdict removed, suspected too
    corrected = apply_view("corrected", LABELS, merged)
    assert corrected.rows.tolist() == [0, 1, 4, 5]
    assert corrected.label.tolist() == [0, 2, 0, 2]  # correctable and suspected relabelled
    assert corrected.given_label.tolist() == [0, 1, 1, 2]
    honey = apply_view("honeypot", LABELS, merged)
    assert honey.rows.tolist() == [1]
    assert (honey.given_label.tolist(), honey.label.tolist()) == ([1], [2])
    assert corrected.verdict.to_pylist() == ["non_error", "correctable", "suspected", None]


def test_later_overlay_wins_for_a_row_named_twice() -> None:
    detected = table([1, 2], ["suspected", "suspected"], [0, 0])
    validated = table([1], ["non_error"], [0])
    merged = merge_overlays(6, [detected, validated])
    cleaned = apply_view("cleaned", LABELS, merged)
    assert 1 in cleaned.rows.tolist() and 2 not in cleaned.rows.tolist()
    merged_rev = merge_overlays(6, [validated, detected])
    assert 1 not in apply_view("cleaned", LABELS, merged_rev).rows.tolist()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_view_sizes_are_consistent(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 40))
    labels = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int32)
    rows = sorted(data.draw(st.sets(st.integers(0, n - 1))))
    verdicts = [data.draw(st.sampled_from(VERDICTS)) for _ in rows]
    sug = [data.draw(st.integers(0, 3)) for _ in rows]
    merged = merge_overlays(n, [table(rows, verdicts, sug)])
    # Not unreviewed (no judgement) nor the audit's verdicts (no label errors).
    not_errors = ("non_error", "unreviewed", *AUDIT_VERDICTS)
    errors = sum(v not in not_errors for v in verdicts)
    assert errors == sum(v in ERRORS for v in verdicts)
    audited = sum(v in AUDIT_VERDICTS for v in verdicts)
    relabelled = sum(v in ("correctable", "suspected") for v in verdicts)
    assert len(apply_view("original", labels, merged).rows) == n
    assert len(apply_view("cleaned", labels, merged).rows) == n - errors
    assert len(apply_view("corrected", labels, merged).rows) == n - errors + relabelled
    assert len(apply_view("honeypot", labels, merged).rows) == verdicts.count("correctable")
    assert len(apply_view("decontaminated", labels, merged).rows) == n - audited
