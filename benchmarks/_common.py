"""Helpers every benchmark shares: test trees, timed subprocess runs with peak memory, reports,
and the one way a target is declared and checked.

A benchmark declares each of its targets once, as a module-level :class:`Target` beside the
code that measures it (``EVAL_SPEED = Target("DuckDB join / dsreg eval", ">=", 10)``), and checks
them through one :class:`Checks` per run: ``checks.check(EVAL_SPEED, ratio)`` prints the figure
against the target with PASS or FAIL, and ``checks.finish()`` prints the tally with the commit
the run measured (``git rev-parse --short HEAD``, ``+dirty`` when tracked files differ from it)
and is the script's exit status: 1 if any target was missed, or declared and not measured.

Each measurement runs the tool as its real command line in a fresh subprocess, timed by wall
clock. Memory is measured two ways: the largest process's peak resident set size as the kernel
accounts it (from ``/usr/bin/time`` when present, else ``getrusage(RUSAGE_CHILDREN)`` in a fresh
wrapper process), and the peak of the summed PSS of the whole process tree, sampled every
20 ms (what comparisons use: a tool that forks workers must pay for all of them). CPU time
(user + system) is the kernel's account of the command's process tree, in microseconds.
"""

from __future__ import annotations

import compileall
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DSREG",
    "DVC",
    "PYTHON",
    "REPO",
    "Checks",
    "Measurement",
    "Series",
    "Target",
    "commit",
    "dvc_project",
    "evict",
    "fresh_dir",
    "machine",
    "make_imagefolder",
    "measure",
    "tree_bytes",
    "warm",
]

REPO = Path(__file__).resolve().parents[1]
PYTHON = os.environ.get("DSREG_BENCH_PYTHON", sys.executable)
DSREG = [PYTHON, "-m", "dsreg"]
DVC = [os.environ.get("DSREG_BENCH_DVC", str(Path(PYTHON).with_name("dvc")))]
# What both tools run with: dsreg from this checkout, DVC without analytics or prompts.
TOOL_ENV = {"PYTHONPATH": str(REPO), "DVC_NO_ANALYTICS": "1", "GIT_TERMINAL_PROMPT": "0"}
# dsreg runs from this checkout, DVC from site-packages, where pip compiled its bytecode at
# install time. Compile dsreg's the same way (as installing it would): where
# PYTHONDONTWRITEBYTECODE is set, every dsreg command would otherwise compile its modules
# from source again (20 to 50 ms a command), and DVC's never.
compileall.compile_dir(REPO / "dsreg", quiet=1)
_TIME = "/usr/bin/time"

# Runs a command and reports its peak RSS when /usr/bin/time is missing: a fresh interpreter
# has no other children, so RUSAGE_CHILDREN is this one command's (and its descendants') peak.
_WRAPPER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "open(sys.argv[1], 'w').write(f'{u.ru_maxrss} {u.ru_utime + u.ru_stime}')\n"
    "sys.exit(rc)\n"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    seconds: float
    # The largest single process's peak RSS (the kernel's figure, from /usr/bin/time).
    peak_rss_mib: float
    # User + system CPU seconds: steadier than wall time on a machine others are using.
    cpu_seconds: float | None = None
    # The peak, sampled every 20 ms, of the summed PSS (proportional set size: a page shared
    # by n processes counts 1/n in each) of the command and every process below it. The fair
    # figure when a tool forks workers: their RSS would count shared pages twice, and the
    # kernel's peak RSS above counts only the largest process.
    peak_tree_pss_mib: float | None = None

    @property
    def memory_mib(self) -> float:
        """What memory comparisons use: the process tree's peak PSS where it was sampled."""
        if self.peak_tree_pss_mib is not None:
            return max(self.peak_tree_pss_mib, 0.0)
        return self.peak_rss_mib

    def to_dict(self) -> dict[str, float | None]:
        return {
            "seconds": round(self.seconds, 3),
            "cpu_seconds": None if self.cpu_seconds is None else round(self.cpu_seconds, 3),
            "peak_rss_mib": round(self.peak_rss_mib, 1),
            "peak_tree_pss_mib": (
                None if self.peak_tree_pss_mib is None else round(self.peak_tree_pss_mib, 1)
            ),
        }


