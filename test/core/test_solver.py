"""The batch solver against every rule of spec sections 3-6."""

import inspect

import numpy as np
import pytest

from direction_up_ik import (CandidateStructureError, DirectionUpTarget, InputTypeError,
                             InputValidationError, JointLimitError, LocalAxisConfigurationError,
                             RobotKinematics, UnsupportedDeviceError,
                             robo_solve_ik_direction_up_multi_batch as solve)
from direction_up_ik.core import result as res
from direction_up_ik.core import problem as problem_module
from direction_up_ik.core.problem import build_problem
from direction_up_ik.core.settings import solver_settings

from helpers import mid_range, random_in_limits, targets_at

MPE = 0.03  # max_position_error used where a test does not care


def _line_robot(length_a=0.25, length_b=0.25):
    """Planar 2-link arm about z, exact binary lengths: TCP at (a+b, 0, 0) for q = 0."""
    urdf = f"""<robot name='planar2'><link name='base'/><link name='l1'/><link name='l2'/><link name='tip'/>
      <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/><axis xyz='0 0 1'/>
        <limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
      <joint name='j2' type='revolute'><parent link='l1'/><child link='l2'/><origin xyz='{length_a} 0 0'/>
        <axis xyz='0 0 1'/><limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
      <joint name='tipj' type='fixed'><parent link='l2'/><child link='tip'/><origin xyz='{length_b} 0 0'/></joint>
    </robot>"""
    return RobotKinematics.from_urdf(urdf, ["tip"])


def test_signature_defaults_are_the_spec_defaults():
    params = inspect.signature(solve).parameters
    expected = dict(active_dof_ids=None, device="cpu", root_world_xform=None, max_iters=32,
                    position_tol=1e-3, frame_tol_rad=1e-2, position_weight=1.0,
                    rotation_weight=1.0, damping=1e-3, max_step_norm=0.25)
    for name, value in expected.items():
        assert params[name].default == value, name
    assert params["max_position_error"].default is inspect.Parameter.empty
    assert params["max_position_error"].kind is inspect.Parameter.KEYWORD_ONLY


def test_max_position_error_is_required(panda):
    with pytest.raises(TypeError, match="max_position_error"):
        solve(panda, (targets_at(panda, mid_range(panda)),))


def test_reachable_targets_succeed_and_pass_an_independent_check(panda):
    pin = pytest.importorskip("pinocchio", reason="independent FK check needs Pinocchio (dev dependency)")
    from direction_up_ik.robots import bundled_robot
    rng = np.random.default_rng(5)
    start = mid_range(panda)
    panda.joint_q[:] = start
    goals = np.clip(start + rng.uniform(-0.6, 0.6, size=(40, 7)), panda.lower_limits, panda.upper_limits)
    result = solve(panda, [targets_at(panda, g) for g in goals], max_position_error=MPE)
    assert result.success.mean() > 0.9
    model = pin.buildModelFromUrdf(str(bundled_robot("panda_like").urdf_path()))
    data = model.createData()
    hand = model.getFrameId("panda_hand")
    for i in np.flatnonzero(result.success):
        q = result.joint_q[i].astype(np.float64)
        assert np.all(q >= panda.lower_limits) and np.all(q <= panda.upper_limits)
        pin.framesForwardKinematics(model, data, q)
        tcp = data.oMf[hand].homogeneous @ panda.end_effector_local_xforms[0]
        goal = panda.tcp_transforms(goals[i])[0]
        assert np.linalg.norm(tcp[:3, 3] - goal[:3, 3]) < 1e-3
        for axis in (2, 1):  # Direction = +Z, Up = +Y in the TCP convention
            angle = np.arccos(np.clip(tcp[:3, axis] @ goal[:3, axis], -1, 1))
            assert angle < 1e-2
        assert result.stop_reason[i] == res.STOP_CONVERGED
    assert np.all(result.iterations <= 32)


def test_result_types_shapes_and_robot_not_written(dual_arm):
    dual_arm.joint_q[:] = mid_range(dual_arm)
    dual_arm.update_fk()
    before_q, before_tcp = dual_arm.joint_q.copy(), dual_arm.tcp_world_xforms.copy()
    cand = targets_at(dual_arm, mid_range(dual_arm) + 0.05)
    result = solve(dual_arm, [cand, cand, cand], max_position_error=MPE)
    assert result.joint_q.dtype == np.float32 and result.joint_q.shape == (3, dual_arm.num_dofs)
    assert result.success.dtype == np.int32 and result.success.shape == (3,)
    assert result.cost.dtype == np.float64 and result.cost.shape == (3,)
    assert result.position_error.shape == (3, 2) and len(result.stop_reason) == 3
    assert result.device == "cpu"
    np.testing.assert_array_equal(dual_arm.joint_q, before_q)
    np.testing.assert_array_equal(dual_arm.tcp_world_xforms, before_tcp)


