"""The review of an audit's findings as pairs: each row the audit named (``duplicate`` or
``contaminated``) is shown beside its best match, and raters answer whether the two are the
same item (``same``) or not (``different``).

A match's payload is read from the store when the matched dataset digest is a revision of this
registry (a ``--within`` match is one of the audited set itself), or, for a corpus folder that
is not registered (``--against DIR``), from the folder given with ``--corpus`` by the match's
id, its path below the folder (``media.find_media``: only inside the folder).

The answers go to the queue's votes log as label votes do (tickets, undo, restart, damaged
spans: ``queue.py``, ``votelog.py``), and ``validated_pairs`` stores them as a ``validated``
overlay: a finding with at least ``threshold`` ``same`` votes, more than ``different`` ones, is
confirmed and keeps the audit's verdict; one with at least ``threshold`` ``different`` votes,
more than ``same`` ones, is cleared (``non_error``, which every view keeps); the others are
undecided and left out, so over the audited revision they keep the audit's verdict. Every row
keeps its matches (a version 3 table), so the overlay says what was reviewed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.audit import TIERS
from dsreg.errors import DsregError, NotFoundError, VotesError
from dsreg.formats.corrections import MATCHES_TYPE, corrections_table
from dsreg.objects.digest import short
from dsreg.objects.hashing import hash_bytes
from dsreg.overlays.create import OverlayDraft
from dsreg.overlays.votes import check_threshold
from dsreg.registry.folder import Registry
from dsreg.registry.tables import read_examples
from dsreg.reviewing.logbytes import SetAside
from dsreg.reviewing.media import find_media
from dsreg.reviewing.queue import PAIR_ANSWERS, Item, Pair, tally
from dsreg.reviewing.queued import Queued, shown_examples
from dsreg.reviewing.votelog import read_votes

__all__ = ["PRODUCER", "PairsVoted", "match_payload", "pair_items", "validated_pairs"]

PRODUCER: Final = "dsreg.review-pairs"
_RANK: Final = {tier: i for i, tier in enumerate(TIERS)}
# What a cleared finding's row becomes: not a duplicate, and no label error either.
_CLEARED: Final = "non_error"


def pair_items(q: Queued, corpus: Path | None) -> list[Item]:
    """The audit overlay's findings, one item each, nearest first (by their best match's tier,
    then its distance, then row: an exact copy before a near one), each with its best match
    (``Pair``) and where that match's payload is."""
    table = q.corrections
    rows = table.column("row").to_pylist()
    best = [m[0] for m in table.column("matches").to_pylist()]
    counts = [len(m) for m in table.column("matches").to_pylist()]
    sources = _match_sources(q.registry, best)
    items = []
    for i, (shown, example_id, given, verdict) in enumerate(
        zip(
            shown_examples(q, rows),
            table.column("example_id").to_pylist(),
            table.column("given_label").to_pylist(),
            table.column("verdict").to_pylist(),
            strict=True,
        )
    ):
        match = best[i]
        source = sources.get(match["dataset"])
        pair = Pair(
            verdict=verdict,
            dataset=match["dataset"],
            example_id=match["example_id"],
            tier=match["tier"],
            distance=float(match["distance"]),
            matches=counts[i],
            source="a corpus folder" if source is None else source.name,
            blob=None if source is None else source.blobs.get(match["example_id"]),
            path=match["example_id"] if corpus is not None and source is None else None,
        )
        items.append(shown.item(rows[i], example_id, given, pair=pair))
    return sorted(items, key=_nearest_first)


def _nearest_first(item: Item) -> tuple[int, float, int]:
    pair = item.pair
    assert pair is not None
    return (_RANK.get(pair.tier, len(TIERS)), pair.distance, item.row)


class _Source(NamedTuple):
    """A matched dataset of this registry: its name, and its matched ids' payload digests."""

    name: str
    blobs: dict[str, str]


def _match_sources(reg: Registry, matches: Sequence[dict[str, Any]]) -> dict[str, _Source]:
    """Per matched dataset that is a revision of this registry: its name and its matched ids'
    payload digests (an id without a payload is absent). Datasets not in the registry (a
    corpus folder's listing digest) are absent."""
    wanted: dict[str, set[str]] = {}
    for match in matches:
        wanted.setdefault(match["dataset"], set()).add(match["example_id"])
    found: dict[str, _Source] = {}
    for dataset, ids in wanted.items():
        try:
            if reg.manifest_kind(dataset) not in ("revision", "snapshot"):
                continue
            snap = reg.snapshot(reg.revision(dataset).snapshot)
        except DsregError:
            continue  # a corpus folder's listing digest, or a revision not held here
        table = read_examples(reg, snap, columns=["example_id", "blob"])
        keep = pc.is_in(table.column("example_id"), value_set=pa.array(sorted(ids), pa.string()))
        table = table.filter(keep)
        ids_blobs = zip(
            table.column("example_id").to_pylist(), table.column("blob").to_pylist(), strict=True
        )
        found[dataset] = _Source(snap.dataset, {str(i): b for i, b in ids_blobs if b is not None})
    return found


