"""The one graph walk: what revisions, tags or a whole registry reach (git's ``reachable.c``).

::

    revision -> snapshot -> examples table -> payload blobs
    revision -> overlays -> corrections tables (and each overlay's base snapshot)
                         -> held objects (an audit's fingerprints tables: ``Overlay.held``)

gc keeps what it reaches and verify checks it (``reachable`` collects what cannot be read);
push sends it; pull and clone fetch it, wave by wave: ``reachable(before_read=…)`` hands each
wave of digests to the caller before it reads them, so a transfer fetches a wave, the walk reads
it and names the next one. ``children`` is the one step: what one object names.

Every object the walk reads is re-hashed (the store's reads verify), and each is read at most
once per walk, however many revisions name it. Payload blobs and an overlay's held objects are
named, never read (a fingerprints table is checked by its digest; the audit reads it). An overlay
named only by the log (made, never applied) is walked as an applied one is, its corrections
table read too: gc promises to remove nothing while any table it keeps cannot be read.
"""

from __future__ import annotations

import enum
import math
import re
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from dsreg._util.records import FieldDict
from dsreg.errors import ConfigError, DsregError, InvalidInputError
from dsreg.formats.manifests import Overlay, Revision, Snapshot
from dsreg.registry.folder import Registry

__all__ = [
    "DEFAULT_LOG_EXPIRY",
    "MANIFEST_KINDS",
    "Kind",
    "Node",
    "Problem",
    "children",
    "log_expiry",
    "logged",
    "parse_duration",
    "reachable",
    "roots",
]


class Kind(enum.Enum):
    """How the walk reads an object, which is how it learns what the object names."""

    #: Named from outside the graph (a ref, the log, a caller): a revision, snapshot or overlay.
    START = "start"
    SNAPSHOT = "snapshot"
    OVERLAY = "overlay"
    #: A snapshot's examples table: its ``blob`` column names the payloads.
    EXAMPLES = "examples"
    #: An overlay's corrections table: names nothing, read to check it (a view needs it).
    CORRECTIONS = "corrections"


# The kinds whose objects are JSON manifests (the others are Parquet tables).
MANIFEST_KINDS = frozenset({Kind.START, Kind.SNAPSHOT, Kind.OVERLAY})


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """An object the walk reads: its digest, its kind, and for a table the manifest naming it
    (the table's layout is checked against what that manifest promises)."""

    digest: str
    kind: Kind
    owner: Snapshot | Overlay | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem(FieldDict):
    """An object the walk (or verify) could not use: missing, corrupt or unreadable."""

    digest: str
    problem: str


def children(reg: Registry, node: Node, *, tables: bool = True) -> tuple[list[Node], list[str]]:
    """What one object names: ``(objects to read in turn, leaves)``; raise ``DsregError`` if it
    cannot be read.

    Leaves are kept but never read: payload blobs, and with ``tables=False`` the tables too (a
    clone fetches them without parsing them, and without loading pyarrow).
    """
    d = node.digest
    if node.kind is Kind.START:
        m = reg.manifest(d)
        if isinstance(m, Revision):
            return _revision_children(m)
        if isinstance(m, Snapshot):
            return _table(m.examples, Kind.EXAMPLES, m, tables)
        return _overlay_children(m, tables)
    if node.kind is Kind.SNAPSHOT:
        snap = reg.snapshot(d)
        return _table(snap.examples, Kind.EXAMPLES, snap, tables)
    if node.kind is Kind.OVERLAY:
        return _overlay_children(reg.overlay(d), tables)
    # pyarrow is imported only here: a push with nothing new, or a clone, never reads a table.
    from dsreg.registry.tables import has_payloads, read_corrections, read_examples

    if node.kind is Kind.EXAMPLES:
        assert isinstance(node.owner, Snapshot), "an examples node carries its snapshot"
        # The label and (for sets with files) the id columns are read too: read_examples checks
        # them against the snapshot, so verify reports, and pull and clone refuse, a hostile
        # table (labels outside the classes, ids that would leave a checkout's folder).
        cols = ["example_id", "label", "blob"] if has_payloads(node.owner) else ["label", "blob"]
        blobs = read_examples(reg, node.owner, columns=cols).column("blob").drop_null()
        return [], blobs.to_pylist()
    assert isinstance(node.owner, Overlay), "a corrections node carries its overlay"
    read_corrections(reg, node.owner)
    return [], []


def _revision_children(rev: Revision) -> tuple[list[Node], list[str]]:
    nodes = [Node(digest=rev.snapshot, kind=Kind.SNAPSHOT)]
    nodes += [Node(digest=o, kind=Kind.OVERLAY) for o in rev.overlays]
    return nodes, []


def _overlay_children(ov: Overlay, tables: bool) -> tuple[list[Node], list[str]]:
    nodes, leaves = _table(ov.corrections, Kind.CORRECTIONS, ov, tables)
    return [*nodes, Node(digest=ov.base, kind=Kind.SNAPSHOT)], [*leaves, *ov.held]


