"""dsreg's detector against cleanlab, side by side (run on demand, not in the test suite).

Two modes:

``compare`` (default)
    The same seeded float32 probabilities, at 1,000,000 x 345 and at 50,000 x 1,000. Each
    measurement runs in a fresh subprocess that loads the input fully into memory, then times
    one call: ``cleanlab.filter.find_label_issues(labels, pred_probs)`` with its defaults
    (``n_jobs`` = physical cores) against ``dsreg.detector.detector.detect(labels, pred_probs)``
    (which also ranks the rows and estimates the joint and the noise rate). Memory is the peak
    above the resident size right after loading the input: the worker's own high-water mark
    (``VmHWM``, exact) and the sampled proportional set size (PSS) of its whole process
    tree, which counts cleanlab's pool workers fairly. Medians of ``--repeat`` runs.
    Targets (``COMPARE_*`` and ``ONESHOT`` below; docs/benchmarks.md): in process, dsreg at
    least 3x faster with at most a third of cleanlab's memory above the input, at each size;
    the one-shot command line at least 6x faster than cleanlab's one-shot script. Exit status
    0 only if every target passes.

    Then the one-shot commands, as a user runs them: ``dsreg detect SPEC --pred-probs P.npy``
    on a registry holding the labels (start-up, reading the revision, the detector, hashing
    the file, storing the overlay), against a fresh Python loading the two ``.npy`` files
    and calling ``find_label_issues`` with the same (default) flags; wall time, CPU time and
    peak RSS of each (the largest process, from ``/usr/bin/time``), alternating, medians of
    ``--repeat``.

``ooc``
    A 10,000,000 x 345 float16 ``.npy`` (6.9 GB) written in chunks to ``--dir``, then
    ``detect(labels, path)`` reading it memory-mapped; reports time and peak resident memory,
    then deletes the file (unless ``--keep``). ``--format parquet`` writes a Parquet file
    (one fixed-size-list column, 65,536-row row groups) instead.

``parity``
    dsreg against cleanlab run with stable sorts (dsreg's definition) and with numpy's
    default sort, on the same generated inputs.

Usage::

    python benchmarks/bench_detector.py compare --repeat 7
    python benchmarks/bench_detector.py ooc --dir /tmp
    python benchmarks/bench_detector.py ooc --rows 1000000 --dtype float32 --format parquet
    python benchmarks/bench_detector.py parity
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from _common import DSREG, PYTHON, Checks, Series, Target, measure_tool, run_tool  # noqa: E402

COMPARE_SPEED = Target("in process: cleanlab / dsreg detect(), wall", ">=", 3)
COMPARE_MEMORY = Target("in process: dsreg / cleanlab, tree PSS above the input", "<=", 1 / 3)
ONESHOT = Target("one-shot: cleanlab script / dsreg detect (command line), wall", ">=", 6)

# What a user runs instead of ``dsreg detect``: load both files, call cleanlab with its defaults.
CLEANLAB_ONESHOT = r"""
import os, sys, warnings
os.environ["TQDM_DISABLE"] = "1"
import numpy as np
from cleanlab.filter import find_label_issues
warnings.simplefilter("ignore")
labels = np.load(sys.argv[1])
pred_probs = np.load(sys.argv[2])
print(int(find_label_issues(labels, pred_probs).sum()))
"""


def generate(n: int, k: int, *, seed: int, dtype: Any, probs_out: Any) -> np.ndarray:
    """Fill ``probs_out`` (n x k) with a seeded classifier's softmax; return noisy labels.

    A classifier that is right about 90% of the time; 10% of the given labels are then
    replaced by a uniformly drawn class. Written in row blocks so any size fits in memory.
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    block = max(1, (1 << 22) // k)
    for start in range(0, n, block):
        stop = min(n, start + block)
        z = rng.standard_normal((stop - start, k), dtype=np.float32)
        z[np.arange(stop - start), truth[start:stop]] += 4.5
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        probs_out[start:stop] = z
    labels = truth.copy()
    flip = rng.random(n) < 0.10
    labels[flip] = rng.integers(0, k, int(flip.sum()))
    return labels


def write_inputs(
    folder: Path, n: int, k: int, dtype: Any, seed: int = 0, *, parquet: bool = False
) -> tuple[Path, Path]:
    probs_path = folder / f"probs_{n}x{k}_{np.dtype(dtype).name}.npy"
    labels_path = folder / f"labels_{n}x{k}.npy"
    out = np.lib.format.open_memmap(probs_path, mode="w+", dtype=dtype, shape=(n, k))
    labels = generate(n, k, seed=seed, dtype=dtype, probs_out=out)
    out.flush()
    del out
    np.save(labels_path, labels)
    if parquet:
        probs_path = npy_to_parquet(probs_path)
    return probs_path, labels_path


def npy_to_parquet(path: Path, row_group_rows: int = 65_536) -> Path:
    """One fixed-size-list column, row groups of ``row_group_rows``; removes the .npy."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = path.with_suffix(".parquet")
    data = np.load(path, mmap_mode="r")
    k = data.shape[1]
    with pq.ParquetWriter(
        target, pa.schema([("pred_probs", pa.list_(pa.from_numpy_dtype(data.dtype), k))])
    ) as writer:
        for start in range(0, len(data), row_group_rows):
            block = np.ascontiguousarray(data[start : start + row_group_rows])
            column = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), k)
            writer.write_table(pa.table({"pred_probs": column}))
    del data
    path.unlink()
    return target


def status_bytes(field: str) -> int:
    """``VmRSS`` or ``VmHWM`` (peak resident) of this process, from /proc/self/status."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def cpu_seconds() -> float:
    """User + system time of this process and its reaped children (cleanlab's pool)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def reset_peak() -> None:
    # ru_maxrss survives fork+exec on Linux (it would report the parent's size); VmHWM is per
    # address space, and writing 5 to clear_refs resets it to the current resident size.
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def tree_pss(pid: int) -> int:
    """Proportional set size of a process and all its descendants, in bytes."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):  # a pool worker may exit between the calls
            total += proc.memory_full_info().pss
    return total


# -- worker (one measurement per process) ----------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    import warnings

    labels = np.load(args.labels)
    if args.tool == "dsreg-ooc":
        probs: Any = args.probs  # a path: memory-mapped or Parquet, read in chunks
    else:
        probs = np.load(args.probs)  # fully in memory
    sys.path.insert(0, str(REPO))
    if args.tool == "cleanlab":
        warnings.simplefilter("ignore")
        os.environ["TQDM_DISABLE"] = "1"  # cleanlab shows progress bars on large inputs
        from cleanlab.filter import find_label_issues

        def run() -> int:
            return int(find_label_issues(labels, probs).sum())
    else:
        from dsreg.detector.detector import detect

        def run() -> int:
            return len(detect(labels, probs))

    reset_peak()
    baseline = status_bytes("VmRSS")
    print(json.dumps({"ready": True, "baseline": baseline}), flush=True)
    sys.stdin.readline()  # the parent's sampler is running
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    flagged = run()
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_before
    peak = status_bytes("VmHWM")
    result = {"seconds": seconds, "cpu_seconds": cpu, "flagged": flagged, "peak_rss": peak}
    print(json.dumps(result), flush=True)


def measure(tool: str, probs: Path, labels: Path) -> dict[str, Any]:
    command = [sys.executable, str(HERE), "_worker", "--tool", tool]
    command += ["--probs", str(probs), "--labels", str(labels)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    baseline_pss = tree_pss(proc.pid)
    peak = [baseline_pss]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_pss(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    result = json.loads(proc.stdout.readline())
    done.set()
    sampler.join()
    proc.wait()
    return {
        "seconds": result["seconds"],
        "cpu_seconds": result["cpu_seconds"],
        "flagged": result["flagged"],
        "rss_above_input": result["peak_rss"] - ready["baseline"],
        "tree_pss_above_input": peak[0] - baseline_pss,
    }


def mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def oneshot(folder: Path, probs: Path, labels: Path, k: int, repeat: int) -> float:
    """``dsreg detect`` against cleanlab's one-shot script, alternating; how many times
    faster dsreg is (wall)."""
    reg = folder / f"reg-{probs.stem}"
    classes = folder / f"classes-{k}.txt"
    classes.write_text("".join(f"c{i}\n" for i in range(k)))
    for cmd in (
        [*DSREG, "init", "--registry", str(reg)],
        [*DSREG, "add", "bench", "--labels", str(labels), "--classes", str(classes),
         "--tag", "v1", "--registry", str(reg)],
    ):  # fmt: skip
        run_tool(cmd, folder)
    commands = {
        "dsreg detect": [
            *DSREG, "detect", "bench@v1", "--pred-probs", str(probs), "--quiet", "--json",
            "--registry", str(reg),
        ],
        "cleanlab script": [PYTHON, "-c", CLEANLAB_ONESHOT, str(labels), str(probs)],
    }  # fmt: skip
    series = {name: Series(name=name) for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            series[name].runs.append(measure_tool(cmd, folder, sample_memory=False))
    print(f"  one-shot commands, median of {repeat}:")
    for x in series.values():
        runs = ", ".join(f"{m.seconds:.2f}" for m in x.runs)
        print(
            f"    {x.name:16s} {x.seconds:7.2f} s wall {x.cpu_seconds or 0:7.2f} s CPU   "
            f"peak RSS {x.peak_rss_mib:8,.0f} MiB   runs {runs}"
        )
    d, c = series["dsreg detect"], series["cleanlab script"]
    speed = c.seconds / d.seconds
    print(
        f"    one-shot: dsreg is {speed:.1f}x faster (wall), "
        f"{(c.cpu_seconds or 0) / (d.cpu_seconds or 1):.1f}x less CPU, "
        f"{d.peak_rss_mib / c.peak_rss_mib:.2f}x the peak RSS"
    )
    return speed


def compare(args: argparse.Namespace) -> int:
    checks = Checks("bench_detector compare")
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.size]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n, k in sizes:
            probs, labels = write_inputs(Path(tmp), n, k, np.float32)
            runs: dict[str, list[dict[str, Any]]] = {"cleanlab": [], "dsreg": []}
            for _ in range(args.repeat):
                for tool in runs:  # alternate, so drift affects both alike
                    runs[tool].append(measure(tool, probs, labels))
            med = {
                tool: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
                for tool, rs in runs.items()
            }
            c, d = med["cleanlab"], med["dsreg"]
            size = n * k * 4
            print(f"\n{n:,} x {k:,} float32 ({mib(size)} input), median of {args.repeat}:")
            for tool, m in med.items():
                print(
                    f"  {tool:9s} {m['seconds']:7.2f} s wall {m['cpu_seconds']:7.2f} s CPU   "
                    "peak RSS above input "
                    f"{mib(m['rss_above_input']):>10s}   tree PSS above input "
                    f"{mib(m['tree_pss_above_input']):>10s}   flagged {int(m['flagged']):,}"
                )
            print(
                f"  dsreg is {c['seconds'] / d['seconds']:.1f}x faster (wall), "
                f"{c['cpu_seconds'] / d['cpu_seconds']:.1f}x less CPU time; uses "
                f"{d['rss_above_input'] / c['rss_above_input']:.2f}x the RSS and "
                f"{d['tree_pss_above_input'] / c['tree_pss_above_input']:.2f}x the tree PSS "
                "above the input"
            )
            print("  raw:", json.dumps(runs))
            at = f"{n:,} x {k:,}"
            checks.check(COMPARE_SPEED, c["seconds"] / d["seconds"], at)
            ratio = d["tree_pss_above_input"] / c["tree_pss_above_input"]
            checks.check(COMPARE_MEMORY, ratio, at)
            checks.check(ONESHOT, oneshot(Path(tmp), probs, labels, k, args.repeat), at)
            probs.unlink()
    return checks.finish()


def parity(args: argparse.Namespace) -> None:
    """dsreg against cleanlab with stable sorts (the definition) on the benchmark inputs."""
    import warnings

    import cleanlab.filter as cl_filter

    sys.path.insert(0, str(REPO))
    from dsreg.detector.detector import detect

    original = np.argsort

    def stable_argsort(a: Any, axis: int = -1, kind: Any = None, order: Any = None) -> Any:
        return original(a, axis=axis, kind="stable", order=order)

    for size in args.size:
        n, k = (int(v) for v in size.split("x"))
        probs = np.empty((n, k), dtype=np.float32)
        labels = generate(n, k, seed=0, dtype=np.float32, probs_out=probs)
        found = detect(labels, probs)
        np.argsort = stable_argsort  # type: ignore[assignment]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ranked = cl_filter.find_label_issues(
                    labels, probs, n_jobs=1, return_indices_ranked_by="self_confidence"
                )
        finally:
            np.argsort = original  # type: ignore[assignment]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            default = cl_filter.find_label_issues(labels, probs, n_jobs=1)
        same = np.array_equal(found.rows, ranked)
        print(
            f"{n:,} x {k:,}: dsreg flags {len(found):,}; cleanlab with stable sorts "
            f"{len(ranked):,} (identical ranked rows: {same}); cleanlab with numpy's default "
            f"sort {int(default.sum()):,}"
        )


def out_of_core(args: argparse.Namespace) -> None:
    n, k = args.rows, 345
    folder = Path(args.dir)
    start = time.perf_counter()
    dtype = np.dtype(args.dtype)
    probs, labels = write_inputs(folder, n, k, dtype, parquet=args.format == "parquet")
    size = probs.stat().st_size
    print(f"wrote {probs} ({size / 1e9:.2f} GB) in {time.perf_counter() - start:.0f} s")
    try:
        for _ in range(args.repeat):
            command = [sys.executable, str(HERE), "_worker", "--tool", "dsreg-ooc"]
            command += ["--probs", str(probs), "--labels", str(labels)]
            proc = subprocess.run(command, input="go\n", capture_output=True, text=True, check=True)
            lines = [json.loads(line) for line in proc.stdout.splitlines()]
            result = lines[-1]
            print(
                f"detect({n:,} x {k} {dtype.name} {probs.suffix}): {result['seconds']:.1f} s wall, "
                f"{result['cpu_seconds']:.1f} s CPU, peak RSS "
                f"{mib(result['peak_rss'])} (baseline after loading labels "
                f"{mib(lines[0]['baseline'])}), flagged {result['flagged']:,}"
            )
    finally:
        if not args.keep:
            probs.unlink()
            labels.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    c = sub.add_parser("compare", help="dsreg vs cleanlab, in memory")
    c.add_argument("--repeat", type=int, default=5)
    c.add_argument(
        "--size",
        action="append",
        help="NxK, repeatable (default: 1000000x345 and 50000x1000)",
    )
    c.add_argument("--dir", default=None, help="where to write the inputs (default: temp)")
    o = sub.add_parser("ooc", help="10M x 345 float16 .npy, memory-mapped")
    o.add_argument("--dir", default=tempfile.gettempdir())
    o.add_argument("--rows", type=int, default=10_000_000)
    o.add_argument("--dtype", default="float16", choices=["float16", "float32", "float64"])
    o.add_argument("--format", default="npy", choices=["npy", "parquet"])
    o.add_argument("--repeat", type=int, default=1)
    o.add_argument("--keep", action="store_true", help="keep the generated file")
    q = sub.add_parser("parity", help="dsreg vs stable-sorted cleanlab on the benchmark inputs")
    q.add_argument("--size", action="append", help="NxK, repeatable")
    w = sub.add_parser("_worker")
    w.add_argument("--tool", choices=["cleanlab", "dsreg", "dsreg-ooc"], required=True)
    w.add_argument("--probs", required=True)
    w.add_argument("--labels", required=True)
    args = parser.parse_args()
    if args.mode == "_worker":
        worker(args)
    elif args.mode == "ooc":
        out_of_core(args)
    elif args.mode == "parity":
        args.size = args.size or ["1000000x345", "50000x1000"]
        parity(args)
    else:
        if args.mode is None:
            args = parser.parse_args(["compare", *sys.argv[1:]])
        args.size = args.size or ["1000000x345", "50000x1000"]
        return compare(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
