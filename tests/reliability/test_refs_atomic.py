"""A tag and its log line are written together or not at all (docs/concepts.md, "Guarantees": no
ref without its log line). Every step of a tag write is made to fail in turn (a full disk, an
I/O error, a quota), and the registry is then checked: either the tag moved and its line is in
the log, or neither; the error is a ``StorageError``; and running the command again logs exactly
one line. A real full disk (a small tmpfs) where the machine lets us mount one."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.errors import StorageError
from dsreg.registry.folder import Registry
from dsreg.registry.refs import LogEntry, RefStore, parse_log

A, B, C = ("blake3:" + c * 64 for c in "abc")
# Every os call a tag write makes to the file system (open, write, sync, link, rename, truncate,
# folders): the injection points.
CALLS = ("open", "write", "fsync", "link", "replace", "mkdir", "ftruncate", "pread", "close")
ERRNOS = (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS)


class Faults:
    """Counts the os calls made while active; the ``fail_at``-th one fails with ``code`` (a
    ``write`` first writes half its bytes, as a disk filling mid-write does)."""

    def __init__(self, fail_at: int | None = None, code: int = errno.ENOSPC) -> None:
        self.fail_at = fail_at
        self.code = code
        self.calls: list[str] = []

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with pytest.MonkeyPatch.context() as mp:
            for name in CALLS:
                mp.setattr(os, name, self._wrap(name, getattr(os, name)))
            yield

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            n = len(self.calls)
            self.calls.append(name)
            if n != self.fail_at:
                return real(*args, **kwargs)
            if name == "write" and len(args[1]) > 1:
                real(args[0], bytes(args[1])[: len(args[1]) // 2])
            elif name == "close":
                real(*args)  # a close that reports an error has still closed
            raise OSError(self.code, os.strerror(self.code))

        return call


def _state(refs: RefStore) -> tuple[str | None, bytes]:
    log = refs.logs / "pets.jsonl"
    return refs.get("pets", "v1"), log.read_bytes() if log.exists() else b""


def _set(refs: RefStore, digest: str, force: bool) -> None:
    refs.set("pets", "v1", digest, force=force, command="dsreg tag pets@v1")


def _count_calls(tmp: Path, start: str | None, torn: bool) -> int:
    refs = _store(tmp / "count", start, torn)
    faults = Faults()
    with faults.active():
        _set(refs, C, force=True)
    return len(faults.calls)


def _store(root: Path, start: str | None, torn: bool) -> RefStore:
    refs = RefStore(root)
    if start is not None:
        refs.set("pets", "v1", start)
        refs.record("pets", event="overlay", new=B, command="dsreg detect")
    if torn:
        # A crash mid-append left half a line: a rollback must give exactly these bytes back.
        refs.logs.mkdir(parents=True, exist_ok=True)
        with open(refs.logs / "pets.jsonl", "ab") as f:
            f.write(b'{"time":"2026-01-01T00:0')
    return refs


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.sampled_from([None, A]),
    torn=st.booleans(),
    at=st.integers(0, 60),
    code=st.sampled_from(ERRNOS),
)
def test_a_tag_and_its_log_line_are_written_together_or_not_at_all(
    tmp_path: Path, start: str | None, torn: bool, at: int, code: int
) -> None:
    total = _count_calls(tmp_path / uuid.uuid4().hex, start, torn)
    fail_at = at % total
    refs = _store(tmp_path / uuid.uuid4().hex, start, torn)
    before = _state(refs)
    faults = Faults(fail_at, code)
    failed = None
    with faults.active():
        try:
            _set(refs, C, force=True)
        except StorageError as e:
            failed = e
    ref, log = _state(refs)
    new_lines = [e for e in refs.log("pets")[len(_entries(before[1])) :] if e.new == C]
    if failed is not None:
        # Nothing changed, to the byte; the message says so and names the cause.
        assert (ref, log) == before, (faults.calls, fail_at)
        assert "nothing was changed" in str(failed) or "as it was" in str(failed)
        assert os.strerror(code) in str(failed)
    else:
        # The fault hit a step after the tag was durable (closing, cleaning up): both are there.
        assert ref == C and len(new_lines) == 1, (faults.calls, fail_at)
    # The command run again succeeds and the log holds exactly one line for the move.
    _set(refs, C, force=True)
    assert refs.get("pets", "v1") == C
    moves = [e for e in refs.log("pets") if e.new == C]
    assert len(moves) == 1 and moves[0].old == start
    assert not list(refs.tmp.iterdir()), "a temporary ref file was left behind"


def _entries(data: bytes) -> list[LogEntry]:
    return parse_log(data, dataset="pets")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(at=st.integers(0, 30), code=st.sampled_from(ERRNOS), many=st.booleans())
def test_a_log_append_is_all_or_nothing(tmp_path: Path, at: int, code: int, many: bool) -> None:
    """An overlay recorded, or a clone's copy of a remote history: never half a line."""
    refs = _store(tmp_path / uuid.uuid4().hex, A, torn=False)
    entries = [
        LogEntry.now(dataset="pets", tag=f"t{i}", old=None, new=B, command="c", event="push")
        for i in range(3 if many else 1)
    ]
    before = _state(refs)
    faults = Faults(at, code)
    with faults.active():
        try:
            if many:
                refs.append_log("pets", entries)
            else:
                refs.record("pets", event="overlay", new=C, command="dsreg detect")
            done = True
        except StorageError:
            done = False
    after = _state(refs)
    if done:
        assert len(refs.log("pets")) == len(_entries(before[1])) + len(entries)
    else:
        assert after == before, faults.calls


