"""A review session: the queue of one overlay's flagged rows, its payloads, its export and its
finish into a ``validated`` overlay.

Finishing is importing: ``finish`` writes the votes in the label-errors format (what
``export_votes`` returns, byte for byte) and stores them with ``overlay import-votes``' own code
(``dsreg.ops.overlay.import_votes``), so the verdict rule is that one, and a ``validated``
overlay made by ``dsreg review --finish`` has the digest of one made by importing the file
``dsreg review --export`` writes: the same table, and the same producer (its ``votes`` input is
the digest of those bytes, its ``queue`` input and ``reviewers`` param are read from them).
An item with fewer votes than the review's votes per item carries ``votes_wanted`` in the
export, so that, when its votes agree on nothing yet, it is ``unreviewed`` (a finish before the
votes are in judges nothing), not ``non_agreement``.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, NamedTuple

import pyarrow.compute as pc

from dsreg.errors import InvalidInputError, StorageError, VotesError
from dsreg.formats.manifests import VERDICTS
from dsreg.objects.digest import short
from dsreg.ops.overlay import (
    OverlayResult,
    Recording,
    Tagging,
    check_tagging,
    import_votes,
    store_overlay,
)
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.reviewing.access import Access, access_path, save_access
from dsreg.reviewing.logbytes import SetAside
from dsreg.reviewing.media import Media, find_media, sniff
from dsreg.reviewing.pairs import PRODUCER as PAIRS_PRODUCER
from dsreg.reviewing.pairs import match_payload, pair_items, validated_pairs
from dsreg.reviewing.queue import ANSWERS, PAIR_ANSWERS, Item, ReviewQueue, comments, tally
from dsreg.reviewing.queued import Queued, shown_examples
from dsreg.reviewing.votelog import VotesLog, read_votes

__all__ = [
    "VOTES_PER_ITEM",
    "ReviewExport",
    "ReviewFinish",
    "ReviewSession",
    "VotesFile",
    "audit_queue",
    "check_corpus",
    "export_votes",
    "finish_review",
    "refuse_corpus",
]

VOTES_PER_ITEM: Final = 5
_NO_TAG: Final = Tagging()
_NO_RECORD: Final = Recording()
_NO_MEDIA: Final = Media()
_SORTS: Final = ("worst", "best", "row")


def _items(q: Queued, verdict: str) -> list[Item]:
    """The overlay's rows with ``verdict`` and a suggested label, worst first (lowest score;
    rows without a score after those with one, in row order)."""
    table = q.corrections.filter(
        pc.and_(
            pc.equal(q.corrections.column("verdict"), verdict),
            pc.is_valid(q.corrections.column("suggested_label")),
        )
    )
    rows = table.column("row").to_pylist()
    items = [
        shown.item(row, example_id, given, suggested=suggested, score=score)
        for shown, row, example_id, given, suggested, score in zip(
            shown_examples(q, rows),
            rows,
            table.column("example_id").to_pylist(),
            table.column("given_label").to_pylist(),
            table.column("suggested_label").to_pylist(),
            table.column("score").to_pylist(),
            strict=True,
        )
    ]
    items.sort(key=lambda it: (it.score is None, it.score or 0.0, it.row))
    return items


class Rank(NamedTuple):
    """A scored item's place by score: ``rank`` 1 the most suspicious (the lowest score), items
    with the same score sharing the better rank; ``tied`` the number of items with its score
    (1 when no other item has it), so the page can say a rank is shared."""

    rank: int
    tied: int


def _ranks(items: Sequence[Item]) -> dict[int, Rank]:
    """Each scored item's :class:`Rank`. Items without a score have none."""
    scores = sorted(it.score for it in items if it.score is not None)
    ranks: dict[int, Rank] = {}
    for it in items:
        if it.score is not None:
            first = bisect.bisect_left(scores, it.score)
            ranks[it.row] = Rank(first + 1, bisect.bisect_right(scores, it.score) - first)
    return ranks


def _check_showable(named: str, items: Sequence[Item], media: Media) -> None:
    """Refuse a queue whose items the page could show nothing of: no payload in the store, no
    ``--media``/``--media-url`` and no metadata column."""
    if media.given or any(it.blob is not None or it.metadata for it in items):
        return
    raise InvalidInputError(
        f"{named!r} is label-only and has no metadata: raters would judge ids alone; give its "
        "files with --media DIR (each named by its example id) or --media-url "
        "'https://host/path/{example_id}'"
    )


