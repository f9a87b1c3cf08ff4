"""Local state that only saves work: ``state/stat.sqlite``. Never pushed; safe to delete.

- ``files``: ``(path, inode, size, mtime, ctime) -> digest``, so re-adding a tree reads only the
  files that changed (as DVC's state database, with ctime as git's index has it).
- ``scans``: a tree scan's fingerprint (``TreeScan.fingerprint``) -> the revision, snapshot and
  examples table an add made of it, so re-adding an unchanged tree rebuilds nothing. Every
  object of such a revision was in the store when the line was written; ``dsreg gc`` (which
  removes objects) and a ``dsreg verify`` that finds a problem forget every line, so a re-add
  after either stores what is missing again.

A damaged or missing database only costs speed: every lookup then misses.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from dsreg.errors import StorageError

__all__ = ["StatCache"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, inode INTEGER, size INTEGER, "
    "mtime_ns INTEGER, ctime_ns INTEGER, digest TEXT) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS scans (fingerprint TEXT PRIMARY KEY, revision TEXT, "
    "snapshot TEXT, examples TEXT) WITHOUT ROWID",
    # The table of dsreg 0.1.0 (no ctime): its entries are not trusted any more.
    "DROP TABLE IF EXISTS stat",
)


class StatCache:
    __slots__ = ("path",)

    def __init__(self, root: Path) -> None:
        self.path = root / "state" / "stat.sqlite"

    def _open(self, *, write: bool) -> sqlite3.Connection:
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise sqlite3.OperationalError("no state yet")
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            if write:
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
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

    def lookup(self, prefix: str) -> dict[str, tuple[int, int, int, int, str]]:
        """Cached entries under ``prefix``: ``{path: (inode, size, mtime, ctime, digest)}``."""
        try:
            with self._connect(write=False) as con:
                rows = con.execute(
                    "SELECT path, inode, size, mtime_ns, ctime_ns, digest FROM files "
                    "WHERE path >= ? AND path < ?",
                    (prefix, prefix + "\U0010ffff"),
                ).fetchall()
        except sqlite3.Error:
            # No cache yet, or a damaged one: hash everything again.
            return {}
        return {r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in rows}

    def store(self, entries: Iterable[tuple[str, int, int, int, int, str]]) -> None:
        """Remember ``(path, inode, size, mtime, ctime, digest)`` entries. Callers leave out
        files changed too recently to trust (``treescan.RACY_NS``)."""
        with self.writer() as put:
            put(list(entries))

    @contextlib.contextmanager
    def writer(self) -> Iterator[Callable[[list[tuple[str, int, int, int, int, str]]], None]]:
        """``put(rows)`` as often as needed on one connection, each call its own short
        transaction (so concurrent adds are never held up for long); errors only cost speed."""
        con: sqlite3.Connection | None = None

        def put(rows: list[tuple[str, int, int, int, int, str]]) -> None:
            nonlocal con
            if not rows:
                return
            try:
                if con is None:
                    con = self._open(write=True)
                con.execute("BEGIN")
                con.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)", rows)
                con.execute("COMMIT")
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    if con is not None:
                        con.rollback()

        try:
            yield put
        finally:
            if con is not None:
                with contextlib.suppress(sqlite3.Error):
                    con.close()

    def scan_result(self, fingerprint: str) -> tuple[str, str, str] | None:
        """``(revision, snapshot, examples)`` an add made of a tree with this fingerprint."""
        try:
            with self._connect(write=False) as con:
                row = con.execute(
                    "SELECT revision, snapshot, examples FROM scans WHERE fingerprint = ?",
                    (fingerprint,),
                ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else (row[0], row[1], row[2])

    def remember_scan(self, fingerprint: str, revision: str, snapshot: str, examples: str) -> None:
        with contextlib.suppress(sqlite3.Error), self._connect(write=True) as con:
            con.execute(
                "INSERT OR REPLACE INTO scans VALUES (?, ?, ?, ?)",
                (fingerprint, revision, snapshot, examples),
            )

    def forget_scans(self) -> None:
        """Objects may have gone (gc, or damage that verify found): no scan vouches any more.
        If the database cannot be changed it is removed: forgetting must not fail."""
        try:
            with self._connect(write=True) as con:
                con.execute("DELETE FROM scans")
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
