"""``direction_up_ik_node`` with real rclpy: service, topics, parameters, start-up and exit.

In-process tests create :class:`DirectionUpIKNode` in its own namespace inside one
rclpy context per module and talk to it from a client node over the middleware
(see ``node_harness.py``). Start-up configuration, signals and the demo run as
subprocesses in a private ROS domain. Every wait has a timeout.
"""

from __future__ import annotations

import copy
import math
import signal
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402

from direction_up_ik import TargetBatch, robo_solve_ik_direction_up_multi_batch  # noqa: E402
from direction_up_ik.core.settings import SEARCH_SOLVER_DEFAULTS  # noqa: E402
from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget  # noqa: E402
from direction_up_ik.robots import load_robot  # noqa: E402
from direction_up_ik.ros.config import ConfigError  # noqa: E402
from direction_up_ik.ros.conversions import BATCH_MIN_CANDIDATES, targets_from_candidates  # noqa: E402
from direction_up_ik.ros.node import DirectionUpIKNode  # noqa: E402
from direction_up_ik.ros.process import EXECUTOR_ENV  # noqa: E402
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from helpers import mid_range, targets_at  # noqa: E402
from node_harness import (assert_exit_1_with_one_line, run_bad_configs,  # noqa: E402
                          CONFIG_DIR, REPO, Harness, NodeProcess, assert_reaches,  # noqa: E402
                          candidate_at, domain_id, pose_errors, private_domain_id, request, subprocess_env,
                          target_msg,
                          value_of, wait_until)

Response = SolveDirectionUpIK.Response
T = DirectionUpTarget
ROBOTS = ("dual_arm_torso", "panda_like", "ur5_like")
POSITION_TOL, FRAME_TOL = 1e-3, 1e-2  # the bundled configs' solver tolerances
UR5_START = np.array([0.2, -1.2, 1.4, -1.6, -1.5, 0.3])  # away from the stretched-arm singularity


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def shared(ros_context):
    """Harness whose nodes live for the whole module (read-only use only)."""
    harness = Harness(ros_context)
    yield harness
    harness.close()


def start_state(robot: str, model) -> np.ndarray:
    return UR5_START.copy() if robot == "ur5_like" else mid_range(model)


def clip(model, q) -> np.ndarray:
    lo = np.where(np.isfinite(model.lower_limits), model.lower_limits, -np.pi)
    hi = np.where(np.isfinite(model.upper_limits), model.upper_limits, np.pi)
    return np.clip(q, lo, hi)


def poses(model, q) -> dict:
    tcp = model.tcp_transforms(np.asarray(q, dtype=np.float64))
    return {e: tcp[e] for e in range(model.num_end_effectors)}


def unreachable_candidate(model, q, names) -> DirectionUpCandidate:
    far = model.tcp_transforms(q).copy()
    far[:, :3, 3] += (1.5, 0.0, 0.8)  # 1.7 m away from a reachable pose
    return DirectionUpCandidate(targets=[target_msg(n, far[e]) for e, n in enumerate(names)])


@pytest.fixture(scope="module")
def dual(shared):
    """Shared dual-arm node (config/dual_arm_torso.yaml) with its joint state published.

    Tests using it must not change its parameters or joint state."""
    model = load_robot("dual_arm_torso")
    node = shared.start_node("dual_arm_torso")
    node.model, node.start = model, mid_range(model)
    node.publish_full_state(node.start)
    return node


def probe(node, q=None, **fields) -> SolveDirectionUpIK.Request:
    """A request whose targets are the TCP poses at ``q`` (default: the node's start state)."""
    q = node.start if q is None else q
    return request(candidate_at(node.model, q, node.ee_names), **fields)


def assert_state(node, expected, **fields) -> SolveDirectionUpIK.Response:
    """The node's initial state equals ``expected``: targets at FK(expected) are met without a
    single iteration, so the returned joints are exactly the initial state (float32)."""
    response = node.solve(probe(node, expected, **fields))
    assert response.error_code == Response.SUCCESS, response.message
    result = response.results[0]
    # (cost: a joint exactly on a limit may move by one float32 step into the limits)
    assert result.iterations == 0 and result.cost < 1e-12, (result.iterations, result.cost)
    np.testing.assert_allclose(result.joint_positions, expected, atol=1e-6)
    return response


def assert_rejected(response, code, *words) -> None:
    assert response.error_code == code, (response.error_code, response.message)
    assert response.success is False and response.best_index == -1
    assert len(response.results) == 0
    for word in words:
        assert word in response.message, f"{word!r} not in {response.message!r}"


# ----------------------------------------------------------------------------- 1. round trip
UR5_ORDER = ["wrist_3_joint", "shoulder_pan_joint", "elbow_joint", "wrist_1_joint",
             "shoulder_lift_joint", "wrist_2_joint"]


@pytest.mark.parametrize("robot", ROBOTS)
def test_service_round_trip_and_published_command(ros, robot):
    """FK targets of reachable configurations are solved over ~/solve; one unreachable
    candidate fails with cost inf; the least-cost success is chosen and published in the
    robot's command format (config/<robot>.yaml)."""
    params = {"panda_like": {"command.time_from_start": 1.25},
              "ur5_like": {"command.joint_order": UR5_ORDER}}.get(robot, {})
    node = ros.start_node(robot, params)
    model = load_robot(robot)
    start = start_state(robot, model)
    node.publish_full_state(start)
    names = node.ee_names
    d = model.num_dofs
    far_q = clip(model, start + 0.25 * np.sin(np.arange(d) + 1.0))
    near_q = start.copy()
    near_q[1] += 0.1

    # Several candidates, not published.
    response = node.solve(request(candidate_at(model, far_q, names),
                                  unreachable_candidate(model, start, names),
                                  candidate_at(model, near_q, names), publish=False))
    assert response.success is True and response.error_code == Response.SUCCESS, response.message
    assert list(response.joint_names) == list(model.joint_names)
    assert len(response.results) == 3
    far, bad, near = response.results
    assert bad.success is False and math.isinf(bad.cost) and bad.stop_reason
    assert bad.errors[0].position_error > 0.1  # it approaches, but cannot get there
    # The node searches by default: the failure reports every start and iteration it spent,
    # and the errors of its nearest attempt, which are those of its joint positions.
    assert bad.starts > 1 and bad.iterations > 0 and (far.starts, near.starts) == (1, 1)
    goal = model.tcp_transforms(start).copy()
    goal[:, :3, 3] += (1.5, 0.0, 0.8)  # unreachable_candidate's poses
    for e, error in enumerate(bad.errors):
        position, _, _ = pose_errors(model, np.array(bad.joint_positions), e, goal[e])
        assert error.position_error == pytest.approx(position, rel=1e-5)
    assert far.success and near.success
    assert near.cost < far.cost
    assert response.best_index == 2
    for res, goal in ((far, far_q), (near, near_q)):
        q = np.array(res.joint_positions)
        assert q.shape == (d,)
        assert_reaches(model, q, poses(model, goal), POSITION_TOL, FRAME_TOL)
        assert res.cost == pytest.approx(float(np.sum((q - start) ** 2)), rel=1e-4, abs=1e-9)
        assert [e.end_effector for e in res.errors] == names
        assert all(e.position_error < POSITION_TOL and e.direction_error < FRAME_TOL
                   and e.up_error < FRAME_TOL for e in res.errors)
        assert np.all(q >= model.lower_limits - 1e-6) and np.all(q <= model.upper_limits + 1e-6)

    # One candidate, published.
    response = node.solve(request(candidate_at(model, far_q, names), publish=True))
    assert response.error_code == Response.SUCCESS and response.best_index == 0, response.message
    assert len(response.results) == 1
    chosen = np.array(response.results[0].joint_positions)
    assert_reaches(model, chosen, poses(model, far_q), POSITION_TOL, FRAME_TOL)
    # The publish=False request above published nothing: the first command is this one.
    command = node.wait_commands(1)[0]
    if node.command_type == "joint_state":
        assert robot == "dual_arm_torso"
        assert list(command.name) == list(model.joint_names)
        np.testing.assert_array_equal(command.position, chosen)
        stamp = command.header.stamp.sec * 1_000_000_000 + command.header.stamp.nanosec
        assert abs(stamp - time.time_ns()) < 30e9  # the node's clock (system time) at publishing
    elif node.command_type == "joint_trajectory":
        assert robot == "panda_like"
        assert list(command.joint_names) == list(model.joint_names)
        assert len(command.points) == 1
        np.testing.assert_array_equal(command.points[0].positions, chosen)
        assert (command.points[0].time_from_start.sec, command.points[0].time_from_start.nanosec) == (1, 250_000_000)
    else:
        assert robot == "ur5_like" and node.command_type == "float64_multi_array"
        index = {n: i for i, n in enumerate(model.joint_names)}
        np.testing.assert_array_equal(command.data, [chosen[index[n]] for n in UR5_ORDER])
    time.sleep(0.2)
    assert len(node.commands) == 1