@dataclass(slots=True, kw_only=True)
class Series:
    """Repeated measurements of one command; the report uses medians."""

    name: str
    runs: list[Measurement] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(m.seconds for m in self.runs)

    @property
    def peak_rss_mib(self) -> float:
        return statistics.median(m.peak_rss_mib for m in self.runs)

    @property
    def cpu_seconds(self) -> float | None:
        cpu = [m.cpu_seconds for m in self.runs if m.cpu_seconds is not None]
        return statistics.median(cpu) if cpu else None

    @property
    def memory_mib(self) -> float:
        """Median of each run's ``Measurement.memory_mib`` (process-tree peak PSS)."""
        return statistics.median(m.memory_mib for m in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "median_seconds": round(self.seconds, 3),
            "median_peak_rss_mib": round(self.peak_rss_mib, 1),
            "median_peak_tree_pss_mib": (
                round(self.memory_mib, 1)
                if all(m.peak_tree_pss_mib is not None for m in self.runs)
                else None  # not sampled (timed runs): not the RSS it would fall back to
            ),
            "median_cpu_seconds": None if self.cpu_seconds is None else round(self.cpu_seconds, 3),
            "runs": [m.to_dict() for m in self.runs],
        }


def machine() -> dict[str, Any]:
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // (1024 * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpus": os.cpu_count(),
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def reused(work: Path, params: dict[str, Any]) -> bool:
    """Whether ``work`` holds a set generated with ``params`` (its ``params.json``, which
    ``mark_generated`` writes last). If not, ``work`` is emptied (read-only store objects
    included) and made again, for the caller to generate into."""
    marker = work / "params.json"
    if marker.is_file() and json.loads(marker.read_text()) == params:
        return True
    if work.exists():
        for p in work.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return False


def mark_generated(work: Path, params: dict[str, Any]) -> None:
    """Record that ``work`` holds the set of ``params`` (after everything is written)."""
    (work / "params.json").write_text(json.dumps(params))


