"""Which objects a checkout may link without reading them again (docs/concepts.md, "Guarantees").

An object is *vouched for* when dsreg knows its bytes hashed to its digest: the add hashed the
very bytes it wrote, and every re-hash (a checkout's, ``--verify``'s) finds them again. The
object's ``(inode, size, mtime, ctime, link count)`` at that moment is its trust record
(``StatCache.object_stats``). While the object's stat is still that, nothing has written to it
through the file system since (a write changes the mtime; restoring the mtime with ``utime``
changes the ctime, which no call can set back; a replacement changes the inode), so a hard
link, symbolic link or clone of it is made without reading it, as git trusts its index.
Making or removing a hard link of the object changes its ctime too, and its link count: a
stat whose ctime differs from the record's while its link count differs too is trusted
(``vouches``), the ctime change explained by a link made or removed (a checkout linked it, a
hard-linked checkout was deleted), as git's ``core.trustctime = false`` explains ctime changes
away. What that lets through that the strict rule did not: an edit that restores the mtime
(``touch -r``, ``rsync -t``) *and* coincides with a link-count change; a deliberate
mtime-restoring edit is the documented limit of any stat check already. Anything else
re-hashes: no record, a record that fails its CRC-32, a stat whose inode, size or mtime
differs, or whose ctime differs with the same link count, an object marked corrupt
(``ObjectStore.mark_corrupt``), or ``verify=True``.

What the stat cannot see is damage below the file system: a bit flipped on the disk, a write
the device got wrong. No stat field changes then. That is what ``dsreg verify`` (every object
re-hashed) and ``dsreg checkout --verify`` are for, and every command that reads an object's
bytes (``open``, ``sql``, ``push``, a copy) hashes what it reads whatever the record says.

A change must not be able to carry the recorded stat. File systems stamp times from a clock
that ticks every few milliseconds, so a change in the same tick as a recorded stat could leave
every field as it was (git's "racily clean" entries). So the file system's clock is read
(``StatCache.clock_ns``, a file in ``state/`` touched) before each stat that a checkout makes a
record of, and the record is *safe* only if its ctime and mtime are older than that reading: any
change after the stat then falls in a later tick and gets a later ctime. An add records the stat
each object had as it was written (``fstat`` of the staged file: renaming the staging folder
into place changes no file's ctime; objects renamed one by one are stat'ed after), safe if
older than the clock read after the objects are installed. A record that is not safe
(the object changed in the clock's current tick: a checkout's own hard link, just made) is
stat'ed again once the clock has moved past its ctime, and written only if that stat is the
same. What no order of calls can close is a change between the moment the bytes were known
good (written by the add, re-hashed, or linked by a checkout) and the stat: microseconds for a
checkout, the add's own run for the objects it stages in its private folder under ``tmp/``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from dsreg.objects.digest import PREFIX, hex_of, object_relpath, object_relpaths
from dsreg.registry.folder import Registry
from dsreg.registry.state import StatKey, decode_record

__all__ = [
    "Recorder",
    "Records",
    "StagedRecords",
    "StatKey",
    "key_of",
    "record",
    "record_stored",
    "same_file",
    "trusted",
    "vouches",
]


def key_of(st: os.stat_result) -> StatKey:
    """The fields of a stat a trust record holds."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)


def vouches(rec: StatKey | None, now: StatKey) -> bool:
    """Whether trust record ``rec`` lets an object whose stat is ``now`` be linked unread: the
    same inode, size and mtime, and the same ctime or, if not, another link count (the ctime
    change explained by a hard link made or removed since)."""
    if rec is None:
        return False
    ino, size, mtime, ctime, nlink = rec
    i, s, m, c, n = now
    return ino == i and size == s and mtime == m and (ctime == c or nlink != n)


def same_file(a: StatKey, b: StatKey) -> bool:
    """Whether ``b`` is ``a``'s file with no change but its ctime and link count: what making
    a hard link (or a clone) of it changes."""
    return a[0] == b[0] and a[1] == b[1] and a[2] == b[2]


class Records:
    """The trust records a checkout looked up: ``get(digest)`` checks (its CRC-32) and decodes
    one when it is asked for, so that work happens in the workers that link the objects, side
    by side, not in one pass before they start. ``seeing(stats)`` is the same records with
    ``stats`` (what this checkout found good: an object's stat after its links) in front."""

    __slots__ = ("_raw", "_seen")

    def __init__(
        self, raw: Mapping[bytes, object] | None = None, seen: Mapping[str, StatKey] | None = None
    ) -> None:
        self._raw: Mapping[bytes, object] = raw or {}
        self._seen: Mapping[str, StatKey] = seen or {}

    def get(self, digest: str) -> StatKey | None:
        """Object ``digest``'s record (``None``: none, or one whose check fails)."""
        st = self._seen.get(digest)
        if st is not None:
            return st
        if not self._raw:
            return None
        key = bytes.fromhex(digest[len(PREFIX) :])
        value = self._raw.get(key)
        return None if value is None else decode_record(key, value)

    def seeing(self, stats: Mapping[str, StatKey]) -> Records:
        return Records(self._raw, {**self._seen, **stats})


