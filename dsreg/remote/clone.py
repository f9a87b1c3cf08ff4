"""``dsreg clone``: a new registry from a remote, with its tags, its history, its manifests and
tables; payloads come later (``pull``, ``open(remote=)``, ``checkout``).

Nothing of the remote is taken on trust. A tag that is damaged or names no revision of its own
dataset is not written (the clone ends with an error naming it). A log line is copied only if
it is an entry of the right types for its dataset and every digest it names is a manifest of
that dataset fetched whole with the clone: the revisions the tags reach, and those the history
names (a tag's value before a forced move) when the remote holds them whole. Any other line is
skipped and reported, so nothing in a clone's log names what the clone cannot read.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsreg._util.jsonread import read_line
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, InvalidInputError, RemoteError, RevisionNotFoundError
from dsreg.formats.names import check_name
from dsreg.objects.digest import is_digest, short
from dsreg.registry.folder import DIRNAME, Registry
from dsreg.registry.refs import LogEntry
from dsreg.remote.config import add_remote, check_options, jobs_for, normalize_url
from dsreg.remote.fetch import (
    Closure,
    check_whole,
    fetch_closure,
    foreign_tags,
    owner,
    refused_error,
    set_local_refs,
)
from dsreg.remote.refs import RefUpdate, describe_state
from dsreg.remote.store import RemoteStore

__all__ = ["CloneResult", "SkippedLine", "clone"]

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_EVENT = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedLine:
    """A line of a remote's log that a clone did not copy, and why."""

    dataset: str
    line: int  # counted from 1
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "line": self.line, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class CloneResult:
    registry: str
    remote: str
    url: str
    refs: tuple[RefUpdate, ...]
    fetched: int
    bytes: int
    skipped: tuple[SkippedLine, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "registry": self.registry,
            "remote": self.remote,
            "url": self.url,
            "refs": [r.to_dict() for r in self.refs],
            "objects_fetched": self.fetched,
            "bytes_fetched": self.bytes,
            "log_lines_skipped": [s.to_dict() for s in self.skipped],
        }


