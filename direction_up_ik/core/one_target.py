"""The arrays of a one-candidate solve or search, kept between calls.

A request of one candidate (one target, or one per end effector of a dual arm) is the usual
call of a planner, a teleop loop or the node. Most of its time was Python around kernel calls
of a few microseconds: validating and packing the request into an
:class:`~.problem.IKProblem`, the kernel's arrays, the result (docs/performance.md, "One
target"). :func:`layout_of` recognises such a request and gives the arrays kept for its slot
layout (``compiled.OneCandidate`` for a search, ``compiled.OneSolve`` for the spec's solve
alone; one per thread, robot, settings and layout), into which a call writes its start state
and targets; the search (``search_api._search_one_target``) and the spec's entry point
(:func:`solve_one`, from ``batch.robo_solve_ik_direction_up_multi_batch``) run the same kernels
on the same values as for a built problem, so the answers are the same. Requests it does not
cover (several candidates, explicit local axes, the numpy backend, a start outside the limits
...) are left to the general path, which also raises the errors of bad input.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Optional, Tuple

import numpy as np

from .backend import KERNELS_READY, auto_uses, compiled_backend, kernel_state
from .kinematics import RobotKinematics
from .problem import IKProblem, build_problem
from .seeds import AXIS_SCALE, FEATURE_REACH, library_for
from .settings import SolverSettings
from .targets import _DEFAULT_LOCAL_PAIR, _TCP_LOCAL_PAIR, DirectionUpTarget

#: Layouts (and keys asked for once) kept per robot and thread (a request names one of a few;
#: more are dropped).
MAX_LAYOUTS = 16

_thread_local = threading.local()


class Layout:
    """What the one-candidate solves or searches of one slot layout share (in one thread). It
    holds no reference to the robot (the cache of layouts is weak on it).

    Attributes:
        settings: the solver settings of its solves.
        kernel: a search's ``compiled.OneCandidate``, which holds the compiled search's library
            and selection arrays (``search.seed_arrays_of``); for the spec's solve alone
            (no seed arrays) a ``compiled.OneSolve``;
        library_size: the states of that library (0 without one);
        plans: ``search_plan.kernel_rounds``' plans of its searches' options, None where the
            compiled rounds do not serve them (kept by ``search_api._search_one_target``).
    """

    def __init__(self, problem: IKProblem, module, seed_arrays: Optional[dict], library_size: int) -> None:
        robot = problem.robot
        self.settings = problem.settings
        self.module = module
        self.kernel = module.OneSolve(problem) if seed_arrays is None else \
            module.OneCandidate(problem, (FEATURE_REACH, AXIS_SCALE), seed_arrays)
        self.library_size = library_size
        self._model_state = (robot.lower_limits, robot.upper_limits, robot.root_world_xform)
        # A search's library depends on the values of the joints it does not move (seeds._key).
        fixed = np.ones(len(problem.q_initial), dtype=bool)
        fixed[problem.active] = False
        self._fixed = np.flatnonzero(fixed) if seed_arrays is not None and fixed.any() else None
        self._fixed_values = b"" if self._fixed is None else problem.q_initial[self._fixed].tobytes()
        self._bounds = tuple(zip(problem.lower.tolist(), problem.upper.tolist()))
        self._held = b""  # the bytes of the last state :meth:`holds` accepted
        self.plans: dict = {}  # {(num_seeds, max_rounds, timed, library size): kernel_rounds' plan}

    def current(self, robot: RobotKinematics) -> bool:
        """True while the robot's limits and root transform are the objects the layout was
        built from and, for a search's with joints it does not move, those joints keep the
        values its library was built at."""
        lower, upper, root = self._model_state
        if not (robot.lower_limits is lower and robot.upper_limits is upper and robot.root_world_xform is root):
            return False
        return self._fixed is None or \
            robot.joint_q[self._fixed].astype(np.float64).tobytes() == self._fixed_values

    def put_targets(self, targets) -> None:
        """Write the targets of slots 1, 2, ... of ``targets`` (this layout's, a
        :func:`layout_of` answer) into the kernel's target arrays; slot 0's the kernel's call
        writes (``compiled.OneCandidate.run``). The parts a slot's mode leaves free keep the
        problem's placeholders."""
        kept = self.kernel.targets
        for e in range(1, len(targets)):
            target = targets[e]
            kept.position[0, e] = target.position_world
            if target.direction_world is not None:
                kept.direction[0, e] = target.direction_world
            if target.up_world is not None:
                kept.up[0, e] = target.up_world

    def holds(self, q: np.ndarray) -> bool:
        """True when the joint state ``q`` (D,) is finite and inside the bounds (a NaN fails
        the comparisons, an infinity the sum, which float32 values cannot overflow). The last
        state accepted is remembered by its bytes (a robot's state often stays between calls)."""
        raw = q.tobytes()
        if raw == self._held:
            return True
        values = q.tolist()
        if not math.isfinite(sum(values)):
            return False
        for value, (lo, hi) in zip(values, self._bounds):
            if not lo <= value <= hi:
                return False
        self._held = raw
        return True


