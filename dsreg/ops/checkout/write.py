"""``dsreg checkout``, second half: the folder written as a plan says (``write_folder``).

In order: what a killed checkout's atomic writes left in the folder's root is removed; the
journal is written (``journal.journaled``); an empty folder is filled in one pass that checks
each object as it places it (``_fresh``; hard and symbolic links in ``links.LinkPass``'s tight
loop), or a folder holding a revision is switched
(``_switch``: stale files removed, the others placed); ``labels.csv`` and the pin are written
last (``_finish``); the journal is removed. Every file operation goes through folder
descriptors that never follow a link inside the folder (``fs``); each object is checked before
it is placed (``objects``), and what the passes saw of the objects they re-hashed or linked is
gathered for their trust records.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from dsreg._util.fs import write_atomic
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, StorageError
from dsreg.objects.digest import short
from dsreg.ops.checkout.folder import LABELS_CSV, PIN, is_own_temp
from dsreg.ops.checkout.fs import (
    Dirs,
    clean_leftovers,
    empty_folder,
    explain_cross_device,
    open_folder,
    place,
    prune,
    putter,
    same,
    unlink,
)
from dsreg.ops.checkout.journal import JOURNAL, journaled
from dsreg.ops.checkout.links import LinkPass
from dsreg.ops.checkout.objects import (
    TRUSTING_LINKS,
    CheckingPutter,
    Chunk,
    Linked,
    ObjectStats,
    Refetch,
    Vetted,
    check_objects,
    corrupt_object,
    in_pool,
    object_path,
    recording,
    see_after_links,
)
from dsreg.ops.checkout.plan import CheckoutPlan, LinkType, Placement
from dsreg.registry.folder import Registry
from dsreg.registry.trust import Records, StatKey

__all__ = ["write_folder"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """What the passes of one ``write_folder`` share beside the plan."""

    reg: Registry
    files: str  # the store's ``files/`` folder, where the objects are
    files_fd: int  # its descriptor
    root: str  # the checkout folder
    root_fd: int  # its descriptor
    trust: Records  # the trust records of the objects to place
    stats: ObjectStats  # what the passes saw of the objects they re-hashed or linked
    progress: ProgressHook
    refetch: Refetch | None

    def dirs(self) -> Dirs:
        """Descriptors of folders below the checkout's root, for one thread or chunk."""
        return Dirs(self.root, self.root_fd)


def write_folder(
    reg: Registry,
    planned: CheckoutPlan,
    vetted: Vetted,
    *,
    progress: ProgressHook,
    refetch: Refetch | None,
) -> None:
    """Write ``planned.target`` as the plan says, with the objects as ``vet_objects`` found
    them; what the passes see of the objects they re-hash or link goes to ``vetted.stats``.
    The journal is written before the folder is touched and removed after the pin."""
    files = os.fspath(reg.store.files)
    with open_folder(planned.target) as root_fd, open_folder(files) as files_fd:
        _clear_own_temps(root_fd)
        run = _Run(
            reg=reg,
            files=files,
            files_fd=files_fd,
            root=os.fspath(planned.target),
            root_fd=root_fd,
            trust=vetted.trust,
            stats=vetted.stats,
            progress=progress,
            refetch=refetch,
        )
        with journaled(planned.target, planned.journal, recovering=planned.recovering):
            if planned.fresh:
                _fresh(planned, run)
            else:
                _switch(planned, run, checked=vetted.stats.good())


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


# -- an empty folder ----------------------------------------------------------------------------
def _fresh(planned: CheckoutPlan, run: _Run) -> None:
    """An empty folder: each object is checked and placed straight at its name (a link appears
    whole; a copy is written under its name, so a failure removes everything)."""
    try:
        _place_all(planned, run)
        _finish(planned)
    except BaseException as e:
        # The folder was empty: empty it again (the journal last), so a re-run starts afresh.
        with contextlib.suppress(OSError):
            empty_folder(run.root_fd, last=JOURNAL)
        if isinstance(e, OSError) and not isinstance(e, DsregError):
            raise StorageError(
                f"checkout into {planned.target} failed: {e}; nothing was left in it"
            ) from e
        raise


def _place_all(planned: CheckoutPlan, run: _Run) -> None:
    """Check each object and link or copy it to its name in one pass, in workers, which make
    the folders as they first place a file in each (side by side with the others' links,
    rather than one after the other here first).

    Each object's first file comes first, then the other files of the objects that several
    files hold (a dataset's duplicates): those are placed after every first one was checked
    and placed, trusting the stat each had after that, so none is re-hashed twice. Objects the
    store lacks (and, with ``refetch``, those found corrupt) are fetched (verified) last."""
    link = planned.link
    split = _firsts_and_repeats(planned.place)
    total = len(planned.place)
    # Each object comes once in this pass: its trust record is written as its chunk arrives,
    # while the workers place the rest.
    with recording(run.reg, run.stats):
        left = _checked_pass(run, link, split.firsts, run.trust, _offset(run.progress, 0, total))
    if split.repeats:
        trust = run.trust
        if link in TRUSTING_LINKS:
            # What this checkout found good, as each object's stat is now: its stat after its
            # links, or the stat it was found trusted or re-hashed with (a symbolic link).
            trust = trust.seeing(run.stats.good())
        done = len(split.firsts)
        left += _checked_pass(run, link, split.repeats, trust, _offset(run.progress, done, total))
    if left:
        _place_fetched(run, link, left)


class _Split(NamedTuple):
    """The placements of each object's first file, and those of its other files."""

    firsts: list[Placement]
    repeats: list[Placement]


