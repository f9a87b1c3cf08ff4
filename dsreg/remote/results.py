"""Refs that travel with tags: recorded results, and yanks and retirements.

Recorded results between registries: a remote's model refs, ``results/<dataset>/<model>``,
are pushed, pulled, cloned and read as its tags are, through the same code
(``RemoteStore.results()`` is the remote with its model refs in place of its tags).

A result travels with the revisions of its snapshot: a push sends the model refs of the datasets
it pushes whose record names the snapshot of a revision it pushes, their records and their
predictions (objects first, then the tags, then the model refs, so that a remote model ref
certifies that its result and the revisions of its snapshot are whole there). A pull or clone
brings the remote's model refs of the datasets it brings whose snapshot it holds, each record
and its predictions fetched and re-hashed like every object, and checked before the ref is
written here: the record names that dataset and model, and the predictions hold what it says.
A model ref that is damaged there, or names a record that is not its own, is refused and named,
as a damaged tag is.

Yanks and retirements between registries: a remote's ``yanked/<dataset>/<tag>`` and
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

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

from dsreg._util.progress import ProgressHook
from dsreg.errors import DsregError, IntegrityError, ObjectNotFoundError
from dsreg.formats.manifests import Revision
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.markrefs import RETIRED, YANKED
from dsreg.registry.marks import parse_mark
from dsreg.registry.refs import RefStore
from dsreg.registry.results import (
    ResultRecord,
    list_results,
    load_predictions,
    read_result,
)
from dsreg.remote.fetch import Fetch
from dsreg.remote.history import MARK_EVENTS, Outgoing
from dsreg.remote.objects import present, send
from dsreg.remote.refs import (
    RefUpdate,
    damaged_reasons,
    delete_ref,
    describe_state,
    update_ref,
)
from dsreg.remote.store import RemoteStore, TagName, TagValues, Target, write_index

__all__ = [
    "KINDS",
    "FetchedMarks",
    "FetchedResults",
    "PushedResults",
    "RemoteMarks",
    "fetch_marks",
    "fetch_results",
    "fetched_result",
    "model_targets",
    "push_marks",
    "pushed_results",
    "read_marks",
    "remote_model_refs",
    "send_marks",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PushedResults:
    """What a push sends of recorded results: ``targets``, one per model ref (``tag`` is the
    model, ``digest`` the record), and ``objects``, their records and predictions."""

    targets: tuple[Target, ...]
    objects: frozenset[str]


def _snapshots(reg: Registry, revisions: Iterable[str]) -> set[str]:
    out = set()
    for d in revisions:
        m = reg.manifest(d)
        if isinstance(m, Revision):
            out.add(m.snapshot)
    return out


def pushed_results(
    reg: Registry, revisions: Sequence[Target], there: Mapping[TagName, str]
) -> PushedResults:
    """The recorded results a push of ``revisions`` sends (module docstring), given the
    remote's model refs ``there``. Each result the remote does not hold is read and its
    predictions re-hashed first: a damaged one stops the push before anything is sent (one
    the remote's model ref names already is whole there, and is not sent again)."""
    snapshots = _snapshots(reg, {t.digest for t in revisions})
    datasets = sorted({t.dataset for t in revisions if t.dataset is not None})
    targets: list[Target] = []
    objects: set[str] = set()
    for ds in datasets:
        for model, digest in list_results(reg, ds).items():
            rec = read_result(reg, digest)
            if rec.snapshot not in snapshots:
                continue
            targets.append(Target(ds, model, digest))
            if there.get(TagName(ds, model)) != digest:
                load_predictions(reg, rec)
                objects |= {digest, rec.predictions}
    return PushedResults(targets=tuple(targets), objects=frozenset(objects))


def remote_model_refs(rs: RemoteStore, datasets: Iterable[str] | None = None) -> TagValues:
    """The remote's model refs (of ``datasets``; ``None``: all), damaged ones apart."""
    rr = rs.results()
    if datasets is None:
        return rr.scan_refs()
    found = TagValues(good={}, damaged={})
    for ds in sorted(set(datasets)):
        part = rr.scan_refs(ds)
        found.good.update(part.good)
        found.damaged.update(part.damaged)
    return found


def model_targets(found: TagValues) -> list[Target]:
    return [Target(name.dataset, name.tag, d) for name, d in sorted(found.good.items())]


def fetched_result(
    fetch: Fetch, dataset: str, model: str, digest: str, *, snapshots: Container[str] | None = None
) -> ResultRecord | None:
    """The record ``digest`` a remote model ref ``dataset/model`` names, fetched with its
    predictions (both re-hashed), and checked: it is that model's, and its predictions hold
    what it says; ``IntegrityError`` naming the model ref otherwise. With ``snapshots``, a
    record of another snapshot is ``None`` (its predictions are not fetched)."""
    try:
        fetch.objects([digest])
        rec = read_result(fetch.reg, digest)
        if rec.dataset != dataset or rec.model != model:
            raise IntegrityError(f"it names result {short(digest)} of {rec.dataset}/{rec.model}")
        if snapshots is not None and rec.snapshot not in snapshots:
            return None
        fetch.objects([rec.predictions])
        load_predictions(fetch.reg, rec)
    except (IntegrityError, ObjectNotFoundError) as e:
        raise IntegrityError(
            f"model ref {dataset}/{model} on remote {fetch.rs.label} is not usable: {e}; not "
            "served. Push the result again with --force from a registry that holds it",
            digest=getattr(e, "digest", None) or digest,
        ) from None
    return rec


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedResults:
    """What a pull or clone brought of recorded results: the model refs to write here
    (``good``) and those refused, with the reason (``refused``)."""

    good: tuple[Target, ...]
    refused: dict[TagName, str]


def fetch_results(fetch: Fetch, found: TagValues) -> FetchedResults:
    """Fetch, verified, the results the remote's model refs ``found`` name whose snapshot the
    fetch brought or this registry holds; the damaged or unusable ones are refused, named."""
    refused = {name: f"(a model ref) {why}" for name, why in damaged_reasons(found).items()}
    good: list[Target] = []
    for t in model_targets(found):
        assert t.dataset is not None and t.tag is not None and t.tag_name is not None
        try:
            rec = fetched_result(fetch, t.dataset, t.tag, t.digest, snapshots=_Held(fetch))
        except IntegrityError as e:
            refused[t.tag_name] = f"(a model ref): {e}"
            continue
        if rec is not None:
            good.append(t)
    return FetchedResults(good=tuple(good), refused=refused)


class _Held:
    """The snapshots a fetch reached or its registry holds (a container for ``in``)."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch

    def __contains__(self, digest: object) -> bool:
        return digest in self._fetch.reached or (
            isinstance(digest, str) and self._fetch.reg.store.has(digest)
        )


# -- yanks and retirements -------------------------------------------------------------------
#: Each kind of mark: its ref folder, and the log event of setting (and of lifting) one.
KINDS: Final = ((YANKED, "yank", "unyank"), (RETIRED, "retire", "retire"))


def _remote_refs(rm: RemoteStore, datasets: Iterable[str]) -> dict[TagName, str | bytes]:
    out: dict[TagName, str | bytes] = {}
    for ds in sorted(set(datasets)):
        found = rm.scan_refs(ds)
        out.update(found.good)
        out.update(found.damaged)
    return out


def send_marks(
    reg: Registry, rs: RemoteStore, datasets: Iterable[str], *, jobs: int, progress: ProgressHook
) -> None:
    """Send the mark objects of ``datasets``' yanks and retirements that the remote lacks:
    before the history that names them, and the refs (``push_marks``)."""
    names = sorted(set(datasets))
    digests = {
        d
        for folder, _event, _lifted in KINDS
        for ds in names
        for d in RefStore(reg.root, refs=folder).tags(ds).values()
    }
    todo = sorted(digests - present(rs, digests, jobs=jobs))
    if todo:
        with reg.lock():
            send(rs, reg.store, todo, jobs=jobs, progress=progress)


def push_marks(
    reg: Registry,
    rs: RemoteStore,
    datasets: Iterable[str],
    *,
    command: str,
    history: Mapping[str, Outgoing],
) -> list[RefUpdate]:
    """Make the remote's yanks and retirements of ``datasets`` this registry's (module
    docstring), their objects sent first (``send_marks``); what moved. A move the carried
    ``history`` records is logged with its lines there, not a line of its own."""
    names = sorted(set(datasets))
    moved: list[RefUpdate] = []
    for folder, event, lifted in KINDS:
        local, rm = RefStore(reg.root, refs=folder), rs.with_refs(folder)
        there = _remote_refs(rm, names)
        targets = [Target(ds, n, d) for ds in names for n, d in local.tags(ds).items()]
        for t in targets:
            assert t.dataset is not None and t.tag is not None and t.tag_name is not None
            now = there.get(t.tag_name)
            if now != t.digest:
                previous = now if isinstance(now, str) else None
                write = partial(
                    update_ref, rm, t.dataset, t.tag, t.digest, expected=now, command=command,
                    event=event,
                )  # fmt: skip
                outgoing = history.get(t.dataset)
                wrote = (
                    write(history=None)
                    if outgoing is None
                    else outgoing.move(MARK_EVENTS, t.tag, previous, t.digest, write)
                )
                if not wrote:
                    continue
                moved.append(
                    RefUpdate(
                        dataset=t.dataset,
                        tag=t.tag,
                        revision=t.digest,
                        previous=previous,
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteMarks:
    """A remote's yanks and retirements, fetched and checked: ``found[folder][name]`` is the
    mark's digest and fields (``folder`` ``yanked`` or ``retired``); ``refused`` names each
    mark that is damaged there, with why (it is not used)."""

    found: dict[str, dict[TagName, tuple[str, dict[str, str]]]]
    refused: dict[TagName, str]

    def yanks(self) -> dict[TagName, str]:
        """``{dataset@tag: reason}`` of the yanked tags."""
        return {n: f["reason"] for n, (_d, f) in self.found.get(YANKED, {}).items()}

    def retired(self) -> dict[str, tuple[str, str]]:
        """``{dataset: (successor, reason)}`` of the retired datasets."""
        return {
            n.dataset: (n.tag, f["reason"]) for n, (_d, f) in self.found.get(RETIRED, {}).items()
        }


def read_marks(fetch: Fetch, datasets: Iterable[str] | None = None) -> RemoteMarks:
    """The remote's yanks and retirements of ``datasets`` (default: every dataset's), each mark
    object fetched into the registry, verified, and checked to be the mark of its dataset and
    name; a damaged one is refused, never used."""
    found: dict[str, dict[TagName, tuple[str, dict[str, str]]]] = {}
    refused: dict[TagName, str] = {}
    for folder, event, _lifted in KINDS:
        rm = fetch.rs.with_refs(folder)
        if datasets is None:
            scanned = rm.scan_refs()
            there: dict[TagName, str | bytes] = {**scanned.good, **scanned.damaged}
        else:
            there = _remote_refs(rm, datasets)
        found[folder] = {}
        for name, value in sorted(there.items()):
            if not isinstance(value, str):
                refused[name] = f"(a {event} mark) is {describe_state(value)}"
                continue
            try:
                fetch.objects([value])
                fields = parse_mark(
                    fetch.reg.store.read_bytes(value),
                    kind=event,
                    dataset=name.dataset,
                    name=name.tag,
                )
            except DsregError as e:
                refused[name] = f"(a {event} mark): {e}"
                continue
            found[folder][name] = (value, fields)
    return RemoteMarks(found=found, refused=refused)


def fetch_marks(fetch: Fetch, datasets: Iterable[str], *, command: str) -> FetchedMarks:
    """Fetch, verified, the remote's yanks and retirements of ``datasets`` and set them here
    (this registry's marks of those datasets follow the remote's where it has one)."""
    marks = read_marks(fetch, datasets)
    updates: list[RefUpdate] = []
    for folder, event, _lifted in KINDS:
        good = [Target(n.dataset, n.tag, d) for n, (d, _f) in marks.found[folder].items()]
        local = RefStore(fetch.reg.root, refs=folder)
        updates += fetch.write_tags(good, force=True, command=command, refs=local, event=event)
    return FetchedMarks(updates=tuple(updates), refused=marks.refused)
