"""The search's public calls: :func:`robo_search_ik_direction_up` and :func:`warm_up_search`.

The search itself (rounds of seeds, the compiled search, the collision-aware search) is
:mod:`.search`. A request of one candidate (one target, or one per end effector), as a
planner, a teleop loop or the node sends it, goes a shorter way (:func:`_search_one_target`,
on the arrays :mod:`.one_target` keeps per layout) with the same answers; every other request
builds its problem and calls :func:`.search.search_problem`. :func:`search_with_settings` is
the same call for validated settings.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from . import one_target
from .backend import compiled_backend
from .collision import CollisionScene
from .errors import DirectionUpIKError
from .kinematics import RobotKinematics
from .problem import IKProblem, build_problem
from .result import frozen_instance
from . import search as engine  # its module attributes: tests switch paths there
from .search import NO_PAIR, AcceptFn, SearchResult, _Compiled
from .search_plan import kernel_rounds
from .seeds import LIBRARY_SIZE, library_for, limit_library_for
from .settings import SEARCH_SOLVER_DEFAULTS, SearchSettings, SolverSettings, search_settings, solver_settings
from .targets import DirectionUpTarget

#: False sends a search of one target through the general path too (``core.one_target`` takes
#: the usual ones; tests compare the two).
ONE_TARGET_PATH = True


def warm_up_search(robot: RobotKinematics, candidates=None, active_dof_ids=None, *, joint_bounds=None,
                   root_world_xform=None) -> float:
    """Build what a search of this set-up needs besides the compiled kernel, so that no
    search pays it inside its time budget: the seed libraries (:mod:`.seeds`, uniform and near
    the limits), and for every slot layout a request may use their features, the compiled scan's
    leaves and the k-d tree, at the robot's current state; and load the compiled search
    (:func:`_compiled_search`).

    Args:
        robot, active_dof_ids, joint_bounds, root_world_xform: as for the search.
        candidates: example candidates of one layout (their end effectors, local axes and
            modes); default: every layout a request names without explicit local axes
            (:func:`example_layouts`). A layout with other explicit axes is built on its
            first search (about a millisecond or two, docs/performance.md).
    Returns:
        seconds taken. Raises what ``build_problem`` raises (e.g. JointLimitError when the
        current state is outside the limits).
    """
    start = time.perf_counter()
    layouts = example_layouts(robot) if candidates is None else [candidates]
    settings = solver_settings(max_position_error=1.0, **SEARCH_SOLVER_DEFAULTS)
    for example in layouts:
        problem = build_problem(robot, example, active_dof_ids, "cpu", root_world_xform, settings,
                                joint_bounds=joint_bounds)
        library_for(problem).prepare(problem)
        limit_library_for(problem).prepare(problem)  # the later rounds' (search_plan.seed_source)
    library_for(problem).nearest(problem, np.arange(1), 0, 1)  # loads the compiled scan, if ready
    module = compiled_backend(problem)
    if module is not None and not module.search_loaded():
        # One round of seeds (min_successes 2 asks for it) loads the compiled search, whose
        # first call in a process would take more than a usual time budget.
        engine._compiled_search(problem, num_seeds=1, deadline=None, max_rounds=1, min_successes=2,
                         selection="least_motion")
    return time.perf_counter() - start


def example_layouts(robot: RobotKinematics) -> list:
    """One example candidate list per slot layout a request can name without explicit local
    axes: each end effector alone and (for several) all of them in model order, each with the
    +X/+Y (the default) and the +Z/+Y (TCP) local axes, in full, axis and position modes
    (position-only once: it has no axes). The targets lie at the TCPs' current poses."""
    tcp = robot.tcp_transforms(robot.joint_q[None])[0]
    count = robot.num_end_effectors
    groups = [(e,) for e in range(count)] + ([tuple(range(count))] if count > 1 else [])
    # (column of the TCP rotation along Direction, local axes): +Z/+Y (TCP) and +X/+Y (default)
    conventions = ((2, (None, None)), (0, ()))
    kinds = [(conventions[0], "position")] + [(c, m) for c in conventions for m in ("full", "axis")]
    layouts = []
    for ees in groups:
        for (column, local), mode in kinds:
            layouts.append([tuple(DirectionUpTarget(
                e, tcp[e, :3, 3], None if mode == "position" else tcp[e, :3, column],
                tcp[e, :3, 1] if mode == "full" else None, *local) for e in ees)])
    return layouts


