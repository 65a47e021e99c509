"""Which backend solves a built problem, and running it there.

Two backends give the same answers (``docs/design.md``): the numpy reference
(:mod:`.solver`) and the compiled numba kernels (:mod:`.compiled`). ``backend="auto"`` (the
default) uses the kernels once they are ready in this process and the numpy reference
until then: the kernels' first compile takes minutes, so nothing waits for it. The first
"auto" solve starts :func:`prepare_kernels` in the background (a child process compiles
them into numba's disk cache, then this process loads them; with a warm cache that takes
about a second); :func:`warm_up_backend` makes them ready now, blocking. A file lock in the
cache folder keeps processes from compiling the same kernels at once. ``backend="numpy"``
or the environment variable ``DIRECTION_UP_IK_BACKEND=numpy`` selects the reference,
``DIRECTION_UP_IK_BACKEND=numba`` makes "auto" wait for the kernels.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from typing import Callable, List, Optional

import numpy as np

from .errors import InputValidationError
from .problem import IKProblem
from .processes import background_compile_child, python_command
from .result import IKBatchResult
from .solver import solve_reference

#: Values of ``backend``; "auto" = numba when importable and the robot is supported.
BACKENDS = ("numpy", "numba", "auto")
#: Environment variable that overrides what "auto" picks ("numpy" or "numba").
BACKEND_ENV = "DIRECTION_UP_IK_BACKEND"
_compiled = None  # direction_up_ik.core.compiled once imported, or the ImportError
LOG = logging.getLogger(__name__)

#: Values of :func:`kernel_state`.
KERNELS_ABSENT = "absent"        # numba unavailable, or DIRECTION_UP_IK_BACKEND=numpy
KERNELS_COLD = "cold"            # not loaded in this process, nothing started
KERNELS_PREPARING = "preparing"  # compiling (or loading) in the background
KERNELS_READY = "ready"          # loaded: "auto" solves with them
KERNELS_FAILED = "failed"        # preparing failed; "auto" stays on numpy


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


def backend_env() -> Optional[str]:
    """``os.environ.get(BACKEND_ENV)``, read on every solve. Where the variable is not set (the
    usual case), ``os.environ.get`` raises and catches a KeyError inside, a cost a one-target
    search notices (docs/performance.md); on POSIX the mapping's own dict of encoded names
    tells that in a look-up."""
    encoded = getattr(os.environ, "_data", None) if os.name == "posix" else None
    if encoded is not None and _BACKEND_ENV_KEY not in encoded:
        return None
    return os.environ.get(BACKEND_ENV)


_BACKEND_ENV_KEY = os.fsencode(BACKEND_ENV)


def compiled_backend_allowed() -> bool:
    """False when ``DIRECTION_UP_IK_BACKEND=numpy`` keeps "auto" (and helpers) off numba."""
    return backend_env() != "numpy"


def _usable_module():
    """The compiled package when it imports and "auto" may use it, else None."""
    module = compiled_module() if compiled_backend_allowed() else None
    return None if module is None or isinstance(module, Exception) else module


class _Preparation:
    """This process's progress towards loaded kernels (one per process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = KERNELS_COLD
        self.seconds: Optional[float] = None
        self.error = ""
        self.callbacks: List[Callable[[Optional[float], str], None]] = []
        self.child: Optional[subprocess.Popen] = None
        self.stopped = False  # stop_preparing() was called: start no compile


_preparation = _Preparation()


def kernel_state() -> str:
    """Where the compiled kernels stand in this process: one of the ``KERNELS_*`` values. Does
    not import numba before :func:`prepare_kernels` or a "numba" solve has (a second at start-up)."""
    if not compiled_backend_allowed():
        return KERNELS_ABSENT
    if _compiled is None and f"{__package__}.compiled" not in sys.modules:
        return _preparation.state  # nothing can be loaded yet
    if _preparation.state == KERNELS_PREPARING:
        return KERNELS_PREPARING  # its thread may be importing numba: do not wait for that import
    module = _usable_module()
    if module is None:
        return KERNELS_ABSENT
    if _preparation.state in (KERNELS_COLD, KERNELS_FAILED) and module.kernels_loaded():
        _finish(KERNELS_READY, None, "")  # loaded by a direct compiled.warm_up() or "numba" solves
    return _preparation.state


@contextlib.contextmanager
def kernel_lock():
    """Hold the kernels' file lock: no process compiles or loads them meanwhile (for tools and
    tests; :func:`warm_up_backend` and :func:`prepare_kernels` take it themselves)."""
    module = _usable_module()
    if module is None:
        yield
        return
    with _kernel_lock(module):
        yield


@contextlib.contextmanager
def _kernel_lock(module):
    """Hold the file lock of the kernels' cache folder (no lock without a cache)."""
    folder = module.cache_folder()
    if folder is None:
        yield
        return
    import fcntl
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "direction_up_ik.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def warm_up_backend() -> Optional[float]:
    """Make the compiled kernels ready in this process now: load them from numba's disk cache
    (about a second) or compile them (minutes), waiting for another process that is
    compiling them. Returns seconds taken, or None when "auto" runs the numpy backend.
    Benchmarks, tests and the precompile command call it; a server calls
    :func:`prepare_kernels` instead, which does not block."""
    module = _usable_module()
    if module is None:
        return None
    start = time.perf_counter()
    with _kernel_lock(module):
        module.warm_up()
    seconds = time.perf_counter() - start
    _finish(KERNELS_READY, seconds, "")
    return seconds


