"""The registry core against DVC 3.x on one ImageFolder tree: add, hard-link checkout, re-add.

    python benchmarks/bench_core.py                    # 50,000 files, 1,000 classes, 3 reps
    python benchmarks/bench_core.py --files 5000 --reps 2

Targets (the ``Target`` declarations below; docs/benchmarks.md): ``dsreg add`` >= 5x faster
than ``dvc add`` (both copying into their caches) with no more peak memory; ``dsreg checkout
--link hardlink`` >= 3x faster than ``dvc checkout`` with ``cache.type hardlink``, and within
1.5x of ``cp -al`` of the same tree, warm and right after the add; re-adding the unchanged tree
>= 10x faster than the first add. Exit status 0 only if every target passes.

The user's order, beside those warm figures: the tree dropped from the page cache
(``evict``: ``POSIX_FADV_DONTNEED`` on every file, as ``drop_caches`` needs root), each tool's
add, then at once its hard-link checkout into a new folder, nothing warmed or dropped between;
then a cold checkout: the tool's cache dropped from the page cache, a checkout into another new
folder. Targets: the checkouts >= 3x faster than DVC's, the cold add >= 5x.

The floor for a hard-link checkout: ``cp -al`` of a copy of the tree (the same folders and
names) into a new folder on the same disk (one ``mkdir`` per folder, one ``linkat`` per file,
nothing checked), timed warm beside each
warm checkout and again right after each add of the user's order. Target: dsreg's hard-link
checkout, warm and right after the add, at most 1.5x ``cp -al``'s time.

Both tools read the same tree, in the page cache (it was just written, the machine has room):
the order of the tools alternates from one repetition to the next, and ``sync`` runs before
every measurement so neither pays for the other's write-back. DVC's state database lives in a
per-repetition ``core.site_cache_dir``, so no repetition reuses an earlier one's hashes.

Times come from runs with no memory sampler; peak memory from adds of their own
(``--memory-reps``), sampling the process tree's PSS every 20 ms. The sampler reads
``smaps_rollup`` (about 0.3 s of CPU over a 3-second add): a single-threaded tool leaves it a
free CPU, while a tool that keeps both CPUs busy would pay it in wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import (
    DSREG,
    DVC,
    Checks,
    Measurement,
    Series,
    Target,
    clear_runs,
    dvc_project,
    evict,
    fresh_dir,
    machine,
    make_imagefolder,
    measure_tool,
    tree_bytes,
    warm,
)
from _common import (
    run_tool as _run,
)


def _m(cmd: list[str], cwd: Path) -> Measurement:
    """A timed run: no memory sampler (its CPU would be billed to whichever tool keeps every
    CPU busy; see ``_common.measure``)."""
    return measure_tool(cmd, cwd, sample_memory=False)


def _m_memory(cmd: list[str], cwd: Path) -> Measurement:
    """A run for memory: the process tree's peak PSS, sampled."""
    return measure_tool(cmd, cwd, sample_memory=True)


ADD = Target("add: dvc / dsreg", ">=", 5)
ADD_MEMORY = Target("add peak memory (tree PSS): dsreg / dvc", "<=", 1)
CHECKOUT = Target("checkout --link hardlink: dvc / dsreg", ">=", 3)
READD = Target("re-add unchanged: first add / re-add", ">=", 10)
COLD_ADD = Target("cold add (tree not cached): dvc / dsreg", ">=", 5)
FLOW_CHECKOUT = Target("checkout right after the add: dvc / dsreg", ">=", 3)
COLD_CHECKOUT = Target("checkout, cache not cached: dvc / dsreg", ">=", 3)
# A hard-link checkout against cp -al of the same tree on the same disk (each makes one link
# per file), right after the add and warm: series "cp_al_after_add" and "cp_al_warm".
LINK_AFTER_ADD = Target("checkout right after the add: dsreg / cp -al", "<=", 1.5)
LINK_WARM = Target("checkout --link hardlink, warm: dsreg / cp -al", "<=", 1.5)


class _Borrowed:
    """Move the tree into a DVC project as ``data`` and back: a rename keeps inodes and the
    page cache, so both tools read the very same files."""

    def __init__(self, tree: Path, proj: Path) -> None:
        self.tree, self.at = tree, proj / "data"

    def __enter__(self) -> Path:
        os.rename(self.tree, self.at)
        return self.at

    def __exit__(self, *exc: object) -> None:
        os.rename(self.at, self.tree)