def _table(
    digest: str, kind: Kind, owner: Snapshot | Overlay, tables: bool
) -> tuple[list[Node], list[str]]:
    if not tables:
        return [], [digest]
    return [Node(digest=digest, kind=kind, owner=owner)], []


# -- how long the ref log keeps what its lines name (git's ``gc.reflogExpire``) ----------------

#: How long a log line keeps what it names from gc (git's ``gc.reflogExpire``).
DEFAULT_LOG_EXPIRY = "90d"

_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in a duration: ``90d``, ``2w``, ``12h``, ``30m``, ``45s``; ``now`` is 0 and
    ``never`` infinite. ``InvalidInputError`` naming the text otherwise."""
    t = text.strip().lower() if isinstance(text, str) else ""
    if t == "now":
        return 0.0
    if t == "never":
        return math.inf
    m = _DURATION.fullmatch(t)
    if m is None:
        raise InvalidInputError(
            f"invalid duration {text!r}: give a number and a unit (s, m, h, d or w), e.g. "
            "'90d' or '2w', or 'now' or 'never'"
        )
    return float(int(m.group(1)) * _UNITS[m.group(2)])


def log_expiry(reg: Registry) -> float:
    """Seconds a log line keeps what it names from gc: ``[gc] log_expiry`` in config.toml
    (``90d``, ``2w``, ``never``, …), by default 90 days, as git's ``gc.reflogExpire``."""
    text = reg.config.get("gc", {}).get("log_expiry", DEFAULT_LOG_EXPIRY)
    try:
        return parse_duration(text)
    except InvalidInputError as e:
        raise ConfigError(f"config.toml [gc] log_expiry: {e}") from None


def logged(reg: Registry, *, expiry: float | None = None, now: float | None = None) -> list[str]:
    """The objects this registry holds that a valid log line of at most ``expiry`` seconds
    (default ``log_expiry``) names: the old and the new value of every tag move, every overlay
    recorded. A line naming what is not here (a clone's copy of the remote's history, or what an
    explicit prune let go) names nothing gc could keep; a damaged line is skipped."""
    limit = log_expiry(reg) if expiry is None else expiry
    cutoff = (time.time() if now is None else now) - limit
    named: dict[str, None] = {}
    for ds in sorted(set(reg.refs.datasets()) | set(reg.refs.logged_datasets())):
        for e in reg.refs.log(ds):
            if limit == math.inf or e.timestamp >= cutoff:
                named.update(dict.fromkeys(e.named()))
    return [d for d in named if reg.store.has(d)]


def roots(reg: Registry, *, expiry: float | None = None, now: float | None = None) -> list[str]:
    """Where gc's and verify's walk starts: every tag's digest, and every manifest ``logged``
    names (a revision a tag was moved away from stays for the log's expiry, as in git's reflog;
    an overlay made by detect or import-votes and not yet tagged is a user's work)."""
    out = [d for _, _, d in reg.refs.all()]
    out += [d for d in logged(reg, expiry=expiry, now=now) if reg.is_manifest(d)]
    return list(dict.fromkeys(out))


def reachable(
    reg: Registry,
    starts: Iterable[str],
    *,
    tables: bool = True,
    before_read: Callable[[Collection[str]], None] | None = None,
    on_error: Callable[[Node, DsregError], None] | None = None,
) -> tuple[set[str], list[Problem]]:
    """Every object ``starts`` (revisions, snapshots or overlays) reach, those that could not
    be read included, and the problems met.

    The walk goes breadth first, one wave of objects at a time. ``before_read``, if given, is
    called with each wave's digests (the objects to read and the leaves named since the last
    wave) before any of them is read: a transfer fetches them there. An object that cannot be
    read is reported to ``on_error``, which may raise to stop the walk; without it, it becomes
    a ``Problem``. Either way the walk goes on without what that object would name.
    """
    problems: list[Problem] = []

    def note(node: Node, e: DsregError) -> None:
        problems.append(Problem(digest=node.digest, problem=str(e)))

    report = on_error if on_error is not None else note
    seen: set[str] = set()
    wave = [Node(digest=d, kind=Kind.START) for d in dict.fromkeys(starts)]
    seen.update(n.digest for n in wave)
    # Leaves are collected apart only when a caller is to be told of them; otherwise a table's
    # blobs go straight into ``seen`` (one C-speed update per table, as many as a table holds).
    leaves: set[str] = set()
    while wave or leaves:
        if before_read is not None:
            before_read([*(n.digest for n in wave), *leaves])
        nxt: list[Node] = []
        leaves = set()
        for node in wave:
            try:
                nodes, named = children(reg, node, tables=tables)
            except DsregError as e:
                report(node, e)
                continue
            for c in nodes:
                if c.digest not in seen:
                    seen.add(c.digest)
                    nxt.append(c)
            if before_read is None:
                seen.update(named)
            else:
                leaves.update(named)
        if leaves:
            leaves -= seen
            seen |= leaves
        wave = nxt
    return seen, problems