def test_many_candidates_answer_as_each_alone(ros):
    """A request of many candidates (the node packs them as one TargetBatch) answers each one as
    a request of that candidate alone does (the spec's single start, collisions checked)."""
    node = ros.start_node("dual_arm_torso")
    model = load_robot("dual_arm_torso")
    start = start_state("dual_arm_torso", model)
    node.publish_full_state(start)
    rng = np.random.default_rng(11)
    candidates = [candidate_at(model, clip(model, start + rng.uniform(-0.3, 0.3, model.num_dofs)), node.ee_names)
                  for _ in range(BATCH_MIN_CANDIDATES + 2)]
    packed = targets_from_candidates(candidates, node.node._config.end_effectors, node.node._frames)
    assert isinstance(packed, TargetBatch)  # the node's conversion of this request

    def spec(*cands):
        req = request(*cands, publish=False)
        req.overrides.num_seeds = -1
        response = node.solve(req)
        assert response.error_code in (Response.SUCCESS, Response.NO_SOLUTION, Response.IN_COLLISION), \
            response.message
        return response.results

    together = spec(*candidates)
    assert sum(r.success for r in together) >= 3
    for candidate, result in zip(candidates, together):
        (alone,) = spec(candidate)
        assert (alone.success, alone.cost, alone.stop_reason) == (result.success, result.cost, result.stop_reason)
        assert list(alone.joint_positions) == list(result.joint_positions)
        assert [e.end_effector for e in alone.errors] == [e.end_effector for e in result.errors] == node.ee_names


# ----------------------------------------------------------------------------- 2. joint states
def test_partial_joint_states_merge_and_missing_joints_are_named(ros):
    node = ros.start_node("dual_arm_torso")
    node.model = load_robot("dual_arm_torso")
    node.start = mid_range(node.model)
    names, q = node.joint_names, node.start
    half = len(names) // 2

    response = node.solve(probe(node))
    assert_rejected(response, Response.NO_JOINT_STATE, "torso_lift_joint", "right_wrist_roll_joint")

    # First half, reversed, with names the model does not know.
    first = list(range(half))[::-1]
    node.publish_state([names[i] for i in first] + ["gripper_finger_joint", "wheel_left"],
                       [q[i] for i in first] + [0.02, 12.0])
    response = node.solve(probe(node))
    assert_rejected(response, Response.NO_JOINT_STATE)
    for i in range(len(names)):
        assert (f"'{names[i]}'" in response.message) == (i >= half), (names[i], response.message)

    # Second half in another order completes the state: both messages merged by name.
    second = list(range(half, len(names)))
    second = second[1::2] + second[::2]
    node.publish_state([names[i] for i in second], [q[i] for i in second])
    assert_state(node, q)


def test_non_finite_and_mismatched_joint_states_keep_previous_values(ros):
    node = ros.start_node("dual_arm_torso")
    model = node.model = load_robot("dual_arm_torso")
    node.start = mid_range(model)
    names = node.joint_names
    q1 = node.start
    node.publish_full_state(q1)
    assert_state(node, q1)

    q2 = clip(model, q1 + 0.05)
    bad = q2.copy()
    bad[names.index("waist_yaw_joint")] = math.nan
    bad[names.index("left_elbow_joint")] = math.inf
    bad[names.index("right_elbow_joint")] = -math.inf
    node.publish_full_state(bad)
    expected = q2.copy()
    for joint in ("waist_yaw_joint", "left_elbow_joint", "right_elbow_joint"):
        expected[names.index(joint)] = q1[names.index(joint)]
    assert_state(node, expected)

    # Names and positions of different lengths: the whole message is ignored. A later
    # message (same publisher, so delivered after it) that names only unknown joints
    # shows it was processed and changes nothing either.
    node.publish_state(names, clip(model, q1 - 0.05)[:-1], wait=False)
    node.publish_state(["not_a_joint"], [1.0])
    assert_state(node, expected)


def test_initial_state_in_the_request_overrides_joint_states(ros):
    node = ros.start_node("dual_arm_torso")
    model = node.model = load_robot("dual_arm_torso")
    q = node.start = mid_range(model)
    names = node.joint_names

    # No joint_states yet: a complete initial_state is enough ...
    assert_state(node, q, initial_state=dict_state(names, q))
    # ... a partial one names the joints still missing.
    response = node.solve(probe(node, initial_state=dict_state(names[:3], q[:3])))
    assert_rejected(response, Response.NO_JOINT_STATE, names[3], names[-1])

    node.publish_full_state(q)
    override = q.copy()
    override[names.index("waist_yaw_joint")] += 0.3
    override[names.index("right_elbow_joint")] -= 0.2
    assert_state(node, override, initial_state=dict_state(["right_elbow_joint", "waist_yaw_joint"],
                                                          [override[names.index("right_elbow_joint")],
                                                           override[names.index("waist_yaw_joint")]]))
    # The override was for that request only: the same targets now start from joint_states.
    response = node.solve(probe(node, override))
    assert response.error_code == Response.SUCCESS and response.results[0].cost > 0.01

    for state, code, words in (
            (dict_state(["elbow"], [0.0]), Response.UNKNOWN_JOINT, ("initial_state", "'elbow'")),
            (dict_state(["waist_yaw_joint"], []), Response.INVALID_REQUEST, ("initial_state",)),
            (dict_state(["waist_yaw_joint"], [math.nan]), Response.INVALID_REQUEST,
             ("initial_state", "waist_yaw_joint")),
            (dict_state(["waist_yaw_joint", "waist_yaw_joint"], [0.0, 0.1]), Response.INVALID_REQUEST,
             ("initial_state",)),
            (dict_state(["torso_lift_joint"], [0.6]), Response.JOINT_STATE_OUT_OF_LIMITS,
             ("torso_lift_joint",))):
        assert_rejected(node.solve(probe(node, initial_state=state)), code, *words)


def dict_state(names, positions):
    from sensor_msgs.msg import JointState
    return JointState(name=list(names), position=[float(p) for p in positions])


