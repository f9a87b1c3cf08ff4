"""Remotes against DVC 3.x: push and pull of one ImageFolder tree through a local-directory remote,
and reading a remote over HTTP on a fresh machine (``--suite read``: ``_remote_read.py``).

    python benchmarks/bench_remotes.py                   # 50,000 files, 1,000 classes, 3 reps
    python benchmarks/bench_remotes.py --files 5000 --reps 2
    python benchmarks/bench_remotes.py --suite read      # 50,000 PNGs over HTTP vs dvc get

Targets (the ``Target`` declarations here and in ``_remote_read.py``; docs/benchmarks.md):
- ``dsreg push`` >= 2x faster than ``dvc push`` of the same tree to an empty remote;
- ``dsreg pull`` >= 2x faster than ``dvc fetch`` (objects into the store / cache, from an empty
  one), and ``dsreg pull`` + ``dsreg checkout`` >= 2x faster than ``dvc pull`` (fetch and
  workspace; both link by hard link);
- a second push with nothing new >= 20x faster than the first, both as the push itself (timed
  inside one process) and as the command line (with the interpreter's start-up);
- ``--suite read``: ``dsreg sql`` of a count over a remote revision of images, on a fresh
  machine, downloads under 5% of the revision's bytes; the first ``dsreg.open`` over HTTP takes
  at most 2x the time of ``dvc get`` of the same files from the same server.

Both tools push from a warm store/cache (every file read once before the measurement) and pull
from a warm remote; ``sync`` runs before every measurement, and the order of the tools alternates
between repetitions. dsreg's push ends with a ``syncfs`` barrier on the remote (objects durable
before the tag that names them); DVC's push ends with its writes still in the page cache, so the
comparison bills dsreg for a durability DVC does not give. DVC's state lives in a fresh
``core.site_cache_dir`` per repetition. Exit status 0 only if every target passes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
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
    """A timed run, with no memory sampler (no memory target here; its CPU would be billed to
    whichever tool keeps every CPU busy: see ``_common.measure``)."""
    return measure_tool(cmd, cwd, sample_memory=False)


PUSH = Target("push: dvc push / dsreg push", ">=", 2)
PULL = Target("pull: dvc fetch / dsreg pull", ">=", 2)
PULL_WORKSPACE = Target("pull+workspace: dvc pull / dsreg pull+checkout", ">=", 2)
NOOP = Target("push again, nothing new: first / again (library)", ">=", 20)
NOOP_CLI = Target("push again, nothing new: first / again (command line)", ">=", 20)

# Times the library's push twice in one process: the first to an empty remote, then again.
_INPROC = """
import json, sys, time
from dsreg.registry.folder import Registry
from dsreg.remote.transfer import push
reg = Registry.find(sys.argv[1])
t0 = time.perf_counter(); first = push(reg, remote=sys.argv[2]); t1 = time.perf_counter()
again = push(reg, remote=sys.argv[2]); t2 = time.perf_counter()
assert first.sent > 0 and again.sent == 0, (first.sent, again.sent)
print(json.dumps({"first": t1 - t0, "again": t2 - t1}))
"""


def _rm(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def _dvc_project(proj: Path, tree: Path, remote: Path, site: Path) -> None:
    """A DVC project whose cache holds the tree. The tree is moved in for ``dvc add`` (with
    copies, so its files stay its own) and back out, so both tools read the very same files;
    pulls then check out by hard link, as dsreg's do."""
    dvc_project(proj, site, cache_type="copy")
    _run([*DVC, "remote", "add", "-d", "bench", str(remote)], proj)
    os.rename(tree, proj / "data")
    try:
        _run([*DVC, "add", "-q", "data"], proj)
    finally:
        os.rename(proj / "data", tree)
    _run([*DVC, "config", "cache.type", "hardlink"], proj)


