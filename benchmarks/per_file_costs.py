"""Where one file's add goes on this machine: open, read, BLAKE3, create, write, close.

    python benchmarks/per_file_costs.py TREE [--files 5000]

Times each step of ``dsreg add``'s per-file work for the first ``--files`` files of an
ImageFolder tree (e.g. the core benchmark's), one file at a time in one process, writing into a
fresh temporary folder sharded like a registry's staging area. The files are read once first,
so the reads come from the page cache, as in the benchmark. Prints microseconds per file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import blake3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--files", type=int, default=5000)
    args = ap.parse_args()
    files = sorted(str(p) for p in args.tree.rglob("*") if p.is_file())[: args.files]
    sizes = [os.stat(f).st_size for f in files]
    for f in files:
        with open(f, "rb") as fh:
            fh.read()
    out = Path(tempfile.mkdtemp(prefix="dsreg-per-file-", dir=args.tree.parent))
    try:
        for i in range(256):
            (out / f"{i:02x}").mkdir()
        steps = dict.fromkeys(("open", "read", "close", "blake3", "create", "write", "close2"), 0.0)
        clock = time.perf_counter
        start = clock()
        for f, size in zip(files, sizes, strict=True):
            t0 = clock()
            fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
            t1 = clock()
            data = os.read(fd, size + 1)
            t2 = clock()
            os.close(fd)
            t3 = clock()
            h = blake3.blake3(data, max_threads=1).hexdigest()
            t4 = clock()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            fd = os.open(f"{out}/{h[:2]}/{h[2:]}", flags, 0o444)
            t5 = clock()
            os.write(fd, data)
            t6 = clock()
            os.close(fd)
            t7 = clock()
            times = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6)
            for k, dt in zip(steps, times, strict=True):
                steps[k] += dt
        total = clock() - start
        n = len(files)
        for k, v in steps.items():
            print(f"  {k:<7} {v / n * 1e6:6.1f} us/file")
        print(f"  all     {total / n * 1e6:6.1f} us/file over {n} files")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
