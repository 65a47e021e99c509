"""``~/obstacles`` messages and the parameter obstacles -> the node's obstacle set, without a node
(direction_up_ik.ros.obstacles): frames, shapes, add / replace / remove / clear, and a bad message
that leaves the obstacles in force unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("shape_msgs.msg", reason="needs shape_msgs (requirements/ros.txt)")
from shape_msgs.msg import SolidPrimitive  # noqa: E402

from direction_up_ik.core.rotations import make_transform, rpy_to_matrix  # noqa: E402
from direction_up_ik.msg import CollisionObstacle  # noqa: E402
from direction_up_ik.ros.config import OBSTACLE_SHAPES, ObstacleConfig  # noqa: E402
from direction_up_ik.ros.obstacles import (MAX_OBSTACLES, ObstacleError, ObstacleSet, entry_from_config,  # noqa: E402
                                           entry_from_message)

TURN = make_transform(rpy_to_matrix((0.0, 0.0, math.pi / 2)), (0.1, 0.2, 0.3))  # root -> "torso"
FRAMES = {"": np.eye(4), "base_link": np.eye(4), "torso": TURN}


def message(obstacle_id="box1", shape=SolidPrimitive.BOX, dimensions=(0.2, 0.3, 0.4), xyz=(0.5, 0.0, 1.0),
            quaternion=(0.0, 0.0, 0.0, 1.0), frame_id="", operation=CollisionObstacle.ADD):
    msg = CollisionObstacle(id=obstacle_id, operation=operation)
    msg.header.frame_id = frame_id
    msg.shape.type = shape
    msg.shape.dimensions = [float(d) for d in dimensions]
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = xyz
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = quaternion
    return msg


def test_message_constants_are_the_ones_the_module_uses():
    """The module reads messages duck-typed: its constants must be the messages'."""
    from direction_up_ik.ros import obstacles
    assert (obstacles.ADD, obstacles.REMOVE, obstacles.CLEAR) == (
        CollisionObstacle.ADD, CollisionObstacle.REMOVE, CollisionObstacle.CLEAR)
    assert {name: code for name, (code, _) in OBSTACLE_SHAPES.items()} == {
        "box": SolidPrimitive.BOX, "sphere": SolidPrimitive.SPHERE, "cylinder": SolidPrimitive.CYLINDER}
    assert OBSTACLE_SHAPES["cylinder"][1][SolidPrimitive.CYLINDER_HEIGHT] == "height"
    assert OBSTACLE_SHAPES["cylinder"][1][SolidPrimitive.CYLINDER_RADIUS] == "radius"


def test_a_pose_in_a_frame_fixed_to_the_root_is_moved_into_the_root_frame():
    half = math.sqrt(0.5)
    entry = entry_from_message(message(frame_id="torso", quaternion=(0.0, 0.0, 2 * half, 2 * half)), FRAMES)
    # (0.5, 0, 1) in "torso" (turned 90 deg about z, at (0.1, 0.2, 0.3)) is (0.1, 0.7, 1.3) in the root.
    assert entry.pose[:3, 3] == pytest.approx([0.1, 0.7, 1.3])
    # The quaternion (normalised: 90 deg about z) composes with the frame's 90 deg: 180 deg about z.
    assert entry.pose[:3, :3] == pytest.approx(rpy_to_matrix((0.0, 0.0, math.pi)), abs=1e-12)
    assert (entry.shape, entry.dimensions, entry.fixed) == ("box", (0.2, 0.3, 0.4), False)
    same = entry_from_message(message(frame_id="base_link"), FRAMES)
    assert same.pose == pytest.approx(entry_from_message(message(), FRAMES).pose)


def test_parameter_obstacles_are_fixed_entries():
    entry = entry_from_config(ObstacleConfig("table", "box", (1.2, 0.8, 0.05), (0.6, 0.0, 0.7), (0.0, 0.0, 0.3)))
    assert entry.fixed and entry.pose == pytest.approx(make_transform(rpy_to_matrix((0.0, 0.0, 0.3)),
                                                                      (0.6, 0.0, 0.7)))


