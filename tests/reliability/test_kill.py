"""kill -9 at a random moment of every writing command (docs/concepts.md, "Guarantees").

For each writing command other than checkout and pull (their kills live in test_checkout_*.py
and test_remote_*.py): add of an ImageFolder tree of a few thousand small files, add --labels,
add --table, tag, overlay import-votes, detect, push to a folder remote, gc and import-dvc. Each
round copies a prepared registry, runs the command in a fresh process, sends SIGKILL after a
delay drawn from a seeded generator (within the time an uninterrupted run took), and then holds
the guarantees of docs/concepts.md:

- ``dsreg verify`` passes (exit 0) and no tag names an object the store lacks;
- no worker process outlives the killed command;
- re-running the command succeeds and gives what an uninterrupted run gave (its digests, or for
  gc the objects kept, for push what the remote holds), with one log line per tag written;
- nothing is left behind that gc does not clean: once tmp/'s entries are older than gc's grace
  period (an hour; their mtimes are set back, as the passing of time would), gc leaves tmp/
  empty, and the registry holds nothing but its own folders, objects under their digests, refs
  and logs.

``DSREG_KILL_ROUNDS`` sets the rounds per command (default 6; import-dvc runs fewer, it is
slow). Each test prints its rounds and how many kills landed before the command finished.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from inprocess import Ran, add_labels, add_labels_args, check_tags, ok, run

import dsreg

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("DSREG_KILL_ROUNDS", "6"))
SEED = 1124
REPO = Path(dsreg.__file__).resolve().parents[1]
HEX = re.compile(r"[0-9a-f]+")
ROOT_ENTRIES = {"config.toml", "files", "refs", "logs", "tmp", "state", "lock"}
# The stat cache, and the memo of manifests that passed their schema check.
STATE_FILES = re.compile(
    r"stat\.sqlite(-wal|-shm|-journal)?|clock|schema-checked/[0-9a-f]{16}/[0-9a-f]{64}"
)
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")

# The child imports what the commands need, says so, then runs the command line: the kill lands
# in the command's own work, not in the interpreter's start-up.
CHILD = (
    "import sys\n"
    "from dsreg.cli import main\n"
    "import numpy, pyarrow, pyarrow.parquet\n"
    "open(sys.argv[1], 'w').close()\n"
    "main(sys.argv[2:])\n"
)
N_LABELS = 60_000
N_CLASSES = 10
TREE_CLASSES, TREE_PER_CLASS = 10, 250  # 2,500 files: an add uses its worker processes


# -- running dsreg -----------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["DVC_NO_ANALYTICS"] = "1"
    return env


def _group_alive(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            alive.append(int(entry))
    return alive


@dataclass
class Killed:
    finished: bool  # the command ended before the kill came
    code: int | None


def _run_child(args: list[str], cwd: Path, *, kill_after: float | None) -> tuple[float, Ran]:
    """Run ``dsreg ARGS`` in a fresh process; with ``kill_after``, SIGKILL it that many seconds
    after it is ready. Returns (seconds from ready to exit, output)."""
    ready = cwd / f"ready-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ready), *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not ready.exists():
            assert proc.poll() is None or ready.exists(), proc.communicate()
            assert time.monotonic() < deadline, "the child never became ready"
            time.sleep(0.002)
        start = time.monotonic()
        if kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - start
        # Workers die with the parent (docs/concepts.md, "Worker processes").
        deadline = time.monotonic() + 15
        while (left := _group_alive(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"worker processes {left} outlived the killed command {args}"
        return took, Ran(proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in _group_alive(proc.pid):  # only the processes this test started
            os.kill(pid, signal.SIGKILL)


# -- the registry after the kill ---------------------------------------------------------------


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _check_no_junk(reg: Path) -> None:
    """Age tmp/'s entries past gc's grace period, gc, and find nothing but the registry's own."""
    tmp = reg / "tmp"
    old = time.time() - 2 * 3600
    for p in tmp.rglob("*") if tmp.is_dir() else ():
        os.utime(p, (old, old), follow_symlinks=False)
    if tmp.is_dir():
        os.utime(tmp, (old, old))
    ok("gc", "--registry", str(reg))
    left = sorted(os.listdir(tmp)) if tmp.is_dir() else []
    assert left == [], f"gc left {left} in tmp/"
    assert set(os.listdir(reg)) <= ROOT_ENTRIES, sorted(os.listdir(reg))
    for rel in _listing(reg / "files"):
        algo, a, b = rel.split("/")
        assert algo == "blake3" and len(a) == 2 and len(b) == 62, rel
        assert HEX.fullmatch(a + b), rel
    for rel in _listing(reg / "refs"):
        ds, tag = rel.split("/")
        assert NAME.fullmatch(ds) and NAME.fullmatch(tag), rel
    for rel in _listing(reg / "logs"):  # a dataset's log, and the lock its writers share
        name = rel.removesuffix(".jsonl") if rel.endswith(".jsonl") else rel[1:-5]
        assert rel in (f"{name}.jsonl", f".{name}.lock") and NAME.fullmatch(name), rel
    for rel in _listing(reg / "state"):
        assert STATE_FILES.fullmatch(rel), rel


