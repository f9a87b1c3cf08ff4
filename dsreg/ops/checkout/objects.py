"""The objects a checkout serves: each checked before it is placed, fetched when the store
lacks it, and the stat it was found with kept for its trust record.

A copy (or reflink) re-hashes every object as it reads it (``fs.copy_checked``). A hard or
symbolic link is made without reading an object whose trust record vouches for its stat
(``dsreg.registry.trust``), and after re-hashing any other one. Corrupt bytes are never
served: the object is marked (so that adding its data again replaces it) and the checkout
refused, or, with a ``Refetch`` (a checkout of a remote's revision), fetched again and
re-hashed.

The work runs in chunks (``in_pool``): in forked worker processes when there are many files,
else in threads. Each chunk reports what it saw of the objects it re-hashed or linked
(``Sightings``); the checkout gathers the reports in ``ObjectStats``, which says at the end
which trust records to write.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeAlias, TypeVar

from dsreg._util.parallel import map_chunks
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, DsregError, ObjectNotFoundError, StorageError
from dsreg.objects.digest import object_relpath, short
from dsreg.objects.hashing import hash_path
from dsreg.ops.checkout.fs import Cloner, copy_checked, place, putter
from dsreg.registry.folder import Registry
from dsreg.registry.trust import Recorder, Records, StatKey, key_of, same_file, trusted, vouches

__all__ = [
    "TRUSTING_LINKS",
    "CheckingPutter",
    "Chunk",
    "Linked",
    "ObjectStats",
    "Refetch",
    "Sightings",
    "Vetted",
    "check_objects",
    "corrupt_object",
    "in_pool",
    "object_path",
    "recording",
    "see_after_links",
    "trust_records",
    "vet_objects",
]

T = TypeVar("T")
# Link types that never read an object's bytes: the ones a trust record can spare a re-hash.
TRUSTING_LINKS = ("hardlink", "symlink")
# Fetches again, verified, objects a checkout found absent or corrupt (marked): from the remote
# a ``checkout --remote`` reads. Without one, absent objects come from the default remote.
Refetch: TypeAlias = Callable[[Sequence[str], ProgressHook], None]
_JOBS = max(4, min(32, (os.cpu_count() or 1) * 4))
# Files per task handed to a worker (one task per small file costs more than the file does).
_CHUNK = 256


def object_path(files: str, blob: str) -> str:
    """Where object ``blob`` lives under the store's ``files/`` (a string: cheaper per file)."""
    return f"{files}/{object_relpath(blob)}"


@dataclass(frozen=True, slots=True)
class Vetted:
    """The objects of a plan as a checkout found them before it touched the folder: their
    trust records (``trust_records``), and ``stats``, the stat each object was re-hashed or
    found trusted with (for a switch; a fresh checkout checks each as it places it), which the
    passes that place them add to."""

    trust: Records
    stats: ObjectStats


def vet_objects(
    reg: Registry,
    placements: Sequence[tuple[str, str]],
    link: str,
    *,
    switch: bool,
    verify: bool,
    progress: ProgressHook,
    refetch: Refetch | None,
) -> Vetted:
    """The trust records of the objects a checkout places; for a ``switch``, every object is
    re-hashed (or found trusted) first, fetched where absent (``check_objects``), so that
    corrupt bytes are never served and a refused switch leaves the folder as it was."""
    trust = trust_records(reg, placements, link, verify=verify)
    if not switch or not placements:
        return Vetted(trust, ObjectStats())
    return Vetted(
        trust, check_objects(reg, placements, trust=trust, progress=progress, refetch=refetch)
    )


def trust_records(
    reg: Registry, placements: Sequence[tuple[str, str]], link: str, *, verify: bool
) -> Records:
    """The trust records of the objects a checkout places, for the link types that never read
    an object's bytes; none for a copy (it re-hashes as it reads) or with ``verify``."""
    if not placements or link not in TRUSTING_LINKS:
        return Records()
    return trusted(reg, (blob for _path, blob in placements), verify=verify)


def corrupt_object(reg: Registry, blob: str, rel: str) -> CorruptObjectError:
    """The refusal of a corrupt object, which is marked on the way (``mark_corrupt``), so that
    adding its data again replaces it."""
    reg.store.mark_corrupt(blob)
    return CorruptObjectError(
        f"object {short(blob)} for {rel} is corrupt; it was not checked out: add its data "
        "again or run 'dsreg pull' to repair it ('dsreg verify' lists every damaged object)",
        digest=blob,
    )


def _ctime(stat: StatKey) -> int:
    _ino, _size, _mtime, ctime, _links = stat
    return ctime


