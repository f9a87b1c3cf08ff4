"""The file system of a remote URL. A plain folder is ``FolderFS``, the answers of DVC's local
file system through the ``os`` module alone (no DVC or fsspec import: some 60 ms of every
command's start-up); an ``http(s)://`` URL is ``WebFS``, fsspec's HTTP file system (aiohttp);
both come with the base install. Any other URL a DVC remote accepts (``s3://``, ``gs://``,
``ssh://``, …, or a folder or web server with DVC options) is opened by ``dvc.fs.get_cloud_fs``,
which needs the ``dvc`` extra (``s3`` for S3). Third-party errors are described here for the
``RemoteError`` that ``store.py`` raises."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from functools import cached_property
from typing import Any, NamedTuple

from dsreg._util.extras import require
from dsreg.errors import RemoteError

__all__ = [
    "READ_ONLY",
    "FolderFS",
    "Opened",
    "WebFS",
    "describe",
    "is_plain_folder",
    "open_filesystem",
]

# Protocols of remotes that dsreg reads only: a registry published on a static web server.
READ_ONLY = frozenset({"http", "https"})


class Opened(NamedTuple):
    """A remote's file system (``FolderFS``, ``WebFS`` or dvc-objects') and its root path
    there."""

    fs: Any
    root: str


# The http(s) file systems opened in this process, by URL and options.
_WEB: dict[str, Opened] = {}


def is_plain_folder(url: str, options: dict[str, Any]) -> bool:
    """A folder path with no DVC options: dvc-objects would give a ``LocalFileSystem`` rooted
    at ``url`` as it is, and dsreg reaches such a remote through the ``os`` module alone."""
    return not options and bool(url) and "://" not in url


def open_filesystem(url: str, options: dict[str, Any]) -> Opened:
    """The filesystem and root path of ``url``; nothing is contacted yet. A plain folder needs
    neither DVC nor fsspec (importing them costs a command about a tenth of a second), a web
    server without options fsspec alone; any other URL, or one with DVC options, is checked and
    opened by ``dvc.fs.get_cloud_fs``."""
    if is_plain_folder(url, options):
        return Opened(FolderFS(), url)
    key = f"{url}\0{sorted(options.items())!r}"
    if key in _WEB:
        return _WEB[key]
    scheme = url.partition("://")[0].lower()
    if scheme in READ_ONLY and not options:
        # One per process: its HTTP session (and kept-alive connections) serves every read,
        # and is closed at exit, not left to a collector mid-run.
        _WEB[key] = Opened(WebFS(scheme), url)
        return _WEB[key]
    require("s3" if scheme == "s3" else "dvc", f"remote {url!r}")
    from dvc.fs import get_cloud_fs

    try:
        cls, conf, path = get_cloud_fs(None, url=url, **options)
        opened = Opened(cls(**conf), str(path))
        if cls.protocol in READ_ONLY:
            _WEB[key] = opened  # as a WebFS: one per process
        return opened
    except ImportError as e:
        raise RemoteError(
            f"remote URL {url!r} needs a DVC plugin that is not installed ({e}); "
            "install it, e.g. pip install dvc-gs (or dvc-azure, dvc-ssh, …; S3: 'dsreg[s3]')"
        ) from None
    except Exception as e:  # dvc's ConfigError, voluptuous errors, URL parsing
        raise RemoteError(
            f"cannot use remote URL {url!r} with options {sorted(options)}: {describe(e)}; "
            "give a folder path or a URL DVC accepts (s3://, gs://, azure://, ssh://, "
            "https://, webdav://, hdfs://) and options DVC knows for it"
        ) from None


class WebFS:
    """What ``RemoteStore`` asks of a static web server (read only: no listing, no writes),
    from fsspec's HTTP file system, whose asynchronous reads ``store.py`` batches. A request
    that fails on the way (a dropped connection, a 5xx answer) is tried again, five times in
    all with a growing pause, as DVC's HTTP remote does (aiohttp-retry); a 404 is an absent
    file at once."""

    sep = "/"

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol

    @cached_property
    def fs(self) -> Any:
        from fsspec.implementations.http import HTTPFileSystem

        return HTTPFileSystem(get_client=_retrying_client)

    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*parts)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        return bytes(self.fs.cat_file(path, start=start, end=end))

    def get_file(self, rpath: str, lpath: str) -> None:
        self.fs.get_file(rpath, lpath)


async def _retrying_client(**kwargs: Any) -> Any:
    """fsspec's HTTP session, retrying failed reads; no overall time limit for a large object,
    a minute to connect and between two reads; proxies from the environment."""
    import aiohttp
    from aiohttp_retry import ExponentialRetry, RetryClient

    retry = ExponentialRetry(
        attempts=5, factor=0.1, max_timeout=60, exceptions={aiohttp.ClientError}
    )
    timeout = aiohttp.ClientTimeout(total=None, connect=60, sock_connect=60, sock_read=60)
    return RetryClient(retry_options=retry, timeout=timeout, trust_env=True, **kwargs)


class FolderFS:
    """What ``RemoteStore`` asks of a folder's file system, with the ``os`` module: the same
    answers as dvc-objects' ``LocalFileSystem`` (``find`` walks as it does, ``cat`` omits what
    it cannot read), without importing DVC. Objects never go through it: a folder remote takes
    them as a registry does (``objects.send``), and fetches read them in place."""

    protocol = "local"
    sep = os.sep

    @staticmethod
    def join(*parts: str) -> str:
        return os.path.join(*parts)

    @staticmethod
    def parts(path: str) -> tuple[str, ...]:
        drive, rest = os.path.splitdrive(path.rstrip(os.sep))
        out: list[str] = []
        while True:
            rest, part = os.path.split(rest)
            if part:
                out.append(part)
                continue
            if rest:
                out.append(rest)
            break
        out.reverse()
        return (drive, *out) if drive else tuple(out)

    def relparts(self, path: str, start: str) -> tuple[str, ...]:
        return self.parts(os.path.relpath(os.path.abspath(path), os.path.abspath(start)))

    @staticmethod
    def find(path: str) -> Iterator[str]:
        """Every file below ``path`` (nothing if it is missing or not a folder), as ``os.walk``
        finds them."""
        for root, _dirs, files in os.walk(path):
            root = os.path.normpath(root)
            for name in files:
                yield f"{root}{os.sep}{name}"

    @staticmethod
    def cat_file(path: str, start: int | None = None, end: int | None = None) -> bytes:
        """The file's bytes, from ``start`` up to ``end`` (not included) if given."""
        with open(path, "rb") as f:
            if start:
                f.seek(start)
            return f.read() if end is None else f.read(max(0, end - (start or 0)))

    def cat(self, paths: list[str], *, on_error: str = "raise") -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for p in paths:
            try:
                out[p] = self.cat_file(p)
            except Exception:
                if on_error != "omit":
                    raise
        return out


def describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        where = f" ({e.filename})" if e.filename else ""
        return f"{e.strerror}{where}"
    text = str(e).strip()
    return text or type(e).__name__
