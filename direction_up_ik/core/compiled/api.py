"""The compiled backend as Python sees it: pack a problem into the kernels' arrays, run
them (on worker threads for big batches) and assemble the result.

:func:`solve` is the compiled equivalent of the numpy reference
(``core.solver.solve_reference``), with the same results; :func:`search` runs the whole
multi-seed search of ``core.search`` (nearest seeding, no callback) in one kernel call per
chunk of candidates; :func:`warm_up` compiles (or loads from the disk cache) every kernel.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import weakref
from collections import namedtuple
from typing import Optional

import numpy as np

from ..errors import NumericalFailure
from ..kinematics import RobotKinematics
from ..processes import die_with_parent, python_command
from ..problem import IKProblem, build_problem
from ..result import IKBatchResult, frozen_instance
from ..settings import (FD_EPSILON, MIN_STEP_NORM, RESIDUAL_DAMPING_FLOOR, STALL_RATIO, STEP_SCALES,
                        SolverSettings)
from ..targets import DirectionUpTarget
from . import collision as collision_kernels
from .iteration import alloc_work, run_serial, solve_rows
from .layout import (PHASE_JACOBIAN, PHASE_SINGULAR, PHASE_STEP, PHASES_PER_ITERATION, REASONS, Config,
                     Leaves, Model, Search, State, Targets)
from .numba_support import CLOCK, NATIVE_KERNELS, KernelCache
from .search_rounds import run_search, search_rows, search_scratch
from .seed_scan import nearest_ranks, nearest_ranks_into
from .threads import chunks as slice_count, executor, worker_threads

_models: "weakref.WeakKeyDictionary[RobotKinematics, dict]" = weakref.WeakKeyDictionary()
_models_lock = threading.Lock()
_supported: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()


def supports(problem: IKProblem) -> bool:
    """True when this backend reproduces the problem's robot model.

    The kernels recompute FK from :meth:`RobotKinematics.kernel_arrays`, so a
    subclass that overrides the FK methods is left to the numpy backend.
    """
    cls = type(problem.robot)
    verdict = _supported.get(cls)
    if verdict is None:
        verdict = _supported[cls] = CLOCK is not None and issubclass(cls, RobotKinematics) and all(
            getattr(cls, name) is getattr(RobotKinematics, name)
            for name in ("tcp_poses", "joint_perturbed_tcp_poses", "tcp_joint_motions", "_node_frames",
                         "_tcp_from_nodes", "kernel_arrays"))
    return verdict


# ------------------------------------------------------------------ packing a problem
def model_arrays(problem: IKProblem) -> Model:
    """The problem's :data:`~.layout.Model`, cached per robot, target EEs and root transform."""
    robot = problem.robot
    key = (problem.ee_ids.tobytes(), problem.root_world_xform.tobytes())
    with _models_lock:
        per_robot = _models.setdefault(robot, {})
        model = per_robot.get(key)
    if model is not None:
        return model
    ka = robot.kernel_arrays()
    ee_ids = np.asarray(problem.ee_ids, dtype=np.int64)
    ee_node = ka.ee_node[ee_ids]
    needed = set()
    for node in ee_node:
        node = int(node)
        while node >= 0 and node not in needed:
            needed.add(node)
            node = int(ka.node_parent[node])
    root = np.asarray(problem.root_world_xform, dtype=np.float64)
    f8 = np.float64
    model = Model(
        parent=np.array(ka.node_parent, dtype=np.int64), dof=np.array(ka.node_dof, dtype=np.int64),
        scale=np.array(ka.node_scale, dtype=f8), offset=np.array(ka.node_offset, dtype=f8),
        jtype=np.array(ka.node_type, dtype=np.int64), rot=np.array(ka.node_rot, dtype=f8),
        pos=np.array(ka.node_pos, dtype=f8), rot_cross=np.array(ka.node_rot_cross, dtype=f8),
        rot_outer=np.array(ka.node_rot_outer, dtype=f8),
        axis_parent=np.array(ka.node_axis_parent, dtype=f8),
        axis_local=np.array(ka.node_axis_local, dtype=f8),
        chain=np.array(sorted(needed), dtype=np.int64), ee_node=np.array(ee_node, dtype=np.int64),
        ee_fixed=np.array(ka.ee_fixed[ee_ids], dtype=f8), dof_node=np.array(ka.dof_node, dtype=np.int64),
        moves=np.ascontiguousarray(ka.dof_moves_tcp[:, ee_ids], dtype=np.bool_),
        full_fk=bool(ka.mimic_on_tcp_chain),
        root_rot=np.ascontiguousarray(root[:3, :3]), root_pos=np.ascontiguousarray(root[:3, 3]))
    with _models_lock:
        per_robot[key] = model
    return model


