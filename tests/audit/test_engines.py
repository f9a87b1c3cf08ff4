"""Where fingerprints are computed: the local process pool and Ray Data (in Ray's local mode)
run the same batch function and give the same fingerprints, findings and overlay."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import Registry
from dsreg.audit import engines, fingerprints
from dsreg.audit.corpus import edit_text, jpeg, photo_tiles, stdlib_texts
from dsreg.audit.engines import Engine, run_batches
from dsreg.audit.fingerprints import FILES_SCHEMA, fingerprint_files, fingerprints_only


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """Ray started in this process in local mode, as a laptop or CI machine runs it."""
    with warnings.catch_warnings():
        # Ray's own deprecation warnings about its settings: not dsreg's to fix.
        warnings.simplefilter("ignore", DeprecationWarning)
        import ray

        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Training and test sets of photographs and texts, the test set holding re-encoded,
    resized and edited copies of training items, one item twice, and unrelated items; and an
    unregistered corpus folder with a copy, a broken link and a FIFO."""
    tiles = photo_tiles(14, seed=3, side=96)
    texts = stdlib_texts()[:12]
    vocab = " ".join(texts).split()
    rng = np.random.default_rng(5)
    train = {f"i/t{i:02d}.jpg": jpeg(tiles[i]) for i in range(8)}
    train |= {f"t/d{i:02d}.txt": t.encode() for i, t in enumerate(texts[:8])}
    test = {
        "i/q0.jpg": jpeg(tiles[0], quality=40),
        "i/q1.jpg": jpeg(tiles[1].resize((150, 150))),
        "i/q2.jpg": train["i/t02.jpg"],
        "i/new10.jpg": jpeg(tiles[10]),
        "i/again10.jpg": jpeg(tiles[10], quality=55),
        "i/new11.jpg": jpeg(tiles[11]),
        "t/e3.txt": edit_text(texts[3], rng, vocab)[0].encode(),
        "t/new9.txt": texts[9].encode(),
        "t/new10.txt": texts[10].encode(),
        "t/empty.txt": b"",
    }
    folder = _write(
        tmp_path / "corpus", {"x/t11.jpg": jpeg(tiles[11]), "x/d.txt": texts[10].encode()}
    )
    (folder / "gone.jpg").symlink_to(folder / "missing.jpg")
    os.mkfifo(folder / "pipe")
    return _write(tmp_path / "train", train), _write(tmp_path / "test", test), folder


def _audit(reg: Registry, folder: Path, engine: str) -> dsreg.AuditResult:
    return dsreg.audit_duplicates(
        "test@v1",
        against=["train@v1", str(folder)],
        within=True,
        engine=engine,  # type: ignore[arg-type]
        registry=reg,
    )


def test_ray_finds_what_the_local_pool_finds(
    make_registry: Callable[..., Registry], tmp_path: Path, ray_local: None
) -> None:
    train, test, folder = _corpus(tmp_path)
    reg = make_registry()
    dsreg.add("train", train, tag="v1", registry=reg)
    dsreg.add("test", test, tag="v1", registry=reg)
    local = _audit(reg, folder, "local")
    assert local.digest is not None
    assert local.counts["contaminated"] == 6 and local.counts["duplicate"] == 1
    # A second registry of the same sets, with no fingerprints stored: Ray computes every one
    # from the payloads' files.
    fresh = make_registry("fresh")
    dsreg.add("train", train, tag="v1", registry=fresh)
    dsreg.add("test", test, tag="v1", registry=fresh)
    on_ray = _audit(fresh, folder, "ray")
    assert on_ray.fingerprints == local.fingerprints
    assert on_ray.fingerprints["computed"] == 16 + 10 - 1 + 2
    assert (on_ray.digest, on_ray.findings) == (local.digest, local.findings)
    assert on_ray.unreadable == local.unreadable and len(on_ray.unreadable) == 1
    assert dict(on_ray.unreadable_against) == {
        str(folder / "gone.jpg"): "cannot be read (No such file or directory)",
        str(folder / "pipe"): "not a regular file",
    }
    assert dict(on_ray.unreadable_against) == dict(local.unreadable_against)


