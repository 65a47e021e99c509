"""Pictures without RViz (direction_up_ik.plot): headless PNGs that show something."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from matplotlib.image import imread  # noqa: E402

from direction_up_ik import DirectionUpTarget  # noqa: E402
from direction_up_ik.plot import link_parents, plot_pose, plot_solved_example, target_errors  # noqa: E402
from direction_up_ik.robots import bundled_robot, load_robot  # noqa: E402

from helpers import mid_range  # noqa: E402


def image_stats(path):
    """(height, width, fraction of non-white pixels, distinct coarse colours, has red/green/blue)."""
    rgb = imread(str(path))[..., :3]
    if rgb.dtype != np.float32 and rgb.dtype != np.float64:
        rgb = rgb / 255.0
    ink = np.any(rgb < 0.94, axis=-1)
    coarse = {tuple(c) for c in (np.round(rgb[ink] * 4) / 4).reshape(-1, 3)}
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    hues = {"red": np.any((r > 0.7) & (g < 0.3) & (b < 0.3)),
            "green": np.any((g > 0.5) & (r < 0.35) & (b < 0.35)),
            "blue": np.any((b > 0.6) & (r < 0.3) & (g < 0.6))}
    return rgb.shape[0], rgb.shape[1], float(ink.mean()), len(coarse), hues


def test_pose_picture_is_written_and_shows_robot_frames_and_targets(tmp_path):
    robot = load_robot("dual_arm_torso")
    q = mid_range(robot)
    goal = robot.tcp_transforms(np.clip(q + 0.1, robot.lower_limits, robot.upper_limits))
    axis_target = DirectionUpTarget(1, goal[1, :3, 3], goal[1, :3, 2], None, None, None)
    out = plot_pose(robot, q, tmp_path / "sub" / "pose.png", [(0, goal[0]), axis_target],
                    ee_names=["left", "right"])
    assert out.is_file() and out.stat().st_size > 30_000
    height, width, ink, colours, hues = image_stats(out)
    assert (height, width) == (792, 1540)
    assert 0.02 < ink < 0.6, ink
    assert colours >= 8, colours
    assert all(hues.values()), hues


def test_plot_without_targets_and_a_custom_urdf(tmp_path):
    robot = load_robot("ur5_like")
    out = plot_pose(robot, np.zeros(robot.num_dofs), tmp_path / "ur5.png",
                    urdf=bundled_robot("ur5_like").urdf_path(), title="UR5 at zero")
    _, _, ink, colours, _ = image_stats(out)
    assert ink > 0.02 and colours >= 5


def test_unknown_robot_needs_its_urdf(tmp_path):
    from direction_up_ik.core import RobotKinematics
    urdf = bundled_robot("panda_like").urdf_path().read_text().replace('name="panda_like"', 'name="mine"', 1)
    robot = RobotKinematics.from_urdf(urdf, ["panda_hand"])
    assert robot.robot_name == "mine"
    with pytest.raises(ValueError, match="urdf"):
        plot_pose(robot, np.zeros(robot.num_dofs), tmp_path / "x.png")
    assert plot_pose(robot, np.zeros(robot.num_dofs), tmp_path / "x.png", urdf=urdf).is_file()


def test_link_tree_and_errors():
    parents = link_parents(bundled_robot("dual_arm_torso").urdf_path())
    assert parents["left_hand_link"] == "left_wrist_link" and "base_link" not in parents
    robot = load_robot("panda_like")
    tcp = robot.tcp_transforms(mid_range(robot))[0]
    full = DirectionUpTarget(0, tcp[:3, 3], tcp[:3, 2], tcp[:3, 1], None, None)
    assert target_errors(tcp, full) == pytest.approx((0.0, 0.0, 0.0), abs=1e-7)
    shifted = DirectionUpTarget(0, tcp[:3, 3] + (0.0, 0.0, 0.01), tcp[:3, 0], None)
    position, direction, up = target_errors(tcp, shifted)
    assert position == pytest.approx(0.01) and direction == pytest.approx(0.0, abs=1e-7) and math.isnan(up)


def test_solved_example_title_reports_success(tmp_path):
    out = plot_solved_example("panda_like", tmp_path / "panda.png")
    assert out.stat().st_size > 30_000


def test_collision_bodies_and_obstacles_are_drawn(tmp_path):
    """With a collision scene: the robot's bodies (grey) and an obstacle (brown) appear, a body in
    collision turns red, and the picture differs from the one without the scene."""
    from direction_up_ik import CollisionScene, Obstacle
    from direction_up_ik.core.rotations import make_transform
    robot = load_robot("dual_arm_torso")
    q = mid_range(robot)
    hand = robot.link_transforms(q, ["left_hand_link"])[0, :3, 3]
    crate = Obstacle.box((0.2, 0.2, 0.2), make_transform(None, hand), name="crate")
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path(), obstacles=[crate])
    assert not scene.check(q).collision_free[0]
    plain = plot_pose(robot, q, tmp_path / "plain.png")
    drawn = plot_pose(robot, q, tmp_path / "scene.png", collision_scene=scene)
    assert image_stats(drawn)[2] > image_stats(plain)[2] * 1.2  # the bodies add ink

    def count(path, colour):
        r, g, b = np.moveaxis(imread(str(path))[..., :3], -1, 0)
        if colour == "brown":  # OBSTACLE_COLOUR over white and grey
            return int(((r > 0.45) & (r < 0.8) & (g > 0.3) & (g < 0.6) & (b > 0.25) & (b < 0.55) & (r - b > 0.1)).sum())
        return int(((r > 0.6) & (r - g > 0.25) & (r - b > 0.25)).sum())  # red: x axes, colliding bodies
    assert count(drawn, "brown") > 500 and count(plain, "brown") < 50
    scene.set_obstacles([Obstacle.box((0.2, 0.2, 0.2), make_transform(None, hand + (0.0, 0.6, 0.0)))])
    apart = plot_pose(robot, q, tmp_path / "apart.png", collision_scene=scene)
    assert count(drawn, "red") > count(apart, "red") + 200  # the colliding hand
