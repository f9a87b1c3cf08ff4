"""Tags and logs on a remote, moved by compare-and-swap.

A push changes a remote tag only from the value it read: of two pushes of different content to
one new tag, exactly one creates it and the other is refused, and every move is logged with the
move (the line holds the value it replaced). How depends on what the remote offers
(docs/remotes.md, "Concurrent pushes"):

- **a folder** (a disk, a NAS mount): a lock file per dataset, ``logs/<dataset>.lock``, created
  with ``O_EXCL``, around re-reading the tag, appending the log line and writing the tag; a new
  tag is created with link(2), which fails if the tag exists even for a writer that takes no
  lock. A lock left by a killed push is broken when its holder is gone (a process of this
  machine) or after ``_STALE`` seconds by the remote's clock.
- **S3**: conditional writes, ``If-None-Match: *`` to create, ``If-Match: <ETag>`` to move, for
  the tag and for the log (a read-modify-write retried when another push got there first).
- **any other object store** (GCS, Azure, SSH, WebDAV, HDFS through DVC; http(s) is never
  written): no conditional write is used. The tag is re-read just before writing and again
  after, so a push that finds another's value after writing reports the conflict; two pushes
  at the same instant can both write, and the last one wins.

The line goes to the log first, then the tag moves (git's order for a ref and its reflog); if
the tag cannot be written the line is taken back. A compare-and-swap that finds the remote
holding the value it was to write (another push got there first) succeeds, writing nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from dsreg._util.fs import write_all
from dsreg._util.jsonread import LINE_BYTES, loads
from dsreg.errors import RemoteError, TagExistsError
from dsreg.objects.digest import short
from dsreg.registry.refs import LogEntry
from dsreg.remote.store import STAGED_TAG, RemoteStore, TagName, TagValues, ref_value

__all__ = [
    "RefUpdate",
    "append_log",
    "damaged_reasons",
    "delete_ref",
    "describe_state",
    "tag_changed",
    "update_ref",
]

# A folder remote's lock is held for a few file writes; one this old is a killed push's.
_STALE = 60.0
# How long a push waits for another push's lock on the same dataset before giving up.
_WAIT = 2 * _STALE
# Attempts at a conditional read-modify-write of an object store's log before giving up.
_TRIES = 20
# Attempts at staging a tag in a folder remote's tmp/, which other pushes remove when empty.
_STAGE_TRIES = 5
_RW_APPEND = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
_WR_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
# Errors for which link(2) is missing, not refused: the file system has no hard links.
_NO_LINKS = (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS)


@dataclass(frozen=True, slots=True, kw_only=True)
class RefUpdate:
    dataset: str
    tag: str
    revision: str
    previous: str | None
    # "created", "moved", "unchanged", "repaired" (a damaged tag replaced), or "deleted"
    # (``push --delete``: ``revision`` is what the tag named)
    status: str

    @property
    def tag_name(self) -> TagName:
        return TagName(self.dataset, self.tag)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "previous": self.previous,
            "status": self.status,
        }


def describe_state(state: str | bytes | None) -> str:
    """A tag's value as people read it: a short digest, 'damaged', or 'absent'."""
    if state is None:
        return "absent"
    if isinstance(state, bytes):
        return f"damaged, holding {state.decode('ascii', 'replace').strip()[:40]!r}"
    return short(state)


def damaged_reasons(found: TagValues) -> dict[TagName, str]:
    """Why each damaged tag among ``found`` is refused (a pull or clone writes none of them)."""
    return {name: f"is {describe_state(data)}" for name, data in found.damaged.items()}