def _tag_lines(reg: Path, dataset: str, tag: str) -> int:
    log = reg / "logs" / f"{dataset}.jsonl"
    if not log.exists():
        return 0
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return sum(1 for e in lines if e.get("event") == "tag" and e.get("tag") == tag)


# -- the inputs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("kill-inputs")
    rng = np.random.default_rng(SEED)
    tree = base / "tree"
    for c in range(TREE_CLASSES):
        (tree / f"class{c}").mkdir(parents=True)
        for i in range(TREE_PER_CLASS):
            size = int(rng.integers(64, 640))
            (tree / f"class{c}" / f"img{i:04d}.bin").write_bytes(rng.bytes(size))
    tree2 = base / "tree2"  # another tree: gc's garbage once a tag moves to it
    for c in range(3):
        (tree2 / f"k{c}").mkdir(parents=True)
        for i in range(20):
            (tree2 / f"k{c}" / f"{i}.bin").write_bytes(rng.bytes(100))

    labels = rng.integers(0, N_CLASSES, N_LABELS).astype(np.int64)
    np.save(base / "labels.npy", labels)
    (base / "classes.txt").write_text("".join(f"class {c}\n" for c in range(N_CLASSES)))

    n = N_LABELS
    pq.write_table(
        pa.table(
            {
                "example_id": [f"ex/{i:06d}" for i in range(n)],
                "label": [f"c{int(v)}" for v in labels],
                "weight": rng.random(n),
                "note": [f"note {i % 97}" for i in range(n)],
            }
        ),
        base / "table.parquet",
    )

    raw = rng.random((n, N_CLASSES)).astype(np.float64) + np.eye(N_CLASSES)[labels] * 2
    np.save(base / "probs.npy", raw / raw.sum(axis=1, keepdims=True))

    voted = rng.choice(n, 4000, replace=False)
    records = []
    for i in sorted(int(v) for v in voted):
        given = int(labels[i])
        records.append(
            {
                "id": i,
                "given_original_label": given,
                "our_guessed_label": (given + 1 + int(rng.integers(0, N_CLASSES - 1))) % N_CLASSES,
                "mturk": {
                    "given": int(rng.integers(0, 6)),
                    "guessed": int(rng.integers(0, 6)),
                    "both": int(rng.integers(0, 3)),
                    "neither": int(rng.integers(0, 3)),
                },
            }
        )
    (base / "votes.json").write_text(json.dumps(records))
    return {
        "base": base,
        "tree": tree,
        "tree2": tree2,
        "labels": base / "labels.npy",
        "classes": base / "classes.txt",
        "table": base / "table.parquet",
        "probs": base / "probs.npy",
        "votes": base / "votes.json",
    }


# -- the commands -------------------------------------------------------------------------------

Args = Callable[[Path, Path, dict[str, Path]], list[str]]  # (registry, round folder, inputs)
Outcome = Callable[[Path, Path, Ran], object]  # what a run gave, to compare with a clean run


@dataclass(frozen=True)
class Case:
    name: str
    prepare: Callable[[Path, dict[str, Path]], None]
    args: Args
    outcome: Outcome
    tag: tuple[str, str] | None  # the tag the command writes: one log line after the re-run
    rounds: int = ROUNDS


def _digests(*keys: str) -> Outcome:
    return lambda reg, where, res: tuple(res.json()[k] for k in keys)


def _objects_kept(reg: Path, where: Path, res: Ran) -> object:
    return _listing(reg / "files")


def _remote_holds(reg: Path, where: Path, res: Ran) -> object:
    remote = where / "remote"
    files = {
        rel: (remote / rel).read_bytes() if rel.startswith("refs/") else b""
        for rel in _listing(remote)
        if rel.startswith(("files/", "refs/"))
    }
    return files


def _nothing(reg: Path, inp: dict[str, Path]) -> None:
    pass


