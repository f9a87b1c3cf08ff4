"""The stat cache: ``(path, inode, size, mtime) -> digest``, so re-adding an unchanged tree reads
no file (as DVC's state database does). Local to one registry; never pushed; safe to delete."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["StatCache"]

Key = tuple[str, int, int, int]


class StatCache:
    __slots__ = ("path",)

    def __init__(self, root: Path) -> None:
        self.path = root / "state" / "stat.sqlite"

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(
                "CREATE TABLE IF NOT EXISTS stat (path TEXT PRIMARY KEY, inode INTEGER, "
                "size INTEGER, mtime_ns INTEGER, digest TEXT)"
            )
            yield con
        finally:
            con.close()

    def lookup(self, prefix: str) -> dict[str, tuple[int, int, int, str]]:
        """Cached entries under ``prefix``: ``{path: (inode, size, mtime, digest)}``."""
        try:
            with self._connect() as con:
                rows = con.execute(
                    "SELECT path, inode, size, mtime_ns, digest FROM stat "
                    "WHERE path >= ? AND path < ?",
                    (prefix, prefix + "\U0010ffff"),
                ).fetchall()
        except sqlite3.Error:
            # A damaged cache only costs speed: hash everything again.
            return {}
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}

    def store(self, entries: Iterable[tuple[str, int, int, int, str]]) -> None:
        rows = list(entries)
        if not rows:
            return
        with contextlib.suppress(sqlite3.Error), self._connect() as con:
            con.execute("BEGIN")
            con.executemany("INSERT OR REPLACE INTO stat VALUES (?, ?, ?, ?, ?)", rows)
            con.execute("COMMIT")
