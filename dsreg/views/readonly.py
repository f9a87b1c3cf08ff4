"""Read-only SQL: the one way DuckDB reaches a registry's files, and the settings that close the
others (docs/queries.md, "Read-only by default").

A connection that runs a user's SQL (``dsreg sql``, ``dsreg.sql``, ``dsreg.connect``,
``Dataset.sql``) turns DuckDB's external access off and locks its configuration, so that no
statement reads or writes a file, attaches a database, loads an extension or changes a setting.
Its views still read the registry's Parquet objects, with DuckDB's own Parquet reader (row groups
in parallel, only the columns a query names): through ``ObjectFiles``, a file system registered
under ``dsreg://`` that serves exactly the tables this connection's views were built over, each
verified before it is opened, and refuses every write. ``dsreg://`` is DuckDB's one allowed
directory; DuckDB lets an allowed directory be written as well as read, which is why it is this
file system, and not the store's folder, that DuckDB is allowed.

Nothing here knows registries or revisions: ``dsreg.views.sql`` hands ``ObjectFiles`` the
function that verifies an object and returns its path.
"""

from __future__ import annotations

import datetime
import io
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from fsspec import AbstractFileSystem

from dsreg.errors import DsregError, QueryError

if TYPE_CHECKING:
    import duckdb

__all__ = ["SCHEME", "ObjectFiles", "lock_down", "read_only_error"]

SCHEME = "dsreg"
_URL = re.compile(r"(?:dsreg://)?/*([a-z0-9]+)/([0-9a-f]{64})")

# What the user is told when read-only SQL refuses an operation, after what was refused.
ADVICE = (
    "dsreg's SQL reads the registry's revisions and nothing else (no file read or written, no "
    "ATTACH, INSTALL, LOAD or SET); to let DuckDB use your own files, pass --allow-files "
    "(allow_files=True in Python)"
)
# Marks a refusal of ObjectFiles in the message DuckDB builds from the Python exception.
_MARK = "dsreg read-only file system:"

# Settings applied in this order; the last two close the connection. DuckDB then refuses any
# file, URL or database outside the allowed directory, INSTALL and LOAD, and any SET, RESET or
# setting PRAGMA (``lock_configuration`` also keeps ``enable_external_access`` from being turned
# back on). Before them: no extension is installed or loaded behind a query's back (a refusal
# then names the extension rather than a folder), and no secret is read from or stored in
# ``~/.duckdb/stored_secrets``.
LOCK = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET allow_persistent_secrets = false",
    f"SET allowed_directories = ['{SCHEME}://']",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)


