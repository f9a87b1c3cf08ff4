"""The base install and its extras: ``import dsreg`` needs none of them, and each command,
option or method that needs one fails without it in one line naming the install command, exit
status 1, nothing written. A missing extra is simulated in this (full) environment by blocking
its modules in a fresh process (``sys.modules[name] = None``, which Python's import and
``importlib.util.find_spec`` both read as not installed); ``test_wheel.py`` meets the real one.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg._util.extras import EXTRAS

REPO = Path(__file__).resolve().parents[2]
# Every module an extra brings, and the DVC family behind the dvc and s3 extras.
EXTRA_MODULES = sorted({m for ms in EXTRAS.values() for m in ms} | {"dvc_data", "dvc_objects"})

_BLOCKED_MAIN = """
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None
from dsreg.cli import main
main(sys.argv[2:])
"""


def dsreg_without(
    blocked: list[str], *args: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``dsreg ARGS`` in a fresh process where the modules ``blocked`` cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_MAIN, json.dumps(blocked), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_extras_table_is_pyprojects() -> None:
    """Each extra dsreg refuses commands by is one of pyproject.toml's, and the bundles
    (``all``, ``demo``) name extras that exist."""
    optional = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS) == set(optional) - {"all", "demo", "dev"}
    everything = optional["all"][0]
    assert everything == f"dsreg[{','.join(EXTRAS)}]"


def test_import_dsreg_imports_no_extra_and_every_name_resolves_without_them() -> None:
    code = (
        "import json, sys\n"
        "import dsreg\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        f"found = sorted(loaded & set({EXTRA_MODULES!r}))\n"
        f"for name in {EXTRA_MODULES!r}:\n"
        "    if name not in loaded:\n"
        "        sys.modules[name] = None\n"
        "names = [getattr(dsreg, n) for n in dsreg.__all__]\n"
        "print(json.dumps([found, len(names)]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    found, names = json.loads(proc.stdout)
    assert found == []
    assert names == len(dsreg.__all__)


@pytest.fixture
def labelled(
    tmp_path: Path,
    dsreg_env: Callable[..., dict[str, str]],
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """A registry holding ``toy@v1`` (a label-only set of 12 rows) and a model's predictions
    ``preds.npy``; calling it runs ``dsreg ARGS`` with the modules of an extra blocked and
    checks that the refusal wrote nothing."""
    labels = tmp_path / "labels.csv"
    labels.write_text("label\n" + "cat\ndog\nfox\n" * 4)
    np.save(tmp_path / "preds.npy", np.array([0, 1, 2] * 4, dtype=np.int64))
    dsreg.add("toy", labels=labels, tag="v1", registry=dsreg.init(registry=tmp_path / ".dsreg"))
    env = dsreg_env()

    def run(extra: str, *args: str) -> subprocess.CompletedProcess[str]:
        before = registry_state(tmp_path)
        proc = dsreg_without(list(EXTRAS[extra]), *args, cwd=tmp_path, env=env)
        assert registry_state(tmp_path) == before, args
        return proc

    return run


# One command or option of each extra, as a user types it, and the extra it names.
REFUSED = [
    ("review", ["review", "toy@v1"], "dsreg review"),
    ("audit", ["audit", "duplicates", "toy@v1", "--within"], "dsreg audit duplicates"),
    ("plot", ["eval", "toy@v1", "preds.npy", "--plot", "ranks.png", "--record"], "--plot"),
    ("dvc", ["import-dvc", "https://x.org/r.git", "data", "--as", "toy2"], "dsreg import-dvc"),
    ("dvc", ["remote", "add", "cloud", "gs://bucket/reg"], "remote 'gs://bucket/reg'"),
    ("s3", ["remote", "add", "cloud", "s3://bucket/reg"], "remote 's3://bucket/reg'"),
    ("s3", ["push", "-r", "s3://bucket/reg"], "remote 's3://bucket/reg'"),
    (
        "ray",
        ["audit", "duplicates", "toy@v1", "--within", "--engine", "ray"],
        "dsreg audit duplicates --engine ray",
    ),
]


@pytest.mark.parametrize(("extra", "args", "what"), REFUSED, ids=[" ".join(r[1]) for r in REFUSED])
def test_a_command_without_its_extra_names_the_install_command(
    labelled: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    extra: str,
    args: list[str],
    what: str,
) -> None:
    proc = labelled(extra, *args)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == f"Error: {what} needs: pip install 'dsreg[{extra}]'\n"
    assert proc.stdout == ""
    assert not (tmp_path / "ranks.png").exists()


# The refusals of REFUSED, from Python: each names the function or argument the caller used,
# never a command the caller did not type.
API_REFUSED: list[tuple[str, Callable[[], object], str]] = [
    ("review", lambda: dsreg.review("toy@v1"), "dsreg.review"),
    ("audit", lambda: dsreg.audit_duplicates("toy@v1", within=True), "dsreg.audit_duplicates"),
    (
        "ray",
        lambda: dsreg.audit_duplicates("toy@v1", within=True, engine="ray"),
        "dsreg.audit_duplicates(engine='ray')",
    ),
    (
        "plot",
        lambda: dsreg.evaluate("toy@v1", ["preds.npy"], plot="ranks.png", record=True),
        "plot='ranks.png'",
    ),
    (
        "dvc",
        lambda: dsreg.import_dvc("https://x.org/r.git", "data", dataset="toy2"),
        "dsreg.import_dvc",
    ),
]


@pytest.mark.parametrize(("extra", "call", "what"), API_REFUSED, ids=[r[2] for r in API_REFUSED])
def test_a_library_call_without_its_extra_names_the_call(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
    extra: str,
    call: Callable[[], object],
    what: str,
) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("label\n" + "cat\ndog\nfox\n" * 4)
    np.save(tmp_path / "preds.npy", np.array([0, 1, 2] * 4, dtype=np.int64))
    dsreg.add("toy", labels=labels, tag="v1", registry=dsreg.init(registry=tmp_path / ".dsreg"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSREG_REGISTRY", raising=False)
    monkeypatch.delenv("DSREG_HOME", raising=False)
    before = registry_state(tmp_path)
    for module in EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(dsreg.MissingExtraError) as caught:
        call()
    assert str(caught.value) == f"{what} needs: pip install 'dsreg[{extra}]'"
    assert registry_state(tmp_path) == before


@pytest.mark.parametrize(
    ("extra", "method"),
    [("torch", "to_torch"), ("hf", "to_hf"), ("pandas", "to_pandas"), ("polars", "to_polars")],
)
def test_a_loader_without_its_extra_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str, method: str
) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("label\ncat\ndog\n")
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    dsreg.add("toy", labels=labels, tag="v1", registry=reg)
    ds = dsreg.open("toy@v1", registry=reg)
    for module in EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(dsreg.MissingExtraError) as caught:
        getattr(ds, method)()
    assert str(caught.value) == f"Dataset.{method} needs: pip install 'dsreg[{extra}]'"
    assert caught.value.extra == extra
    assert isinstance(caught.value, ImportError)


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[Callable[[Path], str]]:
    """``serve(folder)``: its URL on a static web server on loopback."""
    servers: list[http.server.ThreadingHTTPServer] = []

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    def serve(folder: Path) -> str:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=folder))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield serve
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_folder_and_web_remotes_need_no_extra(
    labelled: Callable[..., subprocess.CompletedProcess[str]],
    web_server: Callable[[Path], str],
    tmp_path: Path,
    dsreg_env: Callable[..., dict[str, str]],
) -> None:
    """A push to a folder, and a clone, a pull and a show of that folder served by a web
    server, with DVC and every other extra blocked."""
    env = dsreg_env()
    blocked = [*EXTRA_MODULES, "dvc_http"]
    pushed = dsreg_without(blocked, "push", "-r", str(tmp_path / "shared"), cwd=tmp_path, env=env)
    assert pushed.returncode == 0, pushed.stderr
    url = web_server(tmp_path / "shared")
    clone = tmp_path / "clone"
    for args in (
        ["clone", url, str(clone / ".dsreg")],
        ["pull", "toy@v1", "--registry", str(clone / ".dsreg")],
        ["show", "toy@v1", "--remote", url, "--json"],
    ):
        proc = dsreg_without(blocked, *args, cwd=tmp_path, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
    assert json.loads(proc.stdout)["rows"] == 12
    mine = dsreg.open("toy@v1", registry=clone / ".dsreg")
    assert mine.digest == dsreg.open("toy@v1", registry=tmp_path / ".dsreg").digest
