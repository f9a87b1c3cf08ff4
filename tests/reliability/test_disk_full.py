"""A full disk at every point of add, tag, import-votes and detect (docs/concepts.md,
"Guarantees").

The registry lives on a small tmpfs (its inputs do not). For each command, a clean run measures
how much space the command takes; then, for a range of free-space levels from none to a little
more than that, a filler file leaves only so much free and the command runs. Whatever the level:

- the command succeeds, or exits 1 with ``Error:`` and no traceback;
- nothing partial is visible: ``dsreg verify`` passes, every tag names an object the store
  holds, and a tag exists exactly when its log line does (one line);
- once the filler is removed, running the command again succeeds with the digests of the clean
  run, and its tag has exactly one log line.

Mounting needs root (CAP_SYS_ADMIN); where the machine does not allow it, the tests are skipped
and say why. The tmpfs is unmounted however the tests end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from inprocess import add_labels, add_labels_args, check_tags, ok, run

pytestmark = pytest.mark.slow

SIZE = 24 << 20  # the tmpfs
LEVELS = 24  # free-space levels spread over what a command writes
LAST_PAGES = 16  # and each of its last pages
N = 5_000  # rows of the label-only dataset
K = 4  # its classes
SEED = 77


@pytest.fixture(scope="module")
def small_fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tmpfs of SIZE bytes, mounted for this module and unmounted after it."""
    if not sys.platform.startswith("linux"):
        pytest.skip("disk-full tests mount a tmpfs: Linux only")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); not root here")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("mount/umount are not installed")
    mnt = tmp_path_factory.mktemp("small-fs")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        pytest.skip(
            "cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): "
            + (proc.stderr.strip() or f"mount exited {proc.returncode}")
        )
    try:
        st = os.statvfs(mnt)
        assert st.f_blocks * st.f_frsize <= 2 * SIZE, "the mount is not the small tmpfs"
        yield mnt
    finally:
        done = subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _clear(mnt: Path) -> None:
    for p in mnt.iterdir():
        if p.is_dir() and not p.is_symlink():
            for sub in p.rglob("*"):  # objects are read-only
                if sub.is_dir():
                    sub.chmod(0o755)
            shutil.rmtree(p)
        else:
            p.unlink()


def _fill(mnt: Path, leave: int) -> Path:
    """A filler file taking all but ``leave`` bytes of the file system."""
    filler = mnt / "filler"
    size = max(_free(mnt) - leave, 0)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if size:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return filler


# -- inputs and commands ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("disk-full-inputs")
    rng = np.random.default_rng(SEED)
    labels = rng.integers(0, K, N)
    np.save(base / "labels.npy", labels)
    (base / "classes.txt").write_text("".join(f"kind{c}\n" for c in range(K)))
    raw = rng.random((N, K)) + np.eye(K)[labels] * 1.5
    np.save(base / "probs.npy", raw / raw.sum(axis=1, keepdims=True))
    records = [
        {
            "id": int(i),
            "given_original_label": int(labels[i]),
            "our_guessed_label": int((labels[i] + 1) % K),
            "mturk": {"given": int(rng.integers(0, 6)), "guessed": int(rng.integers(0, 6))},
        }
        for i in sorted(rng.choice(N, 400, replace=False))
    ]
    (base / "votes.json").write_text(json.dumps(records))
    tree = base / "tree"
    for c in range(4):
        (tree / f"class{c}").mkdir(parents=True)
        for i in range(60):
            (tree / f"class{c}" / f"{i:03d}.bin").write_bytes(
                rng.bytes(int(rng.integers(10, 9000)))
            )
    many = base / "many"
    for c in range(3):
        (many / f"c{c}").mkdir(parents=True)
        for i in range(700):
            (many / f"c{c}" / f"{i:03d}.bin").write_bytes(rng.bytes(int(rng.integers(10, 300))))
    pq.write_table(
        pa.table(
            {
                "example_id": [f"row/{i}" for i in range(N)],
                "label": [f"kind{int(v)}" for v in labels],
                "weight": rng.random(N),
            }
        ),
        base / "table.parquet",
    )
    return {
        "many": many,
        "table": base / "table.parquet",
        "labels": base / "labels.npy",
        "classes": base / "classes.txt",
        "probs": base / "probs.npy",
        "votes": base / "votes.json",
        "tree": tree,
    }


@dataclass(frozen=True)
class Case:
    name: str
    prepare: Callable[[Path, dict[str, Path]], None]
    args: Callable[[dict[str, Path]], list[str]]
    keys: tuple[str, ...]  # JSON fields that must equal a clean run's
    tag: tuple[str, str]
    levels: tuple[int, int] = (LEVELS, LAST_PAGES)


def _nothing(reg: Path, inp: dict[str, Path]) -> None:
    pass


