"""``import-dvc``: a DVC project made by the test (git init, dvc init, dvc add, two commits),
imported at both revisions through DVC itself: provenance recorded, digests differ only where
the data did, re-imports are the same snapshot, checkout lays the tree out by class."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import InputPathError, Registry, RemoteError, TagExistsError

PIN = ".dsreg.json"  # the pin file a checkout writes

V1 = {
    "cat/a.bin": b"cat a " * 40,
    "cat/b.bin": b"cat b " * 50,
    "dog/a.bin": b"dog a " * 60,
    "dog/b.bin": b"dog b " * 70,
}
V2_CHANGES = {"dog/b.bin": b"dog b, re-shot " * 30, "cat/c.bin": b"a new cat " * 20}


@pytest.fixture(scope="module", autouse=True)
def _dvc_isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """DVC's site cache and config folders inside the test's temporary folder, not the user's."""
    mp = pytest.MonkeyPatch()
    for var in ("DVC_SITE_CACHE_DIR", "DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR"):
        mp.setenv(var, str(tmp_path_factory.mktemp(var.lower())))
    yield
    mp.undo()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        DVC_NO_ANALYTICS="1",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def _run(cwd: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "dvc", *args[1:]] if args[0] == "dvc" else list(args)
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip()


def _write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