def trusted(reg: Registry, digests: Iterable[str], *, verify: bool = False) -> Records:
    """The trust records of ``digests``: an object whose stat its record ``vouches`` for may be
    linked unread. Objects marked corrupt have none; with ``verify``, nothing has."""
    if verify:
        return Records()
    cut = len(PREFIX)
    wanted = {d[cut:] for d in digests}  # full digests: the examples table checked them
    if not wanted:
        return Records()
    found = reg.state.object_records(wanted)
    for d in reg.store.marked_corrupt():
        found.pop(bytes.fromhex(hex_of(d)), None)
    return Records(found)


# How long ``record`` waits for the file system's clock to move past a racy record's times.
_WAIT_S = 0.1


def record(reg: Registry, rows: Mapping[str, tuple[StatKey, bool]]) -> int:
    """Write trust records ``{digest: (stat, safe)}``: each stat taken after its object's bytes
    were found to hash to its digest (or it was linked after that), with no change between but
    a link; ``safe`` when it was taken after a reading of the file system's clock older than
    its ctime and mtime. The others are stat'ed again once the clock has passed them and kept
    only if unchanged. Returns how many were written."""
    keep = _settled(reg, rows)
    reg.state.put_object_stats(keep)
    return len(keep)


# Rows a ``Recorder`` writes at once, at least (but the last); rows in one transaction.
_BATCH = 8192
_COMMIT = 65536


