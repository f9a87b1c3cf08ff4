"""The content-addressed object store: ``files/blake3/ab/cdef…``, read-only, never rewritten.

An object is written to ``tmp/``, made durable, made read-only and linked into place; the link
fails if the object exists, so an object is never rewritten and a reader never sees a partial
one. Single objects are fsynced one by one; a batch (``ObjectStore.batch``, used by ``add``)
stages many and makes them durable with one file-system barrier before any is linked in, so
``files/`` never holds bytes that a crash could tear (docs/benchmarks.md has the argument).
Reads that serve bytes re-hash them: corrupt bytes raise ``CorruptObjectError``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import blake3

from dsreg.errors import (
    AmbiguousDigestError,
    CorruptObjectError,
    ObjectNotFoundError,
    StorageError,
)
from dsreg.registry.digest import (
    ALGORITHM,
    MIN_PREFIX,
    PREFIX,
    format_digest,
    hash_bytes,
    hash_file,
    object_relpath,
    short,
)

__all__ = ["ObjectBatch", "ObjectStore", "hash_path", "sync_filesystem"]

_HEX = len(PREFIX)
# Staging folders under tmp/: one per batch; a crash can leave one behind for gc to remove.
STAGE_PREFIX = "stage-"
_CHUNK = 1 << 20
# Small files are read whole (one read, hashed, written); larger ones are streamed.
_SMALL = 16 << 20
_READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_RD = os.O_RDONLY | _CLOEXEC
_WR_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC
# Listing a shard costs a small fraction of a stat per entry: list it when the folder (about 72
# bytes an entry on ext4) is small next to the number of digests to look up in it.
_LIST_BYTES_PER_LOOKUP = 512


class ObjectStore:
    """Objects under ``<root>/files``; staging under ``<root>/tmp``."""

    __slots__ = ("files", "tmp")

    def __init__(self, root: Path) -> None:
        self.files = root / "files"
        self.tmp = root / "tmp"

    # -- paths ------------------------------------------------------------------------------
    def path(self, digest: str) -> Path:
        """Where the object lives (whether or not it exists)."""
        return self.files / object_relpath(digest)

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def missing(self, digests: Iterable[str]) -> set[str]:
        """The digests among ``digests`` whose objects are absent (existence only, no hashing)."""
        by_shard: dict[str, list[str]] = {}
        for d in digests:
            by_shard.setdefault(d[_HEX : _HEX + 2], []).append(d)
        root = os.fspath(self.files / ALGORITHM)
        out: set[str] = set()
        for shard, ds in by_shard.items():
            folder = f"{root}/{shard}"
            try:
                size = os.stat(folder).st_size
            except FileNotFoundError:
                out.update(ds)
                continue
            if size <= _LIST_BYTES_PER_LOOKUP * len(ds):
                names = set(os.listdir(folder))
                out.update(d for d in ds if d[_HEX + 2 :] not in names)
            else:
                out.update(d for d in ds if not os.path.isfile(f"{folder}/{d[_HEX + 2 :]}"))
        return out

    def batch(self) -> ObjectBatch:
        """Stage many objects, then install them all with one durability barrier."""
        return ObjectBatch(self)

    # -- writing ----------------------------------------------------------------------------
    def put_bytes(self, data: bytes | memoryview) -> str:
        """Store ``data``; return its digest. An existing object is left as it is."""
        digest = hash_bytes(data)
        if not self.has(digest):
            self._install(digest, [data])
        return digest

    def put_file(self, src: Path, *, known: str | None = None) -> str:
        """Store a file's bytes and return their digest.

        ``known`` is a digest the caller already holds for ``src`` (from the stat cache): when the
        object exists, the file is not even read. Otherwise the bytes written are the bytes
        hashed, so a file changing under us can never land under another file's digest.
        """
        if known is not None and self.has(known):
            return known
        try:
            size = src.stat().st_size
            if size <= _SMALL:
                data = src.read_bytes()
                digest = hash_bytes(data)
                if not self.has(digest):
                    self._install(digest, [data])
                return digest
            return self._put_stream(src)
        except OSError as e:
            raise StorageError(f"cannot read {src}: {e.strerror}") from e

    def _put_stream(self, src: Path) -> str:
        hasher = blake3.blake3(max_threads=1)
        tmpname = self._mktemp()
        try:
            with open(tmpname, "wb") as out, open(src, "rb") as s:
                while chunk := s.read(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            digest = PREFIX + hasher.hexdigest()
            self._link_into_place(tmpname, digest)
            return digest
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmpname)

    def _mktemp(self) -> Path:
        try:
            self.tmp.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self.tmp, prefix="obj-")
        except OSError as e:
            raise StorageError(f"cannot write to {self.tmp}: {e.strerror}") from e
        os.close(fd)
        return Path(name)

    def _install(self, digest: str, chunks: list[bytes | memoryview]) -> None:
        tmpname = self._mktemp()
        try:
            with open(tmpname, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            self._link_into_place(tmpname, digest)
        except OSError as e:
            raise StorageError(f"cannot store object {short(digest)}: {e.strerror or e}") from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmpname)

    def _link_into_place(self, tmp: Path, digest: str) -> None:
        os.chmod(tmp, _READ_ONLY)
        dst = self.path(digest)
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            # link(2) never replaces: a concurrent writer of the same object simply loses.
            os.link(tmp, dst)
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
                raise
            # File systems without hard links: rename can replace, so only do it if still absent.
            if not dst.exists():
                os.replace(tmp, dst)

    def _remove(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(digest))

    def remove(self, digest: str) -> None:
        """Delete an object (garbage collection only)."""
        try:
            self._remove(digest)
        except OSError as e:
            raise StorageError(f"cannot remove object {short(digest)}: {e.strerror}") from e

    # -- reading ----------------------------------------------------------------------------
    def read_bytes(self, digest: str) -> bytes:
        """The object's bytes, re-hashed: raises ``CorruptObjectError`` rather than serve others."""
        path = self.path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ObjectNotFoundError(
                f"object {short(digest)} is not in this registry ({path}); "
                "pull it from a remote or add the data again"
            ) from None
        except OSError as e:
            raise StorageError(f"cannot read object {short(digest)}: {e.strerror}") from e
        if hash_bytes(data) != digest:
            raise _corrupt(digest, path)
        return data

    def verified_path(self, digest: str) -> Path:
        """The object's path after re-hashing its bytes."""
        path = self.path(digest)
        try:
            got = hash_file(path)
        except FileNotFoundError:
            raise ObjectNotFoundError(
                f"object {short(digest)} is not in this registry; "
                "pull it from a remote or add the data again"
            ) from None
        if got != digest:
            raise _corrupt(digest, path)
        return path

    def check(self, digest: str) -> str | None:
        """``None`` if the object is intact, else what is wrong with it."""
        path = self.path(digest)
        try:
            got = hash_file(path)
        except FileNotFoundError:
            return "missing"
        except OSError as e:
            return f"unreadable: {e.strerror}"
        return None if got == digest else f"corrupt: its bytes hash to {short(got)}"

    def __iter__(self) -> Iterator[str]:
        """Every object's digest (no particular order)."""
        if not self.files.is_dir():
            return
        for shard in os.scandir(self.files / "blake3") if (self.files / "blake3").is_dir() else ():
            if len(shard.name) != 2 or not shard.is_dir():
                continue
            for entry in os.scandir(shard.path):
                if len(entry.name) == 62:
                    yield PREFIX + shard.name + entry.name

    def match_prefix(self, prefix: str) -> list[str]:
        """Every stored digest starting with ``prefix`` (hex, at least 6 characters)."""
        hexpart = prefix.removeprefix(PREFIX)
        shard = self.files / "blake3" / hexpart[:2]
        if len(hexpart) < MIN_PREFIX or not shard.is_dir():
            return []
        rest = hexpart[2:]
        return sorted(
            PREFIX + hexpart[:2] + e.name for e in os.scandir(shard) if e.name.startswith(rest)
        )

    def resolve_prefix(self, prefix: str) -> str:
        """The one stored digest starting with ``prefix``."""
        found = self.match_prefix(prefix)
        if not found:
            raise ObjectNotFoundError(f"no object in this registry starts with {prefix!r}")
        if len(found) > 1:
            raise AmbiguousDigestError(
                f"digest prefix {prefix!r} is ambiguous: it matches "
                + ", ".join(short(d) for d in found[:10])
                + ("" if len(found) <= 10 else f" and {len(found) - 10} more")
                + "; type more characters"
            )
        return format_digest(found[0])


