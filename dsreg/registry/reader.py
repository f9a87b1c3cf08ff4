"""The one door every read goes through: a spec resolved once, into a ``Resolved`` revision
bound to the ``Reader`` that read it (docs/architecture.md, "One door").

A ``Reader`` is where revisions and the record that travels with them are read: the local
registry (``LocalReader``), or a remote read through a registry of one's own or the per-user
cache (``dsreg.remote.read.RemoteReader``). Both answer the same questions: a spec's revision,
a dataset's tags and ref log, its yanks and retirement, its recorded results. Everything a read
reports beyond the revision's own objects (the order of a dataset's tags, the overlays made for
it, a citation's date) is computed here from those answers, by the same functions whichever
reader gives them, so a registry, its remote and the published site agree.

The public API resolves each spec it is given once, with ``Reader.revision``; the layers below
take the ``Resolved`` handle, never a spec and a registry. Yank and retirement notices are
given there, once per spec and reader.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from dsreg.errors import (
    AmbiguousDigestError,
    DsregError,
    IntegrityError,
    InvalidInputError,
    RevisionNotFoundError,
    YankedWarning,
)
from dsreg.formats.manifests import Overlay, Revision, Snapshot
from dsreg.formats.names import parse_spec
from dsreg.objects.digest import PREFIX, short
from dsreg.registry.folder import Registry
from dsreg.registry.markrefs import may_be_marked
from dsreg.registry.refs import LogEntry, RefLog

if TYPE_CHECKING:
    from dsreg._util.progress import ProgressHook
    from dsreg.registry.results import ResultRecord

__all__ = [
    "LocalReader",
    "LoggedOverlays",
    "Marks",
    "OverlayRecord",
    "Reader",
    "RecordedResult",
    "Resolved",
    "dataset_overlays",
    "first_set",
    "local_reader",
    "owned_revision",
    "pinned",
    "tag_order",
    "tagged",
    "warn_outside",
]

T = TypeVar("T")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A spec resolved: the revision, its full digest, the dataset and tag it was reached by,
    and the reader whose registry holds its objects (verified as they are read)."""

    reader: Reader = field(repr=False, compare=False)
    digest: str
    revision: Revision
    dataset: str
    tag: str | None
    spec: str

    @property
    def registry(self) -> Registry:
        """The registry the revision's manifests and tables are read from."""
        return self.reader.registry


@dataclass(frozen=True, slots=True, kw_only=True)
class Marks:
    """A dataset's yanked tags (``{tag: reason}``) and its retirement, if any
    (``(successor, reason)``)."""

    yanks: Mapping[str, str] = field(default_factory=dict)
    retired: tuple[str, str] | None = None

    def warn(self, dataset: str, tag: str | None) -> None:
        """The notice a read of ``dataset@tag`` gives (``YankedWarning``), pointed at the
        caller's line outside dsreg: the tag's yank reason, the dataset's successor."""
        reason = self.yanks.get(tag) if tag is not None else None
        if reason is not None:
            warn_outside(f"{dataset}@{tag} is yanked: {reason}")
        if self.retired is not None:
            successor, why = self.retired
            warn_outside(f"dataset {dataset} is retired: {why}; use {successor} instead")


class RecordedResult(NamedTuple):
    """A model's recorded result: the record's digest and the record."""

    digest: str
    record: ResultRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlayRecord:
    """An overlay as listed: its digest, its manifest."""

    digest: str
    overlay: Overlay