class ReviewSession:
    """One server's queue: the log opened for appending (its damaged spans moved aside), the
    state replayed.

    Parameters
    ----------
    base : Resolved
        The revision under review; its last overlay is the queue unless ``overlay`` names one.
    overlay : str, optional
        An overlay digest or prefix (of the revision's snapshot).
    verdict : str
        The verdict of the rows to review (default ``suspected``).
    votes_per_item : int, optional
        An item leaves the queue with this many votes (default: the review's last, else 5).
    lease_seconds : float
        How long an item given to a reviewer is kept from others.
    raters : sequence of str
        Names (casefolded) of raters to give a link of their own, beside those given before.
    media : Media
        Where the payloads of rows without one in the store are (``media.py``); a queue with
        no payload, no media and no metadata is refused.
        With ``media.corpus``, the corpus folder an audit read (``--against DIR``), whose
        files show the matches of a pair review: an audit overlay's findings are reviewed as
        pairs (``pairs.py``), whatever ``verdict`` says.

    The review's links (``access``) are read from beside the votes log, or made, and stored
    again with the raters, the votes per item and (once bound, by the server) the port.
    """

    def __init__(
        self,
        base: Resolved,
        *,
        overlay: str | None = None,
        verdict: str = "suspected",
        votes_per_item: int | None = None,
        lease_seconds: float = 300.0,
        raters: Sequence[str] = (),
        media: Media = _NO_MEDIA,
    ) -> None:
        if verdict not in VERDICTS:
            raise InvalidInputError(f"unknown verdict {verdict!r}; choose one of {VERDICTS}")
        self.source = Queued(base, overlay)
        spec = base.spec
        self.pairs = self.source.pairs
        self.corpus = media.corpus
        check_corpus(self.source, self.corpus)
        items = pair_items(self.source, self.corpus) if self.pairs else _items(self.source, verdict)
        if not items:
            raise InvalidInputError(
                f"overlay {short(self.source.digest)} flags no row as {verdict!r} with a "
                "suggested label; nothing to review (see 'dsreg overlay show')"
            )
        _check_showable(spec, items, media)
        self.media = media
        self.verdict = verdict
        self.classes = self.source.snapshot.classes
        self.log = VotesLog(self.source.log_path)
        try:
            access = (self.source.stored_access() or Access()).with_raters(raters)
            if votes_per_item is None:
                votes_per_item = access.votes_per_item or VOTES_PER_ITEM
            self.queue = ReviewQueue(
                items,
                log=self.log,
                queue=self.source.digest,
                votes_per_item=votes_per_item,
                lease_seconds=lease_seconds,
                secret=bytes.fromhex(access.secret),
                answers=PAIR_ANSWERS if self.pairs else ANSWERS,
            )
            # Each item's place in the queue, worst first: what the page calls it ("Example 3
            # of 284"), never its id or path, which may name its given label.
            self.positions = {it.row: n for n, it in enumerate(self.queue.items, 1)}
            self.ranks = _ranks(self.queue.items)
            self.access = access
            self.store_access(votes_per_item=votes_per_item, verdict=verdict)
        except BaseException:
            self.log.close()
            raise

    @property
    def registry(self) -> Registry:
        return self.source.registry

    def class_pairs(self) -> list[tuple[int, int, int]]:
        """The queue's (given, suggested) class pairs with their number of items, most first
        (ties in class order)."""
        counts: dict[tuple[int, int], int] = {}
        for it in self.queue.items:
            if it.suggested is not None:  # a pair review's items ask no label question
                counts[it.given, it.suggested] = counts.get((it.given, it.suggested), 0) + 1
        return sorted(((g, s, n) for (g, s), n in counts.items()), key=lambda p: (-p[2], p[:2]))

    def order(self, sort: object, pair: object) -> tuple[int, ...] | None:
        """The rows of the queue in an operator's order: ``sort`` ``worst`` (lowest score
        first, the queue's own order), ``best`` (highest first, rows without a score last) or
        ``row``; ``pair`` None for every item, else ``[given, suggested]`` class indices, for
        the items of that pair only. None when that is the queue itself."""
        if sort not in _SORTS:
            raise InvalidInputError(f"sort {sort!r} is not one of {', '.join(_SORTS)}")
        items = list(self.queue.items)
        if pair is not None:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not all(isinstance(c, int) and not isinstance(c, bool) for c in pair)
            ):
                raise InvalidInputError(
                    f"pair must be [given, suggested] class indices; got {pair!r}"
                )
            items = [it for it in items if [it.given, it.suggested] == pair]
        if sort == "best":
            items.sort(key=lambda it: (it.score is None, -(it.score or 0.0), it.row))
        elif sort == "row":
            items.sort(key=lambda it: it.row)
        elif pair is None:
            return None
        return tuple(it.row for it in items)

    @property
    def dataset(self) -> str:
        return self.source.resolved.dataset

    def payload(self, row: int) -> tuple[bytes, str]:
        """A queued item's payload bytes, read from the store re-hashed, and their content type."""
        item = self.queue.by_row.get(row)
        if item is None:
            raise InvalidInputError(f"row {row} is not an item of this review queue")
        if item.blob is not None:
            data = self.registry.store.read_bytes(item.blob)
        elif self.media.folder is not None:
            data = find_media(self.media.folder, item.example_id)
        else:
            raise InvalidInputError(f"row {row} has no payload: this dataset is label-only")
        return data, sniff(data)

    def match_payload(self, row: int) -> tuple[bytes, str]:
        """A pair item's match's payload bytes and their content type (``pairs.py``)."""
        item = self.queue.by_row.get(row)
        if item is None:
            raise InvalidInputError(f"row {row} is not an item of this review queue")
        data = match_payload(self.registry, item, self.corpus)
        return data, sniff(data)

    def store_access(self, **changes: Any) -> None:
        """Store the review's links and settings with ``changes`` (the port a server bound,
        the votes per item), atomically, beside the votes log this session holds."""
        self.access = replace(self.access, **changes)
        save_access(access_path(self.source.log_path), self.access)

    def finish(
        self, *, threshold: int, tag: str | None = None, view: str | None = None
    ) -> ReviewFinish:
        """``finish_review`` of this session's queue (the page's operator's button)."""
        return finish_review(
            self.source.resolved,
            overlay=self.source.digest,
            threshold=threshold,
            tagging=Tagging(tag=tag, view=view),
            votes_per_item=self.queue.votes_per_item,
            record=Recording(command=f"dsreg review {self.source.spec} --finish (page)"),
        )

    def close(self) -> None:
        self.log.close()


