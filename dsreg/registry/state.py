"""Local state that only saves work: ``state/stat.sqlite``. Never pushed; safe to delete.

- ``files``: ``(path, inode, size, mtime, ctime) -> digest``, so re-adding a tree reads only the
  files that changed (as DVC's state database, with ctime as git's index has it).
- ``scans``: a tree scan's fingerprint (``TreeScan.fingerprint``) -> the revision, snapshot and
  examples table an add made of it, so re-adding an unchanged tree rebuilds nothing. Every
  object of such a revision was in the store when the line was written; ``dsreg gc`` (which
  removes objects) and a ``dsreg verify`` that finds a problem forget every line, so a re-add
  after either stores what is missing again.
- ``objects_v2``: an object's digest -> its ``(inode, size, mtime, ctime, link count)`` when its
  bytes were last known to hash to the digest (written by the add from bytes it hashed, or
  re-hashed since), so a checkout links an object whose stat is unchanged (but for a ctime
  that a link made or removed explains) without reading it (``dsreg.registry.trust``;
  docs/concepts.md, "Guarantees").
- ``sha256_v1``: an object's BLAKE3 digest -> the sha256 of its bytes, taken once from bytes
  whose BLAKE3 digest was checked (what Croissant and DataCite documents name files by). Both
  are functions of the same bytes, so a line never goes stale: gc and verify keep them.

A damaged or missing database only costs speed: every lookup then misses. Each row carries a
check (a CRC-32 of its other fields, ``_check``), and a row whose check does not match is a miss,
so a damaged row (a flipped bit, a torn page, a digest edited by hand) can never put another
file's bytes into a snapshot: the file is read and hashed again. The check guards against
damage, not against someone who recomputes it; such a person could as well rewrite the tree.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple, cast

from dsreg.errors import StorageError
from dsreg.objects.digest import is_digest

__all__ = ["CachedFile", "ScanResult", "StatCache", "StatKey", "decode_record"]


class ScanResult(NamedTuple):
    """The revision, snapshot and examples table an add made of a tree."""

    revision: str
    snapshot: str
    examples: str


class CachedFile(NamedTuple):
    """What the stat cache remembers of a file: its stat when it was hashed, and the digest."""

    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    digest: str


# What an object's trust record holds: (inode, size, mtime_ns, ctime_ns, nlink).
StatKey = tuple[int, int, int, int, int]
# A trust record's value: the five fields, then a CRC-32 of the digest's 32 bytes and them.
_OBJ = struct.Struct("<qqqqq")
_OBJ_CRC = struct.Struct("<I")
_OBJ_LEN = _OBJ.size + _OBJ_CRC.size
# A row of the table as ``_packed_records`` builds many at once: the 32-byte digest, then the
# value (the fields and their CRC-32, as ``_OBJ`` and ``_OBJ_CRC`` pack them).
_ROW = [("key", ">u8", (4,)), ("fields", "<i8", (5,)), ("crc", "<u4")]
_ROW_SIZE = 32 + _OBJ_LEN
# Writes the ``?2`` rows of ``_ROW_SIZE`` bytes in blob ``?1`` (``_packed_records``), split by
# SQLite's own loop (a recursive count): one statement for thousands of records.
_PUT_PACKED = (
    "INSERT OR REPLACE INTO objects_v2 "
    f"SELECT substr(?1, n * {_ROW_SIZE} + 1, 32), substr(?1, n * {_ROW_SIZE} + 33, {_OBJ_LEN}) "
    "FROM (WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n + 1 < ?2) "
    "SELECT n FROM c)"
)
# The page cache of ``object_recorder``'s connection, in KiB: room for the pages one
# transaction changes (a 50,000-object table is about 6 MiB).
_RECORDER_CACHE_KIB = 65536
# Digests looked up per query (well under SQLite's limit on bound parameters).
_IN = 900

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files_v2 (path TEXT PRIMARY KEY, inode INTEGER, size INTEGER, "
    "mtime_ns INTEGER, ctime_ns INTEGER, digest TEXT, checksum TEXT) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS objects_v2 (digest BLOB PRIMARY KEY, stat BLOB) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS scans_v2 (fingerprint TEXT PRIMARY KEY, revision TEXT, "
    "snapshot TEXT, examples TEXT, checksum TEXT) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS sha256_v1 (digest BLOB PRIMARY KEY, sha256 BLOB) WITHOUT ROWID",
    # Tables of earlier releases: dsreg 0.1.0's (no ctime), rows without a check, and trust
    # records without the link count (objects_v1). Their entries are not trusted any more.
    "DROP TABLE IF EXISTS stat",
    "DROP TABLE IF EXISTS files",
    "DROP TABLE IF EXISTS scans",
    "DROP TABLE IF EXISTS objects_v1",
)


def decode_record(key: bytes, value: object) -> StatKey | None:
    """A trust record's fields, ``None`` unless ``value`` is one whose check (a CRC-32 of the
    32-byte digest ``key`` and the fields) holds."""
    if not isinstance(value, bytes) or len(key) != 32 or len(value) != _OBJ_LEN:
        return None
    if _OBJ_CRC.unpack_from(value, _OBJ.size)[0] != zlib.crc32(value[: _OBJ.size], zlib.crc32(key)):
        return None
    return cast(StatKey, _OBJ.unpack_from(value))


def _packed_records(rows: Iterable[tuple[str, StatKey]]) -> list[tuple[bytes, int]]:
    """Trust records ``(hex, stat)`` as the parameters of ``_PUT_PACKED``: one blob of rows of
    the table, each the 32-byte digest and the value (the five fields and the CRC-32 that
    ``decode_record`` checks), in key order (a B-tree fills fastest that way), and how many.
    Packed as one array and split by SQLite, not a few Python objects and a parameter tuple
    per row: a checkout writes one record per object it links."""
    import numpy as np  # imported here: only writers of many records need it

    hexes: list[str] = []
    stats: list[StatKey] = []
    for hexd, st in rows:
        hexes.append(hexd)
        stats.append(st)
    n = len(hexes)
    if not n:
        return []
    table = np.empty(n, dtype=np.dtype(_ROW))
    keys = np.frombuffer(bytes.fromhex("".join(hexes)), dtype=">u8").reshape(n, 4)
    table["key"] = keys
    table["fields"] = np.fromiter(chain.from_iterable(stats), np.int64, 5 * n).reshape(n, 5)
    table = table[np.lexsort(keys.T[::-1])]
    raw, size = table.view(np.uint8).data, table.itemsize
    crc32 = zlib.crc32
    table["crc"] = [crc32(raw[o : o + size - 4]) for o in range(0, n * size, size)]
    return [(table.tobytes(), n)]


def _sha256_value(key: object, value: object) -> str | None:
    """A ``sha256_v1`` line's sha256 (hex) if its check holds, else ``None``."""
    if not isinstance(key, bytes) or not isinstance(value, bytes) or len(value) != 36:
        return None
    sha, crc = value[:32], value[32:]
    if _OBJ_CRC.pack(zlib.crc32(key + sha)) != crc:
        return None
    return sha.hex()


