"""Remote tags move by compare-and-swap (docs/remotes.md, "Concurrent pushes"): of concurrent
pushes of different content to one new tag exactly one creates it and the others are refused
with a clear error; every successful move is one log line, and the log's lines chain from the
tag's creation to its value. On a folder remote with real processes and threads; on S3 (moto)
with another push injected at every write of a push; and a lock left by a killed push is broken,
not obeyed forever."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import RemoteError, TagExistsError
from dsreg.registry.folder import Registry
from dsreg.registry.refs import LogEntry
from dsreg.remote import refs as remote_refs
from dsreg.remote.refs import update_ref
from dsreg.remote.store import RemoteStore

REPO = Path(dsreg.__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _tree(root: Path, key: str, n: int = 6) -> Path:
    for i in range(n):
        p = root / f"c{i % 2}" / f"{i:03d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(hashlib.sha256(f"{key}/{i}".encode()).digest() * (1 + i))
    return root


def _digest(i: int) -> str:
    return "blake3:" + hashlib.sha256(str(i).encode()).hexdigest()


def _log(rs: RemoteStore, dataset: str) -> list[LogEntry]:
    lines = rs.log_bytes(dataset).decode().splitlines()
    return [LogEntry.from_dict(json.loads(line)) for line in lines if line.strip()]


def _assert_chain(rs: RemoteStore, dataset: str, tag: str, moves: list[tuple[Any, str]]) -> None:
    """The tag's log lines chain from its creation to its value, one line per successful move."""
    lines = [e for e in _log(rs, dataset) if e.tag == tag]
    assert len(lines) == len(moves), (lines, moves)
    assert sorted((e.old or "", e.new or "") for e in lines) == sorted(
        (old if isinstance(old, str) else "", new) for old, new in moves
    )
    if lines:
        assert lines[0].old is None
        for before, after in itertools.pairwise(lines):
            assert after.old == before.new, (before, after)
        assert rs.get_ref(dataset, tag) == lines[-1].new
    assert not _dot_files(rs)


def _dot_files(rs: RemoteStore) -> list[str]:
    """Locks and dot files below refs/ and logs/ that pushes, finished or killed, must not
    leave behind on a folder remote (a push stages a tag's new value in tmp/, never beside
    it)."""
    if not rs.local:
        return []
    out = []
    for sub in ("refs", "logs"):
        for dirpath, _dirs, files in os.walk(os.path.join(rs.root, sub)):
            for f in files:
                if ".lock" in f or f.startswith("."):
                    out.append(os.path.join(dirpath, f))
    return out


# -- processes: N pushes of different content to one new tag ---------------------------------
_PUSHER = """
import json, os, sys, time
import dsreg
import dsreg.remote.transfer
reg, remote, ready, go = sys.argv[1:5]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
try:
    res = dsreg.push(registry=reg, remote=remote)
    print(json.dumps({"status": [r.status for r in res.refs], "revision": res.refs[0].revision}))
except dsreg.TagExistsError as e:
    print(json.dumps({"refused": str(e)}))
"""


@pytest.mark.slow
def test_concurrent_pushes_to_one_new_tag_create_it_once(tmp_path: Path) -> None:
    n, rounds = 5, 3
    regs = []
    for i in range(n):
        reg = Registry.init(tmp_path / f"reg{i}")
        dsreg.add("pets", _tree(tmp_path / f"tree{i}", f"pusher{i}"), tag="v1", registry=reg)
        regs.append(reg)
    revisions = {dsreg.ls(registry=r)[0].revision for r in regs}
    assert len(revisions) == n  # different content each
    created = 0
    for r in range(rounds):
        remote = tmp_path / f"remote{r}"
        sync = tmp_path / f"sync{r}"
        sync.mkdir()

        def sync_files(i: int, sync: Path = sync) -> list[str]:
            return [str(sync / f"ready{i}"), str(sync / "go")]

        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _PUSHER, str(reg.root), str(remote), *sync_files(i)],
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i, reg in enumerate(regs)
        ]
        deadline = time.monotonic() + 60
        while len(list(sync.glob("ready*"))) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        (sync / "go").touch()
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs.append(json.loads(out.strip().splitlines()[-1]))
        winners = [o for o in outs if "status" in o]
        assert [w["status"] for w in winners] == [["created"]], outs
        for o in outs:
            if "refused" in o:
                assert "pets@v1" in o["refused"] and "--force" in o["refused"], o
        rs = RemoteStore(name="r", url=str(remote), options={})
        assert rs.get_ref("pets", "v1") == winners[0]["revision"]
        log = _log(rs, "pets")
        assert [(e.tag, e.old, e.new) for e in log] == [("v1", None, winners[0]["revision"])]
        assert not _dot_files(rs)
        created += 1
    assert created == rounds


