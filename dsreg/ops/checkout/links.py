"""Hard and symbolic links into an empty folder: a stat and a link a file, in a tight loop.

A link of an object whose trust record vouches for its stat (``trust.vouches``) needs nothing
else from the object: no read, no temporary name (the folder was empty, so each name is new).
So each file of a chunk costs one ``stat`` of its object, relative to a descriptor of the
store's ``files/`` folder (a short path walk), and one ``linkat`` or ``symlinkat`` relative to
its folder's descriptor; a hard link's object is stat'ed once more after the chunk's links,
for its new trust record (the link changed its ctime and link count). Folders are looked up
once per run of files in the same folder.

An object the loop cannot simply link goes the general way, one file at a time
(``objects.CheckingPutter``): one whose record does not vouch for its stat (re-hashed, and
refused if corrupt), or a name that appeared meanwhile (replaced, as in a switch). An absent
object is left for the caller to fetch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from dsreg.objects.digest import object_relpaths
from dsreg.ops.checkout.fs import Dirs, explain_cross_device
from dsreg.ops.checkout.objects import CheckingPutter, Chunk, Sightings, corrupt_object
from dsreg.ops.checkout.plan import Placement
from dsreg.registry.folder import Registry
from dsreg.registry.trust import Records, StatKey, same_file, vouches

__all__ = ["LinkPass"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkPass:
    """What every chunk of one linking pass shares: the registry, the store's ``files/`` folder
    (its path and a descriptor of it), the link type (``hardlink`` or ``symlink``), the trust
    records, and whether a corrupt object is left to be fetched again (``refetch``) rather than
    refused."""

    reg: Registry
    files: str
    files_fd: int
    link: str
    trust: Records
    refetch: bool

    def chunk(self, dirs: Dirs, todo: Sequence[Placement]) -> Chunk[Placement]:
        """Link each of ``todo`` to its name, below ``dirs``; returns what was left (absent
        objects, or corrupt ones with ``refetch``) and what the chunk saw of the objects."""
        chunk: Chunk[Placement] = Chunk(len(todo))
        blobs = [p.blob for p in todo]
        rels = object_relpaths(blobs)
        clock = self.reg.state.clock_ns()  # before any stat of the chunk
        hard = self.link == "hardlink"
        # What was placed: its object's path below ``files/``, digest, stat then and record.
        srcs: list[str] = []
        placed: list[str] = []
        befores: list[StatKey] = []
        recs: list[StatKey | None] = []
        # Looked up here, not at import: the tests that interrupt a checkout wrap os's calls.
        stat, link, symlink = os.stat, os.link, os.symlink
        files, files_fd, get = self.files, self.files_fd, self.trust.get
        folder: str | None = None
        fd = -1
        with explain_cross_device(self.link):
            for rel, blob, src in zip([p.path for p in todo], blobs, rels, strict=True):
                parent, _, name = rel.rpartition("/")
                if parent != folder:
                    fd, folder = dirs.entry(rel)[0], parent
                try:
                    st = stat(src, dir_fd=files_fd)
                except FileNotFoundError:
                    chunk.left.append(Placement(rel, blob))
                    continue
                before = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)
                rec = get(blob)
                linkable = vouches(rec, before)
                try:
                    if linkable and hard:
                        link(src, name, src_dir_fd=files_fd, dst_dir_fd=fd)
                    elif linkable:
                        symlink(f"{files}/{src}", name, dir_fd=fd)
                except FileExistsError:  # the name appeared meanwhile
                    linkable = False
                if not linkable:
                    checked = self._checked(chunk, Placement(rel, blob), fd, name, rec)
                    if checked is None:
                        continue
                    before = checked
                srcs.append(src)
                placed.append(blob)
                befores.append(before)
                recs.append(rec)
        if hard:
            self._after_links(srcs, placed, befores, recs, chunk.seen)
        else:  # a symbolic link leaves the object as it was
            chunk.seen.saw_all(placed, befores, clock, recs)
        return chunk

    def _checked(
        self, chunk: Chunk[Placement], p: Placement, fd: int, name: str, rec: StatKey | None
    ) -> StatKey | None:
        """Place ``p`` the general way (``CheckingPutter``: re-hashed unless its record vouches
        for it, replacing a name that appeared); its object's stat before it was read, or
        ``None`` where nothing was placed (the object absent, or corrupt and to be fetched
        again: left in ``chunk``; corrupt otherwise: refused)."""
        got, stat = CheckingPutter(self.link)(
            f"{self.files}/{object_relpaths([p.blob])[0]}", p.blob, fd, name, rec
        )
        if got is None or stat is None:
            if got is not None and got != p.blob:
                if not self.refetch:
                    raise corrupt_object(self.reg, p.blob, p.path)
                self.reg.store.mark_corrupt(p.blob)  # nothing was placed: fetched again later
            chunk.left.append(p)
            return None
        return stat

    def _after_links(
        self,
        srcs: list[str],
        blobs: list[str],
        befores: list[StatKey],
        recs: list[StatKey | None],
        seen: Sightings,
    ) -> None:
        """What the chunk's hard links left of each object (``blobs``, at ``srcs`` below
        ``files/``, found with ``befores``, recorded as ``recs``): its stat after them, taken
        after one reading of the clock, if nothing but links changed it since it was vouched
        for."""
        clock = self.reg.state.clock_ns()
        stat, files_fd = os.stat, self.files_fd
        afters: list[StatKey] = []
        for src in srcs:
            try:
                st = stat(src, dir_fd=files_fd)
            except OSError:
                afters.append((-1, -1, -1, -1, -1))  # gone: not the file it was
                continue
            afters.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink))
        if all(map(same_file, befores, afters)):
            seen.saw_all(blobs, afters, clock, recs)
            return
        for blob, before, after, rec in zip(blobs, befores, afters, recs, strict=True):
            if same_file(before, after):
                seen.saw(blob, after, clock, rec)
            else:
                seen.changed(blob)
