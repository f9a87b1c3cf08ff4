"""Remotes: ``dsreg remote add|ls|remove``, ``push``, ``pull``, ``clone`` and ``open(remote=)``.

A remote holds what a registry holds, minus its config, state and tmp: ``files/blake3/…``,
``refs/<dataset>/<tag>`` and ``logs/<dataset>.jsonl`` (``objects.py`` moves the bytes both
ways, ``refs.py`` moves the tags, ``fetch.py`` is every fetch into a registry, ``clone.py``
makes a registry from a remote). Configuration follows DVC: ``config.toml`` holds
``[remote.<name>] url = …`` and options, and ``[core] remote`` names the default; secrets come
from the environment or the cloud SDK's own configuration. ``config.toml`` is never pushed, and
dsreg refuses to store a secret in it.

As in git, a tag on a remote certifies that the remote holds everything its revision reaches:
push sends objects first, makes them durable, and only then writes the tag. So a revision a
remote tag already names costs a push nothing to check, and a new revision of a dataset is
checked against the remote only for what its tagged revisions do not already reach.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import (
    DsregError,
    IntegrityError,
    InvalidInputError,
    NotFoundError,
    ObjectNotFoundError,
    RemoteError,
    RevisionNotFoundError,
    TagExistsError,
)
from dsreg.formats.manifests import Overlay
from dsreg.formats.names import check_name, parse_spec, parse_tag_target
from dsreg.objects.digest import PREFIX, is_digest, short
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import reachable
from dsreg.registry.reader import LocalReader, Resolved
from dsreg.registry.refs import RefStore
from dsreg.registry.results import EVENT, result_refs
from dsreg.remote.clone import CloneResult, SkippedLine, clone
from dsreg.remote.config import (
    RemoteConfig,
    add_remote,
    default_remote,
    jobs_for,
    list_remotes,
    open_remote,
    remove_remote,
)
from dsreg.remote.fetch import Fetch, owner, refused_error
from dsreg.remote.history import (
    RESULT_EVENTS,
    TAG_EVENTS,
    Outgoing,
    logged_overlays,
    pull_history,
    push_history,
)
from dsreg.remote.objects import present, send, tidy
from dsreg.remote.refs import (
    RefUpdate,
    append_log,
    damaged_reasons,
    delete_ref,
    describe_state,
    tag_changed,
    update_ref,
)
from dsreg.remote.results import (
    fetch_marks,
    fetch_results,
    model_targets,
    push_marks,
    pushed_results,
    read_marks,
    remote_model_refs,
    send_marks,
)
from dsreg.remote.store import RemoteStore, TagName, TagValues, Target, listed_tags, write_index

__all__ = [
    "CloneResult",
    "PullResult",
    "PushResult",
    "RefUpdate",
    "RemoteConfig",
    "SkippedLine",
    "add_remote",
    "clone",
    "default_remote",
    "list_remotes",
    "open_remote",
    "pull",
    "push",
    "push_targets",
    "remove_remote",
    "writable_remote",
]


# -- results ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _Transfer:
    """What a push and a pull both report: the remote, the revisions moved, the tags written
    and the model refs of recorded results written (``results``: ``tag`` is the model,
    ``revision`` the result record), and the yanks and retirements set or lifted (``marks``:
    ``status`` is the log event, ``revision`` the mark object)."""

    remote: str
    url: str
    revisions: tuple[str, ...]
    refs: tuple[RefUpdate, ...]
    results: tuple[RefUpdate, ...] = ()
    marks: tuple[RefUpdate, ...] = ()

    def _counts(self) -> dict[str, int]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "revisions": list(self.revisions),
            **self._counts(),
            "refs": [r.to_dict() for r in self.refs],
            "results": [r.to_dict() for r in self.results],
            "marks": [r.to_dict() for r in self.marks],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PushResult(_Transfer):
    sent: int
    bytes: int
    already: int

    def _counts(self) -> dict[str, int]:
        return {
            "objects_sent": self.sent,
            "bytes_sent": self.bytes,
            "objects_already_there": self.already,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PullResult(_Transfer):
    fetched: int
    bytes: int

    def _counts(self) -> dict[str, int]:
        return {"objects_fetched": self.fetched, "bytes_fetched": self.bytes}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sent:
    """What a push sent: objects and bytes, and the objects the remote held already."""

    objects: int = 0
    bytes: int = 0
    already: int = 0


# -- push ------------------------------------------------------------------------------------
def push(
    reg: Registry,
    targets: Sequence[Target] | None = None,
    *,
    remote: str | None = None,
    force: bool = False,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> PushResult:
    """Send revisions (``targets``, ``push_targets``: each with the local tag that names it,
    if one does; default: every tag) and what they reach, then their tags.

    A tag the remote holds at another digest is refused unless ``force`` (before anything is
    sent); the remote's log keeps the old value. A damaged remote tag is refused the same way,
    and ``force`` replaces it. Each tag is written by compare-and-swap (``refs.py``): a tag
    another push set meanwhile is refused, ``force`` or not. Nothing the remote holds is sent
    again.
    """
    rs = writable_remote(reg, remote)
    n_jobs = jobs_for(reg, rs, jobs)
    if targets is None:
        targets = push_targets(reg, ())
    if not targets:
        raise InvalidInputError("nothing to push: this registry has no tags; name a revision")
    # A damaged tag elsewhere on the remote blocks nothing; one this push writes needs --force.
    there = rs.scan_refs(progress=progress)
    _refuse_conflicts(rs, targets, there, force=force)
    _check_own_dataset(
        reg, [t for t in targets if t.tag_name and there.good.get(t.tag_name) != t.digest]
    )
    # Recorded results of what is pushed: refused the same way, before anything is sent.
    models = remote_model_refs(rs, {t.dataset for t in targets if t.dataset})
    results = pushed_results(reg, targets, models.good)
    _refuse_conflicts(rs, results.targets, models, force=force, what="model refs")
    datasets = {t.dataset for t in targets if t.dataset is not None}
    sent = _send_missing(reg, rs, targets, there.good, jobs=n_jobs, progress=progress)
    more = _send_objects(
        reg, rs, results.objects | logged_overlays(reg, datasets), jobs=n_jobs, progress=progress
    )
    send_marks(reg, rs, datasets, jobs=n_jobs, progress=progress)
    tidy(rs)
    # The datasets' history first (objects before what names them); a move it records needs
    # no line of its own.
    history = push_history(
        reg, rs, targets, results.targets, there_tags=there.good, there_models=models.good,
        jobs=n_jobs,
    )  # fmt: skip
    # Tags, then model refs (each certifies its result and the revisions of its snapshot);
    # within a dataset in the order its log first records them, so the remote's log receives
    # the carried lines in this registry's order.
    rr = rs.results()
    moves = [_RefMove(rs, t, "push", TAG_EVENTS) for t in targets if t.tag_name and t.dataset]
    moves += [_RefMove(rr, t, EVENT, RESULT_EVENTS) for t in results.targets if t.dataset]
    moves.sort(key=lambda m: (ds := m.target.dataset or "", history[ds].first(m.events, m.target)))
    updates: list[RefUpdate] = []
    moved: list[RefUpdate] = []
    for m in moves:
        u = _push_tag(m.store, m.target, force=force, command=command, event=m.event,
                      history=history[m.target.dataset or ""])  # fmt: skip
        (moved if m.event == EVENT else updates).append(u)
    # For readers that cannot list the remote's folders (a static web server).
    write_index(rs, {*there.good, *there.damaged, *(u.tag_name for u in updates)})
    if moved:
        write_index(rr, {*models.good, *models.damaged, *(u.tag_name for u in moved)})
    marks = push_marks(reg, rs, datasets, command=command, history=history)
    for ds, outgoing in sorted(history.items()):
        append_log(rs, ds, outgoing.rest)
    return PushResult(
        remote=rs.name,
        url=rs.url,
        revisions=tuple(sorted({t.digest for t in targets})),
        sent=sent.objects + more.objects,
        bytes=sent.bytes + more.bytes,
        already=sent.already + more.already,
        refs=tuple(updates),
        results=tuple(moved),
        marks=tuple(marks),
    )


def writable_remote(reg: Registry, remote: str | None) -> RemoteStore:
    """The remote a push writes to; ``RemoteError`` if it is read-only (HTTP)."""
    rs = open_remote(reg, remote)
    if rs.read_only:
        raise RemoteError(
            f"remote {rs.label} is read-only: dsreg reads http(s) remotes as a static web server "
            "serves them and never writes there; push to the folder or bucket the server "
            "publishes (e.g. 'dsreg push -r /srv/www/dsreg' or an s3:// URL) instead"
        )
    return rs


def push_delete(
    reg: Registry, names: Sequence[str], *, remote: str | None = None, command: str = ""
) -> PushResult:
    """Remove tags ``names`` (``dataset@tag``) on the remote, each by compare-and-swap against
    the value read first and logged there (event ``delete``); nothing is sent and nothing here
    changes. Every tag is checked before any is removed: a tag the remote does not hold (or
    holds damaged) raises ``RevisionNotFoundError`` and nothing is deleted."""
    rs = writable_remote(reg, remote)
    if not names:
        raise InvalidInputError("push --delete needs the tags to delete: DATASET@TAG")
    wanted = [parse_tag_target(n) for n in names]
    held: list[tuple[str, str, str]] = []
    for ds, tag in wanted:
        now = rs.ref_state(ds, tag)
        if not isinstance(now, str):
            what = "holds no" if now is None else "holds a damaged"
            raise RevisionNotFoundError(
                f"remote {rs.label} {what} tag {ds}@{tag}: nothing was deleted; see "
                f"'dsreg ls --remote {rs.name}'",
                dataset=ds,
                ref=tag,
            )
        held.append((ds, tag, now))
    for ds, tag, digest in held:
        delete_ref(rs, ds, tag, expected=digest, command=command)
    write_index(rs, set(rs.tag_names()))
    refs = [
        RefUpdate(dataset=ds, tag=t, revision=d, previous=d, status="deleted") for ds, t, d in held
    ]
    return PushResult(
        remote=rs.name, url=rs.url, revisions=(), sent=0, bytes=0, already=0, refs=tuple(refs)
    )


def push_targets(reg: Registry, wanted: Sequence[Resolved | str]) -> list[Target]:
    """What a push sends, in the order asked: a revision (with the tag it was reached by, if
    any), or a dataset's name, all its tags; with nothing asked, every tag."""
    if not wanted:
        return [Target(ds, tag, d) for ds, tag, d in reg.refs.all()]
    out: list[Target] = []
    for w in wanted:
        if not isinstance(w, str):
            out.append(Target(w.dataset, w.tag, w.digest))
            continue
        tags = reg.refs.tags(check_name(w, what="dataset name"))
        if not tags:
            raise RevisionNotFoundError(f"no dataset {w!r} in this registry; see 'dsreg ls'")
        out += [Target(w, t, d) for t, d in tags.items()]
    return out


