"""The review queue: which item each reviewer sees next, and the answers, replayed from the log.

Records of the votes log (``votelog.py``), each with ``seq`` (its position) and ``t`` (Unix
time, for people reading the log; nothing depends on it):

- ``{"op": "open", "queue": <overlay digest>}``: the first record;
- ``{"op": "vote", "reviewer": R, "row": N, "answer": A}``, A one of ``ANSWERS`` (of a pair
  review, one of ``PAIR_ANSWERS``), with ``"comment": C`` when the reviewer wrote one (a vote
  without a comment has no such key, so logs written before comments existed read the same);
- ``{"op": "skip", "reviewer": R, "row": N}``: R does not see row N again;
- ``{"op": "undo", "reviewer": R, "target": SEQ}``: cancels R's vote or skip ``SEQ``.

A record may be missing: one damaged on disk is set aside (``votelog.py``), and the others are
replayed without it (an undo of it undoes nothing; a log whose ``open`` record was set aside
starts with a later record).

Reviewer names are compared case-insensitively: a request's name is casefolded before it is
recorded, and the log's names are casefolded when replayed (an older log may hold ``Alice``).

Each item handed to a reviewer comes with a ticket: an HMAC, under the session's secret, of
the reviewer, the row and how many of their records name that row. A vote or skip must carry
the ticket of the item the reviewer holds, so a repeated or stale request (a double press, a
second tab, a retry after an undo) can never land on another row, and the tickets stay valid
across a restart (the secret is stored with the session; the count is replayed from the log).

Assignment: a reviewer is given the first item, worst first, that they have neither answered
nor skipped, whose votes plus the leases other reviewers hold on it are fewer than
``votes_per_item``. Giving an item takes a lease on it for ``lease_seconds``; answering or
skipping it releases the lease, and so does taking another item. Leases are in memory only:
after a restart every item is free again, which costs at most a repeated question, never a
lost or doubled vote (a reviewer can vote on an item once, and an item takes no vote beyond
``votes_per_item``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from dsreg._util.records import FieldDict
from dsreg.errors import InvalidInputError, ReviewConflictError
from dsreg.reviewing.access import rater_name
from dsreg.reviewing.votelog import VotesLog

__all__ = [
    "ANSWERS",
    "NO_TICKET",
    "PAIR_ANSWERS",
    "Item",
    "Pair",
    "ReviewProgress",
    "ReviewQueue",
    "Undone",
    "check_comment",
    "check_reviewer",
    "comments",
]

# The four answers of Northcutt, Athalye and Mueller's protocol, named as the label-errors
# release names its vote counts.
ANSWERS: Final = ("given", "guessed", "both", "neither")
# A pair review's two (``pairs.py``): is the audited row the same item as its match?
PAIR_ANSWERS: Final = ("same", "different")
# What an in-process caller (the library, a test) passes for the ticket it does not hold: the
# web app always passes the request's, so a request without one is refused.
NO_TICKET: Final = object()
_MAX_COMMENT: Final = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    """An audit's finding about a row, shown beside the row: its verdict and its best match
    (the matched dataset's digest, the example's id, the tier and the distance), the matched
    dataset's name (``source``: a corpus folder has none), and where the match's payload is:
    ``blob`` (a digest in the store) or ``path`` (a file of the corpus folder), neither when it
    cannot be found here."""

    verdict: str
    dataset: str
    example_id: str
    tier: str
    distance: float
    matches: int
    source: str = ""
    blob: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """One flagged row to review: a label question (``suggested`` the label to weigh against
    the given one) or, with ``pair``, an audit's finding (``suggested`` None)."""

    row: int
    example_id: str
    given: int
    suggested: int | None
    score: float | None
    blob: str | None
    size: int | None
    metadata: tuple[tuple[str, str], ...] = ()
    pair: Pair | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewProgress(FieldDict):
    """``you``: votes by this reviewer; ``everyone``: all votes; ``complete``: items with
    ``votes_per_item`` votes; ``remaining``: the others; ``items``: the queue's length."""

    you: int
    everyone: int
    complete: int
    remaining: int
    items: int


def check_reviewer(name: object) -> str:
    """A reviewer's name: 1 to 64 printable characters, spaces trimmed, casefolded."""
    return rater_name(name)


