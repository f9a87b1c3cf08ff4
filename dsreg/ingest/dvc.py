"""``dsreg import-dvc``: a folder (or label file) tracked by DVC in a git repository, at a
revision, becomes a snapshot whose source records where it came from.

The data is read through DVC itself (``dvc.api.DVCFileSystem(repo, rev=)``: a local path or any
git URL, data from the project's cache or its default remote), downloaded into the registry's
``tmp/`` and added as an ImageFolder tree (a folder) or a label file. The snapshot's source is
``{"kind": "dvc", "layout": "imagefolder" | "labels", "repo", "rev", "commit", "path", "md5"}``:
everything needed to find the bytes again, and nothing about time or user, so importing the
same repository, path and revision twice gives the same snapshot digest.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from dsreg._util.extras import require
from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, InputPathError, InvalidInputError, RemoteError, StorageError
from dsreg.formats.names import check_lookalike_ids
from dsreg.ingest.result import AddResult, AddTarget, check_names
from dsreg.ingest.snapshot import add_locked
from dsreg.ingest.sources import Source, class_names, scan_imagefolder, scan_labels
from dsreg.objects.batch import STAGE_PREFIX
from dsreg.registry.folder import Registry

# DVC and fsspec: imported when an import opens the repository (each costs a second).
with lazy_imports():
    from dvc import api as dvc_api
    from fsspec import callbacks as fsspec_callbacks

__all__ = ["DvcImport", "ImportResult", "import_dvc"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DvcImport:
    """One import, as ``dsreg.import_dvc`` takes it: ``path`` of git repository ``repo`` at
    ``rev``, stored as a snapshot of ``dataset`` (tagged ``tag``, moved with ``force``),
    downloaded with ``jobs`` transfers. ``classes``: the class names of a label file, as
    ``dsreg add --classes`` takes them (a list, or a file with one per line: line i is class
    i); a folder names its classes itself. A folder's paths of one spelling
    (``names.id_spelling``) are refused, as ``dsreg add`` refuses them, unless
    ``allow_lookalike_ids``."""

    repo: str
    path: str
    dataset: str
    rev: str = "HEAD"
    tag: str | None = None
    force: bool = False
    jobs: int | None = None
    classes: str | os.PathLike[str] | Sequence[str] | None = None
    allow_lookalike_ids: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    add: AddResult
    repo: str
    rev: str
    commit: str
    path: str
    md5: str | None

    def to_dict(self) -> dict[str, Any]:
        source = {"repo": self.repo, "rev": self.rev, "commit": self.commit, "path": self.path}
        return {**self.add.to_dict(), "source": {**source, "md5": self.md5}}


def _repo_id(repo: str) -> str:
    """A local repository by absolute path (DVC opens it in place); a URL as given."""
    if "://" in repo or repo.startswith("git@"):
        return repo
    p = Path(repo).expanduser()
    if not p.exists():
        raise InputPathError(f"repository {repo!r} does not exist; give a git URL or a local path")
    return str(p.resolve())


def _clean_path(path: str) -> str:
    p = PurePosixPath(path.strip().replace("\\", "/"))
    parts = [x for x in p.parts if x not in (".", "/")]
    if not parts or ".." in parts:
        raise InputPathError(
            f"path {path!r} is not a path inside the repository; give e.g. data/val"
        )
    return "/".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Tracked:
    """What DVC tracks at the path asked for: where it is (repository, requested rev and the
    commit it resolved to, path inside) and what (a folder or a file, DVC's md5)."""

    repo: str
    rev: str
    commit: str
    path: str
    md5: str | None
    is_dir: bool

    def provenance(self) -> dict[str, object]:
        """The snapshot's source: everything needed to find the bytes again, nothing about
        time or user."""
        layout = "imagefolder" if self.is_dir else "labels"
        where = {"repo": self.repo, "rev": self.rev, "commit": self.commit, "path": self.path}
        return {"kind": "dvc", "layout": layout, **where, **({"md5": self.md5} if self.md5 else {})}


def import_dvc(
    reg: Registry,
    options: DvcImport,
    *,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> ImportResult:
    """Import ``options.path`` of ``options.repo`` at ``options.rev`` as a snapshot of
    ``options.dataset`` (tagged ``options.tag``). Needs the dvc extra."""
    require("dvc", "dsreg import-dvc", python="dsreg.import_dvc")
    check_names(options.dataset, options.tag)
    # Read before anything is downloaded: a bad classes file fails at once.
    names = class_names(options.classes)
    repo_id = _repo_id(options.repo)
    rel = _clean_path(options.path)
    fs = _open(repo_id, options.rev)
    try:
        commit = _commit(fs, repo_id, options.rev)
        info = _info(fs, rel, repo_id, options.rev)
        tracked = _Tracked(
            repo=repo_id,
            rev=options.rev,
            commit=commit,
            path=rel,
            md5=str(info["md5"]) if info.get("md5") else None,
            is_dir=info.get("type") == "directory",
        )
        if tracked.is_dir and names is not None:
            raise InvalidInputError(
                f"{rel} of {repo_id} is a folder: its class folders name the classes; "
                "--classes goes with a label file"
            )
        res = _download_and_add(reg, fs, options, tracked, names, progress, command)
    finally:
        with contextlib.suppress(Exception):
            fs.close()
    return ImportResult(
        add=res, repo=repo_id, rev=options.rev, commit=commit, path=rel, md5=tracked.md5
    )


def _download_and_add(
    reg: Registry,
    fs: Any,
    options: DvcImport,
    tracked: _Tracked,
    names: Sequence[str] | None,
    progress: ProgressHook,
    command: str,
) -> AddResult:
    """Download ``tracked`` and add it. The download waits in a staging folder under the
    registry's lock (shared, as every writer holds it): gc cannot run meanwhile, and removes
    one a killed import left behind, as it does an add's staging."""
    with reg.lock():
        try:
            reg.store.tmp.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(dir=reg.store.tmp, prefix=f"{STAGE_PREFIX}import-dvc-"))
        except OSError as e:
            raise StorageError(f"cannot write to {reg.store.tmp}: {e.strerror}") from e
        try:
            local = scratch / (PurePosixPath(tracked.path).name or "data")
            _download(fs, tracked, local, jobs=options.jobs, progress=progress)
            source = _scan(local, tracked, names, allow_lookalike_ids=options.allow_lookalike_ids)
            target = AddTarget(
                dataset=options.dataset,
                tag=options.tag,
                force=options.force,
                command=command,
                extra_provenance=tracked.provenance(),
            )
            return add_locked(reg, target, source, progress=progress)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _scan(
    local: Path, tracked: _Tracked, names: Sequence[str] | None, *, allow_lookalike_ids: bool
) -> Source:
    """The downloaded folder as an ImageFolder tree (its paths of one spelling refused unless
    allowed), or the downloaded file as a label file."""
    if not tracked.is_dir:
        return scan_labels(local, classes=names)
    source = scan_imagefolder(local)
    if not allow_lookalike_ids:
        check_lookalike_ids(source.ids, what=f"{tracked.path} of {tracked.repo}")
    return source


def _open(repo: str, rev: str) -> Any:
    try:
        return dvc_api.DVCFileSystem(repo, rev=rev)
    except Exception as e:  # dvc's NotDvcRepoError, CloneError, RevError, SCM errors
        raise _open_error(repo, rev, e) from None


def _commit(fs: Any, repo: str, rev: str) -> str:
    # DVCFileSystem opens the repository lazily: this is where a bad repo or rev shows.
    try:
        return str(fs.repo.get_rev())
    except Exception as e:
        raise _open_error(repo, rev, e) from None


def _open_error(repo: str, rev: str, e: BaseException) -> RemoteError:
    return RemoteError(
        f"cannot open DVC repository {repo!r} at revision {rev!r}: {_describe(e)}; check the "
        "URL or path, that it is a git repository with DVC, and that the revision exists"
    )


def _info(fs: Any, rel: str, repo: str, rev: str) -> dict[str, Any]:
    try:
        info = dict(fs.info(rel))
    except FileNotFoundError:
        raise InputPathError(
            f"{rel!r} does not exist in {repo!r} at {rev!r}; give the path of a DVC-tracked "
            "folder or file (as in its .dvc file)"
        ) from None
    except Exception as e:
        raise RemoteError(f"cannot read {rel!r} in {repo!r} at {rev!r}: {_describe(e)}") from None
    if "dvc_info" not in info:
        raise InputPathError(
            f"{rel!r} in {repo!r} at {rev!r} is not tracked by DVC (git holds it); import "
            "DVC-tracked data, or add a checkout of it with 'dsreg add'"
        )
    return info


def _download(
    fs: Any, tracked: _Tracked, local: Path, *, jobs: int | None, progress: ProgressHook
) -> None:
    class _Bar(fsspec_callbacks.Callback):  # type: ignore[misc]
        def call(self, *args: Any, **kwargs: Any) -> None:
            if self.size:
                progress("downloading", int(self.value), int(self.size))

    rel = tracked.path
    try:
        if tracked.is_dir:
            fs.get(rel, os.fspath(local), recursive=True, callback=_Bar(), batch_size=jobs)
        else:
            fs.get_file(rel, os.fspath(local))
    except DsregError:
        raise
    except Exception as e:  # the project's remote unreachable, a missing cache object, …
        raise RemoteError(
            f"cannot download {rel!r} from {tracked.repo!r}: {_describe(e)}; DVC reads it from "
            "the project's cache or its default remote: check that one of them holds it"
        ) from None


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror + (f" ({e.filename})" if e.filename else "")
    return str(e).strip() or type(e).__name__