#: What the background compile's child runs: ``python -m direction_up_ik.precompile --quiet``
#: of this very package (:func:`~.processes.python_command`).
_PRECOMPILE_CODE = "from direction_up_ik.precompile import main; raise SystemExit(main(['--quiet']))"


def prepare_kernels(on_ready: Optional[Callable[[Optional[float], str], None]] = None) -> str:
    """Make the compiled kernels ready without blocking; returns :func:`kernel_state`.

    A background thread imports numba and loads them from its disk cache or, when they are
    not cached, first runs ``direction_up_ik.precompile`` (a child process: the
    compile would hold this interpreter for minutes) to fill it; until then "auto" solves
    with numpy. ``on_ready(seconds, error)`` is called once when that ends (from the
    background thread; ``error`` empty when the kernels are ready), or at once if they are
    already ready or cannot be had. Without a writable cache location the kernels are
    compiled in this process, in the background thread.
    """
    state = kernel_state()
    with _preparation.lock:
        state = _preparation.state if state != KERNELS_ABSENT else state
        if state in (KERNELS_COLD, KERNELS_PREPARING) and on_ready is not None:
            _preparation.callbacks.append(on_ready)
        if state == KERNELS_COLD:
            _preparation.state = state = KERNELS_PREPARING
            _preparation.stopped = False
            threading.Thread(target=_prepare, name="direction_up_ik_kernels", daemon=True).start()
    if on_ready is not None and state not in (KERNELS_COLD, KERNELS_PREPARING):
        on_ready(_preparation.seconds, _preparation.error if state == KERNELS_FAILED else
                 ("" if state == KERNELS_READY else "the compiled backend is off or unavailable"))
    return state


def stop_preparing() -> None:
    """End a running background compile (its child process) and start none later; "auto"
    stays on numpy. A server calls it when it shuts down, so that no compile outlives it."""
    with _preparation.lock:  # the child is started under this lock: none is on its way
        _preparation.stopped = True
        child = _preparation.child
    if child is not None and child.poll() is None:
        child.terminate()


def _prepare() -> None:
    """The background preparation (:func:`prepare_kernels`)."""
    start = time.perf_counter()
    module = _usable_module()  # numba's import, off the caller's thread
    if module is None:
        _finish(KERNELS_ABSENT, None, "the compiled backend is unavailable (numba missing or broken)")
        return
    try:
        if module.cache_folder() is not None and not module.cache_is_warm():
            env = dict(os.environ)
            env.setdefault("OPENBLAS_NUM_THREADS", "1")
            with _preparation.lock:
                if _preparation.stopped:
                    raise RuntimeError("the compile was stopped before it started")
                _preparation.child = subprocess.Popen(
                    python_command(_PRECOMPILE_CODE), env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                    preexec_fn=background_compile_child)
            _, errors = _preparation.child.communicate()
            if _preparation.child.returncode != 0:
                if _preparation.child.returncode < 0:  # stopped (stop_preparing)
                    raise RuntimeError(f"the compile was stopped (signal {-_preparation.child.returncode})")
                LOG.warning("precompiling the solver kernels failed (%s); compiling in this process",
                            errors.strip().splitlines()[-1:] or "no message")
        with _kernel_lock(module):
            module.warm_up()  # a load from the cache the child filled, or the compile itself
    except Exception as exc:  # noqa: BLE001 - reported to the callbacks; "auto" stays on numpy
        _finish(KERNELS_FAILED, None, f"{type(exc).__name__}: {exc}")
        return
    _finish(KERNELS_READY, time.perf_counter() - start, "")


def _finish(state: str, seconds: Optional[float], error: str) -> None:
    with _preparation.lock:
        if _preparation.state == KERNELS_READY:
            return
        _preparation.state, _preparation.seconds, _preparation.error = state, seconds, error
        callbacks, _preparation.callbacks = _preparation.callbacks, []
    for callback in callbacks:
        callback(seconds, error)


def select(problem: IKProblem, backend: str):
    """The compiled backend module to solve ``problem`` with, or None for the numpy reference.

    "auto": the kernels once they are ready in this process (:func:`kernel_state`; the first
    call starts :func:`prepare_kernels`), numpy until then; ``DIRECTION_UP_IK_BACKEND``
    overrides it (numpy; numba: wait for the kernels). "numba" uses the kernels, compiling or
    loading them on the spot if need be.

    Raises:
        InputValidationError: an unknown ``backend``, or "numba" where it cannot run.
    """
    if backend not in BACKENDS:
        raise InputValidationError("backend", f"must be one of {list(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        chosen = backend_env()
        if chosen in ("numpy", "numba"):
            backend = chosen
    if backend == "numpy":
        return None
    if backend == "auto" and kernel_state() != KERNELS_READY:
        prepare_kernels()
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
    """The compiled backend module "auto" picks for ``problem`` now, or None (numpy)."""
    return select(problem, "auto")


def auto_uses(module) -> bool:
    """True when "auto" solves with the compiled ``module`` now: its kernels are ready in this
    process and ``DIRECTION_UP_IK_BACKEND`` does not switch it off. A cheaper form of
    ``compiled_backend(problem) is module`` for a robot model it supports, for a caller that
    asks on every call (``core.one_target``); False where it cannot tell at once."""
    return (_preparation.state == KERNELS_READY and module is _compiled
            and backend_env() != "numpy")


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
            "auto": the kernels once they are ready, numpy until then (see :func:`select`).
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
