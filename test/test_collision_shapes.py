"""direction_up_ik.collision_shapes: the shapes drawn for a collision scene are the ones it checks."""

from __future__ import annotations

import numpy as np
import pytest

from direction_up_ik import CollisionScene, Obstacle
from direction_up_ik.collision_shapes import obstacle_shapes, robot_shapes
from direction_up_ik.core.rotations import make_transform, rpy_to_matrix
from direction_up_ik.robots import bundled_robot, load_robot

from helpers import mid_range

URDF = """<robot name="two">
  <link name="base"><collision><geometry><box size="0.4 0.4 0.1"/></geometry></collision></link>
  <link name="arm">
    <collision><origin xyz="0 0 0.25"/><geometry><cylinder radius="0.05" length="0.5"/></geometry></collision>
    <collision><origin xyz="0 0 0.5"/><geometry><sphere radius="0.07"/></geometry></collision>
  </link>
  <link name="hand"><collision><geometry><box size="0.1 0.06 0.04"/></geometry></collision></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.05"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="j2" type="fixed"><parent link="arm"/><child link="hand"/><origin xyz="0 0 0.6"/></joint>
</robot>"""


def test_robot_shapes_follow_the_joints_and_leave_out_box_covers():
    robot = load_robot_from_text()
    scene = CollisionScene.from_urdf(robot, URDF, padding=0.01,
                                     obstacles=[Obstacle.box((1, 1, 0.1), make_transform(None, (0, 0, -1)))])
    parts, _, _ = scene.arrays()
    assert len(parts.cap_body) > 2  # the scene covered a box with capsules (box against box)
    for angle in (0.0, 0.7):
        shapes = robot_shapes(scene, np.array([angle]))
        kinds = sorted((s.body, s.kind) for s in shapes)
        assert kinds == [("arm", "capsule"), ("arm", "sphere"), ("base", "box"), ("hand", "box")]
        by = {(s.body, s.kind): s for s in shapes}
        turn = rpy_to_matrix((0.0, angle, 0.0))
        np.testing.assert_allclose(by["arm", "capsule"].pose[:3, 3], turn @ [0, 0, 0.25] + [0, 0, 0.05], atol=1e-12)
        np.testing.assert_allclose(abs(by["arm", "capsule"].pose[:3, 2] @ turn[:, 2]), 1.0, atol=1e-12)
        assert by["arm", "capsule"].size == pytest.approx((0.06, 0.5))   # radius + padding, segment
        assert by["arm", "sphere"].size == pytest.approx((0.08,))
        assert by["hand", "box"].size == pytest.approx((0.12, 0.08, 0.06))
        np.testing.assert_allclose(by["hand", "box"].pose[:3, 3], turn @ [0, 0, 0.6] + [0, 0, 0.05], atol=1e-12)


def load_robot_from_text():
    from direction_up_ik.core import RobotKinematics
    return RobotKinematics.from_urdf(URDF, ["hand"])


def test_obstacle_shapes_keep_names_sizes_and_poses():
    pose = make_transform(rpy_to_matrix((0.1, 0.2, 0.3)), (1.0, 2.0, 3.0))
    shapes = obstacle_shapes([Obstacle.box((1, 2, 3), pose, name="table"), Obstacle.sphere(0.2, pose),
                              Obstacle.cylinder(0.1, 0.5, pose, name="post")])
    assert [(s.body, s.kind, s.size) for s in shapes] == [
        ("table", "box", (1.0, 2.0, 3.0)), ("obstacle_1", "sphere", (0.2,)), ("post", "cylinder", (0.1, 0.5))]
    assert all(np.array_equal(s.pose, pose) for s in shapes)


def test_every_link_with_geometry_of_the_dual_arm_is_drawn():
    robot = load_robot("dual_arm_torso")
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path())
    shapes = robot_shapes(scene, mid_range(robot))
    assert {s.body for s in shapes} == set(scene.link_bodies)
    assert all(np.all(np.isfinite(s.pose)) and min(s.size) > 0 for s in shapes)