class Reader(Protocol):
    """Where revisions are read: the local registry, or a remote through a registry of one's
    own or the cache. ``where`` ends an error's place (empty for the local registry)."""

    @property
    def registry(self) -> Registry: ...

    @property
    def where(self) -> str: ...

    @property
    def fetches(self) -> bool:
        """Whether ``refetch`` can bring objects again (a remote's reader)."""
        ...

    def revision(self, spec: str) -> Resolved:
        """``spec`` resolved, its manifests and tables (and payloads, if the reader reads
        them) verified in ``registry``; a yanked tag or retired dataset warns once."""
        ...

    def tags(self, dataset: str) -> dict[str, str]:
        """``{tag: revision}`` of every tag of ``dataset``, yanked ones included."""
        ...

    def log(self, dataset: str) -> RefLog:
        """The ref log of ``dataset``, oldest first."""
        ...

    def marks(self, dataset: str) -> Marks: ...

    def results(self, dataset: str) -> dict[str, RecordedResult]:
        """Every model recorded for ``dataset``, by name, each record checked and its
        predictions in ``registry``."""
        ...

    def result(self, dataset: str, model: str) -> RecordedResult:
        """One recorded model; ``NotFoundError`` naming those recorded when there is none."""
        ...

    def refetch(self, digests: Collection[str], progress: ProgressHook | None = None) -> None:
        """Bring again the objects among ``digests`` that ``registry`` lacks or found corrupt,
        verified; ``ObjectNotFoundError`` where the reader has nowhere to bring them from."""
        ...

    def repairing(self, read: Callable[[], T]) -> T:
        """``read()``, run again after an object it found missing or corrupt is brought
        again (a remote's reader); the local registry runs it once."""
        ...


def warn_outside(message: str) -> None:
    """Warn (``YankedWarning``) at the first caller outside the dsreg package: the line of
    the script or notebook that asked, whatever the depth of the call."""
    import sys

    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(message, YankedWarning, stacklevel=level)


# -- the local registry ----------------------------------------------------------------------


class LocalReader:
    """The local registry as a ``Reader``: specs resolve against its tags and objects."""

    __slots__ = ("_warned", "registry")

    where = ""
    fetches = False

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"LocalReader({str(self.registry.root)!r})"

    def revision(self, spec: str) -> Resolved:
        """``dataset@tag``, ``dataset@<prefix>`` or ``blake3:<hex>`` as a revision here."""
        reg = self.registry
        s = parse_spec(spec)
        if s.digest is not None:
            rev, dataset = owned_revision(reg, s.digest)
            return self._resolved(rev, dataset, None, spec)
        assert s.dataset is not None and s.ref is not None
        if not s.ref.startswith(PREFIX):
            digest = reg.refs.get(s.dataset, s.ref)
            if digest is not None:
                rev = reg.revision(digest)
                _check_tag_dataset(reg, s.dataset, s.ref, rev)
                if may_be_marked(reg.root, s.dataset, s.ref) and spec not in self._warned:
                    self._warned.add(spec)
                    self.marks(s.dataset).warn(s.dataset, s.ref)
                return self._resolved(rev, s.dataset, s.ref, spec, digest=digest)
        if s.could_be_prefix:
            found = _revisions_with_prefix(reg, s.dataset, s.ref)
            if len(found) == 1:
                return self._resolved(found[0], s.dataset, None, spec)
            if len(found) > 1:
                raise AmbiguousDigestError(
                    f"{spec!r} is ambiguous: it matches revisions "
                    + ", ".join(short(r.digest) for r in found)
                    + "; type more characters of the digest",
                    prefix=s.ref,
                    candidates=[r.digest for r in found],
                )
        tags = reg.refs.tags(s.dataset)
        if not tags and s.dataset not in reg.refs.datasets():
            raise RevisionNotFoundError(
                f"no dataset {s.dataset!r} in this registry ({reg.root}); "
                "see 'dsreg ls', or add it with 'dsreg add'",
                dataset=s.dataset,
                ref=s.ref,
            )
        raise RevisionNotFoundError(
            f"no tag or revision {s.ref!r} in dataset {s.dataset!r}; its tags are "
            f"{', '.join(sorted(tags)) or '(none)'}",
            dataset=s.dataset,
            ref=s.ref,
        )

    def _resolved(
        self, rev: Revision, dataset: str, tag: str | None, spec: str, *, digest: str = ""
    ) -> Resolved:
        """The handle; ``digest``, when known (a tag's value), saves computing it again."""
        return Resolved(
            reader=self, digest=digest or rev.digest, revision=rev, dataset=dataset, tag=tag,
            spec=spec,
        )  # fmt: skip

    def tags(self, dataset: str) -> dict[str, str]:
        return self.registry.refs.tags(dataset)

    def log(self, dataset: str) -> RefLog:
        return self.registry.refs.log(dataset)

    def marks(self, dataset: str) -> Marks:
        from dsreg.registry.marks import read_retirement, read_yanks

        root = self.registry.root
        retired = read_retirement(root, dataset)
        return Marks(
            yanks={t: y.reason for t, y in read_yanks(root, dataset).items()},
            retired=None if retired is None else (retired.successor, retired.reason),
        )

    def results(self, dataset: str) -> dict[str, RecordedResult]:
        from dsreg.registry.results import checked_record, list_results

        reg = self.registry
        return {
            m: RecordedResult(d, checked_record(reg, dataset, m, d))
            for m, d in list_results(reg, dataset).items()
        }

    def result(self, dataset: str, model: str) -> RecordedResult:
        from dsreg.registry.results import resolve_result

        digest, record = resolve_result(self.registry, dataset, model)
        return RecordedResult(digest, record)

    def refetch(self, digests: Collection[str], progress: ProgressHook | None = None) -> None:
        from dsreg.errors import ObjectNotFoundError

        missing = sorted(digests)
        raise ObjectNotFoundError(
            f"{len(missing)} objects are not in this registry (first {short(missing[0])}); "
            "pull them from a remote that holds them ('dsreg pull SPEC -r REMOTE')",
            digest=missing[0],
        )

    def repairing(self, read: Callable[[], T]) -> T:
        return read()


