"""A release a user can install: ``python -m build`` makes an sdist and a wheel of this checkout
(the wheel built from the sdist, so the sdist is complete), ``twine check`` passes them, and the
wheel, installed offline into a new virtual environment from a folder of wheels, runs as a user
runs it: ``dsreg --version``, an add, an eval and a show, a clone from a web server, and a
command whose extra is not installed refused in one line.

The dependencies' wheels are downloaded once into a cache keyed by the wheel's requirements
(``$DSREG_TEST_WHEELS``, default ``~/.cache/dsreg-tests/wheels``), and installed once into a new
environment kept beside them; each session builds the package and installs it there (pip
resolving its requirements from the wheel folder alone), so a later run downloads and unpacks
nothing but dsreg. Without the build tools of the dev extra,
or with no cache and no package index, the tests skip, saying why.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import threading
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from dsreg._version import __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What `pip install` of the wheel may resolve to, dsreg included.
MAX_PACKAGES = 40


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


def _run(*cmd: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs
    )  # type: ignore[call-overload,no-any-return]


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    for tool in ("build", "hatchling", "twine"):
        pytest.importorskip(tool, reason=f"{tool} (the dev extra) builds and checks the release")
    out = tmp_path_factory.mktemp("dist")
    # No build environment to download: the dev stack's hatchling builds it.
    proc = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = out.glob("dsreg-*.tar.gz")
    (wheel,) = out.glob("dsreg-*.whl")
    return Dist(sdist=sdist, wheel=wheel)


def _metadata(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(z.read(name).decode())
    return {key: message.get_all(key) or [] for key in set(message.keys())}


def _base_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist without those of its extras."""
    return sorted(r for r in _metadata(wheel)["Requires-Dist"] if "extra ==" not in r)


@pytest.fixture(scope="session")
def wheelhouse(dist: Dist) -> Path:
    """A folder of wheels of every base dependency, for this Python and platform."""
    requirements = _base_requirements(dist.wheel)
    key = hashlib.sha256(
        "\n".join([*requirements, sys.version, sys.base_prefix, platform.machine()]).encode()
    ).hexdigest()[:16]
    root = Path(os.environ.get("DSREG_TEST_WHEELS", Path.home() / ".cache/dsreg-tests/wheels"))
    folder = root / key
    if not (folder / ".complete").exists():
        proc = _run(sys.executable, "-m", "pip", "wheel", "--wheel-dir", folder, *requirements)
        if proc.returncode != 0:
            pytest.skip(
                f"cannot fetch the dependencies' wheels into {folder}: {proc.stderr[-500:]}"
            )
        (folder / ".complete").write_text("\n".join(requirements) + "\n")
    return folder


@pytest.fixture(scope="session")
def env_bin(dist: Dist, wheelhouse: Path) -> Path:
    """The bin folder of a virtual environment where this build of the wheel is installed
    offline from ``wheelhouse``. The environment is made new for each set of dependencies, and
    kept beside their wheels: a later session takes the previous dsreg out and installs its own
    (pip resolves the wheel's requirements again, from the folder alone)."""
    env = wheelhouse.with_name(f"{wheelhouse.name}-venv")
    bin_ = env / "bin"
    if not (env / ".complete").exists():
        shutil.rmtree(env, ignore_errors=True)
        venv.create(env, with_pip=True)
    else:
        proc = _run(bin_ / "python", "-m", "pip", "uninstall", "--yes", "dsreg")
        assert proc.returncode == 0, proc.stderr
    proc = _run(
        bin_ / "python", "-m", "pip", "install", "--no-index", "--find-links", wheelhouse,
        dist.wheel,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (env / ".complete").touch()
    return bin_


def test_twine_passes_the_sdist_and_the_wheel(dist: Dist) -> None:
    proc = _run(sys.executable, "-m", "twine", "check", "--strict", dist.sdist, dist.wheel)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2


def _tracked(folder: str) -> list[str]:
    out = _run("git", "ls-files", folder, cwd=REPO).stdout.split()
    return [p for p in out if (REPO / p).is_file()]


def test_the_wheel_holds_every_file_of_the_package(dist: Dist) -> None:
    """Every file of dsreg/ (modules, the review page's templates and static files), the
    schemas (force-included as dsreg/schemas/), the dsreg script, and one version."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the package's files are listed by git")
    with zipfile.ZipFile(dist.wheel) as z:
        names = set(z.namelist())
        entry = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    expected = set(_tracked("dsreg")) | {f"dsreg/{p}" for p in _tracked("schemas")}
    assert expected - names == set()
    assert {n for n in expected if n.endswith((".html", ".css", ".js", ".json"))}
    assert "dsreg = dsreg.cli:main" in entry
    meta = _metadata(dist.wheel)
    assert meta["Version"] == [__version__]
    assert dist.wheel.name.startswith(f"dsreg-{__version__}-")
    assert set(meta["Provides-Extra"]) >= {"review", "audit", "plot", "dvc", "s3", "all"}


def test_the_sdist_builds_the_wheel_and_holds_the_changelog(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "dsreg/_version.py"} <= names
    assert {f"schemas/{p.name}" for p in (REPO / "schemas").glob("*.json")} <= names
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert f"## {__version__}" in changelog


def test_the_wheel_installs_at_most_forty_packages(env_bin: Path) -> None:
    proc = _run(env_bin / "python", "-m", "pip", "list", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    names = {p["name"].lower() for p in json.loads(proc.stdout)} - {"pip", "setuptools"}
    assert "dsreg" in names
    assert len(names) <= MAX_PACKAGES, sorted(names)
    # None of what an extra brings, nor typer.
    assert not names & {"dvc", "dvc-data", "numba", "matplotlib", "starlette", "pillow", "typer"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``tmp_path/shared`` on a static web server on loopback: its URL."""
    (tmp_path / "shared").mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = partial(Quiet, directory=tmp_path / "shared")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_the_installed_wheel_adds_evaluates_shows_and_reads_the_web(
    env_bin: Path, tmp_path: Path, served: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSREG_", "PYTHON"))}

    def dsreg(*args: str | Path) -> str:
        proc = _run(env_bin / "dsreg", *args, cwd=tmp_path, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    assert dsreg("--version") == f"dsreg {__version__}\n"
    for label in ("cat", "dog"):
        (tmp_path / "tree" / label).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "tree" / label / f"{i}.bin").write_bytes(f"{label} {i}".encode())
    np.save(tmp_path / "model.npy", np.array([0, 0, 1, 1, 1, 1]))
    dsreg("init")
    revision = dsreg("add", "pets", "tree", "--tag", "v1").strip()
    report = json.loads(dsreg("eval", "pets@v1", "model.npy", "--json"))
    (model,) = report["models"]
    assert model["scores"]["original"]["correct"] == {"top1": 5}  # one dog called a cat
    shown = json.loads(dsreg("show", "pets@v1", "--json"))
    assert shown["revision"] == revision and shown["rows"] == 6
    dsreg("push", "-r", tmp_path / "shared")
    dsreg("clone", served, tmp_path / "clone")
    cloned = json.loads(dsreg("show", "pets@v1", "--registry", tmp_path / "clone", "--json"))
    assert cloned["revision"] == revision
    refused = _run(env_bin / "dsreg", "review", "pets@v1", cwd=tmp_path, env=env)
    assert refused.returncode == 1
    assert refused.stderr == "Error: dsreg review needs: pip install 'dsreg[review]'\n"
