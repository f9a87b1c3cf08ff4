"""One remote as dvc-objects sees it: a filesystem holding ``files/blake3/ab/cdef…`` (dvc-data's
object layout with ``hash_name="blake3"``), ``refs/<dataset>/<tag>`` and ``logs/<dataset>.jsonl``.

Any URL a DVC remote accepts works: the filesystem comes from ``dvc.fs.get_cloud_fs`` (local,
S3 through dvc-s3, GCS, Azure, SSH, HTTP, WebDAV, HDFS), existence queries go through dvc-data's
``HashFileDB.oids_exist`` (which lists or probes, whichever is cheaper for the remote's size),
and objects move with the filesystem's ``put_file`` / ``get_file``. A local-directory remote
takes a direct path (one read, hashed while written, renamed into place): dvc-objects copies
local-to-local one file at a time, which would make the common NAS case the slowest.

Every byte sent is hashed on the way out (a damaged local object is never published) and every
byte fetched is hashed before it is staged into the local store, so a corrupt or truncated
remote object is reported by digest and never served. Third-party errors become
``RemoteError`` here, once.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import blake3

from dsreg.errors import CorruptObjectError, DsregError, RemoteError
from dsreg.registry.digest import ALGORITHM, PREFIX, format_digest, short
from dsreg.registry.names import check_name
from dsreg.registry.progress import ProgressHook, no_progress
from dsreg.registry.refs import LogEntry
from dsreg.registry.store import hash_path, sync_filesystem

__all__ = ["FetchReport", "RemoteStore", "Sink", "open_filesystem", "parallel"]

_HEX = len(PREFIX)
_CHUNK = 1 << 20
# Work is handed to the pool in chunks: one future per object costs more than a small copy.
_PER_TASK = 64
# Objects up to this size are read whole, hashed once and staged from memory.
_WHOLE = 16 << 20
# A folder remote is bound by the local kernel's file creation, which more threads than about
# two per CPU only contend for (measured on 2 CPUs: 2-4 threads beat 8 and 16).
_LOCAL_JOBS = max(2, min(16, (os.cpu_count() or 1) * 2))
_RD = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_WR_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)

T = TypeVar("T")
R = TypeVar("R")


def open_filesystem(url: str, options: dict[str, Any]) -> tuple[Any, str]:
    """The dvc-objects filesystem and root path of ``url``; nothing is contacted yet."""
    from dvc.fs import get_cloud_fs

    try:
        cls, conf, path = get_cloud_fs(None, url=url, **options)
        return cls(**conf), str(path)
    except ImportError as e:
        raise RemoteError(
            f"remote URL {url!r} needs a DVC plugin that is not installed ({e}); "
            "install it, e.g. pip install dvc-s3 (or dvc-gs, dvc-azure, dvc-ssh, …)"
        ) from None
    except Exception as e:  # dvc's ConfigError, voluptuous errors, URL parsing
        raise RemoteError(
            f"cannot use remote URL {url!r} with options {sorted(options)}: {_describe(e)}; "
            "give a folder path or a URL DVC accepts (s3://, gs://, azure://, ssh://, "
            "https://, webdav://, hdfs://) and options DVC knows for it"
        ) from None


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        where = f" ({e.filename})" if e.filename else ""
        return f"{e.strerror}{where}"
    text = str(e).strip()
    return text or type(e).__name__


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

    __slots__ = ("fs", "local", "name", "root", "url")

    def __init__(self, *, name: str, url: str, options: dict[str, Any]) -> None:
        self.name = name
        self.url = url
        self.fs, self.root = open_filesystem(url, options)
        self.local = getattr(self.fs, "protocol", None) == "local"

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
        h = digest[_HEX:]
        return self._path("files", ALGORITHM, h[:2], h[2:])

    def error(self, action: str, e: BaseException) -> RemoteError:
        return RemoteError(
            f"cannot {action} remote {self.label}: {_describe(e)}; check the URL, that it exists "
            "and that you may read and write there, and your credentials (environment or the "
            "cloud SDK's configuration)"
        )

    def default_jobs(self) -> int:
        return _LOCAL_JOBS if self.local else int(getattr(self.fs, "jobs", _LOCAL_JOBS))

    # -- refs and logs ----------------------------------------------------------------------
    def refs(self) -> dict[tuple[str, str], str]:
        """Every ``(dataset, tag) -> digest`` on the remote: one listing, one batched read."""
        base = self._path("refs")
        try:
            paths = list(self.fs.find(base))
        except FileNotFoundError:
            return {}
        except Exception as e:
            raise self.error("list the tags of", e) from None
        named: dict[str, tuple[str, str]] = {}
        for p in paths:
            try:
                parts = self.fs.relparts(p, base)
                if len(parts) == 2 and not any(x.startswith(".") for x in parts):
                    named[p] = (check_name(parts[0]), check_name(parts[1]))
            except Exception:
                continue  # not a tag: a staging name, a stray file
        if not named:
            return {}
        try:
            # A list of paths: the file system reads them concurrently (one request each).
            contents = self.fs.cat(sorted(named), on_error="omit")
        except Exception as e:
            raise self.error("read the tags of", e) from None
        out: dict[tuple[str, str], str] = {}
        for p, data in sorted(contents.items()):
            key = named.get(p) or named.get(self.fs.join(*self.fs.parts(p)))
            if key is not None:
                out[key] = self._digest(bytes(data), *key)
        return out

    def _digest(self, data: bytes, dataset: str, tag: str) -> str:
        text = data.decode("ascii", "replace").strip()
        try:
            return format_digest(text)
        except DsregError:
            raise RemoteError(
                f"tag {dataset}@{tag} on remote {self.label} is damaged (holds {text[:80]!r}); "
                "push it again with --force from a registry that holds it"
            ) from None

    def get_ref(self, dataset: str, tag: str) -> str | None:
        data = self._read(self._path("refs", dataset, tag), f"read tag {dataset}@{tag} from")
        return None if data is None else self._digest(data, dataset, tag)

    def set_ref(
        self, dataset: str, tag: str, digest: str, *, old: str | None, entry: LogEntry
    ) -> None:
        """Write a tag, then append its move to the remote's log (which keeps the old value)."""
        self._write(self._path("refs", dataset, tag), (digest + "\n").encode("ascii"))
        path = self._path("logs", f"{dataset}.jsonl")
        # Object stores cannot append: read, add a line, write back. Two pushers moving tags of
        # one dataset at the same moment can lose a log line (never a ref or an object).
        before = self._read(path, f"read the log of {dataset} from") or b""
        if before and not before.endswith(b"\n"):
            before += b"\n"
        line = json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"
        self._write(path, before + line.encode("utf-8"))

    def log_bytes(self, dataset: str) -> bytes:
        return (
            self._read(self._path("logs", f"{dataset}.jsonl"), f"read the log of {dataset} from")
            or b""
        )

    def _read(self, path: str, action: str) -> bytes | None:
        try:
            return bytes(self.fs.cat_file(path))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except Exception as e:
            raise self.error(action, e) from None

    def _write(self, path: str, data: bytes) -> None:
        try:
            if self.local:
                _write_local_atomic(path, data)
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
                [d[_HEX:] for d in wanted], jobs=jobs, progress=hook
            )
        except Exception as e:
            raise self.error("list the objects of", e) from None
        return {PREFIX + h for h in found}

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
        objects = self._objects()

        def one(item: tuple[str, Path]) -> int:
            digest, src = item
            try:
                if self.local:
                    return _send_local(digest, os.fspath(src), objects)
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

        sizes = parallel(one, items, jobs=jobs, task="pushing", progress=progress)
        if self.local:
            # One barrier before any ref can name what was just written.
            with contextlib.suppress(OSError):
                sync_filesystem(Path(objects))
        return sum(sizes)

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

        def one(digest: str) -> tuple[str, str | None, int]:
            """(digest, None if intact / "missing" / the digest its bytes hash to, size)."""
            rpath = self.object_path(digest)
            try:
                if self.local:
                    src = rpath
                else:
                    src = os.fspath(scratch / f"get-{secrets.token_hex(8)}")
                    self.fs.get_file(rpath, src)
                try:
                    data = _read_whole(src, _WHOLE)
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

        results = parallel(one, list(digests), jobs=jobs, task="fetching", progress=progress)
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


