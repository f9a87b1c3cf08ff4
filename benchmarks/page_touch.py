"""What a fresh page costs on this machine against a reused one (docs/benchmarks.md, "Reading the
figures").

    python benchmarks/page_touch.py            # 4096 MiB
    python benchmarks/page_touch.py --mib 800

Populates an anonymous mapping (``MADV_POPULATE_WRITE``, Linux 5.14+), unmaps it, and populates
a second one of the same size, which the kernel serves from the pages just freed. On a VM whose
host backs guest memory on first touch, the first costs several times the second; on bare
metal they are close. A page-cache page for a newly written file costs the same as the first.
"""

from __future__ import annotations

import argparse
import mmap
import time

MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def populate(size: int) -> float:
    m = mmap.mmap(-1, size)
    try:
        t = time.perf_counter()
        m.madvise(MADV_POPULATE_WRITE)
        return time.perf_counter() - t
    finally:
        m.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=4096, help="size of each mapping (4096)")
    args = ap.parse_args()
    size = args.mib << 20
    pages = size // mmap.PAGESIZE
    first = populate(size)
    again = populate(size)
    print(f"first touch of {args.mib} MiB: {first:.3f} s, {first / pages * 1e6:.2f} us a page")
    print(f"reused pages:          {again:.3f} s, {again / pages * 1e6:.2f} us a page")
    print(f"ratio: {first / again:.1f}x")


if __name__ == "__main__":
    main()
