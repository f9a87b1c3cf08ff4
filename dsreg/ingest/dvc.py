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

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, InputPathError, InvalidInputError, RemoteError, StorageError
from dsreg.formats.names import check_lookalike_ids, check_name
from dsreg.ingest.result import AddResult, AddTarget
from dsreg.ingest.snapshot import add_locked
from dsreg.ingest.sources import read_classes, scan_imagefolder, scan_labels
from dsreg.objects.batch import STAGE_PREFIX
from dsreg.registry.folder import Registry

__all__ = ["ImportResult", "import_dvc"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    add: AddResult
    repo: str
    rev: str
    commit: str
    path: str
    md5: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.add.to_dict(),
            "source": {
                "repo": self.repo,
                "rev": self.rev,
                "commit": self.commit,
                "path": self.path,
                "md5": self.md5,
            },
        }


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


def import_dvc(
    reg: Registry,
    repo: str,
    path: str,
    *,
    dataset: str,
    rev: str = "HEAD",
    tag: str | None = None,
    force: bool = False,
    jobs: int | None = None,
    classes: str | os.PathLike[str] | Sequence[str] | None = None,
    progress: ProgressHook = no_progress,
    command: str = "",
    allow_lookalike_ids: bool = False,
) -> ImportResult:
    """Import ``path`` of ``repo`` at ``rev`` as a snapshot of ``dataset`` (tagged ``tag``).

    ``classes``: the class names of a label file, as ``dsreg add --classes`` takes them (a list,
    or a file with one per line: line i is class i); a folder names its classes itself. A
    folder's paths of one spelling (``names.id_spelling``) are refused, as ``dsreg add``
    refuses them, unless ``allow_lookalike_ids``."""
    check_name(dataset, what="dataset name")
    if tag is not None:
        check_name(tag, what="tag name")
    # Read before anything is downloaded: a bad classes file fails at once.
    names: Sequence[str] | None
    if classes is None or not isinstance(classes, str | os.PathLike):
        names = classes
    else:
        names = read_classes(Path(classes))
    repo_id = _repo_id(repo)
    rel = _clean_path(path)
    fs = _open(repo_id, rev)
    try:
        commit = _commit(fs, repo_id, rev)
        info = _info(fs, rel, repo_id, rev)
        md5 = info.get("md5")
        is_dir = info.get("type") == "directory"
        if is_dir and names is not None:
            raise InvalidInputError(
                f"{rel} of {repo_id} is a folder: its class folders name the classes; "
                "--classes goes with a label file"
            )
        # The download waits in a staging folder under the registry's lock (shared, as every
        # writer holds it): gc cannot run meanwhile, and removes one a killed import left
        # behind, as it does an add's staging.
        with reg.lock():
            try:
                reg.store.tmp.mkdir(parents=True, exist_ok=True)
                scratch = Path(
                    tempfile.mkdtemp(dir=reg.store.tmp, prefix=f"{STAGE_PREFIX}import-dvc-")
                )
            except OSError as e:
                raise StorageError(f"cannot write to {reg.store.tmp}: {e.strerror}") from e
            try:
                local = scratch / (PurePosixPath(rel).name or "data")
                _download(fs, rel, local, is_dir=is_dir, jobs=jobs, progress=progress, what=repo_id)
                if is_dir:
                    source = scan_imagefolder(local)
                    if not allow_lookalike_ids:
                        check_lookalike_ids(source.ids, what=f"{rel} of {repo_id}")
                    layout = "imagefolder"
                else:
                    source = scan_labels(local, classes=names)
                    layout = "labels"
                provenance: dict[str, object] = {
                    "kind": "dvc",
                    "layout": layout,
                    "repo": repo_id,
                    "rev": rev,
                    "commit": commit,
                    "path": rel,
                }
                if md5:
                    provenance["md5"] = str(md5)
                target = AddTarget(
                    dataset=dataset,
                    tag=tag,
                    force=force,
                    command=command,
                    extra_provenance=provenance,
                )
                res = add_locked(reg, target, source, progress=progress)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        with contextlib.suppress(Exception):
            fs.close()
    return ImportResult(
        add=res, repo=repo_id, rev=rev, commit=commit, path=rel, md5=str(md5) if md5 else None
    )


def _open(repo: str, rev: str) -> Any:
    from dvc.api import DVCFileSystem

    try:
        return DVCFileSystem(repo, rev=rev)
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
    fs: Any,
    rel: str,
    local: Path,
    *,
    is_dir: bool,
    jobs: int | None,
    progress: ProgressHook,
    what: str,
) -> None:
    from fsspec.callbacks import Callback

    class _Bar(Callback):  # type: ignore[misc]
        def call(self, *args: Any, **kwargs: Any) -> None:
            if self.size:
                progress("downloading", int(self.value), int(self.size))

    try:
        if is_dir:
            fs.get(rel, os.fspath(local), recursive=True, callback=_Bar(), batch_size=jobs)
        else:
            fs.get_file(rel, os.fspath(local))
    except DsregError:
        raise
    except Exception as e:  # the project's remote unreachable, a missing cache object, …
        raise RemoteError(
            f"cannot download {rel!r} from {what!r}: {_describe(e)}; DVC reads it from the "
            "project's cache or its default remote: check that one of them holds it"
        ) from None


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror + (f" ({e.filename})" if e.filename else "")
    return str(e).strip() or type(e).__name__