class Recorder:
    """``record`` in a thread, while the checkout's workers still link: ``put(rows)`` hands it
    a worker's rows as they arrive, ``close()`` waits for every one to be written and
    committed (one connection, ``StatCache.object_recorder``: a write per ``_BATCH`` rows, so
    the work is spread over the checkout, a commit per ``_COMMIT``). The thread starts on the
    first ``put``: a checkout forks its workers before any row arrives, so none is forked with
    it running."""

    __slots__ = ("_queue", "_reg", "_thread")

    def __init__(self, reg: Registry) -> None:
        self._reg = reg
        self._queue: queue.SimpleQueue[dict[str, tuple[StatKey, bool]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def put(self, rows: dict[str, tuple[StatKey, bool]]) -> None:
        if not rows:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dsreg-trust", daemon=True)
            self._thread.start()
        self._queue.put(rows)

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        with self._reg.state.object_recorder(commit_every=_COMMIT) as write:
            done = False
            while not done:
                rows: dict[str, tuple[StatKey, bool]] = {}
                # A write per _BATCH rows at least, a commit per _COMMIT (each commit rewrites
                # the pages its rows fall in: random keys touch most of the table's).
                while len(rows) < _BATCH:
                    more = self._queue.get()
                    if more is None:
                        done = True
                        break
                    rows.update(more)
                with contextlib.suppress(OSError):
                    write(_settled(self._reg, rows))


def _settled(reg: Registry, rows: Mapping[str, tuple[StatKey, bool]]) -> list[tuple[str, StatKey]]:
    """The rows of ``record`` that may be written: the safe ones, and the others whose stat is
    unchanged once the clock has passed them."""
    cut = len(PREFIX)
    keep = [(d[cut:], st) for d, (st, safe) in rows.items() if safe]
    racy = {d: st for d, (st, safe) in rows.items() if not safe}
    if racy:
        newest = max(max(st[2], st[3]) for st in racy.values())
        clock = _clock_after(reg, newest)
        if clock is not None:
            files = os.fspath(reg.store.files)
            digests = list(racy)  # full digests: the examples table checked them
            for d, rel in zip(digests, object_relpaths(digests), strict=True):
                try:
                    now = key_of(os.stat(f"{files}/{rel}"))
                except OSError:
                    continue
                if now == racy[d]:
                    keep.append((d[cut:], now))
    return keep


def _clock_after(reg: Registry, t: int) -> int | None:
    """The file system's clock once it reads later than ``t`` (``None`` if it cannot be read, or
    does not move past ``t`` within ``_WAIT_S``: a clock set back)."""
    deadline = time.monotonic() + _WAIT_S
    while True:
        clock = reg.state.clock_ns()
        if clock is None or clock > t:
            return clock
        if time.monotonic() > deadline:
            return None
        time.sleep(0.001)


class StagedRecords:
    """Trust records for the objects an add stages, written while it still reads files. The
    add's tail after ``commit`` then writes only the last few (``finish``) instead of one
    record per object, which would hold up the end of a large add.

    ``staged(entries)`` takes each chunk's staged objects as it arrives: ``(path, hex, stat)``,
    the stat taken as each object was written. Every ``_EARLY`` objects, the file system's
    clock is read, and the records whose times are older are written (safe, as in
    ``record``). The others wait for the next reading, or for ``finish(installed)`` after
    ``commit``.

    A record written before its object is installed is the record it would be after:
    installing renames a whole staging folder, which changes no file's stat. Two cases differ:

    - an object renamed on its own into a shard folder that existed gets a new ctime with the
      same link count, so its early record does not vouch for it; ``finish`` stats it and
      writes its record again, as ``record_stored`` does;
    - an object not installed (a concurrent add installed the same bytes first) has another
      inode; its early record replaced that add's record, so the object is re-hashed once.

    Either way a wrong record costs a re-hash, never trust in bytes nobody hashed."""

    __slots__ = ("_put", "_racy", "_reg", "_rows", "_sizes", "_writer")

    def __init__(self, reg: Registry) -> None:
        self._reg = reg
        self._rows: dict[str, StatKey] = {}  # staged, not yet written
        self._racy: dict[str, StatKey] = {}  # too recent for the clock read at their write
        self._sizes: dict[str, int] = {}  # every object staged with a stat: its size
        self._writer = contextlib.ExitStack()
        self._put: Callable[[Iterable[tuple[str, StatKey]]], None] | None = None

    def __enter__(self) -> StagedRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self._writer.close()

    def staged(self, entries: Iterable[tuple[str, str, StatKey | None]]) -> None:
        for _path, h, st in entries:
            if st is not None:
                self._rows[h] = st
                self._sizes[h] = st[1]
        if len(self._rows) >= _EARLY:
            self._write_safe()

    def _write_safe(self) -> None:
        # Those too recent at the last write are older than this clock reading, most likely.
        rows, self._rows = {**self._racy, **self._rows}, {}
        self._racy = {}
        clock = self._reg.state.clock_ns()
        if clock is None:
            return
        if self._put is None:
            self._put = self._writer.enter_context(self._reg.state.object_writer())
        safe = []
        for h, st in rows.items():
            if st[2] < clock and st[3] < clock:
                safe.append((h, st))
            else:
                self._racy[h] = st
        self._put(safe)

    def finish(self, installed: Mapping[str, StatKey | None]) -> int:
        """Once the batch is committed (``installed``: ``ObjectBatch.installed``): the records
        not written yet, of the objects installed with the stat they were written with, and
        those of objects installed one by one (stat'ed now). Returns how many were written
        here."""
        waiting = {**self._racy, **self._rows}
        self._racy, self._rows = {}, {}
        self._writer.close()
        self._put = None
        restat = [h for h, st in installed.items() if st is None]
        kept = {PREFIX + h: st for h, st in waiting.items() if installed.get(h) is not None}
        sizes = {d: st[1] for d, st in kept.items()}
        # The size each was written with; a streamed object's is not known here: any size.
        sizes.update((PREFIX + h, self._sizes.get(h, -1)) for h in restat)
        return record_stored(self._reg, sizes, kept)  # the others are stat'ed there


# Staged objects per early write of ``StagedRecords`` (one clock reading and one transaction;
# what ``finish`` is left with after the last one).
_EARLY = 2048


def record_stored(
    reg: Registry, sizes: Mapping[str, int], written: Mapping[str, StatKey | None]
) -> int:
    """Trust records for objects an add has just written and installed, from bytes it hashed as
    it wrote them (``sizes``: digest -> the size of those bytes). ``written`` holds each one's
    stat taken as it was written, when installing it did not change it (a staging folder
    renamed into place); the others are stat'ed here. The clock is read first; a stat whose
    times are not older is racy (``record``). An object of another size than the bytes
    written is not recorded (it is re-hashed when a checkout needs it); a size below zero is
    not known (a streamed object): any size. Returns how many were written."""
    if not sizes:
        return 0
    clock = reg.state.clock_ns()
    if clock is None:
        return 0
    files = os.fspath(reg.store.files)
    rows: dict[str, tuple[StatKey, bool]] = {}
    for digest, size in sizes.items():
        key = written.get(digest)
        if key is None:
            try:
                key = key_of(os.stat(f"{files}/{object_relpath(digest)}"))
            except OSError:
                continue
        if size < 0 or key[1] == size:
            rows[digest] = (key, key[2] < clock and key[3] < clock)
    return record(reg, rows)