def _refuse_conflicts(
    rs: RemoteStore,
    targets: Sequence[Target],
    there: TagValues,
    *,
    force: bool,
    what: str = "tags",
) -> None:
    """Unless ``force``, refuse before anything is sent: a tag (or model ref: ``what``) the
    remote holds at another digest, or damaged."""
    if force:
        return
    at = "@" if what == "tags" else "/"
    conflicts = [
        f"{t.dataset}{at}{t.tag} (remote {short(there.good[t.tag_name])}, local {short(t.digest)})"
        for t in targets
        if t.tag_name and there.good.get(t.tag_name, t.digest) != t.digest
    ]
    if conflicts:
        raise TagExistsError(
            f"remote {rs.label} holds {', '.join(conflicts)}; {what} are immutable: nothing "
            f"was pushed. Pull the remote's, or move the remote's {what} with --force (its log "
            "keeps the old values)"
        )
    broken = [
        f"{t.dataset}{at}{t.tag} ({describe_state(there.damaged[t.tag_name])})"
        for t in targets
        if t.tag_name and t.tag_name in there.damaged
    ]
    if broken:
        raise TagExistsError(
            f"remote {rs.label} holds damaged {what} {', '.join(broken)}: nothing was pushed. "
            "Replace them with this registry's with --force"
        )


