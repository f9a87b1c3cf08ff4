"""Reading a remote in place: its tags (``ls --remote``), one revision's manifests and tables
(``show`` and ``sql --remote``, never its payloads), or the whole revision (``open`` and
``checkout --remote``), and its recorded results (``leaderboard`` and ``cite --model`` with
``--remote``: model refs, records and predictions), on any machine, with or without a registry
of one's own.

Where there is no registry, what is fetched goes to the per-user cache registry
(``Registry.cache``), verified as every fetch is; the cache holds objects and no tags, so a
``dataset@tag`` is read from the remote's tag each time (one small read), and a digest pinned in
a paper resolves to the same bytes on every machine. How a spec resolves on a remote:

- ``dataset@tag``: the remote's ``refs/<dataset>/<tag>``, checked to name a revision of
  ``dataset`` (as a pull checks it);
- ``blake3:<64 hex>`` and ``dataset@<64 hex>``: that digest (a revision or a snapshot);
- ``dataset@<prefix>``: the one revision among the remote's tags of ``dataset`` whose digest
  starts with it (a remote cannot be searched for a prefix: a revision no tag names is read by
  its full digest).

In a registry of one's own a spec resolves there first (a local tag wins, as for ``pull``), and
only what is missing is fetched.

A read (``RemoteReader``) is sure of the objects it fetched only while they are there: the cache
may be collected (``dsreg gc``) or deleted at any time, and nothing in it is tagged. So an
object a read finds missing or corrupt here is fetched again from the remote, verified, and the
read goes on; the command holds the registry's lock, shared, for the whole read, so that a gc
waits for it rather than racing it (docs/remotes.md, "Reading a remote").

Listing a remote's tags reads one tag file per tag; ``ls --remote`` reads at most ``MAX_TAGS``
of them (``--max-tags``, ``$DSREG_MAX_TAGS``), and resolving ``dataset@tag`` reads that tag's
file alone.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import (
    AmbiguousDigestError,
    ConfigError,
    CorruptObjectError,
    DsregError,
    IntegrityError,
    InvalidInputError,
    NotFoundError,
    ObjectNotFoundError,
    RemoteError,
    RevisionNotFoundError,
    StorageError,
)
from dsreg.formats.names import check_name, parse_spec
from dsreg.objects.digest import PREFIX, is_digest, short
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader, Marks, RecordedResult, Resolved, owned_revision
from dsreg.registry.refs import RefLog, parse_log
from dsreg.remote import transfer
from dsreg.remote.config import jobs_for, open_remote
from dsreg.remote.fetch import Fetch, owner
from dsreg.remote.results import RemoteMarks, fetched_result, read_marks
from dsreg.remote.store import RemoteStore, Target, listed_tags, looks_like_url

__all__ = [
    "ENV_MAX_TAGS",
    "MAX_TAGS",
    "RemoteReader",
    "RemoteTag",
    "RemoteTags",
    "reading_remote",
    "remote_marks",
    "remote_tags",
    "tag_cap",
]

T = TypeVar("T")

# Tag files a listing of a remote reads at most, unless told otherwise: each is one request (on
# a web server or an object store, a round trip), and a remote may name hundreds of thousands.
MAX_TAGS = 10_000
ENV_MAX_TAGS = "DSREG_MAX_TAGS"
# Times one object is fetched again for one read before the read gives up: it keeps vanishing
# or breaking here after each verified fetch, so something else is at work.
_TRIES = 3


def reading_remote(reg: Registry, remote: str, *, cached: bool) -> RemoteStore:
    """The remote to read: a configured name or a URL; in the cache registry (no registry of
    one's own, so no remote names), a URL or folder path only."""
    if cached and not looks_like_url(remote):
        raise ConfigError(
            f"no registry here, so remote {remote!r} names nothing: give the remote's URL or "
            "folder path (https://…, s3://…, /mnt/nas/dsreg), or run the command in a registry "
            "that has that remote"
        )
    return open_remote(reg, remote)


def tag_cap(given: int | None = None) -> int | None:
    """How many tag files a listing reads at most: ``given`` (``--max-tags``), else
    ``$DSREG_MAX_TAGS``, else ``MAX_TAGS``; ``None`` (no cap) for 0."""
    advice = "give a number of tags, at least 0 (0 reads every tag)"
    if given is None:
        text = os.environ.get(ENV_MAX_TAGS, "").strip()
        if not text:
            return MAX_TAGS
        if not text.isascii() or not text.isdigit():
            raise InvalidInputError(f"${ENV_MAX_TAGS} is {text!r}: {advice}")
        given = int(text)
    elif isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise InvalidInputError(f"max_tags is {given!r}: {advice}")
    return given or None


class RemoteTag(NamedTuple):
    """One tag a remote holds, and the revision it names."""

    dataset: str
    tag: str
    revision: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteTags:
    """A remote's tags as a listing read them: ``tags``, sorted, damaged tags left out;
    ``named``, how many tags the remote names; ``cap``, the most tag files the listing read
    (``None``: no cap). ``omitted`` tags were not read (0 unless the remote names more than
    ``cap``)."""

    tags: list[RemoteTag]
    named: int
    cap: int | None

    @property
    def omitted(self) -> int:
        return 0 if self.cap is None else max(0, self.named - self.cap)


def remote_tags(
    rs: RemoteStore, *, max_tags: int | None = None, progress: ProgressHook = no_progress
) -> RemoteTags:
    """The remote's tags, sorted by dataset and tag: one listing (or ``info/refs``) names them,
    then the tag files of the first ``tag_cap(max_tags)`` are read, concurrently, with
    ``progress``. ``RevisionNotFoundError`` if it holds none."""
    cap = tag_cap(max_tags)
    names = rs.tag_names()
    found = rs.read_tags(names if cap is None else names[:cap], progress=progress)
    if not found.good and not found.damaged and (cap is None or len(names) <= cap):
        raise RevisionNotFoundError(
            f"remote {rs.label} holds no tags (is the URL right? a dsreg remote holds refs/, "
            "logs/ and files/blake3/; one served over http(s) also info/refs, which every "
            "push writes)"
        )
    tags = sorted(RemoteTag(name.dataset, name.tag, d) for name, d in found.good.items())
    return RemoteTags(tags=tags, named=len(names), cap=cap)


def remote_marks(reg: Registry, rs: RemoteStore) -> RemoteMarks:
    """Every yank and retirement ``rs`` holds, each mark fetched into ``reg`` and checked (a
    damaged one is refused, and named in the result's ``refused``)."""
    with Fetch(reg, rs, jobs=jobs_for(reg, rs, None)) as fetch:
        return read_marks(fetch)


def _remote_target(rs: RemoteStore, spec: str) -> Target:
    """What ``spec`` names on the remote (module docstring). A tag is its one tag file; a prefix
    reads the tag files of its dataset's tags only (at most ``tag_cap()``)."""
    s = parse_spec(spec)
    if s.digest is not None:
        return Target(None, None, s.digest)
    assert s.dataset is not None and s.ref is not None
    hexpart = s.ref.removeprefix(PREFIX)
    if is_digest(PREFIX + hexpart):
        return Target(s.dataset, None, PREFIX + hexpart)
    if not s.ref.startswith(PREFIX):
        found = rs.get_ref(s.dataset, s.ref)
        if found is not None:
            return Target(s.dataset, s.ref, found)
    names = rs.tag_names(s.dataset)  # names only: no tag file is read for them
    searched = ""
    if s.could_be_prefix and names:
        cap = tag_cap()
        good = rs.read_tags(names if cap is None else names[:cap]).good
        matches = sorted({d for d in good.values() if d.removeprefix(PREFIX).startswith(hexpart)})
        if len(matches) == 1:
            return Target(s.dataset, None, matches[0])
        if len(matches) > 1:
            raise AmbiguousDigestError(
                f"{spec!r} is ambiguous on remote {rs.label}: it matches revisions "
                + ", ".join(short(d) for d in matches)
                + "; type more characters of the digest",
                prefix=s.ref,
                candidates=matches,
            )
        if cap is not None and len(names) > cap:
            searched = (
                f"; the revisions of its first {cap:,} tags were searched for the prefix "
                f"(${ENV_MAX_TAGS} raises the cap)"
            )
    raise RevisionNotFoundError(
        f"remote {rs.label} holds no tag {spec!r} (its tags of {s.dataset!r}: "
        f"{listed_tags(names)}"
        f"{searched}); a revision no tag names is read by its full digest (blake3:<64 hex>)",
        dataset=s.dataset,
        ref=s.ref,
    )


class RemoteReader:
    """One command's read of remote ``rs`` into ``registry`` (a registry of one's own, or the
    cache registry when ``cached``), as a ``Reader``: revisions resolved and fetched
    (``payloads`` too when ``payloads``), the remote's tags, log, marks and recorded results
    read there, and any object the read then finds missing or corrupt here fetched again from
    the remote, verified, so that the read goes on with the right bytes (module docstring).
    The caller holds ``registry.lock()`` for the whole read when it can (a command), so that gc
    waits for it."""

    __slots__ = ("_warned", "cached", "jobs", "payloads", "progress", "registry", "remote", "rs")

    def __init__(
        self,
        registry: Registry,
        rs: RemoteStore,
        *,
        remote: str,
        cached: bool,
        payloads: bool = False,
        jobs: int | None = None,
        progress: ProgressHook = no_progress,
    ) -> None:
        self.registry = registry
        self.rs = rs
        self.remote = remote
        self.cached = cached
        self.payloads = payloads
        self.jobs = jobs_for(registry, rs, jobs)
        self.progress = progress
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"RemoteReader({self.rs.label!r} into {str(self.registry.root)!r})"

    @property
    def where(self) -> str:
        return f" on remote {self.rs.label}"

    fetches = True

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The registry's lock, shared, for a command's whole read; for the cache, which may
        be deleted at any time, its folders made again first if they are gone (and again if
        it goes between that and taking the lock)."""
        with contextlib.ExitStack() as held:
            for attempt in range(_TRIES):
                if self.cached and not _intact(self.registry):
                    Registry.init(self.registry.root)
                try:
                    held.enter_context(self.registry.lock())
                    break
                except StorageError:
                    if not self.cached or attempt == _TRIES - 1:
                        raise
            yield

    def _fetch(self, progress: ProgressHook | None = None) -> Fetch:
        """A fetch from the remote into the registry, to be entered (it takes the lock)."""
        hook = self.progress if progress is None else progress
        return Fetch(self.registry, self.rs, jobs=self.jobs, progress=hook)

    def revision(self, spec: str) -> Resolved:
        """Resolve ``spec`` (in a registry of one's own, here first; else on the remote) and
        fetch what its revision reaches that the registry lacks, verified (payloads only if
        ``payloads``). A revision fetched whole into a registry of one's own through the
        remote's tag has that tag recorded here, as a pull would; the cache records no tag.
        A remote tag naming no revision of its dataset is an ``IntegrityError``; a corrupt
        remote object a ``CorruptObjectError`` (nothing of it is stored or served)."""
        here = None if self.cached else self._here(spec)
        if here is not None:
            with self._fetch() as fetch:
                fetch.whole([here.digest], payloads=self.payloads)
            return replace(here, reader=self)
        if self.payloads and not self.cached:
            transfer.pull(self.registry, [spec], remote=self.remote,
                          command=f"dsreg.open({spec!r}, remote={self.remote!r})")  # fmt: skip
            return replace(LocalReader(self.registry).revision(spec), reader=self)
        target = _remote_target(self.rs, spec)
        with self._fetch() as fetch:
            fetch.whole([target.digest], payloads=self.payloads)
            rev, dataset = owned_revision(self.registry, target.digest)
            self._check_owner(spec, target)
        if spec not in self._warned:
            self._warned.add(spec)
            self.marks(dataset).warn(dataset, target.tag)
        return Resolved(
            reader=self, digest=rev.digest, revision=rev, dataset=dataset, tag=target.tag,
            spec=spec,
        )  # fmt: skip

    def _here(self, spec: str) -> Resolved | None:
        try:
            return LocalReader(self.registry).revision(spec)
        except NotFoundError:
            return None

    # -- the record of a dataset on the remote -------------------------------------------------
    def tags(self, dataset: str) -> dict[str, str]:
        """The remote's tags of ``dataset`` (a damaged one is left out, as a listing does)."""
        good = self.rs.read_tags(self.rs.tag_names(dataset)).good
        return {name.tag: d for name, d in sorted(good.items())}

    def log(self, dataset: str) -> RefLog:
        return parse_log(self.rs.log_bytes(dataset), dataset=dataset)

    def marks(self, dataset: str) -> Marks:
        with self._fetch() as fetch:
            marks = read_marks(fetch, [dataset])
        yanks = {name.tag: why for name, why in marks.yanks().items()}
        return Marks(yanks=yanks, retired=marks.retired().get(dataset))

    def results(self, dataset: str) -> dict[str, RecordedResult]:
        """The remote's recorded models of ``dataset``, each fetched here with its predictions.
        A damaged model ref is a ``RemoteError`` naming it: none is skipped silently."""
        rr = self.rs.results()
        found = rr.scan_refs(dataset)
        if found.damaged:
            name, data = min(found.damaged.items())
            raise _damaged_model_ref(name.dataset, name.tag, self.rs.label, data)
        return {name.tag: self.result(dataset, name.tag) for name in sorted(found.good)}

    def result(self, dataset: str, model: str) -> RecordedResult:
        """The remote's recorded result of ``model`` on ``dataset``, fetched here with its
        predictions, verified and checked (``IntegrityError`` naming the model ref
        otherwise). ``NotFoundError`` naming the models the remote records when it records no
        such model."""
        check_name(model, what="model name")
        rr = self.rs.results()
        state = rr.ref_state(dataset, model)
        if state is None:
            known = ", ".join(name.tag for name in rr.tag_names(dataset)) or "none"
            raise NotFoundError(
                f"no model {model!r} is recorded for {dataset!r} on remote {self.rs.label} "
                f"(recorded there: {known}); push it there with 'dsreg push' from the registry "
                "that recorded it"
            )
        if isinstance(state, bytes):
            raise _damaged_model_ref(dataset, model, self.rs.label, state)
        with self._fetch() as fetch:
            rec = fetched_result(fetch, dataset, model, state)
        assert rec is not None  # no snapshot filter: every record is fetched
        return RecordedResult(state, rec)

    def _check_owner(self, spec: str, target: Target) -> None:
        """A remote tag (or ``dataset@<digest>``) names a revision of its own dataset."""
        of = owner(self.registry, target.digest)
        if target.dataset is None or of.dataset == target.dataset:
            return
        what = f"a revision of dataset {of.dataset!r}" if of.dataset is not None else of.why
        named = (
            f"tag {target.dataset}@{target.tag} on remote {self.rs.label} names"
            if target.tag
            else f"{spec!r} is"
        )
        raise IntegrityError(
            f"{named} {short(target.digest)}, {what}, not a revision of {target.dataset!r}: not "
            "served; repair the tag on the remote (push the right revision with --force)",
            digest=target.digest,
        )

    def refetch(self, digests: Collection[str], progress: ProgressHook | None = None) -> None:
        """Fetch from the remote, verified, the objects among ``digests`` that this registry
        lacks or found corrupt (a read marks them): what a gc or a person removed, what the
        disk damaged. A corrupt one is replaced whole; an intact one is left alone."""
        if self.cached:
            Registry.init(self.registry.root)  # the cache may have been deleted whole meanwhile
        with self._fetch(progress) as fetch:
            fetch.objects(digests)

    def repairing(self, read: Callable[[], T]) -> T:
        """``read()``; when it fails on an object of this registry that is missing or was found
        corrupt, that object is fetched again and ``read()`` runs again. An object that fails
        ``_TRIES`` times, each after a verified fetch, ends the read with an error saying
        what to do (for the cache: that it may be deleted). When the cache itself was deleted
        under the read (a fetch cannot stage, install or lock in it), its folders are made
        again and ``read()`` runs again, as many times."""
        tries: Counter[str] = Counter()
        while True:
            try:
                return read()
            except StorageError:
                if not self.cached or _intact(self.registry) or tries[""] >= _TRIES - 1:
                    raise
                tries[""] += 1
                Registry.init(self.registry.root)
            except (ObjectNotFoundError, IntegrityError) as e:
                digest = self._restorable(e)
                if digest is None:
                    raise
                tries[digest] += 1
                if tries[digest] >= _TRIES:
                    raise self._gave_up(digest, e) from e
                self.refetch([digest])

    def _restorable(self, e: DsregError) -> str | None:
        """The object of this registry behind ``e`` if a fetch can restore it: absent, or
        marked corrupt by the read that found it so. Errors about the remote name none."""
        digest = getattr(e, "digest", None)
        if not isinstance(digest, str) or not is_digest(digest):
            return None
        store = self.registry.store
        if not store.has(digest) or digest in store.marked_corrupt():
            return digest
        return None

    def _gave_up(self, digest: str, e: DsregError) -> DsregError:
        if not self.cached:
            return e
        missing = isinstance(e, NotFoundError)
        kind = ObjectNotFoundError if missing else CorruptObjectError
        return kind(
            f"object {short(digest)} in the cache registry {self.registry.root} was "
            f"{'missing' if missing else 'corrupt'} again after {_TRIES - 1} verified fetches "
            f"from remote {self.rs.label}: something else removes or damages it there (another "
            "program, a failing disk), and it was not served. The cache holds nothing a remote "
            f"does not: delete {self.registry.root} (or only "
            f"{self.registry.store.path(digest)}) and run the command with --remote again",
            digest=digest,
        )


def _intact(reg: Registry) -> bool:
    """Whether a registry's folders are all there (the cache's may be deleted at any time)."""
    return all((reg.root / sub).is_dir() for sub in ("files", "refs", "logs", "tmp"))


def _damaged_model_ref(dataset: str, model: str, label: str, data: bytes) -> RemoteError:
    return RemoteError(
        f"model ref {dataset}/{model} on remote {label} is damaged (holds "
        f"{data.decode('ascii', 'replace').strip()[:80]!r}); push the result again with "
        "--force from a registry that holds it"
    )
