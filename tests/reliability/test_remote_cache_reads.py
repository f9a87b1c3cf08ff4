"""Reads of a remote into the per-user cache (no registry: ``checkout``, ``sql`` and ``show``
with ``--remote``) survive what may happen to the cache meanwhile: a gc of it (everything in
it is untagged), an object deleted by hand, a byte flipped by a failing disk. An object a read
finds missing or corrupt is fetched again from the remote, verified, and the read serves the
right bytes; a read holds the cache's lock, so a gc waits for it. When fetching again cannot
help, the error says what applies to a cache (docs/remotes.md, "Reading a remote";
docs/concepts.md, "Guarantees")."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import Ran, run

import dsreg
from dsreg.objects import batch as objects_batch
from dsreg.objects.hashing import hash_path
from dsreg.registry.folder import Registry
from dsreg.remote import fetch as fetching
from dsreg.remote import waves

REPO = Path(dsreg.__file__).resolve().parents[1]
QUERY = 'SELECT label_name, count(*) AS n FROM "pets@v1" GROUP BY ALL ORDER BY 1'
# ``python -c`` with this runs the dsreg command line in a fresh process, as a user's shell does.
MAIN = "import sys; from dsreg.cli import main; main(sys.argv[1:])"
COUNTS = ['"label_name","n"', '"c0",4', '"c1",4', '"c2",4']


def _tree(root: Path, classes: int, per_class: int) -> Path:
    for c in range(classes):
        for i in range(per_class):
            p = root / f"c{c}" / f"{i:03d}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(hashlib.sha256(f"{c}/{i}".encode()).digest() * (1 + i % 7))
    return root


@dataclass(frozen=True)
class Published:
    tree: Path
    remote: Path
    revision: str
    payloads: tuple[str, ...]
    tables: tuple[str, ...]  # the examples table
    manifests: tuple[str, ...]  # the revision and its snapshot


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    """pets@v1 (3 classes of 4 files) pushed to a folder remote."""
    tmp = tmp_path_factory.mktemp("published")
    reg = Registry.init(tmp / "source")
    tree = _tree(tmp / "pets", 3, 4)
    res = dsreg.add("pets", tree, tag="v1", registry=reg)
    dsreg.push(remote=str(tmp / "remote"), registry=reg)
    payloads = dsreg.open("pets@v1", registry=reg).labels().column("blob").to_pylist()
    return Published(
        tree=tree,
        remote=tmp / "remote",
        revision=res.revision,
        payloads=tuple(sorted(payloads)),
        tables=(reg.snapshot(res.snapshot).examples,),
        manifests=(res.revision, res.snapshot),
    )


@dataclass
class Machine:
    """A machine with no registry: reads go to the cache at ``cache``."""

    cache: Path
    work: Path

    def read(self, command: str, published: Published, out: str = "out") -> Ran:
        """``dsreg checkout|sql|show`` of pets@v1 with --remote, in this process."""
        url = str(published.remote)
        if command == "checkout":
            return run("checkout", "pets@v1", str(self.work / out), "--remote", url)
        if command == "sql":
            return run("sql", QUERY, "--remote", url, "--format", "csv")
        return run("show", "pets@v1", "--remote", url, "--json")

    def object(self, digest: str) -> Path:
        return Registry(self.cache).store.path(digest)


def _machine(root: Path, mp: pytest.MonkeyPatch) -> Machine:
    (root / "home").mkdir(parents=True)
    (root / "work").mkdir()
    for var in ("DSREG_HOME", "DSREG_REGISTRY", "XDG_CACHE_HOME", "DSREG_MAX_TAGS"):
        mp.delenv(var, raising=False)
    mp.setenv("HOME", str(root / "home"))
    mp.setenv("DSREG_CACHE", str(root / "cache"))
    mp.chdir(root / "work")
    return Machine(cache=root / "cache", work=root / "work")


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    return _machine(tmp_path, monkeypatch)


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != ".dsreg.json"
    }


def _served_right(command: str, ran: Ran, published: Published, work: Path, out: str) -> None:
    """The read succeeded and served the remote's revision, byte for byte."""
    assert ran.code == 0 and ran.crash is None, ran.err
    if command == "checkout":
        assert ran.out.strip() == published.revision
        assert files_of(work / out) == files_of(published.tree)
    elif command == "sql":
        assert ran.out.splitlines() == COUNTS
    else:
        shown = ran.json()
        assert (shown["revision"], shown["rows"]) == (published.revision, 12)


def _intact(machine: Machine, digest: str) -> bool:
    path = machine.object(digest)
    return path.is_file() and hash_path(str(path)) == digest


# -- an object removed from the cache between resolve and read --------------------------------

# Where each command has resolved the revision and fetched what it lacks, and has not yet read
# the objects it serves: the checkout's plan, the SQL of the view, the description.
_BETWEEN = {
    "checkout": ("dsreg.ops.checkout.apply", "plan"),
    "sql": ("dsreg.views.sql", "view_sql"),
    "show": ("dsreg.report.show", "describe"),
}