def update_ref(
    rs: RemoteStore,
    dataset: str,
    tag: str,
    new: str,
    *,
    expected: str | bytes | None,
    command: str,
    event: str = "push",
    history: bytes | None = None,
) -> bool:
    """Point the remote's ``dataset@tag`` at ``new`` if it holds ``expected`` (a digest, a
    damaged tag's bytes, ``None``: absent), logged as ``event`` (``result`` for a model ref)
    or by the ``history`` lines a push carries that record the move, under the ref's lock or
    conditional write. Whether it wrote: not if it holds ``new`` already (another push's);
    ``TagExistsError`` naming what it holds otherwise, nothing written."""
    old = expected if isinstance(expected, str) else None
    entry = LogEntry.now(dataset=dataset, tag=tag, old=old, new=new, command=command, event=event)
    line = entry.to_line().encode("utf-8") if history is None else history
    if rs.local:
        return _update_folder(rs, dataset, tag, new, expected, line)
    if getattr(rs.fs, "protocol", None) == "s3":
        return _update_conditional(rs, dataset, tag, new, expected, line)
    return _update_unconditional(rs, dataset, tag, new, expected, line)


def delete_ref(
    rs: RemoteStore, dataset: str, tag: str, *, expected: str, command: str, event: str = "delete"
) -> None:
    """Remove the remote's ``dataset@tag`` if it still holds ``expected``, logged (event
    ``delete``, ``old`` the digest) under the same lock (a folder) or the same re-read
    (an object store) as a move; ``TagExistsError`` naming what it holds if it does not."""
    entry = LogEntry.now(
        dataset=dataset, tag=tag, old=expected, new=None, command=command, event=event
    )
    line = entry.to_line().encode("utf-8")
    path = rs.ref_path(dataset, tag)
    if rs.local:
        try:
            clock = _stage(rs.tmp_path(), b"")
        except OSError as e:
            raise rs.error(f"delete tag {dataset}@{tag} on", e) from None
        try:
            with _FolderLock(rs, dataset, clock=clock):
                _check_still(rs, dataset, tag, expected)
                size = _append(rs.log_path(dataset), line)
                try:
                    os.unlink(path)
                except BaseException:
                    _truncate(rs.log_path(dataset), size)
                    raise
        except OSError as e:
            if isinstance(e, RemoteError):
                raise
            raise rs.error(f"delete tag {dataset}@{tag} on", e) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(clock)
        return
    _check_still(rs, dataset, tag, expected)
    log = rs.log_path(dataset)
    rs.write(log, _joined(rs.log_bytes(dataset), line))
    try:
        rs.fs.rm_file(path)
    except Exception as e:
        rs.write(log, _without(rs.log_bytes(dataset), line))
        raise rs.error(f"delete tag {dataset}@{tag} on", e) from None


def append_log(rs: RemoteStore, dataset: str, data: bytes) -> None:
    """Append whole lines ``data`` (the history a push carries, ``dsreg.remote.history``) to
    the remote's log of ``dataset``, under the same lock (a folder) or the same conditional
    rewrite (an object store) as a move of its tags."""
    if not data:
        return
    log = rs.log_path(dataset)
    if not rs.local:
        if getattr(rs.fs, "protocol", None) == "s3":
            _edit_log(rs, log, lambda body: _joined(body, data), dataset)
        else:
            rs.write(log, _joined(rs.log_bytes(dataset), data))
        return
    try:
        clock = _stage(rs.tmp_path(), b"")
        try:
            with _FolderLock(rs, dataset, clock=clock):
                _append(log, data)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(clock)
    except OSError as e:
        if isinstance(e, RemoteError):
            raise
        raise rs.error(f"write the log of {dataset} to", e) from None


def tag_changed(
    rs: RemoteStore,
    dataset: str,
    tag: str,
    now: str | bytes | None,
    outcome: str,
    *,
    new: str | None = None,
) -> TagExistsError:
    """The error of a remote tag found ``now`` (removed, or at another value) where a push
    expected what it read before; ``outcome`` ends the message: how it came to be, and what
    was not done."""
    what = "removed" if now is None else f"set to {describe_state(now)}"
    return TagExistsError(
        f"tag {dataset}@{tag} was {what} on remote {rs.label} {outcome}",
        dataset=dataset,
        tag=tag,
        existing=now if isinstance(now, str) else None,
        new=new,
    )


def _check_still(rs: RemoteStore, dataset: str, tag: str, expected: str) -> None:
    now = rs.ref_state(dataset, tag)
    if now != expected:
        raise tag_changed(rs, dataset, tag, now, "by another push; nothing was deleted")


