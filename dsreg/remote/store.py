"""One remote: where its files are and what its small files say. A remote is laid out as
dvc-objects sees a filesystem holding ``files/blake3/ab/cdef…`` (dvc-data's object layout with
``hash_name="blake3"``), plus ``refs/<dataset>/<tag>``, ``logs/<dataset>.jsonl`` and the tag
index ``info/refs``; the model refs of recorded results, ``results/<dataset>/<model>``, are
laid out and indexed (``info/results``) as tags are, and read and written through the same code
(``RemoteStore.results``).

Any URL a DVC remote accepts works. A plain folder path is reached through the ``os`` module
alone (``filesystem.FolderFS``: the answers of DVC's local file system without importing DVC and
fsspec, some 60 ms of every command's start-up), a web server (read only) through fsspec's HTTP
file system (``filesystem.WebFS``); any other URL's file system comes from
``dvc.fs.get_cloud_fs`` (S3 through dvc-s3, GCS, Azure, SSH, WebDAV, HDFS, or a folder or web
server with DVC options), with the ``dvc`` extra (``s3`` for S3).

This module reads a remote's tags and logs and writes its small files whole (the tag index
among them: ``write_index``); ``objects.py`` moves its objects, ``refs.py`` moves its tags.
Third-party errors become ``RemoteError`` here, once (``RemoteStore.error``).

Many objects downloaded (or small files read) at once from a remote whose file system is
asynchronous (fsspec's HTTP file system, and the object stores' under DVC's): one event-loop
call runs ``jobs`` transfers at a time (``download``, ``read_files``), instead of a thread per
transfer each waiting on the loop (measured over HTTP on loopback: about twice as fast). Each
transfer's failure is seen on its own, so a missing object is named and the others are kept.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from dsreg._util.fs import write_atomic
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, RemoteError
from dsreg.formats.names import TagName, check_name
from dsreg.objects.digest import ALGORITHM, format_digest, object_relpath
from dsreg.remote.filesystem import READ_ONLY, describe, open_filesystem
from dsreg.remote.waves import parallel

__all__ = [
    "INDEX",
    "INDEX_BYTES",
    "LOCAL_JOBS",
    "OBJECTS",
    "RESULTS",
    "STAGED_TAG",
    "STAGING_AGE",
    "TAG_BYTES",
    "RemoteStore",
    "TagName",
    "TagValues",
    "Target",
    "batched",
    "download",
    "listed_tags",
    "looks_like_url",
    "read_files",
    "ref_value",
    "write_index",
]

# Where a push lists the remote's tags for readers that cannot list folders (git's info/refs);
# ``info/results`` lists the model refs the same way.
INDEX = ("info", "refs")
#: The folder of a remote's model refs (a registry's ``results/``, ``registry.results``).
RESULTS = "results"
#: The folder of a remote's objects, each at ``files/blake3/ab/cdef…`` (dvc-data's layout).
OBJECTS = "files"
# The index names each tag on a line of at most 129 bytes: two million tags of 30 characters
# fit. A larger one is refused unread (by what a folder holds) or unparsed.
INDEX_BYTES = 64 << 20
# A tag file holds one digest line (72 bytes). One that holds more is damaged, and is kept as
# its first bytes only: its file is read no further.
TAG_BYTES = 4096
# Requests in flight at once in one event loop (http, s3) for small files: tags.
_BATCH = 1024
# Downloads in flight at once from an http(s) remote by default.
_WEB_JOBS = 64
# A folder remote is bound by the local kernel's file creation, which more threads than about
# two per CPU only contend for (on 2 CPUs, 2-4 threads beat 8 and 16); hashing and staging
# what is downloaded use the CPUs the same way.
LOCAL_JOBS = max(2, min(16, (os.cpu_count() or 1) * 2))
# What a killed push staged in a folder remote's ``tmp/`` is removed by a later push once this
# many seconds old: a running push touches its staging far more often.
STAGING_AGE = 86400.0
# A tag's new value is staged in a folder remote's ``tmp/`` under this prefix, then linked into
# ``refs/``: a push killed in between leaves nothing below ``refs/``.
STAGED_TAG = "tag-"
# Tag names an error lists before it says how many more there are.
_NAMED = 20
# Reads of fewer tag files than this are over in a blink and report no progress: a push or pull
# with nothing to do opens no progress bar.
_TAGS_SHOWN = 256


class Target(NamedTuple):
    """A revision a push or pull moves, and the tag that names it where it goes: ``dataset``
    and ``tag`` are ``None`` for a digest moved without a tag (``tag`` alone for
    ``dataset@<full digest>``)."""

    dataset: str | None
    tag: str | None
    digest: str

    @property
    def tag_name(self) -> TagName | None:
        """``dataset@tag`` if this target sets a tag, else ``None``."""
        if self.dataset is None or self.tag is None:
            return None
        return TagName(self.dataset, self.tag)


class TagValues(NamedTuple):
    """What tag files hold: ``good``, those holding a digest; ``damaged``, those holding anything
    else, with their bytes. A tag whose file is gone is in neither."""

    good: dict[TagName, str]
    damaged: dict[TagName, bytes]


def ref_value(data: bytes) -> str | bytes:
    """A tag file's value: the digest it holds, or, if it holds no digest (damaged), its bytes
    (the first ``TAG_BYTES`` and one: a longer file is damaged however it goes on)."""
    if len(data) <= TAG_BYTES:
        try:
            return format_digest(data.decode("ascii").strip())
        except (UnicodeDecodeError, DsregError):
            pass
    return data[: TAG_BYTES + 1]


def listed_tags(names: Sequence[TagName]) -> str:
    """Tag names for an error message: the first ``_NAMED``, then how many more."""
    text = ", ".join(name.tag for name in names[:_NAMED]) or "none"
    return text + (f", and {len(names) - _NAMED:,} more" if len(names) > _NAMED else "")


def looks_like_url(remote: str) -> bool:
    """Whether ``-r`` names a URL or a folder path rather than a configured remote."""
    return "://" in remote or "/" in remote or remote.startswith(".")


class RemoteStore:
    """The objects, refs and logs at one remote URL. ``refs_dir`` is the folder of the refs
    it reads and writes: ``refs`` (tags), or ``results`` for the store ``results()`` gives."""

    __slots__ = ("fs", "local", "name", "read_only", "refs_dir", "root", "url")

    def __init__(self, *, name: str, url: str, options: dict[str, Any]) -> None:
        self.name = name
        self.url = url
        self.fs, self.root = open_filesystem(url, options)
        protocol = getattr(self.fs, "protocol", None)
        self.local = protocol == "local"
        # A web server is read as a static one: no listing, no writes (docs/remotes.md).
        self.read_only = protocol in READ_ONLY
        self.refs_dir = INDEX[1]

    def results(self) -> RemoteStore:
        """The same remote, its model refs (``results/<dataset>/<model>``) in place of its
        tags: every method on refs (listing, reading, the index ``info/results``) and
        ``refs.update_ref`` then move model refs, under the same dataset lock and log."""
        return self.with_refs(RESULTS)

    def with_refs(self, folder: str) -> RemoteStore:
        """The same remote with the refs of ``folder`` in place of its tags (model refs,
        yanks, retirements), listed, read, indexed (``info/<folder>``) and moved as tags are."""
        other = copy.copy(self)
        other.refs_dir = folder
        return other

    def __repr__(self) -> str:
        return f"RemoteStore({self.name!r}, {self.url!r})"

    @property
    def label(self) -> str:
        return self.url if self.name == self.url else f"{self.name!r} ({self.url})"

    def path(self, *parts: str) -> str:
        """A path below the remote's root."""
        return str(self.fs.join(self.root, *parts))

    def tmp_path(self) -> str:
        """A folder remote's staging folder, ``tmp/`` (as a registry's)."""
        return self.path("tmp")

    def objects_path(self) -> str:
        return self.path(OBJECTS, ALGORITHM)

    def object_path(self, digest: str) -> str:
        return self.path(OBJECTS, *object_relpath(digest).split("/"))

    def error(self, action: str, e: BaseException) -> RemoteError:
        return RemoteError(
            f"cannot {action} remote {self.label}: {describe(e)}; check the URL, that it exists "
            "and that you may read and write there, and your credentials (environment or the "
            "cloud SDK's configuration)"
        )

    def default_jobs(self) -> int:
        if self.read_only:
            # Downloads from a web server wait on its latency, not on this machine: many in
            # flight, in one event loop (``download``, below).
            return _WEB_JOBS
        return LOCAL_JOBS if self.local else int(getattr(self.fs, "jobs", LOCAL_JOBS))

    # -- refs and logs (read here; refs.py writes them) --------------------------------------
    def ref_path(self, dataset: str, tag: str) -> str:
        return self.path(self.refs_dir, dataset, tag)

    def log_path(self, dataset: str) -> str:
        return self.path("logs", f"{dataset}.jsonl")

    def index_path(self) -> str:
        return self.path(INDEX[0], self.refs_dir)

    def tag_names(self, dataset: str | None = None) -> list[TagName]:
        """The remote's tags (every one, or ``dataset``'s), sorted, without reading a tag file:
        one listing of ``refs/`` (``refs/<dataset>/`` for one dataset) or, on a remote that
        cannot list (a static web server), the index ``info/refs``."""
        if dataset is not None:
            check_name(dataset, what="dataset name")
        # The index is written sorted: sorting it again is one pass.
        return sorted(self._indexed(dataset) if self.read_only else self._listed(dataset))

    def read_tags(
        self,
        names: Sequence[TagName],
        *,
        jobs: int | None = None,
        progress: ProgressHook = no_progress,
    ) -> TagValues:
        """The values of the tags ``names``. The files are read ``jobs`` at a time (default:
        the remote's), in one event loop where the file system is asynchronous (http, s3), and
        ``progress("reading tags", done, total)`` hears of them (of ``_TAGS_SHOWN`` or more)."""
        paths = [self.ref_path(name.dataset, name.tag) for name in names]
        if len(paths) < _TAGS_SHOWN:
            progress = no_progress
        try:
            contents = self._read_many(paths, jobs or self.default_jobs(), progress)
        except DsregError:
            raise
        except Exception as e:
            raise self.error("read the tags of", e) from None
        found = TagValues(good={}, damaged={})
        for name, data in zip(names, contents, strict=True):
            if data is not None:
                value = ref_value(data)
                if isinstance(value, str):
                    found.good[name] = value
                else:
                    found.damaged[name] = value
        return found

    def _read_many(self, paths: list[str], jobs: int, progress: ProgressHook) -> list[bytes | None]:
        """Each file's bytes, ``None`` for one that is absent."""
        task = "reading tags"
        if not batched(self.fs):
            return parallel(self._read_tag, paths, jobs=jobs, task=task, progress=progress)
        out: list[bytes | None] = []
        for lo in range(0, len(paths), _BATCH):
            out += read_files(self.fs, paths[lo : lo + _BATCH], jobs)
            progress(task, len(out), len(paths))
        return out

    def _read_tag(self, path: str) -> bytes | None:
        return self._read_if_there(path, TAG_BYTES)

    def _read_if_there(self, path: str, limit: int | None = None) -> bytes | None:
        """A file's bytes, ``None`` if it is absent. With ``limit``, at most ``limit`` and one
        of them: a folder's file is read no further (a caller tells a longer file by the
        length); elsewhere the bytes are cut once read."""
        try:
            if limit is None:
                return bytes(self.fs.cat_file(path))
            if self.local:
                return bytes(self.fs.cat_file(path, start=0, end=limit + 1))
            return bytes(self.fs.cat_file(path))[: limit + 1]
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def scan_refs(
        self, dataset: str | None = None, *, progress: ProgressHook = no_progress
    ) -> TagValues:
        """Every tag on the remote (or ``dataset``'s): ``tag_names``, then ``read_tags``. A
        damaged tag is reported apart, never fatal to the others."""
        return self.read_tags(self.tag_names(dataset), progress=progress)

    def refs(self) -> dict[TagName, str]:
        """Every ``(dataset, tag) -> digest`` on the remote; a damaged tag is a ``RemoteError``
        (``scan_refs`` reports it apart instead)."""
        found = self.scan_refs()
        if found.damaged:
            name, data = min(found.damaged.items())
            raise self.damaged_ref(name.dataset, name.tag, data)
        return found.good

    def _listed(self, dataset: str | None) -> set[TagName]:
        """The tag files below ``refs/`` (or ``refs/<dataset>/``), by listing it."""
        base = self.path(self.refs_dir)
        try:
            paths = list(
                self.fs.find(base if dataset is None else self.path(self.refs_dir, dataset))
            )
        except FileNotFoundError:
            return set()
        except Exception as e:
            raise self.error("list the tags of", e) from None
        named: set[TagName] = set()
        for p in paths:
            try:
                parts = self.fs.relparts(p, base)
                if len(parts) == 2 and not any(x.startswith(".") for x in parts):
                    named.add(TagName(check_name(parts[0]), check_name(parts[1])))
            except Exception:
                continue  # not a tag: a staging name, a lock, a stray file
        return named

    def _indexed(self, dataset: str | None) -> list[TagName]:
        """The tags ``info/refs`` names (``dataset/tag`` per line; what push writes for readers
        that cannot list folders, such as a static web server), all or ``dataset``'s. The tag
        files themselves stay the values' only source."""
        data = self.read(
            self.index_path(), f"read the index {INDEX[0]}/{self.refs_dir} of", limit=INDEX_BYTES
        )
        if data is not None and len(data) > INDEX_BYTES:
            raise RemoteError(
                f"the tag index {self.index_path()} of remote {self.label} is larger than "
                f"{INDEX_BYTES >> 20} MiB, more than a push writes: not read; check the URL, or "
                "push to the folder or bucket this remote serves to rewrite it"
            )
        named: dict[TagName, None] = {}  # in the index's order, each once
        for line in (data or b"").decode("utf-8", "replace").splitlines():
            ds, sep, tag = line.strip().partition("/")
            if not sep or (dataset is not None and ds != dataset):
                continue
            try:
                named[TagName(check_name(ds), check_name(tag))] = None
            except DsregError:
                continue  # not a tag name: skipped, as a stray file below refs/ is
        return list(named)

    def damaged_ref(self, dataset: str, tag: str, data: bytes) -> RemoteError:
        text = data.decode("ascii", "replace").strip()
        return RemoteError(
            f"tag {dataset}@{tag} on remote {self.label} is damaged (holds {text[:80]!r}); "
            "push it again with --force from a registry that holds it"
        )

    def ref_state(self, dataset: str, tag: str) -> str | bytes | None:
        """What a tag holds now: its digest, the bytes of a damaged tag, or ``None``."""
        path = self.ref_path(dataset, tag)
        data = self.read(path, f"read tag {dataset}@{tag} from", limit=TAG_BYTES)
        return None if data is None else ref_value(data)

    def get_ref(self, dataset: str, tag: str) -> str | None:
        state = self.ref_state(dataset, tag)
        if isinstance(state, bytes):
            raise self.damaged_ref(dataset, tag, state)
        return state

    def log_bytes(self, dataset: str) -> bytes:
        return self.read(self.log_path(dataset), f"read the log of {dataset} from") or b""

    def read(self, path: str, action: str, *, limit: int | None = None) -> bytes | None:
        """A file's bytes (with ``limit``, at most ``limit`` and one: ``_read_if_there``), or
        ``None`` if it is absent; any other failure a ``RemoteError``."""
        try:
            return self._read_if_there(path, limit)
        except Exception as e:
            raise self.error(action, e) from None

    def write(self, path: str, data: bytes) -> None:
        """Replace a file whole: readers see the old bytes or the new, never a part."""
        try:
            if self.local:
                write_atomic(path, data)
            else:
                # One PUT: an object store never shows a partial object.
                self.fs.pipe_file(path, data)
        except Exception as e:
            raise self.error(f"write {path} to", e) from None