@pytest.mark.parametrize(
    ("command", "removed"),
    [
        ("checkout", "payload"),
        ("checkout", "table"),
        ("checkout", "everything"),
        ("checkout", "whole-cache"),
        ("sql", "table"),
        ("sql", "everything"),
        ("sql", "whole-cache"),
        ("show", "table"),
        ("show", "everything"),
        ("show", "whole-cache"),
    ],
)
def test_an_object_removed_from_the_cache_between_resolve_and_read_is_fetched_again(
    published: Published,
    machine: Machine,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    removed: str,
) -> None:
    """As a gc of the cache, or ``rm``, would remove it (``whole-cache``: its folder, which
    may be deleted at any time); the read goes on with it fetched again from the remote, and
    serves the right bytes."""
    everything = [*published.payloads, *published.tables, *published.manifests]
    victims = {
        "payload": list(published.payloads[:3]),
        "table": list(published.tables),
        "everything": everything,
        "whole-cache": everything,
    }[removed]
    module, name = _BETWEEN[command]
    target = importlib.import_module(module)
    original = getattr(target, name)
    done: list[str] = []

    def between(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.extend(d for d in victims if machine.object(d).exists())
            for d in done:
                machine.object(d).unlink()
            if removed == "whole-cache":
                shutil.rmtree(machine.cache)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, between)
    ran = machine.read(command, published)
    assert done, "nothing was removed: the hook was not reached"
    _served_right(command, ran, published, machine.work, "out")
    # What the read served from is back, intact: the table, and for checkout the payloads.
    served = [*published.tables, *(published.payloads if command == "checkout" else ())]
    assert all(_intact(machine, d) for d in done if d in served)


# -- the whole cache deleted while a read fetches, or before it takes the lock ------------------


@pytest.mark.parametrize("command", ["checkout", "sql", "show"])
@pytest.mark.parametrize("when", ["staged", "lock"])
def test_the_cache_deleted_under_a_read_is_made_again(
    published: Published,
    machine: Machine,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    when: str,
) -> None:
    """``staged``: the fetch has staged what it fetched and is about to install it; ``lock``:
    the read made the cache and is about to take its lock. Either way the cache's folders are
    made again and the read goes on (it failed with "cannot install objects into ..." and
    "cannot open the registry's lock file ...")."""
    target = objects_batch.ObjectBatch if when == "staged" else Registry
    name = "commit" if when == "staged" else "lock"
    original = getattr(target, name)
    done: list[bool] = []

    def deleted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not done and machine.cache.exists():
            done.append(True)
            shutil.rmtree(machine.cache)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(target, name, deleted)
    monkeypatch.setattr(waves, "FEW", 0)  # a staging batch, as for more than a few objects
    ran = machine.read(command, published)
    assert done, "the cache was not deleted: the hook was not reached"
    assert "cannot install objects" not in ran.err and "lock file" not in ran.err
    _served_right(command, ran, published, machine.work, "out")


# -- a flipped byte in a cached object ----------------------------------------------------------


