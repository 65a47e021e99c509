"""Property-based tests of the pure core over random robots, targets and parameters.

Each test states one invariant of the spec (sections 2-6) and checks it on robots built
in code by :mod:`strategies`. Profiles (environment variable ``HYPOTHESIS_PROFILE``):

* ``ci`` (default): 100 derandomized examples per test (300 for the junk inputs); the
  module runs in well under a minute (plus numba compilation when its cache is cold).
* ``fuzz``: >= 10,000 examples in all (``scripts/fuzz_core.sh``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import event, given, settings
from scipy.spatial.transform import Rotation

from direction_up_ik import (DirectionUpTarget, RobotKinematics, robo_search_ik_direction_up,
                             robo_solve_ik_direction_up_multi_batch)
from direction_up_ik.core import result as res
from direction_up_ik.core.errors import InputValidationError
from direction_up_ik.core.problem import build_problem
from direction_up_ik.core.settings import SEARCH_SOLVER_DEFAULTS
from direction_up_ik.core.seeds import random_starts
from direction_up_ik.core.settings import solver_settings
from direction_up_ik.core.backend import solve_problem

from helpers import relay_never_started
from strategies import PROFILE, junk_requests, perpendicular_pair, scenarios

pin = pytest.importorskip("pinocchio", reason="the independent FK reference (requirements/dev.txt)")

#: The junk-input test mostly stops at the first validation error: cheap, so run more.
JUNK_PROFILE = settings(PROFILE, max_examples=3 * PROFILE.max_examples)

#: Spec section 3 defaults of the tolerances (used when a scenario leaves them out).
SPEC_DEFAULTS = dict(position_tol=1e-3, frame_tol_rad=1e-2)


def solve(sc):
    """Solve scenario ``sc`` from the robot's current state."""
    return robo_solve_ik_direction_up_multi_batch(sc.robot, sc.candidates(), **sc.kwargs)


def tol(sc, name: str) -> float:
    return sc.kwargs.get(name, SPEC_DEFAULTS[name])


def note_outcome(result) -> None:
    """Statistics: how many candidates succeeded (shown by --hypothesis-show-statistics)."""
    n = int(result.success.sum())
    event("successes: " + ("none" if n == 0 else "all" if n == len(result.success) else "some"))


# ----------------------------------------------------------------------- independent FK

def pinocchio_tcp(desc, q, root: np.ndarray) -> np.ndarray:
    """TCP world transforms (E, 4, 4) of robot ``desc`` at our joint coordinates ``q`` (D,).

    Pinocchio (mimic=False) gives every movable joint its own configuration entries: our
    coordinates go to their joints by name, continuous joints take (cos, sin), and a mimic
    joint gets ``multiplier * q_master + offset`` computed here.
    """
    model = pin.buildModelFromXML(desc.urdf)
    data = model.createData()
    dof_names = [j.name for j in desc.joints if j.type != "fixed" and j.mimic is None]
    value = dict(zip(dof_names, np.asarray(q, dtype=np.float64)))
    for j in desc.joints:
        if j.mimic is not None:
            master, multiplier, offset = j.mimic
            value[j.name] = multiplier * value[master] + offset
    config = pin.neutral(model)
    for j in desc.joints:
        if j.type == "fixed":
            continue
        joint = model.joints[model.getJointId(j.name)]
        if j.type == "continuous":
            config[joint.idx_q:joint.idx_q + 2] = np.cos(value[j.name]), np.sin(value[j.name])
        else:
            config[joint.idx_q] = value[j.name]
    pin.framesForwardKinematics(model, data, config)
    return np.stack([root @ data.oMf[model.getFrameId(link, pin.BODY)].homogeneous @ local
                     for link, local in zip(desc.ee_links, desc.ee_local_xforms)])