def test_success_is_strictly_below_the_position_tolerance():
    robot = _line_robot()  # TCP exactly at (0.5, 0, 0); no active joint so nothing moves
    def run(x, tol):
        t = DirectionUpTarget(0, (x, 0.0, 0.0), None, None)
        return solve(robot, ((t,),), active_dof_ids=(), max_position_error=MPE, position_tol=tol)
    at_tol = run(0.5625, 0.0625)  # error exactly 2**-4
    assert at_tol.position_error[0, 0] == 0.0625
    assert at_tol.success[0] == 0 and at_tol.best_index is None and at_tol.cost[0] == np.inf
    assert at_tol.stop_reason[0] == res.STOP_NO_ACTIVE_JOINTS
    below = run(0.5625, np.nextafter(0.0625, 1.0))
    assert below.success[0] == 1 and below.best_index == 0 and below.cost[0] == 0.0


def test_success_is_strictly_below_the_frame_tolerance():
    robot = _line_robot()  # tool +X along world +X at q = 0
    t = DirectionUpTarget(0, (0.5, 0.0, 0.0), (0.0, 1.0, 0.0), None)  # 90 degrees off, axis mode
    kwargs = dict(active_dof_ids=(), max_position_error=MPE)
    at_tol = solve(robot, ((t,),), frame_tol_rad=np.pi / 2, **kwargs)
    assert at_tol.direction_error[0, 0] == np.pi / 2 and at_tol.success[0] == 0
    assert np.isnan(at_tol.up_error[0, 0])  # axis mode leaves the roll free
    assert solve(robot, ((t,),), frame_tol_rad=np.nextafter(np.pi / 2, 4.0), **kwargs).success[0] == 1


def test_cost_and_best_index_pick_the_least_joint_motion(panda):
    start = mid_range(panda)
    panda.joint_q[:] = start
    near = start + np.array([0.05, -0.05, 0.05, 0.05, 0, 0.05, 0])
    far = start + np.array([0.4, -0.3, 0.3, 0.3, 0.2, 0.2, 0.3])
    unreachable = (DirectionUpTarget(0, (3.0, 0.0, 0.0), (1, 0, 0), (0, 0, 1), None, None),)
    result = solve(panda, [targets_at(panda, far), unreachable, targets_at(panda, near)],
                   max_position_error=MPE)
    np.testing.assert_array_equal(result.success, [1, 0, 1])
    assert result.cost[1] == np.inf
    for i in (0, 2):
        delta = result.joint_q[i].astype(np.float64) - panda.joint_q.astype(np.float64)
        assert result.cost[i] == pytest.approx(np.sum(delta ** 2), rel=1e-12)
    assert result.cost[2] < result.cost[0]
    assert result.best_index == 2
    np.testing.assert_array_equal(result.best_joint_q, result.joint_q[2])


def test_cost_counts_only_active_joints_and_inactive_joints_never_move(dual_arm):
    start = mid_range(dual_arm).astype(np.float32)
    start[0] = 0.123456  # lift: inactive, keep exactly
    dual_arm.joint_q[:] = start
    goal = start.astype(np.float64) + 0.08
    goal[0] = 0.2
    active = tuple(range(1, dual_arm.num_dofs))
    result = solve(dual_arm, [targets_at(dual_arm, goal)], active_dof_ids=active, max_position_error=MPE)
    assert result.joint_q[0, 0] == np.float32(0.123456)
    assert result.active_dof_ids == active
    if result.success[0]:
        delta = result.joint_q[0, 1:].astype(np.float64) - start[1:].astype(np.float64)
        assert result.cost[0] == pytest.approx(np.sum(delta ** 2))


def test_initial_active_joint_outside_limits_is_an_error_inactive_is_not(panda):
    panda.joint_q[:] = mid_range(panda)
    panda.joint_q[3] = 0.5  # joint 4 upper limit is -0.0698
    cand = (targets_at(panda, mid_range(panda)),)
    with pytest.raises(JointLimitError, match="active joint 'panda_joint4' starts at 0.5, outside its "
                                              "limits \\[-3.0718, -0.0698\\]") as info:
        solve(panda, cand, max_position_error=MPE)
    assert info.value.joint == "panda_joint4" and info.value.upper == -0.0698
    result = solve(panda, cand, active_dof_ids=(0, 1, 2, 4, 5, 6), max_position_error=MPE)
    assert result.joint_q[0, 3] == np.float32(0.5)


