"""``dsreg checkout``: a revision's view as files, plus a pin file ``.dsreg.json``.

ImageFolder sets come back in their layout, each file under its (possibly corrected) class's
folder, so an unchanged ImageFolder loader reads the view's labels. Table sets with payloads
come back at their example ids; label-only sets as ``labels.csv``. Switching a folder from one
revision to another touches only the files that differ. A copy (or reflink) re-hashes every
object as it reads it; a hard or symbolic link is made without reading an object whose trust
record vouches for its stat (``dsreg.registry.trust``: written from bytes the add hashed, or
re-hashed since, and unchanged through the file system since but for links made or removed),
and after re-hashing any other one, once per checkout however many files hold it;
``verify=True`` (``--verify``) re-hashes them all. Corrupt bytes found are never served (and a
corrupt object is marked, so that adding its data again replaces it). A hard link changes the
object's ctime and link count: the checkout records the stat it has after the link.

A checkout is two steps: ``dsreg.ops.checkout.plan.plan`` compares the folder with the target
and refuses before anything in it is touched; ``apply`` (here) executes the plan: verify the
objects, write the journal (``journal``), remove stale files, link or copy, write the
pin, remove the journal. ``checkout`` runs both under the folder's lock, which it takes before
it reads anything in the folder. Every file operation goes through folder descriptors that
never follow a link inside the folder (``fs``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from dsreg._util.fs import write_atomic
from dsreg._util.parallel import gc_paused, map_chunks
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, DsregError, ObjectNotFoundError, StorageError
from dsreg.objects.digest import object_relpath, short
from dsreg.objects.hashing import hash_path
from dsreg.ops.checkout.fs import (
    Cloner,
    Dirs,
    clean_leftovers,
    copy_checked,
    empty_folder,
    open_root,
    place,
    prune,
    putter,
    same,
    unlink,
)
from dsreg.ops.checkout.journal import JOURNAL, clear_journal, write_journal
from dsreg.ops.checkout.plan import (
    LABELS_CSV,
    PIN,
    CheckoutPlan,
    LinkType,
    check_folder,
    is_own_temp,
    plan,
    read_pin,
)
from dsreg.registry.folder import Registry, Resolved
from dsreg.registry.trust import (
    Recorder,
    Records,
    StatKey,
    key_of,
    record,
    same_file,
    trusted,
    vouches,
)
from dsreg.views.dataset import Dataset

__all__ = [
    "JOURNAL",
    "LABELS_CSV",
    "PIN",
    "CheckoutPlan",
    "CheckoutResult",
    "LinkType",
    "apply",
    "checkout",
    "plan",
    "read_pin",
]

_JOBS = max(4, min(32, (os.cpu_count() or 1) * 4))
# Files per task handed to a worker thread (one future per small file costs more than it does).
_CHUNK = 256
T = TypeVar("T")
_Todo: TypeAlias = Sequence[tuple[str, str]]
# What a worker says of the objects it linked or re-hashed: (digest, its stat now, or None when
# it changed in a way a link does not explain: then no record is written for it; whether the
# stat was taken after a reading of the file system's clock older than it, ``trust.record``;
# whether it differs from the object's trust record, which is then written again).
_Rows: TypeAlias = list[tuple[str, StatKey | None, bool, bool]]
# An object's stat as this checkout found it: (stat, safe, differs from its record).
_Seen: TypeAlias = tuple[StatKey, bool, bool]
# Link types that never read an object's bytes: the ones a trust record can spare a re-hash.
_TRUSTING = ("hardlink", "symlink")
# Fetches again, verified, objects a checkout found absent or corrupt (marked): from the remote
# a ``checkout --remote`` reads. Without one, absent objects come from the default remote.
Refetch: TypeAlias = Callable[[Sequence[str], ProgressHook], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckoutResult:
    revision: str
    path: str
    files: int
    added: int
    removed: int
    unchanged: int
    link: str
    # A label-only set: the labels.csv written (its path) and its rows; None otherwise.
    labels_csv: str | None = None
    labels_rows: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels_csv": self.labels_csv,
            "labels_rows": self.labels_rows,
            "revision": self.revision,
            "path": self.path,
            "files": self.files,
            "added": self.added,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "link": self.link,
        }


def checkout(
    reg: Registry,
    resolved: Resolved,
    target: Path,
    *,
    link: LinkType = "reflink",
    verify: bool = False,
    progress: ProgressHook = no_progress,
    refetch: Refetch | None = None,
) -> CheckoutResult:
    """Materialise ``resolved`` at ``target``; switch an existing checkout incrementally; finish
    a checkout of the folder that was interrupted (its journal), whatever revision it was for.
    ``verify`` re-hashes every object, trusted or not. With ``refetch`` (a checkout of a
    remote's revision), an object found absent or corrupt is fetched again through it and
    re-hashed before it is placed, rather than refused."""
    ds = Dataset(reg, resolved)
    target = target.absolute()
    check_folder(target)
    # The one thing done before the lock: the lock is taken on the folder itself, so a new one
    # is created (empty) first. Everything that reads the folder (pin, journal, files) comes
    # after, so two checkouts of one folder run one after the other, the second planning
    # against what the first left.
    with _locked(target) as created, gc_paused():
        try:
            planned = plan(ds, target, link=link)
            res = apply(reg, planned, verify=verify, progress=progress, refetch=refetch)
            if res.labels_csv is not None:
                res = dataclasses.replace(res, labels_rows=len(ds))
            return res
        except BaseException:
            if created:
                # Refused, or failed and emptied again: a folder this checkout made goes too.
                with contextlib.suppress(OSError):
                    target.rmdir()
            raise


def apply(
    reg: Registry,
    planned: CheckoutPlan,
    *,
    verify: bool = False,
    progress: ProgressHook = no_progress,
    refetch: Refetch | None = None,
) -> CheckoutResult:
    """Carry out a plan (made by ``plan`` under the folder's lock, which ``checkout`` holds).

    Objects are re-hashed before they are placed, unless a hard or symbolic link is made of one
    whose trust record matches its stat (and not ``verify``); a lazily cloned registry fetches
    (verified) what it lacks from the default remote. The journal is written before the folder
    is touched and removed after the pin, which is written last. A refusal or failure (a
    corrupt or missing object, a full disk) leaves a folder that was empty empty again; a
    switch that fails part way leaves its journal, and the next checkout of the folder
    finishes it. Trust records of what was re-hashed or linked are written as each chunk of a
    fresh checkout's work arrives (in a thread, while the workers go on), the rest last; a
    record is written only where the object's stat now differs from it.
    """
    target, todo = planned.target, planned.place
    trust = Records()
    if todo and planned.link in _TRUSTING:
        trust = trusted(reg, (blob for _rel, blob in todo), verify=verify)
    rows = _Found()
    checked: dict[str, StatKey] = {}
    if not planned.fresh and todo:
        # Every object to be placed is re-hashed (or found trusted) before the folder is
        # touched: corrupt bytes are never served, and a refused switch leaves it as it was.
        checked = _verify_objects(reg, todo, progress, trust, rows, refetch)
    root_fd = open_root(target)
    try:
        _clear_own_temps(root_fd)
        if planned.journal is not None:
            write_journal(target, planned.journal)
        if planned.fresh:
            _fresh(reg, planned, root_fd, progress, trust, rows, refetch)
        else:
            _switch(reg, planned, root_fd, progress, checked, trust, rows)
    finally:
        os.close(root_fd)
    if planned.journal is not None or planned.recovering:
        clear_journal(target)
    record(reg, rows.changed())
    return CheckoutResult(
        revision=planned.revision,
        path=str(target),
        files=planned.files,
        added=len(todo),
        removed=planned.removed,
        unchanged=planned.files - len(todo),
        link=planned.link,
        labels_csv=str(target / LABELS_CSV) if planned.labels_csv is not None else None,
    )


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[bool]:
    """Create ``target`` if missing and hold its lock; yields whether this call created it.
    The lock is on the folder's inode: if the folder was removed or replaced while this one
    waited (another checkout made it, was refused and removed it), it starts again."""
    for _ in range(100):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(target)
                created = True
            except FileExistsError:
                created = False
            fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise StorageError(f"cannot create {target}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(target)
            except FileNotFoundError:
                continue
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                yield created
                return
        finally:
            os.close(fd)
    raise StorageError(f"{target} keeps being removed or replaced; check out again")


class _Found:
    """The stat each object has after this checkout, as workers report it: a ``None`` from any
    of them (the object changed in a way a link does not explain) wins over every stat; of two
    stats, the later ctime (the last link) wins, and it differs from the object's trust record
    if either did (the workers compare: the records are decoded there). With a ``sink``
    (a ``Recorder``'s ``put``), the stats that differ from their records go to it as they
    arrive, and are not recorded again at the end: for a pass in which each object comes once
    (a fresh checkout's first files), so no later row can supersede one sent."""

    __slots__ = ("bad", "sink", "stats")

    def __init__(self) -> None:
        self.stats: dict[str, _Seen] = {}
        self.bad: set[str] = set()
        self.sink: Callable[[dict[str, tuple[StatKey, bool]]], None] | None = None

    def add(self, rows: _Rows) -> None:
        sent: dict[str, tuple[StatKey, bool]] = {}
        for blob, st, safe, new in rows:
            if st is None:
                self.bad.add(blob)
                continue
            if new and self.sink is not None:
                sent[blob] = (st, safe)
                new = False
            old = self.stats.get(blob)
            if old is None:
                self.stats[blob] = (st, safe, new)
            elif st[3] >= old[0][3]:
                self.stats[blob] = (st, safe, new or old[2])
        if sent and self.sink is not None:
            self.sink(sent)

    def changed(self) -> dict[str, tuple[StatKey, bool]]:
        """What to record: the stats that are not already the objects' records."""
        bad = self.bad
        return {b: (st, safe) for b, (st, safe, new) in self.stats.items() if new and b not in bad}

    def good(self) -> dict[str, StatKey]:
        """Each object's stat, but those that changed in a way a link does not explain."""
        bad = self.bad
        return {b: v[0] for b, v in self.stats.items() if b not in bad}


def _row(
    blob: str, st: StatKey | None, clock: int | None, rec: StatKey | None
) -> tuple[str, StatKey | None, bool, bool]:
    """A worker's row: ``st`` taken after the file system's clock read ``clock``; ``rec`` the
    object's trust record."""
    safe = st is not None and clock is not None and st[2] < clock and st[3] < clock
    return blob, st, safe, st != rec


def _after_links(
    reg: Registry, linked: list[tuple[str, str, StatKey | None, StatKey | None]]
) -> _Rows:
    """Rows for objects a chunk has just hard-linked (``(digest, path, stat when re-hashed or
    found trusted, trust record)``): each one's stat after its links, taken after one reading
    of the clock, if nothing but links changed it; else None (no record)."""
    clock = reg.state.clock_ns()
    out: _Rows = []
    for blob, src, before, rec in linked:
        try:
            after: StatKey | None = key_of(os.stat(src))
        except OSError:
            after = None
        if after is None or before is None or not same_file(before, after):
            out.append((blob, None, False, True))
        else:
            out.append(_row(blob, after, clock, rec))
    return out


def _fresh(
    reg: Registry,
    planned: CheckoutPlan,
    root_fd: int,
    progress: ProgressHook,
    trust: Records,
    rows: _Found,
    refetch: Refetch | None,
) -> None:
    """An empty folder: each object is re-hashed and placed straight at its name (a link
    appears whole; a copy is written under its name, so a failure removes everything)."""
    target = planned.target
    try:
        # The folders are made by the workers as they first place a file in each (side by side
        # with the links of the others: a thousand folders made here first cost a checkout of
        # 50,000 files a tenth of its time).
        _verify_and_place(reg, planned, root_fd, progress, trust, rows, refetch)
        _finish(planned)
    except BaseException as e:
        # The folder was empty: empty it again (the journal last), so a re-run starts afresh.
        with contextlib.suppress(OSError):
            empty_folder(root_fd, keep=JOURNAL)
            clear_journal(target)
        if isinstance(e, OSError) and not isinstance(e, DsregError):
            raise StorageError(f"checkout into {target} failed: {e}; nothing was left in it") from e
        raise


def _switch(
    reg: Registry,
    planned: CheckoutPlan,
    root_fd: int,
    progress: ProgressHook,
    checked: dict[str, StatKey],
    trust: Records,
    rows: _Found,
) -> None:
    """A folder holding a revision (or an interrupted checkout): remove what the target does
    not have, then place each file that is not already what the link type makes of it
    (``checked``: each object's stat when it was re-hashed or found trusted)."""
    target, link, todo = planned.target, planned.link, planned.place
    files = os.fspath(reg.store.files)
    root = os.fspath(target)
    put = putter(link)

    def work(lo: int, hi: int) -> tuple[int, list[tuple[str, str]], _Rows]:
        linked: list[tuple[str, str, StatKey | None, StatKey | None]] = []
        with Dirs(root, root_fd) as dirs:
            try:
                for rel, blob in todo[lo:hi]:
                    fd, name = _at(dirs, rel)
                    src = _object_path(files, blob)
                    if not same(fd, name, src, link, blob):
                        place(put, src, fd, name)
                        if link == "hardlink":
                            linked.append((blob, src, checked.get(blob), trust.get(blob)))
            except OSError as e:
                if (said := _cross_device(e, link)) is not None:
                    raise said from e
                raise
        return hi - lo, [], _after_links(reg, linked) if linked else []

    try:
        with Dirs(root, root_fd) as dirs:
            clean_leftovers(dirs, planned.leftovers_in)
            for rel in planned.remove:
                unlink(dirs, rel)
            for d in planned.dirs:
                dirs.fd(d, create=True)
        _in_pool(work, len(todo), progress, "checking out", rows)
        with Dirs(root, root_fd) as dirs:
            prune(dirs, planned.remove)
        _finish(planned)
    except OSError as e:
        if isinstance(e, DsregError):
            raise  # already said (a link inside the folder, a corrupt object, a worker's error)
        # The journal stays: the folder may hold files of both revisions until a checkout of
        # any revision runs again and finishes.
        raise StorageError(
            f"checkout into {target} failed: {e}; it holds part of the switch to "
            f"{short(planned.revision)} (recorded in {JOURNAL}): run 'dsreg checkout' into it "
            "again, of any revision, to finish"
        ) from e


def _clear_own_temps(root_fd: int) -> None:
    """Remove what a checkout killed while it wrote its pin, journal or ``labels.csv``
    atomically left in the folder's root (``is_own_temp``): one listing of the root."""
    for name in os.listdir(root_fd):
        if is_own_temp(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=root_fd)


def _finish(planned: CheckoutPlan) -> None:
    """``labels.csv`` and the pin, last: the folder now holds what the pin says."""
    if planned.labels_csv is not None:
        write_atomic(planned.target / LABELS_CSV, planned.labels_csv.chunks())
    write_atomic(planned.target / PIN, planned.pin)


def _at(dirs: Dirs, rel: str) -> tuple[int, str]:
    at = dirs.at(rel, create=True)
    assert at is not None  # created when absent
    return at


def _cross_device(e: OSError, link: str) -> StorageError | None:
    """A hard link across file systems, said with the way out (``None`` for other errors)."""
    if e.errno == errno.EXDEV and link == "hardlink" and not isinstance(e, DsregError):
        return StorageError(
            "cannot hard-link across file systems (the registry and the checkout folder are "
            "on different ones); use --link reflink, copy or symlink"
        )
    return None


def _verify_and_place(
    reg: Registry,
    planned: CheckoutPlan,
    root_fd: int,
    progress: ProgressHook,
    trust: Records,
    rows: _Found,
    refetch: Refetch | None,
) -> None:
    """Re-hash each object (unless a link is made of one whose trust record matches its stat)
    and link or copy it to its name in one pass, in workers; objects the store lacks (and,
    with ``refetch``, those found corrupt) are fetched (verified) afterwards, re-hashed, and
    placed."""
    link = planned.link
    files = os.fspath(reg.store.files)
    root = os.fspath(planned.target)
    clone = Cloner() if link == "reflink" else None
    put = putter(link)
    # Each object's first file, then the other files of the objects that several files hold
    # (a dataset's duplicates): those are linked after every first one was re-hashed (or found
    # trusted) and linked, trusting the stat each had after that, so none is re-hashed twice.
    firsts: list[tuple[str, str]] = []
    repeats: list[tuple[str, str]] = []
    seen: set[str] = set()
    for rel, blob in planned.place:
        (repeats if blob in seen else firsts).append((rel, blob))
        seen.add(blob)
    todo: _Todo = firsts

    def one(
        src: str, blob: str, fd: int, name: str, rec: StatKey | None
    ) -> tuple[str | None, StatKey | None]:
        """The digest the object's bytes have (``blob`` when its trust record ``rec`` vouches
        for it) or None if it is absent, and its stat now (None when it has no record to get)."""
        if link in ("copy", "reflink"):
            got, st = copy_checked(src, blob, fd, name, clone)
            return got, (key_of(st) if st is not None else None)
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
            put(src, fd, name)
        except FileExistsError:  # appeared meanwhile: replaced, as in a switch
            place(put, src, fd, name)
        return got, before

    def work(lo: int, hi: int) -> tuple[int, list[tuple[str, str]], _Rows]:
        absent = []
        found: _Rows = []
        linked: list[tuple[str, str, StatKey | None, StatKey | None]] = []
        clock = reg.state.clock_ns()  # before any stat of the chunk
        with Dirs(root, root_fd) as dirs:
            try:
                for rel, blob in todo[lo:hi]:
                    fd, name = _at(dirs, rel)
                    src = _object_path(files, blob)
                    rec = trust.get(blob)
                    got, st = one(src, blob, fd, name, rec)
                    if got is None:
                        absent.append((rel, blob))
                    elif got != blob:
                        if refetch is None:
                            raise _corrupt(reg, blob, rel)
                        reg.store.mark_corrupt(blob)  # nothing was placed: fetched again below
                        absent.append((rel, blob))
                    elif link == "hardlink":  # the link changed its ctime: stat'ed again
                        linked.append((blob, src, st, rec))
                    else:  # a copy or a symbolic link leaves the object as it was
                        found.append(_row(blob, st, clock, rec))
            except OSError as e:
                if (said := _cross_device(e, link)) is not None:
                    raise said from e
                raise
        return hi - lo, absent, found + (_after_links(reg, linked) if linked else [])

    total = len(planned.place)
    # Each object comes once in this pass: its trust record is written as its chunk arrives,
    # while the workers link the rest.
    recorder = Recorder(reg)
    rows.sink = recorder.put
    try:
        deferred = _in_pool(work, len(todo), _offset(progress, 0, total), "checking out", rows)
    finally:
        rows.sink = None
        recorder.close()
    if repeats and link in _TRUSTING:
        # What this checkout found good, as each object's stat is now: its stat after its
        # links, or the stat it was found trusted or re-hashed with (a symbolic link).
        trust = trust.seeing(rows.good())
    if repeats:
        todo = repeats
        progress_at = _offset(progress, len(firsts), total)
        deferred += _in_pool(work, len(todo), progress_at, "checking out", rows)
    if deferred:
        # Fetched just now and re-hashed below; placed (and so linked) after: no record.
        _verify_objects(reg, deferred, progress, Records(), _Found(), refetch)
        with Dirs(root, root_fd) as dirs:
            try:
                for rel, blob in deferred:
                    fd, name = _at(dirs, rel)
                    place(put, _object_path(files, blob), fd, name)
            except OSError as e:
                if (said := _cross_device(e, link)) is not None:
                    raise said from e
                raise


def _in_pool(
    work: Callable[[int, int], tuple[int, list[T], _Rows]],
    n: int,
    progress: ProgressHook,
    task: str,
    rows: _Found,
) -> list[T]:
    """``work(lo, hi)`` for each chunk of ``n`` items: in worker processes when there are many
    (reading and linking small files is kernel work that threads barely overlap), else in
    threads; queued chunks are dropped on the first failure. Each chunk answers how many items
    it did, a list of leftovers (objects absent from the store), which it returns them all,
    and the stats of the objects it re-hashed or linked, which go to ``rows``."""
    leftovers: list[T] = []
    done = 0
    with contextlib.closing(map_chunks(work, n, chunk=_CHUNK, threads=_JOBS)) as results:
        for _lo, (k, rest, found) in results:
            leftovers.extend(rest)
            rows.add(found)
            done += k
            progress(task, done, n)
    return leftovers


def _offset(progress: ProgressHook, done: int, total: int) -> ProgressHook:
    """``progress`` for a part of a task that starts after ``done`` of its ``total`` items."""
    if not done and progress is no_progress:
        return progress

    def at(task: str, k: int, _n: int) -> None:
        progress(task, done + k, total)

    return at


def _object_path(files: str, blob: str) -> str:
    """Where object ``blob`` lives under the store's ``files/`` (a string: cheaper per file)."""
    return f"{files}/{object_relpath(blob)}"


def _corrupt(reg: Registry, blob: str, rel: str) -> CorruptObjectError:
    """The refusal of a corrupt object, which is marked on the way (``mark_corrupt``), so that
    adding its data again replaces it."""
    reg.store.mark_corrupt(blob)
    return CorruptObjectError(
        f"object {short(blob)} for {rel} is corrupt; it was not checked out: add its data "
        "again or run 'dsreg pull' to repair it ('dsreg verify' lists every damaged object)",
        digest=blob,
    )


def _verify_objects(
    reg: Registry,
    todo: _Todo,
    progress: ProgressHook,
    trust: Records,
    rows: _Found,
    refetch: Refetch | None = None,
) -> dict[str, StatKey]:
    """Re-hash each distinct object ``todo`` needs, but those whose trust record matches their
    stat; fetch absent ones (verified: through ``refetch``, which also takes the corrupt ones,
    else from the default remote) or fail clearly; refuse a corrupt one, naming a file that
    would have held it. Returns each object's stat when it was re-hashed or found trusted (the
    re-hashed ones also go to ``rows``)."""
    first: dict[str, str] = {}
    for rel, blob in todo:
        if blob not in first:
            first[blob] = rel
    files = os.fspath(reg.store.files)
    checked = _Found()
    repair = refetch is not None
    absent = _hash_objects(reg, files, list(first), first, progress, trust, checked, repair)
    if absent:
        if refetch is not None:
            refetch(absent, progress)
        else:
            from dsreg.remote.transfer import fetch_missing

            fetch_missing(reg, absent, progress=progress)
        # Fetched objects were verified on arrival; a second look costs little and keeps the
        # rule simple: nothing is linked that was not hashed here.
        still = _hash_objects(reg, files, absent, first, no_progress, Records(), checked, False)
        if still:
            raise ObjectNotFoundError(
                f"object {short(still[0])} for {first[still[0]]} is missing after it was "
                "fetched; it was not checked out: run 'dsreg verify', then 'dsreg pull' or "
                "re-add",
                digest=still[0],
            )
    rows.stats.update(checked.stats)
    return {blob: seen[0] for blob, seen in checked.stats.items()}


def _hash_objects(
    reg: Registry,
    files: str,
    blobs: list[str],
    first: dict[str, str],
    progress: ProgressHook,
    trust: Records,
    checked: _Found,
    repairable: bool,
) -> list[str]:
    """Re-hash objects (in workers) but the trusted ones whose stat matches; return the absent
    ones, and the corrupt ones (marked) if ``repairable``, else raise on a corrupt one; each
    one's stat (taken before hashing) goes to ``checked``."""

    def work(lo: int, hi: int) -> tuple[int, list[str], _Rows]:
        absent = []
        found: _Rows = []
        clock = reg.state.clock_ns()  # before any stat of the chunk
        for blob in blobs[lo:hi]:
            path = _object_path(files, blob)
            try:
                before = key_of(os.stat(path))
                rec = trust.get(blob)
                got = blob if vouches(rec, before) else hash_path(path)
            except FileNotFoundError:
                absent.append(blob)
                continue
            if got != blob:
                if not repairable:
                    raise _corrupt(reg, blob, first[blob])
                reg.store.mark_corrupt(blob)
                absent.append(blob)
                continue
            found.append(_row(blob, before, clock, rec))
        return hi - lo, absent, found

    try:
        return _in_pool(work, len(blobs), progress, "verifying", checked)
    except DsregError:
        raise  # an OSError too (errors.py), and already said
    except OSError as e:
        raise StorageError(f"cannot read objects in {files}: {e}") from e
