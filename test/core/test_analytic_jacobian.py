"""The analytic Jacobian (``SolverSettings.jacobian = "analytic"``) against the residuals it differentiates.

The spec's forward difference (eps = 1e-4) is off the exact derivative by O(eps), so it
cannot check an exact one closely; a central difference with h = 1e-6 is off by O(h^2)
plus rounding (about 1e-9 here), so the analytic Jacobian must match it to 1e-6. The
compiled kernel's copy of these formulas is checked through whole solves in
``test_compiled_backend`` (both Jacobians, every robot there).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from direction_up_ik import (DirectionUpTarget, InputTypeError, InputValidationError, RobotKinematics, RobotModelError,
                             robo_solve_ik_direction_up_multi_batch)
from direction_up_ik.core.problem import build_problem
from direction_up_ik.core.settings import JACOBIANS, SolverSettings
from direction_up_ik.core.backend import solve_problem
from direction_up_ik.core.solver import ReferenceSolver

from helpers import mid_range, random_in_limits, targets_at
from strategies import PROFILE, scenarios

H = 1e-6  # central-difference step, rad / m


def central_difference(solver: ReferenceSolver, q: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """(n, A, 9E) d residual / d q_active by central differences of step H, transposed
    like the solver's Jacobians."""
    columns = []
    for d in solver.active:
        plus, minus = q.copy(), q.copy()
        plus[:, d] += H
        minus[:, d] -= H
        columns.append((solver.evaluate(plus, cand)[0] - solver.evaluate(minus, cand)[0]) / (2 * H))
    if not columns:  # no active joint
        return np.zeros((len(q), 0, 9 * solver.e))
    return np.stack(columns, axis=1)


def away_from_opposite(solver: ReferenceSolver, q: np.ndarray, cand: np.ndarray) -> bool:
    """True when no constrained Direction or Up error is within 0.05 rad of pi (there the
    errors jump: the axis of a pi rotation is a convention, so no derivative exists)."""
    _, _, dir_err, up_err = solver.evaluate(q, cand)
    p = solver.problem
    return bool(np.all(np.where(p.has_direction[cand], dir_err, 0.0) < np.pi - 0.05)
                and np.all(np.where(p.has_up[cand], up_err, 0.0) < np.pi - 0.05))


def analytic_solver(robot, candidates, **kwargs) -> ReferenceSolver:
    settings_ = SolverSettings(**{"max_position_error": 0.03, **kwargs.pop("settings", {}),
                                  "jacobian": "analytic"})
    return ReferenceSolver(build_problem(robot, candidates, kwargs.get("active_dof_ids"), "cpu",
                                 kwargs.get("root_world_xform"), settings_))


@settings(PROFILE)
@given(sc=scenarios(max_candidates=3, mimic=False), seed=st.integers(0, 2**32 - 1))
def test_analytic_jacobian_is_the_derivative_of_the_residuals(sc, seed):
    """Random robots (revolute, continuous, prismatic joints; 1-3 TCPs with random mounts),
    targets (full, axis, position; every local-axes convention), active subsets, roots and
    weights, at the start state and at random states."""
    kwargs = dict(sc.kwargs)
    settings_ = {k: kwargs.pop(k) for k in list(kwargs) if k not in ("active_dof_ids", "root_world_xform")}
    solver = analytic_solver(sc.robot, sc.candidates(), settings=settings_, **kwargs)
    assert solver.analytic
    b = solver.problem.num_candidates
    cand = np.arange(b)
    rng = np.random.default_rng(seed)
    q = np.repeat(sc.start[None].astype(np.float64), 2 * b, axis=0)
    q[b:, solver.active] = random_in_limits(sc.robot, rng, b)[:, solver.active]
    cand = np.concatenate([cand, cand])
    assume(away_from_opposite(solver, q, cand))
    exact = solver.analytic_jacobian(q, cand)
    np.testing.assert_allclose(exact, central_difference(solver, q, cand), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["panda", "ur5", "dual_arm"])
def test_bundled_robots_match_central_differences_and_stay_near_the_forward_difference(name, request):
    robot = request.getfixturevalue(name)
    rng = np.random.default_rng(11)
    robot.joint_q[:] = mid_range(robot)
    goals, states = random_in_limits(robot, rng, 40), random_in_limits(robot, rng, 40)
    solver = analytic_solver(robot, [targets_at(robot, g) for g in goals])
    cand = np.arange(40)
    keep = np.array([away_from_opposite(solver, states[i:i + 1], cand[i:i + 1]) for i in cand])
    q, cand = states[keep], cand[keep]
    assert len(cand) >= 30
    exact = solver.analytic_jacobian(q, cand)
    np.testing.assert_allclose(exact, central_difference(solver, q, cand), rtol=1e-5, atol=1e-6)
    r = solver.evaluate(q, cand)[0]
    solver.analytic = False  # the spec's forward difference: O(eps) away
    forward = solver.jacobian(q, r, cand)
    scale = np.abs(forward).max()
    assert 1e-6 * scale < np.abs(exact - forward).max() < 2e-3 * scale
    if name == "dual_arm":  # the torso lift (prismatic) moves both TCPs without turning them
        lift = list(solver.active).index(robot.dof_id("torso_lift_joint"))
        for e in range(2):
            np.testing.assert_allclose(exact[:, lift, 9 * e:9 * e + 3], np.tile([0.0, 0.0, 1.0], (len(q), 1)),
                                       atol=1e-12)
            np.testing.assert_array_equal(exact[:, lift, 9 * e + 3:9 * e + 9], 0.0)