@pytest.mark.parametrize("changes, field, words", [
    ({"obstacle_id": ""}, "id", "must not be empty"),
    ({"frame_id": "left_hand_link"}, "header.frame_id", "cannot resolve frame 'left_hand_link' without tf"),
    ({"shape": SolidPrimitive.CONE, "dimensions": (0.2, 0.1)}, "shape.type", "unsupported type 4"),
    ({"shape": SolidPrimitive.SPHERE}, "shape.dimensions", "a sphere needs 1 value(s) [radius], got 3"),
    ({"shape": SolidPrimitive.CYLINDER, "dimensions": (0.3, -0.1)}, "shape.dimensions",
     "finite and positive, got radius -0.1"),
    ({"dimensions": (0.2, float("nan"), 0.4)}, "shape.dimensions", "got y nan"),
    ({"xyz": (0.5, float("inf"), 1.0)}, "pose", "every component must be finite"),
    ({"quaternion": (0.0, 0.0, 0.0, 0.0)}, "pose", "the quaternion must not be zero"),
])
def test_bad_messages_name_the_field(changes, field, words):
    with pytest.raises(ObstacleError) as info:
        entry_from_message(message(**changes), FRAMES)
    assert info.value.field == field and words in str(info.value), str(info.value)


def test_add_replace_remove_clear_and_bad_messages_keep_the_obstacles():
    table = entry_from_config(ObstacleConfig("table", "box", (1.2, 0.8, 0.05), (0.6, 0.0, 0.7), (0.0, 0.0, 0.0)))
    obstacles = ObstacleSet((table,))
    assert [e.id for e in obstacles.entries()] == ["table"] and obstacles.version == 0
    assert obstacles.apply(message("a"), FRAMES).startswith("added box 'a'")
    assert obstacles.apply(message("b", SolidPrimitive.SPHERE, (0.1,)), FRAMES).startswith("added sphere 'b'")
    assert obstacles.apply(message("a", xyz=(0.0, 0.5, 1.0)), FRAMES).startswith("replaced box 'a'")
    assert [e.id for e in obstacles.entries()] == ["table", "a", "b"]
    assert obstacles.entries()[1].pose[:3, 3] == pytest.approx([0.0, 0.5, 1.0])
    version = obstacles.version
    assert version == 3
    before = [(e.id, e.pose.tobytes()) for e in obstacles.entries()]
    for bad in (message("a", dimensions=(0.1, 0.1)), message("table"),
                message("table", operation=CollisionObstacle.REMOVE), message("c", operation=7),
                message("c", frame_id="nowhere")):
        with pytest.raises(ObstacleError):
            obstacles.apply(bad, FRAMES)
        assert [(e.id, e.pose.tobytes()) for e in obstacles.entries()] == before
        assert obstacles.version == version
    with pytest.raises(ObstacleError, match="fixed obstacle of parameter collision.obstacles"):
        obstacles.apply(message("table", operation=CollisionObstacle.REMOVE), FRAMES)
    assert "no such obstacle" in obstacles.apply(message("zzz", operation=CollisionObstacle.REMOVE), FRAMES)
    assert obstacles.version == version
    assert obstacles.apply(message("b", operation=CollisionObstacle.REMOVE), FRAMES) == "removed 'b'"
    assert [e.id for e in obstacles.entries()] == ["table", "a"]
    assert "cleared 1 obstacle(s)" in obstacles.apply(message("", operation=CollisionObstacle.CLEAR), FRAMES)
    assert [e.id for e in obstacles.entries()] == ["table"] and obstacles.version == version + 2


def test_the_number_of_obstacles_is_bounded(monkeypatch):
    from direction_up_ik.ros import obstacles as module
    monkeypatch.setattr(module, "MAX_OBSTACLES", 2)
    obstacles = ObstacleSet()
    obstacles.apply(message("a"), FRAMES)
    obstacles.apply(message("b"), FRAMES)
    with pytest.raises(ObstacleError, match="at most 2 obstacles"):
        obstacles.apply(message("c"), FRAMES)
    assert obstacles.apply(message("b", xyz=(0.0, 0.0, 0.0)), FRAMES).startswith("replaced")  # no new one
    assert len(obstacles) == 2 and MAX_OBSTACLES >= 100


def test_an_obstacle_may_not_take_a_robot_link_s_name():
    obstacles = ObstacleSet(reserved=("base_link", "torso"))
    with pytest.raises(ObstacleError, match="'torso' is a link of the robot"):
        obstacles.apply(message("torso"), FRAMES)
    assert len(obstacles) == 0 and obstacles.version == 0
