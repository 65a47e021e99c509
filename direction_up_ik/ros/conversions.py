"""Message <-> core conversions for the SolveDirectionUpIK interface.

Everything here is a plain function of messages and core objects, so the node
stays glue. Problems with a request raise :class:`RequestError` carrying one of
the srv's error codes and a message naming the field and the rule.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from direction_up_ik.msg import CandidateResult, DirectionUpTarget as TargetMsg, EndEffectorError, SolverOverrides
from direction_up_ik.srv import SolveDirectionUpIK

from ..core import (DirectionUpIKError, DirectionUpTarget, DirectionValidationError, IKBatchResult,
                    InputValidationError, SolverSettings, TargetBatch)
from ..core.result import STOP_CONVERGED, STOP_IN_COLLISION
from ..core.settings import rules, solver_settings
from ..core.targets import DEFAULT_LOCAL_DIRECTION, DEFAULT_LOCAL_UP, TCP_LOCAL_DIRECTION, TCP_LOCAL_UP
from .config import PARAMETER_BY_NAME, EndEffectorConfig
from .streaming import slerp

Response = SolveDirectionUpIK.Response

#: SolverOverrides fields that are SolverSettings fields (0 = unset), in the schema's order.
OVERRIDE_FIELDS = tuple(name for name in rules(SolverSettings)
                        if name in SolverOverrides.get_fields_and_field_types())


class RequestError(DirectionUpIKError):
    """A request the node cannot serve: ``code`` is a SolveDirectionUpIK.Response constant."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


def _finite3(v, field: str) -> Tuple[float, float, float]:
    """The components of a Point / Vector3 (float64 fields) as floats, checked finite on the
    message's values (before any arithmetic); else the DirectionValidationError that
    ``DirectionUpTarget`` raises."""
    x, y, z = v.x, v.y, v.z
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise DirectionValidationError(field, f"every component must be finite, got {[x, y, z]}")
    return x, y, z


def _vec(v) -> np.ndarray:
    """(3,) float64 array of a Point / Vector3 (its fields are float64): the core's
    ``DirectionUpTarget`` takes such an array as it is, where a tuple costs a check per component."""
    return np.array((v.x, v.y, v.z), dtype=np.float64)


# The target message's constants as ints, read once: rosidl serves each through a property.
_FULL, _AXIS, _POSITION = TargetMsg.MODE_FULL, TargetMsg.MODE_AXIS, TargetMsg.MODE_POSITION
_MODES = (_FULL, _AXIS, _POSITION)
_AXES_DEFAULT, _AXES_TCP = TargetMsg.LOCAL_AXES_DEFAULT, TargetMsg.LOCAL_AXES_TCP
_AXES_EXPLICIT, _AXES_CONFIGURED = TargetMsg.LOCAL_AXES_EXPLICIT, TargetMsg.LOCAL_AXES_CONFIGURED


def _where(b: int, k: int) -> str:
    return f"candidates[{b}].targets[{k}]"


def local_axes_of(msg: TargetMsg, ee: EndEffectorConfig):
    """(local_direction, local_up) for DirectionUpTarget, or (None, None) for TCP +Z/+Y."""
    mode = msg.local_axes
    if mode == _AXES_CONFIGURED:
        mode = _AXES_TCP if ee.local_axes == "tcp" else _AXES_DEFAULT
    if mode == _AXES_DEFAULT:
        return DEFAULT_LOCAL_DIRECTION, DEFAULT_LOCAL_UP  # +X/+Y (the core resolves them once)
    if mode == _AXES_TCP:
        return None, None
    if mode == _AXES_EXPLICIT:
        return _vec(msg.local_direction), _vec(msg.local_up)
    raise InputValidationError("local_axes", f"unknown value {mode} (valid: 0 default +X/+Y, 1 tcp +Z/+Y, "
                                             "2 explicit, 3 configured)")


#: Requests of at least this many candidates are packed as one TargetBatch where they allow it
#: (:func:`_target_batch`): past it the batch's fixed cost is less than a DirectionUpTarget per
#: target (docs/performance.md); a single candidate keeps its tuple (the one-candidate path).
BATCH_MIN_CANDIDATES = 10

Targets = Union[List[Tuple[DirectionUpTarget, ...]], TargetBatch]