def test_returned_joints_stay_within_limits_when_targets_pull_outside(panda):
    panda.joint_q[:] = mid_range(panda)
    rng = np.random.default_rng(8)
    cands = [(DirectionUpTarget(0, rng.uniform(-1.2, 1.2, 3), rng.normal(size=3), (0, 0, 1)),)
             for _ in range(30)]
    cands = [c for c in cands if abs(np.dot(c[0].direction_world, (0, 0, 1))) < 0.99]
    result = solve(panda, cands, max_position_error=0.5, max_step_norm=1.0, damping=1e-6)
    q = result.joint_q.astype(np.float64)
    assert np.all(q >= panda.lower_limits) and np.all(q <= panda.upper_limits)
    assert np.any(np.isclose(q, panda.lower_limits) | np.isclose(q, panda.upper_limits)), \
        "expected some joints to end on a limit"


def test_batch_equals_solving_each_candidate_alone(dual_arm):
    rng = np.random.default_rng(11)
    dual_arm.joint_q[:] = mid_range(dual_arm)
    goals = np.clip(mid_range(dual_arm) + rng.uniform(-0.5, 0.5, size=(6, dual_arm.num_dofs)),
                    np.where(np.isfinite(dual_arm.lower_limits), dual_arm.lower_limits, -3),
                    np.where(np.isfinite(dual_arm.upper_limits), dual_arm.upper_limits, 3))
    cands = [targets_at(dual_arm, g) for g in goals]
    cands.append((DirectionUpTarget(0, (2, 2, 2), (1, 0, 0), (0, 0, 1), None, None),
                  DirectionUpTarget(1, (0.4, -0.2, 1.2), (1, 0, 0), None, None, None)))
    cands[2] = (cands[2][0], DirectionUpTarget(1, cands[2][1].position_world, None, None, None, None))
    batch = solve(dual_arm, cands, max_position_error=MPE, max_iters=40)
    assert 0 < batch.success.sum() < len(cands)
    assert len(set(batch.iterations.tolist())) > 1  # candidates stop at different times
    for i, cand in enumerate(cands):
        alone = solve(dual_arm, [cand], max_position_error=MPE, max_iters=40)
        np.testing.assert_allclose(alone.joint_q[0], batch.joint_q[i], rtol=0, atol=1e-6)
        assert alone.success[0] == batch.success[i]
        assert alone.iterations[0] == batch.iterations[i]
        assert alone.stop_reason[0] == batch.stop_reason[i]


def test_position_guard_keeps_the_position_within_max_position_error():
    # 1 joint, tool +X radial: the position is met at q = 0 but the Direction wants q = pi/2.
    robot = _line_robot()
    t = DirectionUpTarget(0, (0.5, 0.0, 0.0), (0.0, 1.0, 0.0), None)
    kwargs = dict(active_dof_ids=(0,), rotation_weight=10.0, max_iters=50)
    guarded = solve(robot, ((t,),), max_position_error=0.02, **kwargs)
    free = solve(robot, ((t,),), max_position_error=10.0, **kwargs)
    assert guarded.position_error[0, 0] <= 0.02
    assert guarded.stop_reason[0] in (res.STOP_NO_ACCEPTABLE_STEP, res.STOP_STEP_TOO_SMALL)
    assert free.position_error[0, 0] > 0.1  # without the guard the rotation wins
    assert free.joint_q[0, 0] > 5 * guarded.joint_q[0, 0]