def _check_own_dataset(reg: Registry, writes: Sequence[Target]) -> None:
    """A tag this push writes names a revision of its own dataset (two manifests read per tag;
    a push that writes no tag reads none)."""
    for t in writes:
        try:
            is_overlay = isinstance(reg.manifest(t.digest), Overlay)
            of, why = (None, "an overlay") if is_overlay else owner(reg, t.digest)
        except DsregError as e:
            of, why = None, str(e)
        if of != t.dataset:
            what = f"a revision of dataset {of!r}" if of is not None else why
            raise IntegrityError(
                f"tag {t.dataset}@{t.tag} here names {short(t.digest)}, {what}, not a revision of "
                f"{t.dataset!r}: nothing was pushed; point it at a revision of {t.dataset!r} with "
                f"'dsreg tag --force {t.dataset}@{t.tag} <revision>' (see 'dsreg log {t.dataset}')",
                digest=t.digest,
            )


def _send_missing(
    reg: Registry,
    rs: RemoteStore,
    targets: Sequence[Target],
    remote_tags: dict[TagName, str],
    *,
    jobs: int,
    progress: ProgressHook,
) -> _Sent:
    """Send what the targets reach that the remote lacks. The revisions the remote's tags name
    are whole there (objects go before tags): only the rest is walked, and of it only what the
    remote's tags of the same datasets do not reach is asked about."""
    certified = set(remote_tags.values())
    todo = sorted({t.digest for t in targets if t.digest not in certified})
    if not todo:
        return _Sent()
    need, problems = reachable(reg, todo)
    if problems:
        raise IntegrityError(
            "cannot push: "
            + "; ".join(f"{short(p.digest)}: {p.problem}" for p in problems[:3])
            + "; run 'dsreg verify' and repair first"
        )
    datasets = {t.dataset for t in targets if t.digest in todo and t.dataset is not None}
    known_starts = [
        d for name, d in remote_tags.items() if name.dataset in datasets and reg.store.has(d)
    ]
    if known_starts:
        known, _ = reachable(reg, known_starts)
        need -= known
    return _send_objects(reg, rs, need, jobs=jobs, progress=progress)


