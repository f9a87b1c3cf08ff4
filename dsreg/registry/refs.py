"""Tags (``refs/<dataset>/<tag>``, one line: a revision digest) and the append-only ref log.

A tag is created with link(2), which fails if the tag exists, so of two processes creating one
tag exactly one succeeds. Moving a tag needs ``force`` and the log keeps the old value.

A tag and its log line are written as one step, under the dataset's lock (git writes a ref and
its reflog under one lock): the line is appended and made durable first, then the tag is
installed; if installing fails, the log is cut back to its length before, so a failure leaves
neither. A crash between the two leaves the line alone, and the next ``set`` of that same move
finds it as the tag's last line in the log (other events may follow it) and installs the tag
without writing it again.

Reading never trusts the log: a line that is not an entry (torn by a crash, not UTF-8, of the
wrong types, or naming another dataset) is skipped and reported in ``RefLog.damaged``
(``formats/reflog.py`` reads the lines; this module re-exports its names).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from dsreg._util.fs import write_all
from dsreg._util.lazy import lazy_imports
from dsreg.errors import (
    DsregError,
    ManifestError,
    RevisionNotFoundError,
    StorageError,
    TagExistsError,
)
from dsreg.formats.names import check_name
from dsreg.formats.reflog import DamagedLine, LogEntry, RefLog, parse_log
from dsreg.objects.digest import format_digest, short

# Only a tag that moves needs a temporary file (reading tags and logs needs none).
with lazy_imports():
    import tempfile

__all__ = [
    "DamagedLine",
    "LogEntry",
    "RefLog",
    "RefStore",
    "move_refused",
    "parse_log",
]

# What a tag is called in errors, and what sets a damaged one again (``RefStore``).
_TAG = "tag {dataset}@{tag}"
_TAG_REPAIR = (
    "restore it with 'dsreg tag --force {dataset}@{tag} REVISION' (its revisions are listed by "
    "'dsreg log {dataset}')"
)
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# The tail read to find the log's last line (a line is a few hundred bytes).
_TAIL = 64 << 10


def move_refused(dataset: str, tag: str, old: str, new: str) -> TagExistsError:
    """The refusal to move tag ``dataset@tag`` from ``old`` to ``new`` without ``force``."""
    return TagExistsError(
        f"tag {dataset}@{tag} exists at {short(old)}; tags are immutable: "
        f"choose another name, or move it with --force (the log keeps {short(old)})",
        dataset=dataset,
        tag=tag,
        existing=old,
        new=new,
    )


class RefStore:
    """Tags and logs of one registry. ``refs`` names the folder of the refs: ``refs`` for tags,
    another for refs logged in the same dataset logs under the same locks (recorded models,
    marks); ``name`` and ``repair`` (formats of ``dataset`` and ``tag``) say what such a ref is
    and which command sets it again, for the error a damaged one raises. ``set`` with ``force``
    replaces a damaged ref, so that command repairs it."""

    __slots__ = ("logs", "name", "refs", "repair", "tmp")

    def __init__(
        self, root: Path, *, refs: str = "refs", name: str = _TAG, repair: str = _TAG_REPAIR
    ) -> None:
        self.refs = root / refs
        self.logs = root / "logs"
        self.tmp = root / "tmp"
        self.name, self.repair = name, repair

    def path(self, dataset: str, tag: str) -> Path:
        return self.refs / check_name(dataset, what="dataset name") / check_name(tag, what="tag")

    def get(self, dataset: str, tag: str) -> str | None:
        """The digest a tag points at, or ``None``."""
        try:
            text = self.path(dataset, tag).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise StorageError(
                f"cannot read {self.name.format(dataset=dataset, tag=tag)}: {e}"
            ) from e
        try:
            return format_digest(text)
        except Exception:
            what = self.name.format(dataset=dataset, tag=tag)
            repair = self.repair.format(dataset=dataset, tag=tag)
            raise ManifestError(f"{what} is damaged (holds {text[:80]!r}); {repair}") from None

    def current(self, dataset: str, tag: str, *, force: bool) -> str | None:
        """``get``'s digest before a move; with ``force``, a damaged ref counts as none (the
        move replaces it: how the ``repair`` command repairs it)."""
        try:
            return self.get(dataset, tag)
        except ManifestError:
            if not force:
                raise
            return None

    def datasets(self) -> list[str]:
        if not self.refs.is_dir():
            return []
        return sorted(p.name for p in self.refs.iterdir() if p.is_dir())

    def logged_datasets(self) -> list[str]:
        """Every dataset with a log (an untagged dataset may have one: its overlays)."""
        if not self.logs.is_dir():
            return []
        return sorted(
            p.stem for p in self.logs.glob("*.jsonl") if _NAME.fullmatch(p.stem) and p.is_file()
        )

    def tags(self, dataset: str) -> dict[str, str]:
        """``{tag: digest}`` of one dataset, sorted by tag (a damaged ref raises its error)."""
        out = {}
        for tag, digest in self.entries(dataset).items():
            if isinstance(digest, DsregError):
                raise digest
            out[tag] = digest
        return out

    def entries(self, dataset: str) -> dict[str, str | DsregError]:
        """``{tag: digest}`` of one dataset, sorted by tag, with the error reading it for a
        damaged ref (``verify`` names each; ``tags`` stops at the first)."""
        d = self.refs / dataset
        out: dict[str, str | DsregError] = {}
        for p in sorted(d.iterdir()) if d.is_dir() else ():
            if p.is_file() and not p.name.startswith("."):
                try:
                    digest = self.get(dataset, p.name)
                except DsregError as e:
                    out[p.name] = e
                    continue
                if digest is not None:
                    out[p.name] = digest
        return out

    def all(self) -> Iterator[tuple[str, str, str]]:
        """Every ``(dataset, tag, digest)``."""
        for ds in self.datasets():
            for tag, digest in self.tags(ds).items():
                yield ds, tag, digest

    @contextlib.contextmanager
    def _locked(self, dataset: str) -> Iterator[None]:
        path = self.logs / f".{dataset}.lock"
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(
                f"cannot open the lock {path}: {e.strerror}; nothing was changed"
            ) from e
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:
                raise StorageError(f"cannot lock {path}: {e.strerror}; nothing was changed") from e
            yield
        finally:
            # A lock's descriptor holds no data: an error closing it changes nothing written.
            with contextlib.suppress(OSError):
                os.close(fd)

    def set(
        self,
        dataset: str,
        tag: str,
        digest: str,
        *,
        force: bool = False,
        command: str = "",
        event: str = "tag",
    ) -> str | None:
        """Point ``dataset@tag`` at ``digest``; return the old digest (``None`` if new).

        Pointing a tag at the digest it already holds is a no-op. Moving it needs ``force``.
        The tag and its log line are written together or not at all: on any failure (a full
        disk, say) a ``StorageError`` is raised and neither has changed. ``event`` is the log
        line's event: ``tag``, or ``result`` for a recorded model's ref.
        """
        path = self.path(dataset, tag)
        format_digest(digest)
        with self._locked(dataset):
            old = self.current(dataset, tag, force=force)
            if old == digest:
                return old
            if old is not None and not force:
                raise move_refused(dataset, tag, old, digest)
            entry = LogEntry.now(
                dataset=dataset, tag=tag, old=old, new=digest, command=command, event=event
            )
            try:
                with _LogFile(self.logs / f"{dataset}.jsonl") as log:
                    # A crash after the line and before the tag: the line stands for this move.
                    last = log.last_move(tag)
                    pending = last is not None and _same_move(last, entry)
                    tmp = self._write_tmp(digest + "\n")
                    try:
                        if not pending:
                            log.append(entry.to_line())
                        replace = old is not None or (force and path.exists())  # damaged
                        self._install(tmp, path, replace=replace, dataset=dataset)
                    except BaseException:
                        log.rollback()
                        raise
                    finally:
                        with contextlib.suppress(OSError):
                            os.unlink(tmp)
            except DsregError:
                raise
            except OSError as e:
                raise StorageError(
                    f"cannot write tag {dataset}@{tag}: {e.strerror or e}; nothing was changed "
                    "(the tag and its log are as they were): free space or fix the folder's "
                    "permissions and run the command again"
                ) from e
        return old

    def delete(self, dataset: str, tag: str, *, command: str = "", event: str = "delete") -> str:
        """Remove ``dataset@tag``; return the digest it pointed at. Logged like every move (event
        ``delete``, ``old`` the digest, ``new`` none); no object is removed: what the tag kept
        stays a gc root through the log line until the log's expiry, as git's reflog keeps a
        deleted branch's commits. A tag that does not exist raises ``RevisionNotFoundError``.

        The line is written first, then the tag removed; if removing fails the line is cut
        back, and a crash between the two leaves the line alone, which the next delete of the
        same tag finds as the log's last line and does not write again.
        """
        path = self.path(dataset, tag)
        with self._locked(dataset):
            old = self.get(dataset, tag)
            if old is None:
                tags = ", ".join(self.tags(dataset)) or "none"
                raise RevisionNotFoundError(
                    f"no tag {dataset}@{tag} to delete (tags of {dataset!r}: {tags}); "
                    "see 'dsreg ls'",
                    dataset=dataset,
                    ref=tag,
                )
            entry = LogEntry.now(
                dataset=dataset, tag=tag, old=old, new=None, command=command, event=event
            )
            try:
                with _LogFile(self.logs / f"{dataset}.jsonl") as log:
                    last = log.last_move(tag)
                    try:
                        if not (last is not None and _same_move(last, entry)):
                            log.append(entry.to_line())
                        os.unlink(path)
                    except BaseException:
                        log.rollback()
                        raise
                _fsync_dir(path.parent)
            except DsregError:
                raise
            except OSError as e:
                raise StorageError(
                    f"cannot delete tag {dataset}@{tag}: {e.strerror or e}; nothing was changed "
                    "(the tag and its log are as they were)"
                ) from e
            # A dataset left without tags is no longer listed by 'dsreg ls' (its log stays).
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        return old

    def _install(self, tmp: Path, path: Path, *, replace: bool, dataset: str) -> None:
        """Put the ref file ``tmp`` at ``path``; on failure, leave no folder it created."""
        created = not path.parent.is_dir()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    # Another process (without our lock: an older dsreg, a remote sync) won.
                    raise TagExistsError(
                        f"tag {dataset}@{path.name} was created by another process just now; "
                        "see 'dsreg show' and choose another name, or use --force"
                    ) from None
        except BaseException:
            if created:
                with contextlib.suppress(OSError):
                    os.rmdir(path.parent)
            raise
        _fsync_dir(path.parent)

    def record(self, dataset: str, *, event: str, new: str, command: str) -> None:
        """Log an event that moves no tag (an overlay made for the dataset)."""
        check_name(dataset, what="dataset name")
        with self._locked(dataset):
            entry = LogEntry.now(
                dataset=dataset, tag=None, old=None, new=new, command=command, event=event
            )
            self._append(dataset, [entry.to_line()])

    def logged_change(
        self, dataset: str, entry: LogEntry, change: Callable[[], None], *, what: str
    ) -> None:
        """Log ``entry``, then run ``change`` (an atomic write: a yank, a retirement), under
        the dataset's lock; if ``change`` fails the line is cut back: a failure leaves neither."""
        check_name(dataset, what="dataset name")
        with self._locked(dataset):
            try:
                with _LogFile(self.logs / f"{dataset}.jsonl") as log:
                    log.append(entry.to_line())
                    try:
                        change()
                    except BaseException:
                        log.rollback()
                        raise
            except OSError as e:
                raise StorageError(
                    f"cannot write {what}: {e.strerror or e}; nothing was changed"
                ) from e

    def append_log(self, dataset: str, entries: Sequence[LogEntry]) -> None:
        """Append entries written elsewhere (a remote's history of the dataset, copied by a
        clone) to the dataset's log, as one write, under the same lock as ``set``."""
        check_name(dataset, what="dataset name")
        if not entries:
            return
        with self._locked(dataset):
            self._append(dataset, [e.to_line() for e in entries])

    def log(self, dataset: str) -> RefLog:
        """The dataset's log: its entries, oldest first, and the damaged lines skipped."""
        path = self.logs / f"{check_name(dataset, what='dataset name')}.jsonl"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return RefLog()
        except OSError as e:
            raise StorageError(f"cannot read the log {path}: {e.strerror}") from e
        return parse_log(data, dataset=dataset)

    def _append(self, dataset: str, lines: list[str]) -> None:
        """Append whole lines to a dataset's log and fsync, all or nothing; the caller holds
        the dataset lock."""
        path = self.logs / f"{dataset}.jsonl"
        try:
            with _LogFile(path) as log:
                log.append("".join(lines))
        except OSError as e:
            raise StorageError(
                f"cannot append to {path}: {e.strerror or e}; the log is as it was"
            ) from e

    def _write_tmp(self, text: str) -> Path:
        """A durable temporary file holding ``text`` (removed again if writing it fails)."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix="ref-")
        try:
            try:
                write_all(fd, text.encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise
        return Path(name)


class _LogFile:
    """A log opened for appending, that can be cut back to its length at opening."""

    __slots__ = ("appended", "fd", "path", "start")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1
        self.start = 0
        self.appended = False

    def __enter__(self) -> _LogFile:
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            self.start = os.lseek(self.fd, 0, os.SEEK_END)
            if self.start == 0:
                # A new log: its name must be as durable as the lines in it.
                _fsync_dir(self.path.parent)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        # After the fsync the lines are written; an error closing changes none of it.
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def last_move(self, tag: str) -> LogEntry | None:
        """The last whole entry, within the log's tail, that moves or deletes ``tag``.

        Not just the last line: a command that logs an event moving no tag before its tag (an
        overlay made by ``detect --tag``) writes that event again when it is re-run after a
        crash between its tag's line and the tag itself, so the pending line is no longer last.
        """
        if self.start == 0:
            return None
        n = min(self.start, _TAIL)
        tail = os.pread(self.fd, n, self.start - n)
        if not tail.endswith(b"\n"):
            return None  # a torn last line: no move is pending behind it
        lines = tail[:-1].split(b"\n")
        if n < self.start:
            lines = lines[1:]  # the first may be cut by the window
        for line in reversed(lines):
            entries = parse_log(line)
            if entries and entries[0].tag == tag:
                return entries[0]
        return None

    def append(self, text: str) -> None:
        """Write ``text`` at the end and fsync; on failure, cut the log back and raise."""
        data = text.encode("utf-8", "surrogatepass")
        try:
            if self.start and os.pread(self.fd, 1, self.start - 1) != b"\n":
                # A line torn by a crash: end it, or the first entry would be glued to it and
                # lost.
                data = b"\n" + data
            self.appended = True
            write_all(self.fd, data)
            os.fsync(self.fd)
        except BaseException:
            self.rollback()
            raise

    def rollback(self) -> None:
        """Cut the log back to its length at opening (what this writer appended goes)."""
        if not self.appended:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, self.start)
            os.fsync(self.fd)
        self.appended = False


def _same_move(last: LogEntry, entry: LogEntry) -> bool:
    moves = [(e.event, e.dataset, e.tag, e.old, e.new) for e in (last, entry)]
    return moves[0] == moves[1]


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