def test_far_target_is_approached_with_strictly_decreasing_position_error():
    robot = _line_robot()
    robot.joint_q[:] = (2.5, 0.0)
    t = DirectionUpTarget(0, (0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    errors = [solve(robot, ((t,),), max_position_error=0.01, max_iters=k).position_error[0, 0]
              for k in range(1, 12)]
    assert all(b < a for a, b in zip(errors, errors[1:]) if a >= 1e-3)
    final = solve(robot, ((t,),), max_position_error=0.01, max_iters=64)
    assert final.success[0] == 1


def test_three_link_planar_arm_matches_the_analytic_solution():
    # Seed 004's 3-link planar arm: L = (0.3, 0.25, 0.15), all joints about z.
    lengths = (0.3, 0.25, 0.15)
    urdf = "<robot name='p3'>" + "".join(f"<link name='l{i}'/>" for i in range(5)) + "".join(
        f"<joint name='j{i}' type='revolute'><parent link='l{i}'/><child link='l{i + 1}'/>"
        f"<origin xyz='{0 if i == 0 else lengths[i - 1]} 0 0'/><axis xyz='0 0 1'/>"
        f"<limit lower='-3.1' upper='3.1' effort='1' velocity='1'/></joint>" for i in range(3)) + \
        f"<joint name='tip' type='fixed'><parent link='l3'/><child link='l4'/><origin xyz='{lengths[2]} 0 0'/>" \
        "</joint></robot>"
    robot = RobotKinematics.from_urdf(urdf, ["l4"])

    def analytic(x, y, phi, elbow_up):
        l1, l2, l3 = lengths
        xp, yp = x - l3 * np.cos(phi), y - l3 * np.sin(phi)
        c2 = (xp ** 2 + yp ** 2 - l1 ** 2 - l2 ** 2) / (2 * l1 * l2)
        t2 = np.arccos(np.clip(c2, -1, 1)) * (1 if elbow_up else -1)
        t1 = np.arctan2(yp, xp) - np.arctan2(l2 * np.sin(t2), l1 + l2 * np.cos(t2))
        return np.array([t1, t2, phi - t1 - t2])

    x, y, phi = 0.35, 0.25, 0.6
    t = DirectionUpTarget(0, (x, y, 0.0), (np.cos(phi), np.sin(phi), 0.0), (-np.sin(phi), np.cos(phi), 0.0))
    for elbow_up in (True, False):
        expected = analytic(x, y, phi, elbow_up)
        robot.joint_q[:] = expected + np.array([0.15, -0.15, 0.1])
        result = solve(robot, ((t,),), max_position_error=MPE, position_tol=1e-6, frame_tol_rad=1e-6,
                       max_iters=100)
        assert result.success[0] == 1
        np.testing.assert_allclose(result.joint_q[0], expected, atol=2e-5)


def test_dual_arm_needs_a_joint_solve_when_the_waist_is_shared(dual_arm):
    start = mid_range(dual_arm)
    goal = start.copy()
    goal[1] += 0.35  # the waist turns
    goal[2:] += 0.1
    dual_arm.joint_q[:] = start
    left, right = targets_at(dual_arm, goal)
    names = dual_arm.joint_names
    left_ids = tuple(i for i, n in enumerate(names) if not n.startswith("right_"))
    right_ids = tuple(i for i, n in enumerate(names) if not n.startswith("left_"))
    kwargs = dict(max_position_error=MPE, max_iters=64)

    joint = solve(dual_arm, [(left, right)], **kwargs)
    assert joint.success[0] == 1
    tcp = dual_arm.tcp_transforms(joint.joint_q[0].astype(float))
    assert np.linalg.norm(tcp[0, :3, 3] - left.position_world) < 1e-3
    assert np.linalg.norm(tcp[1, :3, 3] - right.position_world) < 1e-3

    # One after the other, each with the shared waist/lift active: the second undoes the first.
    first = solve(dual_arm, [(left,)], active_dof_ids=left_ids, **kwargs)
    assert first.success[0] == 1
    dual_arm.joint_q[:] = first.joint_q[0]
    second = solve(dual_arm, [(right,)], active_dof_ids=right_ids, **kwargs)
    assert second.success[0] == 1
    after = dual_arm.tcp_transforms(second.joint_q[0].astype(float))
    assert np.linalg.norm(after[0, :3, 3] - left.position_world) > 1e-2, \
        "the right-arm solve should have moved the shared waist and pulled the left TCP off"


def test_axis_and_position_only_targets_mix_in_one_candidate(dual_arm):
    dual_arm.joint_q[:] = mid_range(dual_arm)
    goal = mid_range(dual_arm) + 0.1
    full_left, full_right = targets_at(dual_arm, goal)
    axis_left = DirectionUpTarget(0, full_left.position_world, full_left.direction_world, None, None, None)
    pos_right = DirectionUpTarget(1, full_right.position_world, None, None, None, None)
    result = solve(dual_arm, [(axis_left, pos_right)], max_position_error=MPE)
    assert result.success[0] == 1
    assert np.isnan(result.up_error[0, 0]) and np.isnan(result.direction_error[0, 1])
    tcp = dual_arm.tcp_transforms(result.joint_q[0].astype(float))
    assert np.arccos(np.clip(tcp[0, :3, 2] @ full_left.direction_world, -1, 1)) < 1e-2


def test_numerical_failure_lists_the_candidates():
    urdf = """<robot name='huge'><link name='a'/><link name='b'/><link name='c'/>
      <joint name='j' type='revolute'><parent link='a'/><child link='b'/><origin xyz='1e308 0 0'/>
        <axis xyz='0 0 1'/><limit lower='-1' upper='1' effort='1' velocity='1'/></joint>
      <joint name='f' type='fixed'><parent link='b'/><child link='c'/><origin xyz='1e308 0 0'/></joint></robot>"""
    robot = RobotKinematics.from_urdf(urdf, ["c"])
    t = DirectionUpTarget(0, (0, 0, 0), None, None)
    with pytest.raises(FloatingPointError, match=r"candidate indices \[0, 1\]"):
        solve(robot, [(t,), (t,)], max_position_error=MPE)


def _valid(robot):
    return (DirectionUpTarget(0, (0.3, 0.2, 1.0), (1, 0, 0), (0, 0, 1)),
            DirectionUpTarget(1, (0.3, -0.2, 1.0), (1, 0, 0), (0, 0, 1)))


class _SubTarget(DirectionUpTarget):
    __slots__ = ()


def test_both_candidate_checks_accept_the_same_requests(dual_arm):
    """The one-pass check of the usual request and the detailed check agree: whatever
    the first declines (lists, equal but separately built local axes, a subclass of
    DirectionUpTarget) the second accepts, and both give tuples of the same targets."""
    a, b = _valid(dual_arm)
    twin = DirectionUpTarget(0, (0.3, 0.2, 1.0), (1, 0, 0), (0, 0, 1), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    sub = _SubTarget(1, (0.3, -0.2, 1.0), (1, 0, 0), (0, 0, 1))
    for cands, common in [(((a, b),), True), ([[a, b], (a, b)], True), ([(a, b), (twin, b)], False),
                          ([(a, sub)], False), ([[b, a], (b, a)], True)]:
        checked = problem_module._check_candidates(dual_arm, cands)
        assert checked == tuple(tuple(c) for c in cands)
        assert all(type(c) is tuple for c in checked)
        assert (problem_module._common_candidates(dual_arm, cands) is not None) == common
    # one end effector per candidate
    for cands, common in [(((a,), (a,)), True), ([[a], (a,)], True), ([(a,), (twin,)], False),
                          ([(a,), (a, b)], False), ([(b,), (a,)], False),
                          ([(a,), (_SubTarget(0, (0.3, 0.2, 1.0), (1, 0, 0), (0, 0, 1)),)], False)]:
        assert (problem_module._common_candidates(dual_arm, cands) is not None) == common, cands
        if common:
            assert problem_module._common_candidates(dual_arm, cands) == tuple(tuple(c) for c in cands)
    assert problem_module._common_candidates(dual_arm, ((a,),)) is not None


def test_packed_target_arrays_are_those_of_the_targets(dual_arm):
    """build_problem's target arrays hold every target's vectors in candidate-major order,
    with the unit placeholders (+X, +Y) and False flags where an axis is free; the byte-join
    stacking gives what np.array gives, and falls back to it for non-contiguous vectors."""
    rng = np.random.default_rng(5)
    cands = []
    for i in range(7):
        d, u = rng.standard_normal(3), rng.standard_normal(3)
        cands.append((DirectionUpTarget(0, rng.standard_normal(3), d, u),
                      DirectionUpTarget(1, rng.standard_normal(3), d if i % 3 else None,
                                        u if i % 3 == 1 else None)))
    problem = build_problem(dual_arm, cands, settings=solver_settings(max_position_error=0.5))
    for b, candidate in enumerate(cands):
        for e, t in enumerate(candidate):
            assert np.array_equal(problem.target_position[b, e], t.position_world)
            want_d = [1.0, 0.0, 0.0] if t.direction_world is None else t.direction_world
            want_u = [0.0, 1.0, 0.0] if t.up_world is None else t.up_world
            assert np.array_equal(problem.target_direction[b, e], want_d)
            assert np.array_equal(problem.target_up[b, e], want_u)
            assert problem.has_direction[b, e] == (t.direction_world is not None)
            assert problem.has_up[b, e] == (t.up_world is not None)
    assert problem.target_position.dtype == np.float64 and not problem.target_position.flags.writeable
    grid = rng.standard_normal((4, 6))
    strided = [grid[i, ::2] for i in range(4)]  # (3,) views, not contiguous
    assert np.array_equal(problem_module._stack3(strided, (2, 2, 3)), grid[:, ::2].reshape(2, 2, 3))
    assert np.array_equal(problem_module._stack3([(1, 2, 3)], (1, 1, 3)), [[[1.0, 2.0, 3.0]]])


@pytest.mark.parametrize("make,error,pattern", [
    (lambda r, c: dict(candidates=[]), InputValidationError, "candidates: must contain at least one"),
    (lambda r, c: dict(candidates=c), InputTypeError, "candidate 0: candidates: each candidate must be"),
    (lambda r, c: dict(candidates=[()]), InputValidationError, "candidate 0: candidates: a candidate must"),
    (lambda r, c: dict(candidates=[(c[0], "x")]), InputTypeError,
     "target 1 of candidate 0: target: expected DirectionUpTarget"),
    (lambda r, c: dict(candidates=[(DirectionUpTarget(2, (0, 0, 0), None, None),)]), InputValidationError,
     r"target 0 of candidate 0: ee_id: 2 is not an end effector of the robot \(valid: 0..1"),
    (lambda r, c: dict(candidates=[(c[0], c[0])]), CandidateStructureError,
     r"candidate 0: ee_id: EE ids must be unique within a candidate, got \[0, 0\]"),
    (lambda r, c: dict(candidates=[c, (c[0],)]), CandidateStructureError,
     "candidate 1: candidates: has 1 targets but candidate 0 has 2"),
    (lambda r, c: dict(candidates=[c, (c[1], c[0])]), CandidateStructureError,
     "target 0 of candidate 1: ee_id: is 1 but candidate 0 has 0 here"),
    (lambda r, c: dict(candidates=[c, (DirectionUpTarget(0, (0, 0, 0), (1, 0, 0), (0, 0, 1), None, None),
                                        c[1])]), LocalAxisConfigurationError,
     "target 0 of candidate 1: local_direction/local_up: differs from candidate 0"),
    (lambda r, c: dict(device="cuda"), UnsupportedDeviceError, "device: unsupported device 'cuda'"),
    (lambda r, c: dict(max_iters=0), InputValidationError, "max_iters: must be a positive integer, got 0"),
    (lambda r, c: dict(max_iters=2.5), InputTypeError, "max_iters: must be a positive integer"),
    (lambda r, c: dict(max_iters=True), InputTypeError, "max_iters: must be a positive integer"),
    (lambda r, c: dict(stall_window=-1), InputValidationError, "stall_window: must be an integer >= 0, got -1"),
    (lambda r, c: dict(stall_window=2.0), InputTypeError, "stall_window: must be an integer >= 0"),
    (lambda r, c: dict(num_step_scales=0), InputValidationError, r"num_step_scales: must be an integer in \[1, 8\], got 0"),
    (lambda r, c: dict(num_step_scales=9), InputValidationError, r"num_step_scales: must be an integer in \[1, 8\], got 9"),
    (lambda r, c: dict(num_step_scales=4.0), InputTypeError, r"num_step_scales: must be an integer in \[1, 8\]"),
    (lambda r, c: dict(damping_mode="adaptive"), InputValidationError,
     r"damping_mode: must be one of \['constant', 'residual'\], got 'adaptive'"),
    (lambda r, c: dict(damping_mode=None), InputTypeError, r"damping_mode: must be one of \['constant', 'residual'\]"),
    (lambda r, c: dict(position_tol=0.0), InputValidationError, "position_tol: must be a finite positive"),
    (lambda r, c: dict(frame_tol_rad=-1e-3), InputValidationError, "frame_tol_rad: must be a finite positive"),
    (lambda r, c: dict(damping=np.nan), InputValidationError, "damping: must be a finite positive"),
    (lambda r, c: dict(max_step_norm=np.inf), InputValidationError, "max_step_norm: must be a finite positive"),
    (lambda r, c: dict(position_weight="1"), InputTypeError, "position_weight: must be a finite positive"),
    (lambda r, c: dict(rotation_weight=0), InputValidationError, "rotation_weight: must be a finite positive"),
    (lambda r, c: dict(max_position_error=-0.1), InputValidationError, "max_position_error: must be"),
    (lambda r, c: dict(active_dof_ids=(0, 99)), InputValidationError, "active_dof_ids: index 99 is outside"),
    (lambda r, c: dict(active_dof_ids=(1, 1)), InputValidationError, "active_dof_ids: indices must be unique"),
    (lambda r, c: dict(active_dof_ids=(0.5,)), InputTypeError, "active_dof_ids: entries must be integers"),
    (lambda r, c: dict(active_dof_ids="01"), InputTypeError, "active_dof_ids: expected None or a tuple"),
    (lambda r, c: dict(root_world_xform=np.ones((3, 3))), InputValidationError,
     r"root_world_xform: must have shape \(4, 4\)"),
    (lambda r, c: dict(root_world_xform=np.diag([1.0, 1.0, -1.0, 1.0])), InputValidationError,
     "root_world_xform: rotation part must be orthonormal"),
    (lambda r, c: dict(robot="robot"), InputTypeError, "robot: expected RobotKinematics"),
])
def test_every_validation_error_names_field_and_rule(dual_arm, make, error, pattern):
    cand = _valid(dual_arm)
    kwargs = dict(robot=dual_arm, candidates=[cand], max_position_error=MPE)
    kwargs.update(make(dual_arm, cand))
    with pytest.raises(error, match=pattern) as info:
        solve(**kwargs)
    assert isinstance(info.value, ValueError)


def test_non_finite_initial_joint_state_is_rejected(panda):
    panda.joint_q[2] = np.nan
    with pytest.raises(InputValidationError, match="robot.joint_q: joint 'panda_joint3' is not finite"):
        solve(panda, [targets_at(panda, mid_range(panda))], max_position_error=MPE)


def test_joints_resting_on_their_limits_in_float32_are_accepted(panda):
    # float32 cannot hold most float64 limits exactly; a robot parked on a limit
    # (including a negative upper limit like panda_joint4's -0.0698) must still solve.
    for limits in (panda.lower_limits, panda.upper_limits):
        panda.joint_q[:] = limits
        assert np.any(panda.joint_q.astype(np.float64) != limits)
        result = solve(panda, [targets_at(panda, mid_range(panda))], max_position_error=MPE)
        q = result.joint_q.astype(np.float64)
        assert np.all(q >= panda.lower_limits) and np.all(q <= panda.upper_limits)
    panda.joint_q[3] = np.nextafter(np.float32(-0.0698), np.float32(1.0)) + np.float32(1e-6)
    with pytest.raises(JointLimitError):
        solve(panda, [targets_at(panda, mid_range(panda))], max_position_error=MPE)


def test_memoised_settings_still_tell_types_apart():
    """solver_settings memoises validated SolverSettings by value *and* type: a cached
    max_iters=1 must not let max_iters=True or 1.0 through, and unhashable input still fails."""
    from direction_up_ik.core.settings import SolverSettings, solver_settings
    first = solver_settings(max_position_error=0.03, max_iters=1)
    assert solver_settings(max_position_error=0.03, max_iters=1) is first
    assert first == SolverSettings(max_position_error=0.03, max_iters=1)
    for bad in (True, 1.0):
        with pytest.raises(InputTypeError, match="max_iters: must be a positive integer"):
            solver_settings(max_position_error=0.03, max_iters=bad)
    with pytest.raises(InputTypeError, match="damping: must be a finite positive number"):
        solver_settings(max_position_error=0.03, damping=[1e-3])


def _ssr(result) -> np.ndarray:
    """(B,) sum of squared residuals at the returned states (unit weights, full-pose targets)."""
    return np.sum(result.position_error ** 2 + result.direction_error ** 2 + result.up_error ** 2, axis=-1)


def _panda_at_random_targets(panda, backend):
    """The panda at the first of 61 random in-limit states, full-pose targets at the other 60,
    and solve keywords with the search's cap 1.0 and analytic Jacobian for ``backend``."""
    if backend == "numba":
        pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")
    q = random_in_limits(panda, np.random.default_rng(12), 61)
    panda.joint_q[:] = q[0]
    candidates = [targets_at(panda, goal) for goal in q[1:]]
    return candidates, dict(max_position_error=MPE, max_step_norm=1.0, jacobian="analytic", backend=backend)


def _first_steps(robot, candidates, k: int, kwargs):
    """The solve's first k steps: the solve with max_iters=k (k = 0: no active joints, no step)."""
    limit = dict(max_iters=k) if k else dict(active_dof_ids=())
    return solve(robot, candidates, **limit, **kwargs)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_fewer_step_scales_stop_where_a_smaller_scale_was_needed(panda, backend):
    # Beyond the spec, opt-in: with num_step_scales=n a step tries the scales 1 .. 1/2^(n-1)
    # only. The solve is the spec-scale solve up to the first step that needed a smaller
    # scale, and stops there as no_acceptable_step.
    candidates, kwargs = _panda_at_random_targets(panda, backend)
    few = solve(panda, candidates, num_step_scales=2, **kwargs)
    full = solve(panda, candidates, **kwargs)
    cut = 0
    for c in range(len(candidates)):
        k = int(few.iterations[c])
        if few.stop_reason[c] == res.STOP_NO_ACCEPTABLE_STEP and full.iterations[c] > k:
            cut += 1  # the spec's scales went on (a step of 1/4 .. 1/128)
            capped = _first_steps(panda, [candidates[c]], k, kwargs)
            np.testing.assert_array_equal(few.joint_q[c], capped.joint_q[0])
        else:
            np.testing.assert_array_equal(few.joint_q[c], full.joint_q[c])
            assert few.stop_reason[c] == full.stop_reason[c] and few.iterations[c] == full.iterations[c]
    assert cut >= 3


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_residual_damping_is_each_step_with_damping_min_of_damping_and_the_residual(panda, backend):
    # Beyond the spec, opt-in (the search's default): damping_mode="residual" damps each step
    # by min(damping, max(E, 1e-6 damping)), E the weighted sum of squared residuals of the
    # state it starts from. Step k + 1 of such a solve is the constant-damping step with that
    # damping, taken from the state after k steps; far from the target (E >= damping) it is the
    # spec's own step.
    candidates, kwargs = _panda_at_random_targets(panda, backend)
    start = panda.joint_q.copy()
    residual = dict(kwargs, damping_mode="residual")
    faded = far = 0
    for k in range(8):
        before = _first_steps(panda, candidates, k, residual)
        after = _first_steps(panda, candidates, k + 1, residual)
        energy = _ssr(before)
        for c in np.flatnonzero(after.iterations > before.iterations):
            panda.joint_q[:] = before.joint_q[c]
            damping = min(1e-3, max(float(energy[c]), 1e-9))
            one = solve(panda, [candidates[c]], max_iters=1, damping=damping, **kwargs)
            np.testing.assert_allclose(one.joint_q[0], after.joint_q[c], rtol=0, atol=1e-6)
            if damping < 1e-3:
                faded += 1
            else:
                spec_step = solve(panda, [candidates[c]], max_iters=1, **kwargs)
                np.testing.assert_array_equal(spec_step.joint_q[0], after.joint_q[c])
                far += 1
            panda.joint_q[:] = start
    assert faded >= 20 and far >= 100


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_residual_damping_converges_near_a_singular_pose_where_constant_damping_creeps(backend):
    # The planar arm nearly stretched (0.499 of its 0.5 m reach: elbow 0.13 rad from the
    # singular straight pose) and a 1 um tolerance: constant damping shrinks the step along the
    # small singular value by s^2 / (s^2 + damping) and uses up its 32 iterations a few um away;
    # the fading damping converges within 8.
    if backend == "numba":
        pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")
    robot = _line_robot()
    target = DirectionUpTarget(0, (0.499 * np.cos(0.3), 0.499 * np.sin(0.3), 0.0), None, None)
    for q0 in ((0.0, 0.3), (0.5, 0.6), (-0.4, 1.0)):
        robot.joint_q[:] = q0
        robot.update_fk()
        kwargs = dict(max_position_error=MPE, max_step_norm=1.0, jacobian="analytic", position_tol=1e-6,
                      backend=backend)
        constant = solve(robot, [(target,)], **kwargs)
        residual = solve(robot, [(target,)], damping_mode="residual", **kwargs)
        assert constant.stop_reason[0] == res.STOP_MAX_ITERS and 1e-6 < constant.position_error[0, 0] < 1e-4
        assert residual.stop_reason[0] == res.STOP_CONVERGED and residual.iterations[0] <= 8


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_stall_window_stops_a_candidate_after_too_little_progress(panda, backend):
    # Beyond the spec, opt-in. An iteration depends on the joint state only, so a solve
    # capped at k iterations is the first k steps of the uncapped one: the residual
    # after k steps comes from the solves of the first k steps.
    candidates, kwargs = _panda_at_random_targets(panda, backend)
    window = 3
    stalled = solve(panda, candidates, stall_window=window, **kwargs)
    plain = solve(panda, candidates, **kwargs)
    ssr = np.array([_ssr(_first_steps(panda, candidates, k, kwargs)) for k in range(33)]).T
    reasons = np.array(stalled.stop_reason)
    assert (reasons == res.STOP_STALLED).sum() >= 3 and (reasons == res.STOP_CONVERGED).sum() >= 10
    for c in range(len(candidates)):
        k = int(stalled.iterations[c])
        if reasons[c] == res.STOP_STALLED:
            # It stopped after its k-th step, where the residual first failed to fall 5 % in 3 steps...
            assert k >= window and ssr[c, k] > 0.95 * ssr[c, k - window]
            capped = _first_steps(panda, [candidates[c]], k, kwargs)
            np.testing.assert_array_equal(stalled.joint_q[c], capped.joint_q[0])
        else:  # ...the others are the plain solve's.
            np.testing.assert_array_equal(stalled.joint_q[c], plain.joint_q[c])
            assert stalled.stop_reason[c] == plain.stop_reason[c]
        for j in range(window, k):
            assert not ssr[c, j] > 0.95 * ssr[c, j - window]