class ReviewExport(int):
    """What ``dsreg.review_export`` returns: the number of voted items written (it is that
    number, an ``int``), with ``path``, the file written, and ``set_aside``, the damaged spans
    of the votes log whose records the export could not count (empty when the log is whole;
    see ``SetAside.describe``)."""

    path: str
    set_aside: tuple[SetAside, ...]

    def __new__(cls, records: int, *, path: str, set_aside: tuple[SetAside, ...]) -> ReviewExport:
        made = super().__new__(cls, records)
        made.path = path
        made.set_aside = set_aside
        return made

    @property
    def records(self) -> int:
        return int(self)

    @property
    def set_aside_records(self) -> int:
        """The records (answers, skips, undos) in the damaged spans, as far as can be told."""
        return sum(span.records for span in self.set_aside)

    def __str__(self) -> str:
        return str(int(self))

    def __repr__(self) -> str:
        return (
            f"ReviewExport(records={int(self)}, path={self.path!r}, "
            f"set_aside_records={self.set_aside_records})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewFinish(OverlayResult):
    """What ``dsreg.review_finish`` returns: the overlay stored (an ``OverlayResult``), with
    ``set_aside``, the damaged spans of the votes log whose records it could not count (empty
    when the log is whole), and the items finished early: ``short``, the queue's items with
    fewer than ``votes_per_item`` votes (``unvoted`` of them with none, left out of the overlay);
    those whose votes agree on nothing are ``unreviewed``."""

    set_aside: tuple[SetAside, ...] = ()
    votes_per_item: int = VOTES_PER_ITEM
    short: int = 0
    unvoted: int = 0


class VotesFile(NamedTuple):
    """The export of a review: the label-errors JSON bytes, the damaged spans of its log, the
    votes per item it was measured against and each voted row's number of votes."""

    data: bytes
    set_aside: tuple[SetAside, ...]
    votes_per_item: int
    totals: dict[int, int]


def check_corpus(q: Queued, corpus: str | os.PathLike[str] | None) -> None:
    """Refuse ``--corpus`` for a queue that is not an audit's (it shows a pair review's matches;
    a label review has none), whether a server starts, or the review is exported or finished."""
    if corpus is not None and not q.pairs:
        raise InvalidInputError(
            f"--corpus {os.fspath(corpus)!r} shows an audit's matches, and overlay "
            f"{short(q.digest)} of {q.spec!r} is not an audit: add --audit to review "
            "the revision's last audit, or drop --corpus"
        )


def refuse_corpus(
    base: Resolved,
    *,
    overlay: str | None,
    audit: bool,
    corpus: str | os.PathLike[str] | None,
) -> None:
    """``--corpus`` given to ``--finish`` or ``--export`` refused as a server start refuses
    it (``Media.of``, ``check_corpus``): no folder, or a queue that is not an audit's."""
    if corpus is not None:
        shown = Media.of(None, None, corpus)
        check_corpus(Queued(base, overlay, audit=audit), shown.corpus)


def audit_queue(base: Resolved, overlay: str | None) -> str:
    """The digest of the audit overlay ``--audit`` reviews: ``overlay`` when it names one, else
    ``base``'s last; anything else is refused."""
    return Queued(base, overlay, audit=True).digest


def export_votes(
    base: Resolved,
    *,
    overlay: str | None = None,
    votes_per_item: int | None = None,
    audit: bool = False,
) -> VotesFile:
    """The votes cast so far about ``base``'s queue, as a label-errors JSON file's bytes, and
    the damaged spans of its log (moved aside, or still in it), whose records are left out.

    One record per voted row, in row order: ``id`` (the example id), ``given_original_label``
    and ``our_guessed_label`` (class indices) with their ``_name``, ``mturk`` (the counts of
    the four answers, undone votes left out), and dsreg's additions: ``reviewers`` (sorted),
    ``queue`` (the overlay reviewed) and, on a row with fewer votes than ``votes_per_item``
    (default: the review's last server's, else 5), ``votes_wanted``, and, on a row whose votes
    carry comments, ``comments`` (``{"reviewer", "comment"}`` in reviewer order; a row without
    one has no such key, so an export of votes without comments is what it always was). The
    same votes give the same bytes.
    """
    q = Queued(base, overlay, audit=audit)
    spec = base.spec
    if q.pairs:
        raise InvalidInputError(
            f"overlay {short(q.digest)} is an audit's: its pair review has no label-errors "
            f"export; store its votes with 'dsreg review {spec} --audit --finish'"
        )
    if votes_per_item is None:
        stored = q.stored_access()
        votes_per_item = (stored and stored.votes_per_item) or VOTES_PER_ITEM
    votes = read_votes(q.log_path)
    counted = tally(votes.records)
    remarks = comments(votes.records)
    if not counted and votes.set_aside:
        lost = sum(span.records for span in votes.set_aside)
        raise VotesError(
            f"no vote about overlay {short(q.digest)} of {spec!r} can be read: the votes log "
            f"{q.log_path} has {lost} damaged records set aside ("
            + "; ".join(span.describe() for span in votes.set_aside)
            + ")"
        )
    if not counted:
        raise VotesError(
            f"no votes yet about overlay {short(q.digest)} of {spec!r}; review first with "
            f"'dsreg review {spec}'"
        )
    by_row = {
        r["row"]: r
        for r in q.corrections.select(
            ["row", "example_id", "given_label", "suggested_label"]
        ).to_pylist()
    }
    classes = q.snapshot.classes
    records: list[dict[str, Any]] = []
    totals: dict[int, int] = {}
    for row, (counts, reviewers) in counted.items():
        found = by_row.get(row)
        if found is None or found["suggested_label"] is None:
            raise VotesError(
                f"the votes log {q.log_path} names row {row}, which overlay "
                f"{short(q.digest)} does not flag with a suggested label"
            )
        totals[row] = sum(counts.values())
        wanted = {"votes_wanted": votes_per_item} if totals[row] < votes_per_item else {}
        records.append(
            {
                "id": found["example_id"],
                "given_original_label": found["given_label"],
                "given_original_label_name": classes[found["given_label"]],
                "our_guessed_label": found["suggested_label"],
                "our_guessed_label_name": classes[found["suggested_label"]],
                "mturk": counts,
                "reviewers": list(reviewers),
                "queue": q.digest,
                **wanted,
                **({"comments": remarks[row]} if row in remarks else {}),
            }
        )
    data = (json.dumps(records, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return VotesFile(data, votes.set_aside, votes_per_item, totals)


def finish_review(
    base: Resolved,
    *,
    overlay: str | None = None,
    threshold: int = 3,
    tagging: Tagging = _NO_TAG,
    votes_per_item: int | None = None,
    record: Recording = _NO_RECORD,
    audit: bool = False,
) -> ReviewFinish:
    """Store the votes about ``base``'s queue as a ``validated`` overlay: ``import_votes`` of the
    bytes ``export_votes`` returns (and, with ``tagging.tag``, tag the revision plus it in
    ``tagging.view``). The result counts the queue's items with fewer than ``votes_per_item``
    votes (default: the review's last server's, else 5). An audit overlay's queue (``audit``:
    the revision's last) is a pair review: ``finish_pairs``."""
    q = Queued(base, overlay, audit=audit)
    if q.pairs:
        return finish_pairs(
            q,
            threshold=threshold,
            tagging=tagging,
            votes_per_item=votes_per_item,
            record=record,
        )
    reg = base.registry
    check_tagging(base, tagging, producer="dsreg.import-votes")
    exported = export_votes(base, overlay=overlay, votes_per_item=votes_per_item)
    try:
        fd, name = tempfile.mkstemp(dir=reg.store.tmp, prefix="review-", suffix=".json")
        with os.fdopen(fd, "wb") as f:
            f.write(exported.data)
    except OSError as e:
        raise StorageError(f"cannot stage the votes in {reg.store.tmp}: {e.strerror}") from e
    try:
        made = import_votes(
            base, name, format="label-errors", threshold=threshold, tagging=tagging, record=record
        )
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    fields = {f.name: getattr(made, f.name) for f in dataclasses.fields(made)}
    unvoted = _unvoted(base, overlay, exported.totals)
    return ReviewFinish(
        **fields,
        set_aside=exported.set_aside,
        votes_per_item=exported.votes_per_item,
        short=unvoted + sum(1 for n in exported.totals.values() if n < exported.votes_per_item),
        unvoted=unvoted,
    )


def _unvoted(base: Resolved, overlay: str | None, voted: dict[int, int]) -> int:
    """The queue's items (of the verdict its last server reviewed) without a vote."""
    q = Queued(base, overlay)
    stored = q.stored_access()
    verdict = stored.verdict if stored is not None else "suspected"
    flagged = q.corrections.filter(
        pc.and_(
            pc.equal(q.corrections.column("verdict"), verdict),
            pc.is_valid(q.corrections.column("suggested_label")),
        )
    )
    rows = flagged.column("row").to_pylist()
    return sum(1 for row in rows if row not in voted)


def finish_pairs(
    q: Queued, *, threshold: int, tagging: Tagging, votes_per_item: int | None, record: Recording
) -> ReviewFinish:
    """Store a pair review's votes as a ``validated`` overlay (``pairs.validated_pairs``) and,
    with ``tagging.tag``, tag the revision plus it in ``tagging.view`` (default
    ``decontaminated``). ``short`` counts the findings with fewer than ``votes_per_item`` votes
    (default: the review's last server's, else 5), ``unvoted`` those with none."""
    check_tagging(q.resolved, tagging, producer=PAIRS_PRODUCER)
    if votes_per_item is None:
        stored = q.stored_access()
        votes_per_item = (stored and stored.votes_per_item) or VOTES_PER_ITEM
    done = validated_pairs(q, threshold=threshold)
    kept = store_overlay(q.resolved, done.draft, tagging, record)
    # The summary as stored: its verdict counts beside the confirmed and cleared.
    made = dataclasses.replace(kept, summary=q.registry.overlay(kept.digest).summary)
    fields = {f.name: getattr(made, f.name) for f in dataclasses.fields(made)}
    return ReviewFinish(
        **fields,
        set_aside=done.set_aside,
        votes_per_item=votes_per_item,
        short=done.unvoted + sum(1 for n in done.voted.values() if n < votes_per_item),
        unvoted=done.unvoted,
    )
