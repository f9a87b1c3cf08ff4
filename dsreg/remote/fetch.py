"""Fetching into a registry: objects verified on arrival, the closure of revisions wave by wave,
the remote's tags checked before they are written here.

Every function here expects its caller to hold the registry's lock (``reg.lock()``, shared)
from before it looks at what the registry lacks until the fetched revisions are tagged: gc
takes that lock exclusive, so it waits, and never sees an object fetched and not yet tagged (it
would be unreachable, and removed). docs/concepts.md, "Guarantees".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dsreg._util.progress import ProgressHook
from dsreg.errors import (
    CorruptObjectError,
    DsregError,
    IntegrityError,
    ObjectNotFoundError,
)
from dsreg.formats.manifests import Overlay, Revision, Snapshot
from dsreg.objects.batch import ObjectBatch
from dsreg.objects.digest import is_digest, short
from dsreg.objects.hashing import hash_bytes, hash_path
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import MANIFEST_KINDS, Node, Problem, reachable
from dsreg.remote.refs import RefUpdate
from dsreg.remote.store import FetchReport, RemoteStore
from dsreg.remote.waves import WAVE, staged_waves

__all__ = [
    "Closure",
    "Target",
    "check_whole",
    "fetch_closure",
    "fetch_objects",
    "foreign_tags",
    "owner",
    "refused_error",
    "set_local_refs",
]

# (dataset, tag, digest); dataset and tag are None for a digest fetched without a tag.
Target = tuple[str | None, str | None, str]

# Up to this many objects (manifests, tables) are stored one by one, without a staging batch.
_FEW = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class Closure:
    """What a fetch of revisions' closure brought, and every object the closure holds."""

    fetched: int = 0
    bytes: int = 0
    reached: frozenset[str] = field(default_factory=frozenset)


class _StoreSink:
    """A few verified downloads, stored one by one (each fsynced) without a staging batch."""

    def __init__(self, reg: Registry) -> None:
        self._store = reg.store

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        got = hash_bytes(data)
        if expect is not None and got != expect:
            return got
        return self._store.put_bytes(data)

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        return self._store.put_file(Path(path))


class _ReplaceSink:
    """Downloads of objects this store holds but found corrupt: verified, then put in their
    place (``ObjectStore.replace_corrupt``): a batch install never replaces an object."""

    def __init__(self, reg: Registry) -> None:
        self._store = reg.store

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        got = hash_bytes(data)
        if expect is None or got == expect:
            self._store.replace_corrupt(got, data)
        return got

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        got = hash_path(path, size_hint=size_hint)
        self._store.replace_corrupt(got, Path(path))
        return got


def fetch_objects(
    reg: Registry,
    rs: RemoteStore,
    digests: Iterable[str],
    *,
    jobs: int,
    progress: ProgressHook,
    wave: int = WAVE,
) -> FetchReport:
    """Fetch the objects this registry lacks, verified; raise on any missing or corrupt one
    (after keeping the intact ones). Many objects are staged and committed in waves, so an
    interrupted pull keeps what arrived; a few are stored one by one."""
    wanted = set(digests)
    need = sorted(reg.store.missing(wanted))
    # Objects a read found corrupt (and marked) are fetched again and replaced, not trusted
    # because they exist: a pull repairs them, as the corrupt-object error advises.
    broken = sorted(reg.store.marked_corrupt() & wanted)
    if not need and not broken:
        return FetchReport()
    reports: list[FetchReport] = []
    if broken:
        reports.append(
            rs.fetch(broken, _ReplaceSink(reg), reg.store.tmp, jobs=jobs, progress=progress)
        )
    if need and len(need) <= _FEW:
        sink = _StoreSink(reg)
        reports.append(rs.fetch(need, sink, reg.store.tmp, jobs=jobs, progress=progress))
    elif need:

        def stage(batch: ObjectBatch, part: Sequence[str], done: int) -> FetchReport:
            def hook(task: str, n: int, total: int) -> None:
                progress(task, done + n, len(need))

            return rs.fetch(part, batch, reg.store.tmp, jobs=jobs, progress=hook)

        reports.extend(staged_waves(reg.store, need, stage, wave=wave))
    corrupt = [c for r in reports for c in r.corrupt]
    missing = [m for r in reports for m in r.missing]
    if corrupt:
        listed = ", ".join(
            f"{d} (its bytes hash to {short(g)})" if is_digest(g) else f"{d} ({g})"
            for d, g in corrupt[:5]
        )
        raise CorruptObjectError(
            f"remote {rs.label} holds {len(corrupt)} corrupt objects, not used: {listed}; "
            "delete them on the remote and push them again from a registry that holds them"
        )
    if missing:
        raise ObjectNotFoundError(
            f"remote {rs.label} lacks {len(missing)} objects "
            f"({', '.join(short(d) for d in missing[:5])}); push them from a registry that "
            "holds them"
        )
    return FetchReport(fetched=sum(r.fetched for r in reports), bytes=sum(r.bytes for r in reports))


