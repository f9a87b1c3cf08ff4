"""The votes log of a review: append-only, one checksummed JSON record a line, fsynced.

``<registry>/review/<hex of the queue overlay>/votes.log``; its records' format, and how damage
in it is found and counted, are ``logbytes.py``'s. A record is on disk (written and fsynced)
before the request that made it is answered, so a server killed at any moment has lost nothing
it acknowledged.

Damage never costs a whole record. The server that opens the log moves each damaged span (a
torn last record, a record with a flipped, lost or added byte, bytes that are no record) to a
file of its own beside it, and keeps every record whose check holds, those after the damage
too. Each step is durable before the next: every span's file (written under a temporary name,
fsynced, renamed to its name, the folder fsynced), then the new log (the kept records' bytes,
exactly, in a temporary file locked before it takes the log's name, fsynced, renamed over the
log, the folder fsynced). A kill at any point leaves the old log, or the new one with every
span's file beside it; a repair begun again finds the same spans and the files that hold them
already. Readers that only export (``--export``, ``--finish``) take the same records without
writing and without the server's lock, and report the spans still in the log with those moved
aside before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dsreg._util.fs import fsync_folder, write_all
from dsreg.errors import StorageError
from dsreg.reviewing.logbytes import (
    DAMAGED_PREFIX,
    Scan,
    SetAside,
    encode,
    quarantine_header,
    read_quarantine,
    scan,
)

__all__ = ["Votes", "VotesLog", "log_path", "read_votes"]

_FOLDER: Final = "review"
_NAME: Final = "votes.log"
# Temporary files of a repair: only the log's lock holder writes them, so the next one removes
# those a killed server left.
_TMP_PREFIX: Final = ".votes.log."
_TMP_SUFFIX: Final = ".tmp"
_OPEN_TRIES: Final = 10

Moved = list[tuple[SetAside, bytes]]


def log_path(root: Path, overlay_hex: str) -> Path:
    """Where the votes about one queue overlay live in the registry at ``root``."""
    return root / _FOLDER / overlay_hex / _NAME


@dataclass(frozen=True, slots=True)
class Votes:
    """A log's records (oldest first) and its damaged spans: moved aside before (oldest first),
    then those still in it."""

    records: list[dict[str, Any]]
    set_aside: tuple[SetAside, ...]


def read_votes(path: Path) -> Votes:
    """The records of a log, read without the lock and without repairing it (a log that does
    not exist holds none), and its damaged spans."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as e:
        raise StorageError(f"cannot read the votes log {path}: {e.strerror}", path=str(path)) from e
    moved = _moved(path)
    found = scan(data, log=str(path), gone=_gone(moved))
    still = [span for span in found.damaged if _holding(moved, span, data) is None]
    if still and still[-1].end == len(data) and not data.endswith(b"\n") and _served(path):
        # A server holds the log, and it moved every damaged span aside when it opened it: an
        # unfinished last line is the answer it is writing now, not damage.
        still.pop()
    return Votes(found.records, (*(span for span, _ in moved), *still))