def test_a_crash_between_the_log_line_and_the_tag_is_finished_by_the_next_run(
    tmp_path: Path,
) -> None:
    """kill -9 after the line is durable and before the tag is installed: the line is the
    journal of the move, and the re-run installs the tag without a second line."""
    refs = _store(tmp_path, A, torn=False)
    refs.append_log(
        "pets",
        [LogEntry.now(dataset="pets", tag="v1", old=A, new=C, command="dsreg tag --force")],
    )
    _set(refs, C, force=True)
    assert refs.get("pets", "v1") == C
    assert [(e.old, e.new) for e in refs.log("pets") if e.tag == "v1"] == [(None, A), (A, C)]
    # Another move, after it, is logged as usual.
    _set(refs, B, force=True)
    assert [(e.old, e.new) for e in refs.log("pets") if e.tag == "v1"][-1] == (C, B)


@pytest.fixture
def tagged(make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]) -> Path:
    reg = make_registry()
    dsreg.add("pets", make_imagefolder(per_class=2), tag="original", registry=reg)
    return reg.root


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(at=st.integers(0, 60), code=st.sampled_from(ERRNOS), move=st.booleans())
def test_dsreg_tag_failing_anywhere_leaves_tag_and_log_consistent(
    tagged: Path, tmp_path_factory: pytest.TempPathFactory, at: int, code: int, move: bool
) -> None:
    """The whole command (the revision stored, then the tag and its line), failing at any
    step: the tag and the log agree; the re-run logs exactly one line."""
    target = "pets@original" if move else "pets@cleaned"
    tag = target.partition("@")[2]

    def copy() -> Path:
        root = tmp_path_factory.mktemp("reg") / "reg"
        shutil.copytree(tagged, root)
        if move:
            dsreg.tag("pets@cleaned", "pets@original", view="cleaned", registry=root)
        return root

    def run(root: Path) -> None:
        dsreg.tag(target, "pets@original", view="corrected", force=True, registry=root)

    counted = Faults()
    with counted.active():
        run(copy())
    root = copy()
    reg = Registry(root)
    lines_before = len([e for e in reg.refs.log("pets") if e.tag == tag])
    old = reg.refs.get("pets", tag)
    faults = Faults(at % len(counted.calls), code)
    with faults.active():
        try:
            run(root)
            failed = False
        except OSError:
            # A StorageError (an OSError too) from the tag and its log line, which the test
            # above holds to; the object store's own errors are its business.
            failed = True
    now = reg.refs.get("pets", tag)
    logged = [e for e in reg.refs.log("pets") if e.tag == tag]
    if failed:
        assert now == old and len(logged) == lines_before, faults.calls
    else:
        assert now != old and len(logged) == lines_before + 1
    run(root)
    logged = [e for e in reg.refs.log("pets") if e.tag == tag]
    assert len(logged) == lines_before + 1 and logged[-1].new == reg.refs.get("pets", tag)
    assert dsreg.verify(registry=root).ok


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@pytest.mark.parametrize("slack", [0, 1, 2])
def test_dsreg_tag_on_a_full_disk(
    cli: Callable[..., Any], make_imagefolder: Callable[..., Path], tmp_path: Path, slack: int
) -> None:
    """A real full disk (tmpfs): the command fails with a message and changes nothing, or
    succeeds whole; freed space, the re-run says Tagged and the log has exactly one line."""
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "2m"):
        pytest.skip("mounting a tmpfs is not permitted here (needs root or CAP_SYS_ADMIN)")
    try:
        reg = mnt / "reg"
        assert cli("init", "--registry", str(reg)).exit_code == 0
        tree = make_imagefolder(per_class=2)
        added = cli("add", "pets", str(tree), "--tag", "original", "--registry", str(reg))
        assert added.exit_code == 0, added.stderr
        assert cli("tag", "pets@cleaned", "pets@original", "--view", "cleaned",
                   "--registry", str(reg)).exit_code == 0  # fmt: skip
        # The revision is stored first, so only the tag and its line remain to be written.
        done = cli("tag", "pets@fixed", "pets@original", "--view", "corrected",
                   "--registry", str(reg))  # fmt: skip
        assert done.exit_code == 0
        assert cli("tag", "pets@fixed", "pets@original", "--view", "original", "--force",
                   "--registry", str(reg)).exit_code == 0  # fmt: skip
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        # ``slack`` pages freed: the log line fits and the ref does not, or neither, or both.
        os.truncate(filler, max(0, filler.stat().st_size - slack * 4096))
        r = Registry(reg)
        before = (r.refs.get("pets", "fixed"), (reg / "logs" / "pets.jsonl").read_bytes())
        res = cli("tag", "pets@fixed", "pets@cleaned", "--force", "--registry", str(reg))
        after = (r.refs.get("pets", "fixed"), (reg / "logs" / "pets.jsonl").read_bytes())
        assert "Traceback" not in res.stderr
        if res.exit_code != 0:
            assert res.stderr.startswith("Error: ") and "nothing was changed" in res.stderr
            assert after == before
        filler.unlink()
        again = cli("tag", "pets@fixed", "pets@cleaned", "--force", "--registry", str(reg))
        assert again.exit_code == 0 and "Tagged" in again.stderr
        cleaned = r.refs.get("pets", "cleaned")
        assert r.refs.get("pets", "fixed") == cleaned
        assert len([e for e in r.refs.log("pets") if e.tag == "fixed" and e.new == cleaned]) == 1
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)