def angle(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) between two 3-vectors, accurate near 0 and pi."""
    return float(np.arctan2(np.linalg.norm(np.cross(a, b)), a @ b))


def smallest_rotation(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(3, 3) smallest rotation taking unit ``current`` onto unit ``target`` (not opposite)."""
    axis = np.cross(current, target)
    s = np.linalg.norm(axis)
    if s == 0.0:
        return np.eye(3)
    return Rotation.from_rotvec(axis / s * angle(current, target)).as_matrix()


def spec_errors(tcp: np.ndarray, spec):
    """Spec 5.2 unweighted errors of TCP world transform ``tcp`` (4, 4) for raw target ``spec``.

    Returns (position m, direction rad or None, aligned-up rad or None).
    """
    pos = float(np.linalg.norm(tcp[:3, 3] - np.array(spec.position)))
    if spec.direction is None:
        return pos, None, None
    local_d, local_u = spec.local_axes()
    cur_d, cur_u = tcp[:3, :3] @ local_d, tcp[:3, :3] @ local_u
    target_d = np.array(spec.direction) / np.linalg.norm(spec.direction)
    dir_err = angle(cur_d, target_d)
    if spec.up is None:
        return pos, dir_err, None
    _, target_u = perpendicular_pair(spec.direction, spec.up)
    return pos, dir_err, angle(smallest_rotation(cur_d, target_d) @ cur_u, target_u)


# ----------------------------------------------------------------------- properties

@settings(PROFILE)
@given(sc=scenarios())
def test_every_success_meets_the_tolerances_under_independent_fk(sc):
    result = solve(sc)
    note_outcome(result)
    p_tol, f_tol = tol(sc, "position_tol"), tol(sc, "frame_tol_rad")
    if sc.desc.has_mimic:
        event("mimic robot" + (" with a success" if np.any(result.success == 1) else ""))
    for b in np.flatnonzero(result.success == 1):
        assert all(t.reachable for t in sc.specs[b]), "a 100 m target cannot be met"
        tcp = pinocchio_tcp(sc.desc, result.joint_q[b], sc.root)
        for spec in sc.specs[b]:
            mode = "position" if spec.direction is None else "axis" if spec.up is None else "full"
            event(f"checked a success: {mode} mode, local axes {spec.local}")
            pos, dir_err, up_err = spec_errors(tcp[spec.ee_id], spec)
            assert pos < p_tol, (b, spec.ee_id, pos)
            assert dir_err is None or dir_err < f_tol, (b, spec.ee_id, dir_err)
            assert up_err is None or up_err < f_tol, (b, spec.ee_id, up_err)


@settings(PROFILE)
@given(sc=scenarios())
def test_returned_joints_are_float32_within_the_limits(sc):
    result = solve(sc)
    note_outcome(result)
    assert result.joint_q.dtype == np.float32
    assert result.joint_q.shape == (len(sc.specs), sc.robot.num_dofs)
    q = result.joint_q.astype(np.float64)
    inside = (q >= sc.robot.lower_limits) & (q <= sc.robot.upper_limits)
    # An inactive joint keeps its input, which may lie one float32 step past a float64 limit.
    kept = np.ones(sc.robot.num_dofs, dtype=bool)
    kept[sc.active] = False
    kept = kept & (result.joint_q == sc.start)
    assert np.all(inside | kept), np.argwhere(~(inside | kept))


@settings(PROFILE)
@given(sc=scenarios())
def test_inactive_joints_are_unchanged_bit_for_bit(sc):
    result = solve(sc)
    note_outcome(result)
    inactive = np.setdiff1d(np.arange(sc.robot.num_dofs), sc.active)
    event(f"inactive joints: {'none' if len(inactive) == 0 else 'some'}")
    got = result.joint_q[:, inactive].view(np.uint32)
    want = np.broadcast_to(sc.start[inactive].view(np.uint32), got.shape)
    np.testing.assert_array_equal(got, want)


@settings(PROFILE)
@given(sc=scenarios())
def test_cost_is_the_squared_active_joint_motion_or_inf(sc):
    result = solve(sc)
    note_outcome(result)
    assert result.cost.dtype == np.float64 and result.success.dtype == np.int32
    assert set(np.unique(result.success)) <= {0, 1}
    delta = result.joint_q[:, sc.active].astype(np.float64) - sc.start[sc.active].astype(np.float64)
    expected = np.where(result.success == 1, np.sum(delta * delta, axis=1), np.inf)
    np.testing.assert_allclose(result.cost, expected, rtol=1e-12, atol=0.0)