def _layouts(robot: RobotKinematics) -> dict:
    """This thread's layouts of ``robot``: {key: Layout}. The last robot asked for is kept
    beside the weak mapping as [weak reference, its layouts], a quicker look-up; the weak
    reference's callback empties that list when the robot is collected (in whichever thread),
    so its layouts go with it."""
    last = getattr(_thread_local, "last", None)
    try:
        if last and last[0]() is robot:
            return last[1]
    except IndexError:  # emptied meanwhile: that robot was collected
        pass
    per_robot = getattr(_thread_local, "layouts", None)
    if per_robot is None:
        per_robot = _thread_local.layouts = weakref.WeakKeyDictionary()
    layouts = per_robot.get(robot)
    if layouts is None:
        layouts = per_robot[robot] = {}
    holder = [None, layouts]
    holder[0] = weakref.ref(robot, lambda _ref, kept=holder: kept.clear())
    _thread_local.last = holder
    return layouts


def _remember(layouts: dict, key, value) -> None:
    """``layouts[key] = value`` (a Layout, or None: a key asked for once), at most
    ``MAX_LAYOUTS`` entries: the keys asked for once go first, then all."""
    if key not in layouts and len(layouts) >= MAX_LAYOUTS:
        for old in [k for k, v in layouts.items() if v is None]:
            del layouts[old]
        if len(layouts) >= MAX_LAYOUTS:
            layouts.clear()
    layouts[key] = value


def layout_of(robot, candidates, device, settings: SolverSettings,
              seed_arrays=None, active_dof_ids=None) -> Optional[Tuple[Layout, tuple]]:
    """(the layout, the candidate's targets) of a one-candidate request with no bounds and the
    robot's root transform, or None when this path does not cover it.

    Covered: one candidate of :class:`~.targets.DirectionUpTarget` s of valid end effectors,
    each with one of the two local-axis conventions (+X/+Y, +Z/+Y), any mode; the compiled
    backend ("auto" solves with it now); a robot state finite and inside the limits (one
    float32 step beyond a limit, which the general path accepts, is left to it). A layout's
    first request is left to the general path too; its second is built and validated as a
    problem (``build_problem``; its errors, e.g. an end effector named twice, are raised), and
    ``seed_arrays(problem)`` gives the layout's
    library arrays (``search.seed_arrays_of``) for a search; None asks for the spec's solve alone
    (a layout of its own, without a library). ``active_dof_ids``: None (every joint) or a tuple
    or list of Python ints (a layout per sequence; anything else is left to the general path).
    """
    if device != "cpu" or not isinstance(robot, RobotKinematics):
        return None
    if active_dof_ids is not None:
        if (type(active_dof_ids) is not tuple and type(active_dof_ids) is not list) or \
                not all(type(i) is int for i in active_dof_ids):
            return None
        active_dof_ids = tuple(active_dof_ids)
    if (type(candidates) is not tuple and type(candidates) is not list) or len(candidates) != 1:
        return None
    candidate = candidates[0]
    if (type(candidate) is not tuple and type(candidate) is not list) or not candidate:
        return None
    slots = []
    for target in candidate:
        if type(target) is not DirectionUpTarget:
            return None
        local = target.local_direction
        if local is not _TCP_LOCAL_PAIR[0] and local is not _DEFAULT_LOCAL_PAIR[0]:
            return None  # explicit axes: each target has arrays of its own
        slots.append((target.ee_id, local is _TCP_LOCAL_PAIR[0], target.mode))
    # The settings by identity: the layout holds them, so their id is not reused meanwhile.
    key = (id(settings), tuple(slots), seed_arrays is None, active_dof_ids)
    layouts = _layouts(robot)
    layout = layouts.get(key)
    if layout is None or layout.settings is not settings or not layout.current(robot):
        if any(ee_id >= robot.num_end_effectors for ee_id, _, _ in slots) or kernel_state() != KERNELS_READY:
            return None  # the general path raises, or the numpy backend answers (one build)
        if key not in layouts:
            # A key's first request goes the general way, its second builds the layout: building
            # costs a few general calls, so settings made afresh for every call never pay it.
            _remember(layouts, key, None)
            return None
        problem = build_problem(robot, candidates, active_dof_ids, device, None, settings)
        module = compiled_backend(problem)
        if module is None or len(problem.active) == 0:
            return None
        # The seed library now (built once per robot set-up, as warm_up_search does), so that
        # the layout need not keep the problem, which holds the robot.
        layout = (Layout(problem, module, None, 0) if seed_arrays is None else
                  Layout(problem, module, seed_arrays(problem), len(library_for(problem))))
        _remember(layouts, key, layout)
    elif not auto_uses(layout.module):
        return None
    if not layout.holds(robot.joint_q):
        return None
    return layout, tuple(candidate)


def solve_one(robot, candidates, device, settings: SolverSettings, active_dof_ids=None):
    """The spec's local solve (``solve_problem`` of the built problem, the compiled backend) of
    a request :func:`layout_of` covers, on the arrays kept for its layout: the same IKBatchResult.
    None when the request is not one it covers, or after a numerical failure (the general
    path then answers, or raises)."""
    found = layout_of(robot, candidates, device, settings, None, active_dof_ids)
    if found is None:
        return None
    layout, targets = found
    layout.put_targets(targets)
    target = targets[0]
    return layout.kernel.solve_once(robot.joint_q, target.position_world, target.direction_world, target.up_world)
