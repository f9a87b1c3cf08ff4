"""Tags (``refs/<dataset>/<tag>``, one line: a revision digest) and the append-only ref log.

A tag is created with link(2), which fails if the tag exists, so of two processes creating one
tag exactly one succeeds. Moving a tag needs ``force`` and the log keeps the old value.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsreg._util.fs import write_all
from dsreg.errors import ManifestError, StorageError, TagExistsError
from dsreg.model.names import check_name
from dsreg.objects.digest import format_digest, short

__all__ = ["LogEntry", "RefStore", "parse_log"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEntry:
    """One line of ``logs/<dataset>.jsonl``: who moved which tag when."""

    time: str
    user: str
    dataset: str
    tag: str | None
    old: str | None
    new: str | None
    command: str
    event: str = "tag"

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "user": self.user,
            "dataset": self.dataset,
            "tag": self.tag,
            "old": self.old,
            "new": self.new,
            "command": self.command,
            "event": self.event,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LogEntry:
        return cls(
            time=d["time"],
            user=d["user"],
            dataset=d["dataset"],
            tag=d.get("tag"),
            old=d.get("old"),
            new=d.get("new"),
            command=d.get("command", ""),
            event=d.get("event", "tag"),
        )

    @classmethod
    def now(
        cls,
        *,
        dataset: str,
        tag: str | None,
        old: str | None,
        new: str | None,
        command: str,
        event: str = "tag",
    ) -> LogEntry:
        """An entry stamped with the current time (UTC) and user."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(
            time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            user=user,
            dataset=dataset,
            tag=tag,
            old=old,
            new=new,
            command=command,
            event=event,
        )

    def to_line(self) -> str:
        """The entry as one line of a log, newline included."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"


def parse_log(text: str) -> list[LogEntry]:
    """The entries of a log's text; a line that is not an entry is skipped, never fatal (a torn
    last line, after a crash mid-append)."""
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            out.append(LogEntry.from_dict(json.loads(line)))
    return out


class RefStore:
    """Tags and logs of one registry."""

    __slots__ = ("logs", "refs", "tmp")

    def __init__(self, root: Path) -> None:
        self.refs = root / "refs"
        self.logs = root / "logs"
        self.tmp = root / "tmp"

    def path(self, dataset: str, tag: str) -> Path:
        return self.refs / check_name(dataset, what="dataset name") / check_name(tag, what="tag")

    def get(self, dataset: str, tag: str) -> str | None:
        """The digest a tag points at, or ``None``."""
        try:
            text = self.path(dataset, tag).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise StorageError(f"cannot read tag {dataset}@{tag}: {e}") from e
        try:
            return format_digest(text)
        except Exception:
            raise ManifestError(
                f"tag {dataset}@{tag} is damaged (holds {text[:80]!r}); "
                f"restore it with 'dsreg tag --force {dataset}@{tag} <digest>' from 'dsreg log'"
            ) from None

    def datasets(self) -> list[str]:
        if not self.refs.is_dir():
            return []
        return sorted(p.name for p in self.refs.iterdir() if p.is_dir())

    def tags(self, dataset: str) -> dict[str, str]:
        """``{tag: digest}`` of one dataset, sorted by tag."""
        d = self.refs / dataset
        if not d.is_dir():
            return {}
        out = {}
        for p in sorted(d.iterdir()):
            if p.is_file() and not p.name.startswith("."):
                digest = self.get(dataset, p.name)
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
        self.logs.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.logs / f".{dataset}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def set(
        self, dataset: str, tag: str, digest: str, *, force: bool = False, command: str = ""
    ) -> str | None:
        """Point ``dataset@tag`` at ``digest``; return the old digest (``None`` if new).

        Pointing a tag at the digest it already holds is a no-op. Moving it needs ``force``.
        """
        path = self.path(dataset, tag)
        format_digest(digest)
        with self._locked(dataset):
            old = self.get(dataset, tag)
            if old == digest:
                return old
            if old is not None and not force:
                raise TagExistsError(
                    f"tag {dataset}@{tag} exists at {short(old)}; tags are immutable: "
                    f"choose another name, or move it with --force (the log keeps {short(old)})",
                    dataset=dataset,
                    tag=tag,
                    existing=old,
                    new=digest,
                )
            tmp = self._write_tmp(digest + "\n")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if old is None:
                    try:
                        os.link(tmp, path)
                    except FileExistsError:
                        # Another process (without our lock: an older dsreg, a remote sync) won.
                        raise TagExistsError(
                            f"tag {dataset}@{tag} was created by another process just now; "
                            "see 'dsreg show' and choose another name, or use --force"
                        ) from None
                else:
                    os.replace(tmp, path)
                _fsync_dir(path.parent)
            except OSError as e:
                raise StorageError(f"cannot write tag {dataset}@{tag}: {e.strerror}") from e
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            self._append(
                dataset,
                [
                    LogEntry.now(
                        dataset=dataset, tag=tag, old=old, new=digest, command=command
                    ).to_line()
                ],
            )
        return old

    def record(self, dataset: str, *, event: str, new: str, command: str) -> None:
        """Log an event that moves no tag (an overlay made for the dataset)."""
        with self._locked(dataset):
            entry = LogEntry.now(
                dataset=dataset, tag=None, old=None, new=new, command=command, event=event
            )
            self._append(dataset, [entry.to_line()])

    def append_log(self, dataset: str, entries: Sequence[LogEntry]) -> None:
        """Append entries written elsewhere (a remote's history of the dataset, copied by a
        clone) to the dataset's log, as one write, under the same lock as ``set``."""
        check_name(dataset, what="dataset name")
        if not entries:
            return
        with self._locked(dataset):
            self._append(dataset, [e.to_line() for e in entries])

    def log(self, dataset: str) -> list[LogEntry]:
        path = self.logs / f"{dataset}.jsonl"
        try:
            return parse_log(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def _append(self, dataset: str, lines: list[str]) -> None:
        """Append whole lines to a dataset's log and fsync; the caller holds the dataset lock."""
        text = "".join(lines)
        path = self.logs / f"{dataset}.jsonl"
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                end = os.lseek(fd, 0, os.SEEK_END)
                if end and os.pread(fd, 1, end - 1) != b"\n":
                    # A line torn by a crash: end it, or the first entry would be glued to it and
                    # lost.
                    text = "\n" + text
                write_all(fd, text.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise StorageError(f"cannot append to {path}: {e.strerror}") from e

    def _write_tmp(self, text: str) -> Path:
        self.tmp.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix="ref-")
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        return Path(name)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