def test_joint_state_outside_limits(ros):
    node = ros.start_node("dual_arm_torso")
    model = node.model = load_robot("dual_arm_torso")
    node.start = mid_range(model)
    names = node.joint_names
    lift = names.index("torso_lift_joint")  # prismatic, [0, 0.4] m

    q = node.start.copy()
    q[lift] = 0.5
    node.publish_full_state(q)
    assert_rejected(node.solve(probe(node, q)), Response.JOINT_STATE_OUT_OF_LIMITS, "torso_lift_joint")
    # Even when the request does not move it: the published command carries every joint
    # and must stay within the limits.
    arms = [n for n in names if n.startswith(("left_", "right_"))]
    assert_rejected(node.solve(probe(node, q, active_joints=arms)), Response.JOINT_STATE_OUT_OF_LIMITS,
                    "torso_lift_joint")
    # Within 1 mm of the limit the value is clamped onto it.
    q[lift] = 0.4005
    node.publish_full_state(q)
    clamped = q.copy()
    clamped[lift] = 0.4
    assert_state(node, clamped)


# ----------------------------------------------------------------------------- 3. parameters
@pytest.mark.parametrize("robot", ROBOTS)
def test_params_file_is_loaded(robot):
    """config/<robot>.yaml through --params-file on the node's command line (its default name)."""
    model = load_robot(robot)
    expected = {
        "dual_arm_torso": dict(robot="dual_arm_torso", root_link="base_link", end_effectors=["left", "right"],
                               link=("left", "left_hand_link"), tcp=("left", [0.0, 0.0, 0.10]),
                               command=("/direction_up_ik_node/joint_command", "sensor_msgs/msg/JointState")),
        "panda_like": dict(robot="panda_like", root_link="panda_link0", end_effectors=["tool"],
                           link=("tool", "panda_hand"), tcp=("tool", [0.0, 0.0, 0.1034]),
                           command=("/panda_arm_controller/joint_trajectory",
                                    "trajectory_msgs/msg/JointTrajectory")),
        "ur5_like": dict(robot="ur5_like", root_link="base_link", end_effectors=["tool"],
                         link=("tool", "tool0"), tcp=("tool", [0.0, 0.0, 0.0]),
                         command=("/forward_position_controller/commands", "std_msgs/msg/Float64MultiArray")),
    }[robot]
    # A private domain: this node uses the global names the YAML files give.
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=private_domain_id())
    node = None
    try:
        node = DirectionUpIKNode(context=context, cli_args=[
            "--ros-args", "--params-file", str(CONFIG_DIR / f"{robot}.yaml")])
        value = lambda name: node.get_parameter(name).value  # noqa: E731
        assert value("robot") == expected["robot"]
        assert value("root_link") == expected["root_link"]
        assert list(value("end_effectors")) == expected["end_effectors"]
        ee, link = expected["link"]
        assert value(f"end_effector.{ee}.link") == link
        assert list(value(f"end_effector.{ee}.tcp_xyz")) == pytest.approx(expected["tcp"][1])
        assert value(f"end_effector.{ee}.local_axes") == "tcp"
        assert value("solver.max_position_error") == 0.03
        topics = dict(node.get_publisher_names_and_types_by_node(node.get_name(), node.get_namespace()))
        topic, kind = expected["command"]
        assert topics.get(topic) == [kind], topics
        if robot == "panda_like":
            assert value("command.time_from_start") == 1.0
        if robot == "ur5_like":
            assert list(value("command.joint_order")) == list(model.joint_names)
        # The loaded configuration solves (direct call; no middleware in this domain needed).
        q = clip(model, start_state(robot, model) + 0.2)
        req = request(candidate_at(model, q, expected["end_effectors"]))
        req.initial_state = dict_state(model.joint_names, start_state(robot, model))
        response = node.solve(req, SolveDirectionUpIK.Response())
        assert response.error_code == Response.SUCCESS, response.message
        assert_reaches(model, response.results[0].joint_positions, poses(model, q))
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=context)


def test_one_default_axis_convention_and_the_log_names_each_end_effectors(capfd):
    """Without a config file an end effector's local_axes is x_y, the message's
    LOCAL_AXES_DEFAULT (+X/+Y); the start-up log says which axes each end effector uses and
    that LOCAL_AXES_DEFAULT targets use +X/+Y, and whether ~/solve searches."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=private_domain_id())
    node = None
    try:
        node = DirectionUpIKNode(context=context, cli_args=["--ros-args", "-p", "robot:=dual_arm_torso"])
        assert node.get_parameter("end_effector.left.local_axes").value == "x_y"
        log = capfd.readouterr().err
        line = next(text for text in log.splitlines() if "ready:" in text)
        assert "left=left_hand_link[0.0, 0.0, 0.1] local_axes x_y (TCP +X along direction, +Y along up)" in line
        assert "LOCAL_AXES_DEFAULT targets use +X/+Y" in line
        assert "~/solve answers with search (4 seeds per round, budget 0.1 s)" in line
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("robot, namespace", [(robot, "/left_cell") for robot in ROBOTS]
                         + [("panda_like", "/plant/cell_2")])
def test_params_file_applies_in_any_namespace(robot, namespace):
    """Issue 23 item 8: config/<robot>.yaml as a namespaced launch loads it (``--params-file``
    with ``-r __ns:=...``, what ``ros2 launch ... namespace:=left_cell`` hands the node): every
    value of the file is the node's, and the command goes out as the file says."""
    import yaml

    with open(CONFIG_DIR / f"{robot}.yaml", encoding="utf-8") as f:
        (entry,) = yaml.safe_load(f).values()  # one entry, whatever its key
    values = entry["ros__parameters"]
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id())
    node = None
    try:
        node = DirectionUpIKNode(context=context, cli_args=[
            "--ros-args", "--params-file", str(CONFIG_DIR / f"{robot}.yaml"), "-r", f"__ns:={namespace}"])
        assert node.get_fully_qualified_name() == f"{namespace}/direction_up_ik_node"
        differ = {}
        for name, value in values.items():
            got = node.get_parameter(name).value
            got = list(got) if isinstance(got, (list, tuple)) or hasattr(got, "tolist") else got
            if got != value and not (isinstance(value, float) and got == pytest.approx(value)):
                differ[name] = (value, got)
        assert not differ, f"{len(differ)} of {len(values)} parameters not from the file: {differ}"
        topics = dict(node.get_publisher_names_and_types_by_node(node.get_name(), node.get_namespace()))
        kind = {"joint_state": "sensor_msgs/msg/JointState", "joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
                "float64_multi_array": "std_msgs/msg/Float64MultiArray"}[values["command.type"]]
        topic = node.resolve_topic_name(values["command.topic"])
        assert topics.get(topic) == [kind], topics
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("name, value", [
    ("solver.damping", -1.0),            # outside the descriptor's range (rclpy rejects it)
    ("solver.position_tol", 0.0),        # in range, but the solver needs it positive
    ("solver.max_iters", "many"),        # wrong type
    ("end_effector.left.link", "nope"),  # not a link of the robot
    ("command.type", "twist"),
])
def test_bad_overrides_raise_config_error_in_process(ros_context, name, value):
    with pytest.raises(ConfigError, match=f"parameter '{name}'"):
        DirectionUpIKNode(context=ros_context, namespace="/bad_config",
                          parameter_overrides=[Parameter(name, value=value)])


def lift_only_request(node, offset_y: float) -> SolveDirectionUpIK.Request:
    """Left TCP, position only: 5 cm up (the torso lift can do that) and ``offset_y`` sideways
    (it cannot), so the remaining position error is |offset_y|."""
    pose = node.model.tcp_transforms(node.start)[0].copy()
    pose[:3, 3] += (0.0, offset_y, 0.05)
    return request(DirectionUpCandidate(targets=[target_msg("left", pose, mode=T.MODE_POSITION)]))


