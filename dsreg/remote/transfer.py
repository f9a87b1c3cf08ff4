"""Remotes: ``dsreg remote add|ls|remove``, ``push``, ``pull``, ``clone`` and ``open(remote=)``.

A remote holds what a registry holds, minus its config, state and tmp: ``files/blake3/…``,
``refs/<dataset>/<tag>`` and ``logs/<dataset>.jsonl`` (``store.py`` moves the bytes, ``refs.py``
moves the tags, ``fetch.py`` brings objects in, ``clone.py`` makes a registry from a remote).
Configuration follows DVC: ``config.toml`` holds ``[remote.<name>] url = …`` and options, and
``[core] remote`` names the default; secrets come from the environment or the cloud SDK's own
configuration. ``config.toml`` is never pushed, and dsreg refuses to store a secret in it.

As in git, a tag on a remote certifies that the remote holds everything its revision reaches:
push sends objects first, makes them durable, and only then writes the tag. So a revision a
remote tag already names costs a push nothing to check, and a new revision of a dataset is
checked against the remote only for what its tagged revisions do not already reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from dsreg.formats.names import check_name, parse_spec
from dsreg.objects.digest import PREFIX, is_digest, short
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import reachable
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
from dsreg.remote.fetch import (
    Target,
    check_whole,
    fetch_closure,
    fetch_objects,
    foreign_tags,
    owner,
    refused_error,
    set_local_refs,
)
from dsreg.remote.refs import RefUpdate, describe_state, update_ref, write_index
from dsreg.remote.store import RemoteStore, listed_tags
from dsreg.remote.waves import WAVE

if TYPE_CHECKING:
    from dsreg.views.dataset import Dataset

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
    "fetch_for_open",
    "fetch_missing",
    "list_remotes",
    "open_remote",
    "pull",
    "push",
    "remove_remote",
]

# Objects fetched are committed to the store in waves of this many, so an interrupted pull
# keeps what came.
_WAVE = WAVE


# -- results ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class PushResult:
    remote: str
    url: str
    revisions: tuple[str, ...]
    sent: int
    bytes: int
    already: int
    refs: tuple[RefUpdate, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "revisions": list(self.revisions),
            "objects_sent": self.sent,
            "bytes_sent": self.bytes,
            "objects_already_there": self.already,
            "refs": [r.to_dict() for r in self.refs],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PullResult:
    remote: str
    url: str
    revisions: tuple[str, ...]
    fetched: int
    bytes: int
    refs: tuple[RefUpdate, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "revisions": list(self.revisions),
            "objects_fetched": self.fetched,
            "bytes_fetched": self.bytes,
            "refs": [r.to_dict() for r in self.refs],
        }


# -- push ------------------------------------------------------------------------------------
def _push_targets(reg: Registry, specs: Sequence[str]) -> list[tuple[str | None, str | None, str]]:
    """``(dataset, tag, digest)`` for each spec: a bare dataset name means all its tags."""
    if not specs:
        return [(ds, tag, d) for ds, tag, d in reg.refs.all()]
    out: list[tuple[str | None, str | None, str]] = []
    for spec in specs:
        if "@" not in spec and not spec.startswith(PREFIX):
            tags = reg.refs.tags(check_name(spec, what="dataset name"))
            if not tags:
                raise RevisionNotFoundError(f"no dataset {spec!r} in this registry; see 'dsreg ls'")
            out += [(spec, t, d) for t, d in tags.items()]
            continue
        r = reg.resolve(spec)
        out.append((r.dataset, r.tag, r.digest))
    return out


def push(
    reg: Registry,
    specs: Sequence[str] = (),
    *,
    remote: str | None = None,
    force: bool = False,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> PushResult:
    """Send revisions (default: every tag) and what they reach, then their tags.

    A tag the remote holds at another digest is refused unless ``force`` (before anything is
    sent); the remote's log keeps the old value. A damaged remote tag is refused the same way,
    and ``force`` replaces it. Each tag is written by compare-and-swap (``refs.py``): a tag
    another push set meanwhile is refused, ``force`` or not. Nothing the remote holds is sent
    again.
    """
    rs = open_remote(reg, remote)
    if rs.read_only:
        raise RemoteError(
            f"remote {rs.label} is read-only: dsreg reads http(s) remotes as a static web server "
            "serves them and never writes there; push to the folder or bucket the server "
            "publishes (e.g. 'dsreg push -r /srv/www/dsreg' or an s3:// URL) instead"
        )
    n_jobs = jobs_for(reg, rs, jobs)
    targets = _push_targets(reg, specs)
    if not targets:
        raise InvalidInputError("nothing to push: this registry has no tags; name a revision")
    # A damaged tag elsewhere on the remote blocks nothing; one this push writes needs --force.
    remote_refs, damaged = rs.scan_refs(progress=progress)
    conflicts = [
        f"{ds}@{tag} (remote {short(remote_refs[ds, tag])}, local {short(d)})"
        for ds, tag, d in targets
        if ds is not None and tag is not None and remote_refs.get((ds, tag), d) != d
    ]
    broken = [
        f"{ds}@{tag} ({describe_state(damaged[ds, tag])})"
        for ds, tag, _d in targets
        if ds is not None and tag is not None and (ds, tag) in damaged
    ]
    if conflicts and not force:
        raise TagExistsError(
            f"remote {rs.label} holds {', '.join(conflicts)}; tags are immutable: nothing was "
            "pushed. Pull the remote's, or move the remote's tags with --force (its log keeps "
            "the old values)"
        )
    if broken and not force:
        raise TagExistsError(
            f"remote {rs.label} holds damaged tags {', '.join(broken)}: nothing was pushed. "
            "Replace them with this registry's with --force"
        )
    _check_own_dataset(
        reg,
        [
            (ds, tag, d)
            for ds, tag, d in targets
            if ds is not None and tag is not None and remote_refs.get((ds, tag)) != d
        ],
    )
    certified = set(remote_refs.values())
    todo = sorted({d for _, _, d in targets if d not in certified})
    sent = nbytes = already = 0
    if todo:
        need, problems = reachable(reg, todo)
        if problems:
            raise IntegrityError(
                "cannot push: "
                + "; ".join(f"{short(p.digest)}: {p.problem}" for p in problems[:3])
                + "; run 'dsreg verify' and repair first"
            )
        # What the remote's own tags of these datasets reach is there already (objects go
        # before tags); only the rest is asked about.
        datasets = {ds for ds, _, d in targets if d in todo and ds is not None}
        known_starts = [
            d for (ds, _t), d in remote_refs.items() if ds in datasets and reg.store.has(d)
        ]
        if known_starts:
            known, _ = reachable(reg, known_starts)
            need -= known
        present = rs.present(need, jobs=n_jobs, progress=progress)
        send = sorted(need - present)
        already = len(need) - len(send)
        absent = reg.store.missing(send)
        if absent:
            raise ObjectNotFoundError(
                f"{len(absent)} objects to push are neither in this registry nor on remote "
                f"{rs.label} (first {', '.join(short(d) for d in sorted(absent)[:3])}); this "
                "registry was cloned without them: pull them from the remote that has them first"
            )
        with reg.lock():
            nbytes = rs.send([(d, reg.store.path(d)) for d in send], jobs=n_jobs, progress=progress)
        sent = len(send)
    rs.tidy()
    updates = [_push_tag(rs, ds, tag, d, force=force, command=command) for ds, tag, d in targets]
    # For readers that cannot list the remote's folders (a static web server).
    write_index(rs, {*remote_refs, *damaged, *((u.dataset, u.tag) for u in updates if u)})
    return PushResult(
        remote=rs.name,
        url=rs.url,
        revisions=tuple(sorted({d for _, _, d in targets})),
        sent=sent,
        bytes=nbytes,
        already=already,
        refs=tuple(u for u in updates if u is not None),
    )


def _push_tag(
    rs: RemoteStore, ds: str | None, tag: str | None, d: str, *, force: bool, command: str
) -> RefUpdate | None:
    """Write one remote tag, compare-and-swap against the value read just before."""
    if ds is None or tag is None:
        return None
    now = rs.ref_state(ds, tag)
    if now == d:
        return RefUpdate(dataset=ds, tag=tag, revision=d, previous=d, status="unchanged")
    if now is not None and not force:
        raise TagExistsError(
            f"tag {ds}@{tag} was set to {describe_state(now)} on remote {rs.label} while "
            "pushing; pull it, or move it with --force",
            dataset=ds,
            tag=tag,
            existing=now if isinstance(now, str) else None,
            new=d,
        )
    update_ref(rs, ds, tag, d, expected=now, command=command)
    previous = now if isinstance(now, str) else None
    status = "created" if now is None else ("moved" if previous else "repaired")
    return RefUpdate(dataset=ds, tag=tag, revision=d, previous=previous, status=status)


def _check_own_dataset(reg: Registry, writes: Sequence[tuple[str, str, str]]) -> None:
    """A tag this push writes names a revision of its own dataset (two manifests read per tag;
    a push that writes no tag reads none)."""
    for ds, tag, d in writes:
        try:
            is_overlay = isinstance(reg.manifest(d), Overlay)
            of, why = (None, "an overlay") if is_overlay else owner(reg, d)
        except DsregError as e:
            of, why = None, str(e)
        if of != ds:
            what = f"a revision of dataset {of!r}" if of is not None else why
            raise IntegrityError(
                f"tag {ds}@{tag} here names {short(d)}, {what}, not a revision of {ds!r}: "
                f"nothing was pushed; point it at a revision of {ds!r} with 'dsreg tag --force "
                f"{ds}@{tag} <revision>' (see 'dsreg log {ds}')",
                digest=d,
            )


# -- pull ------------------------------------------------------------------------------------
def _pull_targets(
    reg: Registry, rs: RemoteStore, specs: Sequence[str], progress: ProgressHook
) -> tuple[list[Target], dict[tuple[str, str], str]]:
    """``(dataset, tag, digest)``, a tag coming from the remote when it holds it; and the
    remote's damaged tags among those asked for (all, or a dataset's), with the reason. Only
    the tag files asked for are read: ``dataset@tag`` its own, a dataset its tags'."""
    if not specs:
        found, damaged = rs.scan_refs(progress=progress)
        if not found and not damaged:
            raise RevisionNotFoundError(
                f"remote {rs.label} holds no tags: nothing to pull (is the URL right?)"
            )
        return [(ds, tag, d) for (ds, tag), d in found.items()], _damaged_reasons(damaged)
    out: list[Target] = []
    refused: dict[tuple[str, str], str] = {}
    for spec in specs:
        if "@" not in spec and not spec.startswith(PREFIX):
            check_name(spec, what="dataset name")
            good, damaged = rs.scan_refs(spec, progress=progress)
            mine = [(ds, t, d) for (ds, t), d in good.items()]
            bad = _damaged_reasons(damaged)
            if not mine and not bad:
                raise RevisionNotFoundError(f"remote {rs.label} holds no tags of {spec!r}")
            out += mine
            refused |= bad
            continue
        s = parse_spec(spec)
        if s.digest is not None:
            out.append((None, None, s.digest))
            continue
        assert s.dataset is not None and s.ref is not None
        remote_digest = rs.get_ref(s.dataset, s.ref) if not s.ref.startswith(PREFIX) else None
        if remote_digest is not None:
            out.append((s.dataset, s.ref, remote_digest))
            continue
        if s.ref.startswith(PREFIX) and is_digest(s.ref):
            out.append((s.dataset, None, s.ref))
            continue
        try:
            r = reg.resolve(spec)
        except NotFoundError:
            tags = listed_tags(rs.tag_names(s.dataset))  # names only: no tag file is read
            raise RevisionNotFoundError(
                f"remote {rs.label} holds no tag {spec!r} (its tags of {s.dataset!r}: "
                f"{tags}), and this registry cannot resolve it; "
                "a digest must be given in full to pull it"
            ) from None
        out.append((r.dataset, r.tag, r.digest))
    return out, refused