def _conflict(
    rs: RemoteStore, dataset: str, tag: str, new: str, now: str | bytes | None
) -> TagExistsError:
    outcome = (
        f"by another push while pushing; {short(new)} was not written there: pull it, or "
        "move it with --force"
    )
    return tag_changed(rs, dataset, tag, now, outcome, new=new)


# -- a folder: a lock per dataset, link(2) for a new tag -------------------------------------
def _update_folder(
    rs: RemoteStore, dataset: str, tag: str, new: str, expected: str | bytes | None, line: bytes
) -> bool:
    path = rs.ref_path(dataset, tag)
    action = f"write tag {dataset}@{tag} to"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # Staged before the lock (the lock is held for a few small writes only), in the
        # remote's tmp/: a push killed before it removes the staged file leaves nothing below
        # refs/, and a later push drops the file from tmp/ once stale (``objects.tidy``).
        tmp = _stage(rs.tmp_path(), (new + "\n").encode("ascii"))
    except OSError as e:
        raise rs.error(action, e) from None
    try:
        with _FolderLock(rs, dataset, clock=tmp):
            now = rs.ref_state(dataset, tag)
            if now == new:
                return False
            if now != expected:
                raise _conflict(rs, dataset, tag, new, now)
            log = rs.log_path(dataset)
            size = _append(log, line)
            try:
                _install(tmp, path, create=expected is None)
            except BaseException:
                _truncate(log, size)
                raise
        return True
    except FileExistsError:
        # Created meanwhile by a writer that takes no lock (an older dsreg, a sync tool).
        if (now := rs.ref_state(dataset, tag)) == new:
            return False
        raise _conflict(rs, dataset, tag, new, now) from None
    except OSError as e:
        if isinstance(e, RemoteError):
            raise
        raise rs.error(action, e) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        with contextlib.suppress(OSError):
            os.rmdir(rs.tmp_path())  # only if no other push is staging there


