"""Periodic joints whose bounds span more than a turn (``periodic_joints="nearest_turn"``, the
search's default): an answer never leaves a joint whole turns away from an in-bound value
of the same pose nearer the start, and its cost and errors are those of the answer returned."""

from __future__ import annotations

import numpy as np
import pytest

from direction_up_ik import robo_search_ik_direction_up, robo_solve_ik_direction_up_multi_batch
from direction_up_ik.core.backend import solve_problem
from direction_up_ik.core.problem import TURN, build_problem
from direction_up_ik.core.settings import SEARCH_SOLVER_DEFAULTS, solver_settings
from helpers import random_configurations, reachable_candidates, targets_at

#: float32 answers: a whole turn added to a value rounds by up to half an ulp of |q| <= 4 pi.
ROUNDING = 1e-6


def nearer_equivalents(problem, q: np.ndarray) -> list:
    """(row, coordinate) pairs of successful answers ``q`` (B, D) where an in-bound value whole
    turns away lies nearer the start than the answer's."""
    columns = problem.active[problem.turn_joints]
    q0, lo, hi = problem.q_initial, problem.lower, problem.upper
    found = []
    for row in range(len(q)):
        for d in columns:
            value = float(q[row, d])
            for turns in (-2, -1, 1, 2):
                other = value + TURN * turns
                if lo[d] <= other <= hi[d] and abs(other - q0[d]) < abs(value - q0[d]) - ROUNDING:
                    found.append((row, int(d)))
    return found


def errors_by_fk(problem, q: np.ndarray) -> np.ndarray:
    """(B,) largest position error (m) of each answer's TCPs from the targets, by FK here."""
    _, pos = problem.robot.tcp_poses(q.astype(np.float64), problem.root_world_xform)
    return np.max(np.linalg.norm(pos[:, problem.ee_ids] - problem.target_position, axis=-1), axis=-1)


@pytest.mark.parametrize("robot_name, kind", [("ur5", "bounded +-2 pi"), ("dual_arm", "continuous")])
def test_no_answer_of_the_search_has_an_in_bound_equivalent_nearer_the_start(request, robot_name, kind):
    robot = request.getfixturevalue(robot_name)
    rng = np.random.default_rng(23)
    problem = None
    for start_row in range(2):
        robot.joint_q[:] = random_configurations(robot, rng, 1)[0] if start_row else 0.0
        goals = random_configurations(robot, rng, 120)
        candidates = reachable_candidates(robot, goals)
        settings = solver_settings(max_position_error=0.03, **SEARCH_SOLVER_DEFAULTS)
        problem = build_problem(robot, candidates, None, "cpu", None, settings)
        assert len(problem.turn_joints) > 0, f"the {kind} robot has joints spanning more than a turn"
        found = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, num_seeds=4,
                                            max_rounds=5).result
        ok = found.success == 1
        assert ok.mean() > 0.95
        q = found.joint_q[ok]
        assert nearer_equivalents(problem.select(np.flatnonzero(ok)), q) == []
        # The cost and the errors are those of the answer returned.
        delta = q[:, problem.active].astype(np.float64) - problem.q_initial[problem.active]
        np.testing.assert_allclose(found.cost[ok], np.sum(delta * delta, axis=1), rtol=1e-12)
        np.testing.assert_allclose(found.position_error[ok].max(axis=1),
                                   errors_by_fk(problem.select(np.flatnonzero(ok)), q), atol=1e-9)
        assert np.all(found.position_error[ok] < 1e-3)


