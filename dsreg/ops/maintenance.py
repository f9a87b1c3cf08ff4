"""``dsreg verify``: objects checked; ``dsreg gc``: unreachable objects removed."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import IntegrityError
from dsreg.objects.batch import STAGE_PREFIX
from dsreg.objects.digest import short
from dsreg.repo.reachable import Problem, reachable, roots
from dsreg.repo.registry import Registry

# Problem, reachable and roots live in dsreg.repo.reachable, the one walk; they are named here
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
    checked: int
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
        }


def verify(
    reg: Registry, *, specs: Iterable[str] = (), progress: ProgressHook = no_progress
) -> VerifyResult:
    """Re-hash objects and check manifests against their schemas; with no specs, everything."""
    specs = list(specs)
    problems: list[Problem] = []
    if specs:
        starts = [reg.resolve(s).digest for s in specs]
        targets, problems = reachable(reg, starts)
    else:
        # Every stored object, and every object a tag reaches (a missing one is a problem).
        reached, problems = reachable(reg, roots(reg))
        targets = set(reg.store) | reached
        for ds, tag, d in reg.refs.all():
            if not reg.store.has(d):
                problems.append(
                    Problem(digest=d, problem=f"ref {ds}@{tag} points at a missing object")
                )
    ordered = sorted(targets)
    done = 0

    def one(d: str) -> Problem | None:
        what = reg.store.check(d)
        if what is None and reg.is_manifest(d):
            try:
                reg.manifest(d)
            except IntegrityError as e:
                what = str(e)
        return None if what is None else Problem(digest=d, problem=what)

    with ThreadPoolExecutor(max_workers=_JOBS) as pool:
        for p in pool.map(one, ordered, chunksize=64):
            done += 1
            if p is not None:
                problems.append(p)
            if done % 512 == 0 or done == len(ordered):
                progress("verifying", done, len(ordered))
    unique = {(p.digest, p.problem): p for p in problems}
    if unique:
        # A missing or damaged object: no remembered scan may vouch for its revision any
        # more, so the next add of such a tree stores what it can again.
        reg.state.forget_scans()
    return VerifyResult(
        checked=len(ordered), problems=tuple(sorted(unique.values(), key=lambda p: p.digest))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GcResult:
    kept: int
    removed: tuple[str, ...]
    bytes: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "removed": list(self.removed),
            "bytes": self.bytes,
            "dry_run": self.dry_run,
        }


def collect_garbage(reg: Registry, *, dry_run: bool = False) -> GcResult:
    """Remove every object no ref (and no logged overlay) reaches; never one a ref reaches.

    If any reachable manifest or table cannot be read, nothing is removed: what it would reach
    cannot be known.
    """
    with reg.lock(exclusive=True):
        keep, problems = reachable(reg, roots(reg))
        if problems:
            raise IntegrityError(
                "gc removed nothing: reachable content cannot be read ("
                + "; ".join(f"{short(p.digest)}: {p.problem}" for p in problems[:3])
                + "); run 'dsreg verify' and repair first"
            )
        remove = sorted(d for d in reg.store if d not in keep)
        if remove and not dry_run:
            # Before anything goes: a remembered scan may name a revision whose objects are
            # about to be removed (state.py).
            reg.state.forget_scans()
        size = 0
        for d in remove:
            try:
                size += reg.store.path(d).stat().st_size
            except OSError:
                continue
            if not dry_run:
                reg.store.remove(d)
        if not dry_run:
            _clean_tmp(reg)
        return GcResult(kept=len(keep), removed=tuple(remove), bytes=size, dry_run=dry_run)


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
