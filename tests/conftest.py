"""Shared fixtures: factories for registries, source trees and CLI runs."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dsreg.repo.registry import Registry

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
        return Registry.init(tmp_path / name)

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