def test_the_same_search_as_solved_leaves_whole_turns_on_the_ur5(ur5):
    """The defect the setting fixes is real on this robot: with ``as_solved`` some answers keep a
    joint a whole turn from a nearer equivalent (so the test above can fail)."""
    rng = np.random.default_rng(23)
    ur5.joint_q[:] = 0.0
    candidates = reachable_candidates(ur5, random_configurations(ur5, rng, 120))
    found = robo_search_ik_direction_up(ur5, candidates, max_position_error=0.03, num_seeds=4, max_rounds=5,
                                        periodic_joints="as_solved").result
    ok = np.flatnonzero(found.success == 1)
    problem = build_problem(ur5, candidates, None, "cpu", None, solver_settings(max_position_error=0.03))
    assert len(nearer_equivalents(problem.select(ok), found.joint_q[ok])) > 0


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_solution_found_a_turn_away_is_returned_at_the_nearer_value(ur5, backend):
    """Starts at the goal plus or minus a whole turn on every wide joint converge at once; the
    answer is the goal's value (within float32 rounding), with its errors re-evaluated."""
    rng = np.random.default_rng(5)
    ur5.joint_q[:] = 0.0
    goals = random_configurations(ur5, rng, 24) * 0.4  # within +-2.5 rad: a turn fits either side
    candidates = reachable_candidates(ur5, goals)
    settings = solver_settings(max_position_error=0.03, periodic_joints="nearest_turn")
    problem = build_problem(ur5, candidates, None, "cpu", None, settings)
    columns = problem.active[problem.turn_joints]
    starts = goals.astype(np.float32).astype(np.float64)
    starts[:, columns] += TURN * np.where(starts[:, columns] > 0, -1.0, 1.0)
    found = solve_problem(problem, starts, backend=backend)
    assert found.backend == backend
    assert np.all(found.success == 1) and np.all(found.iterations == 0)
    np.testing.assert_allclose(found.joint_q[:, columns], goals[:, columns], atol=ROUNDING)
    assert np.all(found.position_error < 1e-5)
    as_solved = solve_problem(build_problem(ur5, candidates, None, "cpu", None,
                                            settings.replace(periodic_joints="as_solved")),
                              starts, backend=backend)
    assert np.all(np.abs(as_solved.joint_q[:, columns] - goals[:, columns]) > 6.0)


def test_both_backends_move_the_same_joints_to_the_same_values(dual_arm):
    rng = np.random.default_rng(9)
    dual_arm.joint_q[:] = random_configurations(dual_arm, rng, 1)[0]
    goals = random_configurations(dual_arm, rng, 40)
    candidates = reachable_candidates(dual_arm, goals)
    settings = solver_settings(max_position_error=0.03, periodic_joints="nearest_turn")
    problem = build_problem(dual_arm, candidates, None, "cpu", None, settings)
    columns = problem.active[problem.turn_joints]
    starts = goals.copy()
    starts[:, columns] += TURN * rng.integers(-1, 2, (len(goals), len(columns)))
    reference = solve_problem(problem, starts, backend="numpy")
    compiled = solve_problem(problem, starts, backend="numba")
    assert reference.success.sum() > 30
    moved = np.any(np.abs(reference.joint_q[:, columns] - starts[:, columns]) > 6.0, axis=1)
    assert moved.sum() > 20  # most rows had a joint brought back a turn
    np.testing.assert_array_equal(reference.success, compiled.success)
    np.testing.assert_array_equal(reference.joint_q, compiled.joint_q)
    # Sums of squares may differ in their last bit (the kernel's summation order).
    np.testing.assert_allclose(reference.cost, compiled.cost, rtol=1e-12)
    np.testing.assert_allclose(reference.position_error, compiled.position_error, rtol=1e-9, atol=1e-15)


def test_the_spec_solve_keeps_the_iterations_final_state_by_default(ur5):
    """The spec's joint_q is its iteration's final state: ``as_solved`` by default, and the
    same answers as before this setting existed (``nearest_turn`` is one keyword away)."""
    rng = np.random.default_rng(3)
    ur5.joint_q[:] = 0.0
    candidates = [targets_at(ur5, q) for q in random_configurations(ur5, rng, 30) * 0.3]
    spec = robo_solve_ik_direction_up_multi_batch(ur5, candidates, max_position_error=0.03)
    explicit = robo_solve_ik_direction_up_multi_batch(ur5, candidates, max_position_error=0.03,
                                                      periodic_joints="as_solved")
    np.testing.assert_array_equal(spec.joint_q, explicit.joint_q)
    np.testing.assert_array_equal(spec.cost, explicit.cost)