def targets_from_candidates(candidates: Sequence, end_effectors: Sequence[EndEffectorConfig],
                            frames: Mapping[str, np.ndarray]) -> Targets:
    """DirectionUpCandidate messages -> core candidates.

    Args:
        candidates: DirectionUpCandidate messages.
        end_effectors: configured end effectors (ee_id = index).
        frames: ``{frame_id: (4, 4) root -> frame}`` of the frames targets may use.
    Returns:
        a list of tuples of DirectionUpTarget; or, for at least :data:`BATCH_MIN_CANDIDATES`
        candidates that :func:`_target_batch` takes, a TargetBatch of the same targets (the
        same problem, bit for bit).
    Raises:
        RequestError: UNKNOWN_END_EFFECTOR, INVALID_FRAME or INVALID_REQUEST.
    """
    if len(candidates) >= BATCH_MIN_CANDIDATES:
        batch = _target_batch(candidates, end_effectors)
        if batch is not None:
            return batch
    return _target_tuples(candidates, end_effectors, frames)


def end_effector_ids(targets: Targets) -> List[int]:
    """The ee_id of each target slot of :func:`targets_from_candidates`' result."""
    if isinstance(targets, TargetBatch):
        return targets.ee_ids.tolist()
    return [t.ee_id for t in targets[0]]


def _target_batch(candidates: Sequence, end_effectors: Sequence[EndEffectorConfig]) -> Optional[TargetBatch]:
    """The candidates as one TargetBatch when every one lists the same end effectors, each with
    the same mode (one for all) and the same named local axes (not explicit vectors), in the
    root frame; else None, and None for any value the core refuses: then the per-target
    path (:func:`_target_tuples`) serves the request and names the field as it always does."""
    by_name = {e.name: (i, e) for i, e in enumerate(end_effectors)}
    slots = []  # (end effector, local_axes) of candidates[0]'s targets
    locals_ = []  # their resolved local axes
    mode = None
    for msg in candidates[0].targets:
        entry = by_name.get(msg.end_effector)
        if entry is None or msg.frame_id or msg.mode not in _MODES or msg.local_axes == _AXES_EXPLICIT \
                or (mode is not None and msg.mode != mode):
            return None
        mode = msg.mode
        try:
            locals_.append(local_axes_of(msg, entry[1]))
        except InputValidationError:
            return None
        slots.append((msg.end_effector, msg.local_axes))
    e = len(slots)
    if e == 0 or len({name for name, _ in slots}) != e:
        return None
    rows = np.empty((len(candidates), e, 9))
    for b, candidate in enumerate(candidates):
        targets = candidate.targets
        if len(targets) != e:
            return None
        for k, msg in enumerate(targets):
            if msg.end_effector != slots[k][0] or msg.local_axes != slots[k][1] or msg.mode != mode or msg.frame_id:
                return None
            p, d, u = msg.position, msg.direction, msg.up
            rows[b, k] = (p.x, p.y, p.z, d.x, d.y, d.z, u.x, u.y, u.z)
    # The named conventions are passed as such: as vectors, TargetBatch's per-slot resolution
    # would add to its fixed cost, which sets BATCH_MIN_CANDIDATES (docs/performance.md).
    if all(pair == (None, None) for pair in locals_):
        local_direction = local_up = None
    elif all(pair[0] is DEFAULT_LOCAL_DIRECTION for pair in locals_):
        local_direction, local_up = DEFAULT_LOCAL_DIRECTION, DEFAULT_LOCAL_UP
    else:  # named conventions mixed over the slots: each slot's axes as vectors (the same values)
        local_direction = [TCP_LOCAL_DIRECTION if d is None else d for d, _ in locals_]
        local_up = [TCP_LOCAL_UP if u is None else u for _, u in locals_]
    try:
        return TargetBatch([by_name[name][0] for name, _ in slots], rows[..., :3],
                           None if mode == _POSITION else rows[..., 3:6], rows[..., 6:] if mode == _FULL else None,
                           local_direction, local_up)
    except DirectionUpIKError:
        return None