def fetch_closure(
    reg: Registry,
    rs: RemoteStore,
    starts: Iterable[str],
    *,
    payloads: bool,
    jobs: int,
    progress: ProgressHook,
    wave: int = WAVE,
) -> Closure:
    """Fetch what ``starts`` reach, wave by wave as the walk names it: the manifests and tables
    (a wave is fetched, then read, and names the next); with ``payloads``, every blob too."""
    fetched = nbytes = 0
    unreadable: list[Problem] = []

    def refuse() -> IntegrityError:
        # Names the first table: a reader that can fetch it again (``RemoteRead``) does.
        return IntegrityError(
            "; ".join(f"{short(p.digest)}: {p.problem}" for p in unreadable[:3])
            + "; run 'dsreg verify'",
            digest=unreadable[0].digest,
        )

    def fetch(part: Collection[str]) -> None:
        nonlocal fetched, nbytes
        if unreadable:
            raise refuse()  # before fetching blobs that an unreadable table may not even name
        rep = fetch_objects(reg, rs, part, jobs=jobs, progress=progress, wave=wave)
        fetched += rep.fetched
        nbytes += rep.bytes

    def on_error(node: Node, e: DsregError) -> None:
        if node.kind in MANIFEST_KINDS:
            raise e  # a manifest is needed to go on: stop here, with its own error
        unreadable.append(Problem(digest=node.digest, problem=str(e)))

    reached, _ = reachable(reg, starts, tables=payloads, before_read=fetch, on_error=on_error)
    if unreadable:
        raise refuse()
    return Closure(fetched=fetched, bytes=nbytes, reached=frozenset(reached))


def check_whole(reg: Registry, closure: Closure) -> None:
    """Before tags name a closure: every object of it is here (the lock keeps gc out; this
    catches anything else that removed one, and no tag is then written)."""
    lost = sorted(reg.store.missing(closure.reached))
    if lost:
        raise ObjectNotFoundError(
            f"{len(lost)} objects fetched were removed before their tags were written (first "
            f"{', '.join(short(d) for d in lost[:3])}); no tag was set: pull again",
            digest=lost[0],
        )


def foreign_tags(
    reg: Registry,
    rs: RemoteStore,
    targets: Sequence[Target],
    *,
    jobs: int,
    progress: ProgressHook,
) -> tuple[dict[tuple[str, str], str], Closure]:
    """The remote's tags among ``targets`` that name no revision of their own dataset (another
    dataset's revision, an overlay, a revision whose overlays correct another snapshot), each
    with the reason; and what was fetched to tell (the revision and snapshot manifests)."""
    tagged = [(ds, tag, d) for ds, tag, d in targets if ds is not None and tag is not None]
    if not tagged:
        return {}, Closure()
    digests = sorted({d for _, _, d in tagged})
    first = fetch_objects(reg, rs, digests, jobs=jobs, progress=progress)
    parts: set[str] = set()
    bad: dict[str, str] = {}
    for d in digests:
        try:
            m = reg.manifest(d)
        except IntegrityError as e:  # a payload, a table, a hostile manifest: not a revision
            bad[d] = f"names {short(d)}, which is not a revision ({e})"
            continue
        if isinstance(m, Overlay):
            bad[d] = f"names {short(d)}, an overlay, not a revision"
        elif isinstance(m, Revision):
            parts.update((m.snapshot, *m.overlays))
    second = fetch_objects(reg, rs, parts, jobs=jobs, progress=progress)
    out: dict[tuple[str, str], str] = {}
    for ds, tag, d in tagged:
        if d in bad:
            out[ds, tag] = bad[d]
            continue
        try:
            of, why = owner(reg, d)
        except IntegrityError as e:
            of, why = None, f"names {short(d)}, which cannot be read ({e})"
        if of is None:
            out[ds, tag] = why
        elif of != ds:
            out[ds, tag] = f"names {short(d)}, a revision of dataset {of!r}, not {ds!r}"
    fetched = first.fetched + second.fetched
    return out, Closure(fetched=fetched, bytes=first.bytes + second.bytes)


def owner(reg: Registry, digest: str) -> tuple[str | None, str]:
    """The dataset a stored manifest belongs to, as ``(dataset, "")``: a revision's snapshot's
    (every overlay of it correcting that snapshot), a snapshot's own, an overlay's base's. A
    revision whose overlays correct another snapshot belongs to none: ``(None, why)``. The
    manifests it names must be here."""
    m = reg.manifest(digest)
    if isinstance(m, Snapshot):
        return m.dataset, ""
    if isinstance(m, Overlay):
        return reg.snapshot(m.base).dataset, ""
    for o in m.overlays:
        base = reg.overlay(o).base
        if base != m.snapshot:
            return None, (
                f"names {short(digest)}, whose overlay {short(o)} corrects snapshot "
                f"{short(base)}, not its snapshot {short(m.snapshot)}"
            )
    return reg.snapshot(m.snapshot).dataset, ""


def set_local_refs(
    reg: Registry, targets: Iterable[Target], *, force: bool, command: str
) -> list[RefUpdate]:
    """Set the local tags of ``targets`` (the caller holds the registry's lock)."""
    out = []
    for ds, tag, d in targets:
        if ds is None or tag is None:
            continue
        old = reg.refs.set(ds, tag, d, force=force, command=command)
        status = "unchanged" if old == d else ("created" if old is None else "moved")
        out.append(RefUpdate(dataset=ds, tag=tag, revision=d, previous=old, status=status))
    return out


def refused_error(
    rs: RemoteStore, refused: dict[tuple[str, str], str], done: str
) -> IntegrityError:
    """The error a pull or clone ends with when it refused some of the remote's tags."""
    listed = "; ".join(f"{ds}@{tag} {why}" for (ds, tag), why in sorted(refused.items())[:10])
    more = f" (and {len(refused) - 10} more)" if len(refused) > 10 else ""
    return IntegrityError(
        f"refused {len(refused)} tags of remote {rs.label}, not written here: {listed}{more}. "
        f"{done}. Repair them on the remote: push the right revision with --force from a "
        "registry that holds it"
    )