# Rewrites of the tag index a push makes when other pushes add tags meanwhile.
_INDEX_TRIES = 3


def write_index(rs: RemoteStore, names: Iterable[TagName]) -> bool:
    """Bring the remote's tag index ``info/refs`` (``dataset/tag`` per line, sorted) up to date
    for readers that cannot list folders (a registry served by a static web server); whether it
    was written. ``names`` are the tags the caller knows of (its scan plus what it wrote): the
    index is written only if it differs, so a push with nothing new changes nothing.

    The index names tags, never their values (readers read each tag file). After a write the
    tags are listed again and the index rewritten if another push added one meanwhile: the
    last push to write it sees every tag written before it wrote."""
    path = rs.index_path()
    wanted = set(names)
    wrote = False
    for _ in range(_INDEX_TRIES):
        body = "".join(f"{ds}/{tag}\n" for ds, tag in sorted(wanted)).encode("utf-8")
        if rs.read(path, f"read the index {rs.refs_dir} of", limit=len(body)) == body:
            return wrote
        rs.write(path, body)
        wrote = True
        now = set(rs.tag_names())  # names only: no tag file is read
        if now <= wanted:
            return wrote
        wanted |= now
    return wrote


# -- many objects at once: an asynchronous file system's batched transfers ------------------
def batched(fs: Any) -> bool:
    """Whether ``fs`` (a remote's file system: ``WebFS`` or DVC's) has an asynchronous fsspec
    file system beneath."""
    inner = getattr(fs, "fs", None)
    return bool(getattr(inner, "async_impl", False)) and hasattr(inner, "_get_file")