def _target_tuples(candidates: Sequence, end_effectors: Sequence[EndEffectorConfig],
                   frames: Mapping[str, np.ndarray]) -> List[Tuple[DirectionUpTarget, ...]]:
    """:func:`targets_from_candidates` target by target."""
    by_name = {e.name: (i, e) for i, e in enumerate(end_effectors)}
    out = []
    first = None  # candidates[0]'s end effectors
    for b, candidate in enumerate(candidates):
        if len(candidate.targets) == 0:
            raise RequestError(Response.INVALID_REQUEST, f"candidates[{b}].targets: a candidate needs "
                                                         "at least one target")
        targets = []
        names = []  # the request's end effectors, named as sent (not the core's ee_id)
        for k, msg in enumerate(candidate.targets):
            name = msg.end_effector
            names.append(name)
            if name not in by_name:
                raise RequestError(Response.UNKNOWN_END_EFFECTOR,
                                   f"{_where(b, k)}.end_effector: unknown end effector '{name}'; "
                                   f"configured: {sorted(by_name)}")
            ee_id, ee = by_name[name]
            frame_id = msg.frame_id
            if frame_id not in frames:
                raise RequestError(Response.INVALID_FRAME,
                                   f"{_where(b, k)}.frame_id: cannot resolve frame '{frame_id}'; targets may "
                                   f"use '' (root) or frames fixed to the root: {sorted(f for f in frames if f)}")
            mode = msg.mode
            try:
                # Check before transforming, so messages show the values as sent; fields the
                # mode ignores are not read at all.
                if mode not in _MODES:
                    raise InputValidationError("mode", f"unknown value {mode} (valid: 0 full, 1 axis, "
                                                       "2 position)")
                position = _finite3(msg.position, "position")
                d = _finite3(msg.direction, "direction") if mode != _POSITION else None
                u = _finite3(msg.up, "up") if mode == _FULL else None
                if frame_id:  # a frame fixed to the root (the root's own, '', needs no transform)
                    xform = frames[frame_id]
                    rot = xform[:3, :3]
                    position = rot @ position + xform[:3, 3]
                    d = None if d is None else rot @ d
                    u = None if u is None else rot @ u
                local_d, local_u = local_axes_of(msg, ee)
                targets.append(DirectionUpTarget(ee_id, position, d, u, local_d, local_u))
            except DirectionUpIKError as exc:
                raise RequestError(Response.INVALID_REQUEST, f"{_where(b, k)}.{exc}") from None
        if len(set(names)) != len(names):
            raise RequestError(Response.INVALID_REQUEST,
                               f"candidates[{b}].targets[*].end_effector: names must be unique within "
                               f"a candidate, got {names}")
        first = names if first is None else first
        if names != first:
            raise RequestError(Response.INVALID_REQUEST,
                               f"candidates[{b}].targets[*].end_effector: {names} differs from "
                               f"candidates[0] {first}; all candidates must list the same end "
                               "effectors in the same order")
        out.append(tuple(targets))
    return out


def _check_parameter_range(field: str, parameter: str, value) -> None:
    """An override may not exceed the range of the node parameter it stands for: an unbounded
    max_iters or time_budget would keep the node's single thread busy indefinitely."""
    high = PARAMETER_BY_NAME[parameter].max_value
    if high is not None and value > high:
        raise RequestError(Response.INVALID_REQUEST, f"{field}: must be <= {high:g} (the range of "
                                                     f"parameter {parameter}), got {value:g}")


def settings_with_overrides(base: SolverSettings, overrides) -> SolverSettings:
    """Apply a SolverOverrides message (0 = unset) to the node's settings.

    Raises:
        RequestError(INVALID_REQUEST): a set field is negative, NaN or infinite.
    """
    changes = {}
    for name in OVERRIDE_FIELDS:
        value = getattr(overrides, name)
        if value == 0:
            continue
        if not math.isfinite(value) or value < 0:
            raise RequestError(Response.INVALID_REQUEST,
                               f"overrides.{name}: must be finite and positive (0 = use the parameter), "
                               f"got {value}")
        _check_parameter_range(f"overrides.{name}", f"solver.{name}", value)
        changes[name] = int(value) if name == "max_iters" else float(value)
    if not changes:
        return base  # the common request: nothing overridden, the node's validated settings
    try:
        # Memoised: the same overrides give the same object, whose kept arrays the core's
        # one-candidate path reuses (it keys them by the settings object).
        return solver_settings(**{**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, **changes})
    except DirectionUpIKError as exc:
        raise RequestError(Response.INVALID_REQUEST, f"overrides.{exc}") from None


def with_collisions(result: IKBatchResult, report) -> IKBatchResult:
    """``result`` judged with a collision report of its ``joint_q``, as the search judges its
    own: a candidate that converged in collision fails (success 0, cost +inf,
    ``STOP_IN_COLLISION``); ``best_index`` is the least-cost collision-free success (the
    result's own choice where it still stands).

    Args:
        result: B candidates.
        report: ``CollisionScene.check(result.joint_q)`` (``collision_free`` (B,)).
    """
    free = np.asarray(report.collision_free, dtype=bool)
    if free.all():
        return result  # the usual answer: nothing collides, nothing to judge
    converged = result.success.astype(bool) | (np.asarray(result.stop_reason) == STOP_CONVERGED)
    colliding = converged & ~free
    if not colliding.any():
        return result
    success = (result.success.astype(bool) & free).astype(result.success.dtype)
    ok = success.astype(bool)
    cost = np.where(ok, result.cost, np.inf)
    stop = tuple(STOP_IN_COLLISION if colliding[b] else reason for b, reason in enumerate(result.stop_reason))
    best = None
    if ok.any():
        best = int(np.argmin(cost))
        if result.best_index is not None and ok[result.best_index]:
            best = int(result.best_index)
    return dataclasses.replace(result, success=success, cost=cost, stop_reason=stop, best_index=best)