#: (1,) NaN: the clearance of a one-target search without a collision scene (copied per call).
_NO_CLEARANCE = np.full(1, np.nan)


#: {key: (SolverSettings, SearchSettings)} of :func:`_one_target_settings`.
_SETTINGS_PAIRS: dict = {}


def _one_target_settings(values: tuple, extra: dict):
    """(SolverSettings, SearchSettings) of a one-target search's arguments ``values`` (the
    solver's max_position_error ... periodic_joints, then num_seeds, time_budget, max_rounds,
    min_successes, random_seed, selection; seeding "nearest") and the solver keywords
    ``extra``, memoised like ``settings.solver_settings`` (the key holds each value's type)
    but in one look-up for both; None when a value is invalid (the general path raises) or
    unhashable."""
    extras = tuple(extra.items())
    try:
        key = (values, extras, tuple(map(type, values)), tuple(map(type, extra.values())))
        pair = _SETTINGS_PAIRS.get(key)
    except TypeError:
        return None
    if pair is None:
        names = ("max_position_error", "max_step_norm", "jacobian", "stall_window", "num_step_scales",
                 "damping_mode", "periodic_joints")
        try:
            pair = (solver_settings(**dict(zip(names, values[:7])), **extra),
                    search_settings(**dict(zip(("num_seeds", "time_budget", "max_rounds", "min_successes",
                                                "random_seed", "selection"), values[7:])), seeding="nearest"))
        except DirectionUpIKError:
            return None
        if len(_SETTINGS_PAIRS) >= 256:
            _SETTINGS_PAIRS.clear()
        _SETTINGS_PAIRS[key] = pair
    return pair


def _one_target_seed_arrays(problem: IKProblem) -> dict:
    """``seed_arrays_of`` the problem of a one-target layout, with the limit-centre arrays
    (its searches select by either rule; the kernel writes each call's anchor)."""
    return engine.seed_arrays_of(problem, 0, 0, "limit_center")


def _search_one_target(robot, candidates, device, settings, options,
                       collision_scene: Optional[CollisionScene] = None, active_dof_ids=None) -> Optional[SearchResult]:
    """:func:`robo_search_ik_direction_up` of a one-candidate request (``one_target.layout_of``)
    with validated ``settings`` and ``options`` (nearest seeding, either selection) and the
    other arguments at their defaults but ``collision_scene`` and ``active_dof_ids``, on the
    arrays kept for its layout: the compiled search's rounds (:func:`_compiled_search`) on the
    same values, so the same answers; with a scene, then the collision search's check of its
    answer and, where that collides, its search again on the built problem
    (``search.collision_search_after``). None when the request is not one it covers, or where
    the compiled search gives up (the general path then answers, or raises)."""
    begun = time.perf_counter()
    found = _search_one_layout(robot, candidates, device, settings, options, active_dof_ids)
    if found is None or collision_scene is None:
        return found
    scene = engine.checked_scene(robot, collision_scene)
    return engine.collision_search_after(
        found, lambda: build_problem(robot, candidates, active_dof_ids, device, None, settings), options, None,
        scene, begun)