def check_comment(comment: object) -> str:
    """A vote's comment: text of at most 1000 characters, spaces trimmed, no control character
    but line breaks and tabs ("" for none)."""
    if comment is None:
        return ""
    if not isinstance(comment, str):
        raise InvalidInputError(f"a comment must be text; got {type(comment).__name__}")
    comment = comment.strip()
    if len(comment) > _MAX_COMMENT:
        raise InvalidInputError(
            f"This answer was NOT saved: its comment has {len(comment)} characters; shorten it "
            f"to at most {_MAX_COMMENT}"
        )
    if not comment.replace("\n", " ").replace("\t", " ").isprintable():
        raise InvalidInputError(
            "This answer was NOT saved: its comment holds control characters; type it again"
        )
    return comment


class Undone(NamedTuple):
    """What an undo cancelled: the record (a vote or a skip), and its item, handed back."""

    item: Item
    record: dict[str, Any]


@dataclass(slots=True)
class _Reviewer:
    votes: dict[int, str] = field(default_factory=dict)  # row -> answer
    skipped: set[int] = field(default_factory=set)
    actions: list[dict[str, Any]] = field(default_factory=list)  # undoable, oldest first
    held: int | None = None
    order: tuple[Item, ...] | None = None  # the items in the order they are given (None: all)
    touched: dict[int, int] = field(default_factory=dict)  # row -> records naming it