class ObjectBatch:
    """Many objects written together (``dsreg add``): staged in ``tmp/`` without an fsync each;
    ``commit`` makes every staged byte durable with one ``syncfs``, links the objects into
    ``files/`` (never replacing one), and makes those names durable with a second ``syncfs``.

    So ``files/`` only ever names bytes that were durable before the name existed, and a caller
    that writes manifests and refs after ``commit`` never points at content a crash could lose.
    ``put_file`` may be called from many threads. Leaving the ``with`` block without ``commit``
    removes what was staged.
    """

    __slots__ = ("_dir", "_files", "_staged", "_store")

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._files = os.fspath(store.files / ALGORITHM)
        # Staged objects are sharded like files/ (tmp/stage-…/ab/cdef…): file creation in one
        # folder of tens of thousands of entries is several times slower than in 256 small ones.
        self._dir = f"{os.fspath(store.tmp)}/{STAGE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.makedirs(self._dir)
            for i in range(256):
                os.mkdir(f"{self._dir}/{i:02x}")
        except OSError as e:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise StorageError(f"cannot write to {store.tmp}: {e.strerror}") from e
        # (staging path, hex digest); list.append is atomic, so worker threads share it.
        self._staged: list[tuple[str, str]] = []

    def __enter__(self) -> ObjectBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        """Hash a file's bytes and stage them unless the store holds them; return the digest.

        The bytes staged are the bytes hashed (one read), so a file changing under us can never
        land under another content's digest.
        """
        try:
            fd = os.open(path, _RD)
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror}") from e
        try:
            data = _read_small(fd, size_hint)
            if data is None:
                return self._stage_stream(fd, path)
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror}") from e
        finally:
            os.close(fd)
        hexd = blake3.blake3(data, max_threads=1).hexdigest()
        if not self._has(hexd):
            self._stage(hexd, data)
        return PREFIX + hexd

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        """Stage ``data`` unless the store holds it; return its digest. With ``expect`` (a
        verified download), bytes hashing to anything else are not staged: the caller sees the
        digest they do hash to."""
        hexd = blake3.blake3(data, max_threads=1).hexdigest()
        if expect is not None and PREFIX + hexd != expect:
            return PREFIX + hexd
        if not self._has(hexd):
            self._stage(hexd, data)
        return PREFIX + hexd

    def _has(self, hexd: str) -> bool:
        try:
            os.stat(f"{self._files}/{hexd[:2]}/{hexd[2:]}")
        except OSError:
            return False
        return True

    def _stage(self, hexd: str, data: bytes) -> None:
        path = f"{self._dir}/{hexd[:2]}/{hexd[2:]}"
        try:
            fd = os.open(path, _WR_NEW, _READ_ONLY)
        except FileExistsError:
            return  # the same bytes, staged by this batch from another file
        except OSError as e:
            raise StorageError(f"cannot write to {self._store.tmp}: {e.strerror}") from e
        try:
            _write_all(fd, data)
        except OSError as e:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise StorageError(f"cannot stage object {hexd[:12]}: {e.strerror}") from e
        os.close(fd)
        self._staged.append((path, hexd))

    def _stage_stream(self, fd: int, src: str) -> str:
        os.lseek(fd, 0, os.SEEK_SET)
        hasher = blake3.blake3(max_threads=1)
        path = f"{self._dir}/stream-{secrets.token_hex(8)}"
        out = os.open(path, _WR_NEW, _READ_ONLY)
        try:
            while chunk := os.read(fd, _CHUNK):
                hasher.update(chunk)
                _write_all(out, chunk)
        except OSError as e:
            os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise StorageError(f"cannot store {src}: {e.strerror}") from e
        os.close(out)
        hexd = hasher.hexdigest()
        if self._has(hexd):
            os.unlink(path)
        else:
            self._staged.append((path, hexd))
        return PREFIX + hexd

    def commit(self, *, map_: Callable[..., Iterable[int]] = map) -> int:
        """Make the staged objects durable and install them; return how many were new.

        ``map_`` may be an executor's ``map`` to link in parallel.
        """
        staged, self._staged = self._staged, []
        if not staged:
            return 0
        try:
            # 1. Every staged byte reaches the disk before any name in files/ refers to it.
            sync_filesystem(self._store.tmp)
            for shard in sorted({h[:2] for _p, h in staged}):
                os.makedirs(f"{self._files}/{shard}", exist_ok=True)
            step = 512
            chunks = [staged[i : i + step] for i in range(0, len(staged), step)]
            installed = sum(map_(self._install, chunks))
            # 2. The names themselves are durable before a manifest or ref can name them.
            sync_filesystem(self._store.files)
        except OSError as e:
            self._staged = staged
            raise StorageError(f"cannot install objects into {self._files}: {e.strerror}") from e
        return installed

    def _install(self, chunk: list[tuple[str, str]]) -> int:
        n = 0
        for path, hexd in chunk:
            n += _link_noreplace(path, f"{self._files}/{hexd[:2]}/{hexd[2:]}")
        return n

    def discard(self) -> None:
        """Remove the staging folder and whatever is still staged in it."""
        self._staged = []
        shutil.rmtree(self._dir, ignore_errors=True)


