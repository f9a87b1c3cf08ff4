"""The ref log's lines as values: ``LogEntry`` (one line of ``logs/<dataset>.jsonl``: who moved
which tag when), and ``parse_log``, which reads a log's bytes into its entries and the lines it
skipped as damaged (``DamagedLine``), never trusting them. ``registry/refs.py`` is the one writer
of the log; a remote's log (``remote/``) holds the same lines.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsreg._util.jsonread import read_line
from dsreg._util.lazy import lazy_imports
from dsreg._util.records import FieldDict
from dsreg.objects.digest import is_digest

# Only an entry's age (gc, log expiry) needs calendar; only a new entry needs the user's name.
with lazy_imports():
    import calendar
    import getpass

__all__ = ["DamagedLine", "LogEntry", "RefLog", "parse_log"]

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_EVENT = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEntry(FieldDict):
    """One line of ``logs/<dataset>.jsonl``: who moved which tag when."""

    time: str
    user: str
    dataset: str
    tag: str | None
    old: str | None
    new: str | None
    command: str
    event: str = "tag"

    @classmethod
    def from_dict(cls, d: Any) -> LogEntry:
        """The entry ``d`` holds; ``ValueError`` saying what is wrong if it holds none (a field
        missing or of the wrong type, a time, name or digest that does not parse)."""
        if not isinstance(d, dict):
            raise ValueError(f"a JSON {type(d).__name__}, not an object")
        for key in ("time", "user", "dataset"):
            if key not in d:
                raise ValueError(f"no {key!r}")
        strings = {"time": d["time"], "user": d["user"], "dataset": d["dataset"]}
        strings |= {"command": d.get("command", ""), "event": d.get("event", "tag")}
        for key, value in strings.items():
            if not isinstance(value, str):
                raise ValueError(f"{key!r} is a {type(value).__name__}, not a string")
        if not _TIME.fullmatch(d["time"]):
            raise ValueError(f"'time' {d['time'][:40]!r} is not YYYY-MM-DDTHH:MM:SSZ")
        try:
            time.strptime(d["time"], _TIME_FORMAT)
        except ValueError:
            raise ValueError(f"'time' {d['time']!r} is not a date") from None
        if not _NAME.fullmatch(d["dataset"]):
            raise ValueError(f"'dataset' {d['dataset'][:80]!r} is not a dataset name")
        if not _EVENT.fullmatch(strings["event"]):
            raise ValueError(f"'event' {strings['event'][:40]!r} is not an event")
        tag = d.get("tag")
        if tag is not None and not (isinstance(tag, str) and _NAME.fullmatch(tag)):
            raise ValueError(f"'tag' {str(tag)[:80]!r} is not a tag name")
        digests = {"old": d.get("old"), "new": d.get("new")}
        for key, value in digests.items():
            if value is not None and not (isinstance(value, str) and is_digest(value)):
                raise ValueError(f"{key!r} {str(value)[:80]!r} is not a digest")
        return cls(
            time=d["time"],
            user=d["user"],
            dataset=d["dataset"],
            tag=tag,
            old=digests["old"],
            new=digests["new"],
            command=strings["command"],
            event=strings["event"],
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
            time=time.strftime(_TIME_FORMAT, time.gmtime()),
            user=user,
            dataset=dataset,
            tag=tag,
            old=old,
            new=new,
            command=command,
            event=event,
        )

    @property
    def timestamp(self) -> float:
        """``time`` as seconds since the epoch (an entry read from a log always has one)."""
        return float(calendar.timegm(time.strptime(self.time, _TIME_FORMAT)))

    def named(self) -> list[str]:
        """The digests the entry names: the old and new value of a tag, a recorded overlay."""
        return [d for d in (self.old, self.new) if d is not None]

    def to_line(self) -> str:
        """The entry as one line of a log, newline included."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class DamagedLine(FieldDict):
    """A line of a log that is not an entry: skipped by every reader, reported by verify."""

    line: int  # counted from 1
    reason: str


class RefLog(list[LogEntry]):
    """A log's entries, oldest first (a list), with the lines that were skipped as damaged."""

    __slots__ = ("damaged",)

    def __init__(
        self, entries: Iterable[LogEntry] = (), damaged: Iterable[DamagedLine] = ()
    ) -> None:
        super().__init__(entries)
        self.damaged: tuple[DamagedLine, ...] = tuple(damaged)


def parse_log(data: str | bytes, *, dataset: str | None = None) -> RefLog:
    """The entries of a log's bytes (or text), oldest first. A line that is not an entry is
    skipped and reported in ``damaged``, never fatal: a line torn by a crash mid-append (also
    in the middle of a multi-byte character), a line of wrong types, and, given ``dataset``,
    one naming another dataset. Only ``\\n`` ends a line."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    entries: list[LogEntry] = []
    damaged: list[DamagedLine] = []
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        obj, reason = read_line(line)
        if reason is None:
            try:
                entry = LogEntry.from_dict(obj)
            except ValueError as e:
                reason = str(e)
        if reason is not None:
            damaged.append(DamagedLine(line=n, reason=reason))
            continue
        if dataset is not None and entry.dataset != dataset:
            damaged.append(
                DamagedLine(line=n, reason=f"names dataset {entry.dataset!r}, not {dataset!r}")
            )
            continue
        entries.append(entry)
    return RefLog(entries, damaged)
