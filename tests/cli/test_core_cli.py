"""The registry commands as a user types them: init, add, ls, show, log, tag, checkout, verify,
gc; their --json and -h; bad input refused with exit 1 and nothing written."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry, Revision, Snapshot
from dsreg.formats.canonical import canonical_bytes
from dsreg.objects.digest import short
from dsreg.objects.hashing import hash_bytes
from dsreg.overlays.write import corrections_table, write_overlay

COMMANDS = ["init", "add", "ls", "show", "log", "tag", "checkout", "verify", "gc"]
Cli = Callable[..., Any]


def state(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under ``root`` with its mode and content hash."""
    out = {}
    for p in sorted(root.rglob("*")):
        data = p.read_bytes() if p.is_file() else b""
        out[p.relative_to(root).as_posix()] = (p.lstat().st_mode, hashlib.sha256(data).hexdigest())
    return out


@pytest.fixture
def reg(cli: Cli, tmp_path: Path) -> Registry:
    assert cli("init").exit_code == 0
    return Registry(tmp_path / ".dsreg")


@pytest.fixture
def val(make_imagefolder: Callable[..., Path]) -> Path:
    return make_imagefolder("val", classes=["tench", "goldfish", "shark"], per_class=3)


def _added(cli: Cli, *args: str) -> dict[str, Any]:
    r = cli("add", *args, "--json")
    assert r.exit_code == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


# -- init and finding the registry ----------------------------------------------------------


def test_init_creates_dot_dsreg_here_and_is_idempotent(cli: Cli, tmp_path: Path) -> None:
    r = cli("init")
    assert r.exit_code == 0
    assert r.stdout.strip() == str(tmp_path / ".dsreg")
    assert "Initialised" in r.stderr
    assert (tmp_path / ".dsreg" / "config.toml").is_file()
    before = state(tmp_path / ".dsreg")
    assert cli("init", "--json").exit_code == 0
    assert state(tmp_path / ".dsreg") == before


