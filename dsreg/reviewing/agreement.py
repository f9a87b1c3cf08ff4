"""How far a review has come and how far its raters agree: what the operator's coordinator view
shows, computed from the votes log's records (undo applied), never written anywhere.

Agreement is Fleiss' kappa (Fleiss, 1971) over the items with at least two votes. Each such
item ``i`` with ``n_i`` votes, ``n_ij`` of them for answer ``j``, agrees by
``P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))``, the share of its pairs of votes that agree;
``P = mean_i P_i``, ``p_j = sum_i n_ij / sum_i n_i`` and ``P_e = sum_j p_j^2``, and
``kappa = (P - P_e) / (1 - P_e)``. With the same number of votes on every item this is
``statsmodels.stats.inter_rater.fleiss_kappa`` (the tests check it); while a review is under
way items have different numbers of votes, and the same formulas weigh each item alike. Kappa
is None while no item has two votes, and when every vote names one answer (``P_e = 1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from dsreg.reviewing.queue import Item, tally

__all__ = ["coordinator_state", "fleiss_kappa", "item_agreement", "rater_counts"]

# How many of the items whose votes disagree most the view lists.
_MOST: Final = 10


def item_agreement(counts: Sequence[int]) -> float | None:
    """The share of an item's pairs of votes that agree (None below two votes)."""
    n = sum(counts)
    if n < 2:
        return None
    return (sum(c * c for c in counts) - n) / (n * (n - 1))


def fleiss_kappa(table: Iterable[Sequence[int]]) -> float | None:
    """Fleiss' kappa of ``table`` (one row per item, one count per answer) over its rows with
    at least two votes; None when there is none, or when every vote names one answer."""
    rows = [list(r) for r in table if sum(r) >= 2]
    if not rows:
        return None
    agreement = [item_agreement(r) for r in rows]
    p_bar = sum(a for a in agreement if a is not None) / len(rows)
    total = sum(sum(r) for r in rows)
    shares = [sum(r[j] for r in rows) / total for j in range(len(rows[0]))]
    p_e = sum(p * p for p in shares)
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1.0 - p_e)


def rater_counts(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per rater (casefolded) who answered or skipped: their votes and skips that stand (undo
    applied; a rater whose every answer was undone is listed with none)."""
    undone = {record.get("target") for record in records if record.get("op") == "undo"}
    found: dict[str, dict[str, int]] = {}
    for record in records:
        op = record.get("op")
        if op not in ("vote", "skip"):
            continue
        counts = found.setdefault(str(record["reviewer"]).casefold(), {"votes": 0, "skips": 0})
        if record.get("seq") not in undone:
            counts["votes" if op == "vote" else "skips"] += 1
    return found


def coordinator_state(
    records: Sequence[dict[str, Any]],
    items: Sequence[Item],
    *,
    answers: tuple[str, ...],
    votes_per_item: int,
    raters: Iterable[str] = (),
) -> dict[str, Any]:
    """The coordinator view's data: per rater (``raters`` listed even before their first
    vote) their votes and skips; the items complete, partial and untouched; Fleiss' kappa; and
    the items whose votes disagree most (lowest agreement first, most votes first among
    equals, then queue order), each with its counts, agreement and its place in the queue."""
    counted = tally(records, answers)
    per_rater = {name: {"votes": 0, "skips": 0} for name in raters}
    per_rater.update(rater_counts(records))
    votes = {row: sum(c.values()) for row, (c, _) in counted.items()}
    complete = sum(1 for it in items if votes.get(it.row, 0) >= votes_per_item)
    untouched = sum(1 for it in items if votes.get(it.row, 0) == 0)
    table = [[counted[it.row][0][a] for a in answers] for it in items if it.row in counted]
    ranked: list[dict[str, Any]] = []
    for position, it in enumerate(items, 1):
        if it.row not in counted:
            continue
        row_counts, reviewers = counted[it.row]
        agreement = item_agreement([row_counts[a] for a in answers])
        if agreement is None or agreement >= 1.0:
            continue
        ranked.append(
            {
                "row": it.row,
                "position": position,
                "example_id": it.example_id,
                "counts": row_counts,
                "votes": sum(row_counts.values()),
                "reviewers": list(reviewers),
                "agreement": agreement,
            }
        )
    ranked.sort(key=lambda r: (r["agreement"], -r["votes"], r["position"]))
    return {
        "answers": list(answers),
        "votes_per_item": votes_per_item,
        "items": len(items),
        "votes": sum(votes.values()),
        "complete": complete,
        "partial": len(items) - complete - untouched,
        "untouched": untouched,
        "kappa": fleiss_kappa(table),
        "kappa_items": sum(1 for r in table if sum(r) >= 2),
        "raters": [{"name": name, **per_rater[name]} for name in sorted(per_rater)],
        "disagreements": ranked[:_MOST],
    }
