"""Fetching into a registry: the one path by which objects come from a remote, whatever asks
for them (pull, clone, ``open(remote=)``, the reads with ``--remote`` into a registry or the
per-user cache, checkout of what a lazy clone left behind).

A ``Fetch`` is one command's fetch from one remote into one registry. Read top-down:

- ``refused_tags``: the remote's tags that name no revision of their own dataset (a pull or
  clone writes none of them); what it reads to tell comes by ``objects``;
- ``closure``: what revisions reach, wave by wave as the reachability walk names it (a wave of
  manifests and tables is fetched, then read, and names the next; with payloads, every blob);
- ``objects``: objects by digest, those the registry lacks or found corrupt, verified on
  arrival (``objects.receive``) and put into the store as a push to a folder puts them
  (``waves.put_objects``);
- ``check_whole`` and ``write_tags``: before tags name what came, every object it reaches is
  here.

A ``Fetch`` holds the registry's lock, shared, for as long as it is entered (``with``): from
before it looks at what the registry lacks until the fetched revisions are tagged. gc takes
that lock exclusive, so it waits, and never sees an object fetched and not yet tagged (it would
be unreachable, and removed). docs/concepts.md, "Guarantees".
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import (
    CorruptObjectError,
    DsregError,
    IntegrityError,
    ObjectNotFoundError,
)
from dsreg.formats.manifests import Overlay, Revision, Snapshot
from dsreg.objects.digest import is_digest, short
from dsreg.objects.hashing import hash_bytes, hash_path
from dsreg.objects.store import ObjectStore
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import MANIFEST_KINDS, Node, Problem, reachable
from dsreg.registry.refs import RefStore
from dsreg.remote.config import default_remote, jobs_for, open_remote
from dsreg.remote.objects import Received, Sink, receive
from dsreg.remote.refs import RefUpdate
from dsreg.remote.store import RemoteStore, TagName, Target
from dsreg.remote.waves import put_objects

__all__ = ["Fetch", "Owner", "fetch_missing", "owner", "refused_error"]


class Fetch:
    """One command's fetch from remote ``rs`` into registry ``reg`` (module docstring): enter
    it (``with``) to hold the registry's lock. It counts what it brought (``fetched`` objects,
    ``bytes``) and keeps every object its closures reach (``reached``), which must all be here
    before a tag names them."""

    __slots__ = ("_lock", "bytes", "fetched", "jobs", "progress", "reached", "reg", "rs")

    def __init__(
        self, reg: Registry, rs: RemoteStore, *, jobs: int, progress: ProgressHook = no_progress
    ) -> None:
        self.reg = reg
        self.rs = rs
        self.jobs = jobs
        self.progress = progress
        self.fetched = 0
        self.bytes = 0
        self.reached: set[str] = set()
        self._lock = contextlib.ExitStack()

    def __enter__(self) -> Fetch:
        self._lock.enter_context(self.reg.lock())
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.close()

    # -- the remote's tags, checked before they are written here -----------------------------
    def refused_tags(self, targets: Sequence[Target]) -> dict[TagName, str]:
        """The remote's tags among ``targets`` that name no revision of their own dataset
        (another dataset's revision, an overlay, a revision whose overlays correct another
        snapshot), each with the reason. Fetches the revision and snapshot manifests to tell."""
        tagged = [t for t in targets if t.tag_name is not None]
        if not tagged:
            return {}
        digests = sorted({t.digest for t in tagged})
        self.objects(digests)
        parts: set[str] = set()
        not_revisions: dict[str, str] = {}
        for d in digests:
            try:
                m = self.reg.manifest(d)
            except IntegrityError as e:  # a payload, a table, a hostile manifest: not a revision
                not_revisions[d] = f"names {short(d)}, which is not a revision ({e})"
                continue
            if isinstance(m, Overlay):
                not_revisions[d] = f"names {short(d)}, an overlay, not a revision"
            elif isinstance(m, Revision):
                parts.update((m.snapshot, *m.overlays))
        self.objects(parts)
        refused: dict[TagName, str] = {}
        for t in tagged:
            assert t.tag_name is not None
            why = not_revisions.get(t.digest) or _not_of_dataset(self.reg, t.digest, t.tag_name)
            if why:
                refused[t.tag_name] = why
        return refused

    # -- what revisions reach ----------------------------------------------------------------
    def closure(self, starts: Iterable[str], *, payloads: bool) -> frozenset[str]:
        """Fetch what ``starts`` reach that the registry lacks, wave by wave as the walk names
        it: the manifests and tables, and with ``payloads`` every blob too. Returns what the
        walk reached (also kept in ``reached``)."""
        unreadable: list[Problem] = []

        def before_read(part: Collection[str]) -> None:
            if unreadable:
                raise _unreadable(unreadable)  # before blobs an unreadable table may not name
            self.objects(part)

        def on_error(node: Node, e: DsregError) -> None:
            if node.kind in MANIFEST_KINDS:
                raise e  # a manifest is needed to go on: stop here, with its own error
            unreadable.append(Problem(digest=node.digest, problem=str(e)))

        reached, _ = reachable(
            self.reg, starts, tables=payloads, before_read=before_read, on_error=on_error
        )
        if unreadable:
            raise _unreadable(unreadable)
        self.reached |= reached
        return frozenset(reached)

    def whole(self, starts: Iterable[str], *, payloads: bool) -> None:
        """``closure``, then ``check_whole``: revisions read here without being tagged."""
        self.closure(starts, payloads=payloads)
        self.check_whole()

    def check_whole(self) -> None:
        """Every object the closures reached is here (the lock keeps gc out; this catches
        anything else that removed one, and no tag is then written)."""
        lost = sorted(self.reg.store.missing(self.reached))
        if lost:
            raise ObjectNotFoundError(
                f"{len(lost)} objects fetched were removed before their tags were written "
                f"(first {', '.join(short(d) for d in lost[:3])}); no tag was set: pull again",
                digest=lost[0],
            )

    def write_tags(
        self,
        targets: Iterable[Target],
        *,
        force: bool,
        command: str,
        refs: RefStore | None = None,
        event: str = "tag",
    ) -> list[RefUpdate]:
        """Set the local tags of ``targets``, once ``check_whole`` found what they reach here;
        with ``refs``, the refs of that store instead (model refs), logged as ``event``."""
        self.check_whole()
        store = self.reg.refs if refs is None else refs
        out = []
        for t in targets:
            if t.dataset is None or t.tag is None:
                continue
            old = store.set(t.dataset, t.tag, t.digest, force=force, command=command, event=event)
            status = "unchanged" if old == t.digest else ("created" if old is None else "moved")
            out.append(
                RefUpdate(
                    dataset=t.dataset, tag=t.tag, revision=t.digest, previous=old, status=status
                )
            )
        return out

    # -- objects by digest -------------------------------------------------------------------
    def objects(self, digests: Iterable[str]) -> int:
        """Fetch the objects among ``digests`` that the registry lacks, and those a read found
        corrupt (and marked), which are replaced, not trusted because they exist: a pull
        repairs them, as the corrupt-object error advises. Raises on any missing or corrupt
        remote object (after keeping the intact ones); returns how many came."""
        wanted = set(digests)
        store = self.reg.store
        need = sorted(store.missing(wanted))
        broken = sorted(store.marked_corrupt() & wanted)
        received = Received()
        if broken:
            received += self._receive(broken, _Replacing(store))
        if need:
            # Many objects are staged and committed in waves, so an interrupted fetch keeps
            # what arrived; a few are stored one by one.
            for part in put_objects(
                store,
                need,
                one_by_one=lambda few: self._receive(few, _OneByOne(store)),
                staged=lambda batch, wave, done: self._receive(wave, batch, done, len(need)),
            ):
                received += part
        _refuse_damage(self.rs, received)
        self.fetched += received.fetched
        self.bytes += received.bytes
        return received.fetched

    def _receive(
        self, digests: Sequence[str], sink: Sink, done: int = 0, total: int = 0
    ) -> Received:
        """``receive`` into ``sink``; a wave's progress counts from ``done`` of ``total``."""

        def progress(task: str, n: int, of: int) -> None:
            self.progress(task, done + n, total or of)

        return receive(
            self.rs, digests, sink, self.reg.store.tmp, jobs=self.jobs, progress=progress
        )