def download(fs: Any, paths: Sequence[str], scratch: Path, jobs: int) -> list[str | None]:
    """Download each remote path into a new file in ``scratch``: its local path, or ``None`` if
    the remote lacks it. Any other failure is raised, and nothing is left in ``scratch``."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    inner = fs.fs
    local = [os.fspath(scratch / f"get-{secrets.token_hex(8)}") for _ in paths]
    coros = [inner._get_file(r, p) for r, p in zip(paths, local, strict=True)]
    # Every transfer is awaited, whatever the others do; each result is None or its exception.
    results = sync(
        inner.loop,
        _run_coros_in_chunks,
        coros,
        batch_size=max(1, jobs),
        return_exceptions=True,
        nofiles=True,
    )
    errors = [r if isinstance(r, BaseException) else None for r in results]
    failed = next((e for e in errors if e and not isinstance(e, FileNotFoundError)), None)
    for p, e in zip(local, errors, strict=True):
        if e is not None or failed is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
    if failed is not None:
        raise failed
    return [p if e is None else None for p, e in zip(local, errors, strict=True)]


def read_files(fs: Any, paths: Sequence[str], jobs: int) -> list[bytes | None]:
    """Each remote file's bytes (small files: tags), ``None`` for one the remote lacks; ``jobs``
    requests in flight. Any other failure is raised."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    inner = fs.fs
    results = sync(
        inner.loop,
        _run_coros_in_chunks,
        [inner._cat_file(p) for p in paths],
        batch_size=max(1, jobs),
        return_exceptions=True,
        nofiles=True,
    )
    failed = next(
        (r for r in results if isinstance(r, BaseException) and not _absent(r)),
        None,
    )
    if failed is not None:
        raise failed
    return [None if isinstance(r, BaseException) else bytes(r) for r in results]


def _absent(e: BaseException) -> bool:
    return isinstance(e, FileNotFoundError | IsADirectoryError | NotADirectoryError)