def _send_objects(
    reg: Registry, rs: RemoteStore, need: Collection[str], *, jobs: int, progress: ProgressHook
) -> _Sent:
    """Send the objects among ``need`` that the remote lacks, under the registry's lock."""
    wanted = set(need)
    if not wanted:
        return _Sent()
    to_send = sorted(wanted - present(rs, wanted, jobs=jobs, progress=progress))
    absent = reg.store.missing(to_send)
    if absent:
        raise ObjectNotFoundError(
            f"{len(absent)} objects to push are neither in this registry nor on remote "
            f"{rs.label} (first {', '.join(short(d) for d in sorted(absent)[:3])}); this "
            "registry was cloned without them: pull them from the remote that has them first"
        )
    with reg.lock():  # a gc waits: nothing being sent is removed under the push
        nbytes = send(rs, reg.store, to_send, jobs=jobs, progress=progress)
    return _Sent(objects=len(to_send), bytes=nbytes, already=len(need) - len(to_send))


@dataclass(frozen=True, slots=True)
class _RefMove:
    """One ref a push moves: a tag (``store`` the remote, logged ``push``) or a model ref
    (``store`` its results, logged ``result``), and the log events that move it."""

    store: RemoteStore
    target: Target
    event: str
    events: frozenset[str]


def _push_tag(
    rs: RemoteStore,
    t: Target,
    *,
    force: bool,
    command: str,
    event: str = "push",
    history: Outgoing | None = None,
) -> RefUpdate:
    """Write one remote tag (a model ref: ``rs.results()``, ``event``) by compare-and-swap (set
    to ``d`` meanwhile by another push: unchanged); logged with the lines of ``history`` (what
    the push carries of its dataset's log) that record the move, else a line of its own."""
    assert t.dataset is not None and t.tag is not None
    ds, tag, d = t.dataset, t.tag, t.digest
    now = rs.ref_state(ds, tag)
    if now == d:
        return RefUpdate(dataset=ds, tag=tag, revision=d, previous=d, status="unchanged")
    if now is not None and not force:
        raise tag_changed(
            rs, ds, tag, now, "while pushing; pull it, or move it with --force", new=d
        )
    previous = now if isinstance(now, str) else None
    events = RESULT_EVENTS if event == EVENT else TAG_EVENTS
    write = partial(update_ref, rs, ds, tag, d, expected=now, command=command, event=event)
    wrote = (
        write(history=None) if history is None else history.move(events, tag, previous, d, write)
    )
    if not wrote:
        return RefUpdate(dataset=ds, tag=tag, revision=d, previous=d, status="unchanged")
    status = "created" if now is None else ("moved" if previous else "repaired")
    return RefUpdate(dataset=ds, tag=tag, revision=d, previous=previous, status=status)