class _OneByOne:
    """A few verified downloads, stored one by one (each fsynced) without a staging batch."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        got = hash_bytes(data)
        if expect is not None and got != expect:
            return got
        return self._store.put_bytes(data)

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        return self._store.put_file(Path(path))


class _Replacing:
    """Downloads of objects the store holds but found corrupt: verified, then put in their
    place (``ObjectStore.replace_corrupt``): a batch install never replaces an object."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        got = hash_bytes(data)
        if expect is None or got == expect:
            self._store.replace_corrupt(got, data)
        return got

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        got = hash_path(path, size_hint=size_hint)
        self._store.replace_corrupt(got, Path(path))
        return got


def _refuse_damage(rs: RemoteStore, received: Received) -> None:
    """Raise if the remote held any object corrupt, or lacked any."""
    if received.corrupt:
        listed = ", ".join(
            f"{a.digest} (its bytes hash to {short(a.problem)})"
            if a.problem and is_digest(a.problem)
            else f"{a.digest} ({a.problem})"
            for a in received.corrupt[:5]
        )
        raise CorruptObjectError(
            f"remote {rs.label} holds {len(received.corrupt)} corrupt objects, not used: "
            f"{listed}; delete them on the remote and push them again from a registry that "
            "holds them"
        )
    if received.missing:
        raise ObjectNotFoundError(
            f"remote {rs.label} lacks {len(received.missing)} objects "
            f"({', '.join(short(d) for d in received.missing[:5])}); push them from a registry "
            "that holds them"
        )