def owned_revision(reg: Registry, digest: str) -> tuple[Revision, str]:
    """The revision ``digest`` names in ``reg`` (a snapshot stands for its ``original``
    revision) and its dataset; ``InvalidInputError`` for an overlay, a payload or a table."""
    if reg.store.has(digest) and not reg.is_manifest(digest):
        raise InvalidInputError(
            f"{short(digest)} is a payload or table, not a revision; give a revision, "
            "a snapshot or dataset@tag (see 'dsreg ls')"
        )
    m = reg.manifest(digest)
    if isinstance(m, Overlay):
        raise InvalidInputError(
            f"{short(digest)} is an overlay, not a revision; make one with "
            f"'dsreg tag <dataset>@<tag> <dataset>@original --overlay {short(digest)}'"
        )
    rev = Revision(snapshot=digest) if isinstance(m, Snapshot) else m
    assert isinstance(rev, Revision)
    return rev, reg.snapshot(rev.snapshot).dataset


def _check_tag_dataset(reg: Registry, dataset: str, tag: str, rev: Revision) -> None:
    """Refuse a tag of ``dataset`` whose revision ``rev`` is another dataset's (a hand edit,
    or a clone from before tags were checked): served, it would be cited under the wrong
    name. ``IntegrityError`` naming both datasets."""
    owner = reg.dataset_of(rev)
    if owner != dataset:
        raise IntegrityError(
            f"tag {dataset}@{tag} names revision {short(rev.digest)}, a revision of dataset "
            f"{owner!r}, not of {dataset!r}: the tag is damaged (edited by hand, or copied "
            f"from a remote by an older dsreg) and is not served; point it at a revision "
            f"of {dataset!r} with 'dsreg tag --force {dataset}@{tag} <revision>' "
            f"(see 'dsreg log {dataset}'), or use {owner}@{short(rev.digest)}"
        )


def _revisions_with_prefix(reg: Registry, dataset: str, prefix: str) -> list[Revision]:
    out: dict[str, Revision] = {}
    for d in reg.store.match_prefix(prefix):
        if not reg.is_manifest(d):
            continue
        try:
            rev, ds = owned_revision(reg, d)
        except DsregError:
            continue
        if ds == dataset:
            out[rev.digest] = rev
    return list(out.values())


