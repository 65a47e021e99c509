"""Which backend solves a built problem, and running it there.

Two backends give the same answers (``docs/design.md``): the numpy reference
(:mod:`.solver`) and the compiled numba kernels (:mod:`.compiled`), used by default when
numba imports and the robot model is one they reproduce. ``backend="numpy"`` or the
environment variable ``DIRECTION_UP_IK_BACKEND=numpy`` selects the reference.
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from .errors import InputValidationError
from .problem import IKProblem
from .result import IKBatchResult
from .solver import solve_reference

#: Values of ``backend``; "auto" = numba when importable and the robot is supported.
BACKENDS = ("numpy", "numba", "auto")
#: Environment variable that overrides what "auto" picks ("numpy" or "numba").
BACKEND_ENV = "DIRECTION_UP_IK_BACKEND"
_compiled = None  # direction_up_ik.core.compiled once imported, or the ImportError


def compiled_module():
    """:mod:`direction_up_ik.core.compiled`, or the exception that stopped its import (numba
    missing, broken or incompatible); imported on first call, once per process."""
    global _compiled
    if _compiled is None:
        try:
            from . import compiled as module
        except (ImportError, OSError) as exc:
            module = exc
        _compiled = module
    return _compiled


def compiled_backend_allowed() -> bool:
    """False when ``DIRECTION_UP_IK_BACKEND=numpy`` keeps "auto" (and helpers) off numba."""
    return os.environ.get(BACKEND_ENV) != "numpy"


def select(problem: IKProblem, backend: str):
    """The compiled backend module to solve ``problem`` with, or None for the numpy reference.

    Raises:
        InputValidationError: an unknown ``backend``, or "numba" where it cannot run.
    """
    if backend not in BACKENDS:
        raise InputValidationError("backend", f"must be one of {list(BACKENDS)}, got {backend!r}")
    if backend == "auto" and os.environ.get(BACKEND_ENV) in ("numpy", "numba"):
        backend = os.environ[BACKEND_ENV]
    if backend == "numpy":
        return None
    module = compiled_module()
    if isinstance(module, Exception):
        if backend == "numba":
            raise InputValidationError("backend", f"'numba' is unavailable ({module}); "
                                                  "install requirements/core.txt") from module
        return None
    if not module.supports(problem):
        if backend == "numba":
            raise InputValidationError("backend", "'numba' does not support this robot model "
                                                  f"({type(problem.robot).__name__})")
        return None
    return module


def compiled_backend(problem: IKProblem):
    """The compiled backend module "auto" picks for ``problem``, or None (numpy)."""
    return select(problem, "auto")


def warm_up_backend() -> Optional[float]:
    """Compile (or load from numba's disk cache) the kernels "auto" would use.

    Returns seconds taken, or None when "auto" runs the numpy backend. Long-running
    processes (the ROS node) call it at start-up so no request pays the compile time.
    """
    module = compiled_module() if compiled_backend_allowed() else None
    if module is None or isinstance(module, Exception):
        return None
    return module.warm_up()


def batch_threads(problem: IKProblem) -> int:
    """Threads a big batch of ``problem`` is solved on by the "auto" backend: the compiled
    backend's worker threads, 1 with numpy."""
    module = compiled_backend(problem)
    return 1 if module is None else module.worker_threads()


def solve_problem(problem: IKProblem, q_start: Optional[np.ndarray] = None,
                  deadline: Optional[float] = None, backend: str = "auto",
                  relay: Optional[tuple] = None, parallel: Optional[bool] = None) -> IKBatchResult:
    """Iterate a built problem on the selected backend.

    Args:
        problem: from :func:`~direction_up_ik.core.problem.build_problem`.
        q_start: (B, D) per-candidate start states (default: all at
            ``problem.q_initial``). ``cost`` is always measured from
            ``problem.q_initial``, so candidates started elsewhere (random seeds)
            are still ranked by joint motion from the current state.
        deadline: ``time.perf_counter()`` value after which no new iteration
            starts; candidates still running stop with reason ``time_budget``.
        backend: "numpy" (the reference, :func:`~.solver.solve_reference`), "numba" (the
            compiled :mod:`.compiled`, same results, much faster for small batches) or
            "auto": numba when it imports and supports the robot, else numpy; the
            environment variable ``DIRECTION_UP_IK_BACKEND`` (numpy / numba) overrides
            what "auto" picks.
        relay: optional ``(group, quota)`` for the search's seeds; see
            :func:`~.solver.solve_reference`.
        parallel: compiled backend only: None = a big batch is split over its worker
            threads, False = solved on the calling thread (the search's own slices),
            True = always split. Results do not depend on it.
    """
    compiled = select(problem, backend)
    if compiled is not None:
        try:
            return compiled.solve(problem, q_start, deadline, parallel=parallel, relay=relay)
        except np.linalg.LinAlgError:
            pass  # an exactly singular DLS system (tiny damping): the numpy path handles it
    return solve_reference(problem, q_start, deadline, relay)
