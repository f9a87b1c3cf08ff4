"""The history that travels with a dataset: what push and pull carry of its ref log.

A dataset's log is part of its record: the order its tags were first set (a leaderboard's
order, its flips), the overlays made for it (the label card), who recorded which result. So a
push appends to the remote's log the entries of this registry's log that the remote's lacks,
and a pull appends to this registry's log the entries of the remote's that it lacks, each in
its own order, before the refs they record are moved; a registry and its remote then hold the
same log, and every read of either gives the same answers (docs/remotes.md, "The history
travels").

What is carried, of one dataset: the entries about the tags the transfer moves, about its
recorded models and its yanks and retirements, and the ``overlay`` lines; each only if every
digest it names is where the log goes (an entry naming an object the other side lacks would
name what it cannot read). An entry is the same entry on both sides, byte for byte, so an
entry already there is never carried again. A move the carried history does not record (a
forced push over a tag another registry set) is logged where it is made, as a push or pull,
as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dsreg.errors import DsregError
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import reachable
from dsreg.registry.refs import LogEntry, RefLog, parse_log
from dsreg.registry.results import result_refs
from dsreg.remote.fetch import Fetch
from dsreg.remote.objects import present
from dsreg.remote.store import RemoteStore, TagName, Target

__all__ = [
    "MARK_EVENTS",
    "RESULT_EVENTS",
    "TAG_EVENTS",
    "Carried",
    "Moved",
    "Outgoing",
    "carried",
    "logged_overlays",
    "pull_history",
    "push_history",
]

# The events that move a tag, a recorded model's ref and a mark (yank, retirement).
TAG_EVENTS = frozenset({"tag", "push", "delete"})
RESULT_EVENTS = frozenset({"result"})
MARK_EVENTS = frozenset({"yank", "unyank", "retire"})
# Events that move no ref: what they name is the dataset's (an overlay made for it).
RECORD_EVENTS = frozenset({"overlay"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved:
    """The refs of one dataset a transfer moves, by kind, each with its value where the log
    goes (``None``: absent there): what the carried entries may be about, and where a ref's
    history must start to be carried (it records how that value became this side's)."""

    tags: Mapping[str, str | None] = field(default_factory=dict)
    models: Mapping[str, str | None] = field(default_factory=dict)
    marks: bool = False

    def covers(self, e: LogEntry) -> bool:
        if e.event in TAG_EVENTS:
            return e.tag in self.tags
        if e.event in RESULT_EVENTS:
            return e.tag in self.models
        if e.event in MARK_EVENTS:
            return self.marks
        return e.event in RECORD_EVENTS

    def there(self, e: LogEntry) -> tuple[bool, str | None]:
        """Whether ``e`` moves a tag or model ref whose value where the log goes is known,
        and that value."""
        refs = self.tags if e.event in TAG_EVENTS else self.models
        if e.event in TAG_EVENTS | RESULT_EVENTS and e.tag is not None and e.tag in refs:
            return True, refs[e.tag]
        return False, None


@dataclass(frozen=True, slots=True)
class Carried:
    """The entries of one dataset a transfer carries, in the order of the log they come from,
    and their bytes as the other side's log receives them."""

    entries: tuple[LogEntry, ...] = ()

    @property
    def data(self) -> bytes:
        return "".join(e.to_line() for e in self.entries).encode("utf-8", "surrogatepass")


class Outgoing:
    """One dataset's carried history as a push writes it to the remote's log: each ref's move
    is written with the lines that record it, preceded by the lines still unwritten that move
    no ref (an overlay made) and stand before them, so the remote's log receives the entries
    in this registry's order and a move refused there leaves none of its lines; what is left
    of those is appended last (``rest``)."""

    __slots__ = ("_left",)

    def __init__(self, carried: Carried) -> None:
        self._left = list(carried.entries)

    def first(self, events: Collection[str], ref: Target) -> int:
        """Where the first unwritten entry about ``ref`` among ``events`` stands (after every
        entry if none): moves made in this order keep the order the refs were first set."""
        hits = (i for i, e in enumerate(self._left) if e.tag == ref.tag and e.event in events)
        return next(hits, len(self._left))

    def move(
        self,
        events: Collection[str],
        name: str,
        old: str | None,
        new: str,
        write: Callable[..., bool],
    ) -> bool:
        """Make the move of ref ``name`` from ``old`` (its value there; ``None``: absent) to
        ``new`` by ``write(history=lines)``, ``lines`` those that record it (its entries among
        ``events`` start from ``old`` and end at ``new``), or ``None`` if the history does not
        record that move (the move is then logged as made there); what ``write`` returns. The
        lines count as written only if ``write`` returns."""
        about = [i for i, e in enumerate(self._left) if e.tag == name and e.event in events]
        if not about or self._left[about[0]].old != old or self._left[about[-1]].new != new:
            return write(history=None)
        take = [i for i in range(about[0]) if self._left[i].event in RECORD_EVENTS] + about
        wrote = write(history=Carried(tuple(self._left[i] for i in take)).data)
        taken = set(take)
        self._left = [e for i, e in enumerate(self._left) if i not in taken]
        return wrote

    @property
    def rest(self) -> bytes:
        """The unwritten lines that move no ref."""
        return Carried(tuple(e for e in self._left if e.event in RECORD_EVENTS)).data


def carried(source: RefLog, dest: RefLog, moved: Moved, *, held: Callable[[str], bool]) -> Carried:
    """The entries of ``source`` that ``dest`` lacks (an entry ``dest`` holds as often as
    ``source`` does is not carried again), in ``source``'s order, that are about what
    ``moved`` moves and name only digests ``held`` says the destination holds."""
    have = Counter(e.to_line() for e in dest)
    out: list[LogEntry] = []
    for e in source:
        line = e.to_line()
        if have[line] > 0:
            have[line] -= 1
            continue
        if moved.covers(e) and all(held(d) for d in e.named()):
            out.append(e)
    # A ref's history is carried only where it continues the ref's history there: its first
    # entry moves the ref from the value it holds there. Otherwise (another registry set it)
    # the move is logged where it is made, as a push or pull.
    first: dict[tuple[str, str | None], LogEntry] = {}
    for e in out:
        first.setdefault(((e.event in TAG_EVENTS and "tag") or e.event, e.tag), e)
    broken = set()
    for (kind, tag), e in first.items():
        known, value = moved.there(e)
        if known and e.old != value:
            broken.add((kind, tag))
    kept = [e for e in out if ((e.event in TAG_EVENTS and "tag") or e.event, e.tag) not in broken]
    return Carried(tuple(kept))


def logged_overlays(reg: Registry, datasets: Iterable[str]) -> set[str]:
    """The objects of the overlays the logs of ``datasets`` say were made (``overlay`` lines):
    what a push sends so that the history it carries names only what the remote holds."""
    made = [
        e.new
        for ds in sorted(set(datasets))
        for e in reg.refs.log(ds)
        if e.event in RECORD_EVENTS and e.new is not None and reg.store.has(e.new)
    ]
    if not made:
        return set()
    objects, _ = reachable(reg, made)
    return set(objects)


def push_history(
    reg: Registry,
    rs: RemoteStore,
    tags: Sequence[Target],
    models: Sequence[Target],
    *,
    there_tags: Mapping[TagName, str],
    there_models: Mapping[TagName, str],
    jobs: int,
) -> dict[str, Outgoing]:
    """The entries of this registry's log of each dataset of ``tags`` that ``rs``'s log lacks
    (module docstring), by dataset, for a push that moves ``tags``, ``models`` (their model
    refs) and the datasets' marks, which the remote holds at ``there_tags`` and
    ``there_models``, to be written with the moves (``Outgoing``). Run after every object is
    sent: an entry is carried only if the remote holds what it names."""
    out: dict[str, Outgoing] = {}
    for ds in sorted({t.dataset for t in tags if t.dataset is not None}):
        moved = Moved(
            tags={t.tag: _value(there_tags, t) for t in tags if t.dataset == ds and t.tag},
            models={t.tag: _value(there_models, t) for t in models if t.dataset == ds and t.tag},
            marks=True,
        )
        local = reg.refs.log(ds)
        there = parse_log(rs.log_bytes(ds), dataset=ds)
        wanted = carried(local, there, moved, held=lambda _: True)
        if not wanted.entries:
            out[ds] = Outgoing(wanted)  # nothing to carry: no object is asked about
            continue
        held = present(rs, {d for e in wanted.entries for d in e.named()}, jobs=jobs)
        out[ds] = Outgoing(
            Carried(tuple(e for e in wanted.entries if all(d in held for d in e.named())))
        )
    return out


def pull_history(fetch: Fetch, tags: Sequence[Target], models: Sequence[Target]) -> None:
    """Append to this registry's log of each dataset of ``tags`` the entries of the remote's
    log it lacks (module docstring), before the pull writes ``tags``, ``models`` and the marks
    here: the move of a ref the history records as its last is then not logged again
    (``RefStore.set``). Run after the objects are fetched; the overlays the remote's log says
    were made are fetched here (manifests and tables), those it cannot give left out."""
    reg = fetch.reg
    results = result_refs(reg)
    for ds in sorted({t.dataset for t in tags if t.dataset is not None}):
        moved = Moved(
            tags={t.tag: reg.refs.get(ds, t.tag) for t in tags if t.dataset == ds and t.tag},
            models={t.tag: results.get(ds, t.tag) for t in models if t.dataset == ds and t.tag},
            marks=True,
        )
        there = parse_log(fetch.rs.log_bytes(ds), dataset=ds)
        wanted = carried(there, reg.refs.log(ds), moved, held=lambda _: True)
        for e in wanted.entries:
            if e.event in RECORD_EVENTS and e.new is not None and not reg.store.has(e.new):
                try:
                    fetch.closure([e.new], payloads=False)
                except DsregError:
                    continue  # the remote cannot give it: its line stays there
        kept = [e for e in wanted.entries if all(reg.store.has(d) for d in e.named())]
        reg.refs.append_log(ds, kept)


def _value(there: Mapping[TagName, str], t: Target) -> str | None:
    return there.get(TagName(t.dataset, t.tag)) if t.dataset and t.tag else None
