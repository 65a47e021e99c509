"""``direction_up_ik_node`` with collisions (issue 24): ``~/solve`` answers collision-free with the
clearance, ``IN_COLLISION`` when every solution collides, ``~/obstacles`` add / remove / clear and
bad messages, the ``collision.*`` parameters (live and at start-up), the GetPositionIK bridge's
``avoid_collisions`` and marker drags into an obstacle. Real rclpy, as in test_node.py."""

from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("shape_msgs.msg", reason="needs shape_msgs (requirements/ros.txt)")

from shape_msgs.msg import SolidPrimitive  # noqa: E402

from direction_up_ik import CollisionScene, Obstacle  # noqa: E402
from direction_up_ik.core.rotations import make_transform  # noqa: E402
from direction_up_ik.groups import MoveItErrorCode  # noqa: E402
from direction_up_ik.msg import CollisionObstacle  # noqa: E402
from direction_up_ik.robots import bundled_robot, load_robot  # noqa: E402
from direction_up_ik.ros.interactive_markers import matrix_to_pose  # noqa: E402
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from helpers import count_collision_checks, mid_range  # noqa: E402
from node_harness import (CONFIG_DIR, TIMEOUT, assert_exit_1_with_one_line, assert_reaches,  # noqa: E402
                          candidate_at, request, run_bad_configs, wait_until)

Response = SolveDirectionUpIK.Response
MODEL = load_robot("dual_arm_torso")
START = mid_range(MODEL)
#: A dual-arm goal near START whose least-motion solution the tests block with an obstacle.
GOAL = np.clip(START + np.random.default_rng(1).uniform(-0.4, 0.4, MODEL.num_dofs),
               MODEL.lower_limits, MODEL.upper_limits)


def obstacle_msg(obstacle_id, shape=SolidPrimitive.SPHERE, dimensions=(0.06,), xyz=(0.0, 0.0, 0.0),
                 operation=CollisionObstacle.ADD, frame_id=""):
    msg = CollisionObstacle(id=obstacle_id, operation=operation)
    msg.header.frame_id = frame_id
    msg.shape.type = shape
    msg.shape.dimensions = [float(d) for d in dimensions]
    msg.pose = matrix_to_pose(make_transform(None, xyz))
    return msg


class Obstacles:
    """A ``~/obstacles`` publisher of a node under test; :meth:`send` waits until the node has
    handled the message (its obstacle set changed) when ``changes``."""

    def __init__(self, ros, node) -> None:
        self.node = node
        self.pub = ros.client_node.create_publisher(CollisionObstacle, f"{node.fqn}/obstacles", 10)
        wait_until(lambda: self.pub.get_subscription_count() >= 1, what="~/obstacles to match")

    def send(self, msg, changes: bool = True) -> None:
        before = self.node.node.obstacles_version
        self.pub.publish(msg)
        if changes:
            wait_until(lambda: self.node.node.obstacles_version > before, what="the obstacle change")

    def ids(self):
        return [e.id for e in self.node.node.obstacles()]


def dual_node(ros, **params):
    node = ros.start_node("dual_arm_torso", params=params)
    node.publish_full_state(START)
    return node


def goal_request(**overrides):
    req = request(candidate_at(MODEL, GOAL, ["left", "right"]))
    req.overrides.time_budget = overrides.pop("time_budget", 30.0)  # a hang catcher; stops at a success
    for name, value in overrides.items():
        setattr(req.overrides, name, value)
    return req


def reference_scene(obstacles=()):
    return CollisionScene.from_urdf(MODEL, bundled_robot("dual_arm_torso").urdf_path(), obstacles=obstacles)


# ----------------------------------------------------------------------------- ~/solve
def test_an_obstacle_on_the_least_motion_solution_gives_a_collision_free_answer(ros):
    """The least-motion answer (collisions ignored) puts the left forearm where the test then
    puts a post: the node's answer goes around it, collision-free with positive clearance (an
    independent check of the returned state agrees), and still reaches both targets."""
    node = dual_node(ros)
    obstacles = Obstacles(ros, node)
    ignored = node.solve(goal_request(), )
    assert ignored.error_code == Response.SUCCESS and ignored.collisions_checked
    least = np.array(ignored.results[0].joint_positions)
    assert ignored.results[0].collision_free and ignored.results[0].clearance > 0.0
    elbow = MODEL.link_transforms(least, ["left_forearm_roll_link"])[0][:3, 3]
    obstacles.send(obstacle_msg("post", xyz=elbow))
    post = Obstacle.sphere(0.06, make_transform(None, elbow), name="post")
    blocked = reference_scene([post]).check(least)
    assert not blocked.collision_free[0] and "post" in blocked.closest_pair[0]

    req = goal_request()
    req.ignore_collisions = True
    unchecked = node.solve(req)
    assert unchecked.error_code == Response.SUCCESS and not unchecked.collisions_checked
    result = unchecked.results[0]
    assert np.isnan(result.clearance) and not result.collision_free and list(result.closest_pair) == []
    np.testing.assert_allclose(result.joint_positions, least, atol=1e-6)  # still the colliding one

    answer = node.solve(goal_request())
    assert answer.error_code == Response.SUCCESS, answer.message
    result = answer.results[0]
    assert answer.collisions_checked and result.collision_free and result.clearance > 0.0
    q = np.array(result.joint_positions)
    check = reference_scene([post]).check(q)
    assert check.collision_free[0] and check.clearance[0] == pytest.approx(result.clearance, abs=1e-6)
    assert len(result.closest_pair) == 2
    assert_reaches(MODEL, q, {0: MODEL.tcp_transforms(GOAL)[0], 1: MODEL.tcp_transforms(GOAL)[1]})