def fill_response(response, result: IKBatchResult, joint_names: Sequence[str],
                  end_effector_names: Sequence[str], iterations=None, starts=None, report=None):
    """Copy a batch result into a SolveDirectionUpIK response (codes set by the caller).
    ``iterations``, ``starts``: (B,) a search's totals over every start (default: the
    result's own iterations, one start each). ``report``: the collision report of the
    result's ``joint_q`` (None: not checked)."""
    response.joint_names = list(joint_names)
    response.best_index = -1 if result.best_index is None else int(result.best_index)
    response.solver_backend = result.backend
    response.collisions_checked = report is not None
    # Python lists once per field: the per-candidate loop then reads plain floats and ints.
    q = result.joint_q.astype(np.float64).tolist()
    success, cost = result.success.tolist(), result.cost.tolist()
    iterations = (result.iterations if iterations is None else iterations).tolist()
    starts = [1] * result.num_candidates if starts is None else starts.tolist()
    errors = (result.position_error.tolist(), result.direction_error.tolist(), result.up_error.tolist())
    if report is not None:
        free, clearance = report.collision_free.tolist(), report.clearance.tolist()
    results = []
    for b in range(result.num_candidates):
        item = CandidateResult(joint_positions=q[b], success=bool(success[b]), cost=cost[b],
                               iterations=int(iterations[b]), starts=int(starts[b]),
                               stop_reason=result.stop_reason[b])
        if report is None:
            item.collision_free, item.clearance, item.closest_pair = False, math.nan, []
        else:
            item.collision_free, item.clearance = bool(free[b]), clearance[b]
            item.closest_pair = [name for name in report.closest_pair[b] if name]
        position, direction, up = errors[0][b], errors[1][b], errors[2][b]
        item.errors = [EndEffectorError(end_effector=name, position_error=position[e], direction_error=direction[e],
                                        up_error=up[e]) for e, name in enumerate(end_effector_names)]
        results.append(item)
    response.results = results
    return response


def _search_override(overrides, name: str, *, off: bool, ranged: bool = True):
    """``overrides.<name>`` of a search option: 0 (the node's ``search.<name>``), -1 (off, where
    ``off``) or a positive value, within the parameter's range where ``ranged``.

    Raises:
        RequestError(INVALID_REQUEST): any other value.
    """
    value = getattr(overrides, name)
    if not (math.isfinite(value) and (value >= 0 or (off and value == -1))):
        words = ", -1 = off" if off else ""
        raise RequestError(Response.INVALID_REQUEST, f"overrides.{name}: must be 0 (the node's "
                                                     f"search.{name}){words} or a positive value, got {value}")
    if value > 0 and ranged:
        _check_parameter_range(f"overrides.{name}", f"search.{name}", value)
    return value


class StartState(NamedTuple):
    """``initial_state`` of a :class:`StreamedRequest`: joint ``name`` s and ``position`` s."""

    name: Sequence[str]
    position: Sequence[float]


class StreamedRequest(NamedTuple):
    """The fields of a SolveDirectionUpIK request that ``DirectionUpIKNode.solve`` reads, for a
    request the node makes itself (:func:`streaming_request`): a rosidl ``Request`` builds every
    nested default message first, a cost paid on each streamed target."""

    candidates: list
    overrides: SolverOverrides
    active_joints: tuple
    initial_state: StartState
    ignore_collisions: bool
    publish: bool


#: Read-only overrides of streamed requests: the spec's single start, or the node's search.
_SINGLE_START, _NODE_SEARCH = SolverOverrides(num_seeds=-1), SolverOverrides()


def streaming_request(candidate, publish: bool, start_names: Sequence[str] = (),
                      start_positions: Sequence[float] = (), search: bool = False) -> StreamedRequest:
    """The request of a streamed target (``~/target``, a marker drag): the spec's single start
    (``num_seeds`` -1), a local solve from ``start_positions`` of ``start_names`` (rad / m;
    empty = the joint states). A seed's answer can lie far from the current pose, a joint jump
    in a teleoperated stream; ``search`` (a marker's explicit retry) asks for the node's search
    all the same, which keeps the least joint motion."""
    return StreamedRequest([candidate], _NODE_SEARCH if search else _SINGLE_START, (),
                           StartState(list(start_names), [float(v) for v in start_positions]), False, publish)