def _prepare_gc(reg: Path, inp: dict[str, Path]) -> None:
    # The tree's objects become garbage once its tag moves on and the log may let them go.
    ok("add", "big", str(inp["tree"]), "--tag", "t", "--registry", str(reg))
    ok("add", "big", str(inp["tree2"]), "--tag", "t", "--force", "--registry", str(reg))
    add_labels(reg, inp)
    ok("detect", "lab@original", "--pred-probs", str(inp["probs"]), "--registry", str(reg))


def _prepare_push(reg: Path, inp: dict[str, Path]) -> None:
    ok("add", "big", str(inp["tree"]), "--tag", "original", "--registry", str(reg))
    add_labels(reg, inp)
    ok(
        "detect",
        "lab@original",
        "--pred-probs",
        str(inp["probs"]),
        "--tag",
        "detected",
        "--registry",
        str(reg),
    )


def _check_remote(where: Path) -> None:
    """A remote's tags come last: every tag it holds names an object it holds; and below its
    refs/ are tags only (a push stages a tag's new value in the remote's tmp/)."""
    remote = where / "remote"
    if remote.is_dir():
        check_tags(remote)
        for rel in _listing(remote / "refs"):
            ds, tag = rel.split("/")
            assert NAME.fullmatch(ds) and NAME.fullmatch(tag), rel


CASES = [
    Case(
        "add-tree",
        _nothing,
        lambda reg, where, inp: ["add", "big", str(inp["tree"]), "--tag", "original", "--json"],
        _digests("snapshot", "revision"),
        ("big", "original"),
    ),
    Case(
        "add-labels",
        _nothing,
        lambda reg, where, inp: [*add_labels_args(inp), "--json"],
        _digests("snapshot", "revision"),
        ("lab", "original"),
    ),
    Case(
        "add-table",
        _nothing,
        lambda reg, where, inp: [
            "add",
            "tab",
            "--table",
            str(inp["table"]),
            "--tag",
            "original",
            "--json",
        ],
        _digests("snapshot", "revision"),
        ("tab", "original"),
    ),
    Case(
        "tag",
        add_labels,
        lambda reg, where, inp: ["tag", "lab@paper", "lab@original", "--view", "cleaned", "--json"],
        _digests("revision"),
        ("lab", "paper"),
    ),
    Case(
        "import-votes",
        add_labels,
        lambda reg, where, inp: [
            "overlay",
            "import-votes",
            "lab@original",
            str(inp["votes"]),
            "--tag",
            "validated",
            "--json",
        ],
        _digests("overlay", "tagged"),
        ("lab", "validated"),
    ),
    Case(
        "detect",
        add_labels,
        lambda reg, where, inp: [
            "detect",
            "lab@original",
            "--pred-probs",
            str(inp["probs"]),
            "--tag",
            "detected",
            "--json",
        ],
        _digests("overlay", "tagged"),
        ("lab", "detected"),
    ),
    Case(
        "push",
        _prepare_push,
        lambda reg, where, inp: ["push", "-r", str(where / "remote"), "--json"],
        _remote_holds,
        None,
    ),
    Case(
        "gc",
        _prepare_gc,
        lambda reg, where, inp: ["gc", "--prune-log-older-than", "now", "--json"],
        _objects_kept,
        None,
    ),
]


def _kill_rounds(case: Case, base: Path, inp: dict[str, Path]) -> dict[str, int]:
    pristine = base / "pristine" / ".dsreg"
    ok("init", "--registry", str(pristine))
    case.prepare(pristine, inp)

    def fresh(name: str) -> tuple[Path, Path]:
        where = base / name
        where.mkdir()
        shutil.copytree(pristine, where / ".dsreg", symlinks=True)
        return where / ".dsreg", where

    reg, where = fresh("clean")
    args = [*case.args(reg, where, inp), "--registry", str(reg)]
    took, clean = _run_child(args, where, kill_after=None)
    assert clean.code == 0, clean.err
    expected = case.outcome(reg, where, clean)

    rng = random.Random(f"{SEED}-{case.name}")
    stats = {"rounds": 0, "killed": 0, "finished_first": 0}
    # A round whose command finished before its kill came still checks the re-run, but does
    # not count: rounds go on until ``case.rounds`` kills landed (at most twice as many rounds).
    for r in range(2 * case.rounds):
        if stats["killed"] == case.rounds:
            break
        reg, where = fresh(f"round{r}")
        args = [*case.args(reg, where, inp), "--registry", str(reg)]
        _, killed = _run_child(args, where, kill_after=rng.uniform(0.0, 0.8 * took))
        stats["rounds"] += 1
        if killed.code == -signal.SIGKILL:
            stats["killed"] += 1
        else:
            assert killed.code == 0, (case.name, r, killed.err)
            stats["finished_first"] += 1
        where_ = f"{case.name}, round {r}"

        check = run("verify", "--registry", str(reg))
        assert check.code == 0, (where_, check.out, check.err, check.crash)
        check_tags(reg, where_)
        if case.name == "push":
            _check_remote(where)

        again = run(*args)
        assert again.code == 0, (where_, again.out, again.err, again.crash)
        assert case.outcome(reg, where, again) == expected, where_
        if case.tag is not None:
            assert _tag_lines(reg, *case.tag) == 1, (where_, "log lines of", case.tag)
        _check_no_junk(reg)
        assert run("verify", "--registry", str(reg)).code == 0, where_
        shutil.rmtree(where)
    print(f"\n{case.name}: {stats}")
    return stats


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_command_killed_at_a_random_moment_leaves_a_registry_that_verifies_and_reruns(
    case: Case, inputs: dict[str, Path], tmp_path: Path
) -> None:
    stats = _kill_rounds(case, tmp_path, inputs)
    assert stats["killed"] >= 1, stats