def test_a_damaged_payload_is_refused_on_ray_too(
    make_registry: Callable[..., Registry], tmp_path: Path, ray_local: None
) -> None:
    tiles = photo_tiles(3, seed=4, side=64)
    reg = make_registry()
    files = {f"a/{i}.jpg": jpeg(tile) for i, tile in enumerate(tiles)}
    dsreg.add("test", _write(tmp_path / "t", files), tag="v1", registry=reg)
    digest = dsreg.open("test@v1", registry=reg).labels().column("blob")[1].as_py()
    path = reg.store.path(digest)
    path.chmod(0o644)
    path.write_bytes(b"not the bytes that were added")
    with pytest.raises(dsreg.CorruptObjectError):
        dsreg.audit_duplicates("test@v1", within=True, engine="ray", registry=reg)
    assert digest in reg.store.marked_corrupt()
    assert not list((reg.root / "state").glob("fingerprints/*/*"))


def test_both_engines_run_the_batch_function_over_every_row(
    tmp_path: Path, ray_local: None
) -> None:
    # Enough rows for the local engine to fork its workers, in a count no multiple of a batch.
    texts = stdlib_texts()[:3]
    paths = []
    for i in range(1100):
        path = tmp_path / f"{i}.txt"
        path.write_text(f"{texts[i % 3]} {i}")
        paths.append(str(path))
    inputs = pa.table({"path": paths, "expect": [None] * len(paths)}, schema=FILES_SCHEMA)
    heard: dict[str, list[tuple[int, int]]] = {"local": [], "ray": []}
    tables = {}
    for name in ("local", "ray"):
        parts = run_batches(
            fingerprint_files,
            inputs,
            Engine(name),
            lambda done, total, name=name: heard[name].append((done, total)),  # type: ignore[misc]
        )
        tables[name] = fingerprints_only(pa.concat_tables(parts)).sort_by("payload")
    assert tables["ray"].num_rows == 1100
    assert tables["ray"].equals(tables["local"])
    assert heard["ray"][-1] == heard["local"][-1] == (1100, 1100)