def search_options(config, overrides):
    """Keyword arguments of ``search_problem`` for a request, or None for the spec's single start.

    Request fields win over the node's ``search.*`` parameters (``config.search``): 0 = the
    parameter, -1 = off (``num_seeds``: the spec's single start; ``time_budget``: no budget),
    a positive value = that value (SolverOverrides.msg).

    Raises:
        RequestError: INVALID_REQUEST for another negative value, a non-finite budget or one
            beyond the parameter's range; REQUEST_TOO_LARGE for more seeds than
            ``limits.max_seeds``.
    """
    search = config.search
    seeds = _search_override(overrides, "num_seeds", off=True, ranged=False)  # too many: below
    rounds = _search_override(overrides, "max_rounds", off=False)
    budget = _search_override(overrides, "time_budget", off=True)
    num_seeds = 0 if seeds == -1 else (seeds or search.num_seeds)
    if num_seeds > config.max_seeds:
        source = "overrides.num_seeds" if seeds else "search.num_seeds"
        raise RequestError(Response.REQUEST_TOO_LARGE, f"{source}: {num_seeds} exceeds "
                                                       f"limits.max_seeds={config.max_seeds}")
    if num_seeds == 0:
        return None
    budget = None if budget == -1 else (budget or search.time_budget)
    seed = int(overrides.random_seed)
    random_seed = search.random_seed if seed == 0 else (None if seed < 0 else seed)
    return dict(num_seeds=num_seeds, time_budget=budget,
                max_rounds=None if budget else (rounds or search.max_rounds),
                min_successes=search.min_successes, selection=search.selection, random_seed=random_seed,
                seeding=search.seeding)


def approach_ends(candidate, tcp: np.ndarray, frames: Mapping[str, np.ndarray],
                  end_effectors: Sequence[EndEffectorConfig]) -> Tuple[list, list]:
    """Where an approach to ``candidate`` (a valid DirectionUpCandidate) starts and ends, per
    target: (position (3,), direction (3,) or None, up (3,) or None) in the target's frame, the
    starts from the TCPs ``tcp`` (E, 4, 4) of the start state (root frame), the ends from the
    targets; None for an axis the target's mode leaves free. ``frames``: frame_id -> (4, 4)
    root -> frame."""
    by_name = {e.name: (i, e) for i, e in enumerate(end_effectors)}
    starts, ends = [], []
    for msg in candidate.targets:
        i, ee = by_name[msg.end_effector]
        pose = np.linalg.inv(frames[msg.frame_id]) @ tcp[i]
        local_d, local_u = local_axes_of(msg, ee)
        local_d, local_u = ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0)) if local_d is None else (local_d, local_u)
        unit = [np.asarray(v, dtype=np.float64) / np.linalg.norm(v) for v in
                (local_d, local_u, (msg.direction.x, msg.direction.y, msg.direction.z),
                 (msg.up.x, msg.up.y, msg.up.z))]
        free_d, free_u = msg.mode == msg.MODE_POSITION, msg.mode != msg.MODE_FULL
        starts.append((pose[:3, 3], None if free_d else pose[:3, :3] @ unit[0],
                       None if free_u else pose[:3, :3] @ unit[1]))
        ends.append((np.array((msg.position.x, msg.position.y, msg.position.z)),
                     None if free_d else unit[2], None if free_u else unit[3]))
    return starts, ends


def candidate_between(candidate, starts: list, ends: list, s: float):
    """A copy of ``candidate`` whose targets are the fraction ``s`` in [0, 1] of the way from
    ``starts`` to ``ends`` (:func:`approach_ends`): positions on the line, directions and ups on
    great circles."""
    sub = copy.deepcopy(candidate)
    for msg, (p0, d0, u0), (p1, d1, u1) in zip(sub.targets, starts, ends):
        msg.position.x, msg.position.y, msg.position.z = (float(v) for v in (1.0 - s) * p0 + s * p1)
        if d0 is not None:
            msg.direction.x, msg.direction.y, msg.direction.z = (float(v) for v in slerp(d0, d1, s))
        if u0 is not None:
            msg.up.x, msg.up.y, msg.up.z = (float(v) for v in slerp(u0, u1, s))
    return sub
