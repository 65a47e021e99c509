"""Validate a solve request and turn it into arrays (the "build" half of build-then-solve).

:func:`build_problem` checks every input rule of spec sections 2, 3 and 6 and
returns an :class:`IKProblem`: plain, read-only numpy arrays over B candidates and
E targets per candidate that :mod:`.solver` iterates on. Nothing here iterates.
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from .errors import (CandidateStructureError, InputTypeError, InputValidationError,
                     JointLimitError, LocalAxisConfigurationError, UnsupportedDeviceError)
from .kinematics import NODE_REVOLUTE, RobotKinematics
from .rotations import validate_transform
from .settings import SolverSettings
from .targets import DirectionUpTarget, TargetBatch

SUPPORTED_DEVICES = ("cpu",)
_UNIT_X = np.array([1.0, 0.0, 0.0])
_UNIT_Y = np.array([0.0, 1.0, 0.0])
#: A whole turn (rad).
TURN = 2.0 * np.pi


def periodic_coordinates(robot: RobotKinematics) -> np.ndarray:
    """(D,) bool: coordinates whose every driven joint is revolute with scale +-1, so that
    q and q + 2 pi give the same poses (continuous joints, and revolute ones whose range
    spans more than a turn can use it)."""
    arrays = robot.kernel_arrays()
    out = np.zeros(robot.num_dofs, dtype=bool)
    out[arrays.node_dof] = True
    other = (arrays.node_type != NODE_REVOLUTE) | (np.abs(arrays.node_scale) != 1.0)
    out[arrays.node_dof[other]] = False
    return out


def nearest_turns(q, toward, lower, upper):
    """Whole turns (floats shaped like the broadcast inputs) that bring angles ``q`` nearest
    ``toward`` while ``q + TURN * turns`` stays in [``lower``, ``upper``] (rad; ties to the even
    count, as ``np.round``)."""
    return np.clip(np.round((toward - q) / TURN), np.ceil((lower - q) / TURN), np.floor((upper - q) / TURN))


@dataclass(frozen=True)
class IKProblem:
    """A validated batch problem.

    Attributes:
        robot: the model (only read).
        settings: validated solver settings.
        active: (A,) int64 joint coordinate indices that may move.
        q_initial: (D,) float64 the robot's joint state at call time (float32 values).
        ee_ids: (E,) int64 robot end-effector index of each target slot.
        local_direction, local_up: (E, 3) TCP axes of each slot (unit, perpendicular).
        target_position: (B, E, 3) metres, world.
        target_direction, target_up: (B, E, 3) unit world axes (arbitrary unit
            placeholders where the mode leaves them unconstrained).
        has_direction, has_up: (B, E) bool, which rotation parts are constrained.
        root_world_xform: (4, 4) root -> world used by this solve.
        lower, upper: (D,) joint bounds of this solve (rad / m): the model limits,
            narrowed by the caller's ``joint_bounds`` when given.
    """

    robot: RobotKinematics
    settings: SolverSettings
    active: np.ndarray
    q_initial: np.ndarray
    ee_ids: np.ndarray
    local_direction: np.ndarray
    local_up: np.ndarray
    target_position: np.ndarray
    target_direction: np.ndarray
    target_up: np.ndarray
    has_direction: np.ndarray
    has_up: np.ndarray
    root_world_xform: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def num_candidates(self) -> int:
        return int(self.target_position.shape[0])

    @property
    def num_targets(self) -> int:
        return int(self.target_position.shape[1])

    @property
    def analytic_jacobian(self) -> bool:
        """True when the solve uses the analytic Jacobian: ``settings.jacobian`` asks for it
        and no mimic joint sits on a TCP chain (those keep finite differences)."""
        return self.settings.jacobian == "analytic" and not self.robot.mimic_on_tcp_chain

    @property
    def turn_joints(self) -> np.ndarray:
        """(P,) int64 positions in ``active`` of the :func:`periodic_coordinates` whose bounds
        span more than a turn (continuous joints, a UR arm's +-2 pi): the joints that can
        reach one pose at several in-bound values (``SolverSettings.periodic_joints``).
        Read-only; cached per model, active set and bounds (a request builds a problem)."""
        a = self.active
        lower, upper = self.lower[a], self.upper[a]
        per_model = _turn_joints_cache.setdefault(self.robot, {})
        key = (a.tobytes(), lower.tobytes(), upper.tobytes())
        cached = per_model.get(key)
        if cached is None:
            wide = ~(upper - lower <= TURN)  # inf - inf (nan) counts as wide
            cached = np.flatnonzero(periodic_coordinates(self.robot)[a] & wide).astype(np.int64)
            cached.setflags(write=False)
            if len(per_model) >= 16:
                per_model.clear()
            per_model[key] = cached
        return cached

    def select(self, candidates: np.ndarray) -> "IKProblem":
        """The same problem restricted to (or repeating) ``candidates`` (indices, any order)."""
        idx = np.asarray(candidates, dtype=np.int64)
        # A copy of this (validated) problem with five arrays replaced (dataclasses.replace
        # would re-run __init__ over all 15 fields, on the search's hot path).
        out = object.__new__(IKProblem)
        out.__dict__.update(self.__dict__, target_position=self.target_position[idx],
                            target_direction=self.target_direction[idx], target_up=self.target_up[idx],
                            has_direction=self.has_direction[idx], has_up=self.has_up[idx])
        return out


Candidates = Tuple[Tuple[DirectionUpTarget, ...], ...]

#: {model: {(active, lower, upper) bytes: IKProblem.turn_joints}}, a few set-ups per model.
_turn_joints_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _common_candidates(robot: RobotKinematics, candidates) -> Optional[Candidates]:
    """The usual request in one cheap pass: a list or tuple of lists or tuples of
    DirectionUpTarget with candidate 0's EE ids (unique, valid) and its very local-axis
    arrays, in the same order. None for anything else, which :func:`_check_candidates`
    then accepts or rejects with the error that names the rule."""
    if type(candidates) not in (tuple, list) or not candidates:
        return None
    first = candidates[0]
    if type(first) not in (tuple, list) or not first:
        return None
    slots = []
    for target in first:
        if type(target) is not DirectionUpTarget:
            return None
        slots.append((target.ee_id, target.local_direction, target.local_up))
    ids = {ee for ee, _, _ in slots}
    if len(ids) != len(slots) or max(ids) >= robot.num_end_effectors:
        return None
    n = len(slots)
    all_tuples = True
    for candidate in candidates:
        kind = type(candidate)
        if (kind is not tuple and kind is not list) or len(candidate) != n:
            return None
        all_tuples = all_tuples and kind is tuple
    for e, (ee, local_direction, local_up) in enumerate(slots):  # slot by slot: no per-target zip
        for candidate in candidates:
            target = candidate[e]
            if type(target) is not DirectionUpTarget or target.ee_id != ee \
                    or target.local_direction is not local_direction or target.local_up is not local_up:
                return None
    if all_tuples:
        return candidates if type(candidates) is tuple else tuple(candidates)
    return tuple(c if type(c) is tuple else tuple(c) for c in candidates)


def _check_candidates(robot: RobotKinematics, candidates) -> Candidates:
    common = _common_candidates(robot, candidates)
    if common is not None:
        return common
    if isinstance(candidates, (str, bytes, DirectionUpTarget)) or not isinstance(candidates, Sequence):
        raise InputTypeError("candidates", "expected a sequence of candidates, each a sequence of "
                                           "DirectionUpTarget, e.g. ((target,),)")
    if len(candidates) == 0:
        raise InputValidationError("candidates", "must contain at least one candidate")
    out = []
    for b, candidate in enumerate(candidates):
        if isinstance(candidate, (str, bytes, DirectionUpTarget)) or not isinstance(candidate, Sequence):
            raise InputTypeError("candidates", "each candidate must be a sequence of "
                                               "DirectionUpTarget", candidate=b)
        if len(candidate) == 0:
            raise InputValidationError("candidates", "a candidate must contain at least one target",
                                       candidate=b)
        for e, target in enumerate(candidate):
            if not isinstance(target, DirectionUpTarget):
                raise InputTypeError("target", f"expected DirectionUpTarget, got "
                                               f"{type(target).__name__}", candidate=b, target=e)
            if target.ee_id >= robot.num_end_effectors:
                raise InputValidationError(
                    "ee_id", f"{target.ee_id} is not an end effector of the robot (valid: 0.."
                             f"{robot.num_end_effectors - 1}: {list(robot.end_effector_links)})",
                    candidate=b, target=e)
        ids = [t.ee_id for t in candidate]
        if len(set(ids)) != len(ids):
            raise CandidateStructureError("ee_id", f"EE ids must be unique within a candidate, got {ids}",
                                          candidate=b)
        first = out[0] if out else candidate
        if len(candidate) != len(first):
            raise CandidateStructureError(
                "candidates", f"has {len(candidate)} targets but candidate 0 has {len(first)}; all "
                              "candidates must use the same number of end effectors", candidate=b)
        for e, (target, reference) in enumerate(zip(candidate, first)):
            if target.ee_id != reference.ee_id:
                raise CandidateStructureError(
                    "ee_id", f"is {target.ee_id} but candidate 0 has {reference.ee_id} here; all "
                             "candidates must use the same end-effector order", candidate=b, target=e)
            if not target.same_local_axes(reference):
                raise LocalAxisConfigurationError(
                    "local_direction/local_up", "differs from candidate 0; all candidates must use "
                                                "the same local axis definition", candidate=b, target=e)
        out.append(tuple(candidate))
    return tuple(out)


def _check_active(robot: RobotKinematics, active_dof_ids) -> np.ndarray:
    d = robot.num_dofs
    if active_dof_ids is None:
        return np.arange(d, dtype=np.int64)
    if isinstance(active_dof_ids, (str, bytes)) or not hasattr(active_dof_ids, "__iter__") \
            or (isinstance(active_dof_ids, np.ndarray) and active_dof_ids.ndim != 1):
        raise InputTypeError("active_dof_ids", "expected None or a tuple of joint coordinate indices")
    ids = list(active_dof_ids)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, (numbers.Integral, np.integer)):
            raise InputTypeError("active_dof_ids", f"entries must be integers, got {i!r}")
        if not 0 <= i < d:
            raise InputValidationError("active_dof_ids", f"index {i} is outside 0..{d - 1} "
                                                         f"(joints: {list(robot.joint_names)})")
    if len(set(ids)) != len(ids):
        raise InputValidationError("active_dof_ids", f"indices must be unique, got {ids}")
    out = np.array(sorted(int(i) for i in ids), dtype=np.int64)
    return out


def _check_bounds(robot: RobotKinematics, joint_bounds) -> Tuple[np.ndarray, np.ndarray]:
    lower, upper = robot.lower_limits, robot.upper_limits
    if joint_bounds is None:
        return lower, upper
    try:
        lo, hi = (np.array(b, dtype=np.float64) for b in joint_bounds)
    except (TypeError, ValueError):
        raise InputTypeError("joint_bounds", "expected (lower, upper), each D numbers") from None
    if lo.shape != lower.shape or hi.shape != upper.shape:
        raise InputValidationError("joint_bounds", f"lower and upper must each have shape {lower.shape}")
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
        raise InputValidationError("joint_bounds", "must not contain NaN")
    lo, hi = np.maximum(lo, lower), np.minimum(hi, upper)
    if np.any(lo > hi):
        name = robot.joint_names[int(np.flatnonzero(lo > hi)[0])]
        raise InputValidationError("joint_bounds", f"bounds of joint '{name}' do not overlap its limits")
    return lo, hi


def _check_initial_state(robot: RobotKinematics, active: np.ndarray, lower: np.ndarray,
                         upper: np.ndarray) -> np.ndarray:
    q = np.array(robot.joint_q, dtype=np.float64)
    finite = np.isfinite(q)
    if not finite.all():
        name = robot.joint_names[int(np.flatnonzero(~finite)[0])]
        raise InputValidationError("robot.joint_q", f"joint '{name}' is not finite")
    if len(active) == len(q):  # all joints (active holds sorted unique indices)
        lo, hi, qa = lower, upper, q
    else:
        lo, hi, qa = lower[active], upper[active], q[active]
    if ((qa >= lo) & (qa <= hi)).all():
        return q
    # A float32 joint state can sit one float32 step beyond a float64 limit. (A limit
    # beyond the float32 range gives a NaN slack, and a NaN bound rejects nothing.)
    with np.errstate(over="ignore", invalid="ignore"):
        slack_lo = np.where(np.isfinite(lo), np.abs(np.spacing(lo.astype(np.float32))), 0.0)
        slack_hi = np.where(np.isfinite(hi), np.abs(np.spacing(hi.astype(np.float32))), 0.0)
        outside = (qa < lo - slack_lo) | (qa > hi + slack_hi)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        i = int(active[k])
        raise JointLimitError(robot.joint_names[i], float(q[i]), float(lo[k]), float(hi[k]))
    return q


def _stack3(vectors: list, shape: tuple) -> np.ndarray:
    """(N, 3) float64 vectors stacked and reshaped to ``shape``. The targets' vectors are
    C-contiguous float64 (3,) arrays (:class:`DirectionUpTarget` makes each one), so their
    bytes are joined directly, much faster than ``np.array`` (docs/performance.md)."""
    try:
        out = np.frombuffer(b"".join(vectors), dtype=np.float64)
    except (BufferError, TypeError):  # not a contiguous array: the general path
        return np.array(vectors, dtype=np.float64).reshape(shape)
    if out.size != 3 * len(vectors):
        return np.array(vectors, dtype=np.float64).reshape(shape)
    return out.reshape(shape)  # read-only (bytes), as the caller freezes every array anyway


def _pack_targets(cands: Candidates, b: int, e: int):
    """Target arrays of B candidates of E targets: position, direction, up (B, E, 3)
    float64 and has_direction, has_up (B, E) bool. Free axes get unit placeholders
    (+X, +Y) that keep the unconstrained residual parts finite."""
    flat = [t for candidate in cands for t in candidate]
    directions = [t.direction_world for t in flat]
    ups = [t.up_world for t in flat]
    has_direction = np.array([d is not None for d in directions]).reshape(b, e)
    has_up = np.array([u is not None for u in ups]).reshape(b, e)
    if not has_direction.all():
        directions = [_UNIT_X if d is None else d for d in directions]
    if not has_up.all():
        ups = [_UNIT_Y if u is None else u for u in ups]
    return (_stack3([t.position_world for t in flat], (b, e, 3)), _stack3(directions, (b, e, 3)),
            _stack3(ups, (b, e, 3)), has_direction, has_up)


def _target_arrays(robot: RobotKinematics, candidates) -> dict:
    """The target fields of an :class:`IKProblem` from a sequence of candidates of
    DirectionUpTarget (checked here) or a :class:`TargetBatch` (checked when built; here only
    its end effectors against the robot)."""
    if type(candidates) is TargetBatch:
        batch = candidates
        if int(batch.ee_ids.max()) >= robot.num_end_effectors:
            raise InputValidationError(
                "ee_ids", f"{batch.ee_ids.tolist()}: not all end effectors of the robot (valid: 0.."
                          f"{robot.num_end_effectors - 1}: {list(robot.end_effector_links)})")
        shape = batch.position.shape
        return dict(ee_ids=batch.ee_ids, local_direction=batch.local_direction, local_up=batch.local_up,
                    target_position=batch.position,
                    target_direction=np.tile(_UNIT_X, shape[:2] + (1,)) if batch.direction is None
                    else batch.direction,
                    target_up=np.tile(_UNIT_Y, shape[:2] + (1,)) if batch.up is None else batch.up,
                    has_direction=np.full(shape[:2], batch.direction is not None),
                    has_up=np.full(shape[:2], batch.up is not None))
    cands = _check_candidates(robot, candidates)
    b, e = len(cands), len(cands[0])
    position, direction, up, has_direction, has_up = _pack_targets(cands, b, e)
    first = cands[0]
    return dict(ee_ids=np.array([t.ee_id for t in first], dtype=np.int64),
                local_direction=np.array([t.local_direction for t in first]),
                local_up=np.array([t.local_up for t in first]),
                target_position=position, target_direction=direction, target_up=up,
                has_direction=has_direction, has_up=has_up)


def build_problem(robot: RobotKinematics, candidates, active_dof_ids=None, device: str = "cpu",
                  root_world_xform=None, settings: Optional[SolverSettings] = None,
                  joint_bounds=None) -> IKProblem:
    """Validate a request and pack it into an :class:`IKProblem`.

    ``joint_bounds`` = (lower (D,), upper (D,)) narrows the model limits for this
    solve (e.g. MoveIt consistency limits); the start must lie within them.

    Raises:
        InputValidationError (and subclasses), InputTypeError: see spec section 6.
    """
    if not isinstance(robot, RobotKinematics):
        raise InputTypeError("robot", f"expected RobotKinematics, got {type(robot).__name__}")
    if not isinstance(device, str) or device not in SUPPORTED_DEVICES:
        raise UnsupportedDeviceError("device", f"unsupported device {device!r}; this solver runs on "
                                               f"{list(SUPPORTED_DEVICES)} only")
    if not isinstance(settings, SolverSettings):
        raise InputTypeError("settings", "expected SolverSettings")
    root = robot.root_world_xform if root_world_xform is None else \
        validate_transform(root_world_xform, "root_world_xform")
    targets = _target_arrays(robot, candidates)
    active = _check_active(robot, active_dof_ids)
    lower, upper = _check_bounds(robot, joint_bounds)
    q_initial = _check_initial_state(robot, active, lower, upper)
    arrays = dict(active=active, q_initial=q_initial, **targets, root_world_xform=root, lower=lower.copy(),
                  upper=upper.copy())
    for value in arrays.values():
        value.setflags(write=False)
    return IKProblem(robot=robot, settings=settings, **arrays)