@pytest.fixture(scope="module")
def dvc_project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | Path]:
    """A git + DVC project: data/val (ImageFolder) and labels.csv tracked by DVC, README by git;
    tag v1, then a commit that changes one file and adds another (tag v2)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the DVC import tests build a git repository")
    repo = tmp_path_factory.mktemp("dvc-project")
    _run(repo, "git", "init", "-q")
    _run(repo, "git", "config", "user.name", "dsreg tests")
    _run(repo, "git", "config", "user.email", "tests@dsreg.invalid")
    _run(repo, "git", "config", "commit.gpgsign", "false")
    _run(repo, "dvc", "init", "-q")
    _run(repo, "dvc", "config", "core.analytics", "false")
    _write(repo / "data" / "val", V1)
    (repo / "labels.csv").write_text("label\ncat\ndog\ncat\n")
    (repo / "README.md").write_text("a data registry\n")
    _run(repo, "dvc", "add", "-q", "data/val", "labels.csv")
    _run(repo, "git", "add", "-A")
    _run(repo, "git", "commit", "-q", "-m", "v1")
    _run(repo, "git", "tag", "v1")
    v1 = _run(repo, "git", "rev-parse", "HEAD")
    md5_v1 = _dir_md5(repo)
    _write(repo / "data" / "val", V2_CHANGES)
    _run(repo, "dvc", "add", "-q", "data/val")
    _run(repo, "git", "add", "-A")
    _run(repo, "git", "commit", "-q", "-m", "v2: re-shot dog b, a new cat")
    _run(repo, "git", "tag", "v2")
    v2 = _run(repo, "git", "rev-parse", "HEAD")
    return {"repo": repo, "v1": v1, "v2": v2, "md5_v1": md5_v1, "md5_v2": _dir_md5(repo)}


def _dir_md5(repo: Path) -> str:
    for line in (repo / "data" / "val.dvc").read_text().splitlines():
        if line.strip().startswith("- md5:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no md5 in data/val.dvc")


def _blobs(reg: Registry, snapshot: str) -> dict[str, str]:
    t = dsreg.open(snapshot, registry=reg).labels()  # a snapshot's original revision
    return dict(zip(t.column("example_id").to_pylist(), t.column("blob").to_pylist(), strict=True))


def test_import_at_two_revisions_records_provenance_and_differs_only_where_data_did(
    dvc_project: dict[str, str | Path], make_registry: Callable[..., Registry]
) -> None:
    reg = make_registry()
    repo = dvc_project["repo"]
    one = dsreg.import_dvc(str(repo), "data/val", dataset="pets", rev="v1", tag="v1", registry=reg)
    two = dsreg.import_dvc(str(repo), "data/val", dataset="pets", rev="v2", tag="v2", registry=reg)

    for res, rev in ((one, "v1"), (two, "v2")):
        source = dsreg.open(res.add.revision, registry=reg).snapshot.source
        assert source == {
            "kind": "dvc",
            "layout": "imagefolder",
            "repo": str(Path(repo).resolve()),
            "rev": rev,
            "commit": dvc_project[rev],
            "path": "data/val",
            "md5": dvc_project[f"md5_{rev}"],
        }
    assert dsreg.open(one.add.revision, registry=reg).classes == ("cat", "dog")
    first, second = _blobs(reg, one.add.snapshot), _blobs(reg, two.add.snapshot)
    assert sorted(first) == sorted(V1)
    assert sorted(second) == sorted({**V1, **V2_CHANGES})
    same = {k for k in first if first[k] == second.get(k)}
    assert same == set(V1) - set(V2_CHANGES)  # only the re-shot file's digest moved
    assert one.add.snapshot != two.add.snapshot


def test_reimporting_the_same_revision_is_the_same_snapshot(
    dvc_project: dict[str, str | Path], make_registry: Callable[..., Registry]
) -> None:
    repo = str(dvc_project["repo"])
    a = dsreg.import_dvc(repo, "data/val", dataset="pets", rev="v1", registry=make_registry("a"))
    reg = make_registry("b")
    b = dsreg.import_dvc(
        repo, "./data/val/", dataset="pets", rev="v1", tag="original", registry=reg
    )
    again = dsreg.import_dvc(
        repo, "data/val", dataset="pets", rev="v1", tag="original", registry=reg
    )
    assert a.add.snapshot == b.add.snapshot == again.add.snapshot
    assert a.add.revision == again.add.revision
    with pytest.raises(TagExistsError):
        dsreg.import_dvc(repo, "data/val", dataset="pets", rev="v2", tag="original", registry=reg)


def test_an_imported_tree_checks_out_by_class_byte_identical(
    dvc_project: dict[str, str | Path], make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    reg = make_registry()
    dsreg.import_dvc(
        str(dvc_project["repo"]), "data/val", dataset="pets", rev="v2", tag="v2", registry=reg
    )
    res = dsreg.checkout("pets@v2", tmp_path / "out", link="copy", registry=reg)
    got = {
        p.relative_to(tmp_path / "out").as_posix(): p.read_bytes()
        for p in (tmp_path / "out").rglob("*")
        if p.is_file() and p.name != PIN
    }
    assert got == {**V1, **V2_CHANGES}
    assert res.files == len(got)


def test_a_dvc_tracked_label_file_imports_as_a_label_only_set(
    dvc_project: dict[str, str | Path], make_registry: Callable[..., Registry]
) -> None:
    reg = make_registry()
    res = dsreg.import_dvc(
        str(dvc_project["repo"]), "labels.csv", dataset="votes", rev="v1", registry=reg
    )
    snap = dsreg.open(res.add.revision, registry=reg).snapshot
    assert snap.rows == 3 and snap.classes == ("cat", "dog")
    assert snap.source["kind"] == "dvc" and snap.source["layout"] == "labels"
    assert snap.source["commit"] == dvc_project["v1"]


@pytest.mark.parametrize(
    ("path", "rev", "error", "match"),
    [
        ("README.md", "v1", InputPathError, "not tracked by DVC"),
        ("data/nope", "v1", InputPathError, "does not exist"),
        ("../outside", "v1", InputPathError, "not a path inside"),
        ("data/val", "no-such-rev", RemoteError, "no-such-rev"),
    ],
)
def test_bad_imports_are_clear_errors_and_write_nothing(
    dvc_project: dict[str, str | Path],
    make_registry: Callable[..., Registry],
    path: str,
    rev: str,
    error: type[Exception],
    match: str,
) -> None:
    reg = make_registry()
    with pytest.raises(error, match=match):
        dsreg.import_dvc(
            str(dvc_project["repo"]), path, dataset="pets", rev=rev, tag="v1", registry=reg
        )
    tags = dsreg.ls(registry=reg)
    assert tags is not None and list(tags) == []
    assert not any((reg.root / "tmp").iterdir())


def test_a_folder_that_is_no_repository_is_a_clear_error(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(RemoteError, match="cannot open DVC repository"):
        dsreg.import_dvc(str(tmp_path / "plain"), "data", dataset="pets", registry=make_registry())
    with pytest.raises(InputPathError, match="does not exist"):
        dsreg.import_dvc(
            str(tmp_path / "absent"), "data", dataset="pets", registry=make_registry("b")
        )


def test_import_dvc_classes_names_a_label_files_classes_in_order(
    dvc_project: dict[str, str | Path], cli: Callable[..., Any], tmp_path: Path
) -> None:
    repo = str(dvc_project["repo"])
    assert cli("init").exit_code == 0
    # The order given, not the sorted names: dog is class 0.
    (tmp_path / "classes.txt").write_text("dog\ncat\nbird\n")
    r = cli("import-dvc", repo, "labels.csv", "--as", "votes", "--rev", "v1",
            "--classes", "classes.txt", "--tag", "v1")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "3 examples, 3 classes" in r.stderr
    ds = dsreg.open("votes@v1", registry=tmp_path / ".dsreg")
    assert ds.classes == ("dog", "cat", "bird")
    assert ds.labels().column("label").to_pylist() == [1, 0, 1]  # cat, dog, cat
    # A label the file does not name, and a folder (which names its classes), are refused.
    (tmp_path / "few.txt").write_text("dog\n")
    r = cli("import-dvc", repo, "labels.csv", "--as", "few", "--rev", "v1", "--classes", "few.txt")
    assert r.exit_code == 1 and r.stderr.startswith("Error: ") and "cat" in r.stderr
    r = cli("import-dvc", repo, "data/val", "--as", "pets", "--rev", "v1",
            "--classes", "classes.txt")  # fmt: skip
    assert r.exit_code == 1
    assert "is a folder: its class folders name the classes" in r.stderr
    assert dsreg.ls(registry=tmp_path / ".dsreg") is not None
    assert sorted(t.dataset for t in dsreg.ls(registry=tmp_path / ".dsreg")) == ["votes"]