@settings(PROFILE)
@given(sc=scenarios())
def test_best_index_is_the_least_cost_success(sc):
    result = solve(sc)
    note_outcome(result)
    if not np.any(result.success == 1):
        assert result.best_index is None
        return
    best = result.best_index
    assert isinstance(best, int) and result.success[best] == 1
    assert result.cost[best] == np.min(result.cost[result.success == 1])


@settings(PROFILE)
@given(sc=scenarios())
def test_solve_does_not_write_to_the_robot(sc):
    sc.robot.update_fk()
    tcp_before = sc.robot.tcp_world_xforms.copy()
    note_outcome(solve(sc))
    assert sc.robot.joint_q.dtype == np.float32
    np.testing.assert_array_equal(sc.robot.joint_q.view(np.uint32), sc.start.view(np.uint32))
    np.testing.assert_array_equal(sc.robot.tcp_world_xforms, tcp_before)


@settings(PROFILE)
@given(sc=scenarios(max_candidates=4))
def test_batch_row_equals_solving_that_candidate_alone(sc):
    batch = solve(sc)
    note_outcome(batch)
    cands = sc.candidates()
    for i, cand in enumerate(cands):
        alone = robo_solve_ik_direction_up_multi_batch(sc.robot, (cand,), **sc.kwargs)
        np.testing.assert_allclose(alone.joint_q[0], batch.joint_q[i], rtol=0, atol=1e-6)
        assert alone.success[0] == batch.success[i], i


@settings(PROFILE)
@given(sc=scenarios(max_candidates=4))
def test_search_keeps_the_invariants_and_round_zero_successes(sc):
    """The multi-seed search (round 0, then rounds of seeds tried in turn): every success
    is real under independent FK, joints stay in their limits, inactive joints keep their
    input, cost is the motion from the current state, best_index the least cost, and a
    candidate its round 0 solves keeps exactly that answer."""
    kwargs = dict(sc.kwargs)
    for name, value in SEARCH_SOLVER_DEFAULTS.items():
        kwargs.setdefault(name, value)
    found = robo_search_ik_direction_up(sc.robot, sc.candidates(), num_seeds=3, max_rounds=2,
                                        random_seed=1, **kwargs)
    result = found.result
    note_outcome(result)
    local = robo_solve_ik_direction_up_multi_batch(sc.robot, sc.candidates(), **kwargs)
    solved = local.success == 1
    assert np.all(result.success[solved] == 1)
    np.testing.assert_array_equal(result.joint_q[solved], local.joint_q[solved])
    event("seeds found more" if np.sum(result.success) > np.sum(solved) else "seeds found nothing new")
    p_tol, f_tol = tol(sc, "position_tol"), tol(sc, "frame_tol_rad")
    for b in np.flatnonzero(result.success == 1):
        tcp = pinocchio_tcp(sc.desc, result.joint_q[b], sc.root)
        for spec in sc.specs[b]:
            pos, dir_err, up_err = spec_errors(tcp[spec.ee_id], spec)
            assert pos < p_tol and (dir_err is None or dir_err < f_tol) and (up_err is None or up_err < f_tol)
    q = result.joint_q.astype(np.float64)
    inactive = np.setdiff1d(np.arange(sc.robot.num_dofs), sc.active)
    np.testing.assert_array_equal(result.joint_q[:, inactive].view(np.uint32),
                                  np.broadcast_to(sc.start[inactive].view(np.uint32), (len(q), len(inactive))))
    a = sc.active
    assert np.all((q[:, a] >= sc.robot.lower_limits[a]) & (q[:, a] <= sc.robot.upper_limits[a]))
    delta = q[:, a] - sc.start[a].astype(np.float64)
    np.testing.assert_allclose(result.cost, np.where(result.success == 1, np.sum(delta * delta, axis=1),
                                                     np.inf), rtol=1e-12, atol=0.0)
    if np.any(result.success == 1):
        assert result.cost[result.best_index] == np.min(result.cost[result.success == 1])
    else:
        assert result.best_index is None


