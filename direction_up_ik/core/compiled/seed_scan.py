"""Nearest library states to a target's pose features, in the kernels (the search's seeding).

The library's feature points are cut into leaves with bounding boxes
(``seeds.leaf_layout``); :func:`nearest_into` visits leaves nearest first and skips those
that cannot hold a better point, with the ranks of a full scan (ties by index).
"""

from __future__ import annotations

import numpy as np

from .layout import Leaves
from .numba_support import jitable, njit_cached, stack_array


#: Points whose distances :func:`nearest_into` computes in one pass (a leaf's, or part of one).
SCAN_RUN = 64


@jitable
def nearest_into(leaves, query, first, count, bound, best_d, best_i):
    """Nearest neighbours of one query (F,) among the M points of a leaf layout ``leaves``
    (:data:`Leaves`): afterwards ``best_i[first:first + count]`` holds the indices of the
    points at Euclidean distance ranks ``first`` .. ``first + count - 1`` (equal distances:
    lower index first), exactly those of a scan of all points. Scratch: ``bound`` (L,),
    ``best_d``, ``best_i`` (>= first + count,).

    The leaves are visited in the order of a lower bound of their points' distances (the
    distance to the leaf's bounding box, summed feature by feature like a point's: every
    term and partial sum is a rounded monotone function of the exact one, so the bound
    never exceeds a point's computed distance); once the next bound is above the k-th
    best distance so far, no point left can enter. A point's squared distance is summed
    feature by feature, in order, as by a full scan."""
    f, nl = leaves.lo_t.shape
    k = first + count
    for leaf in range(nl):
        bound[leaf] = 0.0
    for c in range(f):  # along the leaves, one feature at a time (vectorised)
        q, lo, hi = query[c], leaves.lo_t[c], leaves.hi_t[c]
        for leaf in range(nl):
            gap = max(lo[leaf] - q, 0.0) + max(q - hi[leaf], 0.0)  # lo <= hi: one term at most
            bound[leaf] += gap * gap
    # A run of up to SCAN_RUN points' distances at a time, in the stack (no aliasing with
    # the points: the compiler vectorises the pass along the points, one feature per row).
    dist = stack_array(SCAN_RUN, np.float64)
    size = 0
    for _ in range(nl):
        leaf, low = 0, bound[0]
        for l in range(1, nl):
            if bound[l] < low:
                leaf, low = l, bound[l]
        if low == np.inf or (size == k and low > best_d[k - 1]):
            break
        bound[leaf] = np.inf  # visited
        for j0 in range(leaves.start[leaf], leaves.start[leaf + 1], SCAN_RUN):
            n = min(SCAN_RUN, leaves.start[leaf + 1] - j0)
            for j in range(n):
                dist[j] = 0.0
            for c in range(f):
                # A slice of the row: its unit stride is known, which vectorises the loop
                # (indexing the row at j0 + j does not).
                row, qc = leaves.points_t[c, j0:j0 + n], query[c]
                for j in range(n):
                    t = row[j] - qc
                    dist[j] += t * t
            if size == k:  # skip a run with no point at or below the k-th best distance
                worst, hits = best_d[k - 1], 0
                for j in range(n):
                    hits += dist[j] <= worst
                if hits == 0:
                    continue
            for j in range(n):
                d, i = dist[j], leaves.index[j0 + j]
                if size == k and not (d < best_d[k - 1] or (d == best_d[k - 1] and i < best_i[k - 1])):
                    continue
                # best_d[:size] is sorted by (distance, index); when full, the last one drops out.
                pos = size if size < k else k - 1
                while pos > 0 and (d < best_d[pos - 1] or (d == best_d[pos - 1] and i < best_i[pos - 1])):
                    best_d[pos] = best_d[pos - 1]
                    best_i[pos] = best_i[pos - 1]
                    pos -= 1
                best_d[pos] = d
                best_i[pos] = i
                if size < k:
                    size += 1


@njit_cached(nogil=True, _nrt=False)
def nearest_ranks_into(leaf_fields, queries, first, count, out, bound, best_d, best_i):
    """:func:`nearest_ranks` into ``out`` (n, count) int64, with the scratch of
    :func:`nearest_into` (``bound`` (L,), ``best_d`` and ``best_i`` (first + count,)) from the
    caller: compiled without numba's runtime, like the search's kernels, so that
    :func:`nearest_into` is compiled once for both."""
    leaves = Leaves(*leaf_fields)
    for r in range(queries.shape[0]):
        nearest_into(leaves, queries[r], first, count, bound, best_d, best_i)
        for c in range(count):
            out[r, c] = best_i[first + c]


def nearest_ranks(leaf_fields, queries, first, count):
    """(n, count) int64: for each row of ``queries`` (n, F) the indices of the points of the
    leaf layout ``leaf_fields`` (:data:`Leaves`, a plain tuple) at distance ranks ``first`` ..
    ``first + count - 1`` (:func:`nearest_into`). For a few queries (the search's
    single-target seeding outside the compiled search) this beats a k-d tree query;
    :class:`direction_up_ik.core.seeds.SeedLibrary` picks between the two."""
    leaves = Leaves(*leaf_fields)
    k = first + count
    out = np.empty((len(queries), count), dtype=np.int64)
    nearest_ranks_into(leaf_fields, queries, first, count, out, np.empty(leaves.lo_t.shape[1]), np.empty(k),
                       np.empty(k, dtype=np.int64))
    return out