class ReviewQueue:
    """The items of one queue, in review order, and the state the log replays to."""

    def __init__(
        self,
        items: Sequence[Item],
        *,
        log: VotesLog,
        queue: str,
        votes_per_item: int = 5,
        lease_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        secret: bytes | None = None,
        answers: tuple[str, ...] = ANSWERS,
    ) -> None:
        if isinstance(votes_per_item, bool) or not isinstance(votes_per_item, int):
            raise InvalidInputError(f"votes per item must be a whole number: {votes_per_item!r}")
        if votes_per_item < 1:
            raise InvalidInputError(f"votes per item must be at least 1; got {votes_per_item}")
        if lease_seconds <= 0:
            raise InvalidInputError(f"lease seconds must be positive; got {lease_seconds}")
        self.answers = answers
        self.items = tuple(items)
        self.by_row = {item.row: item for item in self.items}
        self.log = log
        self.queue = queue
        self.votes_per_item = votes_per_item
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._secret = secrets.token_bytes(32) if secret is None else secret
        self._reviewers: dict[str, _Reviewer] = {}
        self._counts: dict[int, int] = {}  # row -> votes
        # Kept as votes come and go, so progress is read in constant time on every request.
        self._votes = 0  # all votes
        self._complete = 0  # items of the queue with votes_per_item votes
        self._leases: dict[int, dict[str, float]] = {}  # row -> reviewer -> expiry
        self._replay()

    # -- state from the log ------------------------------------------------------------------
    def _replay(self) -> None:
        records = self.log.records
        if not records:
            self.log.append({"op": "open", "queue": self.queue, "t": time.time()})
            return
        head = records[0]
        # A log whose first record was damaged and set aside starts with a later one.
        lost_head = head.get("op") != "open" and bool(self.log.set_aside)
        if not lost_head and (head.get("op") != "open" or head.get("queue") != self.queue):
            raise InvalidInputError(
                f"the votes log {self.log.path} belongs to queue {head.get('queue')!r}, not "
                f"{self.queue!r}; move it away to start a new review"
            )
        for record in records if lost_head else records[1:]:
            self._apply(record)

    def _apply(self, record: dict[str, Any]) -> None:
        op = record.get("op")
        reviewer = self._reviewer(str(record.get("reviewer")).casefold())
        if "row" in record:
            row = int(record["row"])
            reviewer.touched[row] = reviewer.touched.get(row, 0) + 1
        if op == "vote":
            row = int(record["row"])
            reviewer.votes[row] = str(record["answer"])
            self._count(row, +1)
            reviewer.actions.append(record)
        elif op == "skip":
            reviewer.skipped.add(int(record["row"]))
            reviewer.actions.append(record)
        elif op == "undo":
            target = next(
                (a for a in reversed(reviewer.actions) if a["seq"] == record["target"]), None
            )
            if target is None:
                return  # it undoes a record that was damaged and set aside
            reviewer.actions.remove(target)
            row = int(target["row"])
            reviewer.touched[row] = reviewer.touched.get(row, 0) + 1
            if target["op"] == "vote":
                del reviewer.votes[row]
                self._count(row, -1)
            else:
                reviewer.skipped.discard(row)

    def _count(self, row: int, change: int) -> None:
        before = self._counts.get(row, 0)
        self._counts[row] = before + change
        self._votes += change
        if row in self.by_row:
            was, now = before >= self.votes_per_item, before + change >= self.votes_per_item
            self._complete += int(now) - int(was)

    def _reviewer(self, name: str) -> _Reviewer:
        found = self._reviewers.get(name)
        if found is None:
            found = self._reviewers[name] = _Reviewer()
        return found

    # -- assignment --------------------------------------------------------------------------
    def _leased_by_others(self, row: int, name: str, now: float) -> int:
        leases = self._leases.get(row)
        if not leases:
            return 0
        for other in [r for r, expiry in leases.items() if expiry <= now]:
            del leases[other]
        return sum(1 for other in leases if other != name)

    def _open_to(self, row: int, name: str, reviewer: _Reviewer, now: float) -> bool:
        if row in reviewer.votes or row in reviewer.skipped:
            return False
        taken = self._counts.get(row, 0) + self._leased_by_others(row, name, now)
        return taken < self.votes_per_item

    def _release(self, name: str, reviewer: _Reviewer) -> None:
        if reviewer.held is not None:
            self._leases.get(reviewer.held, {}).pop(name, None)
            reviewer.held = None

    def _lease(self, name: str, reviewer: _Reviewer, row: int, now: float) -> Item:
        reviewer.held = row
        self._leases.setdefault(row, {})[name] = now + self.lease_seconds
        return self.by_row[row]

    def next_item(self, name: str) -> Item | None:
        """The item ``name`` should answer now (the one they hold, while it is theirs), or None
        when nothing is left for them."""
        name = check_reviewer(name)
        reviewer = self._reviewer(name)
        now = self._clock()
        held = reviewer.held
        if held is not None and self._open_to(held, name, reviewer, now):
            return self._lease(name, reviewer, held, now)
        self._release(name, reviewer)
        for item in self.items if reviewer.order is None else reviewer.order:
            if self._open_to(item.row, name, reviewer, now):
                return self._lease(name, reviewer, item.row, now)
        return None

    def open_item(self, name: str, row: object) -> Item:
        """``row``'s item for ``name`` to look at (the operator opening it from the coordinator
        view): held by them, as ``next_item`` holds one, while they may still answer it; else
        shown only, and an answer to it is refused as any other would be."""
        name = check_reviewer(name)
        item = self._item(row)
        reviewer = self._reviewer(name)
        now = self._clock()
        self._release(name, reviewer)
        if self._open_to(item.row, name, reviewer, now):
            self._lease(name, reviewer, item.row, now)
        return item

    def set_order(self, name: str, rows: Sequence[int] | None) -> None:
        """Give ``name`` the queue's items in the order of ``rows`` (those of them in the
        queue), and only those; None: every item, worst first. The item they hold is given
        back, so the next one they get is the first of the new order they can answer."""
        name = check_reviewer(name)
        reviewer = self._reviewer(name)
        self._release(name, reviewer)
        if rows is None:
            reviewer.order = None
        else:
            reviewer.order = tuple(self.by_row[row] for row in rows if row in self.by_row)

    # -- tickets -----------------------------------------------------------------------------
    def ticket(self, name: str, row: int) -> str:
        """The ticket of ``row`` handed to ``name`` now: it changes with each of their records
        about the row, so an answer, skip or undo makes the tickets before it stale."""
        name = check_reviewer(name)
        touched = self._reviewer(name).touched.get(row, 0)
        message = f"{name}\0{row}\0{touched}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()[:32]

    def _check_ticket(self, name: str, reviewer: _Reviewer, item: Item, ticket: object) -> None:
        if ticket is NO_TICKET:
            return
        held = reviewer.held
        valid = isinstance(ticket, str) and hmac.compare_digest(
            ticket.encode(), self.ticket(name, item.row).encode()
        )
        if not valid or (held is not None and held != item.row):
            raise ReviewConflictError(
                f"Your answer was NOT saved: row {item.row} is not the item the server is "
                "showing you now (a repeated or late request, or another tab). Look at the "
                "item shown now and answer it."
            )

    # -- answers -----------------------------------------------------------------------------
    def _item(self, row: object) -> Item:
        if isinstance(row, bool) or not isinstance(row, int) or row not in self.by_row:
            raise InvalidInputError(f"row {row!r} is not an item of this review queue")
        return self.by_row[row]

    def vote(
        self,
        name: str,
        row: object,
        answer: object,
        *,
        ticket: object = NO_TICKET,
        comment: object = None,
    ) -> dict[str, Any]:
        """Record ``name``'s answer about ``row`` (durably, before returning), with ``comment``
        when it is not empty (``check_comment``); ``ticket`` must be the one handed out with
        the item ``name`` holds (``NO_TICKET``: not checked)."""
        name = check_reviewer(name)
        item = self._item(row)
        if answer not in self.answers:
            raise InvalidInputError(f"answer {answer!r} is not one of {', '.join(self.answers)}")
        text = check_comment(comment)
        reviewer = self._reviewer(name)
        if item.row in reviewer.votes:
            raise ReviewConflictError(
                f"This answer was NOT saved: {name!r} answered row {item.row} already "
                f"({reviewer.votes[item.row]!r} stands); undo it first to change the answer"
            )
        self._check_ticket(name, reviewer, item, ticket)
        count = self._counts.get(item.row, 0)
        if count >= self.votes_per_item:
            raise ReviewConflictError(
                f"row {item.row} has its {self.votes_per_item} votes already; take the next item"
            )
        record = {"op": "vote", "reviewer": name, "row": item.row, "answer": answer}
        if text:
            record["comment"] = text
        self._apply(self.log.append({**record, "t": time.time()}))
        self._release(name, reviewer)
        return record

    def skip(self, name: str, row: object, *, ticket: object = NO_TICKET) -> None:
        """``name`` passes on ``row``: they are not shown it again (undo brings it back)."""
        name = check_reviewer(name)
        item = self._item(row)
        reviewer = self._reviewer(name)
        if item.row in reviewer.votes or item.row in reviewer.skipped:
            raise ReviewConflictError(
                f"This skip was NOT saved: {name!r} answered or skipped row {item.row} already"
            )
        self._check_ticket(name, reviewer, item, ticket)
        record = {"op": "skip", "reviewer": name, "row": item.row, "t": time.time()}
        self._apply(self.log.append(record))
        self._release(name, reviewer)

    def undo(self, name: str) -> Item:
        """Cancel ``name``'s last vote or skip; the item becomes theirs to answer again."""
        return self.undo_action(name).item

    def undo_action(self, name: str) -> Undone:
        """``undo``, and the record it cancelled (the vote, with its answer, or the skip)."""
        name = check_reviewer(name)
        reviewer = self._reviewer(name)
        if not reviewer.actions:
            raise ReviewConflictError(f"{name!r} has nothing to undo")
        target = reviewer.actions[-1]
        record = {"op": "undo", "reviewer": name, "target": target["seq"], "t": time.time()}
        self._apply(self.log.append(record))
        self._release(name, reviewer)
        item = self._lease(name, reviewer, int(target["row"]), self._clock())
        return Undone(item=item, record=target)

    # -- reading -----------------------------------------------------------------------------
    def progress(self, name: str | None = None) -> ReviewProgress:
        you = len(self._reviewers[name].votes) if name in self._reviewers else 0
        return ReviewProgress(
            you=you,
            everyone=self._votes,
            complete=self._complete,
            remaining=len(self.items) - self._complete,
            items=len(self.items),
        )

    def tallies(self) -> dict[int, tuple[dict[str, int], tuple[str, ...]]]:
        """Every voted row: its count per answer and its reviewers (sorted)."""
        return tally(self.log.records, self.answers)