# -- pull ------------------------------------------------------------------------------------
def pull(
    reg: Registry,
    specs: Sequence[str] = (),
    *,
    remote: str | None = None,
    force: bool = False,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> PullResult:
    """Fetch revisions (default: every tag of the remote) with everything they reach that this
    registry lacks, verified, then set their tags here. A local tag at another digest is
    refused unless ``force`` (before anything is fetched).

    A remote tag that is damaged or names no revision of its own dataset is not fetched and not
    written here; the others are pulled, then an ``IntegrityError`` names the refused ones. The
    registry's lock is held from the fetch until the tags are written, so a concurrent gc waits
    (fetched objects are unreachable until their tags exist)."""
    rs = open_remote(reg, remote)
    n_jobs = jobs_for(reg, rs, jobs)
    wanted = _pull_targets(reg, rs, specs, progress)
    targets, refused = wanted.targets, wanted.refused
    # The remote's model refs of the datasets pulled: their results come with the revisions.
    models = remote_model_refs(rs, {t.dataset for t in targets if t.dataset} if specs else None)
    conflicts = _local_conflicts(reg.refs, targets, "@")
    conflicts += _local_conflicts(result_refs(reg), model_targets(models), "/")
    if conflicts and not force:
        raise TagExistsError(
            f"this registry holds {', '.join(conflicts)}; tags and recorded results are "
            "immutable: nothing was pulled. Move the local ones with --force (the log keeps "
            "the old values)"
        )
    with Fetch(reg, rs, jobs=n_jobs, progress=progress) as fetch:
        refused |= fetch.refused_tags(targets)
        good = [t for t in targets if t.tag_name not in refused]
        digests = sorted({t.digest for t in good})
        fetch.closure(digests, payloads=True)
        brought = fetch_results(fetch, models)
        pulled = {t.dataset for t in good if t.dataset}
        read_marks(fetch, pulled)  # the marks' objects, which their history names
        pull_history(fetch, good, brought.good)
        updates = fetch.write_tags(good, force=force, command=command)
        results = fetch.write_tags(
            brought.good, force=force, command=command, refs=result_refs(reg), event=EVENT
        )
        marks = fetch_marks(fetch, pulled, command=command)
    if refused or brought.refused or marks.refused:
        done = f"{len(updates)} other tags and {len(results)} model refs were pulled"
        raise refused_error(rs, {**refused, **brought.refused, **marks.refused}, done)
    return PullResult(
        remote=rs.name,
        url=rs.url,
        revisions=tuple(digests),
        fetched=fetch.fetched,
        bytes=fetch.bytes,
        refs=tuple(updates),
        results=tuple(results),
        marks=marks.updates,
    )


def _local_conflicts(refs: RefStore, targets: Sequence[Target], at: str) -> list[str]:
    """The refs among ``targets`` that ``refs`` holds at another digest, described."""
    out = []
    for t in targets:
        name = t.tag_name
        local = refs.get(name.dataset, name.tag) if name else None
        if local is not None and local != t.digest:
            out.append(f"{t.dataset}{at}{t.tag} (local {short(local)}, remote {short(t.digest)})")
    return out


class _Wanted(NamedTuple):
    """What a pull asks for: ``targets``, and the remote's damaged tags among them, refused
    with the reason (``refused``)."""

    targets: list[Target]
    refused: dict[TagName, str]


def _pull_targets(
    reg: Registry, rs: RemoteStore, specs: Sequence[str], progress: ProgressHook
) -> _Wanted:
    """What each spec pulls, a tag coming from the remote when it holds it; and the remote's
    damaged tags among those asked for (all, or a dataset's), with the reason. Only the tag
    files asked for are read: ``dataset@tag`` its own, a dataset its tags'."""
    if not specs:
        found = rs.scan_refs(progress=progress)
        if not found.good and not found.damaged:
            raise RevisionNotFoundError(
                f"remote {rs.label} holds no tags: nothing to pull (is the URL right?)"
            )
        return _Wanted(_targets_of(found), damaged_reasons(found))
    out: list[Target] = []
    refused: dict[TagName, str] = {}
    for spec in specs:
        if "@" not in spec and not spec.startswith(PREFIX):
            check_name(spec, what="dataset name")
            found = rs.scan_refs(spec, progress=progress)
            if not found.good and not found.damaged:
                raise RevisionNotFoundError(f"remote {rs.label} holds no tags of {spec!r}")
            out += _targets_of(found)
            refused |= damaged_reasons(found)
        else:
            out.append(_pull_target(reg, rs, spec))
    return _Wanted(out, refused)


def _pull_target(reg: Registry, rs: RemoteStore, spec: str) -> Target:
    """What ``dataset@tag`` or a digest pulls: the remote's tag when it holds it."""
    s = parse_spec(spec)
    if s.digest is not None:
        return Target(None, None, s.digest)
    assert s.dataset is not None and s.ref is not None
    remote_digest = rs.get_ref(s.dataset, s.ref) if not s.ref.startswith(PREFIX) else None
    if remote_digest is not None:
        return Target(s.dataset, s.ref, remote_digest)
    if s.ref.startswith(PREFIX) and is_digest(s.ref):
        return Target(s.dataset, None, s.ref)
    try:
        r = LocalReader(reg).revision(spec)
    except NotFoundError:
        tags = listed_tags(rs.tag_names(s.dataset))  # names only: no tag file is read
        raise RevisionNotFoundError(
            f"remote {rs.label} holds no tag {spec!r} (its tags of {s.dataset!r}: "
            f"{tags}), and this registry cannot resolve it; "
            "a digest must be given in full to pull it"
        ) from None
    return Target(r.dataset, r.tag, r.digest)


def _targets_of(found: TagValues) -> list[Target]:
    return [Target(name.dataset, name.tag, d) for name, d in found.good.items()]