def _objects(remote: Path) -> int:
    return sum(len(f) for _d, _s, f in os.walk(remote / "files"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=50_000, help="files in the tree (50000)")
    ap.add_argument("--classes", type=int, default=1_000, help="class folders (1000)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (3)")
    ap.add_argument("--workdir", type=Path, help="where trees, stores and remotes go (a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    ap.add_argument(
        "--suite",
        choices=("all", "pushpull", "read"),
        default="all",
        help="push/pull through a folder, reading over HTTP, or both (all)",
    )
    args = ap.parse_args(argv)
    work = (args.workdir or Path(tempfile.mkdtemp(prefix="dsreg-bench-remotes-"))).absolute()
    work.mkdir(parents=True, exist_ok=True)
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    checks = Checks("bench_remotes")
    result: dict[str, object] = {"benchmark": "remotes", "machine": machine()}
    if args.suite in ("all", "read"):
        import _remote_read

        result["read"] = _remote_read.run(
            work, files=args.files, classes=args.classes, reps=args.reps, say=say, checks=checks
        )
    if args.suite in ("all", "pushpull"):
        result.update(_push_pull(args, work, say, checks))
    if args.json:
        result.update(checks.to_dict())
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return checks.finish()


def _push_pull(
    args: argparse.Namespace, work: Path, say: Callable[[str], None], checks: Checks
) -> dict:
    """The push and pull measurements through local-directory remotes."""

    say(f"tree: {args.files} files in {args.classes} classes under {work}")
    tree = make_imagefolder(work / "tree", files=args.files, classes=args.classes)
    size = tree_bytes(tree)
    reg = work / "dsreg-reg"
    if not (reg / "refs" / "bench" / "v1").is_file():
        fresh_dir(reg)
        _run([*DSREG, "init", "--registry", str(reg)], work)
        _run([*DSREG, "add", "bench", str(tree), "--tag", "v1", "--registry", str(reg)], work)
    # Every measurement writes into folders of its own under runs/, removed only at the end
    # (clear_runs: this ext4 pays for recently freed inodes); the DVC project lives there too.
    runs = work / "runs"
    clear_runs(runs, say)
    runs.mkdir()
    proj, site = runs / "dvc-proj", runs / "dvc-site"
    _dvc_project(proj, tree, runs / "dvc-remote-0", site)

    names = (
        "dsreg_push",
        "dsreg_push_again",
        "dsreg_push_lib",
        "dsreg_push_again_lib",
        "dsreg_pull",
        "dsreg_checkout",
        "dvc_push",
        "dvc_push_again",
        "dvc_fetch",
        "dvc_pull",
    )
    s = {k: Series(name=k) for k in names}

    def dsreg_rep(rep: int) -> None:
        remote, clone, out = (runs / f"dsreg-{what}-{rep}" for what in ("remote", "pulled", "out"))
        warm(reg / "files")
        push = [*DSREG, "push", "-r", str(remote), "--registry", str(reg)]
        s["dsreg_push"].runs.append(_m(push, work))
        if _objects(remote) != args.files + 3:
            raise SystemExit(f"dsreg pushed {_objects(remote)} objects, expected {args.files + 3}")
        s["dsreg_push_again"].runs.append(_m(push, work))
        _run([*DSREG, "init", "--registry", str(clone)], work)
        warm(remote)
        s["dsreg_pull"].runs.append(
            _m([*DSREG, "pull", "-r", str(remote), "--registry", str(clone)], work)
        )
        checkout = [*DSREG, "checkout", "bench@v1", str(out), "--link", "hardlink"]
        s["dsreg_checkout"].runs.append(_m([*checkout, "--registry", str(clone)], work))
        n = sum(len(f) for _d, _s, f in os.walk(out)) - 1
        if n != args.files:
            raise SystemExit(f"dsreg checked out {n} files, expected {args.files}")
        # The push itself, without the interpreter's start-up: one process, two pushes.
        warm(reg / "files")
        os.sync()
        lib_remote = str(runs / f"dsreg-remote-lib-{rep}")
        t = json.loads(_run([sys.executable, "-c", _INPROC, str(reg), lib_remote], work))
        s["dsreg_push_lib"].runs.append(Measurement(seconds=t["first"], peak_rss_mib=0.0))
        s["dsreg_push_again_lib"].runs.append(Measurement(seconds=t["again"], peak_rss_mib=0.0))

    def dvc_rep(rep: int) -> None:
        # A remote of its own; then, for the fetch and for the pull, an empty cache of its own
        # (cache.dir), and the filled cache again for the next repetition's push.
        dvc_remote = runs / f"dvc-remote-{rep}"
        _run([*DVC, "remote", "modify", "bench", "url", str(dvc_remote)], proj)
        fresh_dir(site)
        warm(proj / ".dvc" / "cache")
        s["dvc_push"].runs.append(_m([*DVC, "push", "-q"], proj))
        s["dvc_push_again"].runs.append(_m([*DVC, "push", "-q"], proj))
        for step in ("fetch", "pull"):
            _run([*DVC, "config", "cache.dir", str(runs / f"dvc-cache-{step}-{rep}")], proj)
            fresh_dir(site)
            warm(dvc_remote)
            s[f"dvc_{step}"].runs.append(_m([*DVC, step, "-q"], proj))
        n = sum(len(f) for _d, _s, f in os.walk(proj / "data"))
        if n != args.files:
            raise SystemExit(f"dvc pulled {n} files, expected {args.files}")
        _rm(proj / "data")  # hard links into the pull's cache: no inode is freed
        _run([*DVC, "config", "--unset", "cache.dir"], proj)

    steps = {"dsreg": dsreg_rep, "dvc": dvc_rep}
    for rep in range(args.reps):
        order = ("dsreg", "dvc") if rep % 2 == 0 else ("dvc", "dsreg")
        for tool in order:
            say(f"repetition {rep + 1}/{args.reps}: {tool}")
            t0 = time.perf_counter()
            steps[tool](rep)
            say(f"  {time.perf_counter() - t0:.0f} s")
    clear_runs(runs, say, settle=False)

    result = {
        "files": args.files,
        "classes": args.classes,
        "bytes": size,
        "reps": args.reps,
        "machine": machine(),
        "series": {k: v.to_dict() for k, v in s.items() if v.runs},
    }
    _report(s, args, size, checks)
    return result


def _report(s: dict[str, Series], args: argparse.Namespace, size: int, checks: Checks) -> None:
    print(
        f"remotes benchmark: {args.files} files, {args.classes} classes, {size / 2**20:.0f} MiB, "
        f"local-directory remotes, {args.reps} reps, {os.cpu_count()} cpus (medians)"
    )
    for k, v in s.items():
        rss = f"peak RSS {v.peak_rss_mib:7.1f} MiB" if v.peak_rss_mib else "(in-process)"
        print(f"  {k:<22} {v.seconds:8.2f} s   {rss}")
    sec = {k: v.seconds for k, v in s.items()}
    checks.check(PUSH, sec["dvc_push"] / sec["dsreg_push"])
    checks.check(PULL, sec["dvc_fetch"] / sec["dsreg_pull"])
    checks.check(PULL_WORKSPACE, sec["dvc_pull"] / (sec["dsreg_pull"] + sec["dsreg_checkout"]))
    checks.check(NOOP, sec["dsreg_push_lib"] / sec["dsreg_push_again_lib"])
    checks.check(NOOP_CLI, sec["dsreg_push"] / sec["dsreg_push_again"])
    dvc_again = sec["dvc_push"] / sec["dvc_push_again"]
    print(f"  (info) dvc push again (command line): first / again {dvc_again:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