def test_a_failing_ray_task_is_a_one_line_error(tmp_path: Path, ray_local: None) -> None:
    inputs = pa.table({"path": ["a", "b"], "expect": [None, None]}, schema=FILES_SCHEMA)
    # A batch function that fails on the cluster (a column the batch does not have).
    failing = operator.itemgetter("no such column")
    with pytest.raises(dsreg.StorageError, match=r"^a Ray task failed: ") as caught:
        run_batches(failing, inputs, Engine("ray"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("fails", ["raises", "killed"])
def test_a_failing_ray_task_ends_the_command_in_one_line_and_writes_nothing(
    cli: Callable[..., Any],
    tmp_path: Path,
    ray_local: None,
    monkeypatch: pytest.MonkeyPatch,
    registry_state: Callable[[Path], dict[str, tuple[str, int, str]]],
    fails: str,
) -> None:
    """docs/audit.md: a task that fails (it raises, or its worker dies every time it is run
    again, which Ray Data by itself would do forever) is a one-line error naming the task's
    own error, exit status 1, and no overlay, tag or fingerprints table is written. The batch
    function the audit hands Ray is made to fail on the cluster (functions of the test: Ray
    pickles them by value, so the worker runs them)."""
    tiles = photo_tiles(3, seed=4, side=64)
    _write(tmp_path / "t", {f"a/{i}.jpg": jpeg(tile) for i, tile in enumerate(tiles)})
    cli("init")
    assert cli("add", "test", str(tmp_path / "t"), "--tag", "v1").exit_code == 0
    before = registry_state(tmp_path / ".dsreg")

    def raises(table: pa.Table) -> pa.Table:
        raise OSError(f"the disk under a worker failed reading {table.num_rows} files")

    def killed(table: pa.Table) -> pa.Table:
        os._exit(3)  # the worker process dies mid-task, as under the OOM killer

    monkeypatch.setattr(
        fingerprints, "fingerprint_files", {"raises": raises, "killed": killed}[fails]
    )
    # Each retry starts a worker, so none: the bound reaching Ray is what ends the audit
    # (Ray Data's own default would run a killed task again forever).
    monkeypatch.setattr(engines, "TASK_RETRIES", 0)
    args = ("--within", "--engine", "ray", "--tag", "audited")
    res = cli("audit", "duplicates", "test@v1", *args)
    assert res.exit_code == 1, res.stderr
    # Ray's log monitor may print its own report of a dead worker ("(raylet) A worker died");
    # dsreg prints nothing but its error.
    assert all("(raylet)" in line for line in res.stdout.splitlines()), res.stdout
    assert res.stderr.startswith("Error: a Ray task failed: ") and res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr and "\x1b" not in res.stderr
    if fails == "raises":  # the task's own error, not Ray's wrapping of it
        assert "OSError: the disk under a worker failed reading 3 files" in res.stderr
    else:
        assert "worker died" in res.stderr
    assert registry_state(tmp_path / ".dsreg") == before  # no overlay, tag or table
    assert "audited" not in cli("ls").stdout


@pytest.fixture(scope="module")
def mixed_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Files of every kind a corpus holds: texts, JPEGs, empty and binary files, a FIFO."""
    root = tmp_path_factory.mktemp("mixed")
    tiles = photo_tiles(4, seed=9, side=48)
    kinds = [b"", b"\x00\x01\xff binary", b"plain words in a row"]
    paths = []
    for i in range(600):
        path = root / f"{i:03d}"
        if i % 97 == 5:
            os.mkfifo(path)
        else:
            data = jpeg(tiles[i % 4], 50 + i % 40) if i % 5 == 0 else kinds[i % 3] + b" %d" % i
            path.write_bytes(data if i % 7 else kinds[i % 3])
        paths.append(str(path))
    return paths


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 600), st.integers(0, 600))
def test_the_local_pool_gives_one_row_per_file_as_one_batch_would(
    mixed_files: list[str], start: int, count: int
) -> None:
    paths = mixed_files[start : start + count]
    inputs = pa.table({"path": paths, "expect": [None] * len(paths)}, schema=FILES_SCHEMA)
    heard: list[tuple[int, int]] = []
    parts = run_batches(fingerprint_files, inputs, Engine(), lambda d, t: heard.append((d, t)))
    whole = fingerprint_files(inputs)
    if not paths:
        assert parts == [] and heard == []
        return
    assert pa.concat_tables(parts).sort_by("path").equals(whole.sort_by("path"))
    assert heard[-1] == (len(paths), len(paths))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "spark"], "unknown engine 'spark': use 'local' (the default) or 'ray'"),
        (["--ray-address", "ray://h:10001"], "--ray-address 'ray://h:10001' needs --engine ray"),
    ],
)
def test_bad_engine_options_are_one_line_errors(
    cli: Callable[..., object], tmp_path: Path, args: list[str], message: str
) -> None:
    _write(tmp_path / "t", {"a/x.txt": b"some words here"})
    cli("init")
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    res = cli("audit", "duplicates", "test@v1", "--within", *args)
    assert res.exit_code == 1  # type: ignore[attr-defined]
    assert res.stderr.strip().count("\n") == 0  # type: ignore[attr-defined]
    assert message in res.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()


def test_without_ray_the_engine_names_the_extra_to_install(
    cli: Callable[..., object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "t", {"a/x.txt": b"some words here"})
    cli("init")
    cli("add", "test", str(tmp_path / "t"), "--tag", "v1")
    # As if Ray were not installed: importing it fails.
    monkeypatch.setitem(sys.modules, "ray", None)
    res = cli("audit", "duplicates", "test@v1", "--within", "--engine", "ray")
    assert res.exit_code == 1  # type: ignore[attr-defined]
    assert res.stderr.strip().count("\n") == 0  # type: ignore[attr-defined]
    assert "pip install 'dsreg[ray]'" in res.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()


def test_an_unreachable_cluster_is_a_one_line_error(
    run_dsreg: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    _write(tmp_path / "t", {"a/x.txt": b"some words here"})
    assert run_dsreg("init", cwd=tmp_path).returncode == 0
    assert (
        run_dsreg("add", "test", str(tmp_path / "t"), "--tag", "v1", cwd=tmp_path).returncode == 0
    )
    # A fresh process: no Ray initialised before, so the address is the one used.
    args = ("--engine", "ray", "--ray-address", "ray://127.0.0.1:1")
    res = run_dsreg("audit", "duplicates", "test@v1", "--within", *args, cwd=tmp_path)
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: cannot start or reach Ray at ray://127.0.0.1:1: ")
    assert "Traceback" not in res.stderr
    assert not (tmp_path / ".dsreg" / "state" / "fingerprints").exists()


def test_ray_audits_against_a_parquet_corpus_as_the_local_pool_does(
    make_registry: Callable[..., Registry],
    tmp_path: Path,
    ray_local: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Batches of 8 rows: each corpus file is several Ray tasks, whose results come back in any
    # order. Each file has a row without a payload and one that cannot be fingerprinted (words
    # in the image column are no image).
    monkeypatch.setattr(engines, "BATCH_ROWS", 8)
    tiles = photo_tiles(30, seed=6, side=96)
    texts = stdlib_texts()[:40]
    rng = np.random.default_rng(8)
    images = pa.table(
        {
            "id": [f"img{i}" for i in range(30)],
            "image": [jpeg(tiles[i], 60 + i % 30) for i in range(28)] + [None, b"some words"],
        }
    )
    pq.write_table(images, tmp_path / "images.parquet")
    words = pa.table({"id": list(range(1000, 1032)), "text": [*texts[:30], None, ""]})
    pq.write_table(words, tmp_path / "texts.parquet")
    test = {
        "i/q5.jpg": jpeg(tiles[5], quality=35),
        "i/r20.jpg": jpeg(tiles[20].resize((70, 70))),
        "i/new.jpg": jpeg(tiles[29]),
        "t/e7.txt": edit_text(texts[7], rng, " ".join(texts).split())[0].encode(),
        "t/c29.txt": texts[29].encode(),
        "t/new.txt": texts[39].encode(),
    }
    against = [str(tmp_path / "images.parquet"), str(tmp_path / "texts.parquet")]
    results = {}
    for engine in ("local", "ray"):
        # A registry each: on Ray, every fingerprint (the test set's too) is computed there.
        reg = make_registry(engine)
        dsreg.add("test", _write(tmp_path / f"test-{engine}", test), tag="v1", registry=reg)
        results[engine] = dsreg.audit_duplicates(
            "test@v1",
            against=against,
            engine=engine,  # type: ignore[arg-type]
            registry=reg,
        )
    local, on_ray = results["local"], results["ray"]
    assert {
        f.example_id: (f.matches[0]["example_id"], f.matches[0]["tier"]) for f in local.findings
    } == {
        "i/q5.jpg": ("img5", "image"),
        "i/r20.jpg": ("img20", "image"),
        "t/e7.txt": ("1007", "text"),
        "t/c29.txt": ("1029", "exact"),
    }
    assert {f.verdict for f in local.findings} == {"contaminated"}
    # The same rows, tiers, distances and corpus digests, match for match.
    assert on_ray.findings == local.findings
    assert on_ray.digest == local.digest and on_ray.counts == local.counts
    assert on_ray.fingerprints == local.fingerprints
    assert on_ray.fingerprints["computed"] == 6 + 29 + 31
    assert on_ray.unreadable_against == local.unreadable_against
    assert dict(on_ray.unreadable_against) == {
        f"{against[0]}: img28": "no payload (null)",
        f"{against[0]}: img29": "not an image (PIL recognises no image format in these bytes)",
        f"{against[1]}: 1030": "no payload (null)",
        f"{against[1]}: 1031": "empty text (0 bytes)",
    }