def test_parallel_axes_use_the_small_angle_branch(panda):
    """At the target state itself the Direction and Up errors are rounding-level (below
    axis_error's 1e-12 parallel threshold, so its small-angle branch runs); the derivative
    is still the central difference's."""
    q = mid_range(panda) + 0.2
    solver = analytic_solver(panda, [targets_at(panda, q)])
    cand = np.array([0])
    state = q[None].astype(np.float64)
    _, _, dir_err, up_err = solver.evaluate(state, cand)
    assert dir_err.max() < 1e-12 and up_err.max() < 1e-12
    np.testing.assert_allclose(solver.analytic_jacobian(state, cand), central_difference(solver, state, cand),
                               rtol=1e-5, atol=1e-6)


def test_tcp_joint_motions_are_the_pose_derivatives(dual_arm):
    rng = np.random.default_rng(5)
    q = random_in_limits(dual_arm, rng, 6)
    dofs = np.arange(dual_arm.num_dofs)
    rot, pos, angular, linear = dual_arm.tcp_joint_motions(q, dofs)
    ref_rot, ref_pos = dual_arm.tcp_poses(q)
    np.testing.assert_allclose(rot, ref_rot, atol=1e-12)
    np.testing.assert_allclose(pos, ref_pos, atol=1e-12)
    for i, d in enumerate(dofs):
        plus, minus = q.copy(), q.copy()
        plus[:, d] += H
        minus[:, d] -= H
        (r_p, p_p), (r_m, p_m) = dual_arm.tcp_poses(plus), dual_arm.tcp_poses(minus)
        np.testing.assert_allclose(linear[:, i], (p_p - p_m) / (2 * H), atol=1e-7)
        omega = (r_p - r_m) / (2 * H) @ np.swapaxes(rot, -1, -2)  # skew(angular velocity)
        np.testing.assert_allclose(angular[:, i], np.stack([omega[..., 2, 1], omega[..., 0, 2],
                                                            omega[..., 1, 0]], axis=-1), atol=1e-7)
        moves = dual_arm.dof_moves_tcp[d]
        assert np.all(linear[:, i, ~moves] == 0.0) and np.all(angular[:, i, ~moves] == 0.0)


_MIMIC_ARM = """<robot name='mimic_arm'>
  <link name='base'/><link name='l1'/><link name='l2'/><link name='tool'/>
  <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/><origin xyz='0 0 0.2'/>
    <axis xyz='0 0 1'/><limit lower='-2.8' upper='2.8' effort='1' velocity='1'/></joint>
  <joint name='j2' type='revolute'><parent link='l1'/><child link='l2'/><origin xyz='0 0 0.3'/>
    <axis xyz='0 1 0'/><limit lower='-1.7' upper='1.7' effort='1' velocity='1'/></joint>
  <joint name='j3' type='revolute'><parent link='l2'/><child link='tool'/><origin xyz='0.3 0 0'/>
    <axis xyz='0 1 0'/><mimic joint='j2' multiplier='-0.5' offset='0.1'/>
    <limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
</robot>"""


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_a_mimic_joint_on_a_tcp_chain_falls_back_to_finite_differences(backend):
    robot = RobotKinematics.from_urdf(_MIMIC_ARM, ["tool"])
    assert robot.mimic_on_tcp_chain
    with pytest.raises(RobotModelError, match="mimic"):
        robot.tcp_joint_motions(np.zeros((1, robot.num_dofs)), [0, 1])
    rng = np.random.default_rng(2)
    robot.joint_q[:] = mid_range(robot)
    tcp = robot.tcp_transforms(random_in_limits(robot, rng, 20))
    # position only: two coordinates cannot meet an orientation as well
    cands = [(DirectionUpTarget(0, t[0, :3, 3], None, None),) for t in tcp]
    fd, analytic = (robo_solve_ik_direction_up_multi_batch(robot, cands, max_position_error=0.03, jacobian=j,
                                                           backend=backend) for j in JACOBIANS)
    assert fd.success.sum() >= 10
    np.testing.assert_array_equal(analytic.joint_q, fd.joint_q)
    assert analytic.stop_reason == fd.stop_reason


def test_jacobian_setting_is_validated_and_finite_differences_stay_the_default():
    assert SolverSettings(max_position_error=0.03).jacobian == "finite_difference"
    assert SolverSettings(max_position_error=0.03, jacobian="analytic").jacobian == "analytic"
    with pytest.raises(InputValidationError, match="jacobian") as info:
        SolverSettings(max_position_error=0.03, jacobian="exact")
    assert info.value.field == "jacobian"
    with pytest.raises(InputTypeError, match="jacobian"):
        SolverSettings(max_position_error=0.03, jacobian=1)


def test_analytic_solves_reach_what_finite_differences_reach(panda):
    """Same targets, both Jacobians, both backends: successes are real (the solver's own
    tolerance check on the returned joints) and about as frequent."""
    rng = np.random.default_rng(8)
    panda.joint_q[:] = mid_range(panda)
    cands = [targets_at(panda, g) for g in random_in_limits(panda, rng, 60)]
    rates = {}
    for jacobian in JACOBIANS:
        for backend in ("numpy", "auto"):
            settings_ = SolverSettings(max_position_error=0.03, max_step_norm=1.0, jacobian=jacobian)
            problem = build_problem(panda, cands, None, "cpu", None, settings_)
            out = solve_problem(problem, backend=backend)
            ok = out.success == 1
            assert np.all(out.position_error[ok] < 1e-3)
            rates[jacobian, backend] = ok.mean()
    assert rates["analytic", "numpy"] == rates["analytic", "auto"]
    assert abs(rates["analytic", "numpy"] - rates["finite_difference", "numpy"]) <= 0.1
    assert rates["analytic", "numpy"] > 0.3
