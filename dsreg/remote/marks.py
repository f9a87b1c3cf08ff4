"""Yanks and retirements between registries: a remote's ``yanked/<dataset>/<tag>`` and
``retired/<dataset>/<successor>`` refs are pushed, pulled and cloned as its tags are, through the
same code (``RemoteStore.with_refs``: the remote with those refs in place of its tags), each
naming its mark object, sent and fetched like every object (re-hashed, then checked to be the
mark of that dataset and name).

A push of a dataset makes the remote's marks of it this registry's: the marks sent after the
tags (each written by compare-and-swap, logged there as ``yank`` or ``retire``), and a mark the
remote holds that is lifted here removed (logged ``unyank``, or ``retire`` for a retirement
replaced). A pull or clone brings the remote's marks of the datasets it brings; a mark that is
damaged there is refused and named, as a damaged tag is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from dsreg._util.progress import ProgressHook
from dsreg.errors import DsregError
from dsreg.registry.folder import Registry
from dsreg.registry.marks import RETIRED, YANKED, parse_mark
from dsreg.registry.refs import RefStore
from dsreg.remote.fetch import Fetch
from dsreg.remote.objects import present, send
from dsreg.remote.refs import RefUpdate, delete_ref, describe_state, update_ref, write_index
from dsreg.remote.store import RemoteStore, TagName, Target

__all__ = ["KINDS", "fetch_marks", "push_marks"]

#: Each kind of mark: its ref folder, and the log event of setting (and of lifting) one.
KINDS: Final = ((YANKED, "yank", "unyank"), (RETIRED, "retire", "retire"))


def _remote_refs(rm: RemoteStore, datasets: Iterable[str]) -> dict[TagName, str | bytes]:
    out: dict[TagName, str | bytes] = {}
    for ds in sorted(set(datasets)):
        found = rm.scan_refs(ds)
        out.update(found.good)
        out.update(found.damaged)
    return out


def push_marks(
    reg: Registry,
    rs: RemoteStore,
    datasets: Iterable[str],
    *,
    jobs: int,
    progress: ProgressHook,
    command: str,
) -> list[RefUpdate]:
    """Make the remote's yanks and retirements of ``datasets`` this registry's (module
    docstring): mark objects first, then the refs; what moved."""
    names = sorted(set(datasets))
    moved: list[RefUpdate] = []
    for folder, event, lifted in KINDS:
        local, rm = RefStore(reg.root, refs=folder), rs.with_refs(folder)
        there = _remote_refs(rm, names)
        targets = [Target(ds, n, d) for ds in names for n, d in local.tags(ds).items()]
        todo = sorted(
            {t.digest for t in targets} - present(rs, {t.digest for t in targets}, jobs=jobs)
        )
        if todo:
            with reg.lock():
                send(rs, reg.store, todo, jobs=jobs, progress=progress)
        for t in targets:
            assert t.dataset is not None and t.tag is not None and t.tag_name is not None
            now = there.get(t.tag_name)
            if now != t.digest:
                update_ref(
                    rm, t.dataset, t.tag, t.digest, expected=now, command=command, event=event
                )
                moved.append(
                    RefUpdate(
                        dataset=t.dataset,
                        tag=t.tag,
                        revision=t.digest,
                        previous=now if isinstance(now, str) else None,
                        status=event,
                    )
                )
        wanted = {t.tag_name for t in targets}
        for name, value in sorted(there.items()):
            if name not in wanted and isinstance(value, str):
                delete_ref(
                    rm, name.dataset, name.tag, expected=value, command=command, event=lifted
                )
                moved.append(
                    RefUpdate(
                        dataset=name.dataset,
                        tag=name.tag,
                        revision=value,
                        previous=value,
                        status=lifted,
                    )
                )
        if moved:
            write_index(rm, set(rm.tag_names()))
    return moved


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedMarks:
    """What a pull or clone brought of marks (``updates``) and refused (``refused``)."""

    updates: tuple[RefUpdate, ...]
    refused: dict[TagName, str]


def fetch_marks(fetch: Fetch, datasets: Iterable[str], *, command: str) -> FetchedMarks:
    """Fetch, verified, the remote's yanks and retirements of ``datasets`` and set them here
    (this registry's marks of those datasets follow the remote's where it has one)."""
    updates: list[RefUpdate] = []
    refused: dict[TagName, str] = {}
    for folder, event, _lifted in KINDS:
        rm = fetch.rs.with_refs(folder)
        good: list[Target] = []
        for name, value in sorted(_remote_refs(rm, datasets).items()):
            if not isinstance(value, str):
                refused[name] = f"(a {event} mark) is {describe_state(value)}"
                continue
            try:
                fetch.objects([value])
                parse_mark(
                    fetch.reg.store.read_bytes(value),
                    kind=event,
                    dataset=name.dataset,
                    name=name.tag,
                )
            except DsregError as e:
                refused[name] = f"(a {event} mark): {e}"
                continue
            good.append(Target(name.dataset, name.tag, value))
        local = RefStore(fetch.reg.root, refs=folder)
        updates += fetch.write_tags(good, force=True, command=command, refs=local, event=event)
    return FetchedMarks(updates=tuple(updates), refused=refused)
