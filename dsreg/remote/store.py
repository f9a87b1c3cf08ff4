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

This module reads a remote's tags and logs and writes its small files whole; ``objects.py``
moves its objects, ``refs.py`` moves its tags. Third-party errors become ``RemoteError`` here,
once (``RemoteStore.error``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from dsreg._util.fs import write_atomic
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import DsregError, RemoteError
from dsreg.formats.names import check_name
from dsreg.objects.digest import ALGORITHM, format_digest, object_relpath
from dsreg.remote.download import batched, read_files
from dsreg.remote.filesystem import READ_ONLY, describe, open_filesystem
from dsreg.remote.waves import parallel

__all__ = [
    "INDEX",
    "INDEX_BYTES",
    "LOCAL_JOBS",
    "RESULTS",
    "STAGED_TAG",
    "STAGING_AGE",
    "TAG_BYTES",
    "RemoteStore",
    "TagName",
    "TagValues",
    "Target",
    "listed_tags",
    "looks_like_url",
    "ref_value",
]

# Where a push lists the remote's tags for readers that cannot list folders (git's info/refs);
# ``info/results`` lists the model refs the same way.
INDEX = ("info", "refs")
#: The folder of a remote's model refs (a registry's ``results/``, ``registry.results``).
RESULTS = "results"
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


class TagName(NamedTuple):
    """A tag's name: ``dataset@tag``. A key of the dictionaries of a remote's tags."""

    dataset: str
    tag: str


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
        return self.path("files", ALGORITHM)

    def object_path(self, digest: str) -> str:
        return self.path("files", *object_relpath(digest).split("/"))

    def error(self, action: str, e: BaseException) -> RemoteError:
        return RemoteError(
            f"cannot {action} remote {self.label}: {describe(e)}; check the URL, that it exists "
            "and that you may read and write there, and your credentials (environment or the "
            "cloud SDK's configuration)"
        )

    def default_jobs(self) -> int:
        if self.read_only:
            # Downloads from a web server wait on its latency, not on this machine: many in
            # flight, in one event loop (download.py).
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
