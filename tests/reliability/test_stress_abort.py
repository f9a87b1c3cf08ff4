"""No abort at exit under load.

Under heavy load, ``python -c "import dsreg; print(len(dsreg.open(...)))"`` and ``dsreg detect``
sometimes ended with ``terminate called without an active exception`` and no traceback. Core
dumps showed the same stack each time: an Arrow pool thread finishing a Parquet decode task
(``FileReaderImpl::DecodeRowGroups``) dropped the last reference to the table's bytes, a Python
``bytes`` object behind ``pa.BufferReader``; ``PyBuffer::~PyBuffer`` took the GIL, the main
thread was already in ``Py_FinalizeEx``, so Python ended the worker with ``pthread_exit`` inside
that (noexcept) destructor, and libstdc++ called ``std::terminate``. ``read_parquet_bytes`` now
decodes in the calling thread, so no Arrow thread ever holds Python memory.

The first test checks that property directly and fast; the second loops both commands of the
report while every core is busy.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dsreg
from dsreg.formats.tables import parquet_bytes, read_parquet_bytes

REPO = Path(dsreg.__file__).resolve().parents[1]
DSREG_MAIN = "import sys; from dsreg.cli import main; main(sys.argv[1:])"
OPEN_LEN = "import dsreg; print(len(dsreg.open('imagenet-val@cleaned-v1')))"
FILTER_BY = (
    "prune_by_noise_rate",
    "prune_by_class",
    "both",
    "confident_learning",
    "predicted_neq_given",
    "low_normalized_margin",
    "low_self_confidence",
)
ITERATIONS = 20  # of each command, the two loops side by side
DEADLINE = 30.0  # seconds of looping at most: fewer iterations on a slow or loaded machine
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def test_no_arrow_thread_holds_the_bytes_after_a_read() -> None:
    """Once ``read_parquet_bytes`` returns, nothing but the caller refers to the bytes: no
    Arrow worker is left to release them (which needs the GIL) while the interpreter exits."""
    n = 50_000
    table = pa.table(
        {
            "example_id": pa.array([f"x{i}" for i in range(n)]),
            "label": pa.array(np.arange(n, dtype=np.int32) % 1000),
            "blob": pa.nulls(n, pa.string()),
            "size": pa.nulls(n, pa.int64()),
        }
    )
    data = parquet_bytes(table)
    held = 0
    for _ in range(100):
        before = sys.getrefcount(data)
        read = read_parquet_bytes(data, digest="blake3:" + "0" * 64)
        assert read.num_rows == n
        del read
        held += sys.getrefcount(data) != before
    assert held == 0, f"after {held} of 100 reads another thread still held the table's bytes"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    # An abort then prints every thread's Python stack too.
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120
    )


def _dsreg(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = _run(["-c", DSREG_MAIN, *args], cwd)
    assert res.returncode == 0, (args, res.returncode, res.stderr)
    return res


def _save(path: Path, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, array)
    path.write_bytes(buf.getvalue())


@pytest.mark.slow
def test_open_and_detect_never_abort_under_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    k = 20
    _save(tmp_path / "labels.npy", rng.integers(0, k, 50_000))
    probs = rng.random((50_000, k), dtype=np.float32)
    _save(tmp_path / "probs.npy", probs / probs.sum(axis=1, keepdims=True))
    _save(tmp_path / "imdb_labels.npy", rng.integers(0, 2, 25_000))
    pyx = rng.random((25_000, 2))
    _save(tmp_path / "imdb_test_set_pyx.npy", pyx / pyx.sum(axis=1, keepdims=True))
    _dsreg(tmp_path, "init")
    _dsreg(tmp_path, "add", "imagenet-val", "--labels", "labels.npy", "--tag", "original")
    _dsreg(
        tmp_path,
        "detect",
        "imagenet-val@original",
        "--pred-probs",
        "probs.npy",
        "--tag",
        "cleaned-v1",
        "--view",
        "cleaned",
    )
    _dsreg(tmp_path, "add", "imdb-test", "--labels", "imdb_labels.npy", "--tag", "original")
    rows = str(len(dsreg.open("imagenet-val@cleaned-v1", registry=tmp_path / ".dsreg")))

    def open_len(i: int) -> subprocess.CompletedProcess[str]:
        return _run(["-c", OPEN_LEN], tmp_path)

    def detect(i: int) -> subprocess.CompletedProcess[str]:
        return _run(
            [
                "-c",
                DSREG_MAIN,
                "detect",
                "imdb-test@original",
                "--pred-probs",
                "imdb_test_set_pyx.npy",
                "--filter-by",
                FILTER_BY[i % len(FILTER_BY)],
            ],
            tmp_path,
        )

    start = time.monotonic()

    def loop(command: str) -> list[tuple[int, subprocess.CompletedProcess[str]]]:
        out = []
        for i in range(ITERATIONS):
            if i and time.monotonic() - start > DEADLINE:
                break
            out.append((i, open_len(i) if command == "open" else detect(i)))
        return out

    # Busy loops on every core, each ending by itself (and killed below if it has not).
    busy = [
        subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=DEADLINE + 20)])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = dict(zip(("open", "detect"), pool.map(loop, ("open", "detect")), strict=True))
    finally:
        for p in busy:
            p.kill()
            p.wait()

    for command, results in runs.items():
        assert results, f"no {command} ran"
        for i, res in results:
            assert "terminate called" not in res.stderr, (command, i, res.stderr)
            assert res.returncode == 0, (command, i, res.returncode, res.stderr)
            if command == "open":
                assert res.stdout.strip() == rows, (i, res.stdout, res.stderr)
