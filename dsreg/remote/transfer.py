"""Remotes: ``dsreg remote add|ls|remove``, ``push``, ``pull``, ``clone`` and ``open(remote=)``.

A remote holds what a registry holds, minus its config, state and tmp: ``files/blake3/…``,
``refs/<dataset>/<tag>`` and ``logs/<dataset>.jsonl`` (``store.py`` moves the bytes).
Configuration follows DVC: ``config.toml`` holds ``[remote.<name>] url = …`` and options, and
``[core] remote`` names the default; secrets come from the environment or the cloud SDK's own
configuration. ``config.toml`` is never pushed, and dsreg refuses to store a secret in it.

As in git, a tag on a remote certifies that the remote holds everything its revision reaches:
push sends objects first, makes them durable, and only then writes the tag. So a revision a
remote tag already names costs a push nothing to check, and a new revision of a dataset is
checked against the remote only for what its tagged revisions do not already reach.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import (
    CorruptObjectError,
    DsregError,
    IntegrityError,
    InvalidInputError,
    NotFoundError,
    ObjectNotFoundError,
    RevisionNotFoundError,
    TagExistsError,
)
from dsreg.model.names import check_name, parse_spec
from dsreg.objects.batch import ObjectBatch
from dsreg.objects.digest import PREFIX, is_digest, short
from dsreg.objects.hashing import hash_bytes
from dsreg.remote.config import (
    RemoteConfig,
    add_remote,
    check_options,
    default_remote,
    jobs_for,
    list_remotes,
    normalize_url,
    open_remote,
    remove_remote,
)
from dsreg.remote.store import WAVE, FetchReport, RemoteStore, staged_waves
from dsreg.repo.reachable import MANIFEST_KINDS, Node, Problem, reachable
from dsreg.repo.refs import LogEntry, parse_log
from dsreg.repo.registry import DIRNAME, Registry

if TYPE_CHECKING:
    from dsreg.views.dataset import Dataset

__all__ = [
    "CloneResult",
    "PullResult",
    "PushResult",
    "RefUpdate",
    "RemoteConfig",
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

# Objects fetched are committed to the store in waves, so an interrupted pull keeps what came;
# up to _FEW objects (manifests, tables) are stored one by one, without a staging batch.
_WAVE = WAVE
_FEW = 32


# -- results ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class RefUpdate:
    dataset: str
    tag: str
    revision: str
    previous: str | None
    status: str  # "created", "moved" or "unchanged"

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "previous": self.previous,
            "status": self.status,
        }


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


@dataclass(frozen=True, slots=True, kw_only=True)
class CloneResult:
    registry: str
    remote: str
    url: str
    refs: tuple[RefUpdate, ...]
    fetched: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "registry": self.registry,
            "remote": self.remote,
            "url": self.url,
            "refs": [r.to_dict() for r in self.refs],
            "objects_fetched": self.fetched,
            "bytes_fetched": self.bytes,
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
    sent); the remote's log keeps the old value. Nothing the remote holds is sent again.
    """
    rs = open_remote(reg, remote)
    n_jobs = jobs_for(reg, rs, jobs)
    targets = _push_targets(reg, specs)
    if not targets:
        raise InvalidInputError("nothing to push: this registry has no tags; name a revision")
    remote_refs = rs.refs()
    conflicts = [
        f"{ds}@{tag} (remote {short(remote_refs[ds, tag])}, local {short(d)})"
        for ds, tag, d in targets
        if ds is not None and tag is not None and remote_refs.get((ds, tag), d) != d
    ]
    if conflicts and not force:
        raise TagExistsError(
            f"remote {rs.label} holds {', '.join(conflicts)}; tags are immutable: nothing was "
            "pushed. Pull the remote's, or move the remote's tags with --force (its log keeps "
            "the old values)"
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
    updates = []
    for ds, tag, d in targets:
        if ds is None or tag is None:
            continue
        old = rs.get_ref(ds, tag)  # read again: narrow the window for a concurrent pusher
        if old == d:
            updates.append(
                RefUpdate(dataset=ds, tag=tag, revision=d, previous=d, status="unchanged")
            )
            continue
        if old is not None and not force:
            raise TagExistsError(
                f"tag {ds}@{tag} was set to {short(old)} on remote {rs.label} while pushing; "
                "pull it, or move it with --force"
            )
        entry = LogEntry.now(dataset=ds, tag=tag, old=old, new=d, command=command, event="push")
        rs.set_ref(ds, tag, d, old=old, entry=entry)
        status = "created" if old is None else "moved"
        updates.append(RefUpdate(dataset=ds, tag=tag, revision=d, previous=old, status=status))
    return PushResult(
        remote=rs.name,
        url=rs.url,
        revisions=tuple(sorted({d for _, _, d in targets})),
        sent=sent,
        bytes=nbytes,
        already=already,
        refs=tuple(updates),
    )


# -- fetching --------------------------------------------------------------------------------
class _StoreSink:
    """A few verified downloads, stored one by one (each fsynced) without a staging batch."""

    def __init__(self, reg: Registry) -> None:
        self._store = reg.store

    def put_bytes(self, data: bytes, *, expect: str | None = None) -> str:
        got = hash_bytes(data)
        if expect is not None and got != expect:
            return got
        return self._store.put_bytes(data)

    def put_file(self, path: str, *, size_hint: int = 0) -> str:
        return self._store.put_file(Path(path))


def _fetch(
    reg: Registry, rs: RemoteStore, digests: Iterable[str], *, jobs: int, progress: ProgressHook
) -> FetchReport:
    """Fetch the objects this registry lacks, verified; raise on any missing or corrupt one
    (after keeping the intact ones). Many objects are staged and committed in waves, so an
    interrupted pull keeps what arrived; a few are stored one by one."""
    need = sorted(reg.store.missing(digests))
    if not need:
        return FetchReport()
    reports: list[FetchReport] = []
    with reg.lock():
        if len(need) <= _FEW:
            sink = _StoreSink(reg)
            reports.append(rs.fetch(need, sink, reg.store.tmp, jobs=jobs, progress=progress))
        else:
            _fetch_waves(reg, rs, need, reports, jobs=jobs, progress=progress)
    corrupt = [c for r in reports for c in r.corrupt]
    missing = [m for r in reports for m in r.missing]
    if corrupt:
        listed = ", ".join(
            f"{d} (its bytes hash to {short(g)})" if is_digest(g) else f"{d} ({g})"
            for d, g in corrupt[:5]
        )
        raise CorruptObjectError(
            f"remote {rs.label} holds {len(corrupt)} corrupt objects, not used: {listed}; "
            "delete them on the remote and push them again from a registry that holds them"
        )
    if missing:
        raise ObjectNotFoundError(
            f"remote {rs.label} lacks {len(missing)} objects "
            f"({', '.join(short(d) for d in missing[:5])}); push them from a registry that "
            "holds them"
        )
    return FetchReport(fetched=sum(r.fetched for r in reports), bytes=sum(r.bytes for r in reports))


def _fetch_waves(
    reg: Registry,
    rs: RemoteStore,
    need: list[str],
    reports: list[FetchReport],
    *,
    jobs: int,
    progress: ProgressHook,
) -> None:
    def stage(batch: ObjectBatch, wave: Sequence[str], done: int) -> FetchReport:
        def hook(task: str, n: int, total: int) -> None:
            progress(task, done + n, len(need))

        return rs.fetch(wave, batch, reg.store.tmp, jobs=jobs, progress=hook)

    reports.extend(staged_waves(reg.store, need, stage, wave=_WAVE))


def _fetch_closure(
    reg: Registry,
    rs: RemoteStore,
    starts: Iterable[str],
    *,
    payloads: bool,
    jobs: int,
    progress: ProgressHook,
) -> tuple[int, int]:
    """Fetch what ``starts`` reach, wave by wave as the walk names it: the manifests and tables
    (a wave is fetched, then read, and names the next); with ``payloads``, every blob too.
    Return (objects fetched, bytes)."""
    fetched = nbytes = 0
    unreadable: list[Problem] = []

    def refuse() -> IntegrityError:
        return IntegrityError(
            "; ".join(f"{short(p.digest)}: {p.problem}" for p in unreadable[:3])
            + "; run 'dsreg verify'"
        )

    def fetch(wave: Collection[str]) -> None:
        nonlocal fetched, nbytes
        if unreadable:
            raise refuse()  # before fetching blobs that an unreadable table may not even name
        rep = _fetch(reg, rs, wave, jobs=jobs, progress=progress)
        fetched += rep.fetched
        nbytes += rep.bytes

    def on_error(node: Node, e: DsregError) -> None:
        if node.kind in MANIFEST_KINDS:
            raise e  # a manifest is needed to go on: stop here, with its own error
        unreadable.append(Problem(digest=node.digest, problem=str(e)))

    reachable(reg, starts, tables=payloads, before_read=fetch, on_error=on_error)
    if unreadable:
        raise refuse()
    return fetched, nbytes


# -- pull ------------------------------------------------------------------------------------
def _pull_targets(
    reg: Registry, rs: RemoteStore, specs: Sequence[str]
) -> list[tuple[str | None, str | None, str]]:
    """``(dataset, tag, digest)``; a tag comes from the remote when it holds it."""
    if not specs:
        found = rs.refs()
        if not found:
            raise RevisionNotFoundError(
                f"remote {rs.label} holds no tags: nothing to pull (is the URL right?)"
            )
        return [(ds, tag, d) for (ds, tag), d in found.items()]
    out: list[tuple[str | None, str | None, str]] = []
    listing: dict[tuple[str, str], str] | None = None
    for spec in specs:
        if "@" not in spec and not spec.startswith(PREFIX):
            check_name(spec, what="dataset name")
            listing = rs.refs() if listing is None else listing
            mine = [(ds, t, d) for (ds, t), d in listing.items() if ds == spec]
            if not mine:
                raise RevisionNotFoundError(f"remote {rs.label} holds no tags of {spec!r}")
            out += mine
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
            listing = rs.refs() if listing is None else listing
            tags = sorted(t for (ds, t) in listing if ds == s.dataset)
            raise RevisionNotFoundError(
                f"remote {rs.label} holds no tag {spec!r} (its tags of {s.dataset!r}: "
                f"{', '.join(tags) or 'none'}), and this registry cannot resolve it; "
                "a digest must be given in full to pull it"
            ) from None
        out.append((r.dataset, r.tag, r.digest))
    return out


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
    refused unless ``force`` (before anything is fetched)."""
    rs = open_remote(reg, remote)
    n_jobs = jobs_for(reg, rs, jobs)
    targets = _pull_targets(reg, rs, specs)
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
    digests = sorted({d for _, _, d in targets})
    fetched, nbytes = _fetch_closure(
        reg, rs, digests, payloads=True, jobs=n_jobs, progress=progress
    )
    updates = _set_local_refs(reg, targets, force=force, command=command)
    return PullResult(
        remote=rs.name,
        url=rs.url,
        revisions=tuple(digests),
        fetched=fetched,
        bytes=nbytes,
        refs=tuple(updates),
    )


def _set_local_refs(
    reg: Registry,
    targets: Iterable[tuple[str | None, str | None, str]],
    *,
    force: bool,
    command: str,
) -> list[RefUpdate]:
    out = []
    with reg.lock():
        for ds, tag, d in targets:
            if ds is None or tag is None:
                continue
            old = reg.refs.set(ds, tag, d, force=force, command=command)
            status = "unchanged" if old == d else ("created" if old is None else "moved")
            out.append(RefUpdate(dataset=ds, tag=tag, revision=d, previous=old, status=status))
    return out


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
    rep = _fetch(reg, rs, need, jobs=jobs_for(reg, rs, jobs), progress=progress)
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
    _fetch_closure(reg, rs, [resolved.digest], payloads=True, jobs=jobs, progress=no_progress)
    return Dataset(reg, resolved)


# -- clone -----------------------------------------------------------------------------------
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
    and tables; payload blobs come later (``pull``, ``open(remote=)``, ``checkout``)."""
    check_name(name, what="remote name")
    url = normalize_url(url)
    opts = check_options(options or {})
    root = Path(path if path is not None else Path.cwd() / DIRNAME).absolute()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InvalidInputError(f"{root} exists and is not empty; clone into a new folder")
    rs = RemoteStore(name=name, url=url, options=opts)
    found = rs.refs()
    if not found:
        raise RevisionNotFoundError(
            f"remote {url} holds no tags: nothing to clone; check the URL (a dsreg remote holds "
            "refs/, logs/ and files/blake3/)"
        )
    created = not root.exists()
    try:
        reg = Registry.init(root)
        add_remote(reg, name, url, options=opts, default=True)
        n_jobs = jobs_for(reg, rs, jobs)
        fetched, nbytes = _fetch_closure(
            reg, rs, sorted(set(found.values())), payloads=False, jobs=n_jobs, progress=progress
        )
        for ds in sorted({ds for ds, _ in found}):
            _copy_log(reg, rs, ds)
        updates = _set_local_refs(
            reg, [(ds, t, d) for (ds, t), d in found.items()], force=False, command=command
        )
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        raise
    return CloneResult(
        registry=str(root),
        remote=name,
        url=url,
        refs=tuple(updates),
        fetched=fetched,
        bytes=nbytes,
    )


def _copy_log(reg: Registry, rs: RemoteStore, dataset: str) -> None:
    """The remote's history of a dataset's tags becomes the start of the local log."""
    reg.refs.append_log(dataset, parse_log(rs.log_bytes(dataset).decode("utf-8", "replace")))
