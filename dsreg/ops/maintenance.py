"""``dsreg verify``: objects checked; ``dsreg gc``: unreachable objects removed."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, IntegrityError
from dsreg.objects.batch import STAGE_PREFIX
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.marks import mark_objects, mark_problems
from dsreg.registry.reachable import (
    DEFAULT_LOG_EXPIRY,
    Problem,
    log_expiry,
    logged,
    parse_duration,
    reachable,
    roots,
)
from dsreg.registry.reader import Resolved
from dsreg.registry.results import recorded_digests, result_objects, result_problems
from dsreg.remote.config import default_remote

# Problem, reachable and roots live in dsreg.registry.reachable, the one walk; they are named here
# too because verify's result carries Problems and callers of gc and verify ask what they keep.
__all__ = [
    "GcResult",
    "Problem",
    "VerifyResult",
    "collect_garbage",
    "reachable",
    "roots",
    "verify",
]

_JOBS = max(4, min(32, (os.cpu_count() or 1) * 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyResult:
    """What verify found. ``problems``: damage (an object missing, corrupt or unreadable, a
    damaged ref or log line, a tag naming another dataset's revision). ``not_fetched``: payloads
    a lazy registry has not fetched yet (they come from ``remote`` on demand): not damage."""

    checked: int
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    not_fetched: tuple[str, ...] = field(default_factory=tuple)
    remote: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """``checked``, ``ok``, ``problems``, and where payloads are not fetched yet,
        ``not_fetched`` (their digests) and ``remote`` (where they come from)."""
        out: dict[str, Any] = {
            "checked": self.checked,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
        }
        if self.not_fetched:
            out |= {"not_fetched": list(self.not_fetched), "remote": self.remote}
        return out


def verify(
    reg: Registry, *, revisions: Iterable[Resolved] = (), progress: ProgressHook = no_progress
) -> VerifyResult:
    """Re-hash objects and check manifests against their schemas: what ``revisions`` reach;
    with none, everything, and every tag and log line too.

    A payload blob that is absent from a registry with a default remote (a clone: payloads come
    on demand, docs/remotes.md) is *not fetched*, reported apart from problems; in a registry
    without one it is missing, a problem. A manifest or table is never fetched lazily: absent,
    it is missing either way.
    """
    starts = [r.digest for r in revisions]
    problems: list[Problem] = []
    if starts:
        targets, problems = reachable(reg, starts)
    else:
        # Every stored object, and every object a tag or a recent log line reaches (a missing
        # one is a problem).
        reached, problems = reachable(reg, roots(reg))
        # Recorded results: their records and predictions, and any that cannot be used.
        recorded, unusable = result_problems(reg, logged(reg))
        targets = set(reg.store) | reached | recorded
        problems += _ref_problems(reg) + _log_problems(reg) + unusable + _mark_problems(reg)
    # Objects the walk could not read (a missing manifest or table among them): never payloads.
    unread = {p.digest for p in problems}
    ordered = sorted(targets)
    done = 0

    def problem_of(d: str) -> Problem | None:
        what = reg.store.check(d)
        if what is None and reg.is_manifest(d):
            try:
                reg.manifest(d, recheck=True)  # every check, whatever the memo says
            except IntegrityError as e:
                what = str(e)
        return None if what is None else Problem(digest=d, problem=what)

    absent: list[Problem] = []
    with ThreadPoolExecutor(max_workers=_JOBS) as pool:
        for p in pool.map(problem_of, ordered, chunksize=64):
            done += 1
            if p is not None:
                (absent if p.problem == "missing" and p.digest not in unread else problems).append(
                    p
                )
            if done % 512 == 0 or done == len(ordered):
                progress("verifying", done, len(ordered))
    remote = default_remote(reg) if absent else None
    not_fetched: tuple[str, ...] = ()
    if remote is not None:
        not_fetched = tuple(sorted(p.digest for p in absent))
    else:
        problems += absent
    unique = {(p.digest, p.problem): p for p in problems}
    if unique:
        # A missing or damaged object: no remembered scan may vouch for its revision any
        # more, so the next add of such a tree stores what it can again.
        reg.state.forget_scans()
    return VerifyResult(
        checked=len(ordered),
        problems=tuple(sorted(unique.values(), key=lambda p: p.digest)),
        not_fetched=not_fetched,
        remote=remote,
    )


def _ref_problems(reg: Registry) -> list[Problem]:
    """Tags pointing at a missing object, or at another dataset's revision."""
    out = []
    for ds, tag, d in reg.refs.all():
        if not reg.store.has(d):
            out.append(Problem(digest=d, problem=f"ref {ds}@{tag} points at a missing object"))
            continue
        try:
            owner = reg.dataset_of(reg.revision(d))
        except DsregError as e:
            out.append(Problem(digest=d, problem=f"ref {ds}@{tag} names no usable revision: {e}"))
            continue
        if owner != ds:
            out.append(
                Problem(
                    digest=d,
                    problem=f"ref {ds}@{tag} names a revision of dataset {owner!r}, not of "
                    f"{ds!r}: refused when read; point it at a revision of {ds!r} with "
                    f"'dsreg tag --force {ds}@{tag} <revision>'",
                )
            )
    return out


def _mark_problems(reg: Registry) -> list[Problem]:
    """Yanks and retirements that cannot be used (each is served as if absent): the digest
    named, or the ref's path for a damaged ref file."""
    return [
        Problem(
            digest=m.digest or m.ref,
            problem=f"mark {m.ref} cannot be used, so it is ignored: {m.problem}; set it again "
            "('dsreg yank' or 'dsreg retire') or remove the file",
        )
        for m in mark_problems(reg.root)
    ]


def _log_problems(reg: Registry) -> list[Problem]:
    """Damaged log lines: every command skips them; verify names each by file and line."""
    out = []
    for ds in reg.refs.logged_datasets():
        for bad in reg.refs.log(ds).damaged:
            out.append(
                Problem(
                    digest=f"logs/{ds}.jsonl:{bad.line}",
                    problem=f"damaged log line ({bad.reason}): every command skips it; "
                    "remove it from the file, or leave it",
                )
            )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class GcResult:
    """What gc removed (or would: ``dry_run``), and what it kept. ``logged``: revisions and
    overlays kept only because a log line younger than ``log_expiry`` names them (a tag's old
    value, an overlay made and not applied by a tag); ``damaged_log_lines``: lines every command
    skips (``dsreg verify`` names them)."""

    kept: int
    removed: tuple[str, ...]
    bytes: int
    dry_run: bool
    logged: int = 0
    log_expiry: str = DEFAULT_LOG_EXPIRY
    damaged_log_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        """``kept``, ``removed``, ``bytes``, ``dry_run``; ``logged`` and ``log_expiry`` when
        the log alone keeps something, ``damaged_log_lines`` when there are any."""
        out: dict[str, Any] = {
            "kept": self.kept,
            "removed": list(self.removed),
            "bytes": self.bytes,
            "dry_run": self.dry_run,
        }
        if self.logged:
            out |= {"logged": self.logged, "log_expiry": self.log_expiry}
        if self.damaged_log_lines:
            out["damaged_log_lines"] = self.damaged_log_lines
        return out


def collect_garbage(
    reg: Registry,
    *,
    dry_run: bool = False,
    prune_log_older_than: str | None = None,
    progress: ProgressHook = no_progress,
) -> GcResult:
    """Remove every object that no tag, and no log line younger than the log's expiry, reaches;
    never one a tag reaches.

    Log lines keep what they name for ``[gc] log_expiry`` (default 90 days, as git's reflog):
    the old value of a moved tag, an overlay made and not yet tagged. ``prune_log_older_than``
    (``90d``, ``2w``, ``now``, …) is the explicit way to let them go sooner; the log itself is
    never rewritten. If any reachable manifest or table cannot be read, nothing is removed:
    what it would reach cannot be known. ``progress("removing", done, total)`` hears of each
    object removed (``"sizing"`` on a dry run).
    """
    if prune_log_older_than is None:
        expiry_text = str(reg.config.get("gc", {}).get("log_expiry", DEFAULT_LOG_EXPIRY))
        expiry = log_expiry(reg)
    else:
        expiry_text = prune_log_older_than.strip().lower()
        expiry = parse_duration(prune_log_older_than)
    with reg.lock(exclusive=True):
        named = logged(reg, expiry=expiry)
        tagged = [d for _, _, d in reg.refs.all()]
        keep, problems = reachable(reg, [*tagged, *(d for d in named if reg.is_manifest(d))])
        if problems:
            raise IntegrityError(
                "gc removed nothing: reachable content cannot be read ("
                + "; ".join(f"{short(p.digest)}: {p.problem}" for p in problems[:3])
                + "); run 'dsreg verify' and repair first"
            )
        # A log line may name an object that is no manifest (a hand edit): kept, never walked.
        keep.update(named)
        # Recorded results (model refs and their logged old values) and their predictions.
        keep.update(result_objects(reg, named))
        keep.update(mark_objects(reg.root))  # yanks and retirements
        remove = _top_down(reg, [d for d in reg.store if d not in keep])
        if remove and not dry_run:
            # Before anything goes: a remembered scan may name a revision whose objects are
            # about to be removed (state.py).
            reg.state.forget_scans()
        size = 0
        task = "sizing" if dry_run else "removing"
        for i, d in enumerate(remove, start=1):
            try:
                size += reg.store.path(d).stat().st_size
            except OSError:
                continue
            if not dry_run:
                reg.store.remove(d)
            progress(task, i, len(remove))
        if not dry_run:
            _clean_tmp(reg)
        damaged = sum(len(reg.refs.log(ds).damaged) for ds in reg.refs.logged_datasets())
        return GcResult(
            kept=len(keep),
            removed=tuple(sorted(remove)),
            bytes=size,
            dry_run=dry_run,
            logged=len(set(named) - _named_by_tags(reg, tagged) - recorded_digests(reg)),
            log_expiry=expiry_text,
            damaged_log_lines=damaged,
        )


# Removal order: what names others first. A gc killed midway then leaves no object whose
# children are gone (a revision without its snapshot, a snapshot without its table), so that a
# log line naming a half-removed revision never makes the next verify or gc fail.
_ORDER = {"revision": 0, "overlay": 1, "snapshot": 2}


def _top_down(reg: Registry, digests: list[str]) -> tuple[str, ...]:
    return tuple(sorted(digests, key=lambda d: (_ORDER.get(reg.manifest_kind(d) or "", 3), d)))


def _named_by_tags(reg: Registry, tagged: list[str]) -> set[str]:
    """What the tags' revisions name directly (themselves, their snapshots and overlays): a
    log-named object outside it is kept by the log alone (a revision is named by no other)."""
    out = set(tagged)
    for d in set(tagged):
        with contextlib.suppress(DsregError):  # the walk has read it already
            rev = reg.revision(d)
            out.update((rev.snapshot, *rev.overlays))
    return out


def _clean_tmp(reg: Registry) -> None:
    # Under the exclusive lock no add is running, but a tag or checkout might be: spare the
    # last hour's files.
    cutoff = time.time() - 3600
    if not reg.store.tmp.is_dir():
        return
    for e in os.scandir(reg.store.tmp):
        try:
            if e.is_file() and e.stat().st_mtime < cutoff:
                os.unlink(e.path)
            elif e.name.startswith(STAGE_PREFIX) and e.is_dir() and e.stat().st_mtime < cutoff:
                # An add's staging folder that a crash left behind (no add runs under gc's lock).
                shutil.rmtree(e.path, ignore_errors=True)
        except OSError:
            continue