def _firsts_and_repeats(placements: Sequence[Placement]) -> _Split:
    """``placements`` split into each object's first file and its other files, in order."""
    split = _Split([], [])
    seen: set[str] = set()
    for p in placements:
        (split.repeats if p.blob in seen else split.firsts).append(p)
        seen.add(p.blob)
    return split


def _checked_pass(
    run: _Run, link: LinkType, todo: Sequence[Placement], trust: Records, progress: ProgressHook
) -> list[Placement]:
    """Check and place each of ``todo``, in workers: links through ``LinkPass``, copies through
    ``CheckingPutter``. Returns those whose objects the store lacks or, with ``refetch``, holds
    corrupt (marked): nothing was placed for them."""
    reg, files = run.reg, run.files
    if link in TRUSTING_LINKS:
        links = LinkPass(
            reg=reg,
            files=files,
            files_fd=run.files_fd,
            link=link,
            trust=trust,
            refetch=run.refetch is not None,
        )

        def link_chunk(lo: int, hi: int) -> Chunk[Placement]:
            with run.dirs() as dirs:
                return links.chunk(dirs, todo[lo:hi])

        return in_pool(link_chunk, len(todo), progress, "checking out", run.stats)
    put = CheckingPutter(link)

    def copy_chunk(lo: int, hi: int) -> Chunk[Placement]:
        chunk: Chunk[Placement] = Chunk(hi - lo)
        clock = reg.state.clock_ns()  # before any stat of the chunk
        with run.dirs() as dirs:
            for rel, blob in todo[lo:hi]:
                fd, name = dirs.entry(rel)
                rec = trust.get(blob)
                got, stat = put(object_path(files, blob), blob, fd, name, rec)
                if got is None:
                    chunk.left.append(Placement(rel, blob))
                elif got != blob:
                    if run.refetch is None:
                        raise corrupt_object(reg, blob, rel)
                    reg.store.mark_corrupt(blob)  # nothing was placed: fetched again later
                    chunk.left.append(Placement(rel, blob))
                else:  # a copy leaves the object as it was
                    chunk.seen.saw(blob, stat, clock, rec)
        return chunk

    return in_pool(copy_chunk, len(todo), progress, "checking out", run.stats)


def _place_fetched(run: _Run, link: LinkType, left: list[Placement]) -> None:
    """Fetch (verified) the objects the first passes could not place, re-hash them and place
    them. They were fetched just now and are linked after the re-hash: no trust record."""
    check_objects(run.reg, left, trust=Records(), progress=run.progress, refetch=run.refetch)
    put = putter(link)
    with run.dirs() as dirs, explain_cross_device(link):
        for rel, blob in left:
            fd, name = dirs.entry(rel)
            place(put, object_path(run.files, blob), fd, name)


def _offset(progress: ProgressHook, done: int, total: int) -> ProgressHook:
    """``progress`` for a part of a task that starts after ``done`` of its ``total`` items."""
    if not done and progress is no_progress:
        return progress

    def at_offset(task: str, k: int, _n: int) -> None:
        progress(task, done + k, total)

    return at_offset


# -- a folder holding a revision ----------------------------------------------------------------
def _switch(planned: CheckoutPlan, run: _Run, checked: dict[str, StatKey]) -> None:
    """A folder holding a revision (or an interrupted checkout): remove what the target does
    not have, then place each file that is not already what the link type makes of it
    (``checked``: each object's stat when it was re-hashed or found trusted)."""
    try:
        with run.dirs() as dirs:
            clean_leftovers(dirs, planned.leftovers_in)
            for rel in planned.remove:
                unlink(dirs, rel)
            for d in planned.dirs:
                dirs.fd(d, create=True)
        _replacing_pass(run, planned.link, planned.place, checked)
        with run.dirs() as dirs:
            prune(dirs, planned.remove)
        _finish(planned)
    except OSError as e:
        if isinstance(e, DsregError):
            raise  # already said (a link inside the folder, a corrupt object, a worker's error)
        # The journal stays: the folder may hold files of both revisions until a checkout of
        # any revision runs again and finishes.
        raise StorageError(
            f"checkout into {planned.target} failed: {e}; it holds part of the switch to "
            f"{short(planned.revision)} (recorded in {JOURNAL}): run 'dsreg checkout' into it "
            "again, of any revision, to finish"
        ) from e


def _replacing_pass(
    run: _Run, link: LinkType, todo: Sequence[Placement], checked: dict[str, StatKey]
) -> None:
    """Place each of ``todo`` (under a temporary name, then renamed over its own) unless it
    already is what the link type makes of its object, in workers; the objects hard-linked
    are stat'ed again after."""
    reg, files = run.reg, run.files
    put = putter(link)
    hardlink = link == "hardlink"

    def replace_chunk(lo: int, hi: int) -> Chunk[Placement]:
        chunk: Chunk[Placement] = Chunk(hi - lo)
        linked: list[Linked] = []
        with run.dirs() as dirs, explain_cross_device(link):
            for rel, blob in todo[lo:hi]:
                fd, name = dirs.entry(rel)
                src = object_path(files, blob)
                if not same(fd, name, src, link, blob):
                    place(put, src, fd, name)
                    if hardlink:
                        linked.append(Linked(blob, src, checked.get(blob), run.trust.get(blob)))
        if linked:
            see_after_links(reg, linked, chunk.seen)
        return chunk

    in_pool(replace_chunk, len(todo), run.progress, "checking out", run.stats)
