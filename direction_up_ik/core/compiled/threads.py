"""The worker threads of big batches (the kernels release the GIL).

Candidates are independent, so a batch cut into slices, one call per slice on these
threads, gives the results of one call; the thread count is numba's
(``NUMBA_NUM_THREADS``, default all cores).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numba

#: Batches of at least this many candidates are solved in slices on worker threads.
PARALLEL_MIN_CANDIDATES = 64


def worker_threads() -> int:
    """Worker threads for big batches: numba's thread count (NUMBA_NUM_THREADS, default all cores)."""
    return max(1, int(numba.config.NUMBA_NUM_THREADS))


def chunks(b: int) -> int:
    """How many slices a batch of b candidates is cut into (1 = one serial call)."""
    if b < PARALLEL_MIN_CANDIDATES:
        return 1
    return max(1, min(worker_threads(), b // (PARALLEL_MIN_CANDIDATES // 2)))


_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """The worker threads (:func:`worker_threads` of them) of big batches' slices and of a
    split search's slices (``core.search``). A job on it must not wait for another job on
    it: the slices of a split search solve on their own thread (``parallel=False``)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=worker_threads(), thread_name_prefix="direction_up_ik_kernel")
        return _pool
