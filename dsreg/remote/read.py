"""Reading a remote in place: its tags (``ls --remote``), one revision's manifests and tables
(``show`` and ``sql --remote``, never its payloads), or the whole revision (``open`` and
``checkout --remote``), on any machine, with or without a registry of one's own.

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
"""

from __future__ import annotations

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import (
    ConfigError,
    IntegrityError,
    NotFoundError,
    RevisionNotFoundError,
)
from dsreg.model.names import parse_spec
from dsreg.objects.digest import PREFIX, is_digest, short
from dsreg.remote.config import jobs_for, open_remote
from dsreg.remote.fetch import Closure, check_whole, fetch_closure, owner
from dsreg.remote.store import RemoteStore
from dsreg.repo.registry import Registry, Resolved

__all__ = ["fetch_revision", "read_revision", "reading_remote", "remote_tags"]


def reading_remote(reg: Registry, remote: str, *, cached: bool) -> RemoteStore:
    """The remote to read: a configured name or a URL; in the cache registry (no registry of
    one's own, so no remote names), a URL or folder path only."""
    if cached and "://" not in remote and "/" not in remote and not remote.startswith("."):
        raise ConfigError(
            f"no registry here, so remote {remote!r} names nothing: give the remote's URL or "
            "folder path (https://…, s3://…, /mnt/nas/dsreg), or run the command in a registry "
            "that has that remote"
        )
    return open_remote(reg, remote)


def remote_tags(rs: RemoteStore) -> list[tuple[str, str, str]]:
    """``(dataset, tag, revision)`` for every tag the remote holds, sorted; damaged tags are
    left out (a pull names them). ``RevisionNotFoundError`` if it holds none."""
    good, damaged = rs.scan_refs()
    if not good and not damaged:
        raise RevisionNotFoundError(
            f"remote {rs.label} holds no tags (is the URL right? a dsreg remote holds refs/, "
            "logs/ and files/blake3/; one served over http(s) also info/refs, which every "
            "push writes)"
        )
    return sorted((ds, tag, d) for (ds, tag), d in good.items())


def fetch_revision(
    reg: Registry,
    rs: RemoteStore,
    digest: str,
    *,
    payloads: bool,
    jobs: int,
    progress: ProgressHook = no_progress,
) -> Closure:
    """Fetch what ``digest`` reaches that this registry lacks, verified: its manifests and
    tables, and with ``payloads`` its payload blobs too."""
    with reg.lock():
        closure = fetch_closure(reg, rs, [digest], payloads=payloads, jobs=jobs, progress=progress)
        check_whole(reg, closure)
    return closure


def _remote_digest(rs: RemoteStore, spec: str) -> tuple[str | None, str | None, str]:
    """``(dataset, tag, digest)`` that ``spec`` names on the remote (module docstring)."""
    s = parse_spec(spec)
    if s.digest is not None:
        return None, None, s.digest
    assert s.dataset is not None and s.ref is not None
    hexpart = s.ref.removeprefix(PREFIX)
    if is_digest(PREFIX + hexpart):
        return s.dataset, None, PREFIX + hexpart
    if not s.ref.startswith(PREFIX):
        found = rs.get_ref(s.dataset, s.ref)
        if found is not None:
            return s.dataset, s.ref, found
    listing, _damaged = rs.scan_refs()
    tags = {t: d for (ds, t), d in listing.items() if ds == s.dataset}
    if s.could_be_prefix:
        matches = sorted({d for d in tags.values() if d.removeprefix(PREFIX).startswith(hexpart)})
        if len(matches) == 1:
            return s.dataset, None, matches[0]
        if len(matches) > 1:
            from dsreg.errors import AmbiguousDigestError

            raise AmbiguousDigestError(
                f"{spec!r} is ambiguous on remote {rs.label}: it matches revisions "
                + ", ".join(short(d) for d in matches)
                + "; type more characters of the digest",
                prefix=s.ref,
                candidates=matches,
            )
    raise RevisionNotFoundError(
        f"remote {rs.label} holds no tag {spec!r} (its tags of {s.dataset!r}: "
        f"{', '.join(sorted(tags)) or 'none'}); a revision no tag names is read by its full "
        "digest (blake3:<64 hex>)",
        dataset=s.dataset,
        ref=s.ref,
    )


def read_revision(
    reg: Registry,
    rs: RemoteStore,
    spec: str,
    *,
    payloads: bool,
    local_first: bool,
    jobs: int | None = None,
    progress: ProgressHook = no_progress,
) -> Resolved:
    """Resolve ``spec`` (here first if ``local_first``, else on the remote) and fetch what its
    revision reaches that this registry lacks, verified (payloads only if ``payloads``). No tag
    is written here. A remote tag naming no revision of its dataset is an ``IntegrityError``;
    a corrupt remote object a ``CorruptObjectError`` (nothing of it is stored or served)."""
    n_jobs = jobs_for(reg, rs, jobs)
    if local_first:
        try:
            resolved = reg.resolve(spec)
        except NotFoundError:
            pass
        else:
            fetch_revision(
                reg, rs, resolved.digest, payloads=payloads, jobs=n_jobs, progress=progress
            )
            return resolved
    dataset, tag, digest = _remote_digest(rs, spec)
    fetch_revision(reg, rs, digest, payloads=payloads, jobs=n_jobs, progress=progress)
    resolved = reg.resolve(digest)
    of, why = owner(reg, digest)
    if dataset is not None and of != dataset:
        what = f"a revision of dataset {of!r}" if of is not None else why
        named = f"tag {dataset}@{tag} on remote {rs.label} names" if tag else f"{spec!r} is"
        raise IntegrityError(
            f"{named} {short(digest)}, {what}, not a revision of {dataset!r}: not served; "
            "repair the tag on the remote (push the right revision with --force)",
            digest=digest,
        )
    return Resolved(
        digest=resolved.digest,
        revision=resolved.revision,
        dataset=resolved.dataset,
        tag=tag,
        spec=spec,
    )