def test_live_parameter_updates_apply_to_the_next_solve(ros):
    node = ros.start_node("dual_arm_torso", {"search.num_seeds": 0})  # the spec's single start
    model = node.model = load_robot("dual_arm_torso")
    node.start = mid_range(model)
    node.publish_full_state(node.start)

    result = node.set_param("active_joints", ["torso_lift_joint"])
    assert result.successful, result.reason
    response = node.solve(lift_only_request(node, 0.004))
    assert response.error_code == Response.NO_SOLUTION, response.message
    moved = np.array(response.results[0].joint_positions) - node.start
    assert np.count_nonzero(np.abs(moved) > 1e-6) == 1 and moved[0] == pytest.approx(0.05, abs=2e-3)
    assert response.results[0].errors[0].position_error == pytest.approx(0.004, abs=5e-4)

    # Loosen the tolerance through ~/set_parameters: the same request now succeeds.
    result = node.set_param("solver.position_tol", 0.01)
    assert result.successful, result.reason
    assert node.get_params("solver.position_tol") == [0.01]
    response = node.solve(lift_only_request(node, 0.004))
    assert response.error_code == Response.SUCCESS, response.message

    # Back to all joints (empty list) and one iteration (Node.set_parameters, in process).
    assert node.set_param("active_joints", []).successful
    (result,) = node.node.set_parameters([Parameter("solver.max_iters", value=1)])
    assert result.successful, result.reason
    far = clip(model, node.start + 0.3)
    response = node.solve(probe(node, far))
    assert response.error_code == Response.NO_SOLUTION and response.results[0].iterations == 1
    assert node.set_param("solver.max_iters", 64).successful
    response = node.solve(probe(node, far))
    assert response.error_code == Response.SUCCESS and response.results[0].iterations > 1


def _panda_at_mid_range(ros):
    """A panda_like node (its config file) whose joint state is the middle of the limits."""
    node = ros.start_node("panda_like")
    model = node.model = load_robot("panda_like")
    node.start = mid_range(model)
    node.publish_full_state(node.start)
    return node, model


def test_multi_seed_search_from_request_fields_and_parameters(ros):
    """num_seeds in the request (or search.num_seeds) solves targets the single start misses."""
    node, model = _panda_at_mid_range(ros)
    rng = np.random.default_rng(5)
    goals = rng.uniform(model.lower_limits, model.upper_limits, size=(12, model.num_dofs))
    candidates = [candidate_at(model, g, node.ee_names) for g in goals]

    def solve_all(**overrides):
        req = request(*candidates)
        for key, value in overrides.items():
            setattr(req.overrides, key, value)
        response = node.solve(req)
        assert response.error_code in (Response.SUCCESS, Response.NO_SOLUTION), response.message
        return np.array([r.success for r in response.results]), response

    single, _ = solve_all(num_seeds=-1)  # the spec's single start
    assert node.set_param("search.max_rounds", 6).successful  # rounds until each candidate succeeds
    searched, response = solve_all(num_seeds=8, random_seed=3, time_budget=-1.0)  # no budget: 6 rounds
    assert single.sum() < len(goals) and searched.sum() == len(goals)
    for r, g in zip(response.results, goals):  # every success is real (node-independent FK)
        tcp = model.tcp_transforms(np.array(r.joint_positions))[0]
        assert np.linalg.norm(tcp[:3, 3] - model.tcp_transforms(g)[0][:3, 3]) < 1e-3
    again, response2 = solve_all(num_seeds=8, random_seed=3, time_budget=-1.0)
    assert [r.joint_positions for r in response.results] == [r.joint_positions for r in response2.results]
    # The same through the node's parameters.
    assert node.set_param("search.num_seeds", 8).successful
    assert node.set_param("search.time_budget", 0.0).successful  # none: search.max_rounds rounds
    by_param, _ = solve_all()
    assert by_param.sum() == len(goals)
    assert not node.set_param("search.selection", "closest").successful
    assert not node.set_param("search.time_budget", -1.0).successful


def test_a_default_request_gets_the_search_s_success(ros):
    """A planner that sends ~/solve requests with default overrides: the node searches (4 seeds,
    0.1 s), so random reachable targets are solved from a stretched start where the spec's
    single start fails on many (issue 23, item 5)."""
    node, model = _panda_at_mid_range(ros)
    # FK of uniform random states: many put the arm through itself (issue 24); solutions judged
    # by the tolerances alone here.
    assert node.set_param("collision.enabled", False).successful
    rng = np.random.default_rng(23)
    goals = rng.uniform(model.lower_limits, model.upper_limits, size=(60, model.num_dofs))
    solved = {"default": 0, "spec": 0}
    for goal in goals:
        for mode, seeds in (("default", 0), ("spec", -1)):
            req = request(candidate_at(model, goal, node.ee_names))
            req.overrides.num_seeds = seeds
            response = node.solve(req)
            assert response.error_code in (Response.SUCCESS, Response.NO_SOLUTION), response.message
            solved[mode] += response.success
    assert solved["default"] >= 59 and solved["spec"] < 50, solved


def test_streamed_targets_and_marker_drags_solve_locally(ros):
    """~/target and marker drags ask for the spec's single start (num_seeds -1): a local solve
    from the current state, never a seed's far answer (a joint jump in a teleoperated stream);
    a target only the search reaches publishes nothing there."""
    node = ros.start_node("dual_arm_torso")
    model = node.model = load_robot("dual_arm_torso")
    node.start = mid_range(model)
    node.publish_full_state(node.start)
    seen = []
    real = node.node.solve

    def spy(request, response):
        seen.append(request.overrides.num_seeds)
        return real(request, response)
    node.node.solve = spy
    node.node._on_target(candidate_at(model, clip(model, node.start + 0.05), node.ee_names))
    assert node.node.markers is not None  # markers.enabled in config/dual_arm_torso.yaml
    # (the markers are placed at the TCPs once the joint state has arrived)
    wait_until(lambda: "left" in node.node.markers._targets, 60.0, "the markers to be placed")
    node.node.markers._solve({"left"})  # through the node's stream(), which calls solve()
    # The drag may be walked in sub-steps (drag.py, DRAG_STEP_M): each is a single start too.
    assert len(seen) >= 2 and set(seen) == {-1}


def _panda_and_a_reachable_goal(ros):
    """A panda node at mid-range, a goal state reachable from there, and
    ``solve(**overrides)``: that goal's result through ``~/solve``."""
    node, model = _panda_at_mid_range(ros)
    goal = np.clip(node.start + np.linspace(-0.6, 0.6, model.num_dofs), model.lower_limits, model.upper_limits)

    def solve(**overrides):
        req = request(candidate_at(model, goal, node.ee_names))
        for key, value in overrides.items():
            setattr(req.overrides, key, value)
        response = node.solve(req)
        assert response.error_code == Response.SUCCESS, response.message
        return response.results[0]
    return node, model, goal, solve


def test_search_uses_its_own_step_cap(ros):
    """search.max_step_norm caps the search's local solves; overrides.max_step_norm wins."""
    node, _, _, solve = _panda_and_a_reachable_goal(ros)
    # The spec's Jacobian and damping for the search too, so that only the step caps differ here.
    assert node.set_param("search.jacobian", "finite_difference").successful
    assert node.set_param("search.damping_mode", "constant").successful
    spec = solve(num_seeds=-1)  # the spec's single start: solver.max_step_norm (0.25)
    searched = solve(num_seeds=4)  # round 0 succeeds, with search.max_step_norm (1.5)
    assert searched.iterations < spec.iterations
    assert searched.joint_positions != spec.joint_positions
    assert solve(num_seeds=4, max_step_norm=0.25).joint_positions == spec.joint_positions
    assert node.set_param("search.max_step_norm", 0.25).successful
    assert solve(num_seeds=4).joint_positions == spec.joint_positions
    for bad in (0.0, -1.0, math.inf, 1e6):
        assert not node.set_param("search.max_step_norm", bad).successful
    assert solve(num_seeds=4).joint_positions == spec.joint_positions  # the old value stayed