#: The constant part of every Config: the fixed rules both backends follow (``core.settings``).
_CONSTANTS = dict(eps=float(FD_EPSILON), cos_eps=float(np.cos(FD_EPSILON)),
                  sin_eps=float(np.sin(FD_EPSILON)), min_step_norm=float(MIN_STEP_NORM),
                  stall_ratio=float(STALL_RATIO))


def config_fields(problem: IKProblem) -> tuple:
    """``tuple(Config)`` of the problem, built once: kept in the problem's ``__dict__``
    (a frozen dataclass allows that), which :meth:`IKProblem.select` copies, so the
    search's rounds of seeds reuse it. The kernel only reads these arrays."""
    cached = problem.__dict__.get("_kernel_config")
    if cached is None:
        cached = problem.__dict__["_kernel_config"] = tuple(_build_config(problem))
    return cached


def _build_config(problem: IKProblem) -> Config:
    # SolverSettings holds validated Python floats and ints already.
    settings = problem.settings
    active = problem.active
    return Config(
        w_pos=settings.position_weight, w_rot=settings.rotation_weight, damping=settings.damping,
        max_step_norm=settings.max_step_norm, max_position_error=settings.max_position_error,
        position_tol=settings.position_tol, frame_tol=settings.frame_tol_rad, max_iters=settings.max_iters,
        active=active.astype(np.int64, order="C"), lower=problem.lower[active].astype(np.float64, order="C"),
        upper=problem.upper[active].astype(np.float64, order="C"),
        q_initial=problem.q_initial.astype(np.float64, order="C"),
        analytic=problem.analytic_jacobian, stall_window=settings.stall_window,
        fast_math=settings.jacobian == "analytic", residual_damping=settings.damping_mode == "residual",
        damping_floor=RESIDUAL_DAMPING_FLOOR * settings.damping,
        # A writable copy: numba compiles a read-only array argument as another signature.
        turn_joints=(problem.turn_joints.copy() if settings.periodic_joints == "nearest_turn"
                     else np.zeros(0, dtype=np.int64)),
        step_scales=np.array(STEP_SCALES[:settings.num_step_scales], dtype=np.float64), **_CONSTANTS)


def target_arrays(problem: IKProblem) -> Targets:
    """The problem's :data:`~.layout.Targets`: writable C-order copies of the kernel's types
    from the read-only problem."""
    f8, b1, p = np.float64, np.bool_, problem
    return Targets(
        position=p.target_position.astype(f8, order="C"), direction=p.target_direction.astype(f8, order="C"),
        up=p.target_up.astype(f8, order="C"), has_direction=p.has_direction.astype(b1, order="C"),
        has_up=p.has_up.astype(b1, order="C"), local_direction=p.local_direction.astype(f8, order="C"),
        local_up=p.local_up.astype(f8, order="C"))


# -------------------------------------------------------------------------- solving
def solve(problem: IKProblem, q_start: Optional[np.ndarray] = None,
          deadline: Optional[float] = None, parallel: Optional[bool] = None,
          relay: Optional[tuple] = None) -> IKBatchResult:
    """Compiled equivalent of :func:`direction_up_ik.core.solver.solve_reference`.

    Args:
        problem, q_start, deadline, relay: as for ``core.backend.solve_problem``.
        parallel: cut the batch into slices solved on worker threads (the
            kernel releases the GIL); None = when B >= ``threads.PARALLEL_MIN_CANDIDATES``
            and there are several cores. Results do not depend on it.
    Raises:
        NumericalFailure: non-finite residual, Jacobian or step (same candidates
            and message as the reference); numpy.linalg.LinAlgError: an exactly
            singular system (as ``numpy.linalg.solve`` in the reference).
    """
    b, d = problem.num_candidates, len(problem.q_initial)
    e = problem.num_targets
    q = np.empty((b, d))
    q[:] = problem.q_initial if q_start is None else np.reshape(q_start, (b, d))
    model, targets = model_arrays(problem), target_arrays(problem)
    config = config_fields(problem)  # a plain tuple
    empty, i4, i8 = np.empty, np.int32, np.int64
    if relay is None:
        group = quota = np.zeros(b, dtype=i8)  # one array: the kernel only reads both
    else:
        group, quota = (np.ascontiguousarray(x, dtype=i8).reshape(b) for x in relay)
    state = State(q=q, r=empty((b, 9 * e)), ssr=empty(b), err=empty((b, 3, e)), iterations=empty(b, i4),
                  reason=empty(b, i8), fail_key=empty(b, i8), done=empty(b, np.bool_),
                  success=empty(b, i4), cost=empty(b), group=group, quota=quota)
    has_deadline, deadline_ns = _deadline_ns(deadline)
    if parallel is None:
        chunks = slice_count(b)
    else:
        chunks = min(worker_threads(), b) if parallel else 1
    if chunks == 1:
        failed = run_serial(tuple(model), tuple(targets), config, tuple(state), has_deadline, deadline_ns)
    else:
        # Candidates are independent: each thread runs run_serial on a contiguous slice
        # (views, so the results land in state). A slice stops at its own first numerical
        # failure, after finishing that iteration, so the smallest fail_key over all
        # slices and the candidates holding it are exactly those of a single call.
        bounds = np.linspace(0, b, chunks + 1).astype(int)
        if relay is not None:  # a relay stays in one slice (its rows interact)
            bounds = np.unique([_group_start(group, int(x)) for x in bounds] + [b])
        jobs = [executor().submit(run_serial, tuple(model), tuple(_rows(targets, lo, hi)), config,
                                  tuple(_rows(state, lo, hi)), has_deadline, deadline_ns)
                for lo, hi in zip(bounds[:-1], bounds[1:])]
        failed = any([job.result() for job in jobs])
    if failed:
        _raise_failure(state.fail_key)
    return _assemble_result(problem, state)