@settings(PROFILE)
@given(sc=scenarios(max_candidates=3))
def test_relay_runs_each_start_as_alone_until_the_quota_converged(sc):
    """solve_problem's relay (the search's seeds): a candidate's starts run in turn, each
    exactly as when solved alone, until ``quota`` converged; the rest never run. Both
    backends (the numba one where it supports the robot)."""
    kwargs = {k: v for k, v in sc.kwargs.items() if k not in ("active_dof_ids", "root_world_xform")}
    problem = build_problem(sc.robot, sc.candidates(), sc.kwargs["active_dof_ids"], "cpu",
                            sc.kwargs["root_world_xform"], solver_settings(**kwargs))
    seeds = 3
    group = np.repeat(np.arange(problem.num_candidates), seeds)
    rows = problem.select(group)
    starts = random_starts(rows, len(group), np.random.default_rng(len(group)))
    quota = 1 + group % 2  # candidates 0, 2: one success; candidate 1: two
    alone = solve_problem(rows, starts, backend="numpy")
    never = relay_never_started(alone, group, quota)
    for backend in ("numpy", "auto"):
        out = solve_problem(rows, starts, backend=backend, relay=(group, quota))
        for i in range(len(group)):
            if never[i]:
                assert out.stop_reason[i] == res.STOP_SUPERSEDED and out.iterations[i] == 0
                continue
            assert out.stop_reason[i] == alone.stop_reason[i], (backend, i)
            assert out.iterations[i] == alone.iterations[i]
            np.testing.assert_allclose(out.joint_q[i], alone.joint_q[i], rtol=0, atol=1e-6)
    event("some start superseded" if res.STOP_SUPERSEDED in out.stop_reason else "no start superseded")


@JUNK_PROFILE
@given(req=junk_requests())
def test_junk_inputs_raise_only_validation_or_floating_point_errors(req):
    for kind in req.corruptions:
        event(f"corruption: {kind}")
    # numpy's default error handling (underflow silent), every warning raised as an exception
    with warnings.catch_warnings(), np.errstate(over="warn", divide="warn", invalid="warn",
                                                under="ignore"):
        warnings.simplefilter("error")
        try:
            result = robo_solve_ik_direction_up_multi_batch(req.robot, req.candidates(),
                                                            **req.kwargs)
        except InputValidationError as exc:
            event(f"raised {type(exc).__name__}")
            assert str(exc) and ":" in str(exc), repr(exc)
            return
        except FloatingPointError:
            event("raised FloatingPointError")
            return
    event("solved")
    assert result.joint_q.dtype == np.float32 and result.joint_q.shape[0] == len(result.success)


# ---------------------------------------------------------------- regressions
# Minimal examples of core bugs the properties above found (all fixed).

def _urdf(*joints: str) -> str:
    """A robot of the given <joint> elements and the links among a, b, c they name."""
    body = "".join(joints)
    links = "".join(f"<link name='{n}'/>" for n in "abc" if f"link='{n}'" in body)
    return f"<robot name='r'>{links}{body}</robot>"


def _joint(name, parent, child, jtype="revolute", lower=-1.0, upper=1.0, axis="0 0 1"):
    return (f"<joint name='{name}' type='{jtype}'><parent link='{parent}'/><child link='{child}'/>"
            f"<axis xyz='{axis}'/><limit lower='{lower!r}' upper='{upper!r}' effort='1' "
            "velocity='1'/></joint>")


POINT = (DirectionUpTarget(0, (0.3, 0.4, 0.0), None, None),)  # position-only target