def match_payload(reg: Registry, item: Item, corpus: Path | None) -> bytes:
    """The bytes of ``item``'s match: from the store (re-hashed) or the corpus folder."""
    pair = item.pair
    if pair is None:
        raise NotFoundError(f"row {item.row} is not an audit finding: it has no match")
    if pair.blob is not None:
        return reg.store.read_bytes(pair.blob)
    if pair.path is not None and corpus is not None:
        return find_media(corpus, pair.path, option="--corpus")
    raise NotFoundError(
        f"the match of row {item.row} ({pair.example_id!r} of {short(pair.dataset)}) is not "
        "in this registry; give the corpus folder the audit read with --corpus DIR"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PairsVoted:
    """The ``validated`` overlay a pair review's votes make (a draft, to store), the log's
    damaged spans, and the findings confirmed, cleared, undecided (votes that settle nothing
    yet) and unvoted."""

    draft: OverlayDraft
    set_aside: tuple[SetAside, ...]
    confirmed: int
    cleared: int
    undecided: int
    unvoted: int
    voted: dict[int, int]


def _decide(counts: dict[str, int], threshold: int) -> str | None:
    """``same`` (confirmed), ``different`` (cleared) or None (undecided)."""
    same, different = counts["same"], counts["different"]
    if same >= threshold and same > different:
        return "same"
    if different >= threshold and different > same:
        return "different"
    return None


def validated_pairs(q: Queued, *, threshold: int) -> PairsVoted:
    """The votes of ``q``'s pair review as a ``validated`` overlay of its snapshot, to store
    (``ops.overlay.store_overlay``)."""
    check_threshold(threshold)
    votes = read_votes(q.log_path)
    counted = tally(votes.records, PAIR_ANSWERS)
    if not counted:
        lost = sum(span.records for span in votes.set_aside)
        damaged = f" ({lost} damaged records set aside)" if lost else ""
        raise VotesError(
            f"no votes yet about audit overlay {short(q.digest)} of {q.spec!r}{damaged}; "
            f"review first with 'dsreg review {q.spec} --audit'"
        )
    table = q.corrections
    position = {row: i for i, row in enumerate(table.column("row").to_pylist())}
    decided = {
        row: answer
        for row, (counts, _) in counted.items()
        if (answer := _decide(counts, threshold)) is not None
    }
    if not decided:
        raise VotesError(
            f"no finding has {threshold} agreeing votes yet ({len(counted)} voted); collect "
            "more votes or lower --threshold"
        )
    rows = sorted(decided)
    taken = table.take(pa.array([position[r] for r in rows], pa.int64()))
    verdicts = [
        v if decided[r] == "same" else _CLEARED
        for r, v in zip(rows, taken.column("verdict").to_pylist(), strict=True)
    ]
    out = corrections_table(
        rows=np.array(rows, dtype=np.int64),
        example_ids=taken.column("example_id").to_pylist(),
        given_label=taken.column("given_label").to_numpy(),
        suggested_label=None,
        verdict=verdicts,
    ).append_column(pa.field("matches", MATCHES_TYPE), taken.column("matches"))
    reviewers = sorted({name for _, names in counted.values() for name in names})
    confirmed = sum(1 for r in rows if decided[r] == "same")
    summary = {"confirmed": confirmed, "cleared": len(rows) - confirmed}
    summary["undecided"] = len(counted) - len(rows)
    tallied = json.dumps({str(r): c for r, (c, _) in counted.items()}, sort_keys=True)
    draft = OverlayDraft(
        kind="validated",
        table=out,
        producer=PRODUCER,
        params={"threshold": threshold, "reviewers": reviewers},
        inputs={"queue": q.digest, "votes": hash_bytes(tallied.encode())},
        summary=summary,
    )
    return PairsVoted(
        draft=draft,
        set_aside=votes.set_aside,
        confirmed=confirmed,
        cleared=len(rows) - confirmed,
        undecided=summary["undecided"],
        unvoted=len(position) - len(counted),
        voted={row: sum(c.values()) for row, (c, _) in counted.items()},
    )