def test_search_jacobian_parameter(ros):
    """search.jacobian (default analytic) selects the search's Jacobian; the spec's single
    start keeps finite differences; a bad value is refused and the old one stays."""
    node, model, goal, solve_one = _panda_and_a_reachable_goal(ros)

    def solve(**overrides):
        result = solve_one(**overrides)
        assert result.success
        return np.array(result.joint_positions)

    def local(jacobian, max_step_norm=SEARCH_SOLVER_DEFAULTS["max_step_norm"],
              stall_window=SEARCH_SOLVER_DEFAULTS["stall_window"],
              num_step_scales=SEARCH_SOLVER_DEFAULTS["num_step_scales"],
              damping_mode=SEARCH_SOLVER_DEFAULTS["damping_mode"]):
        """The core's solve of the same target from the same state."""
        model.joint_q[:] = node.start
        return robo_solve_ik_direction_up_multi_batch(model, (targets_at(model, goal),), max_position_error=0.03,
                                                      max_step_norm=max_step_norm, jacobian=jacobian,
                                                      stall_window=stall_window, num_step_scales=num_step_scales,
                                                      damping_mode=damping_mode).joint_q[0]

    assert node.get_params("search.jacobian") == ["analytic"]
    assert node.get_params("search.stall_window") == [SEARCH_SOLVER_DEFAULTS["stall_window"]]
    analytic, fd = local("analytic"), local("finite_difference")
    assert not np.allclose(analytic, fd, rtol=0, atol=1e-6)  # the two Jacobians take different paths
    # round 0 of the search (from the current state) solves it
    np.testing.assert_allclose(solve(num_seeds=4), analytic, rtol=0, atol=1e-6)
    np.testing.assert_allclose(solve(num_seeds=-1), local("finite_difference", 0.25, stall_window=0, num_step_scales=8,
                                              damping_mode="constant"), rtol=0, atol=1e-6)
    assert node.set_param("search.jacobian", "finite_difference").successful
    np.testing.assert_allclose(solve(num_seeds=4), fd, rtol=0, atol=1e-6)
    for bad in ("exact", "", "Analytic"):
        assert not node.set_param("search.jacobian", bad).successful
    assert node.get_params("search.jacobian") == ["finite_difference"]
    np.testing.assert_allclose(solve(num_seeds=4), fd, rtol=0, atol=1e-6)
    # search.stall_window: live, validated (0 = the spec's stopping rules only).
    assert node.set_param("search.stall_window", 0).successful
    np.testing.assert_allclose(solve(num_seeds=4), local("finite_difference", stall_window=0),
                               rtol=0, atol=1e-6)
    for bad in (-1, 1001, 2.5):
        assert not node.set_param("search.stall_window", bad).successful
    assert node.get_params("search.stall_window") == [0]
    # search.num_step_scales: live, validated (8 = the spec's scales, down to 1/128).
    assert node.get_params("search.num_step_scales") == [SEARCH_SOLVER_DEFAULTS["num_step_scales"]]
    assert node.set_param("search.num_step_scales", 8).successful
    np.testing.assert_allclose(solve(num_seeds=4), local("finite_difference", stall_window=0, num_step_scales=8),
                               rtol=0, atol=1e-6)
    for bad in (0, 9, 2.5):
        assert not node.set_param("search.num_step_scales", bad).successful
    assert node.get_params("search.num_step_scales") == [8]
    # search.damping_mode: live, validated ("constant" = the spec's damping).
    assert node.get_params("search.damping_mode") == [SEARCH_SOLVER_DEFAULTS["damping_mode"]] == ["residual"]
    spec_damped = local("finite_difference", stall_window=0, num_step_scales=8, damping_mode="constant")
    assert not np.allclose(spec_damped, local("finite_difference", stall_window=0, num_step_scales=8),
                           rtol=0, atol=1e-6)  # the two dampings take different paths
    assert node.set_param("search.damping_mode", "constant").successful
    np.testing.assert_allclose(solve(num_seeds=4), spec_damped, rtol=0, atol=1e-6)
    for bad in ("adaptive", "", "Residual", 1):
        assert not node.set_param("search.damping_mode", bad).successful
    assert node.get_params("search.damping_mode") == ["constant"]


def test_moveit_bridge_configuration(ros, ros_context):
    """moveit.kinematics_yaml is validated at start-up; the service needs moveit_msgs."""
    import importlib.util
    yaml_path = str(REPO / "config" / "panda_like_kinematics.yaml")
    node = ros.start_node("panda_like", params={"moveit.kinematics_yaml": yaml_path})
    assert sorted(node.node._group_solvers) == ["panda_arm"]
    services = dict(node.node.get_service_names_and_types())
    served = [n for n, types in services.items() if "moveit_msgs/srv/GetPositionIK" in types]
    if importlib.util.find_spec("moveit_msgs") is None:
        assert served == []  # logged a warning instead
    else:  # pragma: no cover - moveit_msgs is not installable from PyPI
        assert served and served[0].endswith("solve_ik")
    with pytest.raises(ConfigError, match="moveit.kinematics_yaml.*not found"):
        DirectionUpIKNode(context=ros_context, parameter_overrides=[
            Parameter("robot", value="panda_like"), Parameter("moveit.kinematics_yaml", value="/nope.yaml")])
    bad = REPO / "config" / "ur5_like_kinematics.yaml"  # its base/tips do not exist on the panda
    with pytest.raises(ConfigError, match="moveit.kinematics_yaml.*manipulator"):
        DirectionUpIKNode(context=ros_context, parameter_overrides=[
            Parameter("robot", value="panda_like"), Parameter("moveit.kinematics_yaml", value=str(bad))])


@pytest.mark.parametrize("name, value, words", [
    ("solver.damping", -1.0, ["solver.damping"]),
    ("solver.damping", 0.0, ["solver.damping"]),
    ("solver.position_tol", math.nan, ["solver.position_tol"]),
    ("solver.max_step_norm", math.inf, ["solver.max_step_norm"]),
    ("solver.max_iters", 0, ["solver.max_iters"]),
    ("search.max_step_norm", 0.0, ["search.max_step_norm", "finite positive"]),
    ("search.max_step_norm", 1e6, ["search.max_step_norm", "1000"]),
    ("search.jacobian", "exact", ["search.jacobian", "finite_difference", "analytic"]),
    ("search.stall_window", -1, ["search.stall_window"]),
    ("search.num_step_scales", 9, ["search.num_step_scales"]),
    ("search.damping_mode", "adaptive", ["search.damping_mode", "constant", "residual"]),
    ("command.time_from_start", -1.0, ["command.time_from_start"]),
    ("limits.max_candidates", 0, ["limits.max_candidates"]),
    ("active_joints", ["nope"], ["active_joints", "nope"]),
    ("active_joints", ["waist_yaw_joint", "waist_yaw_joint"], ["active_joints"]),
    ("command.joint_order", ["nope"], ["command.joint_order", "nope"]),
    ("end_effector.left.local_axes", "zz", ["end_effector.left.local_axes"]),
    ("robot", "panda_like", ["robot"]),  # read-only
    ("command.type", "joint_trajectory", ["command.type"]),  # read-only
    ("end_effector.left.link", "right_hand_link", ["end_effector.left.link"]),  # read-only
])
def test_invalid_parameter_update_is_rejected(dual, name, value, words):
    """Rejected with a reason naming the parameter; the old value stays and is still used."""
    (old,) = dual.get_params(name)
    result = dual.set_param(name, value)
    assert result.successful is False
    for word in words:
        assert word in result.reason, result.reason
    assert dual.get_params(name) == [old]
    assert_state(dual, dual.start)  # still serving, with the old configuration