def _search_one_layout(robot, candidates, device, settings, options, active_dof_ids) -> Optional[SearchResult]:
    """:func:`_search_one_target` without a collision scene."""
    layout = one_target.layout_of(robot, candidates, device, settings, _one_target_seed_arrays, active_dof_ids)
    if layout is None:
        return None
    layout, targets = layout
    layout.put_targets(targets)
    target = targets[0]
    start = time.perf_counter()
    num_seeds, max_rounds, min_successes = options.num_seeds, options.max_rounds, options.min_successes
    deadline = None if options.time_budget is None else start + options.time_budget
    key = (num_seeds, max_rounds, deadline is not None, LIBRARY_SIZE)
    plan = layout.plans.get(key, False)
    if plan is False:
        plan = kernel_rounds(num_seeds, max_rounds, LIBRARY_SIZE, deadline is not None)
        if plan is not None and plan[0] * num_seeds > layout.library_size:
            plan = None
        if len(layout.plans) >= 16:
            layout.plans.clear()
        layout.plans[key] = plan
    if plan is None:
        return None
    rounds, more = plan  # with more, a candidate pending after the kernel's rounds comes back status 2
    out = layout.kernel.run(robot.joint_q, target.position_world, target.direction_world, target.up_world,
                            num_seeds=num_seeds, max_rounds=rounds, unlimited=more,
                            min_successes=min_successes, deadline=deadline,
                            limit_center=options.selection == "limit_center")
    if out is None:
        return None  # a numerical failure: the general path raises it
    result, timed_out = out.result, out.status == 1
    if out.best_score is None:  # round 0 settled it
        late = deadline is not None and time.perf_counter() >= deadline
        timed_out = bool(late and out.successes[0] < min_successes)
    elif out.status == 2:  # the kernel's rounds over before the deadline: on in the Python rounds
        resume = _Compiled(result, out.rounds, out.starts, out.successes, out.best_score, timed_out, True,
                           out.iterations, out.closest)
        problem = build_problem(robot, candidates, active_dof_ids, device, None, settings)
        out, _ = engine._search(problem, num_seeds=num_seeds, deadline=deadline, max_rounds=max_rounds,
                                min_successes=min_successes, selection=options.selection,
                                random_seed=options.random_seed, accept=None, seeding="nearest",
                                parallel=None, resume=resume)
        result, timed_out = out.result, out.timed_out
    return frozen_instance(SearchResult, result=result, rounds=out.rounds, starts=out.starts,
                           successes=out.successes, elapsed_s=time.perf_counter() - start, timed_out=timed_out,
                           iterations=out.iterations, clearance=_NO_CLEARANCE.copy(), closest_pair=(NO_PAIR,))


def robo_search_ik_direction_up(
        robot: RobotKinematics, candidates, active_dof_ids=None, device: str = "cpu", *,
        max_position_error: float, num_seeds: int = 4, time_budget: Optional[float] = None,
        max_rounds: Optional[int] = None, min_successes: int = 1, selection: str = "least_motion",
        random_seed: Optional[int] = 0, accept: Optional[AcceptFn] = None, seeding: str = "nearest",
        joint_bounds=None, root_world_xform=None, collision_scene: Optional[CollisionScene] = None,
        max_step_norm: float = SEARCH_SOLVER_DEFAULTS["max_step_norm"],
        jacobian: str = SEARCH_SOLVER_DEFAULTS["jacobian"],
        stall_window: int = SEARCH_SOLVER_DEFAULTS["stall_window"],
        num_step_scales: int = SEARCH_SOLVER_DEFAULTS["num_step_scales"],
        damping_mode: str = SEARCH_SOLVER_DEFAULTS["damping_mode"],
        periodic_joints: str = SEARCH_SOLVER_DEFAULTS["periodic_joints"],
        **settings) -> SearchResult:
    """Multi-seed search over the spec solver.

    Args:
        robot, candidates, active_dof_ids, device, max_position_error,
        root_world_xform: as for ``robo_solve_ik_direction_up_multi_batch``.
        num_seeds: K in-limit starts per candidate in each round after round 0
            (which solves from the current state only); see ``seeding``. 0 = the
            current state only (the spec's solve when also given max_step_norm=0.25,
            jacobian="finite_difference", stall_window=0, num_step_scales=8,
            damping_mode="constant", periodic_joints="as_solved"). A round's seeds are tried one after another, so
            seeds after the needed successes cost nothing but their ranking; for a big
            batch ``num_seeds=4, max_rounds=5`` is the benchmark's setting.
        time_budget: seconds for the whole call, or None. No new round starts
            after it and running solves stop at it (at an iteration boundary);
            round 0 always runs.
        max_rounds: limit on the rounds of seeds after round 0 (None =
            until the budget or enough successes; with neither, one round).
        min_successes: stop a candidate's rounds after this many accepted successes;
            within a round its remaining seeds do not start once this many have
            converged (the selection then chooses among those: raise it for less joint
            motion).
        selection: "least_motion" (spec cost) or "limit_center".
        random_seed: seed of the start generator (None = from the OS); with
            ``seeding="nearest"`` it only draws once the library is used up.
        seeding: where the rounds after round 0 start: "nearest" (default) the states of
            a fixed library (:mod:`.seeds`) whose TCP poses are nearest the target (with
            ``max_rounds``, after three rounds taking turns with a library of states near the
            joint limits, ``search_plan.seed_source``), "random" uniform random states (slower, see
            docs/performance.md).
        accept: optional callback rejecting solutions (MoveIt's solution callback).
        collision_scene: optional :class:`~.collision.CollisionScene` of this robot: a
            candidate succeeds only with a collision-free solution (the seeds go on while
            solutions collide; a candidate whose converged attempts all collided reports
            ``stop_reason`` "in_collision"), and ``SearchResult.clearance`` is filled. Its
            check runs in the Python rounds (:func:`_search`), not the compiled search.
        joint_bounds: optional (lower, upper) (D,) narrowing the limits for starts
            and solutions (MoveIt's consistency limits). The seed library is drawn in
            the bounds, so each distinct pair builds its own (a few milliseconds, the
            last ``seeds.CACHE_PER_MODEL`` kept); bounds that change with every call (a
            box around each call's seed) are better served by ``seeding="random"``, as
            the MoveIt plugin does.
        max_step_norm, jacobian, stall_window, num_step_scales, damping_mode, periodic_joints:
            settings of every local solve, default ``settings.SEARCH_SOLVER_DEFAULTS`` (the
            spec's: 0.25, "finite_difference", 0, 8, "constant", "as_solved"; see
            ``SolverSettings``). With "nearest_turn" every success has each periodic joint whose
            bounds span more than a turn at its in-bound value nearest the current state, and
            its cost (hence the selection among successes) is measured there.
        **settings: max_iters, position_tol, frame_tol_rad, position_weight,
            rotation_weight, damping (spec defaults).
    """
    if time_budget is None and max_rounds is None:
        max_rounds = 1
    if _one_candidate_path(accept, joint_bounds, root_world_xform, seeding):
        pair = _one_target_settings((max_position_error, max_step_norm, jacobian, stall_window, num_step_scales,
                                     damping_mode, periodic_joints, num_seeds, time_budget, max_rounds,
                                     min_successes, random_seed, selection), settings)
        found = None if pair is None else _search_one_target(robot, candidates, device, *pair, collision_scene,
                                                             active_dof_ids)
        if found is not None:
            return found
    checked = solver_settings(max_position_error=max_position_error, max_step_norm=max_step_norm,
                              jacobian=jacobian, stall_window=stall_window,
                              num_step_scales=num_step_scales, damping_mode=damping_mode,
                              periodic_joints=periodic_joints, **settings)
    problem = build_problem(robot, candidates, active_dof_ids, device, root_world_xform,
                            checked, joint_bounds=joint_bounds)
    return engine.search_problem(problem, num_seeds=num_seeds, time_budget=time_budget, max_rounds=max_rounds,
                          min_successes=min_successes, selection=selection, random_seed=random_seed,
                          accept=accept, seeding=seeding, collision_scene=collision_scene)