def test_the_search_answer_is_checked_once(ros, monkeypatch):
    """With the search, the node reports the clearance and closest pair the search found for its
    answer (``SearchResult.collision_report``) instead of checking the answer again: one check
    per request, and the same report a check of the answered state gives."""
    node = dual_node(ros)
    with monkeypatch.context() as patch:
        checks = count_collision_checks(patch)
        answer = node.solve(goal_request())
    assert answer.error_code == Response.SUCCESS and answer.collisions_checked, answer.message
    assert checks == [1]  # the search's check of its one candidate; none by the node after it
    result = answer.results[0]
    report = node.node._scene.check(np.array(result.joint_positions, dtype=np.float32))
    assert result.collision_free == bool(report.collision_free[0])
    assert result.clearance == report.clearance[0] and tuple(result.closest_pair) == report.closest_pair[0]


def test_every_solution_colliding_has_its_own_code(ros):
    """A box around the left target: the hand can reach it only inside the box. The search and
    the spec's single start both answer IN_COLLISION, the candidate's stop reason in_collision,
    its clearance negative and its pair the hand's link against the box."""
    node = dual_node(ros)
    obstacles = Obstacles(ros, node)
    left = MODEL.tcp_transforms(GOAL)[0, :3, 3]
    obstacles.send(obstacle_msg("crate", SolidPrimitive.BOX, (0.3, 0.3, 0.3), xyz=left))
    for overrides in ({"time_budget": -1.0, "max_rounds": 2}, {"num_seeds": -1}):
        response = node.solve(goal_request(**overrides))
        assert response.error_code == Response.IN_COLLISION, (overrides, response.message)
        assert not response.success and response.best_index == -1
        result = response.results[0]
        assert result.stop_reason == "in_collision" and not result.collision_free and result.clearance < 0.0
        assert "crate" in result.closest_pair and "only in collision" in response.message
    req = goal_request(num_seeds=-1)
    req.ignore_collisions = True
    assert node.solve(req).error_code == Response.SUCCESS


# ----------------------------------------------------------------------------- ~/obstacles
def test_obstacles_topic_add_remove_clear_and_bad_messages(ros, capfd):
    """Add, replace, remove and clear through ~/obstacles; a bad message is logged with its
    reason and leaves the obstacles (and the scene the solves use) as they were."""
    node = dual_node(ros, **{"collision.obstacles": ["table"], "collision.obstacle.table.shape": "box",
                             "collision.obstacle.table.dimensions": [0.8, 1.2, 0.04],
                             "collision.obstacle.table.xyz": [0.85, 0.0, 0.68]})
    obstacles = Obstacles(ros, node)
    scene = node.node.collision_scene()
    assert obstacles.ids() == ["table"] and [o.name for o in scene.obstacles] == ["table"]
    obstacles.send(obstacle_msg("ball", xyz=(0.5, 0.4, 1.5)))
    obstacles.send(obstacle_msg("post", SolidPrimitive.CYLINDER, (1.0, 0.05), xyz=(0.6, -0.5, 0.5),
                                frame_id="base_link"))
    obstacles.send(obstacle_msg("ball", xyz=(0.5, 0.4, 1.6)))  # replaced
    assert obstacles.ids() == ["table", "ball", "post"]
    assert [o.name for o in scene.obstacles] == ["table", "ball", "post"]
    assert scene.obstacles[1].pose[2, 3] == pytest.approx(1.6) and scene.obstacles[2].size == (0.05, 1.0)
    before = [(o.name, o.pose.tobytes()) for o in scene.obstacles]
    for bad in (obstacle_msg("ball", dimensions=(0.1, 0.2)),                      # a sphere has one
                obstacle_msg("cone", SolidPrimitive.CONE, (0.2, 0.1)),
                obstacle_msg("far", frame_id="left_hand_link"),                  # moves with joints
                obstacle_msg("table", operation=CollisionObstacle.REMOVE),       # a parameter's
                obstacle_msg("chest_link"),                                      # a robot link's name
                obstacle_msg("x", operation=9)):
        obstacles.send(bad, changes=False)
    obstacles.send(obstacle_msg("marker"))  # handled after the bad ones (one reliable topic)
    assert obstacles.ids() == ["table", "ball", "post", "marker"]
    assert [(o.name, o.pose.tobytes()) for o in scene.obstacles][:3] == before
    err = capfd.readouterr().err
    for words in ("shape.dimensions: a sphere needs 1 value(s)", "shape.type: unsupported type 4",
                  "header.frame_id: cannot resolve frame 'left_hand_link' without tf",
                  "fixed obstacle of parameter collision.obstacles", "'chest_link' is a link of the robot",
                  "operation: unknown value 9"):
        line = next((line for line in err.splitlines() if words in line), None)
        assert line is not None and "rejected" in line and "unchanged" in line, (words, err[-3000:])
    obstacles.send(obstacle_msg("post", operation=CollisionObstacle.REMOVE))
    assert obstacles.ids() == ["table", "ball", "marker"]
    obstacles.send(obstacle_msg("", operation=CollisionObstacle.CLEAR))
    assert obstacles.ids() == ["table"] and [o.name for o in scene.obstacles] == ["table"]