# -- the record that travels with a dataset -----------------------------------------------------


def first_set(tags: Iterable[str], entries: Iterable[LogEntry]) -> list[str]:
    """``tags`` in the order a log's ``entries`` first set them (a tag's own line, or the line
    of a push that wrote it), then by name."""
    first: dict[str, int] = {}
    for i, e in enumerate(entries):
        if e.event in ("tag", "push") and e.tag is not None:
            first.setdefault(e.tag, i)
    return sorted(tags, key=lambda t: (first.get(t, len(first)), t))


def tag_order(reader: Reader, dataset: str) -> list[str]:
    """The tags of ``dataset`` a reader holds, yanked ones left out, in the order its log
    first set them: the order of a leaderboard, its flips and the dataset's page."""
    yanked = reader.marks(dataset).yanks
    tags = [t for t in reader.tags(dataset) if t not in yanked]
    return first_set(tags, reader.log(dataset))


def tagged(
    reader: Reader, dataset: str, names: Iterable[str] | None = None, *, yanked: bool = False
) -> list[Resolved]:
    """The revisions of ``dataset`` at ``names`` (tags, or any spec: a name without ``@`` is a
    tag of ``dataset``), each resolved through the door; by default its tags in the order
    ``tag_order`` gives (``yanked`` ones too, in their place, where asked)."""
    if names is None:
        tags = reader.tags(dataset) if yanked else tag_order(reader, dataset)
        names = first_set(tags, reader.log(dataset))
    return [reader.revision(n if "@" in n else f"{dataset}@{n}") for n in names]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedOverlays:
    """The overlays a dataset's log says were made, oldest first: ``held``, as the reader holds
    them, and ``unheld``, the digests of those it cannot give (where it was read from lacks
    them: what is reported from them is missing there, and a report says so)."""

    held: tuple[OverlayRecord, ...]
    unheld: tuple[str, ...]


def dataset_overlays(reader: Reader, dataset: str) -> LoggedOverlays:
    """The overlays the log of ``dataset`` says were made for it (its ``overlay`` lines, which
    push and pull carry), oldest first, as the reader holds them (a remote's reader fetches
    their manifests); those it cannot give are named apart. One read of the log: no tag is
    read, however many the dataset has."""
    reg = reader.registry
    made = list(dict.fromkeys(e.new for e in reader.log(dataset) if e.event == "overlay" and e.new))
    _bring(reader, made)
    return LoggedOverlays(
        held=tuple(
            OverlayRecord(digest=d, overlay=reg.overlay(d)) for d in made if reg.store.has(d)
        ),
        unheld=tuple(d for d in made if not reg.store.has(d)),
    )


def _bring(reader: Reader, digests: list[str]) -> None:
    """Fetch, where the reader can, the objects among ``digests`` its registry lacks; what
    cannot be brought is left missing (its reader's record has a gap there, not an error)."""
    missing = [d for d in digests if not reader.registry.store.has(d)]
    if missing and reader.fetches:
        with contextlib.suppress(DsregError):
            reader.refetch(missing)


def pinned(reader: Reader, digest: str) -> Resolved:
    """The revision (or snapshot) ``digest`` as a handle of ``reader``, reached by no tag: a
    revision a pin file or a worker process names by its digest, known to be wanted whatever
    its tags say (no notice is given)."""
    rev, dataset = owned_revision(reader.registry, digest)
    return Resolved(
        reader=reader, digest=rev.digest, revision=rev, dataset=dataset, tag=None, spec=digest
    )


def local_reader(root: str | os.PathLike[str]) -> LocalReader:
    """The reader of the registry at ``root``: how a loader's worker process reopens its
    revision."""
    return LocalReader(Registry(Path(root)))
