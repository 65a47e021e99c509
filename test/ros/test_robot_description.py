"""The robot model as a cell provides it: from ``robot_description_topic`` (std_msgs/String,
transient local, as robot_state_publisher publishes it) and from a xacro ``urdf_path`` with
``xacro_args``."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("xacro")

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from direction_up_ik.robots import bundled_robot, load_robot  # noqa: E402
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from helpers import mid_range, write_xacro_robot  # noqa: E402
from node_harness import (CONFIG_DIR, NodeProcess, assert_exit_1_with_one_line, assert_reaches,  # noqa: E402
                          candidate_at, request, run_bad_configs, wait_until)

Response = SolveDirectionUpIK.Response
PANDA = load_robot("panda_like")
PANDA_URDF = bundled_robot("panda_like").urdf_path().read_text(encoding="utf-8")
UR5_URDF = bundled_robot("ur5_like").urdf_path().read_text(encoding="utf-8")  # no link panda_link0
NO_HAND_URDF = PANDA_URDF.replace('"panda_hand"', '"panda_gripper"')  # no end_effector.tool.link
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _description_publisher(ros, topic: str):
    return ros.client_node.create_publisher(String, topic, LATCHED)


def _publish(node, publisher, text: str) -> None:
    """Publish a description and wait until the node has handled it."""
    before = node.node.descriptions_received
    publisher.publish(String(data=text))
    wait_until(lambda: node.node.descriptions_received > before, what="the description to be handled")


def _solve_at_mid_range(node):
    q = mid_range(PANDA)
    return node.solve(request(candidate_at(PANDA, q, node.ee_names), initial_state=_state(q + 0.05)))


def _state(q):
    from sensor_msgs.msg import JointState
    return JointState(name=list(PANDA.joint_names), position=[float(v) for v in q])


def test_the_node_waits_for_the_topic_and_keeps_its_first_valid_model(ros):
    """Before a model: NO_ROBOT_MODEL naming the topic, joint states and targets ignored. A
    description that does not parse, or lacks the configured end-effector link, is refused and
    the node keeps waiting; the first valid one is the model; a later different one is refused
    and the model stays."""
    node = ros.start_node("panda_like", params={"robot_description_topic": "robot_description"})
    topic = f"{node.namespace}/robot_description"
    response = node.solve(request(candidate_at(PANDA, mid_range(PANDA), ["tool"])))
    assert response.error_code == Response.NO_ROBOT_MODEL and not response.success
    assert topic in response.message and "robot_description_topic" in response.message
    node.state_pub.publish(_state(mid_range(PANDA)))           # no model: ignored, no error
    # Joint names cannot be checked yet: taken now, checked against the model when it arrives.
    assert node.set_param("active_joints", ["panda_joint1", "panda_joint2"]).successful
    assert not node.set_param("streaming.max_joint_step", [0.0]).successful  # the rule alone is checked
    node.node._on_target(candidate_at(PANDA, mid_range(PANDA), ["tool"]))  # NO_ROBOT_MODEL, logged
    assert node.commands == [] and node.node._robot is None

    publisher = _description_publisher(ros, topic)
    wait_until(lambda: publisher.get_subscription_count() >= 1, what="the description subscription")
    _publish(node, publisher, "not a robot description")
    _publish(node, publisher, UR5_URDF)  # parses, but has no panda_link0 (root_link)
    _publish(node, publisher, NO_HAND_URDF)  # has no panda_hand (end_effector.tool.link)
    assert node.node._robot is None
    assert node.solve(request(candidate_at(PANDA, mid_range(PANDA), ["tool"]))).error_code == Response.NO_ROBOT_MODEL

    assert node.set_param("active_joints", []).successful
    _publish(node, publisher, PANDA_URDF)
    assert node.node._robot is not None and node.joint_names == list(PANDA.joint_names)
    response = _solve_at_mid_range(node)
    assert response.error_code == Response.SUCCESS, response.message
    assert_reaches(PANDA, response.results[0].joint_positions,
                   {0: PANDA.tcp_transforms(mid_range(PANDA))[0]})

    # A different description later: refused, the panda model stays and keeps serving.
    changed = PANDA_URDF.replace('name="panda_like"', 'name="panda_other"', 1)
    assert changed != PANDA_URDF
    robot = node.node._robot
    _publish(node, publisher, changed)
    _publish(node, publisher, UR5_URDF)
    assert node.node._robot is robot and robot.robot_name == "panda_like"
    assert _solve_at_mid_range(node).error_code == Response.SUCCESS


def test_a_description_published_before_the_node_starts_is_received(ros):
    """Transient local: robot_state_publisher publishes once at start-up; a node started later
    still gets it."""
    topic = "/t_latched_description"
    publisher = _description_publisher(ros, topic)
    publisher.publish(String(data=PANDA_URDF))
    node = ros.start_node("panda_like", params={"robot_description_topic": topic})
    wait_until(lambda: node.node.descriptions_received == 1, what="the latched description")
    assert node.node._robot is not None
    assert _solve_at_mid_range(node).error_code == Response.SUCCESS


def test_waiting_refusing_and_coming_up_are_logged(ros_context):
    """The log lines of a node process (the reasons, never an exit): waiting, a refused
    description with the missing link, ready, a changed description refused; SIGINT exits 0."""
    process = NodeProcess(["--params-file", str(CONFIG_DIR / "panda_like.yaml"),
                           "-p", "robot_description_topic:=/cell/robot_description"])
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=process.domain)
    client = rclpy.create_node("description_publisher", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(client)
    try:
        wait_until(lambda: "waiting for the robot description on '/cell/robot_description'" in process.output
                   or process.proc.poll() is not None, what="the waiting line", period=0.05)
        assert "waiting for the robot description" in process.output, process.output
        publisher = client.create_publisher(String, "/cell/robot_description", LATCHED)

        def publish_and_wait(text, words):
            publisher.publish(String(data=text))
            wait_until(lambda: (executor.spin_once(timeout_sec=0.01) or True) and words in process.output
                       or process.proc.poll() is not None, what=repr(words), period=0.01)
            assert words in process.output, process.output
        publish_and_wait(NO_HAND_URDF, "refused: parameter 'end_effector.tool.link'")
        assert "panda_hand" in process.output and "still waiting for a valid one" in process.output
        publish_and_wait("<robot name='x'><link name='a'>", "refused: parameter 'robot_description_topic': urdf")
        publish_and_wait(PANDA_URDF, "ready: robot 'panda_like'")
        publish_and_wait(UR5_URDF, "changed: refused, the node keeps robot 'panda_like'")
        assert "Traceback" not in process.output and process.proc.poll() is None
        process.send(signal.SIGINT)
        assert process.wait() == 0, process.output
    finally:
        process.kill()
        executor.shutdown(timeout_sec=1.0)
        client.destroy_node()
        rclpy.shutdown(context=context)


# ----------------------------------------------------------------------------- xacro urdf_path
def test_a_xacro_urdf_path_with_arguments(ros, tmp_path, monkeypatch):
    """The sample xacro robot (helpers.write_xacro_robot: macros, args, an include, $(find))."""
    path, prefix = write_xacro_robot(tmp_path)
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join([str(prefix), os.environ.get("AMENT_PREFIX_PATH", "")]))
    node = ros.start_node("panda_like", from_yaml=False, params={
        "urdf_path": str(path), "xacro_args": ["dof:=4", "prefix:=cell_"], "end_effectors": ["tool"],
        "end_effector.tool.link": "cell_tool"})
    assert node.joint_names == ["cell_joint_1", "cell_joint_2", "cell_joint_3", "cell_joint_4"]
    q = np.array([0.3, -0.4, 0.5, 0.2])
    model = node.node._robot
    node.publish_full_state(q + 0.05)
    response = node.solve(request(candidate_at(model, q, ["tool"], mode=2)))  # planar: position only
    assert response.error_code == Response.SUCCESS, response.message


def test_a_xacro_urdf_path_is_expanded_once_for_model_and_collision_scene(ros, tmp_path, monkeypatch):
    """The model and the collision scene read the same expansion (xacro is slow on big robots)."""
    import xacro
    path, prefix = write_xacro_robot(tmp_path)
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join([str(prefix), os.environ.get("AMENT_PREFIX_PATH", "")]))
    calls = []
    expand = xacro.process_file
    monkeypatch.setattr(xacro, "process_file", lambda *a, **k: calls.append(a) or expand(*a, **k))
    node = ros.start_node("panda_like", from_yaml=False, params={
        "urdf_path": str(path), "xacro_args": ["dof:=4", "prefix:=cell_"], "end_effectors": ["tool"],
        "end_effector.tool.link": "cell_tool", "collision.enabled": True})
    assert node.node._scene is not None  # built from the URDF text too
    assert len(calls) == 1, calls


@pytest.fixture(scope="module")
def bad_xacro_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_xacro")
    broken = folder / "broken.urdf.xacro"
    broken.write_text('<robot name="b" xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="$(arg who)"/></robot>')
    plain = ["-p", "end_effectors:=[tool]", "-p", "end_effector.tool.link:=tool"]
    runs = run_bad_configs({
        "xacro_error": (["-p", f"urdf_path:={broken}", *plain], "urdf_path"),
        "missing_xacro": (["-p", f"urdf_path:={folder / 'none.urdf.xacro'}", *plain], "urdf_path"),
        "malformed_xacro_args": (["-p", f"urdf_path:={broken}", "-p", "xacro_args:=[who]", *plain], "xacro_args"),
    })
    return broken, folder, runs


@pytest.mark.without_kernels  # the node exits on its configuration, before any solve
@pytest.mark.parametrize("case", ["xacro_error", "missing_xacro", "malformed_xacro_args"])
def test_a_bad_xacro_exits_1_with_one_line_naming_the_file(bad_xacro_runs, case):
    broken, folder, runs = bad_xacro_runs
    code, output = runs[case]
    parameter = "xacro_args" if case == "malformed_xacro_args" else "urdf_path"
    assert_exit_1_with_one_line(code, output, parameter)
    (line,) = [line for line in output.splitlines() if "invalid configuration" in line]
    expected = {"xacro_error": [f"xacro: '{broken}'", "Undefined substitution argument who"],
                "missing_xacro": [f"xacro: '{folder / 'none.urdf.xacro'}'", "No such file"],
                "malformed_xacro_args": ["xacro_args[0]", "name:=value"]}[case]
    assert all(words in line for words in expected), line