def _read_whole(path: str, limit: int) -> bytes | None:
    """A file's bytes if it holds at most ``limit`` (else None, and nothing read)."""
    fd = os.open(path, _RD)
    try:
        return _read_fd(fd, limit)
    finally:
        os.close(fd)


def parallel(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    jobs: int,
    task: str,
    progress: ProgressHook = no_progress,
) -> list[R]:
    """``[fn(x) for x in items]`` on ``jobs`` threads, in chunks; the first exception stops the
    chunks not yet started and is raised."""
    total = len(items)
    if total == 0:
        return []
    chunks = [items[i : i + _PER_TASK] for i in range(0, total, _PER_TASK)]
    out: list[R] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(lambda c: [fn(x) for x in c], c) for c in chunks]
        try:
            for f in futures:
                out.extend(f.result())
                progress(task, len(out), total)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return out


def _present_local(objects: str, wanted: list[str]) -> set[str]:
    by_shard: dict[str, list[str]] = {}
    for d in wanted:
        by_shard.setdefault(d[_HEX : _HEX + 2], []).append(d)
    out: set[str] = set()
    for shard, ds in by_shard.items():
        try:
            names = set(os.listdir(f"{objects}/{shard}"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            raise RemoteError(f"cannot list {objects}/{shard}: {e.strerror}") from None
        out.update(d for d in ds if d[_HEX + 2 :] in names)
    return out


def _send_local(digest: str, src: str, objects: str) -> int:
    """Copy one object to a local-directory remote: hashed before it is written, written under
    a temporary name, renamed into place (the same bytes under the same name, so a concurrent
    writer's rename is harmless)."""
    h = digest[_HEX:]
    folder = f"{objects}/{h[:2]}"
    tmp = f"{folder}/.{h[2:14]}.{secrets.token_hex(6)}.tmp"
    fi = os.open(src, _RD)
    try:
        data = _read_fd(fi, _WHOLE)
        hasher = blake3.blake3(data if data is not None else b"", max_threads=1)
        if data is not None and PREFIX + hasher.hexdigest() != digest:
            raise _local_corrupt(digest, PREFIX + hasher.hexdigest())
        try:
            fo = os.open(tmp, _WR_NEW, 0o444)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            fo = os.open(tmp, _WR_NEW, 0o444)
        size = 0
        try:
            if data is not None:
                _write_all(fo, data)
                size = len(data)
            else:  # a large object: streamed, hashed on the way
                while chunk := os.read(fi, _CHUNK):
                    hasher.update(chunk)
                    _write_all(fo, chunk)
                    size += len(chunk)
        finally:
            os.close(fo)
    finally:
        os.close(fi)
    got = PREFIX + hasher.hexdigest()
    if got != digest:
        os.unlink(tmp)
        raise _local_corrupt(digest, got)
    os.rename(tmp, f"{folder}/{h[2:]}")
    return size


def _read_fd(fd: int, limit: int) -> bytes | None:
    """All of an open file's bytes if it holds at most ``limit`` (else None, nothing read). One
    read sized from fstat: no over-sized buffer per call."""
    size = os.fstat(fd).st_size
    if size > limit:
        return None
    data = os.read(fd, size + 1)
    if len(data) <= size:
        return data  # a regular file read short of size + 1 is at its end
    parts = [data]
    while chunk := os.read(fd, _CHUNK):
        parts.append(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _local_corrupt(digest: str, got: str) -> CorruptObjectError:
    return CorruptObjectError(
        f"local object {short(digest)} is corrupt (its bytes hash to {short(got)}); it was not "
        "pushed: run 'dsreg verify', then pull it from another remote or add the data again"
    )


def _write_local_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