def test_read_only_parameter_cannot_change_in_process(dual):
    (result,) = dual.node.set_parameters([Parameter("robot", value="ur5_like")])
    assert result.successful is False and "robot" in result.reason
    assert dual.node.get_parameter("robot").value == "dual_arm_torso"


def test_local_axes_configured_follows_the_end_effector_parameter(ros):
    node, model = _panda_at_mid_range(ros)
    goal = clip(model, node.start + 0.2)
    pose = model.tcp_transforms(goal)[0]

    def solve(local_axes):
        # Direction = TCP +Z column, up = +Y column of the goal pose, whatever the axes. The
        # spec's single start: a timed search's failure depends on the rounds it had time for.
        req = request(DirectionUpCandidate(targets=[target_msg("tool", pose, local_axes=local_axes, axes=(2, 1))]))
        req.overrides.num_seeds = -1
        response = node.solve(req)
        assert response.error_code in (Response.SUCCESS, Response.NO_SOLUTION), response.message
        return response.results[0]

    tcp, default = solve(T.LOCAL_AXES_TCP), solve(T.LOCAL_AXES_DEFAULT)
    assert tcp.success
    assert_reaches(model, tcp.joint_positions, {0: pose})
    assert not np.allclose(tcp.joint_positions, default.joint_positions, atol=1e-3)

    assert node.get_params("end_effector.tool.local_axes") == ["tcp"]
    configured = solve(T.LOCAL_AXES_CONFIGURED)
    assert list(configured.joint_positions) == list(tcp.joint_positions)

    assert node.set_param("end_effector.tool.local_axes", "x_y").successful
    configured = solve(T.LOCAL_AXES_CONFIGURED)
    assert list(configured.joint_positions) == list(default.joint_positions)
    assert configured.success == default.success
    if configured.success:  # +X (not +Z) now points along the given direction
        x_axis = model.tcp_transforms(np.array(configured.joint_positions))[0][:3, 0]
        assert np.dot(x_axis, pose[:3, 2]) > math.cos(FRAME_TOL)


# ----------------------------------------------------------------------------- 4. bad requests
def _mutate(fn):
    def build(node):
        tcp = node.model.tcp_transforms(node.start)
        left, right = target_msg("left", tcp[0]), target_msg("right", tcp[1])
        return fn(node, left, right)
    return build


def _one(node, left, right, **fields):
    return request(DirectionUpCandidate(targets=[left, right]), **fields)


def _set(obj, **values):
    for key, value in values.items():
        setattr(obj, key, value)
    return obj


def _overrides(**values):
    return _mutate(lambda n, l, r: _one(n, l, r, overrides=_set(SolveDirectionUpIK.Request().overrides, **values)))


