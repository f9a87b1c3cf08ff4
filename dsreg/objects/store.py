"""The content-addressed object store: ``files/blake3/ab/cdef…``, read-only, never rewritten.

An object is written to ``tmp/``, made durable, made read-only and linked into place; the link
fails if the object exists, so an object is never rewritten and a reader never sees a partial
one. Single objects are fsynced one by one; a batch (``ObjectStore.batch``, batch.py, used by
``add``) stages many and makes them all durable with one barrier before any is moved in.
Reads that serve bytes re-hash them: corrupt bytes raise ``CorruptObjectError``.

An object found corrupt (by any read here, by ``check``, which ``dsreg verify`` uses, or by a
checkout) is marked so (an empty file ``tmp/corrupt/<hex>``, ``marked_corrupt``): it stays
where it is, still refused by every read, until ``replace_corrupt`` replaces it with bytes
that hash to its digest (``dsreg add`` of its data does, and so can a pull). That is the one
exception to "never rewritten": bytes that are not the digest's were never the object.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dsreg._util.fs import CHUNK, READ_ONLY, SMALL
from dsreg._util.lazy import lazy_imports
from dsreg.errors import (
    AmbiguousDigestError,
    CorruptObjectError,
    DsregError,
    ObjectNotFoundError,
    StorageError,
)
from dsreg.objects.digest import (
    ALGORITHM,
    MIN_PREFIX,
    PREFIX,
    digest_at,
    format_digest,
    hex_of,
    layout,
    object_relpath,
    short,
)
from dsreg.objects.hashing import Hasher, hash_bytes, hash_file

# Batches (and the worker pool, pickle and queue behind them) serve adds and pulls; a command
# that reads objects or writes one at a time never starts one.
# A command that only reads objects makes no temporary file either.
with lazy_imports():
    import tempfile

    from dsreg.objects import batch as object_batch

if TYPE_CHECKING:
    from dsreg.objects.batch import ObjectBatch

__all__ = ["ObjectStore"]

# Marks of objects found corrupt: tmp/corrupt/<64 hex>, empty files (gc leaves folders of
# tmp/ other than an add's staging alone).
_MARKS = "corrupt"
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
            by_shard.setdefault(layout(hex_of(d))[0], []).append(d)
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
                out.update(d for d in ds if layout(hex_of(d))[1] not in names)
            else:
                out.update(d for d in ds if not os.path.isfile(f"{folder}/{layout(hex_of(d))[1]}"))
        return out

    def batch(self) -> ObjectBatch:
        """Stage many objects, then install them all with one durability barrier."""
        return object_batch.ObjectBatch(self.files, self.tmp)

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
            if size <= SMALL:
                data = src.read_bytes()
                digest = hash_bytes(data)
                if not self.has(digest):
                    self._install(digest, [data])
                return digest
            return self._put_stream(src)
        except OSError as e:
            raise StorageError(f"cannot read {src}: {e.strerror}") from e

    def writer(self) -> ObjectWriter:
        """A new object written as a stream: ``write`` bytes (hashed on the way), then
        ``commit`` to install them under their digest, or ``discard``. As a context manager,
        whatever is not committed is discarded (a refused add writes nothing)."""
        return ObjectWriter(self, self._mktemp())

    def _put_stream(self, src: Path) -> str:
        tmpname = self._mktemp()
        try:
            digest = _write_hashed(tmpname, src)
            self._link_into_place(tmpname, digest)
            return digest
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmpname)

    def _mktemp(self) -> Path:
        try:
            # tmp/ may be removed between the mkdir and the mkstemp by a push ending on the
            # same remote (it removes an empty tmp/): make it again and retry.
            for attempt in range(8):
                try:
                    self.tmp.mkdir(parents=True, exist_ok=True)
                    fd, name = tempfile.mkstemp(dir=self.tmp, prefix="obj-")
                    break
                except FileNotFoundError:
                    if attempt == 7:
                        raise
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
        os.chmod(tmp, READ_ONLY)
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
                "pull it from a remote or add the data again",
                digest=digest,
            ) from None
        except OSError as e:
            raise StorageError(f"cannot read object {short(digest)}: {e.strerror}") from e
        self.check_bytes(digest, data)
        return data

    def check_bytes(self, digest: str, data: bytes | memoryview) -> None:
        """Raise ``CorruptObjectError`` (and mark the object) unless ``data`` hashes to
        ``digest``: for a caller that read the object's bytes itself (memory-mapped, so that a
        large table is parsed where it lies rather than copied into a Python object)."""
        got = hash_bytes(data)
        if got != digest:
            self.mark_corrupt(digest)
            raise _corrupt(digest, self.path(digest), got)

    def not_found(self, digest: str) -> ObjectNotFoundError:
        """The error for an object absent from the store, with the advice."""
        return ObjectNotFoundError(
            f"object {short(digest)} is not in this registry ({self.path(digest)}); "
            "pull it from a remote or add the data again",
            digest=digest,
        )

    def verified_path(self, digest: str) -> Path:
        """The object's path after re-hashing its bytes."""
        path = self.path(digest)
        try:
            got = hash_file(path)
        except FileNotFoundError:
            raise ObjectNotFoundError(
                f"object {short(digest)} is not in this registry; "
                "pull it from a remote or add the data again",
                digest=digest,
            ) from None
        if got != digest:
            self.mark_corrupt(digest)
            raise _corrupt(digest, path, got)
        return path

    def check(self, digest: str) -> str | None:
        """``None`` if the object is intact, else what is wrong with it. A corrupt object is
        marked (``mark_corrupt``), so that adding its data again replaces it; an intact one
        loses a mark it had."""
        path = self.path(digest)
        try:
            got = hash_file(path)
        except FileNotFoundError:
            return "missing"
        except OSError as e:
            return f"unreadable: {e.strerror}"
        if got == digest:
            self._unmark(digest)
            return None
        self.mark_corrupt(digest)
        return f"corrupt: its bytes hash to {short(got)}"

    def mark_corrupt(self, digest: str) -> None:
        """Remember that object ``digest`` was found corrupt (best effort: a read-only registry
        cannot remember, and its objects cannot be repaired either)."""
        folder = self.tmp / _MARKS
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            os.close(os.open(folder / hex_of(digest), os.O_WRONLY | os.O_CREAT, 0o644))

    def _unmark(self, digest: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.tmp / _MARKS / hex_of(digest))

    def marked_corrupt(self) -> set[str]:
        """The objects found corrupt and not repaired since (one listing of a folder that is
        usually absent). Marks of objects no longer stored are dropped."""
        folder = self.tmp / _MARKS
        try:
            names = os.listdir(folder)
        except OSError:
            return set()
        out: set[str] = set()
        for name in names:
            if len(name) != 64:
                continue
            digest = PREFIX + name
            if self.path(digest).is_file():
                out.add(digest)
            else:
                self._unmark(digest)
        return out

    def stat_check(self, sizes: Mapping[str, int]) -> tuple[set[str], set[str]]:
        """``(missing, corrupt)`` among ``sizes`` (digest -> the size of bytes known to hash to
        it): one ``stat`` per object; an object of another size is re-hashed (and marked if
        corrupt), one of the right size is trusted."""
        root = os.fspath(self.files)
        missing: set[str] = set()
        corrupt: set[str] = set()
        for digest, size in sizes.items():
            try:
                st = os.stat(f"{root}/{object_relpath(digest)}")
            except FileNotFoundError:
                missing.add(digest)
                continue
            except OSError:
                continue
            if st.st_size != size and self.check(digest) not in (None, "missing"):
                corrupt.add(digest)
        return missing, corrupt

    def replace_corrupt(self, digest: str, source: bytes | Path) -> bool:
        """Replace object ``digest`` with ``source`` (bytes, or a file) if the stored one fails
        verification (or is absent); leave an intact one alone. The new bytes are hashed first
        and refused (``CorruptObjectError``) unless they hash to ``digest``; they are written
        to ``tmp/``, fsynced and renamed over the object in one step, so a reader sees the old
        bytes or the new, never a mix. True if the object was replaced or stored (and its mark
        of corruption is dropped either way)."""
        if self.check(digest) is None:
            return False
        tmpname = self._mktemp()
        try:
            got = _write_hashed(tmpname, source)
            if got != digest:
                raise CorruptObjectError(
                    f"the bytes offered to repair object {short(digest)} hash to {short(got)}; "
                    "the object was not replaced",
                    digest=digest,
                    actual=got,
                )
            os.chmod(tmpname, READ_ONLY)
            dst = self.path(digest)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmpname, dst)
            self._unmark(digest)
        except DsregError:
            raise
        except OSError as e:
            raise StorageError(f"cannot store object {short(digest)}: {e.strerror or e}") from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmpname)
        return True

    def __iter__(self) -> Iterator[str]:
        """Every object's digest (no particular order). Each listing is closed when the
        iteration ends, is stopped, or is dropped: a caller that stops early leaves no open
        directory behind."""
        top = self.files / ALGORITHM
        if not top.is_dir():
            return
        with os.scandir(top) as shards:
            for shard in shards:
                if len(shard.name) != 2 or not shard.is_dir():
                    continue
                with os.scandir(shard.path) as entries:
                    for entry in entries:
                        if len(entry.name) == 62:
                            yield digest_at(shard.name, entry.name)

    def match_prefix(self, prefix: str) -> list[str]:
        """Every stored digest starting with ``prefix`` (hex, at least 6 characters)."""
        hexpart = prefix.removeprefix(PREFIX)
        head, rest = layout(hexpart)
        shard = self.files / ALGORITHM / head
        if len(hexpart) < MIN_PREFIX or not shard.is_dir():
            return []
        with os.scandir(shard) as entries:
            return sorted(digest_at(head, e.name) for e in entries if e.name.startswith(rest))

    def resolve_prefix(self, prefix: str) -> str:
        """The one stored digest starting with ``prefix``."""
        found = self.match_prefix(prefix)
        if not found:
            raise ObjectNotFoundError(
                f"no object in this registry starts with {prefix!r}", digest=prefix
            )
        if len(found) > 1:
            raise AmbiguousDigestError(
                f"digest prefix {prefix!r} is ambiguous: it matches "
                + ", ".join(short(d) for d in found[:10])
                + ("" if len(found) <= 10 else f" and {len(found) - 10} more")
                + "; type more characters",
                prefix=prefix,
                candidates=found,
            )
        return format_digest(found[0])