# ----------------------------------------------------------------------------- parameters
def test_collision_enabled_is_live_and_padding_is_read_only(ros):
    node = dual_node(ros)
    assert node.solve(goal_request()).collisions_checked
    result = node.set_param("collision.enabled", False)
    assert result.successful, result.reason
    response = node.solve(goal_request())
    assert response.error_code == Response.SUCCESS and not response.collisions_checked
    assert np.isnan(response.results[0].clearance)
    for name, value in (("collision.padding", 0.05), ("collision.srdf", "<robot/>")):
        result = node.set_param(name, value)
        assert not result.successful and "read-only" in result.reason, (name, result.reason)
    assert node.set_param("collision.enabled", True).successful
    assert node.solve(goal_request()).collisions_checked


def test_a_robot_without_collision_geometry_checks_nothing(ros):
    """robot_description without <collision> elements: collision.enabled (default true) has nothing
    to check; the response says so."""
    text = bundled_robot("panda_like").urdf_path().read_text()
    import re
    bare = re.sub(r"<collision>.*?</collision>", "", text, flags=re.S)
    node = ros.start_node("panda_like", params={"robot_description": bare})
    assert node.node.collision_scene() is None and node.node._scene.link_bodies == ()
    node.publish_full_state(mid_range(load_robot("panda_like")))
    response = node.solve(request(candidate_at(load_robot("panda_like"), mid_range(load_robot("panda_like")),
                                               ["tool"])))
    assert response.error_code == Response.SUCCESS and not response.collisions_checked


BAD_CONFIGS = {
    "negative_padding": (["-p", "collision.padding:=-0.1"], "collision.padding"),
    "obstacle_without_shape": (["-p", "collision.obstacles:=[table]"], "collision.obstacle.table.shape"),
    "obstacle_bad_dimensions": (["-p", "collision.obstacles:=[ball]", "-p", "collision.obstacle.ball.shape:=sphere",
                                 "-p", "collision.obstacle.ball.dimensions:=[0.1, 0.2]"],
                                "collision.obstacle.ball.dimensions"),
    "obstacle_named_like_a_link": (["-p", "collision.obstacles:=[chest_link]",
                                    "-p", "collision.obstacle.chest_link.shape:=sphere",
                                    "-p", "collision.obstacle.chest_link.dimensions:=[0.1]"], "collision.obstacles"),
    "missing_srdf": (["-p", "collision.srdf:=/nonexistent/robot.srdf"], "collision.srdf"),
    "srdf_unknown_link": (["-p", "robot_description_semantic:=<robot name='r'><disable_collisions link1='nope' "
                           "link2='base_link' reason='Never'/></robot>"], "robot_description_semantic"),
}


@pytest.fixture(scope="module")
def bad_config_runs():
    return run_bad_configs(BAD_CONFIGS)


@pytest.mark.without_kernels  # the node exits on its configuration, before any solve
@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_collision_configuration_exits_1_with_one_line(bad_config_runs, case):
    code, output = bad_config_runs[case]
    assert_exit_1_with_one_line(code, output, BAD_CONFIGS[case][1])