BAD_REQUESTS = {
    "no_candidates": (lambda node: request(), Response.INVALID_REQUEST, ["candidates"]),
    "empty_candidate": (_mutate(lambda n, l, r: request(DirectionUpCandidate())), Response.INVALID_REQUEST,
                        ["candidates[0].targets"]),
    "empty_second_candidate": (_mutate(lambda n, l, r: request(DirectionUpCandidate(targets=[l, r]),
                                                               DirectionUpCandidate())),
                               Response.INVALID_REQUEST, ["candidates[1].targets"]),
    "unknown_end_effector": (_mutate(lambda n, l, r: _one(n, _set(l, end_effector="middle"), r)),
                             Response.UNKNOWN_END_EFFECTOR, ["end_effector", "middle"]),
    "unknown_active_joint": (_mutate(lambda n, l, r: _one(n, l, r, active_joints=["waist_yaw_joint", "elbow"])),
                             Response.UNKNOWN_JOINT, ["active_joints", "elbow"]),
    "duplicate_active_joint": (_mutate(lambda n, l, r: _one(n, l, r, active_joints=["waist_yaw_joint"] * 2)),
                               Response.INVALID_REQUEST, ["active_joints"]),
    "unknown_frame": (_mutate(lambda n, l, r: _one(n, l, _set(r, frame_id="nope"))),
                      Response.INVALID_FRAME, ["candidates[0].targets[1].frame_id", "nope"]),
    "frame_on_a_moving_link": (_mutate(lambda n, l, r: _one(n, _set(l, frame_id="head_link"), r)),
                               Response.INVALID_FRAME, ["frame_id", "head_link"]),
    "nan_position": (_mutate(lambda n, l, r: _one(n, _set(l, position=_set(l.position, y=math.nan)), r)),
                     Response.INVALID_REQUEST, ["targets[0].position"]),
    "inf_direction": (_mutate(lambda n, l, r: _one(n, l, _set(r, direction=_set(r.direction, z=math.inf)))),
                      Response.INVALID_REQUEST, ["targets[1].direction"]),
    "zero_direction": (_mutate(lambda n, l, r: _one(n, _set(l, direction=_set(l.direction, x=0.0, y=0.0, z=0.0)), r)),
                       Response.INVALID_REQUEST, ["targets[0].direction"]),
    "zero_up": (_mutate(lambda n, l, r: _one(n, l, _set(r, up=_set(r.up, x=0.0, y=0.0, z=0.0)))),
                Response.INVALID_REQUEST, ["targets[1].up"]),
    "parallel_direction_up": (_mutate(lambda n, l, r: _one(n, _set(l, up=copy.deepcopy(l.direction)), r)),
                              Response.INVALID_REQUEST, ["targets[0].direction", "up"]),
    "antiparallel_direction_up": (_mutate(lambda n, l, r: _one(n, _set(l, up=_set(
        copy.deepcopy(l.direction), x=-3 * l.direction.x, y=-3 * l.direction.y, z=-3 * l.direction.z)), r)),
        Response.INVALID_REQUEST, ["targets[0].direction", "up"]),
    "bad_mode": (_mutate(lambda n, l, r: _one(n, _set(l, mode=7), r)), Response.INVALID_REQUEST, ["mode", "7"]),
    "bad_local_axes": (_mutate(lambda n, l, r: _one(n, l, _set(r, local_axes=9))), Response.INVALID_REQUEST,
                       ["local_axes", "9"]),
    "explicit_zero_local_direction": (_mutate(lambda n, l, r: _one(n, _set(
        l, local_axes=T.LOCAL_AXES_EXPLICIT, local_up=_set(l.local_up, y=1.0)), r)),
        Response.INVALID_REQUEST, ["local_direction"]),
    "explicit_parallel_local_axes": (_mutate(lambda n, l, r: _one(n, _set(
        l, local_axes=T.LOCAL_AXES_EXPLICIT, local_up=_set(l.local_up, y=1.0),
        local_direction=_set(l.local_direction, y=2.0)), r)), Response.INVALID_REQUEST, ["local_direction"]),
    "candidates_differ_in_ee_count": (_mutate(lambda n, l, r: request(DirectionUpCandidate(targets=[l, r]),
                                                                      DirectionUpCandidate(targets=[l]))),
                                      Response.INVALID_REQUEST, ["candidates[1]", "end_effector"]),
    "candidates_differ_in_ee_order": (_mutate(lambda n, l, r: request(DirectionUpCandidate(targets=[l, r]),
                                                                      DirectionUpCandidate(targets=[r, l]))),
                                      Response.INVALID_REQUEST, ["candidates[1]", "end_effector"]),
    "candidates_differ_in_local_axes": (_mutate(lambda n, l, r: request(
        DirectionUpCandidate(targets=[l, r]),
        DirectionUpCandidate(targets=[_set(copy.deepcopy(l), local_axes=T.LOCAL_AXES_DEFAULT),
                                      _set(copy.deepcopy(r), local_axes=T.LOCAL_AXES_DEFAULT)]))),
        Response.INVALID_REQUEST, ["candidate 1", "local_direction"]),
    "duplicate_end_effector_in_candidate": (_mutate(lambda n, l, r: request(DirectionUpCandidate(
        targets=[l, copy.deepcopy(l)]))), Response.INVALID_REQUEST, ["candidates[0]", "end_effector", "unique"]),
    "negative_override": (_overrides(damping=-1.0), Response.INVALID_REQUEST, ["overrides.damping"]),
    "nan_override": (_overrides(position_tol=math.nan), Response.INVALID_REQUEST, ["overrides.position_tol"]),
    "inf_override": (_overrides(max_step_norm=math.inf), Response.INVALID_REQUEST, ["overrides.max_step_norm"]),
    "too_many_seeds": (_overrides(num_seeds=65), Response.REQUEST_TOO_LARGE,
                       ["overrides.num_seeds", "limits.max_seeds=64"]),
    "negative_budget": (_overrides(time_budget=-0.5), Response.INVALID_REQUEST, ["overrides.time_budget"]),
    "nan_budget": (_overrides(time_budget=math.nan), Response.INVALID_REQUEST, ["overrides.time_budget"]),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_request_is_rejected_and_the_node_keeps_serving(dual, case):
    build, code, words = BAD_REQUESTS[case]
    assert_rejected(dual.solve(build(dual)), code, *words)
    response = assert_state(dual, dual.start)
    assert list(response.joint_names) == dual.joint_names


def test_valid_variants_are_accepted(dual):
    """Root frame given by name, ignored fields of AXIS/POSITION modes, overrides, lengths."""
    tcp = dual.model.tcp_transforms(dual.start)
    left = target_msg("left", tcp[0], frame_id="base_link", mode=T.MODE_AXIS)
    left.up.x = left.up.y = left.up.z = 0.0  # ignored in MODE_AXIS
    right = target_msg("right", tcp[1], mode=T.MODE_POSITION)
    right.direction.x = right.direction.y = right.direction.z = 0.0  # ignored in MODE_POSITION
    right.up.x = math.nan
    req = request(DirectionUpCandidate(targets=[left, right]))
    req.overrides.max_iters, req.overrides.position_tol = 5, 2e-3
    response = dual.solve(req)
    assert response.error_code == Response.SUCCESS, response.message
    e_left, e_right = response.results[0].errors
    assert e_left.direction_error < FRAME_TOL and math.isnan(e_left.up_error)
    assert math.isnan(e_right.direction_error) and math.isnan(e_right.up_error)

    # Direction and up of any length, up not perpendicular: only their directions count.
    left, right = target_msg("left", tcp[0]), target_msg("right", tcp[1])
    for v in (left.direction, right.direction):
        v.x, v.y, v.z = 7 * v.x, 7 * v.y, 7 * v.z
    right.up.x, right.up.y, right.up.z = (0.01 * right.up.x + 0.5 * right.direction.x,
                                          0.01 * right.up.y + 0.5 * right.direction.y,
                                          0.01 * right.up.z + 0.5 * right.direction.z)
    response = dual.solve(request(DirectionUpCandidate(targets=[left, right])))
    assert response.error_code == Response.SUCCESS and response.results[0].cost == 0.0, response.message


def test_request_size_limits(ros):
    node = ros.start_node("dual_arm_torso", {"limits.max_candidates": 3,
                                             "limits.max_targets_per_candidate": 2,
                                             "limits.max_batch_size": 5})
    model = node.model = load_robot("dual_arm_torso")
    node.start = mid_range(model)
    node.publish_full_state(node.start)
    cand = candidate_at(model, node.start, node.ee_names)

    assert_rejected(node.solve(request(*[cand] * 4)), Response.REQUEST_TOO_LARGE,
                    "candidates", "limits.max_candidates")
    three = DirectionUpCandidate(targets=list(cand.targets) + [copy.deepcopy(cand.targets[0])])
    assert_rejected(node.solve(request(three)), Response.REQUEST_TOO_LARGE,
                    "candidates[0].targets", "limits.max_targets_per_candidate")
    assert_rejected(node.solve(request(*[cand] * 3)), Response.REQUEST_TOO_LARGE,
                    "limits.max_batch_size")
    response = node.solve(request(*[cand] * 2))  # 4 targets: within every limit
    assert response.error_code == Response.SUCCESS and len(response.results) == 2

    # The limits are live parameters.
    assert node.set_param("limits.max_batch_size", 6).successful
    response = node.solve(request(*[cand] * 3))
    assert response.error_code == Response.SUCCESS and len(response.results) == 3


PANDA_FIXTURE_XYZ, PANDA_FIXTURE_RPY = (0.3, -0.2, 0.1), (0.0, 0.0, math.pi / 2)


def test_targets_in_a_frame_fixed_to_the_root(ros):
    """A robot_description with a link fixed to the root (rotated and offset): a target given
    in that frame is transformed into the root frame before solving."""
    from direction_up_ik.core.rotations import make_transform, rpy_to_matrix
    from direction_up_ik.robots import bundled_robot

    urdf = bundled_robot("panda_like").urdf_path().read_text()
    xyz, rpy = (" ".join(str(v) for v in vec) for vec in (PANDA_FIXTURE_XYZ, PANDA_FIXTURE_RPY))
    urdf = urdf.replace("</robot>", f"""
  <link name="fixture_frame"/>
  <joint name="fixture_joint" type="fixed"><parent link="panda_link0"/><child link="fixture_frame"/>
    <origin xyz="{xyz}" rpy="{rpy}"/></joint>
</robot>""")
    node = ros.start_node("panda_like", {"robot_description": urdf})
    model = load_robot("panda_like")
    start = mid_range(model)
    node.publish_full_state(start)
    goal = clip(model, start + 0.2)
    world = model.tcp_transforms(goal)[0]
    fixture = make_transform(rpy_to_matrix(PANDA_FIXTURE_RPY), PANDA_FIXTURE_XYZ)
    local = np.linalg.inv(fixture) @ world

    for frame_id, pose in (("fixture_frame", local), ("panda_link0", world), ("", world)):
        response = node.solve(request(DirectionUpCandidate(targets=[target_msg("tool", pose, frame_id=frame_id)])))
        assert response.error_code == Response.SUCCESS, (frame_id, response.message)
        assert_reaches(model, response.results[0].joint_positions, {0: world})
    # The same numbers read as root coordinates are a different target.
    response = node.solve(request(DirectionUpCandidate(targets=[target_msg("tool", local)])))
    if response.success:
        with pytest.raises(AssertionError):
            assert_reaches(model, response.results[0].joint_positions, {0: world})
    # A link behind a movable joint is not a valid frame.
    response = node.solve(request(DirectionUpCandidate(targets=[target_msg("tool", world, frame_id="panda_link3")])))
    assert_rejected(response, Response.INVALID_FRAME, "panda_link3", "fixture_frame")


# ----------------------------------------------------------------------------- 5. streaming
def test_streaming_target_publishes_the_solution(ros):
    # Targets 0.2 rad apart per joint, one message each: steps the default limit would hold.
    node = ros.start_node("ur5_like", params={"streaming.max_joint_step": [1.0]})
    model = load_robot("ur5_like")
    node.publish_full_state(UR5_START)
    seen = []
    solve = node.node.solve

    def spy(req, resp):  # records what every ~/target message produced
        out = solve(req, resp)
        seen.append(out.error_code)
        return out

    node.node.solve = spy
    order = [model.joint_names.index(n) for n in node.node.get_parameter("command.joint_order").value]

    def command_q(msg):
        q = np.zeros(model.num_dofs)
        q[order] = msg.data
        return q

    goal = clip(model, UR5_START + 0.2)
    node.target_pub.publish(candidate_at(model, goal, ["tool"]))
    (command,) = node.wait_commands(1)
    assert seen == [Response.SUCCESS]
    assert_reaches(model, command_q(command), poses(model, goal), POSITION_TOL, FRAME_TOL)

    # Unreachable: solved, nothing published.
    node.target_pub.publish(unreachable_candidate(model, UR5_START, ["tool"]))
    wait_until(lambda: len(seen) == 2, what="the unreachable target to be solved")
    assert seen[1] == Response.NO_SOLUTION
    # Invalid (unknown end effector): rejected, nothing published.
    bad = candidate_at(model, goal, ["tool"])
    bad.targets[0].end_effector = "gripper"
    node.target_pub.publish(bad)
    wait_until(lambda: len(seen) == 3, what="the invalid target to be handled")
    assert seen[2] == Response.UNKNOWN_END_EFFECTOR
    # command.publish_streaming = false: solved, nothing published.
    assert node.set_param("command.publish_streaming", False).successful
    node.target_pub.publish(candidate_at(model, clip(model, UR5_START - 0.2), ["tool"]))
    wait_until(lambda: len(seen) == 4, what="the fourth target to be solved")
    assert seen[3] == Response.SUCCESS
    # Back on: the next command is for this target, so none came in between.
    assert node.set_param("command.publish_streaming", True).successful
    goal2 = clip(model, UR5_START + np.array([0.1, -0.1, 0.1, -0.1, 0.1, -0.1]))
    node.target_pub.publish(candidate_at(model, goal2, ["tool"]))
    commands = node.wait_commands(2)
    time.sleep(0.2)
    assert len(commands) == 2 and seen[4] == Response.SUCCESS
    assert_reaches(model, command_q(commands[1]), poses(model, goal2), POSITION_TOL, FRAME_TOL)


# ----------------------------------------------------------------------------- 6. processes
BAD_CONFIGS = {
    "unknown_robot": (["-p", "robot:=nope"], "robot"),
    "unknown_end_effector_link": (["--params-file", str(CONFIG_DIR / "ur5_like.yaml"),
                                   "-p", "end_effector.tool.link:=nope"], "end_effector.tool.link"),
    "malformed_robot_description": (["-p", "robot_description:=<robot name='x'><link name='a'>",
                                     "-p", "end_effectors:=[tool]", "-p", "end_effector.tool.link:=a"],
                                    "robot_description"),
    "zero_tolerance": (["-p", "solver.position_tol:=0.0"], "solver.position_tol"),
    "negative_tolerance": (["-p", "solver.frame_tol_rad:=-0.01"], "solver.frame_tol_rad"),
    "wrong_parameter_type": (["-p", "solver.max_iters:=many"], "solver.max_iters"),
    "unknown_active_joint": (["-p", "active_joints:=[waist_yaw_joint, nope]"], "active_joints"),
    "unknown_command_joint": (["--params-file", str(CONFIG_DIR / "ur5_like.yaml"),
                               "-p", "command.joint_order:=[nope]"], "command.joint_order"),
    "bad_command_type": (["-p", "command.type:=twist"], "command.type"),
    "zero_service_queue_depth": (["-p", "service_queue_depth:=0"], "service_queue_depth"),
}


@pytest.fixture(scope="module")
def bad_config_runs():
    """Every bad configuration started at once (they exit within a second or two)."""
    return run_bad_configs(BAD_CONFIGS)


@pytest.mark.without_kernels  # the node exits on its configuration, before any solve
@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_configuration_exits_1_with_one_line(bad_config_runs, case):
    code, output = bad_config_runs[case]
    assert_exit_1_with_one_line(code, output, BAD_CONFIGS[case][1])


def test_healthy_node_process_loads_yaml_and_exits_0_on_sigint_and_sigterm():
    """Two node processes (console entry point, --params-file) in private domains, the first on
    the events executor (DIRECTION_UP_IK_EXECUTOR), the second on the default one: the YAML
    values are served by ~/get_parameters; SIGINT and SIGTERM end them with exit code 0."""
    from rcl_interfaces.srv import GetParameters
    from rclpy.executors import SingleThreadedExecutor

    args = ["--params-file", str(CONFIG_DIR / "ur5_like.yaml")]
    first, second = NodeProcess(args, env={EXECUTOR_ENV: "events"}), NodeProcess(args)
    try:
        first.wait_ready()
        second.wait_ready()
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=first.domain)
        client_node = rclpy.create_node("param_client", context=context)
        try:
            client = client_node.create_client(GetParameters, "/direction_up_ik_node/get_parameters")
            assert client.wait_for_service(timeout_sec=120.0), first.output  # a hang catcher
            request = GetParameters.Request(names=[
                "robot", "command.type", "command.topic", "command.joint_order", "end_effector.tool.link",
                "solver.max_position_error", "solver.max_iters", "active_joints", "end_effectors"])
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(client_node)
            # A response sent before the node's writer has matched our reader is lost (more
            # likely on a loaded machine): ask again while unanswered, until a hang deadline.
            deadline = time.monotonic() + 120.0
            while True:
                future = client.call_async(request)
                executor.spin_until_future_complete(future, timeout_sec=5.0)
                if future.done() or time.monotonic() > deadline:
                    break
                client.remove_pending_request(future)
            executor.shutdown()
            assert future.done(), "no answer from ~/get_parameters"
            values = [value_of(v) for v in future.result().values]
        finally:
            client_node.destroy_node()
            rclpy.shutdown(context=context)
        assert values == ["ur5_like", "float64_multi_array", "/forward_position_controller/commands",
                          ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
                           "wrist_2_joint", "wrist_3_joint"], "tool0", 0.03, 32,
                          [],  # not in the YAML: the default, readable like any other
                          ["tool"]]

        first.send(signal.SIGINT)
        second.send(signal.SIGTERM)
        for proc in (first, second):
            assert proc.wait(timeout=120) == 0, proc.output  # a hang catcher (~1 s quiet)
            assert "Traceback" not in proc.output, proc.output
            assert "shutting down" in proc.output
    finally:
        first.kill()
        second.kill()