def _stage(staging: str, data: bytes) -> str:
    """A new file in ``staging`` holding ``data``, made durable; its path. The folder is made
    again if another push removed it, empty, in between."""
    path = os.path.join(staging, f"{STAGED_TAG}{secrets.token_hex(8)}")
    for attempt in range(_STAGE_TRIES):
        try:
            # makedirs(exist_ok=True) itself fails with FileExistsError when another push
            # removes the empty folder between its mkdir and its check: try again then too.
            os.makedirs(staging, exist_ok=True)
            fd = os.open(path, _WR_NEW, 0o644)
            break
        except (FileNotFoundError, FileExistsError):
            if attempt == _STAGE_TRIES - 1:
                raise
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def _install(tmp: str, path: str, *, create: bool) -> None:
    """Move the staged tag into place: created only if absent (``FileExistsError`` if not), or
    replacing the old value; the folder is fsynced, so the move is durable."""
    if not create:
        os.replace(tmp, path)
    else:
        try:
            os.link(tmp, path)
        except OSError as e:
            if isinstance(e, FileExistsError) or e.errno not in _NO_LINKS:
                raise
            # No hard links here: under the lock, absent-then-rename is safe among pushers.
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, "exists", path) from None
            os.rename(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _append(path: str, line: bytes) -> int:
    """Append a whole line to a log and fsync it; the log's size before (to take it back)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, _RW_APPEND, 0o644)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        if end and os.pread(fd, 1, end - 1) != b"\n":
            line = b"\n" + line  # a line torn by a crash: end it, or ours would be lost with it
        write_all(fd, line)
        os.fsync(fd)
        return end
    finally:
        os.close(fd)


def _truncate(path: str, size: int) -> None:
    with contextlib.suppress(OSError):
        os.truncate(path, size)


def _machine() -> str:
    """This machine and process namespace: a lock whose holder ran here is checked by pid."""
    parts = [socket.gethostname()]
    with contextlib.suppress(OSError):
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            parts.append(f.read().strip())
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    return "/".join(parts) if len(parts) == 3 else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


class _FolderLock:
    """``logs/<dataset>.lock`` on a folder remote, created with ``O_EXCL``: pushers of one
    dataset take turns at its tags and log. The file says who holds it; a holder that has died
    (on this machine) or a lock older than ``_STALE`` seconds (by the remote's clock: ``clock``
    is a file just written there) is broken, by renaming it aside first, so that of two pushes
    breaking one stale lock only one removes it."""

    __slots__ = ("_body", "_clock", "path", "rs")

    def __init__(self, rs: RemoteStore, dataset: str, *, clock: str) -> None:
        self.rs = rs
        self.path = os.path.join(os.path.dirname(rs.log_path(dataset)), f"{dataset}.lock")
        self._clock = (os.stat(clock).st_mtime, time.monotonic())
        holder = {
            "machine": _machine(),
            "pid": os.getpid(),
            "token": secrets.token_hex(8),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self._body = json.dumps(holder, sort_keys=True).encode("ascii")

    def __enter__(self) -> _FolderLock:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        start, delay = time.monotonic(), 0.002
        while True:
            try:
                fd = os.open(self.path, _WR_NEW, 0o644)
            except FileExistsError:
                if self._break_if_stale():
                    continue
                if time.monotonic() - start > _WAIT:
                    raise self._held() from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.1)
                continue
            try:
                write_all(fd, self._body)
            finally:
                os.close(fd)
            return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            if _read(self.path) == self._body:  # not if it was broken as stale meanwhile
                os.unlink(self.path)

    def _now(self) -> float:
        """The remote's clock now: the clock file's mtime plus the time since it was written."""
        mtime, then = self._clock
        return mtime + (time.monotonic() - then)

    def _stale(self, st: os.stat_result, body: bytes) -> bool:
        try:
            holder = loads(body, what="lock file", error=RemoteError, max_bytes=LINE_BYTES)
        except RemoteError:
            holder = None  # being written, or not ours: only its age tells
        if isinstance(holder, dict):
            pid, machine = holder.get("pid"), holder.get("machine")
            if machine and machine == _machine() and isinstance(pid, int) and not _alive(pid):
                return True
        return self._now() - st.st_mtime > _STALE

    def _break_if_stale(self) -> bool:
        """Remove the lock if it is stale; whether to try to take it again at once."""
        try:
            st = os.stat(self.path)
            body = _read(self.path)
        except FileNotFoundError:
            return True
        if not self._stale(st, body):
            return False
        aside = f"{self.path}.{secrets.token_hex(8)}.stale"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return True
        try:
            if os.stat(aside).st_ino != st.st_ino or _read(aside) != body:
                # Another push broke it and took the lock in between: give it back.
                with contextlib.suppress(OSError):
                    os.link(aside, self.path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(aside)
        return True

    def _held(self) -> RemoteError:
        try:
            holder = _read(self.path).decode("ascii", "replace")[:200]
            age = f"{self._now() - os.stat(self.path).st_mtime:.0f} s"
        except OSError:
            holder, age = "?", "?"
        return RemoteError(
            f"remote {self.rs.label}: another push has held {self.path} for {age} ({holder}); "
            "wait for it, or, if no push to this remote is running, remove that file"
        )


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(4096)


# -- S3: conditional writes ------------------------------------------------------------------
def _update_conditional(
    rs: RemoteStore, dataset: str, tag: str, new: str, expected: str | bytes | None, line: bytes
) -> bool:
    path = rs.ref_path(dataset, tag)
    etag, data = _read_tagged(rs, path, f"read tag {dataset}@{tag} from")
    now = _state(data)
    if now == new:
        return False
    if now != expected:
        raise _conflict(rs, dataset, tag, new, now)
    log = rs.log_path(dataset)
    _edit_log(rs, log, lambda body: _joined(body, line), dataset)
    try:
        _put(rs, path, (new + "\n").encode("ascii"), etag)
    except _Conflict:
        _edit_log(rs, log, lambda body: _without(body, line), dataset)
        _etag, data = _read_tagged(rs, path, f"read tag {dataset}@{tag} from")
        if (now := _state(data)) == new:
            return False
        raise _conflict(rs, dataset, tag, new, now) from None
    except Exception as e:
        _edit_log(rs, log, lambda body: _without(body, line), dataset)
        raise rs.error(f"write tag {dataset}@{tag} to", e) from None
    return True


class _Conflict(Exception):
    """A conditional write refused: the object changed (or appeared) since it was read."""


def _state(data: bytes | None) -> str | bytes | None:
    return None if data is None else ref_value(data)


class _Tagged(NamedTuple):
    """An object of an object store as read for a conditional write: its ``etag`` and ``data``,
    both ``None`` if it is absent."""

    etag: str | None
    data: bytes | None


def _read_tagged(rs: RemoteStore, path: str, action: str) -> _Tagged:
    """An object's ETag and bytes (``None`` both if it is absent). The ETag is read first:
    if the object changes before its bytes are read, a write conditional on that ETag fails,
    so it errs only towards refusing."""
    inner = getattr(rs.fs, "fs", None)
    with contextlib.suppress(Exception):
        inner.invalidate_cache(path)  # type: ignore[union-attr]
    try:
        info = rs.fs.info(path)
        data = bytes(rs.fs.cat_file(path))
    except FileNotFoundError:
        return _Tagged(None, None)
    except Exception as e:
        raise rs.error(action, e) from None
    etag = info.get("ETag") or info.get("etag")
    if not etag:
        raise RemoteError(f"remote {rs.label} gave no ETag for {path}: cannot write it safely")
    return _Tagged(str(etag), data)


def _put(rs: RemoteStore, path: str, data: bytes, etag: str | None) -> None:
    """Write ``data`` at ``path`` if the object still has ``etag`` (``None``: if it is still
    absent); ``_Conflict`` if not."""
    try:
        if etag is None:
            rs.fs.pipe_file(path, data, mode="create")
        else:
            rs.fs.pipe_file(path, data, IfMatch=etag)
    except FileExistsError:
        raise _Conflict() from None
    except OSError as e:
        text = str(e)
        if any(k in text for k in ("Precondition", "pre-condition", "ConditionalRequest")):
            raise _Conflict() from None
        raise


def _edit_log(rs: RemoteStore, path: str, edit: Any, dataset: str) -> None:
    """Read-modify-write the log, conditional on its ETag, retried while others write it."""
    for _ in range(_TRIES):
        etag, data = _read_tagged(rs, path, f"read the log of {dataset} from")
        body = edit(data or b"")
        if body == (data or b""):
            return
        try:
            _put(rs, path, body, etag)
            return
        except _Conflict:
            time.sleep(0.01 + 0.05 * random.random())
        except Exception as e:
            raise rs.error(f"write the log of {dataset} to", e) from None
    raise RemoteError(
        f"cannot write the log of {dataset} on remote {rs.label}: other pushes kept changing "
        f"it ({_TRIES} attempts); push again"
    )


def _joined(body: bytes, line: bytes) -> bytes:
    if body and not body.endswith(b"\n"):
        body += b"\n"
    return body + line


def _without(body: bytes, line: bytes) -> bytes:
    at = body.rfind(line)
    return body if at < 0 else body[:at] + body[at + len(line) :]


# -- other object stores: re-read before and after -------------------------------------------
def _update_unconditional(
    rs: RemoteStore, dataset: str, tag: str, new: str, expected: str | bytes | None, line: bytes
) -> bool:
    now = rs.ref_state(dataset, tag)
    if now == new:
        return False
    if now != expected:
        raise _conflict(rs, dataset, tag, new, now)
    # Object stores cannot append: read, add the line, write back.
    log = rs.log_path(dataset)
    rs.write(log, _joined(rs.log_bytes(dataset), line))
    rs.write(rs.ref_path(dataset, tag), (new + "\n").encode("ascii"))
    after = rs.ref_state(dataset, tag)
    if after != new:
        raise _conflict(rs, dataset, tag, new, after)
    return True