def test_registry_option_and_dsreg_home(
    cli: Cli, tmp_path: Path, val: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = cli("init", "--registry", "elsewhere", "--json")
    assert json.loads(r.stdout) == {"registry": str(tmp_path / "elsewhere")}
    assert not (tmp_path / ".dsreg").exists()
    r = cli("ls")
    assert r.exit_code == 1 and "no registry" in r.stderr and "dsreg init" in r.stderr
    assert cli("add", "v", str(val), "--tag", "original", "--registry", "elsewhere").exit_code == 0
    monkeypatch.setenv("DSREG_HOME", str(tmp_path / "home"))
    assert cli("init").exit_code == 0
    assert (tmp_path / "home" / "config.toml").is_file()
    assert json.loads(cli("ls", "--json").stdout) == []
    ls = json.loads(cli("ls", "--json", "--registry", "elsewhere").stdout)
    assert [(x["dataset"], x["tag"]) for x in ls] == [("v", "original")]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_json(cli: Cli, command: str) -> None:
    for flag in ("-h", "--help"):
        r = cli(command, flag)
        assert r.exit_code == 0
        assert "--json" in r.stdout and "Usage" in r.stdout


# -- a session ------------------------------------------------------------------------------


def test_add_ls_show_log_session(cli: Cli, reg: Registry, val: Path) -> None:
    r = cli("add", "imagenet-val", str(val), "--tag", "original")
    assert r.exit_code == 0, r.stderr
    rev = r.stdout.strip()
    assert rev.startswith("blake3:") and len(rev) == 71  # data: the full digest only
    assert "Added imagenet-val@original: 9 examples, 3 classes" in r.stderr

    ls = cli("ls")
    assert ls.stdout.splitlines() == [
        "DATASET       TAG       REVISION",
        f"imagenet-val  original  {short(rev)}",
    ]
    assert json.loads(cli("ls", "--json").stdout) == [
        {"dataset": "imagenet-val", "tag": "original", "revision": rev}
    ]

    show = cli("show", "imagenet-val@original")
    assert show.exit_code == 0
    lines = show.stdout.splitlines()
    assert lines[0] == f"revision  {rev}"
    assert "dataset   imagenet-val@original" in lines
    assert "rows      9 of 9" in lines
    assert "classes   3: goldfish, shark, tench" in lines
    info = json.loads(cli("show", "imagenet-val@original", "--json").stdout)
    assert (info["revision"], info["view"], info["rows"], info["overlays"]) == (
        rev,
        "original",
        9,
        [],
    )
    assert info["manifest"] == {
        "schema": "dsreg/revision/1",
        "snapshot": info["snapshot"],
        "overlays": [],
        "view": "original",
    }

    log = cli("log", "imagenet-val")
    assert log.stdout.splitlines()[0].split() == [
        "TIME",
        "USER",
        "EVENT",
        "TAG",
        "OLD",
        "NEW",
        "COMMAND",
    ]
    assert f"tag    original  -    {short(rev)}  dsreg add imagenet-val" in log.stdout
    entries = json.loads(cli("log", "imagenet-val", "--json").stdout)
    assert [(e["event"], e["tag"], e["old"], e["new"]) for e in entries] == [
        ("tag", "original", None, rev)
    ]
    assert entries[0]["command"].startswith("dsreg add imagenet-val")


def test_label_only_and_table_adds(cli: Cli, reg: Registry, tmp_path: Path) -> None:
    np.save(tmp_path / "labels.npy", np.array([3, 0, 9, 1]))
    (tmp_path / "classes.txt").write_text("".join(f"c{i}\n" for i in range(10)))
    res = _added(
        cli, "cifar10-test", "--labels", "labels.npy", "--classes", "classes.txt", "--tag",
        "original",
    )  # fmt: skip
    assert (res["rows"], res["files"], len(res["classes"])) == (4, 0, 10)

    (tmp_path / "files").mkdir()
    for name in ("a.jpg", "b.jpg"):
        (tmp_path / "files" / name).write_bytes(name.encode())
    pq.write_table(
        pa.table({"path": ["a.jpg", "b.jpg"], "label": ["cat", "dog"], "split": ["x", "y"]}),
        tmp_path / "examples.parquet",
    )
    (tmp_path / "animals.txt").write_text("dog\ncat\n")
    res = _added(
        cli, "mydata", "--table", "examples.parquet", "--id-column", "path", "--label-column",
        "label", "--files", "files", "--classes", "animals.txt", "--tag", "original",
    )  # fmt: skip
    assert (res["rows"], res["files"], res["classes"]) == (2, 2, ["dog", "cat"])
    (tmp_path / "t.csv").write_text("id,label\nx,1\ny,0\n")
    res = _added(cli, "csvdata", "--table", "t.csv", "--id-column", "id", "--tag", "original")
    assert (res["rows"], res["files"]) == (2, 0)
    shown = json.loads(cli("show", "mydata@original", "--json").stdout)
    assert shown["source"]["kind"] == "table" and shown["classes"] == ["dog", "cat"]


def test_show_any_digest(cli: Cli, reg: Registry, val: Path) -> None:
    res = _added(cli, "pets", str(val), "--tag", "original")
    table = corrections_table(
        rows=np.array([0]),
        example_ids=["goldfish/img000.bin"],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
        score=np.array([0.5]),
    )
    producer = {"name": "dsreg.detect", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=res["snapshot"], kind="detected", table=table, producer=producer)

    # A revision digest, bare or as a prefix of it.
    for spec in (res["revision"], short(res["revision"])):
        info = json.loads(cli("show", spec, "--json").stdout)
        assert info["revision"] == res["revision"]
    # A snapshot digest stands for its original revision, and says which snapshot it is.
    info = json.loads(cli("show", res["snapshot"], "--json").stdout)
    assert (info["revision"], info["snapshot"]) == (res["revision"], res["snapshot"])
    # An overlay digest shows the overlay manifest and its dataset.
    info = json.loads(cli("show", ov, "--json").stdout)
    assert (info["type"], info["digest"], info["dataset"]) == ("overlay", ov, "pets")
    assert info["manifest"]["kind"] == "detected" and info["manifest"]["base"] == res["snapshot"]
    text = cli("show", short(ov)).stdout
    assert text.startswith(f"overlay  {ov}") and '"kind": "detected"' in text
    # A payload is an object with a size.
    blob = json.loads(cli("show", res["examples"], "--json").stdout)
    assert blob["type"] == "object" and blob["size"] > 0

    # A revision with the overlay: show tells it is corrected by the detector, unvalidated.
    r = cli("tag", "pets@corrected", "pets@original", "--overlay", short(ov), "--view", "corrected")
    assert r.exit_code == 0, r.stderr
    text = cli("show", "pets@corrected").stdout
    assert f"overlay   {ov}  detected (unvalidated: corrected by the detector)" in text


def test_tag_checkout_verify_gc(cli: Cli, reg: Registry, val: Path, tmp_path: Path) -> None:
    res = _added(cli, "imagenet-val", str(val), "--tag", "original")
    r = cli("tag", "imagenet-val@paper-2026", "imagenet-val@original")
    assert r.exit_code == 0 and r.stdout.strip() == res["revision"]
    assert f"Tagged imagenet-val@paper-2026 -> {short(res['revision'])}" in r.stderr
    tagged = json.loads(
        cli(
            "tag", "imagenet-val@cleaned", "imagenet-val@original", "--view", "cleaned", "--json"
        ).stdout
    )
    assert tagged["view"] == "cleaned" and tagged["previous"] is None

    for link in ("hardlink", "symlink", "copy", "reflink"):
        out = tmp_path / f"out-{link}"
        r = cli("checkout", "imagenet-val@paper-2026", str(out), "--link", link)
        assert r.exit_code == 0, r.stderr
        assert r.stdout.strip() == res["revision"]
        assert json.loads((out / ".dsreg.json").read_text())["revision"] == res["revision"]
        got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.bin")}
        assert got == {p.relative_to(val).as_posix(): p.read_bytes() for p in val.rglob("*.bin")}
    again = json.loads(
        cli("checkout", "imagenet-val@original", str(tmp_path / "out-copy"), "--link", "copy",
            "--json").stdout
    )  # fmt: skip
    assert (again["added"], again["removed"], again["unchanged"]) == (0, 0, 9)

    v = cli("verify")
    assert v.exit_code == 0 and "all intact" in v.stderr
    assert json.loads(cli("verify", "--json").stdout) == {"checked": 13, "ok": True, "problems": []}
    assert cli("verify", "imagenet-val@original").exit_code == 0
    assert cli("verify", "--all").exit_code == 0

    dry = json.loads(cli("gc", "--dry-run", "--json").stdout)
    assert dry == {"kept": 13, "removed": [], "bytes": 0, "dry_run": True}
    g = cli("gc")
    assert g.exit_code == 0 and "Removed 0 objects" in g.stderr


def test_tag_moves_only_with_force_and_the_log_keeps_the_old_value(
    cli: Cli, reg: Registry, val: Path
) -> None:
    res = _added(cli, "ds", str(val), "--tag", "original")
    before = state(reg.root)
    r = cli("tag", "ds@original", "ds@original", "--view", "cleaned")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: tag ds@original exists at " + short(res["revision"]))
    assert "--force" in r.stderr
    assert state(reg.root) == before
    moved = json.loads(
        cli("tag", "ds@original", "ds@original", "--view", "cleaned", "--force", "--json").stdout
    )
    assert moved["previous"] == res["revision"]
    log = json.loads(cli("log", "ds", "--json").stdout)
    assert [(e["old"], e["new"]) for e in log] == [
        (None, res["revision"]),
        (res["revision"], moved["revision"]),
    ]
    # add --tag of other content is refused the same way, and --force moves it.
    other = Path(str(val) + "-2")
    other.mkdir()
    (other / "x").mkdir()
    (other / "x" / "f.bin").write_bytes(b"other")
    r = cli("add", "ds", str(other), "--tag", "original")
    assert r.exit_code == 1 and "exists at" in r.stderr
    assert cli("add", "ds", str(other), "--tag", "original", "--force").exit_code == 0


def test_ls_after_every_tag_is_deleted_says_how_to_get_them_back(
    cli: Cli, reg: Registry, val: Path
) -> None:
    """ls in a registry whose every tag was deleted: not "no datasets yet" (the snapshots are
    still there), but which datasets have a log and how to bring a tag back, advice that works."""
    empty = cli("ls")
    assert empty.exit_code == 0 and "No datasets yet" in empty.stderr
    res = _added(cli, "ds", str(val), "--tag", "original")
    assert cli("tag", "-d", "ds@original").exit_code == 0
    assert dsreg.untagged_datasets(registry=reg) == ["ds"]
    gone = cli("ls")
    assert gone.exit_code == 0 and gone.stdout == ""
    assert "No datasets yet" not in gone.stderr
    assert "No tags: ds has a ref log but no tag left" in gone.stderr
    assert "'dsreg log ds'" in gone.stderr and "'dsreg tag ds@NAME ds@DIGEST'" in gone.stderr
    assert cli("ls", "--json").stdout.strip() == "[]"
    # Following the advice: the log names the digest, and tagging it brings the dataset back.
    old = short(res["revision"])
    assert old in cli("log", "ds").stdout
    assert cli("tag", "ds@back", f"ds@{old}").exit_code == 0
    assert cli("ls").stdout.split()[-3:] == ["ds", "back", old]
    _added(cli, "other", str(val), "--tag", "v1")
    assert cli("tag", "-d", "ds@back").exit_code == 0
    partly = cli("ls")
    now = short(dsreg.show("other@v1", registry=reg).revision)
    assert partly.stdout.split()[-3:] == ["other", "v1", now]
    assert "Not listed, having a ref log but no tag left: ds." in partly.stderr


# -- bad input: a clear error naming the value, exit 1, nothing written -----------------------


def _bad_inputs(tmp: Path, val: Path) -> dict[str, tuple[list[str], str]]:
    """``{case: (arguments, text the error must contain)}``; files are made here."""
    (tmp / "empty-class").mkdir()
    (tmp / "empty-class" / "a").mkdir()
    (tmp / "empty-class" / "a" / "f.bin").write_bytes(b"x")
    (tmp / "empty-class" / "b").mkdir()
    np.save(tmp / "range.npy", np.array([0, 1, 5]))
    np.save(tmp / "neg.npy", np.array([0, -1]))
    np.save(tmp / "float.npy", np.array([0.5]))
    (tmp / "three.txt").write_text("a\nb\nc\n")
    (tmp / "labels.json").write_text("[0, 1]")
    (tmp / "files").mkdir()
    (tmp / "files" / "a.bin").write_bytes(b"a")
    (tmp / "dup.csv").write_text("id,label\na.bin,0\na.bin,1\n")
    (tmp / "dotdot.csv").write_text("id,label\n../secret,0\n")
    (tmp / "inner.csv").write_text("id,label\na/../../b,0\n")
    (tmp / "abs.csv").write_text("id,label\n/etc/passwd,0\n")
    (tmp / "missing.csv").write_text("id,label\na.bin,0\nb.bin,1\n")
    (tmp / "names.csv").write_text("id,label\na.bin,cat\n")
    (tmp / "secret").mkdir()
    (tmp / "secret" / "s.bin").write_bytes(b"secret")
    (tmp / "link-tree" / "a").mkdir(parents=True)
    (tmp / "link-tree" / "a" / "ok.bin").write_bytes(b"ok")
    os.symlink(tmp / "secret" / "s.bin", tmp / "link-tree" / "a" / "evil.bin")
    (tmp / "dirlink-tree" / "a").mkdir(parents=True)
    (tmp / "dirlink-tree" / "a" / "ok.bin").write_bytes(b"ok")
    os.symlink(tmp / "secret", tmp / "dirlink-tree" / "evil")
    (tmp / "files" / "sub").symlink_to(tmp / "secret")
    (tmp / "sublink.csv").write_text("id,label\nsub/s.bin,0\n")
    v = str(val)
    return {
        "missing folder": (["add", "ds", "./nope"], "'nope' does not exist"),
        "missing labels": (["add", "ds", "--labels", "nope.npy"], "'nope.npy' does not exist"),
        "empty class": (["add", "ds", str(tmp / "empty-class")], "empty-class/b' has no files"),
        "label out of range": (
            ["add", "ds", "--labels", "range.npy", "--classes", "three.txt"],
            "out of range [0, 3), first [5]",
        ),
        "negative label": (["add", "ds", "--labels", "neg.npy"], "first [-1]"),
        "float labels": (["add", "ds", "--labels", "float.npy"], "float64"),
        "duplicate ids": (
            ["add", "ds", "--table", "dup.csv", "--id-column", "id", "--files", "files"],
            "['a.bin']",
        ),
        "duplicate ids, label-only": (
            ["add", "ds", "--table", "dup.csv", "--id-column", "id"],
            "['a.bin']",
        ),
        "id with ..": (["add", "ds", "--table", "dotdot.csv", "--id-column", "id"], "'../secret'"),
        "id with inner ..": (
            ["add", "ds", "--table", "inner.csv", "--id-column", "id"],
            "'a/../../b'",
        ),
        "absolute id": (["add", "ds", "--table", "abs.csv", "--id-column", "id"], "'/etc/passwd'"),
        "missing payload": (
            ["add", "ds", "--table", "missing.csv", "--id-column", "id", "--files", "files"],
            "['b.bin']",
        ),
        "label naming no class": (
            ["add", "ds", "--table", "names.csv", "--id-column", "id", "--classes", "three.txt"],
            "['cat']",
        ),
        "symlink out of the tree": (["add", "ds", str(tmp / "link-tree")], "'a/evil.bin'"),
        "folder link out of the tree": (["add", "ds", str(tmp / "dirlink-tree")], "'evil'"),
        "folder link out of --files": (
            ["add", "ds", "--table", "sublink.csv", "--id-column", "id", "--files", "files"],
            "'sub'",
        ),
        "bad dataset name": (["add", "ImageNet", v], "'ImageNet'"),
        "dataset name with slash": (["add", "a/b", v], "'a/b'"),
        "dataset name too long": (["add", "x" * 65, v], "'" + "x" * 65 + "'"),
        "dataset name with newline": (["add", "val\n", v], "'val\\n'"),
        "bad tag name": (["add", "ds", v, "--tag", "Original"], "'Original'"),
        "tag name with ..": (["add", "ds", v, "--tag", "../x"], "'../x'"),
        "two sources": (["add", "ds", v, "--labels", "range.npy"], "exactly one source"),
        "no source": (["add", "ds"], "exactly one source"),
        "unknown label file type": (["add", "ds", "--labels", "labels.json"], "'.json'"),
        "tag of unknown dataset": (["tag", "nope@x", "nope@original"], "no dataset 'nope'"),
        "tag of unknown tag": (["tag", "ds@x", "ds@nope"], "'nope'"),
        "show unknown": (["show", "ds@nope"], "'nope'"),
        "show bad spec": (["show", "ds@Bad"], "'Bad'"),
        "log bad name": (["log", "Bad"], "'Bad'"),
        "log unknown dataset": (["log", "nope"], "no dataset 'nope'"),
        "checkout bad link": (["checkout", "ds@original", "out", "--link", "rsync"], "'rsync'"),
        "verify unknown": (["verify", "ds@nope"], "'nope'"),
        "verify spec and --all": (["verify", "ds@original", "--all"], "not both"),
    }


def test_bad_input_names_the_value_exits_1_and_writes_nothing(
    cli: Cli, reg: Registry, val: Path, tmp_path: Path
) -> None:
    assert cli("add", "ds", str(val), "--tag", "original").exit_code == 0
    cases = _bad_inputs(tmp_path, val)
    before = state(reg.root)
    for case, (args, named) in cases.items():
        r = cli(*args)
        assert r.exit_code == 1, case
        assert r.stderr.startswith("Error: "), (case, r.stderr)
        assert named in r.stderr, (case, r.stderr)
        assert r.stdout == "", case
        assert state(reg.root) == before, case
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        # click words it "No such option: --bogus" or "No such option '--bogus'." by version.
        (["--bogus"], "No such option"),
        (["init", "--bogus"], "No such option"),
        (["checkout"], "Missing argument 'spec'"),
        (["add", "ds", "--tag"], "Option '--tag' requires an argument"),
        (
            ["detect", "ds@original", "--frac-noise", "lots"],
            "Invalid value for '--frac-noise': 'lots'",
        ),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_are_clear_errors_not_tracebacks(
    cli: Cli, reg: Registry, args: list[str], named: str
) -> None:
    before = state(reg.root)
    r = cli(*args)
    assert r.exit_code == 1
    assert f"Error: {named}" in r.stderr, r.stderr
    assert "--bogus" not in args or "--bogus" in r.stderr.splitlines()[-1], r.stderr
    assert "Traceback" not in r.stderr
    assert state(reg.root) == before


def test_checkout_into_a_non_empty_folder_without_pin_is_refused(
    cli: Cli, reg: Registry, val: Path, tmp_path: Path
) -> None:
    _added(cli, "ds", str(val), "--tag", "original")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work")
    r = cli("checkout", "ds@original", "mine")
    assert r.exit_code == 1 and "is not empty and holds no .dsreg.json" in r.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["thesis.tex"]


def test_ambiguous_prefixes_list_the_candidates(cli: Cli, reg: Registry) -> None:
    """Brute-force two revisions of one dataset whose digests share 6 hex characters."""

    def snap(i: int) -> Snapshot:
        return Snapshot(
            dataset="amb", examples=hash_bytes(b"%d" % i), rows=1, classes=("a",),
            source={"kind": "labels"},
        )  # fmt: skip

    def rev(i: int) -> str:
        s = hash_bytes(canonical_bytes(snap(i).to_dict()))
        return hash_bytes(canonical_bytes(Revision(snapshot=s).to_dict()))

    seen: dict[str, int] = {}
    for i in itertools.count():
        p = rev(i)[7:13]
        if p in seen:
            pair = (seen[p], i)
            break
        seen[p] = i
    digests = [reg.put_manifest(Revision(snapshot=reg.put_manifest(snap(k)))) for k in pair]
    before = state(reg.root)
    for args in (["show", f"amb@{p}"], ["checkout", f"amb@{p}", "out"], ["show", p]):
        r = cli(*args)
        assert r.exit_code == 1, args
        assert "ambiguous" in r.stderr and p in r.stderr
        assert all(short(d) in r.stderr for d in digests), (args, r.stderr)
        assert state(reg.root) == before
    n = next(k for k in range(6, 64) if digests[0][7 + k] != digests[1][7 + k])
    # One more character picks one (tag it: these fake snapshots have no examples to show).
    r = cli("tag", "amb@picked", f"amb@{digests[1][7 : 8 + n]}", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["revision"] == digests[1]


def test_corrupt_objects_fail_verify_and_checkout(
    cli: Cli, reg: Registry, val: Path, tmp_path: Path
) -> None:
    res = _added(cli, "ds", str(val), "--tag", "original")
    blob = dsreg.open("ds@original", registry=reg)[2].blob
    assert blob is not None
    p = reg.store.path(blob)
    os.chmod(p, 0o644)
    data = bytearray(p.read_bytes())
    data[0] ^= 0xFF
    p.write_bytes(bytes(data))
    os.chmod(p, 0o444)

    v = cli("verify")
    assert v.exit_code == 1
    assert v.stdout.startswith(f"{blob}  corrupt")
    assert "1 problems" in v.stderr
    j = json.loads(cli("verify", "--json").stdout)
    assert not j["ok"] and [x["digest"] for x in j["problems"]] == [blob]
    assert cli("verify", "ds@original").exit_code == 1

    r = cli("checkout", "ds@original", str(tmp_path / "out"))
    assert r.exit_code == 1 and f"object {short(blob)}" in r.stderr and "corrupt" in r.stderr
    g = cli("gc", "--dry-run", "--json")
    assert g.exit_code == 0 and json.loads(g.stdout)["removed"] == []
    assert res["revision"]