class ObjectWriter:
    """Bytes streamed into a staging file and hashed as they are written (``ObjectStore.writer``).

    Memory stays bounded by what one ``write`` holds; the digest is of exactly the bytes
    written, so what is installed is what was hashed."""

    __slots__ = ("_file", "_hasher", "_store", "_tmp", "size")

    def __init__(self, store: ObjectStore, tmp: Path) -> None:
        self._store = store
        self._tmp: Path | None = tmp
        self._hasher = Hasher()
        self.size = 0
        try:
            self._file = open(tmp, "wb")  # noqa: SIM115 - closed by commit or discard
        except OSError as e:
            raise StorageError(f"cannot write to {store.tmp}: {e.strerror}") from e

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._hasher.update(data)
        try:
            self._file.write(data)
        except OSError as e:
            raise StorageError(f"cannot write to {self._store.tmp}: {e.strerror or e}") from e
        n = len(data) if not isinstance(data, memoryview) else data.nbytes
        self.size += n
        return n

    @property
    def path(self) -> Path:
        """The staging file (complete up to the last ``flush``), for a caller re-reading it."""
        if self._tmp is None:
            raise StorageError("this object was already committed or discarded")
        return self._tmp

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as e:
            raise StorageError(f"cannot write to {self._store.tmp}: {e.strerror or e}") from e

    def peek(self) -> str:
        """The digest of the bytes written so far."""
        return self._hasher.digest()

    def commit(self) -> str:
        """Make the bytes durable and install them under their digest (kept if it exists)."""
        digest = self._hasher.digest()
        tmp = self._tmp
        if tmp is None:
            raise StorageError("this object was already committed or discarded")
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            if not self._store.has(digest):
                self._store._link_into_place(tmp, digest)
        except OSError as e:
            raise StorageError(f"cannot store object {short(digest)}: {e.strerror or e}") from e
        finally:
            self.discard()
        return digest

    def discard(self) -> None:
        """Drop the staged bytes (nothing of them reaches the store)."""
        with contextlib.suppress(OSError):  # a full disk fails the close's flush too
            self._file.close()
        if self._tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)
            self._tmp = None

    def __enter__(self) -> ObjectWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _corrupt(digest: str, path: Path, actual: str) -> CorruptObjectError:
    return CorruptObjectError(
        f"object {short(digest)} is corrupt: its bytes do not hash to {digest} ({path}); "
        "it will not be served: run 'dsreg verify', then 'dsreg pull' or add the data again",
        digest=digest,
        path=str(path),
        actual=actual,
    )


def _write_hashed(tmpname: Path, source: bytes | Path) -> str:
    """Write ``source`` (bytes, or a file's bytes read a chunk at a time) to ``tmpname``,
    fsynced, hashing what is written; the digest of the bytes written."""
    hasher = Hasher()
    with open(tmpname, "wb") as out:
        if isinstance(source, bytes):
            hasher.update(source)
            out.write(source)
        else:
            with open(source, "rb") as src:
                while chunk := src.read(CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return hasher.digest()
