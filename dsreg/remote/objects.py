"""A remote's objects, both ways, each hashed on the way: which the remote holds (``present``),
objects sent to it (``send``, what a push does) and objects received from it (``receive``, what
every fetch does).

Existence queries go through dvc-data's ``HashFileDB.oids_exist`` (which lists or probes,
whichever is cheaper for the remote's size); a folder's shards are listed directly. Objects move
with the filesystem's ``put_file`` / ``get_file``, many at once on an asynchronous file system
(``store.download``). A folder remote (a disk or NAS mount) is laid out exactly as a registry, so
it takes objects the way a registry does: staged, made durable with one ``syncfs`` per wave,
moved into place without replacing any (dvc-objects copies local-to-local one file at a time,
which would make the common NAS case the slowest). Both directions put objects into a store the
same way (``waves.put_objects``): a few one by one, many in staged waves.

Every byte sent is hashed on the way out (a damaged local object is never published) and every
byte received is hashed before it is handed on, so a corrupt or truncated remote object is
reported by digest and never served.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dsreg._util.fs import sync_filesystem
from dsreg._util.parallel import default_jobs
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, DsregError, RemoteError
from dsreg.objects.batch import STAGE_PREFIX, ObjectBatch
from dsreg.objects.digest import ALGORITHM, PREFIX, hex_of, layout, short
from dsreg.objects.hashing import hash_bytes, hash_path
from dsreg.objects.store import ObjectStore
from dsreg.remote.store import LOCAL_JOBS, STAGED_TAG, STAGING_AGE, RemoteStore, batched, download
from dsreg.remote.waves import FEW, WHOLE, parallel, put_objects, read_whole

__all__ = ["MISSING", "Arrival", "Received", "Sink", "present", "receive", "send", "tidy"]

# Objects downloaded in one batch from an asynchronous file system (http, s3), then hashed.
_BATCH = 1024
# An ``Arrival``'s problem when the remote lacks the object.
MISSING = "missing"


class Sink(Protocol):
    """Where verified objects go: an ``ObjectBatch`` (many) or an adapter over a store."""

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str: ...

    def put_file(self, path: str, *, size_hint: int = 0) -> str: ...


@dataclass(frozen=True, slots=True)
class Arrival:
    """One object received: ``problem`` is ``None`` if it was intact and handed to the sink,
    ``MISSING`` if the remote lacks it, else the digest its bytes hash to (or what went wrong
    while it was read); ``size`` is the bytes handed on."""

    digest: str
    problem: str | None = None
    size: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """What one or more receives brought: counts of the intact objects, and the digests the
    remote lacked or held corrupt (each with what its bytes hash to)."""

    fetched: int = 0
    bytes: int = 0
    missing: tuple[str, ...] = ()
    corrupt: tuple[Arrival, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, arrivals: Sequence[Arrival]) -> Received:
        intact = [a for a in arrivals if a.problem is None]
        return cls(
            fetched=len(intact),
            bytes=sum(a.size for a in intact),
            missing=tuple(sorted(a.digest for a in arrivals if a.problem == MISSING)),
            corrupt=tuple(
                sorted(
                    (a for a in arrivals if a.problem not in (None, MISSING)),
                    key=lambda a: a.digest,
                )
            ),
        )

    def __add__(self, other: Received) -> Received:
        return Received(
            fetched=self.fetched + other.fetched,
            bytes=self.bytes + other.bytes,
            missing=self.missing + other.missing,
            corrupt=self.corrupt + other.corrupt,
        )


# -- which objects a remote holds ------------------------------------------------------------
def present(
    rs: RemoteStore, digests: Iterable[str], *, jobs: int, progress: ProgressHook = no_progress
) -> set[str]:
    """The digests among ``digests`` whose objects the remote holds (existence only)."""
    wanted = sorted(set(digests))
    if not wanted:
        return set()
    if rs.local:
        return _present_in_folder(rs.objects_path(), wanted)
    # Heavy (DVC's object database): imported only by a push that asks a remote.
    from dvc_data.hashfile.db import HashFileDB

    odb = HashFileDB(rs.fs, rs.objects_path(), hash_name=ALGORITHM)

    def hook(phase: str, total: int | None, done: int = 0) -> None:
        if total:
            progress("checking remote", done, total)

    try:
        found = odb.oids_exist(  # type: ignore[no-untyped-call]
            [hex_of(d) for d in wanted], jobs=jobs, progress=hook
        )
    except Exception as e:
        raise rs.error("list the objects of", e) from None
    return {PREFIX + h for h in found}


def _present_in_folder(objects: str, wanted: list[str]) -> set[str]:
    """One listing per shard folder that holds a wanted digest."""
    by_shard: dict[str, list[str]] = {}
    for d in wanted:
        by_shard.setdefault(layout(hex_of(d))[0], []).append(d)
    out: set[str] = set()
    for shard, ds in by_shard.items():
        try:
            names = set(os.listdir(f"{objects}/{shard}"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            raise RemoteError(f"cannot list {objects}/{shard}: {e.strerror}") from None
        out.update(d for d in ds if layout(hex_of(d))[1] in names)
    return out


# -- sending (push) --------------------------------------------------------------------------
def send(
    rs: RemoteStore,
    source: ObjectStore,
    digests: Sequence[str],
    *,
    jobs: int,
    progress: ProgressHook = no_progress,
) -> int:
    """Upload the objects ``digests`` of ``source`` (a registry's store); return the bytes
    sent. Stops at the first failure (after the transfers in flight) and raises it."""
    if not digests:
        return 0
    if rs.local:
        return _send_to_folder(rs, source, digests, jobs=jobs, progress=progress)

    def upload(digest: str) -> int:
        src = source.path(digest)
        try:
            got = hash_path(os.fspath(src))
            if got != digest:
                raise _local_corrupt(digest, got)
            rs.fs.put_file(os.fspath(src), rs.object_path(digest))
            return os.stat(src).st_size
        except DsregError:
            raise
        except FileNotFoundError as e:
            if e.filename is not None and os.fspath(e.filename) == os.fspath(src):
                raise rs.error(f"send object {short(digest)} (missing locally) to", e) from None
            raise rs.error(f"write object {short(digest)} to", e) from None
        except Exception as e:
            raise rs.error(f"write object {short(digest)} to", e) from None

    return sum(parallel(upload, digests, jobs=jobs, task="pushing", progress=progress))


def _send_to_folder(
    rs: RemoteStore,
    source: ObjectStore,
    digests: Sequence[str],
    *,
    jobs: int,
    progress: ProgressHook,
) -> int:
    """A folder remote is laid out as a registry is, so it takes objects the way a registry
    does (``waves.put_objects``): staged in its ``tmp/`` (hashed on the way: a damaged local
    object is never published), made durable with one ``syncfs`` per wave, then moved into
    ``files/`` (a whole shard folder where the remote has none yet) without replacing any."""
    target = ObjectStore(Path(rs.root))
    _drop_stale_staging(Path(rs.tmp_path()))

    def one_by_one(part: Sequence[str]) -> int:
        sent = sum(_put_verified(target, digest, source.path(digest)) for digest in part)
        progress("pushing", len(part), len(digests))
        return sent

    def staged(batch: ObjectBatch, wave: Sequence[str], done: int) -> int:
        # Read, hashed and staged in worker processes for a large wave (forkpool), each
        # object only if it hashes to its name.
        def hook(n: int) -> None:
            progress("pushing", done + n, len(digests))

        got, size = batch.put_files(
            [os.fspath(source.path(d)) for d in wave],
            [0] * len(wave),
            hook,
            expect=wave,
            # Processes beyond the CPUs only contend for them (threads default to 2/CPU).
            jobs=min(jobs, default_jobs()),
        )
        for digest, g in zip(wave, got, strict=True):
            if g != digest:
                raise _local_corrupt(digest, g)
        return size

    try:
        sent = sum(put_objects(target, digests, one_by_one=one_by_one, staged=staged))
        if len(digests) > FEW:
            sync_filesystem(target.files)  # the names are durable before any tag names them
    except DsregError as e:
        if isinstance(e, CorruptObjectError):
            raise
        raise RemoteError(f"cannot write to remote {rs.label}: {e}") from None
    except OSError as e:
        raise rs.error("write to", e) from None
    finally:
        with contextlib.suppress(OSError):
            target.tmp.rmdir()  # only if no other push is staging there
    return sent


def _put_verified(store: ObjectStore, digest: str, src: Path) -> int:
    """One object into a registry-shaped folder, fsynced on its own (a few objects do not pay
    for a staging batch); its bytes are checked against ``digest`` first."""
    data = read_whole(os.fspath(src), WHOLE)
    got = hash_path(os.fspath(src)) if data is None else hash_bytes(data)
    if got != digest:
        raise _local_corrupt(digest, got)
    if data is None:
        store.put_file(src, known=None)
        return os.stat(src).st_size
    store.put_bytes(data)
    return len(data)


def _local_corrupt(digest: str, got: str) -> CorruptObjectError:
    return CorruptObjectError(
        f"local object {short(digest)} is corrupt (its bytes hash to {short(got)}); it was not "
        "pushed: run 'dsreg verify', then pull it from another remote or add the data again"
    )


def tidy(rs: RemoteStore) -> None:
    """Drop what killed pushes left in a folder remote's ``tmp/`` (``STAGING_AGE`` old and
    more): one listing, so every push does it, a push with nothing to send included."""
    if rs.local:
        _drop_stale_staging(Path(rs.tmp_path()))


def _drop_stale_staging(tmp: Path) -> None:
    """Remove what killed pushes left in a folder remote's ``tmp/`` more than ``STAGING_AGE``
    ago: staging folders of objects and staged tags (a push still running touches its staging
    far more often)."""
    cutoff = time.time() - STAGING_AGE
    try:
        with os.scandir(tmp) as listing:
            entries = list(listing)
    except OSError:
        return
    for e in entries:
        with contextlib.suppress(OSError):
            if e.stat(follow_symlinks=False).st_mtime >= cutoff:
                continue
            if e.name.startswith(STAGE_PREFIX):
                shutil.rmtree(e.path, ignore_errors=True)
            elif e.name.startswith(STAGED_TAG) and e.is_file(follow_symlinks=False):
                os.unlink(e.path)


# -- receiving (every fetch) -----------------------------------------------------------------
def receive(
    rs: RemoteStore,
    digests: Sequence[str],
    sink: Sink,
    scratch: Path,
    *,
    jobs: int,
    progress: ProgressHook = no_progress,
) -> Received:
    """Read objects from the remote (a folder's in place, others downloaded into ``scratch``),
    hash each, and hand the intact ones to ``sink`` (a staging batch or a store). Missing and
    corrupt objects are reported, never handed on."""
    if not digests:
        return Received()
    if rs.local or not batched(rs.fs):
        arrivals = parallel(
            lambda digest: _arrive(rs, digest, None, sink, scratch),
            digests,
            jobs=jobs,
            task="fetching",
            progress=progress,
        )
        return Received.of(arrivals)
    arrivals = []
    for lo in range(0, len(digests), _BATCH):
        arrivals += _receive_batch(rs, digests, lo, sink, scratch, jobs=jobs, progress=progress)
    return Received.of(arrivals)


def _receive_batch(
    rs: RemoteStore,
    digests: Sequence[str],
    lo: int,
    sink: Sink,
    scratch: Path,
    *,
    jobs: int,
    progress: ProgressHook,
) -> list[Arrival]:
    """The ``_BATCH`` objects from ``digests[lo]`` on, downloaded in one event loop, then hashed
    and handed on by the CPUs' threads (whatever number downloads at once)."""
    part = digests[lo : lo + _BATCH]
    try:
        local = download(rs.fs, [rs.object_path(d) for d in part], scratch, jobs)
    except Exception as e:
        raise rs.error(f"read {len(part)} objects from", e) from None
    out = [Arrival(d, MISSING) for d, path in zip(part, local, strict=True) if path is None]
    downloaded = {d: path for d, path in zip(part, local, strict=True) if path is not None}

    def hook(task: str, n: int, total: int) -> None:
        progress(task, lo + n, len(digests))

    out += parallel(
        lambda digest: _arrive(rs, digest, downloaded[digest], sink, scratch),
        list(downloaded),
        jobs=min(jobs, LOCAL_JOBS),
        task="fetching",
        progress=hook,
    )
    return out


def _arrive(
    rs: RemoteStore, digest: str, downloaded: str | None, sink: Sink, scratch: Path
) -> Arrival:
    """One object: read in place (a folder remote), from its download, or downloaded now into
    ``scratch``; hashed, and handed to ``sink`` if intact. A download is removed after."""
    try:
        if rs.local:
            src = rs.object_path(digest)
        elif downloaded is not None:
            src = downloaded
        else:
            src = os.fspath(scratch / f"get-{secrets.token_hex(8)}")
            rs.fs.get_file(rs.object_path(digest), src)
        try:
            return _hand_over(digest, src, sink)
        finally:
            if not rs.local:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(src)
    except FileNotFoundError:
        return Arrival(digest, MISSING)
    except DsregError:
        raise
    except Exception as e:
        raise rs.error(f"read object {short(digest)} from", e) from None


def _hand_over(digest: str, src: str, sink: Sink) -> Arrival:
    """The file ``src``, hashed, to ``sink`` if it is the object ``digest``."""
    data = read_whole(src, WHOLE)
    if data is not None:
        # Hashed once, staged only if it is what was asked for.
        got = sink.put_bytes(data, expect=digest)
        return Arrival(digest, None if got == digest else got, len(data))
    got = hash_path(src)
    if got != digest:
        return Arrival(digest, got)
    size = os.stat(src).st_size
    # Staging re-reads and re-hashes: bytes that changed between the two reads are never
    # staged under the digest asked for.
    if sink.put_file(src, size_hint=size) != digest:
        return Arrival(digest, "changed while read")
    return Arrival(digest, None, size)