def _served(path: Path) -> bool:
    """Whether a server holds the log's lock now."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


class VotesLog:
    """A votes log opened for appending, held by one server at a time (an exclusive ``flock``).

    Attributes
    ----------
    records : list of dict
        Every record whose check holds, oldest first, each with its ``seq``.
    set_aside : tuple of SetAside
        The log's damaged spans, each moved to a file of its own: those moved when it was
        opened and those moved before (empty when the log was never damaged).
    repaired : int
        Bytes moved aside when the log was opened (0 when it was whole).
    """

    __slots__ = ("_fd", "_next", "_size", "path", "records", "repaired", "set_aside")

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            created = _make_folders(path.parent)
            fd = _open_locked(path)
        except StorageError:
            raise
        except OSError as e:
            raise StorageError(
                f"cannot open the votes log {path}: {e.strerror}", path=str(path)
            ) from e
        self._fd: int | None = fd
        try:
            _remove_temporary(path.parent)
            data = _read_all(fd)
            moved = _moved(path)
            found = scan(data, log=str(path), gone=_gone(moved))
            new = self._move_aside(data, found, moved) if found.damaged else []
        except StorageError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise StorageError(
                f"cannot read or repair the votes log {path}: {e.strerror}; it is unchanged "
                "or repaired whole, never in part",
                path=str(path),
            ) from e
        except BaseException:
            self.close()
            raise
        self.records = found.records
        self.set_aside = (*(span for span, _ in moved), *new)
        self.repaired = sum(span.end - span.start for span in found.damaged)
        self._size = sum(end - start for start, end in found.bounds)
        self._next = 1 + max(
            (
                *(record["seq"] for record in self.records),
                *(span.seqs[1] for span in self.set_aside if span.seqs is not None),
            ),
            default=-1,
        )
        if created or not data:
            # The log's name must survive a power cut as its records do: fsync the folders
            # that hold it (from the registry's own down), once, when it is new.
            try:
                for folder in (path.parent, *created):
                    fsync_folder(folder)
            except OSError as e:
                self.close()
                raise StorageError(
                    f"cannot make the votes log {path} durable: {e.strerror}", path=str(path)
                ) from e

    def _move_aside(self, data: bytes, found: Scan, moved: Moved) -> list[SetAside]:
        """Move the damaged spans to their files and put the log of the kept records in place;
        the spans moved now (a span whose file exists already, from a repair that stopped
        before the log was replaced, is not one of them)."""
        folder = self.path.parent
        now = time.time()
        new: list[SetAside] = []
        for span in found.damaged:
            if _holding(moved, span, data) is None:
                new.append(_quarantine(folder, span, data[span.start : span.end], now))
        fsync_folder(folder)
        kept = b"".join(data[start:end] for start, end in found.bounds)
        fd = _replace(self.path, kept)
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = fd
        return new

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write ``record`` (given the next ``seq``) and fsync it; returns it as stored."""
        if self._fd is None:
            raise StorageError(f"the votes log {self.path} is closed", path=str(self.path))
        stored = {**record, "seq": self._next}
        line = encode(stored)
        try:
            os.lseek(self._fd, self._size, os.SEEK_SET)
            write_all(self._fd, line)
            os.fsync(self._fd)
        except OSError as e:
            # A partial line must not stay: the next record would follow a torn one (the next
            # start would move the torn bytes aside and report them).
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise StorageError(
                f"cannot write the votes log {self.path}: {e.strerror}; the answer was not "
                "recorded",
                path=str(self.path),
            ) from e
        self._size += len(line)
        self._next += 1
        self.records.append(stored)
        return stored

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _open_locked(path: Path) -> int:
    """The log, opened and locked. A log replaced by a repair between the open and the lock is
    opened again, so the lock held is always on the file the log's name holds."""
    for _ in range(_OPEN_TRIES):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StorageError(
                f"another review server holds the votes log {path}; stop it first (one "
                "server per queue, however many reviewers)",
                path=str(path),
            ) from None
        held = os.fstat(fd)
        with contextlib.suppress(FileNotFoundError):
            named = os.stat(path)
            if (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
                return fd
        os.close(fd)
    raise StorageError(f"the votes log {path} keeps being replaced; try again", path=str(path))


def _moved(log: Path) -> Moved:
    """The spans moved aside beside ``log`` and their bytes, oldest first."""
    folder = log.parent
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(DAMAGED_PREFIX))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise StorageError(f"cannot list {folder}: {e.strerror}", path=str(folder)) from e
    moved: Moved = []
    for name in names:
        try:
            content = (folder / name).read_bytes()
        except FileNotFoundError:
            continue  # removed meanwhile by its owner
        except OSError as e:
            raise StorageError(
                f"cannot read {folder / name}: {e.strerror}", path=str(folder / name)
            ) from e
        moved.append(read_quarantine(str(log), str(folder / name), content))
    moved.sort(key=lambda pair: (pair[0].time or 0.0, pair[0].start))
    return moved


def _gone(moved: Moved) -> list[tuple[int, int]]:
    return [span.seqs for span, _ in moved if span.seqs is not None]


def _holding(moved: Moved, span: SetAside, data: bytes) -> SetAside | None:
    """The span moved aside before that is ``span`` (same range, same bytes), if any."""
    piece = data[span.start : span.end]
    for old, held in moved:
        if (old.start, old.end) == (span.start, span.end) and held == piece:
            return old
    return None


def _temporary(folder: Path, data: bytes) -> tuple[Path, int]:
    """A new temporary file in ``folder`` holding ``data``, fsynced, and its open descriptor."""
    tmp = folder / f"{_TMP_PREFIX}{secrets.token_hex(8)}{_TMP_SUFFIX}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        # Locked before it is the log, so a server opening the log after the rename fails.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp, fd


def _quarantine(folder: Path, span: SetAside, data: bytes, now: float) -> SetAside:
    """Move the damaged ``data`` to a file of its own (the log stays as it is); its span."""
    tmp, fd = _temporary(folder, quarantine_header(span, data, now) + data)
    os.close(fd)
    name = folder / f"{DAMAGED_PREFIX}{span.start}"
    n = 1
    while os.path.lexists(name):
        n += 1
        name = folder / f"{DAMAGED_PREFIX}{span.start}.{n}"
    try:
        # Under the log's lock no other dsreg writes here: the name stays free.
        os.rename(tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return dataclasses.replace(span, file=str(name), time=now)


def _replace(log: Path, kept: bytes) -> int:
    """Put a log holding ``kept`` in place of ``log``; its descriptor, locked."""
    tmp, fd = _temporary(log.parent, kept)
    try:
        os.rename(tmp, log)
        fsync_folder(log.parent)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd


def _remove_temporary(folder: Path) -> None:
    for name in os.listdir(folder):
        if name.startswith(_TMP_PREFIX) and name.endswith(_TMP_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)


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


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