def fresh_dir(path: Path) -> Path:
    """``path`` emptied (read-only files included: store objects and hard links are 0444)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def make_imagefolder(
    root: Path,
    *,
    files: int,
    classes: int,
    min_bytes: int = 8 * 1024,
    max_bytes: int = 24 * 1024,
    seed: int = 0,
) -> Path:
    """An ImageFolder tree of ``files`` random-byte files over ``classes`` folders.

    Reused when a marker beside it records the same parameters (the marker lives outside the
    tree, so no tool sees it as data).
    """
    params = {"files": files, "classes": classes, "min": min_bytes, "max": max_bytes, "seed": seed}
    marker = root.with_name(root.name + ".params.json")
    if root.is_dir() and marker.is_file() and json.loads(marker.read_text()) == params:
        return root
    if root.exists():
        shutil.rmtree(root)
    marker.unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    sizes = rng.integers(min_bytes, max_bytes + 1, size=files)
    for c in range(classes):
        (root / f"n{c:08d}").mkdir(parents=True)
    for i, size in enumerate(sizes):
        c = i % classes
        (root / f"n{c:08d}" / f"img_{i:08d}.bin").write_bytes(rng.bytes(int(size)))
    marker.write_text(json.dumps(params))
    return root


SETTLE = 65.0


def clear_runs(path: Path, say: Callable[[str], None], *, settle: bool = True) -> None:
    """Remove an earlier run's folders, then wait: ext4 without a journal (this benchmark's VM)
    will not reuse an inode freed in the last minute, and pays for every one it steps over
    when it allocates, so creating files right after a mass deletion is several times slower
    for whichever tool comes next. Every measurement therefore writes into folders of its own,
    removed only at the end."""
    if not path.exists():
        return
    say(f"removing {path}")
    shutil.rmtree(path)
    os.sync()
    if settle:
        time.sleep(SETTLE)


def evict(*roots: Path) -> int:
    """Drop every file under ``roots`` from the page cache (``sync``, then
    ``POSIX_FADV_DONTNEED`` on each file), so the next reader reads them from disk: what
    ``echo 1 > /proc/sys/vm/drop_caches`` does for these files, without root and without
    disturbing anyone else's cache. Inodes and directory entries stay cached (dropping them
    needs ``drop_caches``). Returns how many files were dropped."""
    os.sync()
    n = 0
    for root in roots:
        for d, _dirs, names in os.walk(root):
            for f in names:
                try:
                    fd = os.open(os.path.join(d, f), os.O_RDONLY | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                finally:
                    os.close(fd)
    return n


def warm(*roots: Path) -> None:
    """Read every file under ``roots`` so they sit in the page cache.

    Some kernels reclaim cold page cache proactively (DAMON on this benchmark's VM), so a tree
    written minutes ago may be back on disk: every measurement starts from the same warm state.
    """
    for root in roots:
        for d, _dirs, names in os.walk(root):
            for f in names:
                with open(os.path.join(d, f), "rb", buffering=0) as fh:
                    while fh.read(1 << 20):
                        pass


def tree_bytes(root: Path) -> int:
    return sum(
        os.stat(os.path.join(d, f)).st_size for d, _dirs, names in os.walk(root) for f in names
    )


def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def measure(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    quiet: bool = True,
    sample_memory: bool = True,
) -> Measurement:
    """Run ``cmd`` once: wall-clock seconds and peak RSS. Raises if the command fails.

    Dirty pages from earlier steps are flushed first (``sync``), so one tool's write-back is
    never billed to the next one. With ``sample_memory``, the process tree's peak PSS too
    (``_TreeSampler``); that sampling costs CPU (about 0.1 s per second measured, reading
    ``smaps_rollup``), which a single-threaded tool never notices (it runs on an idle CPU) and a
    tool that keeps every CPU busy pays in wall time: time comparisons between such tools
    measure without it, and memory in runs of their own.
    """
    os.sync()
    full_env = {**os.environ, **(env or {})}
    before = _children_cpu()
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        if os.access(_TIME, os.X_OK):
            wrapped = [_TIME, "-f", "%M %U %S", "-o", rss.name, *cmd]
        else:
            wrapped = [sys.executable, "-c", _WRAPPER, rss.name, *cmd]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            wrapped,
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE if quiet else None,
            stderr=subprocess.PIPE if quiet else None,
            text=True,
        )
        sampler = _TreeSampler(proc.pid, enabled=sample_memory)
        sampler.start()
        stdout, stderr = proc.communicate()
        seconds = time.perf_counter() - t0
        sampler.stop()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{stdout}\n{stderr}")
        fields = rss.read().strip().splitlines()[-1].split()
    kib = int(fields[0])
    # The command's CPU from the kernel's own accounting of the children this process has
    # reaped (microseconds; only this command ran since ``before``): /usr/bin/time prints
    # hundredths, too coarse for a 50 ms command. The Python wrapper reports its children's.
    cpu = _children_cpu() - before if wrapped[0] == _TIME else float(fields[1])
    return Measurement(
        seconds=seconds,
        peak_rss_mib=kib / 1024,
        cpu_seconds=cpu,
        peak_tree_pss_mib=sampler.peak_mib,
    )


class _TreeSampler:
    """Every 20 ms, the summed PSS of a process and all its descendants; keeps the peak. The
    wrapper processes (``/usr/bin/time``, the Python wrapper) are in the tree too: a few MiB,
    the same for every tool measured."""

    def __init__(self, pid: int, *, enabled: bool = True) -> None:
        self.pid = pid
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ok = enabled and os.path.exists(f"/proc/{pid}/smaps_rollup")

    @property
    def peak_mib(self) -> float | None:
        return self.peak_kib / 1024 if self._ok else None

    def start(self) -> None:
        if self._ok:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._ok:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = sum(_pss_kib(p) for p in _tree(self.pid))
            self.peak_kib = max(self.peak_kib, total)
            self._stop.wait(0.02)


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
            except OSError:
                continue
    return out


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def commit(repo: Path = REPO) -> str:
    """The commit ``repo`` is at (``git rev-parse --short HEAD``), with ``+dirty`` when a
    tracked file differs from it; ``unknown`` outside a git checkout."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise OSError(proc.stderr.strip())
        return proc.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return "unknown"
    return head + ("+dirty" if dirty else "")


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
}


