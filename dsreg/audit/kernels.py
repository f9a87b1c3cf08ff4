"""The band index's inner loops, compiled: two counting sorts and the band join.

The index (``index.py``) does billions of tiny steps at scale, one per candidate pair: an XOR,
a population count and a compare. As numpy array passes each costs tens of nanoseconds in
temporaries and gathers at random places; compiled by numba (LLVM machine code for this CPU,
cached on disk after the first call) it costs about one, because:

- the stored hashes are sorted by their band value (:func:`band_table`), and the queries are
  filed under every band value they probe (:func:`neighbour_table`), so the join
  (:func:`join_band`) walks both in the same order, value by value, reading each in sequence;
- for one stored hash, the queries filed under its value are checked in one loop without
  branches, which LLVM vectorises with the CPU's population count; only a run that holds a pair
  is walked again to write it.

The functions are pure: arrays in, arrays out, no Python objects, no global state; they release
the GIL, so threads can join disjoint ranges of band values at once.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = ["band_table", "join_band", "neighbour_table"]


@intrinsic  # type: ignore[untyped-decorator]
def _popcount(typingctx: Any, value: Any) -> Any:
    """The number of set bits of a ``uint64``: LLVM's ``ctpop``, one instruction."""
    sig = types.uint64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    return sig, codegen


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def band_table(
    hashes: Any, start: int, width: int, offsets: Any, perm_hash: Any, perm_idx: Any
) -> None:
    """Sort ``hashes`` by their bits ``start .. start + width`` into ``perm_hash`` (the hashes)
    and ``perm_idx`` (their positions in ``hashes``), stably; ``offsets[v] .. offsets[v + 1]``
    is then the run of band value ``v``."""
    n = hashes.shape[0]
    shift = np.uint64(start)
    low = np.uint64((1 << width) - 1)
    offsets[:] = 0
    for i in range(n):
        offsets[np.int64((hashes[i] >> shift) & low) + 1] += 1
    for value in range(1, offsets.shape[0]):
        offsets[value] += offsets[value - 1]
    cursor = offsets[:-1].copy()
    for i in range(n):
        v = np.int64((hashes[i] >> shift) & low)
        at = cursor[v]
        perm_hash[at] = hashes[i]
        perm_idx[at] = i
        cursor[v] = at + 1


@numba.njit(cache=True, nogil=True, inline="always")  # type: ignore[untyped-decorator]
def _within(h: Any, perm_hash: Any, lo: int, hi: int, limit: Any) -> Any:
    """How many of ``perm_hash[lo:hi]`` lie within ``limit`` bits of ``h``: a loop without
    branches, which LLVM vectorises (most runs hold no pair at all)."""
    count = np.uint64(0)
    for k in range(lo, hi):
        count += np.uint64(_popcount(h ^ perm_hash[k]) <= limit)
    return count


@numba.njit(cache=True, nogil=True, inline="always")  # type: ignore[untyped-decorator]
def _found_before(x: Any, earlier: Any) -> bool:
    """Whether an ``earlier`` band holds the pair ``x`` (the XOR) within its radius."""
    for e in range(earlier.shape[0]):
        part = (x >> np.uint64(earlier[e, 0])) & np.uint64(earlier[e, 1])
        if _popcount(part) <= np.uint64(earlier[e, 2]):
            return True
    return False


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def neighbour_table(
    q: Any, q_band: Any, masks: Any, offsets: Any, nb_hash: Any, nb_row: Any
) -> None:
    """Every query filed under each band value within its radius (its band value XOR each of
    ``masks``): ``nb_hash[offsets[v] : offsets[v + 1]]`` are the hashes of the queries that
    probe band value ``v``, and ``nb_row`` their rows of ``q``."""
    offsets[:] = 0
    for a in range(q_band.shape[0]):
        for m in range(masks.shape[0]):
            offsets[(q_band[a] ^ masks[m]) + 1] += 1
    for v in range(1, offsets.shape[0]):
        offsets[v] += offsets[v - 1]
    cursor = offsets[:-1].copy()
    for a in range(q_band.shape[0]):
        for m in range(masks.shape[0]):
            v = q_band[a] ^ masks[m]
            at = cursor[v]
            nb_hash[at] = q[a]
            nb_row[at] = a
            cursor[v] = at + 1


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def join_band(
    queries: Any, stored: Any, values: Any, threshold: int, earlier: Any, out: Any
) -> Any:
    """The pairs of one band, value by value over ``values`` (``(first, end)``): each stored
    hash of the run of value ``v`` against each query filed under ``v``, both read in sequence.

    ``queries`` is ``(offsets, hashes, rows, row base)`` from :func:`neighbour_table`,
    ``stored`` is ``(offsets, hashes, positions, position base)`` from :func:`band_table`. A
    pair within ``threshold`` is written to ``out`` (``(query, stored, distance)`` arrays)
    unless it lies within the radius of an ``earlier`` band (``(start, bit mask, radius)``
    rows), where that band found it. Returns how many pairs were written and the first value
    not done: a value whose pairs do not fit is left whole for the next call (with an empty
    ``out`` of the same size, if it is the first, the caller makes ``out`` larger).
    """
    nb_off, nb_hash, nb_row, q_base = queries
    st_off, perm_hash, perm_idx, s_base = stored
    out_q, out_s, out_d = out
    capacity = out_q.shape[0]
    limit = np.uint64(threshold)
    n = 0
    for v in range(values[0], values[1]):
        a0, a1 = nb_off[v], nb_off[v + 1]
        s0, s1 = st_off[v], st_off[v + 1]
        if a0 == a1 or s0 == s1:
            continue
        before = n
        for k in range(s0, s1):
            h = perm_hash[k]
            if _within(h, nb_hash, a0, a1, limit) == 0:
                continue
            for j in range(a0, a1):
                x = h ^ nb_hash[j]
                d = _popcount(x)
                if d > limit or _found_before(x, earlier):
                    continue
                if n == capacity:
                    return before, v
                out_q[n] = q_base + nb_row[j]
                out_s[n] = s_base + perm_idx[k]
                out_d[n] = d
                n += 1
    return n, values[1]
