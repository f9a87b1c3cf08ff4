"""Shared fixtures: factories for registries, source trees and CLI runs; registry snapshots,
deterministic trees, dsreg subprocesses, damaged objects."""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg import Registry
from dsreg.formats.manifests import Revision, View
from dsreg.registry.reader import LocalReader

SHARED_DATA = Path(
    os.environ.get(
        "DSREG_SHARED_DATA",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "label-errors",
    )
)


@pytest.fixture
def shared_data() -> Path:
    """The label-errors release files; tests using it skip when ../shared is absent."""
    if not (SHARED_DATA / "cifar10_test_set_pyx.npy").is_file():
        pytest.skip(f"label-errors data not found at {SHARED_DATA} (set DSREG_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture
def make_registry(tmp_path: Path) -> Callable[..., Registry]:
    """``make_registry(name="reg")`` -> a fresh registry under tmp_path."""

    def make(name: str = "reg") -> Registry:
        return dsreg.init(registry=tmp_path / name)

    return make


@pytest.fixture
def make_imagefolder(tmp_path: Path) -> Callable[..., Path]:
    """``make_imagefolder(name, classes=3, per_class=4, seed=0)`` -> an ImageFolder tree of
    small random files (payload bytes differ per file)."""

    def make(
        name: str = "tree", *, classes: int | list[str] = 3, per_class: int = 4, seed: int = 0
    ) -> Path:
        rng = np.random.default_rng(seed)
        root = tmp_path / name
        names = classes if isinstance(classes, list) else [f"class{i}" for i in range(classes)]
        for c in names:
            (root / c).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                (root / c / f"img{i:03d}.bin").write_bytes(rng.bytes(int(rng.integers(50, 400))))
        return root

    return make


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., CliResult]]:
    """``cli("add", "ds", str(tree), "--tag", "v1")`` runs ``dsreg`` in-process, in tmp_path."""
    from dsreg.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSREG_HOME", raising=False)
    monkeypatch.delenv("DSREG_REGISTRY", raising=False)

    def run(*args: str) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        monkeypatch.setattr(sys, "argv", ["dsreg", *args])
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = int(e.code or 0)
        return CliResult(exit_code=code, stdout=out.getvalue(), stderr=err.getvalue())

    yield run


# -- registry snapshots, deterministic trees, dsreg subprocesses ---------------------------------

REPO = Path(dsreg.__file__).resolve().parents[1]
# ``python -c`` with this runs the dsreg command line in a fresh process (as a user's shell would).
DSREG_MAIN = "import sys; from dsreg.cli import main; main(sys.argv[1:])"


def _registry_state(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under ``root`` with its kind, mode and content hash: equal before and after
    means nothing was written, removed or changed."""
    out: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            p = Path(dirpath, d)
            out[p.relative_to(root).as_posix()] = ("dir", p.stat().st_mode, "")
        for f in files:
            p = Path(dirpath, f)
            st = p.lstat()
            out[p.relative_to(root).as_posix()] = (
                "file",
                st.st_mode,
                hashlib.sha256(p.read_bytes()).hexdigest(),
            )
    return out


def golden_bytes(key: str, n: int) -> bytes:
    """``n`` bytes fixed forever by ``key`` (SHA-256 in counter mode), the same on every machine
    and every version: golden trees never depend on a random generator."""
    out = b""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{key}#{i}".encode()).digest()
        i += 1
    return out[:n]


GOLDEN_TREE = {
    "cat/0.bin": 37,
    "cat/1.bin": 300,
    "dog/a.jpg": 1,
    "dog/b.jpg": 64,
    "dog/nested/c.jpg": 129,
    "zebra/ünïcödé €.bin": 1000,
}


def _write_golden_tree(root: Path) -> Path:
    """A tiny ImageFolder tree whose bytes are fixed forever (see ``golden_bytes``)."""
    for rel, size in GOLDEN_TREE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(golden_bytes(rel, size))
    return root


@pytest.fixture
def add_tree() -> Callable[..., dsreg.AddResult]:
    """``add_tree(reg, "ds", tree, tag="original")`` -> ``dsreg.add`` of an ImageFolder tree."""

    def add(
        reg: Registry, dataset: str, tree: Path, *, tag: str | None = "original"
    ) -> dsreg.AddResult:
        return dsreg.add(dataset, tree, tag=tag, registry=reg)

    return add


def _dsreg_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _run_dsreg(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dsreg ARGS`` in a fresh Python process."""
    return subprocess.run(
        [sys.executable, "-c", DSREG_MAIN, *args],
        cwd=cwd,
        env=_dsreg_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _colliding(n: int, key: Callable[[int], str]) -> tuple[int, int]:
    """Two counters whose ``key`` digests share their first ``n`` hex characters (found by
    brute force: about 5,000 tries for 6 characters, the birthday bound)."""
    seen: dict[str, int] = {}
    for i in itertools.count():
        p = key(i)[7 : 7 + n]
        if p in seen:
            return seen[p], i
        seen[p] = i
    raise AssertionError  # pragma: no cover


@pytest.fixture(scope="session")
def colliding() -> Callable[[int, Callable[[int], str]], tuple[int, int]]:
    """``colliding(n, key)``: two counters whose ``key`` digests share ``n`` hex characters."""
    return _colliding


@pytest.fixture
def registry_state() -> Callable[[Path], dict[str, tuple[str, int, str]]]:
    """``registry_state(root)``: every path under root with kind, mode, content hash."""
    return _registry_state


@pytest.fixture
def golden_tree() -> Callable[[Path], Path]:
    """``golden_tree(root)``: write the fixed tiny ImageFolder tree at root."""
    return _write_golden_tree


@pytest.fixture
def run_dsreg() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_dsreg(*args, cwd=...)``: ``dsreg ARGS`` in a fresh Python process."""
    return _run_dsreg


@pytest.fixture(name="dsreg_env")
def dsreg_env_fixture() -> Callable[..., dict[str, str]]:
    """``dsreg_env()``: the environment of a dsreg subprocess (this dsreg, no DSREG_* vars)."""
    return _dsreg_env


def _flip_byte(reg: Registry, digest: str, at: int | None = None) -> None:
    """Flip one bit of a stored object, as a failing disk would (objects are read-only)."""
    p = reg.store.path(digest)
    os.chmod(p, 0o644)
    data = bytearray(p.read_bytes())
    i = len(data) // 2 if at is None else at
    data[i] ^= 0x01
    p.write_bytes(bytes(data))
    os.chmod(p, 0o444)


@pytest.fixture
def flip_byte() -> Callable[..., None]:
    """``flip_byte(reg, digest, at=None)``: flip one bit of a stored object (the middle byte's,
    or byte ``at``'s)."""
    return _flip_byte


def stored_view(reg: Registry, spec: str, view: View) -> Revision:
    """The revision ``spec`` in another ``view``, stored and left untagged (what only a log
    line, or nothing, keeps from gc)."""
    base = LocalReader(reg).revision(spec).revision
    rev = Revision(snapshot=base.snapshot, overlays=base.overlays, view=view)
    with reg.lock():
        reg.store_revision(rev)
    return rev
