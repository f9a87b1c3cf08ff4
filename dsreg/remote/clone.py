"""``dsreg clone``: a new registry from a remote, with its tags, its history, its manifests and
tables, and its recorded results (model refs, records and predictions: ``results.py``);
payloads come later (``pull``, ``open(remote=)``, ``checkout``).

Nothing of the remote is taken on trust. A tag that is damaged or names no revision of its own
dataset is not written (the clone ends with an error naming it). A log line is copied only if
it is an entry of the right types for its dataset and every digest it names is a manifest of
that dataset fetched whole with the clone: the revisions the tags reach, and those the history
names (a tag's value before a forced move) when the remote holds them whole; a ``result`` line
names a result record of that dataset's model, fetched and checked with its predictions. Any
other line is skipped and reported, so nothing in a clone's log names what the clone cannot
read.
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
from dsreg.errors import (
    DsregError,
    IntegrityError,
    InvalidInputError,
    RemoteError,
    RevisionNotFoundError,
)
from dsreg.formats.names import check_name
from dsreg.objects.digest import is_digest, short
from dsreg.registry.folder import DIRNAME, Registry
from dsreg.registry.refs import LogEntry
from dsreg.registry.results import EVENT, result_refs
from dsreg.remote.config import add_remote, check_options, jobs_for, normalize_url
from dsreg.remote.fetch import Fetch, owner, refused_error
from dsreg.remote.refs import RefUpdate, damaged_reasons
from dsreg.remote.results import fetch_marks, fetch_results, fetched_result, remote_model_refs
from dsreg.remote.store import RemoteStore, Target

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
    """What a clone made: the new registry, the remote it names, the tags, model refs, yanks and
    retirements written, what was fetched, and the log lines not copied."""

    registry: str
    remote: str
    url: str
    refs: tuple[RefUpdate, ...]
    fetched: int
    bytes: int
    skipped: tuple[SkippedLine, ...] = field(default_factory=tuple)
    results: tuple[RefUpdate, ...] = field(default_factory=tuple)
    marks: tuple[RefUpdate, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "registry": self.registry,
            "remote": self.remote,
            "url": self.url,
            "refs": [r.to_dict() for r in self.refs],
            "results": [r.to_dict() for r in self.results],
            "marks": [r.to_dict() for r in self.marks],
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
    found = rs.scan_refs(progress=progress)
    if not found.good and not found.damaged:
        raise RevisionNotFoundError(
            f"remote {url} holds no tags: nothing to clone; check the URL (a dsreg remote holds "
            "refs/, logs/ and files/blake3/)"
        )
    refused = damaged_reasons(found)
    created = not root.exists()
    try:
        reg = Registry.init(root)
        add_remote(reg, name, url, options=opts, default=True)
        targets = [Target(tag.dataset, tag.tag, d) for tag, d in sorted(found.good.items())]
        # Held until the tags are written: nothing fetched is unreachable to a gc meanwhile.
        with Fetch(reg, rs, jobs=jobs_for(reg, rs, jobs), progress=progress) as fetch:
            refused |= fetch.refused_tags(targets)
            good = [t for t in targets if t.tag_name not in refused]
            if not good:
                raise refused_error(rs, refused, "Nothing was cloned")
            fetch.closure(sorted({t.digest for t in good}), payloads=False)
            brought = fetch_results(fetch, remote_model_refs(rs))
            history = _History(fetch)
            datasets = sorted({tag.dataset for tag in found.good})
            skipped = [line for ds in datasets for line in history.copy(ds)]
            updates = fetch.write_tags(good, force=False, command=command)
            results = fetch.write_tags(
                brought.good, force=False, command=command, refs=result_refs(reg), event=EVENT
            )
            marks = fetch_marks(fetch, {t.dataset for t in good if t.dataset}, command=command)
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        raise
    if refused or brought.refused or marks.refused:
        raise refused_error(
            rs,
            {**refused, **brought.refused, **marks.refused},
            f"The clone at {root} holds the other {len(updates)} tags and {len(results)} model "
            "refs",
        )
    return CloneResult(
        registry=str(root),
        remote=name,
        url=url,
        refs=tuple(updates),
        results=tuple(results),
        marks=marks.updates,
        fetched=fetch.fetched,
        bytes=fetch.bytes,
        skipped=tuple(skipped),
    )


class _History:
    """Copies a remote's logs into a new registry, line by line, checked (module docstring).
    What a line names that the clone's closure did not reach comes through ``fetch``."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self.reg = fetch.reg
        self.rs = fetch.rs
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
            model = entry.tag if entry.event == EVENT else None
            why = next(
                (w for d in named if (w := self._verdict(dataset, d, model)) is not None), None
            )
            if why is not None:
                skipped.append(SkippedLine(dataset=dataset, line=n, reason=why))
                continue
            entries.append(entry)
        self.reg.refs.append_log(dataset, entries)
        return skipped

    def _verdict(self, dataset: str, digest: str, model: str | None) -> str | None:
        key = (dataset, digest)
        if key not in self._verdicts:
            self._verdicts[key] = (
                self._judge(dataset, digest)
                if model is None
                else self._result(dataset, digest, model)
            )
        return self._verdicts[key]

    def _result(self, dataset: str, digest: str, model: str) -> str | None:
        """Why a ``result`` line may not name ``digest`` (``None`` if it may): the record of
        ``dataset``'s ``model``, fetched whole with its predictions."""
        try:
            fetched_result(self.fetch, dataset, model, digest)
        except IntegrityError as e:
            return str(e)
        return None

    def _judge(self, dataset: str, digest: str) -> str | None:
        if digest not in self.fetch.reached:
            # A revision only the history names: fetched whole (no payloads) if the remote can.
            try:
                self.fetch.closure([digest], payloads=False)
            except RemoteError:
                raise
            except DsregError as e:
                return f"names {short(digest)}, which the remote cannot give whole: {e}"
        if not self.reg.is_manifest(digest):
            return f"names {short(digest)}, which is not a revision, snapshot or overlay"
        try:
            of = owner(self.reg, digest)
        except DsregError as e:
            return f"names {short(digest)}, which cannot be read: {e}"
        if of.dataset is None:
            return of.why
        if of.dataset != dataset:
            return f"names {short(digest)}, of dataset {of.dataset!r}, not {dataset!r}"
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