def _read_small(fd: int, size_hint: int) -> bytes | None:
    """All of a file's bytes if it holds at most ``_SMALL`` (else None): the first read asks for
    one byte more than the size seen when scanning, so the usual cost is two reads."""
    first = min(max(size_hint, 0), _SMALL) + 1
    data = os.read(fd, first)
    if not data:
        return data
    more = os.read(fd, _CHUNK)
    if not more:
        return data
    parts = [data, more]
    total = len(data) + len(more)
    while total <= _SMALL:
        more = os.read(fd, _CHUNK)
        if not more:
            return b"".join(parts)
        parts.append(more)
        total += len(more)
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _link_noreplace(src: str, dst: str) -> int:
    """Link a staged object into place unless the object exists; drop the staged name. 1 if new."""
    new = 1
    try:
        os.link(src, dst)
    except FileExistsError:
        new = 0
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            raise
        # File systems without hard links: rename can replace, so only do it if still absent.
        if os.path.exists(dst):
            new = 0
        else:
            os.replace(src, dst)
            return new
    with contextlib.suppress(FileNotFoundError):
        os.unlink(src)
    return new


def hash_path(path: str, *, size_hint: int = 0) -> str:
    """The digest of a file's bytes (one read for small files, streamed for large ones)."""
    fd = os.open(path, _RD)
    try:
        data = _read_small(fd, size_hint)
        if data is not None:
            return PREFIX + blake3.blake3(data, max_threads=1).hexdigest()
        os.lseek(fd, 0, os.SEEK_SET)
        hasher = blake3.blake3(max_threads=1)
        while chunk := os.read(fd, _CHUNK):
            hasher.update(chunk)
        return PREFIX + hasher.hexdigest()
    finally:
        os.close(fd)


_SYNCFS: Callable[[int], int] | None = None
_SYNCFS_LOADED = False


def _load_syncfs() -> Callable[[int], int] | None:
    global _SYNCFS, _SYNCFS_LOADED
    if not _SYNCFS_LOADED:
        _SYNCFS_LOADED = True
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).syncfs
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_int
                _SYNCFS = fn
            except (OSError, AttributeError):
                _SYNCFS = None
    return _SYNCFS


def sync_filesystem(path: Path) -> None:
    """Make every completed write on ``path``'s file system durable: ``syncfs(2)`` on Linux (one
    barrier instead of an fsync per file), ``sync(2)`` elsewhere."""
    fn = _load_syncfs()
    if fn is None:
        os.sync()
        return
    fd = os.open(path, _RD)
    try:
        if fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), os.fspath(path))
    finally:
        os.close(fd)


def _corrupt(digest: str, path: Path) -> CorruptObjectError:
    return CorruptObjectError(
        f"object {short(digest)} is corrupt: its bytes do not hash to {digest} ({path}); "
        "it will not be served: run 'dsreg verify', then 'dsreg pull' or add the data again"
    )