def clone(
    url: str,
    path: str | os.PathLike[str] | None = None,
    *,
    name: str = "origin",
    options: dict[str, Any] | None = None,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> CloneResult:
    """A new registry at ``path`` (default ``./.dsreg``) with the remote's tags, logs, manifests
    and tables; payload blobs come later (``pull``, ``open(remote=)``, ``checkout``).

    Refused tags (damaged, or naming another dataset's revision) are not written: the clone is
    made with the others and an ``IntegrityError`` names them; with none left, nothing is made.
    """
    check_name(name, what="remote name")
    url = normalize_url(url)
    opts = check_options(options or {})
    root = Path(path if path is not None else Path.cwd() / DIRNAME).absolute()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InvalidInputError(f"{root} exists and is not empty; clone into a new folder")
    rs = RemoteStore(name=name, url=url, options=opts)
    found, damaged = rs.scan_refs(progress=progress)
    if not found and not damaged:
        raise RevisionNotFoundError(
            f"remote {url} holds no tags: nothing to clone; check the URL (a dsreg remote holds "
            "refs/, logs/ and files/blake3/)"
        )
    refused = {k: f"is {describe_state(v)}" for k, v in damaged.items()}
    created = not root.exists()
    try:
        reg = Registry.init(root)
        add_remote(reg, name, url, options=opts, default=True)
        n_jobs = jobs_for(reg, rs, jobs)
        targets = [(ds, t, d) for (ds, t), d in sorted(found.items())]
        # Held until the tags are written: nothing fetched is unreachable to a gc meanwhile.
        with reg.lock():
            foreign, checked = foreign_tags(reg, rs, targets, jobs=n_jobs, progress=progress)
            refused |= foreign
            good = [t for t in targets if (t[0], t[1]) not in refused]
            if not good:
                raise refused_error(rs, refused, "Nothing was cloned")
            closure = fetch_closure(
                reg,
                rs,
                sorted({d for _, _, d in good}),
                payloads=False,
                jobs=n_jobs,
                progress=progress,
            )
            history = _History(reg, rs, closure, jobs=n_jobs)
            skipped = [s for ds in sorted({ds for ds, _ in found}) for s in history.copy(ds)]
            check_whole(reg, history.closure)
            updates = set_local_refs(reg, good, force=False, command=command)
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        raise
    if refused:
        raise refused_error(rs, refused, f"The clone at {root} holds the other {len(updates)} tags")
    return CloneResult(
        registry=str(root),
        remote=name,
        url=url,
        refs=tuple(updates),
        fetched=checked.fetched + closure.fetched + history.fetched,
        bytes=checked.bytes + closure.bytes + history.bytes,
        skipped=tuple(skipped),
    )


class _History:
    """Copies a remote's logs into a new registry, line by line, checked (module docstring)."""

    def __init__(self, reg: Registry, rs: RemoteStore, closure: Closure, *, jobs: int) -> None:
        self.reg = reg
        self.rs = rs
        self.jobs = jobs
        self.closure = closure
        self.fetched = 0
        self.bytes = 0
        self._reached = set(closure.reached)
        # (dataset, digest) -> None if a line of that dataset may name it, else why not.
        self._verdicts: dict[tuple[str, str], str | None] = {}

    def copy(self, dataset: str) -> list[SkippedLine]:
        """Append the remote's valid lines for ``dataset`` to the local log; the others."""
        entries: list[LogEntry] = []
        skipped: list[SkippedLine] = []
        for n, line in enumerate(self.rs.log_bytes(dataset).split(b"\n"), start=1):
            if not line.strip():
                continue
            entry = _entry(line, dataset)
            if isinstance(entry, str):
                skipped.append(SkippedLine(dataset=dataset, line=n, reason=entry))
                continue
            named = [d for d in (entry.old, entry.new) if d is not None]
            why = next((w for d in named if (w := self._verdict(dataset, d)) is not None), None)
            if why is not None:
                skipped.append(SkippedLine(dataset=dataset, line=n, reason=why))
                continue
            entries.append(entry)
        self.reg.refs.append_log(dataset, entries)
        self.closure = Closure(
            fetched=self.closure.fetched,
            bytes=self.closure.bytes,
            reached=frozenset(self._reached),
        )
        return skipped

    def _verdict(self, dataset: str, digest: str) -> str | None:
        key = (dataset, digest)
        if key not in self._verdicts:
            self._verdicts[key] = self._judge(dataset, digest)
        return self._verdicts[key]

    def _judge(self, dataset: str, digest: str) -> str | None:
        if digest not in self._reached:
            # A revision only the history names: fetched whole (no payloads) if the remote can.
            try:
                got = fetch_closure(
                    self.reg,
                    self.rs,
                    [digest],
                    payloads=False,
                    jobs=self.jobs,
                    progress=no_progress,
                )
            except RemoteError:
                raise
            except DsregError as e:
                return f"names {short(digest)}, which the remote cannot give whole: {e}"
            self._reached |= got.reached
            self.fetched += got.fetched
            self.bytes += got.bytes
        if not self.reg.is_manifest(digest):
            return f"names {short(digest)}, which is not a revision, snapshot or overlay"
        try:
            of, why = owner(self.reg, digest)
        except DsregError as e:
            return f"names {short(digest)}, which cannot be read: {e}"
        if of is None:
            return why
        if of != dataset:
            return f"names {short(digest)}, of dataset {of!r}, not {dataset!r}"
        return None


def _entry(line: bytes, dataset: str) -> LogEntry | str:
    """The entry a line holds, or why it holds none (for the report)."""
    obj, reason = read_line(line)
    if reason is not None:
        return reason
    if not isinstance(obj, dict):
        return "not a JSON object"
    strings = ("time", "user", "dataset", "command", "event")
    wrong = [k for k in strings if k in obj and not isinstance(obj[k], str)]
    if wrong or any(k not in obj for k in ("time", "user", "dataset")):
        return f"fields missing or not strings ({', '.join(wrong) or 'time, user, dataset'})"
    try:
        entry = LogEntry.from_dict(obj)
        time.strptime(entry.time, _TIME_FORMAT)
    except (KeyError, TypeError, ValueError) as e:
        return f"not a log entry ({str(e)[:80]})"
    if entry.dataset != dataset:
        return f"names dataset {entry.dataset[:80]!r}, not {dataset!r}"
    if not _EVENT.fullmatch(entry.event):
        return f"event {entry.event[:40]!r} is not an event name"
    if entry.tag is not None:
        try:
            check_name(entry.tag, what="tag")
        except (DsregError, TypeError):
            return f"tag {str(entry.tag)[:80]!r} is not a tag name"
    for d in (entry.old, entry.new):
        if d is not None and not (isinstance(d, str) and is_digest(d)):
            return f"{str(d)[:80]!r} is not a digest"
    return entry