@dataclass(frozen=True, slots=True)
class Target:
    """A figure a benchmark holds dsreg to: ``figure OP bound``, the figure in ``unit``
    (``x`` for a ratio, ``s``, ``ms``, ``MiB`` or ``%``). Declared once, at the top of the
    benchmark that measures it; docs/benchmarks.md quotes the same."""

    name: str
    op: str
    bound: float
    unit: str = "x"

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"target {self.name!r}: op {self.op!r} is not one of {list(_OPS)}")

    def met(self, figure: float) -> bool:
        return _OPS[self.op](figure, self.bound)

    def shown(self, figure: float) -> str:
        """A figure in this target's unit."""
        if self.unit == "x":
            return f"{figure:.2f}x"
        if self.unit == "%":
            return f"{figure:.2f}%"
        if self.unit == "MiB":
            return f"{figure:,.0f} MiB"
        return f"{figure:.3f} {self.unit}"

    def __str__(self) -> str:
        bound = f"{self.bound:g}x" if self.unit == "x" else f"{self.bound:g} {self.unit}"
        return f"{self.op} {bound}"


@dataclass(slots=True)
class Checks:
    """The targets one run of a benchmark checked, each printed as it is checked; the tally and
    the exit status come from :meth:`finish`."""

    bench: str
    at: str = field(default_factory=commit)  # the commit measured
    results: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        print(f"{self.bench}: measuring commit {self.at}", flush=True)

    def check(self, target: Target, figure: float | None, detail: str = "") -> bool:
        """Whether ``figure`` meets ``target``, printed; ``None``: declared and not measured
        (a step left out), which misses it."""
        passed = figure is not None and target.met(figure)
        got = "not measured" if figure is None else target.shown(figure)
        verdict = "PASS" if passed else "FAIL"
        more = f"  {detail}" if detail else ""
        print(f"  {verdict}  {target.name:<58} {got:>12}  (target {target}){more}", flush=True)
        self.results.append(
            {"target": target.name, "op": target.op, "bound": target.bound, "unit": target.unit,
             "figure": figure, "pass": passed}
        )  # fmt: skip
        return passed

    def holds(self, name: str, ok: bool, detail: str = "") -> bool:
        """A condition the run must meet (every tool computed the same counts), printed."""
        more = f"  {detail}" if detail else ""
        print(f"  {'PASS' if ok else 'FAIL'}  {name}{more}", flush=True)
        self.results.append({"target": name, "pass": ok})
        return ok

    @property
    def passed(self) -> bool:
        return all(r["pass"] for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.bench, "commit": self.at, "checks": self.results,
                "pass": self.passed}  # fmt: skip

    def finish(self) -> int:
        """Print the tally with the commit; the exit status: 0 if every target passed."""
        missed = [r["target"] for r in self.results if not r["pass"]]
        tally = f"{len(self.results) - len(missed)} of {len(self.results)} targets met"
        if missed:
            tally += "; MISSED: " + "; ".join(missed)
        print(f"{self.bench} at commit {self.at}: {tally}", flush=True)
        return 1 if missed else 0


def run_tool(cmd: list[str], cwd: Path) -> str:
    """Run a set-up step (not measured) in ``TOOL_ENV``; its stdout. Raises if it fails."""
    proc = subprocess.run(
        cmd, cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **TOOL_ENV}
    )
    return proc.stdout


def measure_tool(cmd: list[str], cwd: Path, *, sample_memory: bool = True) -> Measurement:
    """``measure`` in ``TOOL_ENV``."""
    return measure(cmd, cwd=cwd, env=TOOL_ENV, sample_memory=sample_memory)


def dvc_project(proj: Path, site: Path, *, cache_type: str) -> None:
    """A fresh git + DVC project at ``proj``: no analytics or update check, its state in
    ``site`` (``core.site_cache_dir``, emptied: no run reuses an earlier one's hashes), and
    ``cache.type`` set to ``cache_type``."""
    fresh_dir(proj)
    fresh_dir(site)
    run_tool(["git", "init", "-q"], proj)
    run_tool([*DVC, "init", "-q"], proj)
    for key, value in (
        ("core.analytics", "false"),
        ("core.check_update", "false"),
        ("core.site_cache_dir", str(site)),
        ("cache.type", cache_type),
    ):
        run_tool([*DVC, "config", key, value], proj)
