"""A push with nothing new: it sends nothing, asks the remote about no object, changes nothing on
the remote, and (to a plain folder) needs neither DVC nor the data libraries; a push after a new
add still sends exactly the new objects. A plain folder is reached through the ``os`` module,
with the same answers as DVC's local file system."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import AddResult, Registry, RemoteError
from dsreg.ops.maintenance import reachable
from dsreg.registry.reader import LocalReader
from dsreg.remote import transfer
from dsreg.remote.filesystem import FolderFS
from dsreg.remote.store import RemoteStore

# Modules a no-op push to a plain folder must not load.
HEAVY = ("dvc", "dvc_objects", "dvc_data", "fsspec", "numpy", "pyarrow", "duckdb", "pandas")

_CHECK_IMPORTS = """
import json, sys
from dsreg.cli import main
main(sys.argv[1:])
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.stdin.read())))
sys.stderr.write("HEAVY " + json.dumps(heavy) + "\\n")
"""


def remote_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under a remote: mode, mtime (ns) and content hash of files."""
    out: dict[str, tuple[int, int, str]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        out[p.relative_to(root).as_posix()] = (st.st_mode, st.st_mtime_ns, digest)
    return out


def blobs_of(reg: Registry, spec: str) -> set[str]:
    everything, problems = reachable(reg, [LocalReader(reg).revision(spec).digest])
    assert not problems
    return everything


@pytest.fixture
def pushed(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    tmp_path: Path,
) -> tuple[Registry, Path, Path]:
    """A registry holding pets@v1, pushed once to its local-directory remote 'origin'."""
    reg = make_registry("a")
    tree = make_imagefolder("pets", classes=["cat", "dog", "fox"], per_class=5)
    add_tree(reg, "pets", tree, tag="v1")
    remote = tmp_path / "remote"
    dsreg.remote_add("origin", str(remote), default=True, registry=reg)
    first = dsreg.push(registry=reg)
    assert first.sent == len(blobs_of(reg, "pets@v1"))
    return reg, tree, remote


def test_a_push_with_nothing_new_sends_nothing_asks_nothing_and_changes_nothing(
    pushed: tuple[Registry, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    reg, _tree, remote = pushed
    before = remote_state(remote)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a push with nothing new did per-object work")

    # The remote's tags certify what they reach: no walk of the revision, no existence query,
    # no transfer.
    monkeypatch.setattr(transfer, "reachable", forbidden)
    monkeypatch.setattr(transfer, "present", forbidden)
    monkeypatch.setattr(transfer, "send", forbidden)
    for specs in ((), ("pets",), ("pets@v1",)):
        again = dsreg.push(specs, registry=reg)
        assert (again.sent, again.bytes, again.already) == (0, 0, 0)
        assert [(r.tag, r.status) for r in again.refs] == [("v1", "unchanged")]
    assert remote_state(remote) == before


def test_a_push_after_a_new_add_sends_exactly_the_new_objects(
    pushed: tuple[Registry, Path, Path], add_tree: Callable[..., AddResult]
) -> None:
    reg, tree, remote = pushed
    (tree / "cat" / "img000.bin").write_bytes(b"a new photo of a cat")
    (tree / "fox" / "img099.bin").write_bytes(b"a new photo of a fox")
    add_tree(reg, "pets", tree, tag="v2")
    new = blobs_of(reg, "pets@v2") - blobs_of(reg, "pets@v1")
    assert len(new) == 5  # two files, the examples table, the snapshot and the revision
    res = dsreg.push(registry=reg)
    assert res.sent == len(new)
    assert {(r.tag, r.status) for r in res.refs} == {("v1", "unchanged"), ("v2", "created")}
    for d in blobs_of(reg, "pets@v2"):
        h = d.split(":", 1)[1]
        assert (remote / "files" / "blake3" / h[:2] / h[2:]).is_file()
    v2 = dsreg.open("pets@v2", registry=reg).digest
    assert (remote / "refs" / "pets" / "v2").read_text().strip() == v2
    again = dsreg.push(registry=reg)
    assert again.sent == 0 and {r.status for r in again.refs} == {"unchanged"}


def test_a_no_op_push_to_a_folder_loads_neither_dvc_nor_the_data_libraries(
    pushed: tuple[Registry, Path, Path], dsreg_env: Callable[..., dict[str, str]]
) -> None:
    reg, _tree, remote = pushed
    before = remote_state(remote)
    for args in (["push"], ["push", "-r", str(remote), "pets@v1"]):
        proc = subprocess.run(
            [sys.executable, "-c", _CHECK_IMPORTS, *args, "--registry", str(reg.root)],
            input=json.dumps(HEAVY),
            env=dsreg_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith("unchanged")
        assert "HEAVY []" in proc.stderr, proc.stderr
    assert remote_state(remote) == before


def _messy_remote(root: Path, digest: str) -> None:
    """Tags, and what a listing of refs/ must skip: hidden and badly named files, files at the
    wrong depth, a folder where a tag would be."""
    for rel in ("refs/pets/v1", "refs/pets/v2", "refs/cars/v1"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(digest + "\n")
    for rel in ("refs/pets/.v3.tmp", "refs/Bad Name/v1", "refs/deep/a/b", "refs/stray"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(digest + "\n")
    (root / "refs" / "pets" / "folder").mkdir()
    (root / "logs").mkdir()
    (root / "logs" / "pets.jsonl").write_text('{"a": 1}\n')


def test_a_folder_is_read_as_dvcs_local_file_system_reads_it(tmp_path: Path) -> None:
    digest = "blake3:" + "ab" * 32
    root = tmp_path / "remote"
    _messy_remote(root, digest)
    plain = RemoteStore(name="r", url=str(root), options={})
    # With a DVC option the folder is opened by dvc.fs.get_cloud_fs, as before.
    viadvc = RemoteStore(name="r", url=str(root), options={"verify": False})
    assert isinstance(plain.fs, FolderFS) and not isinstance(viadvc.fs, FolderFS)
    assert plain.local and viadvc.local
    tags = {("pets", "v1"): digest, ("pets", "v2"): digest, ("cars", "v1"): digest}
    assert plain.refs() == viadvc.refs() == tags
    assert plain.get_ref("pets", "v1") == viadvc.get_ref("pets", "v1") == digest
    for ds, tag in (("pets", "v9"), ("pets", "folder"), ("none", "v1")):
        assert plain.get_ref(ds, tag) is None and viadvc.get_ref(ds, tag) is None
    assert plain.log_bytes("pets") == viadvc.log_bytes("pets") == b'{"a": 1}\n'
    assert plain.log_bytes("cars") == viadvc.log_bytes("cars") == b""
    base = str(root / "refs")
    assert sorted(plain.fs.find(base)) == sorted(viadvc.fs.find(base))
    for p in plain.fs.find(base):
        assert plain.fs.relparts(p, base) == viadvc.fs.relparts(p, base)
        assert plain.fs.parts(p) == viadvc.fs.parts(p)
    paths = [*sorted(plain.fs.find(base)), str(root / "refs" / "pets" / "folder"), base + "/no"]
    assert plain.fs.cat(paths, on_error="omit") == viadvc.fs.cat(paths, on_error="omit")

    (root / "refs" / "pets" / "v2").write_text("not a digest\n")
    for rs in (plain, viadvc):
        with pytest.raises(RemoteError, match=r"pets@v2.*damaged"):
            rs.refs()

    # A missing folder, or one below a regular file, holds no tags.
    (tmp_path / "a-file").write_text("not a folder")
    for where in (tmp_path / "nowhere", tmp_path / "a-file" / "remote"):
        for opts in ({}, {"verify": False}):
            assert RemoteStore(name="r", url=str(where), options=opts).refs() == {}