@pytest.fixture(scope="module")
def full_cache(published: Published, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding all of pets@v1, as a checkout with --remote leaves it."""
    root = tmp_path_factory.mktemp("full")
    mp = pytest.MonkeyPatch()
    try:
        m = _machine(root, mp)
        assert m.read("checkout", published).code == 0
    finally:
        mp.undo()
    return root / "cache"


_KINDS = {
    "checkout": ("payload", "table", "manifest"),
    "sql": ("table", "manifest"),
    "show": ("table", "manifest"),
}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), command=st.sampled_from(sorted(_KINDS)))
def test_a_flipped_byte_in_a_cached_object_is_fetched_again_never_served(
    published: Published,
    full_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    command: str,
) -> None:
    """Any object the read needs, any byte of it: the damage is found by hashing, the object is
    fetched again from the remote and replaced, and the read serves the remote's bytes."""
    kind = data.draw(st.sampled_from(_KINDS[command]), label="kind")
    pool = {
        "payload": published.payloads,
        "table": published.tables,
        "manifest": published.manifests,
    }[kind]
    digest = data.draw(st.sampled_from(pool), label="object")
    root = tmp_path_factory.mktemp("flip")
    mp = pytest.MonkeyPatch()
    try:
        m = _machine(root, mp)
        shutil.copytree(full_cache, m.cache)
        path = m.object(digest)
        size = path.stat().st_size
        at = data.draw(st.integers(0, size - 1), label="byte")
        os.chmod(path, 0o644)
        raw = bytearray(path.read_bytes())
        raw[at] ^= data.draw(st.sampled_from([0x01, 0x80, 0xFF]), label="mask")
        path.write_bytes(bytes(raw))
        os.chmod(path, 0o444)
        assert not _intact(m, digest)
        ran = m.read(command, published)
        _served_right(command, ran, published, m.work, "out")
        assert _intact(m, digest)  # replaced by the remote's bytes
    finally:
        mp.undo()


# -- when fetching again does not help ----------------------------------------------------------


@pytest.mark.parametrize("damage", ["removed", "flipped"])
def test_an_object_the_cache_keeps_losing_ends_the_read_with_advice_for_a_cache(
    published: Published,
    full_cache: Path,
    machine: Machine,
    monkeypatch: pytest.MonkeyPatch,
    damage: str,
) -> None:
    """Something else (a program, a failing disk) removes or damages an object in the cache
    again after every fetch: the read stops, serves nothing of it, and the one-line error is
    about the cache (where it is, that deleting it is safe, to run with --remote again), not a
    registry's advice (verify, pull, re-add)."""
    shutil.copytree(full_cache, machine.cache)
    victim = published.payloads[0]

    def spoil() -> None:
        path = machine.object(victim)
        if damage == "removed":
            path.unlink(missing_ok=True)
            return
        os.chmod(path, 0o644)
        raw = bytearray(path.read_bytes())
        raw[0] ^= 0x01
        path.write_bytes(bytes(raw))

    original = fetching.receive

    def fetch(*args: Any, **kwargs: Any) -> Any:
        rep = original(*args, **kwargs)
        spoil()
        return rep

    spoil()
    monkeypatch.setattr(fetching, "receive", fetch)
    ran = machine.read("checkout", published)
    assert ran.code == 1 and ran.crash is None
    lines = ran.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), ran.err
    assert f"object {victim.removeprefix('blake3:')[:12]} in the cache registry" in lines[0]
    assert str(machine.cache) in lines[0]
    assert "delete" in lines[0] and "--remote again" in lines[0]
    for advice in ("dsreg verify", "dsreg pull", "add its data", "re-add", "default remote"):
        assert advice not in lines[0], lines[0]
    assert not (machine.work / "out").exists()  # nothing of it was served


# -- a gc looping on the cache while reads run --------------------------------------------------

_GC_LOOP = """
import os, sys
import dsreg
from dsreg.errors import DsregError
cache, stop = sys.argv[1], sys.argv[2]
runs = removing = 0
while not os.path.exists(stop):
    if not os.path.exists(os.path.join(cache, "config.toml")):
        continue
    try:
        removing += bool(dsreg.gc(registry=cache).removed)
        runs += 1
    except DsregError as e:
        sys.stderr.write(f"gc failed: {e}\\n")
print(runs, removing)
"""

READS = 6


@pytest.fixture
def gc_loop(
    machine: Machine, tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]
) -> Iterator[Callable[[], tuple[int, int]]]:
    """A process running ``dsreg.gc`` on the cache over and over; calling the fixture's value
    stops it and returns ``(gc runs, runs that removed something)``."""
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", _GC_LOOP, str(machine.cache), str(stop)],
        env=dsreg_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def finish() -> tuple[int, int]:
        stop.touch()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "gc failed" not in err, err
        runs, removing = out.split()
        return int(runs), int(removing)

    try:
        yield finish
    finally:
        stop.touch()
        if proc.poll() is None:
            proc.wait(timeout=120)


@pytest.mark.slow
def test_reads_with_a_gc_looping_on_the_cache_all_succeed(
    published: Published,
    machine: Machine,
    gc_loop: Callable[[], tuple[int, int]],
    dsreg_env: Callable[..., dict[str, str]],
) -> None:
    """``dsreg checkout``, ``sql`` and ``show`` with --remote, each run ``READS`` times as a
    user runs them (a process each, no registry), while another process collects the cache in
    a loop: every read succeeds with the remote's bytes, and gc did empty the cache between
    them (the race was there to lose)."""
    env = dsreg_env(HOME=str(machine.cache.parent / "home"), DSREG_CACHE=str(machine.cache))
    failures: list[str] = []
    deadline = time.monotonic() + 600
    for i in range(READS):
        for command in ("checkout", "sql", "show"):
            out = f"out{i}"
            args = {
                "checkout": ["checkout", "pets@v1", out],
                "sql": ["sql", QUERY, "--format", "csv"],
                "show": ["show", "pets@v1", "--json"],
            }[command]
            proc = subprocess.run(
                [sys.executable, "-c", MAIN, *args, "--remote", str(published.remote)],
                cwd=machine.work,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            ran = Ran(code=proc.returncode, out=proc.stdout, err=proc.stderr)
            try:
                _served_right(command, ran, published, machine.work, out)
            except AssertionError:
                failures.append(f"{command} #{i}: exit {proc.returncode}: {proc.stderr.strip()}")
            assert time.monotonic() < deadline
    runs, removing = gc_loop()
    assert not failures, f"{len(failures)} of {3 * READS} reads failed:\n" + "\n".join(failures)
    assert removing >= READS, f"gc emptied the cache only {removing} times in {runs} runs"