def _one_candidate_path(accept, joint_bounds, root_world_xform, seeding) -> bool:
    """Whether a search with these options may take the one-candidate path (which then checks
    the request itself and its active joints, ``one_target.layout_of``)."""
    return (ONE_TARGET_PATH and engine.COMPILED_SEARCH and accept is None
            and joint_bounds is None and root_world_xform is None
            and seeding == "nearest")


def search_with_settings(robot: RobotKinematics, candidates, settings: SolverSettings, options: SearchSettings,
                         active_dof_ids=None, *, collision_scene: Optional[CollisionScene] = None,
                         accept: Optional[AcceptFn] = None, joint_bounds=None) -> SearchResult:
    """:func:`robo_search_ik_direction_up` of validated settings, for a caller that keeps them (the
    node, the MoveIt front end): the same answers, the one-candidate path included.

    Args:
        robot, candidates, active_dof_ids, collision_scene, accept, joint_bounds: as for the search.
        settings: the local solves' settings (``settings.solver_settings``).
        options: the search's (``settings.search_settings``; ``max_rounds`` or ``time_budget``
            set). ``num_seeds=0, max_rounds=1`` is the spec's local solve from the current state
            (``solve_problem`` of the built problem, the same answer).
    """
    if _one_candidate_path(accept, joint_bounds, None, options.seeding):
        found = _search_one_target(robot, candidates, "cpu", settings, options, collision_scene, active_dof_ids)
        if found is not None:
            return found
    problem = build_problem(robot, candidates, active_dof_ids, "cpu", None, settings, joint_bounds=joint_bounds)
    return engine.search_problem(problem, num_seeds=options.num_seeds, time_budget=options.time_budget,
                                 max_rounds=options.max_rounds, min_successes=options.min_successes,
                                 selection=options.selection, random_seed=options.random_seed, accept=accept,
                                 seeding=options.seeding, collision_scene=collision_scene)
