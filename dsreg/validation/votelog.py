"""The votes log of a review: append-only, one checksummed JSON record a line, fsynced.

``<registry>/review/<hex of the queue overlay>/votes.log``. Each line is
``<crc32 of the JSON, 8 hex> <JSON>\\n``; the JSON is a record of the queue (``queue.py`` says
which). A record is on disk (written and fsynced) before the request that made it is answered,
so a server killed at any moment has lost nothing it acknowledged.

A crash can leave a torn last line (a partial write). The server that opens the log next
truncates it to its last complete record whose check matches, and fsyncs: nothing after the
first damaged line is trusted, not even lines that look whole (they may be stale blocks of a
file system that reordered writes). Readers that only export (``--export``, ``--finish``) take
the same valid prefix without writing and without the server's lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import zlib
from pathlib import Path
from typing import Any

from dsreg._util.fs import write_all
from dsreg._util.jsonread import LINE_BYTES, loads
from dsreg.errors import InvalidInputError, StorageError

__all__ = ["VotesLog", "log_path", "read_records"]

_FOLDER = "review"
_NAME = "votes.log"


def log_path(root: Path, overlay_hex: str) -> Path:
    """Where the votes about one queue overlay live in the registry at ``root``."""
    return root / _FOLDER / overlay_hex / _NAME


def _encode(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _decode(line: bytes) -> dict[str, Any] | None:
    """The record of one complete line (without its newline), or None if it is damaged."""
    if len(line) < 10 or line[8:9] != b" ":
        return None
    check, body = line[:8], line[9:]
    try:
        if int(check, 16) != zlib.crc32(body):
            return None
        record = loads(body, what="record", error=InvalidInputError, max_bytes=LINE_BYTES)
    except ValueError:  # InvalidInputError too
        return None
    return record if isinstance(record, dict) else None


def _valid_prefix(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The records before the first torn or damaged line, and the bytes they take."""
    records: list[dict[str, Any]] = []
    end = 0
    while end < len(data):
        newline = data.find(b"\n", end)
        if newline < 0:
            break
        record = _decode(data[end:newline])
        if record is None:
            break
        records.append(record)
        end = newline + 1
    return records, end


def read_records(path: Path) -> list[dict[str, Any]]:
    """The trusted records of a log, read without the lock and without repairing it (a log
    that does not exist holds none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise StorageError(f"cannot read the votes log {path}: {e.strerror}", path=str(path)) from e
    return _valid_prefix(data)[0]


class VotesLog:
    """A votes log opened for appending, held by one server at a time (an exclusive ``flock``).

    Attributes
    ----------
    records : list of dict
        Every trusted record, oldest first; record i has ``seq`` i.
    repaired : int
        Bytes dropped from a torn or damaged tail when the log was opened (0 when intact).
    """

    __slots__ = ("_fd", "_size", "path", "records", "repaired")

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            created = _make_folders(path.parent)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(
                f"cannot open the votes log {path}: {e.strerror}", path=str(path)
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StorageError(
                f"another review server holds the votes log {path}; stop it first (one "
                "server per queue, however many reviewers)",
                path=str(path),
            ) from None
        try:
            data = _read_all(fd)
            self.records, good = _valid_prefix(data)
            self.repaired = len(data) - good
            if self.repaired:
                os.ftruncate(fd, good)
                os.fsync(fd)
        except OSError as e:
            os.close(fd)
            raise StorageError(
                f"cannot read or repair the votes log {path}: {e.strerror}", path=str(path)
            ) from e
        self._fd: int | None = fd
        self._size = good
        if created or good == 0:
            # The log's name must survive a power cut as its records do: fsync the folders
            # that hold it (from the registry's own down), once, when it is new.
            try:
                for folder in (path.parent, *created):
                    _fsync_folder(folder)
            except OSError as e:
                self.close()
                raise StorageError(
                    f"cannot make the votes log {path} durable: {e.strerror}", path=str(path)
                ) from e

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write ``record`` (given its ``seq``) and fsync it; returns it as stored."""
        if self._fd is None:
            raise StorageError(f"the votes log {self.path} is closed", path=str(self.path))
        stored = {**record, "seq": len(self.records)}
        line = _encode(stored)
        try:
            os.lseek(self._fd, self._size, os.SEEK_SET)
            write_all(self._fd, line)
            os.fsync(self._fd)
        except OSError as e:
            # A partial line must not stay: the next record would follow a torn one, and the
            # repair on the next start would drop both.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise StorageError(
                f"cannot write the votes log {self.path}: {e.strerror}; the answer was not "
                "recorded",
                path=str(self.path),
            ) from e
        self._size += len(line)
        self.records.append(stored)
        return stored

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; the parents of the folders created (deepest
    first), whose entries changed."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
    return [made.parent for made in missing]


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
