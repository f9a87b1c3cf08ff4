"""``dsreg export SPEC --to REMOTE``: a view pinned on a remote as content-addressed Parquet,
computed and uploaded once, read by URL by engines that never import dsreg."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from siteset import SYNTH, build_site_set

import dsreg
from tests.conftest import CliResult

# DuckDB reads http(s) with its httpfs extension, which it downloads on first use; offline, an
# fsspec HTTP file system registered with DuckDB reads the same URL. Neither imports dsreg.
DUCKDB_READ = """
import datetime, json, sys
import duckdb
con = duckdb.connect()
try:
    con.sql("LOAD httpfs")
except Exception:
    import fsspec.implementations.http as http

    class HTTP(http.HTTPFileSystem):
        def modified(self, path):
            return datetime.datetime.now(datetime.timezone.utc)

    con.register_filesystem(HTTP())
rows = con.sql(
    f"SELECT row, example_id, label FROM read_parquet('{sys.argv[1]}') ORDER BY row"
).fetchall()
assert "dsreg" not in sys.modules
print(json.dumps(rows))
"""


def _labels(spec: str, reg: object) -> list[list[object]]:
    t = dsreg.open(spec, registry=reg).labels()
    cols = [t.column(c).to_pylist() for c in ("row", "example_id", "label")]
    return [list(r) for r in zip(*cols, strict=True)]


def _no_dsreg_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DSREG")}


def test_a_pinned_view_is_uploaded_once_and_duckdb_reads_it_over_http(
    tmp_path: Path, serve: Callable[[Path], str]
) -> None:
    ss = build_site_set(tmp_path / "src")
    www = tmp_path / "www"
    url = serve(www)
    spec = f"{SYNTH}@cleaned-v1"
    first = dsreg.export(spec, to=str(www), registry=ss.reg)
    assert first.uploaded and first.rows == len(dsreg.open(spec, registry=ss.reg))
    obj = www / first.path
    assert hashlib.sha256(obj.read_bytes()).hexdigest() == first.sha256
    assert first.path == f"views/sha256/{first.sha256}.parquet"
    before = {p: p.stat().st_mtime_ns for p in www.rglob("*")}
    second = dsreg.export(spec, to=str(www), registry=ss.reg)
    assert not second.uploaded and second.sha256 == first.sha256
    assert {p: p.stat().st_mtime_ns for p in www.rglob("*")} == before  # nothing written
    done = subprocess.run(
        [sys.executable, "-c", DUCKDB_READ, url + first.path],
        env=_no_dsreg_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == _labels(spec, ss.reg)


def test_polars_reads_a_pinned_view_by_url(tmp_path: Path, serve: Callable[..., str]) -> None:
    pytest.importorskip("polars", reason="polars is not installed (an optional reader)")
    ss = build_site_set(tmp_path / "src")
    www = tmp_path / "www"
    url = serve(www, ranges=True)  # Polars reads a file's footer first, as a range
    pin = dsreg.export(f"{SYNTH}@corrected-v1", to=str(www), registry=ss.reg)
    code = (
        "import json, sys, polars as pl; df = pl.read_parquet(sys.argv[1]).sort('row'); "
        "assert 'dsreg' not in sys.modules; "
        "print(json.dumps([list(r) for r in df.select('row', 'example_id', 'label').rows()]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, url + pin.path], env=_no_dsreg_env(), cwd=tmp_path,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == _labels(f"{SYNTH}@corrected-v1", ss.reg)


def test_export_to_a_read_only_remote_is_one_line_exit_1_nothing_written(
    tmp_path: Path, serve: Callable[[Path], str], cli: Callable[..., CliResult]
) -> None:
    ss = build_site_set(tmp_path / "src")
    www = tmp_path / "www"
    url = serve(www)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    res = cli("export", f"{SYNTH}@cleaned-v1", "--to", url, "--registry", str(ss.reg.root))
    assert res.exit_code == 1
    assert res.stdout == ""
    assert res.stderr.startswith("Error: ") and res.stderr.count("\n") == 1
    assert url in res.stderr and "read-only" in res.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_export_to_prints_url_and_sha256_and_a_damaged_pin_is_written_again(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    ss = build_site_set(tmp_path / "src")
    remote = tmp_path / "remote"
    args = ("export", f"{SYNTH}@original", "--to", str(remote), "--registry", str(ss.reg.root))
    res = cli(*args)
    assert res.exit_code == 0, res.stderr
    path, sha = res.stdout.strip().split("\t")
    assert sha == "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert "Uploaded" in res.stderr
    (pin,) = (remote / "views" / SYNTH).iterdir()
    pin.write_text("{not json")
    again = cli(*args)
    assert again.exit_code == 0 and again.stdout == res.stdout and "Uploaded" in again.stderr
    assert json.loads(pin.read_text())["sha256"] == sha.removeprefix("sha256:")
    assert "nothing uploaded" in cli(*args).stderr


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    labels=st.lists(st.integers(0, 4), min_size=1, max_size=40),
    view=st.sampled_from(["original", "cleaned", "corrected"]),
)
def test_a_pinned_view_holds_the_rows_of_labels(
    tmp_path_factory: pytest.TempPathFactory, labels: list[int], view: str
) -> None:
    root = tmp_path_factory.mktemp("pin")
    reg = dsreg.init(registry=root / "reg")
    np.save(root / "l.npy", np.array(labels, dtype=np.int64))
    (root / "classes.txt").write_text("a\nb\nc\nd\ne\n")
    dsreg.add("toy", labels=root / "l.npy", classes=root / "classes.txt", tag="original",
              registry=reg)  # fmt: skip
    probs = np.random.default_rng(len(labels)).dirichlet(np.ones(5), len(labels))
    np.save(root / "p.npy", probs)
    made = dsreg.detect("toy@original", root / "p.npy", registry=reg)
    dsreg.tag("toy@v", "toy@original", overlays=[made.digest], view=view, registry=reg)
    pin = dsreg.export("toy@v", to=str(root / "remote"), registry=reg)
    table = pq.read_table(root / "remote" / pin.path)
    cols = [table.column(c).to_pylist() for c in ("row", "example_id", "label")]
    got = [list(r) for r in zip(*cols, strict=True)]
    assert got == _labels("toy@v", reg)
    assert pin.rows == len(got)