#: Candidates per call of a compiled search's chunks (:func:`search`): the chunks of a big
#: batch queue for the worker threads, so a thread that finishes early takes the next one
#: (smaller chunks pay their dispatch and scratch more often: docs/performance.md).
SEARCH_CHUNK_ROWS = 128

#: What :func:`search` returns: the candidates' picks as an IKBatchResult (``best_index``
#: by ``best_score``), ``starts``, ``successes`` (B,) int64, ``best_score`` (B,) (inf: no
#: success; None when round 0 settled every candidate: then the caller scores them),
#: ``rounds`` run (round 0 included), ``status`` (:data:`~.layout.Search`'s ``outcome``),
#: ``iterations`` (B,) int64 summed over every start and ``closest`` (B,) (the reported
#: attempt's closeness where no success; None with ``best_score`` None). A candidate without
#: a success reports its nearest attempt.
SearchOutcome = namedtuple("SearchOutcome", ("result", "starts", "successes", "best_score", "rounds",
                                             "status", "iterations", "closest"))


def search(problem: IKProblem, *, num_seeds: int, max_rounds: int, unlimited: bool, min_successes: int,
           limit_center: bool, seed_arrays, deadline: Optional[float] = None,
           parallel: Optional[bool] = None) -> Optional[SearchOutcome]:
    """The multi-seed search of ``core.search`` (nearest seeding, no callback) in compiled
    code: round 0 and every round of seeds of a candidate in one kernel call
    (``search_rounds.run_search``), no Python between the rounds.

    Args:
        problem: built with the search's settings; num_seeds, max_rounds (>= 0, with
            the rounds' ranks within the libraries), unlimited (see
            :data:`~.layout.Search`), min_successes: as for the search; limit_center: the
            "limit_center" selection (else least motion).
        seed_arrays: called (once, only when rounds of seeds may run) for a dict of the
            library and selection arrays of :data:`~.layout.Search` (``leaves`` ...
            ``center_bounded``, ``first_rounds``, ``limit_leaves``, ``limit_lib_q``; writable
            and C-contiguous but the libraries' states, read-only; ranks enough for every
            round), or None: then this returns None.
        deadline: ``time.perf_counter()`` value: no round starts after it, running solves
            stop at it (reason time_budget).
        parallel: None = a batch of at least :data:`SEARCH_CHUNK_ROWS` candidates is cut
            into chunks of at most that many, at least one per worker thread, queued for
            the worker threads (each with round 0 in the kernel call); False = on the
            calling thread: round 0 first (``iteration.run_serial``), which settles most
            single targets, then the rounds. Results do not depend on it.
    Returns:
        a :data:`SearchOutcome`, or None after a numerical failure (the caller then runs the
        reference search, which raises it) or without seed arrays.
    """
    b, d, e = problem.num_candidates, len(problem.q_initial), problem.num_targets
    q = np.empty((b, d))
    q[:] = problem.q_initial
    model, targets = model_arrays(problem), target_arrays(problem)
    config = config_fields(problem)
    empty, i4, i8 = np.empty, np.int32, np.int64
    zeros = np.zeros(b, dtype=i8)
    state = State(q=q, r=empty((b, 9 * e)), ssr=empty(b), err=empty((b, 3, e)), iterations=empty(b, i4),
                  reason=empty(b, i8), fail_key=empty(b, i8), done=empty(b, np.bool_),
                  success=empty(b, i4), cost=empty(b), group=zeros, quota=zeros)
    has_deadline, deadline_ns = _deadline_ns(deadline)
    model_t, targets_t, state_t = tuple(model), tuple(targets), tuple(state)
    chunks = 1
    if parallel is None and worker_threads() > 1 and b >= SEARCH_CHUNK_ROWS:
        chunks = max(worker_threads(), -(-b // SEARCH_CHUNK_ROWS))
    if chunks == 1:
        if run_serial(model_t, targets_t, config, state_t, has_deadline, deadline_ns):
            return None
        successes = state.success.astype(i8)
        if num_seeds == 0 or max_rounds == 0 or np.all(successes >= min_successes):
            return SearchOutcome(_assemble_result(problem, state), np.ones(b, dtype=i8), successes, None, 1, 0,
                                 state.iterations.astype(i8), None)
    arrays = seed_arrays()
    if arrays is None:
        return None
    arrays["leaves"], arrays["limit_leaves"] = tuple(arrays["leaves"]), tuple(arrays["limit_leaves"])
    spec = Search(round0_done=chunks == 1, num_seeds=int(num_seeds), max_rounds=int(max_rounds),
                  unlimited=bool(unlimited), min_successes=int(min_successes), limit_center=bool(limit_center),
                  starts=empty(b, i8), successes=empty(b, i8), best_score=empty(b),
                  outcome=np.zeros((chunks, 2), dtype=i8), iterations=empty(b, i8), closest=empty(b),
                  own_query=False, feature_reach=0.0, axis_scale=0.0, **arrays)
    if chunks == 1:
        failed = run_search(model_t, targets_t, config, state_t, has_deadline, deadline_ns,
                            tuple(spec._replace(outcome=spec.outcome[0])))
    else:
        bounds = np.linspace(0, b, chunks + 1).astype(int).tolist()
        jobs = [executor().submit(
            run_search, model_t, tuple(_rows(targets, lo, hi)), config, tuple(_rows(state, lo, hi)),
            has_deadline, deadline_ns,
            tuple(spec._replace(query=spec.query[lo:hi], starts=spec.starts[lo:hi],
                                successes=spec.successes[lo:hi], best_score=spec.best_score[lo:hi],
                                iterations=spec.iterations[lo:hi], closest=spec.closest[lo:hi],
                                outcome=spec.outcome[i])))
            for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
        failed = any([job.result() for job in jobs])
    if failed:
        return None
    return SearchOutcome(_assemble_result(problem, state, spec.best_score), spec.starts, spec.successes,
                         spec.best_score, int(spec.outcome[:, 0].max()), int(spec.outcome[:, 1].max()),
                         spec.iterations, spec.closest)


def feature_count(problem: IKProblem) -> int:
    """F, the seed library's query features of one of the problem's candidates (its first):
    3 per slot and 3 per constrained axis (``seeds.pose_features``)."""
    return 3 * (problem.num_targets + int(problem.has_direction[0].sum()) + int(problem.has_up[0].sum()))


#: (1,) int64 one start: round 0's count (copied per call).
_ONE_START = np.ones(1, dtype=np.int64)


class OneSolve:
    """The local solve of one candidate of one target slot layout, its arguments kept between
    calls: the model, config, target, state and scratch arrays are allocated once, and a call
    writes the start state and the targets into them (:meth:`put`). :meth:`solve_once` runs
    the kernel :func:`solve` runs (``iteration.solve_rows``) on the same values, through its
    compiled function for these argument types (:func:`compiled_overload`), so the answers
    are the same; the spec's entry point takes it for one candidate (``core.one_target``).

    Args:
        problem: one candidate of one target slot layout; its slot layout (end effectors,
            local axes, constraint pattern), settings, active joints and bounds are those of
            every later call (its targets and start are not).
    """

    def __init__(self, problem: IKProblem) -> None:
        d, e = len(problem.q_initial), problem.num_targets
        empty, i8 = np.empty, np.int64
        self.model = model_arrays(problem)
        # Writable copies: a call writes its target into the first three; the constraint
        # pattern and the free parts' placeholders stay as the problem's.
        self.targets = target_arrays(problem)
        self.config = _build_config(problem)
        self.q_initial = self.config.q_initial  # (D,) float64, written by each call
        zeros = np.zeros(1, dtype=i8)
        self.state = State(q=empty((1, d)), r=empty((1, 9 * e)), ssr=empty(1), err=empty((1, 3, e)),
                           iterations=empty(1, np.int32), reason=empty(1, i8), fail_key=empty(1, i8),
                           done=empty(1, np.bool_), success=empty(1, np.int32), cost=empty(1), group=zeros,
                           quota=zeros)
        self.active_dof_ids = tuple(problem.active.tolist())
        # Round 0's scratch (one block of one row), reused: the kernels write every scratch
        # value before reading it (a test runs them on scratch full of NaN).
        self.work = alloc_work(1, len(self.model.parent), e, len(self.config.active), d, self.config.stall_window)
        # The compiled kernel now, so that no call types its arguments inside its time budget.
        self.solve = compiled_overload(solve_rows, self.model, self.targets, self.config, self.state, self.work,
                                       False, 0)

    def put(self, q_start: np.ndarray, position: np.ndarray, direction: Optional[np.ndarray],
            up: Optional[np.ndarray]) -> None:
        """Write the start ``q_start`` (D,) and slot 0's target (``position`` (3,) m, the unit
        axes ``direction`` and ``up`` (3,), None where the pattern leaves them free); the other
        slots' the caller writes into :attr:`targets`."""
        targets = self.targets
        q = self.q_initial
        q[:] = q_start
        self.state.q[0] = q
        targets.position[0, 0] = position
        if direction is not None:
            targets.direction[0, 0] = direction
        if up is not None:
            targets.up[0, 0] = up

    def solve_once(self, q_start: np.ndarray, position: np.ndarray, direction: Optional[np.ndarray],
                   up: Optional[np.ndarray]) -> Optional[IKBatchResult]:
        """:func:`solve` of this layout's candidate (arguments as :meth:`put`), no deadline:
        its IKBatchResult (arrays of the caller's own), or None after a numerical failure (the
        caller then solves the built problem, which raises it)."""
        self.put(q_start, position, direction, up)
        if self.solve(self.model, self.targets, self.config, self.state, self.work, False, 0):
            return None
        return self._result()

    def _result(self) -> IKBatchResult:
        """:func:`_assemble_result` of the state, as copies (the buffers serve the next call);
        ``best_index`` 0 on success (one candidate, whatever the score)."""
        state = self.state
        err = state.err.transpose(1, 0, 2).copy()
        success = state.success.copy()
        return frozen_instance(
            IKBatchResult, joint_q=state.q.astype(np.float32), success=success, cost=state.cost.copy(),
            best_index=0 if success[0] else None, position_error=err[0], direction_error=err[1],
            up_error=err[2], iterations=state.iterations.copy(), stop_reason=(REASONS[state.reason[0]],),
            active_dof_ids=self.active_dof_ids, device="cpu", backend="numba")


class OneCandidate(OneSolve):
    """The compiled search's arguments for one candidate of one target slot layout, kept
    between calls: :class:`OneSolve`'s, and the search arrays. A call (:meth:`run`) runs the
    same kernels on the same values as :func:`search` of that one candidate, so the answers
    are the same: round 0 (``iteration.solve_rows``), then, where that does not settle it, the
    rounds of seeds (``search_rounds.search_rows``; they compute the query features and the
    anchor, ``Search.own_query``), each through its compiled function for these argument types
    (:func:`compiled_overload`). Numba's dispatcher would find the same ones by typing every
    array on each call, and the entry points of :func:`search` allocate their scratch and take
    their arrays into numba's runtime on every call. ``core.one_target``
    keeps one per thread and layout (docs/performance.md, "One target").

    Args:
        problem: as for :class:`OneSolve`, built with the search's settings.
        features: (reach, axis scale) of the seed library's query features
            (``seeds.FEATURE_REACH``, ``seeds.AXIS_SCALE``).
        seed_arrays: the library and selection arrays of :data:`~.layout.Search` (``leaves`` ...
            ``limit_lib_q``, as :func:`search` asks for; the kernel writes each call's query
            features and anchor into copies of ``query`` and ``anchor``). Its rounds rank the
            uniform library alone.
    """

    def __init__(self, problem: IKProblem, features: tuple, seed_arrays: dict) -> None:
        arrays = seed_arrays
        if arrays["query"].shape[1] != feature_count(problem):  # the kernel writes that many
            raise ValueError(f"seed query features: {arrays['query'].shape[1]} columns, the targets have "
                             f"{feature_count(problem)}")
        super().__init__(problem)
        self.spec = Search(
            round0_done=True, num_seeds=0, max_rounds=0, unlimited=False, min_successes=0, limit_center=False,
            leaves=Leaves(*arrays["leaves"]), query=arrays["query"].copy(), lib_q=arrays["lib_q"],
            periodic=arrays["periodic"], periodic_lo=arrays["periodic_lo"], periodic_hi=arrays["periodic_hi"],
            anchor=arrays["anchor"].copy(), center_mid=arrays["center_mid"], center_half=arrays["center_half"],
            center_bounded=arrays["center_bounded"], starts=np.empty(1, np.int64), successes=np.empty(1, np.int64),
            best_score=np.empty(1), outcome=np.zeros(2, dtype=np.int64), iterations=np.empty(1, np.int64),
            closest=np.empty(1), own_query=True, feature_reach=float(features[0]), axis_scale=float(features[1]),
            first_rounds=0, limit_leaves=Leaves(*arrays["limit_leaves"]), limit_lib_q=arrays["limit_lib_q"])
        self._rounds_args: dict = {}  # {(num_seeds, ... has_deadline, limit_center): args}
        args = self._rounds_arguments((1, 1, False, 1, False, False))
        self.rounds = compiled_overload(search_rows, *args[:6], 0, *args[6:])

    def run(self, q_start: np.ndarray, position: np.ndarray, direction: Optional[np.ndarray],
            up: Optional[np.ndarray], *, num_seeds: int, max_rounds: int, unlimited: bool,
            min_successes: int, deadline: Optional[float], limit_center: bool = False) -> Optional[SearchOutcome]:
        """:func:`search` of this layout's candidate at target ``position`` (3,) m with the
        unit axes ``direction`` and ``up`` (3,) (None where the pattern leaves them free) from
        joint state ``q_start`` (D,) (values of float32); the other arguments and the return as
        :func:`search` (``limit_center`` needs the centre arrays in the layout's seed arrays).
        Every returned array is the caller's own."""
        self.put(q_start, position, direction, up)
        state = self.state
        has_deadline, deadline_ns = _deadline_ns(deadline)
        if self.solve(self.model, self.targets, self.config, state, self.work, has_deadline, deadline_ns):
            return None
        if num_seeds == 0 or max_rounds == 0 or state.success[0] >= min_successes:
            return SearchOutcome(self._result(), _ONE_START.copy(), state.success.astype(np.int64), None, 1, 0,
                                 state.iterations.astype(np.int64), None)
        options = (num_seeds, max_rounds, unlimited, min_successes, has_deadline, limit_center)
        args = self._rounds_args.get(options)
        if args is None:  # the same arrays every call: kept per options
            args = self._rounds_arguments(options)
        if self.rounds(*args[:6], deadline_ns, *args[6:]):
            return None
        spec = args[6]
        return SearchOutcome(self._result(), spec.starts.copy(), spec.successes.copy(), spec.best_score.copy(),
                             int(spec.outcome[0]), int(spec.outcome[1]), spec.iterations.copy(),
                             spec.closest.copy())

    def _rounds_arguments(self, options: tuple) -> tuple:
        """``search_rows``' arguments before and after the deadline's instant (the model,
        targets, config, state, scratch of the blocks, whether there is a deadline; the
        :data:`~.layout.Search`, the rows of a round of seeds, their targets, the seed ranking's
        scratch) of a search with these ``options``, kept in ``_rounds_args``."""
        num_seeds, max_rounds, unlimited, min_successes, has_deadline, limit_center = options
        # Its rounds rank the uniform library alone (search_plan.kernel_rounds without the
        # library near the limits): first_rounds past the last.
        spec = self.spec._replace(num_seeds=int(num_seeds), max_rounds=int(max_rounds), unlimited=bool(unlimited),
                                  min_successes=int(min_successes), limit_center=bool(limit_center),
                                  first_rounds=int(max_rounds))
        seeds, seed_targets, scan, work = search_scratch(1, spec.num_seeds, spec.max_rounds, has_deadline,
                                                         self.model, self.targets, self.config, self.state, spec)
        if len(self._rounds_args) >= 8:
            self._rounds_args.clear()
        args = self._rounds_args[options] = (self.model, self.targets, self.config, self.state, work, has_deadline,
                                           spec, seeds, seed_targets, scan)
        return args


def compiled_overload(kernel, *args):
    """The compiled function of the numba dispatcher ``kernel`` for arguments of the types of
    ``args`` (named tuples of arrays for its named tuples), to be called with arguments of
    exactly these types. Loaded entry points have loaded it (``numba_support.native_call``);
    otherwise it is compiled (or loaded from the disk cache) now. Found once per
    :func:`_type_key` of the arguments: numba's typing of some forty arrays costs several
    general-path calls, which every new one-candidate layout paid (docs/performance.md)."""
    key = (kernel, _type_key(args))
    found = _OVERLOADS.get(key)
    if found is None:
        types = tuple(kernel.typeof_pyval(a) for a in args)
        kernel.compile(types)
        found = kernel.get_overload(types)
        if len(_OVERLOADS) >= 64:
            _OVERLOADS.clear()
        _OVERLOADS[key] = found
    return found


#: {(dispatcher, argument type key): its compiled function} of :func:`compiled_overload`.
_OVERLOADS: dict = {}


def _type_key(value):
    """What numba's type of ``value`` depends on, cheaper to find: an array's dtype, number of
    dimensions, layout (C, F or any) and writability; a tuple's class and its items' keys; a
    scalar's Python type (and for an int whether it fits int64). Equal keys, equal types."""
    if isinstance(value, np.ndarray):
        flags = value.flags
        layout = "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")
        return type(value), value.dtype, value.ndim, layout, flags.writeable
    if isinstance(value, tuple):
        return type(value), tuple(map(_type_key, value))
    if type(value) is int:
        return int, -(2 ** 63) <= value < 2 ** 63
    return type(value)


def _group_start(group: np.ndarray, i: int) -> int:
    """The first row of the run of equal ``group`` values that holds row i (i <= len)."""
    while 0 < i < len(group) and group[i] == group[i - 1]:
        i -= 1
    return i


def _deadline_ns(deadline: Optional[float]):
    """(has_deadline, the same instant on the kernels' clock (``numba_support.CLOCK``) in ns).

    Like the reference's ``time.perf_counter() > deadline``: NaN or +inf never
    stops, -inf stops at once (remaining time clamped to +-1e9 s).
    """
    if deadline is None:
        return False, 0
    remaining = float(deadline) - time.perf_counter()
    if not remaining < 1e9:  # NaN, +inf, or far away
        return False, 0
    return True, time.clock_gettime_ns(CLOCK) + round(max(remaining, -1e9) * 1e9)


def _rows(fields, lo: int, hi: int):
    """The same named tuple with every candidate-leading array cut to rows lo:hi (views)."""
    if isinstance(fields, Targets):
        return fields._replace(position=fields.position[lo:hi], direction=fields.direction[lo:hi],
                               up=fields.up[lo:hi], has_direction=fields.has_direction[lo:hi],
                               has_up=fields.has_up[lo:hi])
    return type(fields)(*(x[lo:hi] for x in fields))


def _raise_failure(fail_key: np.ndarray) -> None:
    failed = fail_key >= 0
    first = int(np.min(fail_key[failed]))
    phase = first % PHASES_PER_ITERATION
    if phase == PHASE_SINGULAR:
        raise np.linalg.LinAlgError("Singular matrix")
    what = {PHASE_JACOBIAN: "Jacobian", PHASE_STEP: "joint step"}.get(phase, "residual")
    raise NumericalFailure(sorted(int(c) for c in np.flatnonzero(fail_key == first)),
                           f"non-finite {what}")


def _assemble_result(problem: IKProblem, state: State, score: Optional[np.ndarray] = None) -> IKBatchResult:
    """Assemble the result exactly as the reference does; ``best_index`` is the lowest
    ``score`` (default: ``cost``) when a candidate succeeded."""
    # The kernel computed success, cost and the NaN of free parts (finish_candidate),
    # so this is a handful of numpy calls even for one candidate.
    err = state.err.transpose(1, 0, 2).copy()  # (3, B, E): position, direction, up
    success = state.success
    best = int((state.cost if score is None else score).argmin()) if success.any() else None
    return IKBatchResult(
        joint_q=state.q.astype(np.float32), success=success, cost=state.cost,
        best_index=best, position_error=err[0], direction_error=err[1], up_error=err[2],
        iterations=state.iterations,
        stop_reason=tuple(map(REASONS.__getitem__, state.reason.tolist())),
        active_dof_ids=tuple(problem.active.tolist()), backend="numba")


# -------------------------------------------------------------------------- warm-up
def search_loaded() -> bool:
    """True once the compiled search is compiled or loaded in this process."""
    return bool(run_search.signatures)


#: The entry points Python calls; compiling or loading them makes the kernels ready.
_ENTRY_POINTS = (run_serial, run_search, nearest_ranks_into)


def kernels_loaded() -> bool:
    """True once every kernel entry point (the collision check's too) is compiled or loaded in
    this process."""
    return all(kernel.signatures for kernel in _ENTRY_POINTS) and collision_kernels.loaded()


def cache_is_warm() -> bool:
    """True when numba's disk cache holds every kernel entry point for these sources, so that
    :func:`warm_up` loads them (about a second) instead of compiling them."""
    for kernel in _ENTRY_POINTS + tuple(NATIVE_KERNELS):  # loading an entry point loads these
        cache = kernel._cache
        if not isinstance(cache, KernelCache) or not cache._cache_file._load_index():
            return False
    return collision_kernels.cache_is_warm()


def cache_folder() -> Optional[str]:
    """The folder of the kernels' disk cache, or None when numba found no writable location
    (then every process compiles them)."""
    cache = run_serial._cache
    return cache.cache_path if isinstance(cache, KernelCache) else None


def _warm_up_search(problem: IKProblem) -> None:
    """Searches of ``problem`` with a two-state library and arrays of the types the search
    module passes (``core.search``), to compile ``search_rounds.run_search``, and of its first
    candidate as the one-target path runs it (:class:`OneCandidate`)."""
    d, a, f = len(problem.q_initial), problem.active, feature_count(problem)
    lib_q = np.tile(problem.q_initial, (2, 1))
    lib_q.setflags(write=False)
    leaves = Leaves(points_t=np.zeros((f, 2)), index=np.arange(2, dtype=np.int64),
                    start=np.array([0, 2], dtype=np.int64), lo_t=np.zeros((f, 1)), hi_t=np.zeros((f, 1)))
    arrays = dict(leaves=leaves, query=np.zeros((problem.num_candidates, f)), lib_q=lib_q,
                  periodic=np.array([a[0]], dtype=np.int64), periodic_lo=np.array([-3.0]),
                  periodic_hi=np.array([3.0]), anchor=np.zeros(d), center_mid=np.zeros(len(a)),
                  center_half=np.ones(len(a)), center_bounded=np.ones(len(a), dtype=np.bool_),
                  first_rounds=1, limit_leaves=leaves, limit_lib_q=lib_q)  # round 2 from the second library
    for deadline in (None, time.perf_counter() + 60.0):
        search(problem, num_seeds=1, max_rounds=2, unlimited=False, min_successes=2, limit_center=True,
               seed_arrays=lambda: arrays, deadline=deadline)
    one = OneCandidate(problem.select([0]), (1e6, 0.3), arrays)  # any reach and scale: the types count
    one.run(problem.q_initial, problem.target_position[0, 0], None, None, num_seeds=1, max_rounds=2,
            unlimited=False, min_successes=2, deadline=None)


_WARM_UP_URDF = """<robot name='warm_up'><link name='base'/><link name='l1'/><link name='l2'/>
  <link name='tip'/>
  <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/><axis xyz='0 0 1'/>
    <limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
  <joint name='j2' type='prismatic'><parent link='l1'/><child link='l2'/>
    <origin xyz='0.3 0 0'/><axis xyz='1 0 0'/><limit lower='0' upper='0.2' effort='1' velocity='1'/></joint>
  <joint name='j3' type='revolute'><parent link='l2'/><child link='tip'/><origin xyz='0.2 0 0'/>
    <axis xyz='0 1 0'/><mimic joint='j1' multiplier='0.5'/>
    <limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
</robot>"""


def warm_up() -> float:
    """Compile (or load from the cache) every kernel on a tiny problem; returns seconds taken.

    Runs the shortcut and full-FK Jacobians, a deadline, the threaded path, the search and
    the seed scan.
    """
    t0 = time.perf_counter()
    aside = _compile_collision_aside()
    settings = SolverSettings(max_position_error=0.03, max_iters=3)
    targets = [(DirectionUpTarget(0, (0.3, y, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)),)
               for y in (0.2, -0.2)]
    for mimic in (False, True):
        text = _WARM_UP_URDF if mimic else _WARM_UP_URDF.replace("<mimic joint='j1' multiplier='0.5'/>", "")
        robot = RobotKinematics.from_urdf(text, ["tip"])
        problem = build_problem(robot, targets, None, "cpu", None, settings)
        solve(problem, parallel=False)
        solve(problem, deadline=time.perf_counter() + 60.0, parallel=True)
        _warm_up_search(problem)
    leaves = Leaves(np.zeros((3, 4)), np.arange(4, dtype=np.int64), np.array([0, 2, 4], dtype=np.int64),
                    np.zeros((3, 2)), np.zeros((3, 2)))
    nearest_ranks(tuple(leaves), np.zeros((1, 3)), 1, 2)
    if aside is not None:
        aside.wait()  # a failed child leaves the compile to this process
    collision_kernels.warm_up()
    return time.perf_counter() - t0


def _compile_collision_aside() -> Optional[subprocess.Popen]:
    """On a cold cache and more than one core, a child process that compiles the collision
    kernels into the cache while this one compiles the solver's, so that the first compile
    takes the longer of the two instead of their sum. It dies with this process (Linux)."""
    if (os.cpu_count() or 1) < 2 or cache_folder() is None or collision_kernels.cache_is_warm():
        return None
    code = "from direction_up_ik.core.compiled import collision; collision.warm_up()"
    return subprocess.Popen(python_command(code), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