CASES = [
    Case(
        "add-tree",
        _nothing,
        lambda inp: ["add", "pics", str(inp["tree"]), "--tag", "original", "--json"],
        ("snapshot", "revision"),
        ("pics", "original"),
    ),
    # 2,100 files: the add stages them in worker processes (one batch, syncfs per wave).
    Case(
        "add-tree-workers",
        _nothing,
        lambda inp: ["add", "many", str(inp["many"]), "--tag", "original", "--json"],
        ("snapshot", "revision"),
        ("many", "original"),
        levels=(8, 4),
    ),
    Case(
        "add-table",
        _nothing,
        lambda inp: ["add", "tab", "--table", str(inp["table"]), "--tag", "original", "--json"],
        ("snapshot", "revision"),
        ("tab", "original"),
    ),
    Case(
        "add-labels",
        _nothing,
        lambda inp: [*add_labels_args(inp), "--json"],
        ("snapshot", "revision"),
        ("lab", "original"),
    ),
    Case(
        "tag",
        add_labels,
        lambda inp: ["tag", "lab@paper", "lab@original", "--view", "cleaned", "--json"],
        ("revision",),
        ("lab", "paper"),
    ),
    Case(
        "import-votes",
        add_labels,
        lambda inp: [
            "overlay",
            "import-votes",
            "lab@original",
            str(inp["votes"]),
            "--tag",
            "validated",
            "--json",
        ],
        ("overlay", "tagged"),
        ("lab", "validated"),
    ),
    Case(
        "detect",
        add_labels,
        lambda inp: [
            "detect",
            "lab@original",
            "--pred-probs",
            str(inp["probs"]),
            "--tag",
            "detected",
            "--json",
        ],
        ("overlay", "tagged"),
        ("lab", "detected"),
    ),
]


def _tag_state(reg: Path, dataset: str, tag: str) -> tuple[str | None, int]:
    """(the digest the tag names, or None; its tag lines in the log)."""
    ref = reg / "refs" / dataset / tag
    log = reg / "logs" / f"{dataset}.jsonl"
    lines = 0
    if log.exists():
        for raw in log.read_bytes().splitlines():
            try:
                e = json.loads(raw)
            except ValueError:
                continue  # a torn line is the log's own business (verify reports it)
            lines += e.get("event") == "tag" and e.get("tag") == tag
    return (ref.read_text().strip() if ref.exists() else None), lines


def _check_visible(reg: Path, case: Case, where: str) -> str | None:
    """verify passes, every tag names a stored object, and the case's tag exists exactly when
    its one log line does. Returns the digest the tag names."""
    check = run("verify", "--registry", str(reg))
    assert check.code == 0 and check.crash is None, (where, check.out, check.err, check.crash)
    check_tags(reg, where)
    named, lines = _tag_state(reg, *case.tag)
    assert lines == (named is not None), (where, "tag", named, "log lines", lines)
    return named


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_full_disk_at_any_point_is_a_clear_error_and_leaves_nothing_partial(
    case: Case, small_fs: Path, inputs: dict[str, Path]
) -> None:
    reg = small_fs / "reg"

    def fresh() -> None:
        _clear(small_fs)
        ok("init", "--registry", str(reg))
        case.prepare(reg, inputs)

    args = [*case.args(inputs), "--registry", str(reg)]
    fresh()
    before = _free(small_fs)
    clean = ok(*args)
    need = before - _free(small_fs)
    expected = tuple(json.loads(clean.out)[k] for k in case.keys)
    assert need > 0

    outcomes: dict[str, int] = {"refused": 0, "succeeded": 0}
    # Spread over the whole write, and page by page over its last pages (manifests, the log
    # line, the ref), where the steps that must go together are.
    page = os.statvfs(small_fs).f_frsize
    n_spread, n_last = case.levels
    spread = {need * i // (n_spread - 1) for i in range(n_spread)}
    last = {max(need - page * j, 0) for j in range(n_last)}
    levels = sorted(spread | last | {need + page, 2 * need})
    errors: set[str] = set()
    for leave in levels:
        where = f"{case.name} with {leave} of {need} bytes free"
        fresh()
        filler = _fill(small_fs, leave)
        res = run(*args)
        assert res.crash is None, (where, res.crash)
        assert res.code in (0, 1), (where, res.code, res.err)
        if res.code == 1:
            outcomes["refused"] += 1
            assert res.err.startswith("Error: "), (where, res.err)
            assert "Traceback" not in res.err, (where, res.err)
            errors.add(re.sub(r"[0-9a-f]{12,}", "<digest>", res.err.strip())[:150])
        else:
            outcomes["succeeded"] += 1
            assert tuple(json.loads(res.out)[k] for k in case.keys) == expected, where
        named = _check_visible(reg, case, where)
        if res.code == 1:
            assert named is None, (where, "a refused command left its tag", named)

        filler.unlink()
        again = run(*args)
        assert again.code == 0 and again.crash is None, (where, again.err, again.crash)
        assert tuple(json.loads(again.out)[k] for k in case.keys) == expected, where
        assert _check_visible(reg, case, where + ", run again") is not None
    print(f"\n{case.name}: {len(levels)} levels of free space, {outcomes}")
    for e in sorted(errors):
        print("   ", e[:160])
    assert outcomes["refused"] >= 1, "no level was small enough to fill the disk"
    assert outcomes["succeeded"] >= 1, "no level was large enough for the command"