@dataclass(frozen=True, slots=True)
class Sightings:
    """What a chunk of work saw of the objects it re-hashed or linked, a column per field (a
    list of rows would cost a pickled object per file on its way back from a worker process).

    For object ``blobs[i]``: ``stats[i]`` its stat now, or ``None`` when it changed in a way a
    link does not explain (then no record is written for it); ``safe[i]`` whether that stat was
    taken after a reading of the file system's clock older than its mtime and ctime
    (``trust.record``); ``differs[i]`` whether it differs from the object's trust record, which
    is then written again."""

    blobs: list[str] = field(default_factory=list)
    stats: list[StatKey | None] = field(default_factory=list)
    safe: list[bool] = field(default_factory=list)
    differs: list[bool] = field(default_factory=list)

    def saw(self, blob: str, stat: StatKey | None, clock: int | None, rec: StatKey | None) -> None:
        """Object ``blob`` has ``stat``, taken after the file system's clock read ``clock``;
        ``rec`` is its trust record."""
        if stat is None:
            self.changed(blob)
            return
        _ino, _size, mtime, ctime, _links = stat
        self.blobs.append(blob)
        self.stats.append(stat)
        self.safe.append(clock is not None and mtime < clock and ctime < clock)
        self.differs.append(stat != rec)

    def changed(self, blob: str) -> None:
        """Object ``blob`` changed in a way a link does not explain: no record for it."""
        self.blobs.append(blob)
        self.stats.append(None)
        self.safe.append(False)
        self.differs.append(True)

    def __iter__(self) -> Iterator[tuple[str, StatKey | None, bool, bool]]:
        """``(blob, stat, safe, differs)`` of each sighting."""
        return zip(self.blobs, self.stats, self.safe, self.differs, strict=True)


class ObjectStats:
    """The stat each object has after a checkout, gathered from its chunks' sightings: a
    ``None`` (the object changed in a way a link does not explain) wins over every stat; of two
    stats, the later ctime (the last link) wins, and it differs from the object's trust record
    if either did. While ``recording`` hands them to a ``Recorder``, the stats that differ from
    their records go to it as they arrive and are not recorded again at the end: for a pass in
    which each object comes once (a fresh checkout's first files), so that no later sighting
    can supersede one sent."""

    __slots__ = ("changed", "differs", "safe", "sink", "stats")

    def __init__(self) -> None:
        self.stats: dict[str, StatKey] = {}
        self.safe: dict[str, bool] = {}  # whether ``stats[blob]`` is safe (``Sightings``)
        self.differs: set[str] = set()  # objects whose stat differs from their trust record
        self.changed: set[str] = set()  # objects that changed in a way a link does not explain
        self.sink: Callable[[dict[str, tuple[StatKey, bool]]], None] | None = None

    def add(self, seen: Sightings) -> None:
        sent: dict[str, tuple[StatKey, bool]] = {}
        for blob, stat, safe, differs in seen:
            if stat is None:
                self.changed.add(blob)
                continue
            if differs and self.sink is not None:
                sent[blob] = (stat, safe)
                differs = False
            old = self.stats.get(blob)
            if old is None or _ctime(stat) >= _ctime(old):
                self.stats[blob] = stat
                self.safe[blob] = safe
                if differs:
                    self.differs.add(blob)
        if sent and self.sink is not None:
            self.sink(sent)

    def to_record(self) -> dict[str, tuple[StatKey, bool]]:
        """What to record (``trust.record``): ``{blob: (stat, safe)}`` of the stats that are
        not already the objects' records."""
        changed = self.changed
        return {b: (self.stats[b], self.safe[b]) for b in self.differs if b not in changed}

    def good(self) -> dict[str, StatKey]:
        """Each object's stat, but those that changed in a way a link does not explain."""
        changed = self.changed
        return {b: st for b, st in self.stats.items() if b not in changed}


@contextlib.contextmanager
def recording(reg: Registry, stats: ObjectStats) -> Iterator[None]:
    """Trust records written as the sightings arrive, in a thread, while the workers go on
    (``trust.Recorder``); every one is written when the block ends."""
    recorder = Recorder(reg)
    stats.sink = recorder.put
    try:
        yield
    finally:
        stats.sink = None
        recorder.close()


@dataclass(frozen=True, slots=True)
class Chunk(Generic[T]):
    """What one chunk of work reports: how many items it did, the ones it leaves for later
    (objects the store lacks), and what it saw of the objects it re-hashed or linked."""

    items: int
    left: list[T] = field(default_factory=list)
    seen: Sightings = field(default_factory=Sightings)


def in_pool(
    work: Callable[[int, int], Chunk[T]],
    n: int,
    progress: ProgressHook,
    task: str,
    stats: ObjectStats,
) -> list[T]:
    """``work(lo, hi)`` for each chunk of ``n`` items: in worker processes when there are many
    (reading and linking small files is kernel work that threads barely overlap), else in
    threads; queued chunks are dropped on the first failure. Returns the items every chunk
    left; what they saw goes to ``stats``."""
    left: list[T] = []
    done = 0
    with contextlib.closing(map_chunks(work, n, chunk=_CHUNK, threads=_JOBS)) as results:
        for _lo, chunk in results:
            left.extend(chunk.left)
            stats.add(chunk.seen)
            done += chunk.items
            progress(task, done, n)
    return left


class Linked(NamedTuple):
    """An object a chunk has just hard-linked: its digest and path, its stat when it was
    re-hashed or found trusted, and its trust record. A tuple: one per file linked."""

    blob: str
    path: str
    before: StatKey | None
    rec: StatKey | None