# -- threads: creates and forced moves racing, ref and log in step ---------------------------
Op = tuple[str, int]  # ("create" | "move", digest seed)


def _race(rs: RemoteStore, writers: list[list[Op]]) -> list[tuple[Any, str]]:
    """Run each writer's ops in its own thread, all at once; the successful (old, new) moves.
    A "create" is a push without --force (expects the tag absent); a "move" is a forced push
    (expects the value it just read)."""
    barrier = threading.Barrier(len(writers))
    moves: list[tuple[Any, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(ops: list[Op]) -> None:
        barrier.wait()
        for kind, seed in ops:
            new = _digest(seed)
            expected = None if kind == "create" else rs.ref_state("pets", "v1")
            try:
                update_ref(rs, "pets", "v1", new, expected=expected, command="test")
            except TagExistsError:
                continue
            except BaseException as e:
                with lock:
                    errors.append(e)
                return
            with lock:
                moves.append((expected, new))

    threads = [threading.Thread(target=run, args=(ops,)) for ops in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return moves


_writers = st.lists(
    st.lists(st.sampled_from(["create", "move"]), min_size=1, max_size=4), min_size=2, max_size=6
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writers=_writers)
def test_racing_writers_on_a_folder_keep_ref_and_log_in_step(
    tmp_path_factory: pytest.TempPathFactory, writers: list[list[str]]
) -> None:
    remote = tmp_path_factory.mktemp("cas") / "remote"
    rs = RemoteStore(name="r", url=str(remote), options={})
    seed = iter(range(1000))
    moves = _race(rs, [[(k, next(seed)) for k in ops] for ops in writers])
    creates = [m for m in moves if m[0] is None]
    assert len(creates) == 1  # every writer's first op can create; exactly one did
    _assert_chain(rs, "pets", "v1", moves)


# -- S3: another push injected at each write of a push ---------------------------------------
@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as e:
        pytest.skip(f"moto[server] or boto3 is not installed ({e}): S3 tests need them")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    mp = pytest.MonkeyPatch()
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        mp.delenv(key, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    empty = tmp_path_factory.mktemp("aws") / "config"
    empty.write_text("")
    mp.setenv("AWS_CONFIG_FILE", str(empty))
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    try:
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
    except Exception as e:
        mp.undo()
        pytest.skip(f"moto's S3 server could not start on loopback: {e}")
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="cas")
    try:
        yield endpoint
    finally:
        server.stop()
        mp.undo()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.sampled_from(["create", "move"]),
    second=st.sampled_from(["create", "move"]),
    existing=st.booleans(),
    at=st.integers(0, 3),
)
def test_s3_a_push_between_read_and_write_is_detected(
    s3_endpoint: str, first: str, second: str, existing: bool, at: int
) -> None:
    """Push A reads, then push B runs whole just before A's ``at``-th write (its log line, its
    tag): A's tag write is refused (its line taken back) or, if B touched only the log, A
    retries; the ref and the log agree either way."""
    url = f"s3://cas/{time.monotonic_ns()}"
    rs = RemoteStore(name="s3", url=url, options={"endpointurl": s3_endpoint})
    other = RemoteStore(name="s3", url=url, options={"endpointurl": s3_endpoint})
    assert rs.fs is not other.fs
    moves: list[tuple[Any, str]] = []
    if existing:
        update_ref(rs, "pets", "v1", _digest(0), expected=None, command="setup")
        moves.append((None, _digest(0)))
    writes = 0
    real = rs.fs.pipe_file
    b_done: list[bool] = []

    def pipe_file(path: str, data: bytes, **kw: Any) -> Any:
        nonlocal writes
        if writes == at and not b_done:
            b_done.append(True)
            expected = None if second == "create" else other.ref_state("pets", "v1")
            try:
                update_ref(other, "pets", "v1", _digest(2), expected=expected, command="B")
                moves.append((expected, _digest(2)))
            except TagExistsError:
                pass
        writes += 1
        return real(path, data, **kw)

    rs.fs.pipe_file = pipe_file  # type: ignore[method-assign]
    expected = None if first == "create" else rs.ref_state("pets", "v1")
    try:
        update_ref(rs, "pets", "v1", _digest(1), expected=expected, command="A")
        moves.append((expected, _digest(1)))
    except TagExistsError as e:
        assert "pets@v1" in str(e) and "--force" in str(e)
    _assert_chain(other, "pets", "v1", moves)
    assert len([m for m in moves if m[0] is None]) <= 1


# -- locks left behind -----------------------------------------------------------------------
_HOLDER = """
import sys, time
import dsreg
import dsreg.remote.refs as refs
real = refs._append
def hold(path, line):
    print("locked", flush=True)
    time.sleep(600)
refs._append = hold
dsreg.push(registry=sys.argv[1], remote=sys.argv[2])
"""


def _pusher(tmp_path: Path, name: str, key: str) -> Registry:
    reg = Registry.init(tmp_path / name)
    dsreg.add("pets", _tree(tmp_path / f"{name}-tree", key), tag="v1", registry=reg)
    return reg


def test_a_lock_left_by_a_killed_push_is_broken_at_once(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    holder = _pusher(tmp_path, "a", "a")
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(holder.root), str(remote)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked", proc.stderr.read() if proc.stderr else ""
        assert (remote / "logs" / "pets.lock").exists()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)  # reaped: its pid is gone
    start = time.monotonic()
    res = dsreg.push(registry=_pusher(tmp_path, "b", "b"), remote=str(remote))
    assert time.monotonic() - start < 10
    assert [r.status for r in res.refs] == ["created"]
    rs = RemoteStore(name="r", url=str(remote), options={})
    assert [(e.old, e.new) for e in _log(rs, "pets")] == [(None, res.refs[0].revision)]
    assert not _dot_files(rs)


@pytest.mark.parametrize("body", [b"", b"not json", b'{"pid": 1, "machine": "elsewhere"}'])
def test_an_old_lock_is_broken_and_a_fresh_one_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    remote = tmp_path / "remote"
    lock = remote / "logs" / "pets.lock"
    lock.parent.mkdir(parents=True)
    lock.write_bytes(body)
    # Fresh, its holder unknown: waited for, then a clear error naming the file.
    monkeypatch.setattr(remote_refs, "_WAIT", 0.3)
    reg = _pusher(tmp_path, "a", "a")
    with pytest.raises(RemoteError, match=r"pets\.lock.*remove that file"):
        dsreg.push(registry=reg, remote=str(remote))
    assert dsreg.ls(registry=reg)  # the local side untouched
    rs = RemoteStore(name="r", url=str(remote), options={})
    assert rs.get_ref("pets", "v1") is None and not _log(rs, "pets")
    # Older than a lock is ever held: broken.
    old = time.time() - 10 * remote_refs._STALE
    os.utime(lock, (old, old))
    res = dsreg.push(registry=reg, remote=str(remote))
    assert [r.status for r in res.refs] == ["created"]
    assert not lock.exists()


# -- a push killed while it writes a tag -----------------------------------------------------
_KILLED_AFTER = """
import os, signal, sys
import dsreg
import dsreg.remote.refs as refs
real = getattr(refs, sys.argv[3])
def then_die(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(refs, sys.argv[3], then_die)
dsreg.push(registry=sys.argv[1], remote=sys.argv[2])
"""


def _files_below(root: Path, sub: str) -> dict[str, bytes]:
    top = root / sub
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in top.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("step", "tags_left"),
    [("_stage", set()), ("_append", set()), ("_install", {"pets/v1"})],
    ids=["staged", "logged", "moved"],
)
def test_a_push_killed_while_it_writes_a_tag_leaves_nothing_below_refs(
    tmp_path: Path, step: str, tags_left: set[str]
) -> None:
    """Killed right after it staged the tag's new value, logged the move, or moved the tag into
    place: below refs/ the remote holds tag files only; a re-run ends with the remote a clean
    push makes; what the killed push staged goes from tmp/ once stale."""
    reg = _pusher(tmp_path, "a", "a")
    clean, remote = tmp_path / "clean", tmp_path / "remote"
    dsreg.push(registry=reg, remote=str(clean))
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER, str(reg.root), str(remote), step],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert set(_files_below(remote, "refs")) == tags_left
    dsreg.push(registry=reg, remote=str(remote))
    for sub in ("refs", "files"):
        assert _files_below(remote, sub) == _files_below(clean, sub), sub
    old = time.time() - 2 * 86400
    for p in [*(remote / "tmp").rglob("*"), remote / "tmp"]:
        os.utime(p, (old, old), follow_symlinks=False)
    dsreg.push(registry=reg, remote=str(remote))
    left = sorted(os.listdir(remote / "tmp")) if (remote / "tmp").is_dir() else []
    assert left == [], f"the remote's tmp/ still holds {left}"


def test_staging_survives_another_push_removing_the_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push removes the remote's tmp/ when it empties it; another push's makedirs can then
    see the folder exist and vanish in one call (FileExistsError): the tag is staged anyway."""
    real = os.makedirs
    calls = []

    def racing(path: str, *args: Any, **kwargs: Any) -> None:
        calls.append(path)
        if len(calls) == 1:
            raise FileExistsError(17, "File exists", path)
        real(path, *args, **kwargs)

    monkeypatch.setattr(remote_refs.os, "makedirs", racing)
    staged = remote_refs._stage(str(tmp_path / "tmp"), b"blake3:00\n")
    assert Path(staged).read_bytes() == b"blake3:00\n"
    assert len(calls) == 2