# Regression (found by the property tests): limits that hold no float32 value (a locked
# prismatic joint, lower == upper == 0.1) made the solver return float32(0.1) > upper.
def test_limits_without_a_float32_value_snap_to_one():
    robot = RobotKinematics.from_urdf(
        _urdf(_joint("j", "a", "b", "prismatic", 0.1, 0.1, axis="1 0 0")), ["b"])
    target = DirectionUpTarget(0, (0.1, 0.0, 0.0), None, None)
    q = robo_solve_ik_direction_up_multi_batch(robot, ((target,),), max_position_error=0.1).joint_q
    assert robot.lower_limits[0] <= float(q[0, 0]) <= robot.upper_limits[0]


# Regression (found by the property tests): a Python int beyond the float range (10**400) raised
# OverflowError from float() instead of an input validation error (targets._floats3,
# settings.SolverSettings)
@pytest.mark.parametrize("make", [
    lambda: DirectionUpTarget(0, (10 ** 400, 0, 0), None, None),
    lambda: DirectionUpTarget(0, (0, 0, 0), (1, 0, 0), (0, 10 ** 400, 0)),
    lambda: robo_solve_ik_direction_up_multi_batch(
        RobotKinematics.from_urdf(_urdf(_joint("j", "a", "b")), ["b"]), (POINT,),
        max_position_error=10 ** 400),
], ids=["position_world", "up_world", "max_position_error"])
def test_huge_ints_are_validation_errors(make):
    with pytest.raises(InputValidationError):
        make()


# Regression (found by the property tests): a 0-d numpy array raised a plain TypeError ('len() of
# unsized object' in targets._floats3; 'iteration over a 0-d array' in problem._check_active)
# instead of InputTypeError
@pytest.mark.parametrize("make", [
    lambda robot: DirectionUpTarget(0, np.array(1.0), None, None),
    lambda robot: robo_solve_ik_direction_up_multi_batch(robot, (POINT,), np.array(0),
                                                         max_position_error=0.1),
], ids=["position_world", "active_dof_ids"])
def test_zero_dim_arrays_are_validation_errors(make):
    robot = RobotKinematics.from_urdf(_urdf(_joint("j", "a", "b")), ["b"])
    with pytest.raises(InputValidationError):
        make(robot)


# Regression (found by the property tests): rotations.validate_transform warns before it validates:
# a complex  root_world_xform gives ComplexWarning and is accepted with its imaginary part dropped;
# 1e308 in the rotation gives 'overflow encountered in matmul'
@pytest.mark.parametrize("xform", [
    np.eye(4) * (1 + 1j),
    np.array([[1.0, 0, 0, 0], [0, 1, 1e308, 0], [0, 0, 1, 0], [0, 0, 0, 1]]),
], ids=["complex", "1e308"])
def test_bad_root_world_xform_is_rejected_without_warnings(xform):
    robot = RobotKinematics.from_urdf(_urdf(_joint("j", "a", "b")), ["b"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InputValidationError, match="root_world_xform:"):
            robo_solve_ik_direction_up_multi_batch(robot, (POINT,), root_world_xform=xform,
                                                   max_position_error=0.1)


# Regression (found by the property tests): a valid tiny damping (1e-20) with identical
# Jacobian columns made np.linalg.solve raise LinAlgError('Singular matrix') in the DLS step.
def test_tiny_damping_with_identical_columns_gives_a_result():
    # Two revolute joints about the same axis through the same point: identical columns.
    robot = RobotKinematics.from_urdf(
        _urdf(_joint("j1", "a", "b"), _joint("j2", "b", "c")), ["c"],
        [np.array([[1.0, 0, 0, 0.5], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])])
    for backend in ("numpy", "auto"):
        result = robo_solve_ik_direction_up_multi_batch(robot, (POINT,), damping=1e-20,
                                                        max_position_error=0.1, backend=backend)
        q = result.joint_q[0].astype(np.float64)
        assert np.all(np.isfinite(q))
        assert np.all(q >= robot.lower_limits) and np.all(q <= robot.upper_limits)
        assert result.success[0] == 1  # (0.3, 0.4) is 0.5 m away: reachable by this arm