def see_after_links(reg: Registry, linked: list[Linked], seen: Sightings) -> None:
    """What a hard link leaves of each object in ``linked``: its stat after its links, taken
    after one reading of the clock, if nothing but links changed it since ``before``."""
    clock = reg.state.clock_ns()
    for blob, path, before, rec in linked:
        try:
            after: StatKey | None = key_of(os.stat(path))
        except OSError:
            after = None
        if after is None or before is None or not same_file(before, after):
            seen.changed(blob)
        else:
            seen.saw(blob, after, clock, rec)


class CheckingPutter:
    """Puts an object at a new name, checking its bytes on the way: a copy (or clone) re-hashes
    what it reads, one read of a small object; a hard or symbolic link is made of an object
    whose trust record vouches for its stat, or after re-hashing it."""

    __slots__ = ("_clone", "_copying", "_put")

    def __init__(self, link: str) -> None:
        self._copying = link in ("copy", "reflink")
        self._clone = Cloner() if link == "reflink" else None
        self._put = putter(link)

    def __call__(
        self, src: str, blob: str, fd: int, name: str, rec: StatKey | None
    ) -> tuple[str | None, StatKey | None]:
        """Put object ``src`` at ``name`` in folder ``fd`` if its bytes hash to ``blob``.
        Returns the digest they have (``blob`` when its trust record ``rec`` vouches for it;
        ``None`` if it is absent) and its stat, taken before it was read (``None`` where
        nothing was placed)."""
        if self._copying:
            copied = copy_checked(src, blob, fd, name, self._clone)
            return copied.digest, (key_of(copied.stat) if copied.stat is not None else None)
        try:
            before = key_of(os.stat(src))
            # The stat is taken before the bytes are hashed: a change while they are read
            # shows in the next stat.
            got = blob if vouches(rec, before) else hash_path(src)
        except FileNotFoundError:
            return None, None
        if got != blob:
            return got, None
        try:
            self._put(src, fd, name)
        except FileExistsError:  # appeared meanwhile: replaced, as in a switch
            place(self._put, src, fd, name)
        return got, before


def check_objects(
    reg: Registry,
    placements: Sequence[tuple[str, str]],
    *,
    trust: Records,
    progress: ProgressHook,
    refetch: Refetch | None = None,
) -> ObjectStats:
    """Re-hash each distinct object ``placements`` need, but those whose trust record matches
    their stat; fetch absent ones (verified: through ``refetch``, which also takes the corrupt
    ones, else from the default remote) or fail clearly; refuse a corrupt one, naming a file
    that would have held it. Returns each object's stat when it was re-hashed or found
    trusted."""
    first: dict[str, str] = {}  # each object's first path: the one a refusal names
    for rel, blob in placements:
        if blob not in first:
            first[blob] = rel
    found = ObjectStats()
    repairable = refetch is not None
    absent = _hash_objects(reg, list(first), first, trust, found, progress, repairable)
    if absent:
        if refetch is not None:
            refetch(absent, progress)
        else:
            # Imported here: the remote modules would add to the start-up of every checkout,
            # and most fetch nothing.
            from dsreg.remote.fetch import fetch_missing

            fetch_missing(reg, absent, progress=progress)
        # Fetched objects were verified on arrival; a second look costs little and keeps the
        # rule simple: nothing is linked that was not hashed here.
        still = _hash_objects(reg, absent, first, Records(), found, no_progress, False)
        if still:
            missing = still[0]
            raise ObjectNotFoundError(
                f"object {short(missing)} for {first[missing]} is missing after it was "
                "fetched; it was not checked out: run 'dsreg verify', then 'dsreg pull' or "
                "re-add",
                digest=missing,
            )
    return found


def _hash_objects(
    reg: Registry,
    blobs: list[str],
    first: dict[str, str],
    trust: Records,
    found: ObjectStats,
    progress: ProgressHook,
    repairable: bool,
) -> list[str]:
    """Re-hash objects (in workers) but the trusted ones whose stat matches; return the absent
    ones, and the corrupt ones (marked) if ``repairable``, else raise on a corrupt one; each
    one's stat (taken before hashing) goes to ``found``."""
    files = os.fspath(reg.store.files)

    def hash_chunk(lo: int, hi: int) -> Chunk[str]:
        chunk: Chunk[str] = Chunk(hi - lo)
        clock = reg.state.clock_ns()  # before any stat of the chunk
        for blob in blobs[lo:hi]:
            path = object_path(files, blob)
            try:
                before = key_of(os.stat(path))
                rec = trust.get(blob)
                got = blob if vouches(rec, before) else hash_path(path)
            except FileNotFoundError:
                chunk.left.append(blob)
                continue
            if got != blob:
                if not repairable:
                    raise corrupt_object(reg, blob, first[blob])
                reg.store.mark_corrupt(blob)
                chunk.left.append(blob)
                continue
            chunk.seen.saw(blob, before, clock, rec)
        return chunk

    try:
        return in_pool(hash_chunk, len(blobs), progress, "verifying", found)
    except DsregError:
        raise  # an OSError too (errors.py), and already said
    except OSError as e:
        raise StorageError(f"cannot read objects in {files}: {e}") from e