@pytest.mark.without_kernels  # the node exits on its configuration, before any solve
def test_an_unknown_executor_exits_1_with_one_line():
    node = NodeProcess(["--params-file", str(CONFIG_DIR / "ur5_like.yaml")], env={EXECUTOR_ENV: "fastest"})
    try:
        assert_exit_1_with_one_line(node.wait(), node.output, f"environment {EXECUTOR_ENV}")
        assert "single_threaded, events" in node.output
    finally:
        node.kill()


# ----------------------------------------------------------------------------- 7. demo
@pytest.mark.slow
def test_demo_main_job_exits_0_and_draws_its_plot(tmp_path):
    """``python -m direction_up_ik.demo --plot out.png`` (own process, private domain): the
    published command equals the chosen candidate, and the picture of it is written (one
    run for both: a demo run starts a node)."""
    import subprocess
    import sys

    out = tmp_path / "demo.png"
    # Hang catchers only (~8 s on a quiet machine; a node start on a loaded one takes far longer).
    command = [sys.executable, "-m", "direction_up_ik.demo", "--timeout", "300", "--plot", str(out)]
    result = subprocess.run(command, cwd=REPO, env=subprocess_env(private_domain_id()), capture_output=True,
                            text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "published command equals candidate" in result.stdout, output
    assert "Traceback" not in output
    assert f"wrote {out}" in result.stdout
    assert out.stat().st_size > 20_000