def _unreadable(problems: list[Problem]) -> IntegrityError:
    """A table a closure fetched and could not read: named by its digest, so a reader that can
    fetch it again (``RemoteReader``) does."""
    return IntegrityError(
        "; ".join(f"{short(p.digest)}: {p.problem}" for p in problems[:3]) + "; run 'dsreg verify'",
        digest=problems[0].digest,
    )


class Owner(NamedTuple):
    """The dataset a manifest belongs to, or ``None`` and ``why`` it belongs to none."""

    dataset: str | None
    why: str = ""


def owner(reg: Registry, digest: str) -> Owner:
    """The dataset a stored manifest belongs to: a revision's snapshot's (every overlay of it
    correcting that snapshot), a snapshot's own, an overlay's base's. A revision whose overlays
    correct another snapshot belongs to none. The manifests it names must be here."""
    m = reg.manifest(digest)
    if isinstance(m, Snapshot):
        return Owner(m.dataset)
    if isinstance(m, Overlay):
        return Owner(reg.snapshot(m.base).dataset)
    for o in m.overlays:
        base = reg.overlay(o).base
        if base != m.snapshot:
            return Owner(
                None,
                f"names {short(digest)}, whose overlay {short(o)} corrects snapshot "
                f"{short(base)}, not its snapshot {short(m.snapshot)}",
            )
    return Owner(reg.snapshot(m.snapshot).dataset)


def _not_of_dataset(reg: Registry, digest: str, name: TagName) -> str:
    """Why tag ``name`` may not name ``digest`` here ("" if it may)."""
    try:
        of = owner(reg, digest)
    except IntegrityError as e:
        return f"names {short(digest)}, which cannot be read ({e})"
    if of.dataset is None:
        return of.why
    if of.dataset != name.dataset:
        return f"names {short(digest)}, a revision of dataset {of.dataset!r}, not {name.dataset!r}"
    return ""


def refused_error(rs: RemoteStore, refused: dict[TagName, str], done: str) -> IntegrityError:
    """The error a pull or clone ends with when it refused some of the remote's tags."""
    listed = "; ".join(
        f"{name.dataset}@{name.tag} {why}" for name, why in sorted(refused.items())[:10]
    )
    more = f" (and {len(refused) - 10} more)" if len(refused) > 10 else ""
    return IntegrityError(
        f"refused {len(refused)} tags of remote {rs.label}, not written here: {listed}{more}. "
        f"{done}. Repair them on the remote: push the right revision with --force from a "
        "registry that holds it"
    )


def fetch_missing(
    reg: Registry,
    digests: Iterable[str],
    *,
    remote: str | None = None,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
) -> int:
    """Fetch objects this registry lacks (checkout of a lazily cloned revision) from ``remote``
    or the default remote; return how many came. Without a remote, a clear error."""
    need = reg.store.missing(digests)
    if not need:
        return 0
    if remote is None and default_remote(reg) is None:
        raise ObjectNotFoundError(
            f"{len(need)} objects are not in this registry (first "
            f"{', '.join(short(d) for d in sorted(need)[:3])}), and it has no default remote "
            "to fetch them from: run 'dsreg pull SPEC -r REMOTE', or set a default remote "
            "with 'dsreg remote add NAME URL --default'"
        )
    rs = open_remote(reg, remote)
    with Fetch(reg, rs, jobs=jobs_for(reg, rs, jobs), progress=progress) as fetch:
        return fetch.objects(need)
