"""The search with a collision scene (core/search.py ``collision_scene``): collision-free
successes, the dual-arm case shown with coal, the "in_collision" stop reason, nothing changed
without a scene."""

from __future__ import annotations

import numpy as np
import pytest

from direction_up_ik import (CollisionScene, DirectionUpTarget, InputValidationError, Obstacle,
                             robo_search_ik_direction_up)
from direction_up_ik.core.kinematics import mid_range, random_in_limits
from direction_up_ik.core.result import STOP_IN_COLLISION
from direction_up_ik.core.rotations import make_transform
from direction_up_ik.robots import bundled_robot, load_robot
from helpers import targets_at

coal = pytest.importorskip("coal", reason="coal (requirements/dev.txt) is the oracle of these tests")
from collision_oracle import oracle_pair_distances, urdf_shapes  # noqa: E402

#: A collision-free dual_arm_torso state whose left TCP pose the least-motion search (no scene,
#: from mid-range) reaches with the left forearm inside the chest.
ARM_THROUGH_CHEST = np.array([0.0326, 1.3142, -0.4838, 0.0593, -2.4898, -0.6157, -2.1397, -1.1737,
                              -2.3205, -2.475, 0.3941, -0.123, -1.8033, 1.9302, 0.3838, -1.9657])


def scene_of(robot, name, **kwargs) -> CollisionScene:
    return CollisionScene.from_urdf(robot, bundled_robot(name).urdf_path(), **kwargs)


def at_mid_range(name):
    robot = load_robot(name)
    robot.joint_q[:] = mid_range(robot)
    robot.update_fk()
    return robot


def test_arm_through_the_chest_is_solved_collision_free():
    robot = at_mid_range("dual_arm_torso")
    scene = scene_of(robot, "dual_arm_torso")
    shapes = urdf_shapes(bundled_robot("dual_arm_torso").urdf_path())
    assert scene.check(ARM_THROUGH_CHEST).collision_free[0]  # the pose has a collision-free solution
    candidates = [targets_at(robot, ARM_THROUGH_CHEST)]
    plain = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, num_seeds=4, time_budget=1.0)
    assert plain.result.success[0] == 1
    oracle = oracle_pair_distances(robot, scene, shapes, plain.result.joint_q[0].astype(np.float64))
    worst = scene.body_pairs[int(np.argmin(oracle))]
    assert oracle.min() < -0.01 and "chest_link" in worst  # coal: an arm passes through the chest
    found = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, num_seeds=4, time_budget=1.0,
                                        collision_scene=scene)
    assert found.result.success[0] == 1 and found.clearance[0] > 0.0
    oracle = oracle_pair_distances(robot, scene, shapes, found.result.joint_q[0].astype(np.float64))
    assert oracle.min() >= found.clearance[0] - 1e-7 > 0.0
    assert found.result.cost[0] >= plain.result.cost[0]  # the collision-free answer moves more


def test_every_success_is_collision_free_and_reports_its_clearance():
    robot = at_mid_range("panda_like")
    table = Obstacle.box((0.7, 1.2, 0.1), make_transform(np.eye(3), (0.65, 0.0, 0.0)), name="table")
    scene = scene_of(robot, "panda_like", obstacles=[table], padding=0.005)
    rng = np.random.default_rng(11)
    states = random_in_limits(robot, rng, 60)
    candidates = [targets_at(robot, q) for q in states]
    found = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, num_seeds=4, max_rounds=3,
                                        collision_scene=scene)
    report = scene.check(found.result.joint_q)
    np.testing.assert_allclose(found.clearance, report.clearance)
    ok = found.result.success == 1
    assert ok.sum() >= 10
    assert report.collision_free[ok].all()
    plain = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, num_seeds=4, max_rounds=3)
    redone = (plain.result.success == 1) & ~scene.check(plain.result.joint_q).collision_free
    assert redone.any()  # so the answers of the second pass are among those compared below
    # The pair at each answer's clearance, as a check of the answers gives it (the node reports
    # it without checking again).
    assert found.closest_pair == report.closest_pair
    assert all(pair != ("", "") for pair in found.closest_pair)
    again = found.collision_report()
    np.testing.assert_array_equal(again.collision_free, report.collision_free)
    assert again.closest_pair == report.closest_pair


def test_a_target_inside_an_obstacle_fails_in_collision():
    robot = at_mid_range("panda_like")
    tcp = robot.tcp_world_xforms[0]
    block = Obstacle.box((0.3, 0.3, 0.3), make_transform(np.eye(3), tcp[:3, 3]), name="block")
    scene = scene_of(robot, "panda_like", obstacles=[block])
    target = DirectionUpTarget(0, tcp[:3, 3], tcp[:3, 2], tcp[:3, 1], None, None)
    found = robo_search_ik_direction_up(robot, [(target,)], max_position_error=0.03, num_seeds=4, max_rounds=2,
                                        collision_scene=scene)
    assert found.result.success[0] == 0 and found.result.best_index is None
    assert found.result.stop_reason[0] == STOP_IN_COLLISION and found.clearance[0] < 0.0
    assert "block" in found.closest_pair[0]
    assert found.starts[0] > 1  # the seeds went on while the solutions collided


def test_without_a_scene_nothing_changes():
    robot = at_mid_range("dual_arm_torso")
    states = random_in_limits(robot, np.random.default_rng(2), 8)
    candidates = [targets_at(robot, q) for q in states]
    a = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, max_rounds=2)
    b = robo_search_ik_direction_up(robot, candidates, max_position_error=0.03, max_rounds=2, collision_scene=None)
    np.testing.assert_array_equal(a.result.joint_q, b.result.joint_q)
    assert a.result.stop_reason == b.result.stop_reason and a.rounds == b.rounds
    assert np.isnan(a.clearance).all() and a.clearance.shape == (8,)
    assert a.closest_pair == (("", ""),) * 8 and not a.collision_report().collision_free.any()
    one = robo_search_ik_direction_up(robot, [targets_at(robot, states[0], ee_ids=[0])], max_position_error=0.03)
    assert one.closest_pair == (("", ""),) and np.isnan(one.clearance).all()


def test_a_scene_of_another_robot_is_refused():
    robot = at_mid_range("panda_like")
    other = scene_of(load_robot("ur5_like"), "ur5_like")
    target = (DirectionUpTarget(0, robot.tcp_world_xforms[0][:3, 3], None, None),)
    with pytest.raises(InputValidationError, match="collision_scene: was built for another robot model"):
        robo_search_ik_direction_up(robot, [target], max_position_error=0.03, collision_scene=other)
    with pytest.raises(InputValidationError, match="collision_scene: must be a CollisionScene or None"):
        robo_search_ik_direction_up(robot, [target], max_position_error=0.03, collision_scene="table")
