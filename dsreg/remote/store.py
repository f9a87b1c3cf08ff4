"""One remote as dvc-objects sees it: a filesystem holding ``files/blake3/ab/cdef…`` (dvc-data's
object layout with ``hash_name="blake3"``), ``refs/<dataset>/<tag>`` and ``logs/<dataset>.jsonl``.

Any URL a DVC remote accepts works: the filesystem comes from ``dvc.fs.get_cloud_fs`` (S3
through dvc-s3, GCS, Azure, SSH, HTTP (read), WebDAV, HDFS, or a folder with DVC options),
existence queries go through dvc-data's ``HashFileDB.oids_exist`` (which lists or probes,
whichever is cheaper for the remote's size), and objects move with the filesystem's ``put_file`` /
``get_file`` (many at once on an asynchronous file system: ``download.py``). A plain folder
path is reached through the ``os`` module alone (``filesystem.FolderFS``: the answers of DVC's
local file system without importing DVC and fsspec, some 60 ms of every command's start-up).
A folder remote (a disk or NAS mount) is laid out exactly as a registry, so it takes objects
the way a registry does: staged, made durable with one ``syncfs`` per wave, moved into place
without replacing any (dvc-objects copies local-to-local one file at a time, which would make
the common NAS case the slowest).

Every byte sent is hashed on the way out (a damaged local object is never published) and every
byte fetched is hashed before it is staged into the local store, so a corrupt or truncated
remote object is reported by digest and never served. Third-party errors become
``RemoteError`` here, once.
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
from typing import TYPE_CHECKING, Any, Protocol

from dsreg._util.fs import sync_filesystem, write_atomic
from dsreg._util.parallel import default_jobs
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import CorruptObjectError, DsregError, RemoteError
from dsreg.formats.names import check_name
from dsreg.objects.batch import STAGE_PREFIX, ObjectBatch
from dsreg.objects.digest import (
    ALGORITHM,
    PREFIX,
    format_digest,
    hex_of,
    layout,
    object_relpath,
    short,
)
from dsreg.objects.hashing import hash_bytes, hash_path
from dsreg.remote.download import batched, download, read_files
from dsreg.remote.filesystem import READ_ONLY, describe, open_filesystem
from dsreg.remote.waves import WHOLE, parallel, read_whole, staged_waves

if TYPE_CHECKING:
    from dsreg.objects.store import ObjectStore

__all__ = [
    "INDEX",
    "READ_ONLY",
    "FetchReport",
    "RemoteStore",
    "Sink",
    "describe",
    "listed_tags",
    "open_filesystem",
    "ref_value",
]

# Where a push lists the remote's tags for readers that cannot list folders (git's info/refs).
INDEX = ("info", "refs")
# Objects downloaded in one batch from an asynchronous file system (http, s3), then hashed.
_BATCH = 1024
# Downloads in flight at once from an http(s) remote by default.
_WEB_JOBS = 64
# Up to this many objects are written one by one (each fsynced), without a staging batch.
_FEW = 32
# A folder remote is bound by the local kernel's file creation, which more threads than about
# two per CPU only contend for (measured on 2 CPUs: 2-4 threads beat 8 and 16).
_LOCAL_JOBS = max(2, min(16, (os.cpu_count() or 1) * 2))
# Tag names an error lists before it says how many more there are.
_NAMED = 20
# Reads of fewer tag files than this are over in a blink and report no progress: a push or pull
# with nothing to do opens no progress bar.
_TAGS_SHOWN = 256


def ref_value(data: bytes) -> str | bytes:
    """A tag file's value: the digest it holds, or its bytes if it holds no digest (damaged)."""
    try:
        return format_digest(data.decode("ascii").strip())
    except (UnicodeDecodeError, DsregError):
        return data


def listed_tags(names: Sequence[tuple[str, str]]) -> str:
    """Tag names for an error message: the first ``_NAMED``, then how many more."""
    text = ", ".join(tag for _ds, tag in names[:_NAMED]) or "none"
    return text + (f", and {len(names) - _NAMED:,} more" if len(names) > _NAMED else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchReport:
    """What a fetch brought: counts, and the digests that were missing or corrupt remotely."""

    fetched: int = 0
    bytes: int = 0
    missing: tuple[str, ...] = field(default_factory=tuple)
    corrupt: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fetched": self.fetched,
            "bytes": self.bytes,
            "missing": list(self.missing),
            "corrupt": [{"digest": d, "got": g} for d, g in self.corrupt],
        }


