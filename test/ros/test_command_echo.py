"""command_echo republishes joint commands as joint_states (real rclpy, in-process)."""

import os
import time

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from direction_up_ik.robots import load_robot  # noqa: E402
from direction_up_ik.ros.command_echo import CommandEcho  # noqa: E402


def test_echoes_the_last_command_as_joint_states(monkeypatch):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID", "77")))
    try:
        echo = CommandEcho(context=context, parameter_overrides=[
            rclpy.parameter.Parameter("robot", value="panda_like"),
            rclpy.parameter.Parameter("command_topic", value="/test_echo/joint_command")])
        peer = rclpy.create_node("echo_peer", context=context)
        states = []
        peer.create_subscription(JointState, "joint_states", states.append, 10)
        command_pub = peer.create_publisher(JointState, "/test_echo/joint_command", 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(echo)
        executor.add_node(peer)
        names = list(load_robot("panda_like").joint_names)

        def spin_until(predicate, timeout=120.0):  # a hang catcher: ~0.1 s on a quiet machine
            end = time.monotonic() + timeout
            while not predicate() and time.monotonic() < end:
                executor.spin_once(timeout_sec=0.02)
            return predicate()

        assert spin_until(lambda: len(states) > 0)
        assert list(states[-1].name) == names
        assert states[-1].position[3] == pytest.approx((-3.0718 - 0.0698) / 2)  # mid-range start

        command = JointState(name=[names[0], names[3], "unknown_joint"], position=[0.5, -1.0, 9.0])
        assert spin_until(lambda: (command_pub.publish(command) or True)
                          and states[-1].position[0] == pytest.approx(0.5))
        assert states[-1].position[3] == pytest.approx(-1.0)
        assert len(states[-1].position) == len(names)
        executor.shutdown()
        echo.destroy_node()
        peer.destroy_node()
    finally:
        rclpy.shutdown(context=context)