class TableFile(io.RawIOBase):
    """A table opened for DuckDB: positioned reads (``pread``) of a read-only descriptor.

    DuckDB drops the handles it opens during binding without closing them; a plain ``open()``
    would warn (``ResourceWarning``) each time one is collected. This closes its descriptor
    when collected, quietly."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._fd = -1
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._pos = 0
        self.name = str(path)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += os.fstat(self._fd).st_size
        if offset < 0:
            raise OSError(f"negative seek position {offset}")
        self._pos = offset
        return offset

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = max(0, os.fstat(self._fd).st_size - self._pos)
        data = os.pread(self._fd, size, self._pos)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        super().close()


class ObjectFiles(AbstractFileSystem):  # type: ignore[misc]  # fsspec has no type hints
    """The registry's tables as DuckDB reads them: ``dsreg://blake3/<hex>``, read-only.

    ``url(digest)`` admits a table (a view reads it); only admitted tables exist here, each
    verified again by ``locate`` (``verified_object``: a stat when nothing changed) when it is
    opened or looked at. Every write, removal, copy or new folder is refused.
    """

    protocol = SCHEME
    root_marker = ""
    cachable = False  # fsspec would share one instance between connections

    def __init__(self, locate: Callable[[str], Path], *, locked: bool = True) -> None:
        super().__init__()
        self._locate = locate
        self._locked = locked
        self._admitted: set[str] = set()
        self._lock = threading.Lock()
        self._failure: DsregError | None = None

    # -- what the views read ---------------------------------------------------------------------
    def url(self, digest: str) -> str:
        """Admit the table ``digest`` (verified by the caller) and return its URL."""
        algorithm, _, hexdigest = digest.partition(":")
        with self._lock:
            self._admitted.add(digest)
        return f"{SCHEME}://{algorithm}/{hexdigest}"

    @property
    def locked(self) -> bool:
        """Whether the connection these files serve runs read-only SQL."""
        return self._locked

    def take_failure(self) -> DsregError | None:
        """The error behind the last failed call (a corrupt object, a refused write), once."""
        with self._lock:
            failure, self._failure = self._failure, None
        return failure

    def _fail(self, error: DsregError) -> NoReturn:
        with self._lock:
            self._failure = error
        raise error

    def _refuse(self, what: str, path: object = "") -> NoReturn:
        refused = f"{what} {path}".rstrip()
        message = (
            f"SQL is read-only: refused to {refused}. {ADVICE}"
            if self._locked
            else f"the registry's tables (dsreg://) are read-only: refused to {refused}"
        )
        with self._lock:
            self._failure = QueryError(message)
        raise PermissionError(f"{_MARK} {refused}")

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        return text[len(SCHEME) + 3 :] if text.startswith(f"{SCHEME}://") else text

    def _path(self, path: Any) -> Path:
        """The verified local path of an admitted table; FileNotFoundError for anything else."""
        m = _URL.fullmatch(str(path))
        digest = f"{m.group(1)}:{m.group(2)}" if m else None
        with self._lock:
            admitted = digest in self._admitted
        if digest is None or not admitted:
            raise FileNotFoundError(f"{SCHEME}://{self._strip_protocol(path)}")
        try:
            return self._locate(digest)
        except DsregError as e:
            self._fail(e)

    def info(self, path: Any, **kwargs: Any) -> dict[str, Any]:
        local = self._path(path)
        st = os.stat(local)
        return {
            "name": self._strip_protocol(path),
            "size": st.st_size,
            "type": "file",
            "mtime": st.st_mtime,
        }

    def ls(self, path: Any, detail: bool = True, **kwargs: Any) -> list[Any]:
        entry = self.info(path)  # a table lists as itself; there are no folders to list
        return [entry] if detail else [entry["name"]]

    def modified(self, path: Any) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"], datetime.UTC)

    def created(self, path: Any) -> datetime.datetime:
        return self.modified(path)

    def _open(self, path: Any, mode: str = "rb", **kwargs: Any) -> TableFile:
        if mode != "rb":
            self._refuse("write", f"{SCHEME}://{self._strip_protocol(path)}")
        try:
            return TableFile(self._path(path))
        except FileNotFoundError:
            # Removed between its check and this open (a gc of a cache): located again, which
            # fetches it again where the connection reads a remote, or says it is missing.
            return TableFile(self._path(path))

    # -- everything that would change a file: refused ------------------------------------------
    def mkdir(self, path: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("create folder", path)

    def makedirs(self, path: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("create folders", path)

    def rmdir(self, path: Any) -> NoReturn:
        self._refuse("remove folder", path)

    def rm(self, path: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("remove", path)

    def rm_file(self, path: Any) -> NoReturn:
        self._refuse("remove", path)

    def _rm(self, path: Any) -> NoReturn:
        self._refuse("remove", path)

    def mv(self, path1: Any, path2: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("move", path1)

    def copy(self, path1: Any, path2: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("copy to", path2)

    def cp_file(self, path1: Any, path2: Any, **kwargs: Any) -> NoReturn:
        self._refuse("copy to", path2)

    def put_file(self, lpath: Any, rpath: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write", rpath)

    def get_file(self, rpath: Any, lpath: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write", lpath)

    def pipe_file(self, path: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write", path)

    def touch(self, path: Any, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write", path)


def lock_down(con: duckdb.DuckDBPyConnection, files: ObjectFiles) -> None:
    """Register ``files`` and close ``con``: from here on its SQL reaches ``files`` only."""
    import duckdb

    con.register_filesystem(files)
    for statement in LOCK:
        try:
            con.execute(statement)
        except duckdb.Error as e:
            raise QueryError(
                f"DuckDB {duckdb.__version__} cannot make SQL read-only ({statement}: {e}); "
                "DuckDB 1.2 or later can. Upgrade duckdb, or pass --allow-files "
                "(allow_files=True) to run SQL with DuckDB's full access"
            ) from e


def read_only_error(e: duckdb.Error, files: ObjectFiles) -> DsregError | None:
    """The ``DsregError`` behind a DuckDB error: a failure of ``files`` (a corrupt table, a
    refused write) or, on a locked connection, DuckDB's refusal of read-only SQL; None for any
    other error. Call ``files.take_failure()`` before the statement, to start clean."""
    import duckdb

    failure = files.take_failure()
    if failure is not None:
        return failure
    if not files.locked:
        return None
    message = str(e)
    refused = isinstance(e, duckdb.PermissionException) or any(
        marker in message
        for marker in (
            "disabled by configuration",
            "disabled through configuration",
            "the configuration has been locked",
            "Persistent secrets are disabled",
            # A function, type or secret of an extension: read-only SQL loads none.
            "Please try installing and loading",
        )
    )
    if refused:
        first = message.strip().splitlines()[0] if message.strip() else type(e).__name__
        return QueryError(f"SQL is read-only: DuckDB refused ({first.rstrip('.')}). {ADVICE}")
    return None