# ----------------------------------------------------------------------------- GetPositionIK
def _bridge_request(group, joint_names, seed, link, pose, avoid, timeout_ns=0):
    from types import SimpleNamespace

    from geometry_msgs.msg import PoseStamped
    stamped = PoseStamped()
    stamped.header.frame_id = "base_link"
    stamped.pose = matrix_to_pose(pose)
    return SimpleNamespace(ik_request=SimpleNamespace(
        group_name=group, robot_state=SimpleNamespace(joint_state=SimpleNamespace(name=joint_names, position=seed)),
        constraints=SimpleNamespace(), avoid_collisions=avoid, ik_link_name=link, pose_stamped=stamped,
        ik_link_names=[], pose_stamped_vector=[], timeout=SimpleNamespace(sec=0, nanosec=timeout_ns)))


def _bridge_response():
    from types import SimpleNamespace
    return SimpleNamespace(solution=SimpleNamespace(joint_state=SimpleNamespace(name=[], position=[])),
                           error_code=SimpleNamespace(val=0, message=""))


def test_get_position_ik_honours_avoid_collisions(ros):
    """A box around the left hand's goal (sent on ~/obstacles, in the root frame = the group's
    base): avoid_collisions true answers NO_IK_SOLUTION naming the collision, false the pose;
    collision.enabled false turns the check off."""
    node = dual_node(ros, **{"moveit.kinematics_yaml": str(CONFIG_DIR / "dual_arm_torso_kinematics.yaml"),
                             "moveit.max_timeout": 0.5})
    obstacles = Obstacles(ros, node)
    hand = MODEL.link_transforms(GOAL, ["left_hand_link"])[0]
    names = list(MODEL.joint_names)
    call = node.node._on_get_position_ik
    free = call(_bridge_request("left_arm", names, START.tolist(), "left_hand_link", hand, True), _bridge_response())
    assert free.error_code.val == MoveItErrorCode.SUCCESS, free.error_code.message
    obstacles.send(obstacle_msg("crate", SolidPrimitive.BOX, (0.3, 0.3, 0.3), xyz=hand[:3, 3]))
    # Half a second (moveit.max_timeout), not the group's 10 ms: on a loaded machine that budget
    # may end before any attempt reaches the goal, and the answer then names the nearest attempt.
    blocked = call(_bridge_request("left_arm", names, START.tolist(), "left_hand_link", hand, True, 500_000_000),
                   _bridge_response())
    assert blocked.error_code.val == MoveItErrorCode.NO_IK_SOLUTION
    assert "collision" in blocked.error_code.message and blocked.solution.joint_state.name == []
    ignored = call(_bridge_request("left_arm", names, START.tolist(), "left_hand_link", hand, False),
                   _bridge_response())
    assert ignored.error_code.val == MoveItErrorCode.SUCCESS, ignored.error_code.message
    assert node.set_param("collision.enabled", False).successful
    off = call(_bridge_request("left_arm", names, START.tolist(), "left_hand_link", hand, True), _bridge_response())
    assert off.error_code.val == MoveItErrorCode.SUCCESS, off.error_code.message


# ----------------------------------------------------------------------------- markers
def test_a_drag_into_an_obstacle_turns_red_and_markers_show_the_scene(ros):
    """A drag whose only solution puts the hand into a box fails (nothing published) with the
    colliding pair in the text; ~/markers has the obstacle and, with markers.collision_bodies,
    the robot's bodies; removing the obstacle deletes its markers."""
    from direction_up_ik.ros.drag import COLOURS
    node = dual_node(ros, **{"markers.enabled": True, "markers.collision_bodies": True})
    obstacles = Obstacles(ros, node)
    markers = node.node.markers
    wait_until(lambda: "left" in markers.targets(), TIMEOUT, "the markers to be placed")
    goal = MODEL.tcp_transforms(START)[0].copy()
    goal[:3, 3] += (0.05, 0.0, 0.0)
    obstacles.send(obstacle_msg("crate", SolidPrimitive.BOX, (0.2, 0.2, 0.2), xyz=goal[:3, 3]))
    with markers._lock:
        markers._targets["left"].pose = goal
    markers._solve({"left"})
    response = markers.last_response
    assert response.error_code == Response.IN_COLLISION, response.message
    assert node.commands == []
    state = markers.targets()["left"]
    assert state.status == "failed" and "crate" in state.collision
    assert COLOURS["failed"] == pytest.approx((0.95, 0.10, 0.10, 0.95))
    markers._publish_markers(START.astype(np.float32))
    shown = markers._shown_counts
    assert obstacles.ids() == ["table", "crate"]  # the config's table and the crate
    assert shown["obstacles"] == 2 and shown["obstacle_names"] == 2 and shown["collision_bodies"] > 10
    obstacles.send(obstacle_msg("crate", operation=CollisionObstacle.REMOVE))

    def republished():  # by this call or the node's timer, whichever comes first
        markers._publish_markers(START.astype(np.float32))
        return markers._shown_counts["obstacles"] == 1
    wait_until(republished, what="the crate's markers to be deleted")