def tally(
    records: Sequence[dict[str, Any]], answers: tuple[str, ...] = ANSWERS
) -> dict[int, tuple[dict[str, int], tuple[str, ...]]]:
    """Count the ``answers`` of a log's records, undo applied: row -> (counts, reviewers)."""
    undone = {record["target"] for record in records if record.get("op") == "undo"}
    counts: dict[int, dict[str, int]] = {}
    names: dict[int, set[str]] = {}
    for record in records:
        if record.get("op") != "vote" or record["seq"] in undone:
            continue
        row = int(record["row"])
        per = counts.setdefault(row, dict.fromkeys(answers, 0))
        per[str(record["answer"])] += 1
        names.setdefault(row, set()).add(str(record["reviewer"]))
    return {row: (counts[row], tuple(sorted(names[row]))) for row in sorted(counts)}


def comments(records: Sequence[dict[str, Any]]) -> dict[int, list[dict[str, str]]]:
    """The comments of a log's votes, undone votes left out: row -> ``{"reviewer", "comment"}``
    in reviewer order (rows whose votes carry none are absent)."""
    undone = {record["target"] for record in records if record.get("op") == "undo"}
    out: dict[int, list[dict[str, str]]] = {}
    for record in records:
        text = record.get("comment")
        if record.get("op") != "vote" or record["seq"] in undone or not isinstance(text, str):
            continue
        out.setdefault(int(record["row"]), []).append(
            {"reviewer": str(record["reviewer"]), "comment": text}
        )
    return {row: sorted(found, key=lambda c: c["reviewer"]) for row, found in sorted(out.items())}