def _inodes(root: Path) -> dict[str, int]:
    return {
        os.path.join(d, f): os.stat(os.path.join(d, f)).st_ino
        for d, _dirs, names in os.walk(root)
        for f in names
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=50_000, help="files in the tree (50000)")
    ap.add_argument("--classes", type=int, default=1_000, help="class folders (1000)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (3)")
    ap.add_argument(
        "--memory-reps", type=int, default=2, help="adds per tool measured for memory (2)"
    )
    ap.add_argument("--workdir", type=Path, help="where trees, caches and projects go (a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    ap.add_argument(
        "--only",
        choices=("dsreg", "dvc"),
        help="run one tool only: dsreg keeps its targets against itself and cp -al",
    )
    ap.add_argument("--keep", action="store_true", help="keep the caches and checkouts")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dsreg-bench-core-"))
    work = work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    tools = ("dsreg", "dvc") if args.only is None else (args.only,)

    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    say(f"tree: {args.files} files in {args.classes} classes under {work}")
    tree = make_imagefolder(work / "tree", files=args.files, classes=args.classes)
    size = tree_bytes(tree)
    before = _inodes(tree)
    # Every repetition writes into folders of its own, removed only at the end (clear_runs).
    runs = work / "runs"
    clear_runs(runs, say)
    runs.mkdir()

    s = {
        k: Series(name=k)
        for k in (
            "dsreg_add",
            "dsreg_readd",
            "dvc_add",
            "dvc_readd",
            "dsreg_add_memory",
            "dvc_add_memory",
            "cp_r",
            "dsreg_checkout",
            "dvc_checkout",
            "cp_al_warm",
            "dsreg_flow_add",
            "dvc_flow_add",
            "dsreg_flow_checkout",
            "dvc_flow_checkout",
            "cp_al_after_add",
            "dsreg_cold_checkout",
            "dvc_cold_checkout",
        )
    }
    regs: list[Path] = []

    def alternate(
        what: str,
        reps: int,
        steps: dict[str, Callable[[int], None]],
        after: Callable[[int], None] | None = None,
    ) -> None:
        """Each tool's step once per repetition, the order swapped every other repetition;
        ``after(rep)`` at the end of each."""
        for rep in range(reps):
            for tool in tools if rep % 2 == 0 else tools[::-1]:
                say(f"{what}, repetition {rep + 1}/{reps}: {tool}")
                steps[tool](rep)
            if after is not None:
                after(rep)

    def dsreg_add(rep: int, *, memory: bool = False) -> None:
        reg = runs / (f"dsreg-mem-{rep}" if memory else f"dsreg-reg-{rep}")
        _run([*DSREG, "init", "--registry", str(reg)], work)
        cmd = [*DSREG, "add", "bench", str(tree), "--tag", "v1", "--registry", str(reg)]
        warm(tree)
        if memory:
            s["dsreg_add_memory"].runs.append(_m_memory(cmd, work))
            return
        regs.append(reg)
        s["dsreg_add"].runs.append(_m(cmd, work))
        # The same command again: the stat cache answers, no file is read.
        warm(tree)
        s["dsreg_readd"].runs.append(_m(cmd, work))

    def dvc_add(rep: int, *, memory: bool = False) -> None:
        name = f"dvc-mem-{rep}" if memory else f"dvc-add-{rep}"
        proj = runs / name
        dvc_project(proj, runs / f"{name}-site", cache_type="copy")
        cmd = [*DVC, "add", "-q", "data"]
        with _Borrowed(tree, proj):
            warm(proj / "data")
            if memory:
                s["dvc_add_memory"].runs.append(_m_memory(cmd, proj))
                return
            s["dvc_add"].runs.append(_m(cmd, proj))
            # For context (no target): DVC's own re-add, answered by its state database.
            warm(proj / "data")
            s["dvc_readd"].runs.append(_m(cmd, proj))

    def cp(rep: int) -> None:
        # The floor for any tool that copies the tree: cp -r (no hashing, no durability).
        warm(tree)
        s["cp_r"].runs.append(_m(["cp", "-r", str(tree), str(runs / f"cp-{rep}")], work))

    # Timed adds (and cp -r after each repetition), then adds of their own for memory, with the
    # process tree's PSS sampled every 20 ms.
    alternate(
        "add", args.reps, {"dsreg": dsreg_add, "dvc": dvc_add}, cp if args.only is None else None
    )
    alternate(
        "add (memory)",
        args.memory_reps,
        {
            "dsreg": lambda rep: dsreg_add(rep, memory=True),
            "dvc": lambda rep: dvc_add(rep, memory=True),
        },
    )
    if _inodes(tree) != before:
        raise SystemExit("the tree changed under the benchmark (inodes differ); results void")

    # Checkout: both caches filled once (untimed), then a fresh folder each repetition (its
    # files are links: removing them frees no inode).
    co_proj = runs / "dvc-co"
    if "dvc" in tools:
        dvc_project(co_proj, runs / "dvc-co-site", cache_type="copy")
        with _Borrowed(tree, co_proj):
            _run([*DVC, "add", "-q", "data"], co_proj)
        _run([*DVC, "config", "cache.type", "hardlink"], co_proj)
    if "dsreg" in tools and not regs:
        dsreg_add(0)
    target = runs / "dsreg-checkout"

    def dsreg_checkout() -> None:
        reg = regs[-1]
        if target.exists():
            fresh_dir(target).rmdir()
        cmd = [*DSREG, "checkout", "bench@v1", str(target), "--link", "hardlink"]
        warm(reg / "files")
        s["dsreg_checkout"].runs.append(_m([*cmd, "--registry", str(reg)], work))

    def dvc_checkout() -> None:
        data = co_proj / "data"
        if data.exists():
            fresh_dir(data).rmdir()
        warm(co_proj / ".dvc" / "cache")
        s["dvc_checkout"].runs.append(_m([*DVC, "checkout", "-q"], co_proj))

    # cp -al links a copy of the tree (same folders and names), never the tree itself: DVC
    # replaces a file it adds whose link count is above one (a link it made, it assumes).
    link_src = runs / "cp-al-tree"

    def cp_al(series: str, into: Path) -> None:
        # The floor for a hard-link checkout: a link per file and a folder per class, no checks.
        if not link_src.exists():
            _run(["cp", "-r", str(tree), str(link_src)], work)
        s[series].runs.append(_m(["cp", "-al", str(link_src), str(into)], work))

    def cp_al_warm(rep: int) -> None:
        if "dsreg" in tools:
            warm(link_src if link_src.exists() else tree)
            cp_al("cp_al_warm", runs / f"cp-al-{rep}")

    alternate(
        "checkout",
        args.reps,
        {"dsreg": lambda rep: dsreg_checkout(), "dvc": lambda rep: dvc_checkout()},
        cp_al_warm,
    )
    if "dsreg" in tools:
        n = sum(len(f) for _d, _s, f in os.walk(target)) - 1  # minus the pin file
        if n != args.files:
            raise SystemExit(f"dsreg checked out {n} files, expected {args.files}")

    # The user's order: add a tree that is not in the page cache, then check out at once.
    def dsreg_flow(rep: int) -> None:
        reg = runs / f"dsreg-flow-{rep}"
        _run([*DSREG, "init", "--registry", str(reg)], work)
        evict(tree)
        add = [*DSREG, "add", "bench", str(tree), "--tag", "v1", "--registry", str(reg)]
        s["dsreg_flow_add"].runs.append(_m(add, work))
        co = [*DSREG, "checkout", "bench@v1", "--link", "hardlink", "--registry", str(reg)]
        s["dsreg_flow_checkout"].runs.append(_m([*co, str(runs / f"dsreg-flow-co-{rep}")], work))
        flow_checked.append(runs / f"dsreg-flow-co-{rep}")
        cp_al("cp_al_after_add", runs / f"cp-al-flow-{rep}")
        evict(reg / "files")
        s["dsreg_cold_checkout"].runs.append(_m([*co, str(runs / f"dsreg-cold-co-{rep}")], work))
        flow_checked.append(runs / f"dsreg-cold-co-{rep}")

    def dvc_flow(rep: int) -> None:
        proj = runs / f"dvc-flow-{rep}"
        dvc_project(proj, runs / f"dvc-flow-{rep}-site", cache_type="copy")
        with _Borrowed(tree, proj):
            evict(proj / "data")
            s["dvc_flow_add"].runs.append(_m([*DVC, "add", "-q", "data"], proj))
        _run([*DVC, "config", "cache.type", "hardlink"], proj)
        s["dvc_flow_checkout"].runs.append(_m([*DVC, "checkout", "-q"], proj))
        os.rename(proj / "data", runs / f"dvc-flow-co-{rep}")  # a new folder for the next one
        evict(proj / ".dvc" / "cache")
        s["dvc_cold_checkout"].runs.append(_m([*DVC, "checkout", "-q"], proj))

    flow_checked: list[Path] = []
    alternate("add, then checkout (cold)", args.reps, {"dsreg": dsreg_flow, "dvc": dvc_flow})
    for folder in flow_checked:
        n = sum(len(f) for _d, _s, f in os.walk(folder)) - 1
        if n != args.files:
            raise SystemExit(f"dsreg checked out {n} files into {folder}, expected {args.files}")
    if _inodes(tree) != before:
        raise SystemExit("the tree changed under the benchmark (inodes differ); results void")
    if not args.keep:
        clear_runs(runs, say, settle=False)

    result = {
        "benchmark": "core",
        "files": args.files,
        "classes": args.classes,
        "bytes": size,
        "reps": args.reps,
        "machine": machine(),
        "series": {k: v.to_dict() for k, v in s.items() if v.runs},
    }
    ok = _report(s, args, size, result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ok else 1


def _report(s: dict[str, Series], args: argparse.Namespace, size: int, result: dict) -> bool:
    print(
        f"core benchmark: {args.files} files, {args.classes} classes, {size / 2**20:.0f} MiB, "
        f"{args.reps} reps, {os.cpu_count()} cpus (medians)"
    )
    for k, v in s.items():
        if v.runs:
            cpu = f"{v.cpu_seconds:7.2f}" if v.cpu_seconds is not None else "      ?"
            sampled = all(m.peak_tree_pss_mib is not None for m in v.runs)
            pss = f"{v.memory_mib:7.1f} MiB" if sampled else "      (not sampled)"
            print(
                f"  {k:<16} {v.seconds:8.2f} s wall {cpu} s cpu   peak RSS "
                f"{v.peak_rss_mib:7.1f} MiB   process tree peak PSS {pss}"
            )
    checks = Checks("bench_core")
    result["commit"], result["checks"] = checks.at, checks.results
    if args.only == "dvc":
        print("  (DVC only: no ratios, no targets)")
        return True

    def versus(target: Target, slow: Series, fast: Series) -> None:
        """``target`` on slow / fast wall time (not measured when either has no runs)."""
        measured = bool(slow.runs and fast.runs)
        detail = ""
        if measured and slow.cpu_seconds and fast.cpu_seconds:
            detail = f"(CPU time: {slow.cpu_seconds / fast.cpu_seconds:.1f}x)"
        checks.check(target, slow.seconds / fast.seconds if measured else None, detail)

    # dsreg's own targets: the re-add against its first add, the hard-link checkout against
    # cp -al (the floor, timed beside it whatever --only says: not a competitor left out).
    versus(READD, s["dsreg_add"], s["dsreg_readd"])
    versus(LINK_AFTER_ADD, s["dsreg_flow_checkout"], s["cp_al_after_add"])
    versus(LINK_WARM, s["dsreg_checkout"], s["cp_al_warm"])
    if args.only == "dsreg":
        print("  (dsreg only: no targets against DVC)")
        return checks.finish() == 0
    versus(ADD, s["dvc_add"], s["dsreg_add"])
    versus(CHECKOUT, s["dvc_checkout"], s["dsreg_checkout"])
    versus(COLD_ADD, s["dvc_flow_add"], s["dsreg_flow_add"])
    versus(FLOW_CHECKOUT, s["dvc_flow_checkout"], s["dsreg_flow_checkout"])
    versus(COLD_CHECKOUT, s["dvc_cold_checkout"], s["dsreg_cold_checkout"])
    # The whole process tree's peak PSS: dsreg's add forks workers, and each must count.
    mine, theirs = s["dsreg_add_memory"], s["dvc_add_memory"]
    measured = bool(mine.runs and theirs.runs)
    checks.check(
        ADD_MEMORY,
        mine.memory_mib / theirs.memory_mib if measured else None,
        f"{mine.memory_mib:.0f} vs {theirs.memory_mib:.0f} MiB" if measured else "",
    )
    return checks.finish() == 0


if __name__ == "__main__":
    sys.exit(main())