def _check(*fields: object) -> str:
    """The check a row carries: a CRC-32 of its other fields. It detects damage (a flipped
    bit, a torn page, a field edited by hand), which is all it is for: a cryptographic hash
    here would cost an add time on every row for no more protection."""
    text = "\0".join(map(str, fields))
    return format(zlib.crc32(text.encode("utf-8", "surrogateescape")), "08x")


class StatCache:
    __slots__ = ("path",)

    def __init__(self, root: Path) -> None:
        self.path = root / "state" / "stat.sqlite"

    def _open(self, *, write: bool) -> sqlite3.Connection:
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise sqlite3.OperationalError("no state yet")
        # Any one thread at a time: an add writes from a thread of its own (``Behind``) and
        # the calling thread goes on after it has finished.
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        try:
            if write:
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
                # A statement writing many rows keeps its journal (for a rollback of that
                # statement alone) in memory, not in a temporary file.
                con.execute("PRAGMA temp_store=MEMORY")
                for stmt in _SCHEMA:
                    con.execute(stmt)
        except BaseException:
            con.close()
            raise
        return con

    @contextlib.contextmanager
    def _connect(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        con = self._open(write=write)
        try:
            yield con
        finally:
            con.close()

    def lookup(self, prefix: str) -> dict[str, CachedFile]:
        """Cached entries under ``prefix``: ``{path: CachedFile}``."""
        try:
            with self._connect(write=False) as con:
                rows = con.execute(
                    "SELECT path, inode, size, mtime_ns, ctime_ns, digest, checksum "
                    "FROM files_v2 WHERE path >= ? AND path < ?",
                    (prefix, prefix + "\U0010ffff"),
                ).fetchall()
        except sqlite3.Error:
            # No cache yet, or a damaged one: hash everything again.
            return {}
        # A row that fails its check is a miss: the file is read and hashed again.
        return {
            r[0]: CachedFile(r[1], r[2], r[3], r[4], r[5])
            for r in rows
            if r[6] == _check(*r[:6]) and is_digest(r[5])
        }

    def store(self, entries: Iterable[tuple[str, int, int, int, int, str]]) -> None:
        """Remember ``(path, inode, size, mtime, ctime, digest)`` entries. Callers leave out
        files changed too recently to trust (``treescan.RACY_NS``)."""
        with self.writer() as put:
            put(list(entries))

    @contextlib.contextmanager
    def writer(self) -> Iterator[Callable[[list[tuple[str, int, int, int, int, str]]], None]]:
        """``put(rows)`` as often as needed on one connection, each call its own short
        transaction (so concurrent adds are never held up for long); errors only cost speed."""
        with self._transactions(
            "INSERT OR REPLACE INTO files_v2 VALUES (?, ?, ?, ?, ?, ?, ?)"
        ) as run:

            def put(rows: list[tuple[str, int, int, int, int, str]]) -> None:
                run([(*r, _check(*r)) for r in rows])

            yield put

    @contextlib.contextmanager
    def _transactions(self, sql: str) -> Iterator[Callable[[list[tuple[Any, ...]]], None]]:
        """``run(params)``: ``sql`` executed for each of ``params`` in one short transaction, on
        one connection opened at the first rows and closed at the end; a failed transaction is
        rolled back and dropped (the state only saves work)."""
        con: sqlite3.Connection | None = None

        def run(params: list[tuple[Any, ...]]) -> None:
            nonlocal con
            if not params:
                return
            try:
                if con is None:
                    con = self._open(write=True)
                con.execute("BEGIN")
                con.executemany(sql, params)
                con.execute("COMMIT")
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    if con is not None:
                        con.rollback()

        try:
            yield run
        finally:
            if con is not None:
                with contextlib.suppress(sqlite3.Error):
                    con.close()

    # -- objects' trust records -------------------------------------------------------------
    def object_stats(self, hexes: list[str]) -> dict[str, StatKey]:
        """The trust records of the objects ``hexes`` (64-hex digests): ``{hex: (inode, size,
        mtime_ns, ctime_ns, nlink)}``. A record that fails its check (a CRC-32 of the digest and
        the fields) is a miss, as is everything when the database is absent or damaged."""
        out: dict[str, StatKey] = {}
        records = self.object_records(hexes)
        for h in hexes:
            key = bytes.fromhex(h)
            value = records.get(key)
            st = None if value is None else decode_record(key, value)
            if st is not None:
                out[h] = st
        return out

    def object_records(self, hexes: Collection[str]) -> dict[bytes, object]:
        """The trust records of the objects ``hexes`` as stored, neither checked nor decoded:
        ``{32-byte digest: value}`` (``decode_record`` checks and decodes one, so a checkout
        does that in the workers that need each record). When the request names at least a
        quarter of the table's rows (a checkout of most of the store), the whole table in one
        pass, the records of other objects with them (each is looked up by its own digest);
        else lookups by key. Nothing when the database is absent or damaged."""
        out: dict[bytes, object] = {}
        try:
            with self._connect(write=False) as con:
                (rows,) = con.execute("SELECT count(*) FROM objects_v2").fetchone()
                if rows <= 4 * len(hexes):
                    return dict(con.execute("SELECT digest, stat FROM objects_v2"))
                keys = [bytes.fromhex(h) for h in hexes]
                for lo in range(0, len(keys), _IN):
                    part = keys[lo : lo + _IN]
                    marks = ",".join("?" * len(part))
                    for key, value in con.execute(
                        f"SELECT digest, stat FROM objects_v2 WHERE digest IN ({marks})", part
                    ):
                        if isinstance(key, bytes):
                            out[key] = value
        except (sqlite3.Error, ValueError):
            return {}
        return out

    def put_object_stats(self, rows: Iterable[tuple[str, StatKey]]) -> None:
        """Write trust records ``(hex, (inode, size, mtime_ns, ctime_ns, nlink))`` in one short
        transaction; errors only cost speed (the objects are re-hashed next time)."""
        with self.object_writer() as put:
            put(rows)

    @contextlib.contextmanager
    def object_writer(self) -> Iterator[Callable[[Iterable[tuple[str, StatKey]]], None]]:
        """``put(rows)`` (as ``put_object_stats``) as often as needed on one connection, each
        call its own short transaction; errors only cost speed."""
        with self._transactions(_PUT_PACKED) as run:

            def put(rows: Iterable[tuple[str, StatKey]]) -> None:
                run(_packed_records(rows))

            yield put

    @contextlib.contextmanager
    def object_recorder(
        self, *, commit_every: int
    ) -> Iterator[Callable[[Iterable[tuple[str, StatKey]]], None]]:
        """``put(rows)`` (as ``put_object_stats``) as often as needed, the calls sharing one
        transaction until it holds ``commit_every`` rows, and committed at the end: for a
        checkout, which records every object it links as the links come in. Records of random
        digests fall all over the table, so each transaction rewrites most of its pages: fewer
        commits write (and checkpoint) far fewer of them, and a page cache that holds them
        keeps them from being written before the commit. Errors only cost speed: a failed
        transaction is rolled back and its rows dropped."""
        con: sqlite3.Connection | None = None
        pending = 0  # rows written since the last commit

        def commit() -> None:
            nonlocal pending
            if con is not None and pending:
                pending = 0
                try:
                    con.execute("COMMIT")
                except sqlite3.Error:
                    with contextlib.suppress(sqlite3.Error):
                        con.rollback()

        def put(rows: Iterable[tuple[str, StatKey]]) -> None:
            nonlocal con, pending
            params = _packed_records(rows)
            if not params:
                return
            try:
                if con is None:
                    con = self._open(write=True)
                    con.execute(f"PRAGMA cache_size=-{_RECORDER_CACHE_KIB}")
                if not pending:
                    con.execute("BEGIN")
                con.executemany(_PUT_PACKED, params)
                pending += sum(n for _blob, n in params)
            except sqlite3.Error:
                pending = 0
                with contextlib.suppress(sqlite3.Error):
                    if con is not None:
                        con.rollback()
                return
            if pending >= commit_every:
                commit()

        try:
            yield put
        finally:
            commit()
            if con is not None:
                with contextlib.suppress(sqlite3.Error):
                    con.close()

    # -- sha256 of objects -------------------------------------------------------------------
    def sha256s(self, hexes: list[str]) -> dict[str, str]:
        """The sha256 (hex) recorded for the objects ``hexes`` (64-hex BLAKE3 digests). A line
        whose check (a CRC-32 of both digests) fails is a miss, as is everything when the
        database is absent or damaged: the object is then read and hashed again."""
        out: dict[str, str] = {}
        try:
            keys = [bytes.fromhex(h) for h in hexes]
            with self._connect(write=False) as con:
                for lo in range(0, len(keys), _IN):
                    part = keys[lo : lo + _IN]
                    marks = ",".join("?" * len(part))
                    for key, value in con.execute(
                        f"SELECT digest, sha256 FROM sha256_v1 WHERE digest IN ({marks})", part
                    ):
                        sha = _sha256_value(key, value)
                        if sha is not None:
                            out[key.hex()] = sha
        except (sqlite3.Error, ValueError):
            return {}
        return out

    def put_sha256s(self, rows: Iterable[tuple[str, str]]) -> None:
        """Record ``(blake3 hex, sha256 hex)`` pairs in one short transaction. Writers may run at
        once: a line is written whole or not at all, and two writers of one object write the
        same value. Errors only cost speed."""
        packed = []
        for hexd, sha in rows:
            key, value = bytes.fromhex(hexd), bytes.fromhex(sha)
            packed.append((key, value + _OBJ_CRC.pack(zlib.crc32(key + value))))
        packed.sort()
        with self._transactions("INSERT OR REPLACE INTO sha256_v1 VALUES (?, ?)") as run:
            run(packed)

    def clock_ns(self) -> int | None:
        """The file system's clock, now: the mtime ``state/clock`` gets when touched (the
        clock and the granularity a file's ctime gets on this file system). ``None`` if it
        cannot be touched (a read-only registry: nothing is recorded then)."""
        path = self.path.parent / "clock"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.utime(path)
            return os.stat(path).st_mtime_ns
        except OSError:
            return None

    def scan_result(self, fingerprint: str) -> ScanResult | None:
        """What an add made of a tree with this fingerprint."""
        try:
            with self._connect(write=False) as con:
                row = con.execute(
                    "SELECT revision, snapshot, examples, checksum FROM scans_v2 "
                    "WHERE fingerprint = ?",
                    (fingerprint,),
                ).fetchone()
        except sqlite3.Error:
            return None
        if row is None or row[3] != _check(fingerprint, *row[:3]):
            return None
        if not all(isinstance(d, str) and is_digest(d) for d in row[:3]):
            return None
        return ScanResult(row[0], row[1], row[2])

    def remember_scan(self, fingerprint: str, revision: str, snapshot: str, examples: str) -> None:
        with contextlib.suppress(sqlite3.Error), self._connect(write=True) as con:
            con.execute(
                "INSERT OR REPLACE INTO scans_v2 VALUES (?, ?, ?, ?, ?)",
                (
                    fingerprint,
                    revision,
                    snapshot,
                    examples,
                    _check(fingerprint, revision, snapshot, examples),
                ),
            )

    def forget_scans(self) -> None:
        """Objects may have gone (gc, or damage that verify found): no scan vouches any more.
        If the database cannot be changed it is removed: forgetting must not fail."""
        try:
            with self._connect(write=True) as con:
                con.execute("DELETE FROM scans_v2")
            return
        except sqlite3.Error:
            pass
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                continue
            except OSError as e:
                raise StorageError(
                    f"cannot clear the state in {self.path.parent}: {e.strerror}; remove the "
                    "folder by hand (it only saves work)"
                ) from e