class RemoteStore:
    """The objects, refs and logs at one remote URL."""

    __slots__ = ("fs", "local", "name", "read_only", "root", "url")

    def __init__(self, *, name: str, url: str, options: dict[str, Any]) -> None:
        self.name = name
        self.url = url
        self.fs, self.root = open_filesystem(url, options)
        protocol = getattr(self.fs, "protocol", None)
        self.local = protocol == "local"
        # A web server is read as a static one: no listing, no writes (docs/remotes.md).
        self.read_only = protocol in READ_ONLY

    def __repr__(self) -> str:
        return f"RemoteStore({self.name!r}, {self.url!r})"

    @property
    def label(self) -> str:
        return self.url if self.name == self.url else f"{self.name!r} ({self.url})"

    def _path(self, *parts: str) -> str:
        return str(self.fs.join(self.root, *parts))

    def _objects(self) -> str:
        return self._path("files", ALGORITHM)

    def object_path(self, digest: str) -> str:
        return self._path("files", *object_relpath(digest).split("/"))

    def error(self, action: str, e: BaseException) -> RemoteError:
        return RemoteError(
            f"cannot {action} remote {self.label}: {describe(e)}; check the URL, that it exists "
            "and that you may read and write there, and your credentials (environment or the "
            "cloud SDK's configuration)"
        )

    def default_jobs(self) -> int:
        if self.read_only:
            # Downloads from a web server wait on its latency, not on this machine: many in
            # flight, in one event loop (download.py).
            return _WEB_JOBS
        return _LOCAL_JOBS if self.local else int(getattr(self.fs, "jobs", _LOCAL_JOBS))

    # -- refs and logs (read here; remote/refs.py writes them) -------------------------------
    def ref_path(self, dataset: str, tag: str) -> str:
        return self._path("refs", dataset, tag)

    def log_path(self, dataset: str) -> str:
        return self._path("logs", f"{dataset}.jsonl")

    def index_path(self) -> str:
        return self._path(*INDEX)

    def tag_names(self, dataset: str | None = None) -> list[tuple[str, str]]:
        """The remote's tags (every one, or ``dataset``'s), sorted, without reading a tag file:
        one listing of ``refs/`` (``refs/<dataset>/`` for one dataset) or, on a remote that
        cannot list (a static web server), the index ``info/refs``."""
        if dataset is not None:
            check_name(dataset, what="dataset name")
        # The index is written sorted: sorting it again is one pass.
        return sorted(self._indexed(dataset) if self.read_only else self._listed(dataset))

    def read_tags(
        self,
        names: Sequence[tuple[str, str]],
        *,
        jobs: int | None = None,
        progress: ProgressHook = no_progress,
    ) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], bytes]]:
        """The values of the tags ``names``: ``(good, damaged)``, the tags holding a digest
        (``(dataset, tag) -> digest``) and those holding anything else (``-> their bytes``); a
        tag file that is gone is left out. The files are read ``jobs`` at a time (default: the
        remote's), in one event loop where the file system is asynchronous (http, s3), and
        ``progress("reading tags", done, total)`` hears of them (of ``_TAGS_SHOWN`` or more)."""
        paths = [self.ref_path(ds, tag) for ds, tag in names]
        if len(paths) < _TAGS_SHOWN:
            progress = no_progress
        try:
            contents = self._read_many(paths, jobs or self.default_jobs(), progress)
        except DsregError:
            raise
        except Exception as e:
            raise self.error("read the tags of", e) from None
        good: dict[tuple[str, str], str] = {}
        damaged: dict[tuple[str, str], bytes] = {}
        for key, data in zip(names, contents, strict=True):
            if data is not None:
                value = ref_value(data)
                if isinstance(value, str):
                    good[key] = value
                else:
                    damaged[key] = value
        return good, damaged

    def _read_many(self, paths: list[str], jobs: int, progress: ProgressHook) -> list[bytes | None]:
        """Each file's bytes, ``None`` for one that is absent."""
        task = "reading tags"
        if not batched(self.fs):

            def one(path: str) -> bytes | None:
                try:
                    return bytes(self.fs.cat_file(path))
                except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                    return None

            return parallel(one, paths, jobs=jobs, task=task, progress=progress)
        out: list[bytes | None] = []
        for lo in range(0, len(paths), _BATCH):
            out += read_files(self.fs, paths[lo : lo + _BATCH], jobs)
            progress(task, len(out), len(paths))
        return out

    def scan_refs(
        self, dataset: str | None = None, *, progress: ProgressHook = no_progress
    ) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], bytes]]:
        """Every tag on the remote (or ``dataset``'s): ``tag_names``, then ``read_tags``. A
        damaged tag is reported apart, never fatal to the others."""
        return self.read_tags(self.tag_names(dataset), progress=progress)

    def refs(self) -> dict[tuple[str, str], str]:
        """Every ``(dataset, tag) -> digest`` on the remote; a damaged tag is a ``RemoteError``
        (``scan_refs`` reports it apart instead)."""
        good, damaged = self.scan_refs()
        if damaged:
            (dataset, tag), data = min(damaged.items())
            raise self.damaged_ref(dataset, tag, data)
        return good

    def _listed(self, dataset: str | None) -> set[tuple[str, str]]:
        """The tag files below ``refs/`` (or ``refs/<dataset>/``), by listing it."""
        base = self._path("refs")
        try:
            paths = list(self.fs.find(base if dataset is None else self._path("refs", dataset)))
        except FileNotFoundError:
            return set()
        except Exception as e:
            raise self.error("list the tags of", e) from None
        named: set[tuple[str, str]] = set()
        for p in paths:
            try:
                parts = self.fs.relparts(p, base)
                if len(parts) == 2 and not any(x.startswith(".") for x in parts):
                    named.add((check_name(parts[0]), check_name(parts[1])))
            except Exception:
                continue  # not a tag: a staging name, a lock, a stray file
        return named

    def _indexed(self, dataset: str | None) -> list[tuple[str, str]]:
        """The tags ``info/refs`` names (``dataset/tag`` per line; what push writes for readers
        that cannot list folders, such as a static web server), all or ``dataset``'s. The tag
        files themselves stay the values' only source."""
        data = self.read(self.index_path(), "read the tag index (info/refs) of")
        named: dict[tuple[str, str], None] = {}  # in the index's order, each once
        for line in (data or b"").decode("utf-8", "replace").splitlines():
            ds, sep, tag = line.strip().partition("/")
            if not sep or (dataset is not None and ds != dataset):
                continue
            try:
                named[check_name(ds), check_name(tag)] = None
            except DsregError:
                continue  # not a tag name: skipped, as a stray file below refs/ is
        return list(named)

    def damaged_ref(self, dataset: str, tag: str, data: bytes) -> RemoteError:
        text = data.decode("ascii", "replace").strip()
        return RemoteError(
            f"tag {dataset}@{tag} on remote {self.label} is damaged (holds {text[:80]!r}); "
            "push it again with --force from a registry that holds it"
        )

    def ref_state(self, dataset: str, tag: str) -> str | bytes | None:
        """What a tag holds now: its digest, the bytes of a damaged tag, or ``None``."""
        data = self.read(self.ref_path(dataset, tag), f"read tag {dataset}@{tag} from")
        return None if data is None else ref_value(data)

    def get_ref(self, dataset: str, tag: str) -> str | None:
        state = self.ref_state(dataset, tag)
        if isinstance(state, bytes):
            raise self.damaged_ref(dataset, tag, state)
        return state

    def log_bytes(self, dataset: str) -> bytes:
        return self.read(self.log_path(dataset), f"read the log of {dataset} from") or b""

    def read(self, path: str, action: str) -> bytes | None:
        """A file's bytes, or ``None`` if it is absent; any other failure a ``RemoteError``."""
        try:
            return bytes(self.fs.cat_file(path))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except Exception as e:
            raise self.error(action, e) from None

    def write(self, path: str, data: bytes) -> None:
        """Replace a file whole: readers see the old bytes or the new, never a part."""
        try:
            if self.local:
                write_atomic(path, data)
            else:
                # One PUT: an object store never shows a partial object.
                self.fs.pipe_file(path, data)
        except Exception as e:
            raise self.error(f"write {path} to", e) from None

    # -- objects ----------------------------------------------------------------------------
    def present(
        self, digests: Iterable[str], *, jobs: int, progress: ProgressHook = no_progress
    ) -> set[str]:
        """The digests among ``digests`` whose objects the remote holds (existence only)."""
        wanted = sorted(set(digests))
        if not wanted:
            return set()
        if self.local:
            return _present_local(self._objects(), wanted)
        from dvc_data.hashfile.db import HashFileDB

        odb = HashFileDB(self.fs, self._objects(), hash_name=ALGORITHM)

        def hook(phase: str, total: int | None, done: int = 0) -> None:
            if total:
                progress("checking remote", done, total)

        try:
            found = odb.oids_exist(  # type: ignore[no-untyped-call]
                [hex_of(d) for d in wanted], jobs=jobs, progress=hook
            )
        except Exception as e:
            raise self.error("list the objects of", e) from None
        return {PREFIX + h for h in found}

    def tidy(self) -> None:
        """Drop what killed pushes left in a plain folder's ``tmp/`` (a day old and more): one
        listing, so every push does it, a push with nothing to send included."""
        if self.local:
            _drop_stale_staging(Path(self.root) / "tmp")

    def send(
        self,
        items: Sequence[tuple[str, Path]],
        *,
        jobs: int,
        progress: ProgressHook = no_progress,
    ) -> int:
        """Upload ``(digest, local path)`` pairs; return the bytes sent. Stops at the first
        failure (after the transfers in flight) and raises it."""
        if not items:
            return 0
        if self.local:
            return self._send_to_folder(items, jobs=jobs, progress=progress)

        def one(item: tuple[str, Path]) -> int:
            digest, src = item
            try:
                got = hash_path(os.fspath(src))
                if got != digest:
                    raise _local_corrupt(digest, got)
                self.fs.put_file(os.fspath(src), self.object_path(digest))
                return os.stat(src).st_size
            except DsregError:
                raise
            except FileNotFoundError as e:
                if e.filename is not None and os.fspath(e.filename) == os.fspath(src):
                    raise self.error(
                        f"send object {short(digest)} (missing locally) to", e
                    ) from None
                raise self.error(f"write object {short(digest)} to", e) from None
            except Exception as e:
                raise self.error(f"write object {short(digest)} to", e) from None

        return sum(parallel(one, items, jobs=jobs, task="pushing", progress=progress))

    def _send_to_folder(
        self, items: Sequence[tuple[str, Path]], *, jobs: int, progress: ProgressHook
    ) -> int:
        """A folder remote is laid out as a registry is, so it takes objects the way a registry
        does: staged in its ``tmp/`` (hashed on the way: a damaged local object is never
        published), made durable with one ``syncfs`` per wave, then moved into ``files/`` (a
        whole shard folder where the remote has none yet) without replacing any object."""
        from dsreg.objects.store import ObjectStore

        target = ObjectStore(Path(self.root))
        _drop_stale_staging(target.tmp)

        def stage(batch: ObjectBatch, wave: Sequence[tuple[str, Path]], done: int) -> int:
            # Read, hashed and staged in worker processes for a large wave (forkpool), each
            # object only if it hashes to its name.
            def hook(n: int) -> None:
                progress("pushing", done + n, len(items))

            expect = [digest for digest, _src in wave]
            got, size = batch.put_files(
                [os.fspath(src) for _d, src in wave],
                [0] * len(wave),
                hook,
                expect=expect,
                # Processes beyond the CPUs only contend for them (threads default to 2/CPU).
                jobs=min(jobs, default_jobs()),
            )
            for digest, g in zip(expect, got, strict=True):
                if g != digest:
                    raise _local_corrupt(digest, g)
            return size

        try:
            if len(items) <= _FEW:
                sent = sum(_put_verified(target, digest, src) for digest, src in items)
                progress("pushing", len(items), len(items))
                return sent
            sent = sum(staged_waves(target, items, stage))
            # The names are durable before any ref can name them.
            sync_filesystem(target.files)
        except DsregError as e:
            if isinstance(e, CorruptObjectError):
                raise
            raise RemoteError(f"cannot write to remote {self.label}: {e}") from None
        except OSError as e:
            raise self.error("write to", e) from None
        finally:
            with contextlib.suppress(OSError):
                target.tmp.rmdir()  # only if no other push is staging there
        return sent

    def fetch(
        self,
        digests: Sequence[str],
        sink: Sink,
        scratch: Path,
        *,
        jobs: int,
        progress: ProgressHook = no_progress,
    ) -> FetchReport:
        """Download objects, hash each, and hand the intact ones to ``sink`` (a staging batch or
        the store). Missing and corrupt objects are reported, never staged."""
        if not digests:
            return FetchReport()

        def one(item: tuple[str, str | None]) -> tuple[str, str | None, int]:
            """(digest, None if intact / "missing" / the digest its bytes hash to, size) of
            ``(digest, its download already made, if any)``."""
            digest, downloaded = item
            rpath = self.object_path(digest)
            try:
                if self.local:
                    src = rpath
                elif downloaded is not None:
                    src = downloaded
                else:
                    src = os.fspath(scratch / f"get-{secrets.token_hex(8)}")
                    self.fs.get_file(rpath, src)
                try:
                    data = read_whole(src, WHOLE)
                    if data is not None:
                        # Hashed once, staged only if it is what was asked for.
                        got = sink.put_bytes(data, expect=digest)
                        return digest, None if got == digest else got, len(data)
                    got = hash_path(src)
                    if got != digest:
                        return digest, got, 0
                    size = os.stat(src).st_size
                    # Staging re-reads and re-hashes: bytes that changed between the two reads
                    # are never staged under the digest asked for.
                    if sink.put_file(src, size_hint=size) != digest:
                        return digest, "changed while read", 0
                    return digest, None, size
                finally:
                    if not self.local:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(src)
            except FileNotFoundError:
                return digest, "missing", 0
            except DsregError:
                raise
            except Exception as e:
                raise self.error(f"read object {short(digest)} from", e) from None

        if self.local or not batched(self.fs):
            items: list[tuple[str, str | None]] = [(d, None) for d in digests]
            results = parallel(one, items, jobs=jobs, task="fetching", progress=progress)
        else:
            results = []
            for lo in range(0, len(digests), _BATCH):
                part = digests[lo : lo + _BATCH]
                try:
                    local = download(self.fs, [self.object_path(d) for d in part], scratch, jobs)
                except Exception as e:
                    raise self.error(f"read {len(part)} objects from", e) from None
                results += [(d, "missing", 0) for d, p in zip(part, local, strict=True) if not p]
                got = [(d, p) for d, p in zip(part, local, strict=True) if p]

                def hook(task: str, n: int, total: int, lo: int = lo) -> None:
                    progress(task, lo + n, len(digests))

                # Hashing and staging use the CPUs, whatever number downloads at once.
                hashers = min(jobs, _LOCAL_JOBS)
                results += parallel(one, got, jobs=hashers, task="fetching", progress=hook)
        missing = tuple(sorted(d for d, p, _ in results if p == "missing"))
        corrupt = tuple(sorted((d, p) for d, p, _ in results if p not in (None, "missing")))
        ok = [(d, s) for d, p, s in results if p is None]
        return FetchReport(
            fetched=len(ok), bytes=sum(s for _, s in ok), missing=missing, corrupt=corrupt
        )


class Sink(Protocol):
    """Where verified downloads go: an ``ObjectBatch`` (many) or an adapter over the store."""

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str: ...

    def put_file(self, path: str, *, size_hint: int = 0) -> str: ...


def _present_local(objects: str, wanted: list[str]) -> set[str]:
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


def _drop_stale_staging(tmp: Path) -> None:
    """Remove what killed pushes left in a folder remote's ``tmp/`` more than a day ago (a push
    still running touches its staging folder far more often)."""
    cutoff = time.time() - 86400
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return
    for e in entries:
        with contextlib.suppress(OSError):
            if e.name.startswith(STAGE_PREFIX) and e.stat().st_mtime < cutoff:
                shutil.rmtree(e.path, ignore_errors=True)


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
