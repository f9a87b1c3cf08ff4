"""Small pages for numpy's arrays: numpy's advice to use transparent huge pages, turned off.

numpy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) for every array of
4 MiB or more. Where the kernel's setting is ``madvise`` (the default of Debian, Ubuntu and
most distributions), that advice decides whether such an array is backed by 2 MiB pages. dsreg's
large arrays are written once and read once or twice (a 50-million-row view's rows, labels and
masks), so huge pages save few TLB misses, and the first touch is what costs:

- in a virtual machine that hands free memory back to its host (a balloon with free page
  reporting: Firecracker, WSL2, many cloud VMs), every fresh huge page is 512 host faults and a
  2 MiB clear, so touching fresh memory costs several times what it costs in 4 KiB pages, and
  a command that builds large arrays once (``dsreg.open(...).labels()`` of a large view) spends
  most of its time clearing pages;
- where memory is fragmented, a huge page can stall in direct compaction (``defrag``'s default,
  ``madvise``, compacts for advised regions on the fault itself).

So ``import dsreg`` turns the advice off for the process (numpy's ``NUMPY_MADVISE_HUGEPAGE=0``),
unless ``NUMPY_MADVISE_HUGEPAGE`` is set already: that is the user's choice, and stays. With the
kernel's setting at ``always``, the kernel uses huge pages whatever the advice says.
"""

from __future__ import annotations

import os
import sys

__all__ = ["VARIABLE", "numpy_small_pages"]

VARIABLE = "NUMPY_MADVISE_HUGEPAGE"


def numpy_small_pages() -> None:
    """Turn numpy's huge-page advice off for this process, unless ``NUMPY_MADVISE_HUGEPAGE`` is
    set. Before numpy is imported, the variable is set (numpy reads it once, at import; child
    processes inherit it); after, numpy's own switch is turned. Imports nothing."""
    if VARIABLE in os.environ:
        return
    np = sys.modules.get("numpy")
    if np is None:
        os.environ[VARIABLE] = "0"
        return
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)