# -- import-dvc ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dvc_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A git + DVC project whose data/val is an ImageFolder tree of a few hundred files."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: import-dvc needs a git repository")
    mp = pytest.MonkeyPatch()
    for var in ("DVC_SITE_CACHE_DIR", "DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR"):
        mp.setenv(var, str(tmp_path_factory.mktemp(var.lower())))
    repo = tmp_path_factory.mktemp("dvc-project")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"DVC_NO_ANALYTICS": "1", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}

    def tool(*args: str) -> None:
        cmd = [sys.executable, "-m", "dvc", *args[1:]] if args[0] == "dvc" else list(args)
        proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)

    tool("git", "init", "-q")
    tool("git", "config", "user.name", "dsreg tests")
    tool("git", "config", "user.email", "tests@dsreg.invalid")
    tool("git", "config", "commit.gpgsign", "false")
    tool("dvc", "init", "-q")
    tool("dvc", "config", "core.analytics", "false")
    rng = np.random.default_rng(SEED)
    for c in range(4):
        (repo / "data" / "val" / f"c{c}").mkdir(parents=True)
        for i in range(100):
            (repo / "data" / "val" / f"c{c}" / f"{i}.bin").write_bytes(rng.bytes(200))
    tool("dvc", "add", "-q", "data/val")
    tool("git", "add", "-A")
    tool("git", "commit", "-q", "-m", "v1")
    yield repo
    mp.undo()


def test_import_dvc_killed_at_a_random_moment(
    dvc_project: Path, inputs: dict[str, Path], tmp_path: Path
) -> None:
    case = Case(
        "import-dvc",
        _nothing,
        lambda reg, where, inp: [
            "import-dvc",
            str(dvc_project),
            "data/val",
            "--as",
            "pets",
            "--tag",
            "original",
            "--json",
        ],
        lambda reg, where, res: (res.json()["snapshot"], res.json()["revision"]),
        ("pets", "original"),
        rounds=max(2, ROUNDS // 2),
    )
    stats = _kill_rounds(case, tmp_path, inputs)
    assert stats["killed"] >= 1, stats


# -- a killed push's staging in the remote -------------------------------------------------------


def test_what_a_killed_push_staged_in_the_remote_goes_once_stale(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    """A push killed while it stages objects in the remote's tmp/, then run again to the end:
    once the staging is older than a day (a running push touches it far more often), the next
    push leaves the remote's tmp/ empty."""
    reg, remote = tmp_path / ".dsreg", tmp_path / "remote"
    ok("init", "--registry", str(reg))
    ok("add", "big", str(inputs["tree"]), "--tag", "original", "--registry", str(reg))
    args = [
        sys.executable,
        "-c",
        CHILD,
        str(tmp_path / "ready"),
        "push",
        "-r",
        str(remote),
        "--registry",
        str(reg),
    ]
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not any(p.is_file() for p in (remote / "tmp").glob("stage-*/**/*")):
            assert proc.poll() is None, "the push ended before it staged anything"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ok("push", "-r", str(remote), "--registry", str(reg))  # to the end
    old = time.time() - 2 * 86400
    for p in [*(remote / "tmp").rglob("*"), remote / "tmp"]:
        os.utime(p, (old, old), follow_symlinks=False)
    ok("push", "-r", str(remote), "--registry", str(reg))
    left = sorted(os.listdir(remote / "tmp")) if (remote / "tmp").is_dir() else []
    assert left == [], f"the remote's tmp/ still holds {left}"
