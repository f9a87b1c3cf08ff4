"""What the review page gets as JSON of an item: its place, labels, rank by score, payload
address and, for an audit's finding, its match; and a saved or undone answer as the page
confirms it. The example id goes only to the operator's page (``item_json``)."""

from __future__ import annotations

from typing import Any

from dsreg.reviewing.queue import Item
from dsreg.reviewing.session import ReviewSession

__all__ = ["answered", "item_json"]


def item_json(
    session: ReviewSession, item: Item | None, reviewer: str, *, operator: bool
) -> dict[str, Any] | None:
    """An item as the page gets it. Its example id only on the operator's page: a rater's
    page never holds it, since an id can name the given label (ImageFolder's ``cat/001.png``);
    it calls the item by its place in the queue."""
    if item is None:
        return None
    classes = session.classes
    payload, remote = None, False
    if item.blob is not None or session.media.folder is not None:
        payload = f"/payload/{item.row}"
    elif session.media.url is not None:
        payload, remote = session.media.address(item.example_id), True
    return {
        "row": item.row,
        "position": session.positions[item.row],
        "of": len(session.positions),
        "ticket": session.queue.ticket(reviewer, item.row),
        **({"example_id": item.example_id} if operator else {}),
        "given": {"index": item.given, "name": classes[item.given]},
        "suggested": None
        if item.suggested is None
        else {"index": item.suggested, "name": classes[item.suggested]},
        "pair": _pair_json(item),
        "score": item.score,
        **_rank_json(session, item),
        "payload": payload,
        "remote": remote,
        "size": item.size,
        "metadata": [list(pair) for pair in item.metadata],
    }


def _rank_json(session: ReviewSession, item: Item) -> dict[str, Any]:
    """The item's rank by score (None without a score), how many items share that score, and
    how many items have a score."""
    rank = session.ranks.get(item.row)
    return {
        "rank": None if rank is None else rank.rank,
        "tied": None if rank is None else rank.tied,
        "ranked": len(session.ranks),
    }


def _pair_json(item: Item) -> dict[str, Any] | None:
    """An audit finding's match, as the page shows it beside the item (``pairs.py``)."""
    pair = item.pair
    if pair is None:
        return None
    return {
        "verdict": pair.verdict,
        "dataset": pair.dataset,
        "source": pair.source,
        "example_id": pair.example_id,
        "tier": pair.tier,
        "distance": pair.distance,
        "matches": pair.matches,
        "payload": f"/payload/{item.row}/match",
    }


def answered(record: dict[str, Any]) -> dict[str, Any]:
    """A vote or skip record as the page confirms it (saved, or undone): its row, its answer
    (None for a skip) and its comment ("" without one)."""
    return {
        "row": record["row"],
        "answer": record.get("answer"),
        "comment": record.get("comment", ""),
    }
