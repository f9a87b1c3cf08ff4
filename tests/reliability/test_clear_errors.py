"""Bad input gets a clear error naming the value, exit status 1, and nothing is written
(docs/concepts.md, "Guarantees"). Each case here was a traceback, an abort or an
out-of-memory kill before."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any as CliResult

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _refused(res: CliResult, *needles: str) -> None:
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    assert res.stderr.startswith("Error: "), res.stderr
    assert "Traceback" not in res.stderr
    for n in needles:
        assert n in res.stderr, (n, res.stderr)


def _objects(root: Path) -> list[str]:
    files = root / "files"
    return sorted(str(p) for p in files.rglob("*") if p.is_file()) if files.exists() else []


@pytest.fixture
def reg(cli: Callable[..., CliResult], tmp_path: Path) -> Path:
    assert cli("init").exit_code == 0
    return tmp_path / ".dsreg"


def test_an_empty_labels_file_is_refused(
    cli: Callable[..., CliResult], reg: Path, tmp_path: Path
) -> None:
    np.save(tmp_path / "empty.npy", np.array([], dtype=np.int64))
    (tmp_path / "zero.npy").write_bytes(b"")
    _refused(cli("add", "ds", "--labels", "empty.npy"), "empty.npy", "no labels")
    _refused(cli("add", "ds", "--labels", "zero.npy"), "zero.npy")
    assert _objects(reg) == []


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.integers(1, 50), top=st.integers(100_001, 2**31 - 1))
def test_a_label_far_beyond_the_rows_needs_a_classes_file(
    cli: Callable[..., CliResult], reg: Path, tmp_path: Path, rows: int, top: int
) -> None:
    labels = np.zeros(rows, dtype=np.int64)
    labels[-1] = top
    np.save(tmp_path / "far.npy", labels)
    _refused(cli("add", "ds", "--labels", "far.npy"), str(top), "--classes")
    assert _objects(reg) == []


def test_a_name_that_is_not_utf8_is_refused_before_anything_is_stored(
    cli: Callable[..., CliResult], reg: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    (tree / "good").mkdir(parents=True)
    (tree / "good" / "a.bin").write_bytes(b"a")
    bad = os.fsencode(tree / "good") + b"/caf\xe9.bin"  # Latin-1, not UTF-8
    with open(bad, "wb") as f:
        f.write(b"b")
    _refused(cli("add", "ds", "tree"), "caf\\xe9.bin", "not valid UTF-8")
    assert _objects(reg) == []


def test_a_lock_that_is_not_a_file_is_a_clear_error(
    cli: Callable[..., CliResult], reg: Path, tmp_path: Path
) -> None:
    (reg / "lock").unlink(missing_ok=True)
    (reg / "lock").mkdir()
    np.save(tmp_path / "ok.npy", np.array([0, 1, 1]))
    _refused(cli("add", "ds", "--labels", "ok.npy"), "lock", "plain file")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://TOKEN@example.org/reg", "user@"),
        ("https://user:pw@example.org/reg", "password"),
        ("https://example.org/reg?token=abc", "'token'"),
        ("s3://bucket/reg?secret_access_key=abc", "'secret_access_key'"),
        ("https://example.org/reg?X-Amz-Signature=abc", "'X-Amz-Signature'"),
        ("https://acct.blob.core.windows.net/c?sv=2020&sig=abc", "'sig'"),
    ],
)
def test_secrets_in_a_remote_url_are_refused_and_never_stored(
    cli: Callable[..., CliResult], reg: Path, url: str, shown: str
) -> None:
    before = (reg / "config.toml").read_bytes()
    res = cli("remote", "add", "origin", url)
    _refused(res, shown, "no secrets")
    assert "abc" not in res.stderr and "TOKEN" not in res.stderr and "pw" not in res.stderr
    assert (reg / "config.toml").read_bytes() == before