def _damaged_reasons(damaged: dict[tuple[str, str], bytes]) -> dict[tuple[str, str], str]:
    return {k: f"is {describe_state(v)}" for k, v in damaged.items()}


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
    targets, refused = _pull_targets(reg, rs, specs, progress)
    conflicts = []
    for ds, tag, d in targets:
        if ds is not None and tag is not None:
            local = reg.refs.get(ds, tag)
            if local is not None and local != d:
                conflicts.append(f"{ds}@{tag} (local {short(local)}, remote {short(d)})")
    if conflicts and not force:
        raise TagExistsError(
            f"this registry holds {', '.join(conflicts)}; tags are immutable: nothing was "
            "pulled. Move the local tags with --force (the log keeps the old values)"
        )
    with reg.lock():
        foreign, checked = foreign_tags(reg, rs, targets, jobs=n_jobs, progress=progress)
        refused |= foreign
        good = [t for t in targets if (t[0], t[1]) not in refused]
        digests = sorted({d for _, _, d in good})
        closure = fetch_closure(
            reg, rs, digests, payloads=True, jobs=n_jobs, progress=progress, wave=_WAVE
        )
        check_whole(reg, closure)
        updates = set_local_refs(reg, good, force=force, command=command)
    if refused:
        raise refused_error(rs, refused, f"{len(updates)} other tags were pulled")
    return PullResult(
        remote=rs.name,
        url=rs.url,
        revisions=tuple(digests),
        fetched=checked.fetched + closure.fetched,
        bytes=checked.bytes + closure.bytes,
        refs=tuple(updates),
    )


