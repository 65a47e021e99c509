"""The compiled (numba) backend: the batch solver and the multi-seed search as kernels.

Same algorithm, same arithmetic and the same results as the numpy reference
(:mod:`direction_up_ik.core.solver`, spec sections 3 and 5), much faster for small
batches; ``docs/design.md`` explains how the two are kept in step. One module per role:

* :mod:`.numba_support`: decorators, the disk cache keyed on this package's sources, a
  clock and stack arrays for the kernels;
* :mod:`.layout`: the named tuples of arrays the kernels work on and their integer codes;
* :mod:`.vector_math`: 3-vectors, sin/cos, the axis errors, numpy-ordered sums;
* :mod:`.fk`, :mod:`.residuals`, :mod:`.jacobians`: forward kinematics, the residuals of
  spec 5.2 and their Jacobians;
* :mod:`.step`: the damped least-squares step kept inside the limits;
* :mod:`.iteration`: the iteration of spec 5.3/5.4, the relay of the search's seeds and the
  solve's entry point;
* :mod:`.search_rounds`, :mod:`.seed_scan`: the search's rounds of seeds and the ranking of
  library states;
* :mod:`.threads`: the worker threads of big batches;
* :mod:`.api`: what Python calls (:func:`solve`, :func:`search`, :class:`OneCandidate` and
  :class:`OneSolve`: the search and the spec's solve of one candidate on arrays kept between
  calls, :func:`warm_up`).

Importing this package needs numba; :mod:`direction_up_ik.core.backend` decides whether it
is used.
"""

from .api import (SEARCH_CHUNK_ROWS, OneCandidate, OneSolve, SearchOutcome, cache_folder, cache_is_warm, kernels_loaded, search,
                  search_loaded, solve, supports, warm_up)
from .seed_scan import nearest_ranks
from .threads import PARALLEL_MIN_CANDIDATES, executor, worker_threads

__all__ = ["OneCandidate", "OneSolve", "PARALLEL_MIN_CANDIDATES", "SEARCH_CHUNK_ROWS", "SearchOutcome", "cache_folder", "cache_is_warm", "executor",
           "kernels_loaded", "nearest_ranks", "search", "search_loaded", "solve", "supports", "warm_up",
           "worker_threads"]