def fetch_missing(
    reg: Registry,
    digests: Iterable[str],
    *,
    remote: str | None = None,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
) -> int:
    """Fetch objects this registry lacks (checkout of a lazily cloned revision) from ``remote``
    or the default remote; return how many came. Without a remote, a clear error."""
    need = reg.store.missing(digests)
    if not need:
        return 0
    if remote is None and default_remote(reg) is None:
        raise ObjectNotFoundError(
            f"{len(need)} objects are not in this registry (first "
            f"{', '.join(short(d) for d in sorted(need)[:3])}), and it has no default remote "
            "to fetch them from: run 'dsreg pull SPEC -r REMOTE', or set a default remote "
            "with 'dsreg remote add NAME URL --default'"
        )
    rs = open_remote(reg, remote)
    with reg.lock():
        rep = fetch_objects(reg, rs, need, jobs=jobs_for(reg, rs, jobs), progress=progress)
    return rep.fetched


def fetch_for_open(reg: Registry, spec: str, remote: str) -> Dataset:
    """``dsreg.open(spec, remote=…)``: resolve here if possible (else through the remote's tag),
    fetch what the revision reaches that this registry lacks, verified, and open it."""
    from dsreg.views.dataset import Dataset

    rs = open_remote(reg, remote)
    jobs = jobs_for(reg, rs, None)
    try:
        resolved = reg.resolve(spec)
    except NotFoundError:
        pull(reg, [spec], remote=remote, command=f"dsreg.open({spec!r}, remote={remote!r})")
        return Dataset(reg, reg.resolve(spec))
    with reg.lock():
        closure = fetch_closure(
            reg, rs, [resolved.digest], payloads=True, jobs=jobs, progress=no_progress
        )
        check_whole(reg, closure)
    return Dataset(reg, resolved)
