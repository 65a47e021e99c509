"""``command_echo``: a stand-in robot for demos without hardware.

Subscribes to the solver's ``sensor_msgs/JointState`` command and publishes it
back as ``joint_states`` at a fixed rate, starting from the middle of the joint
limits, so that ``robot_state_publisher`` and RViz show the robot "moving" to
every published solution and the solver always has a current state.

Parameters: ``robot`` (bundled robot name, for the joint names and start pose),
``command_topic`` (default ``/direction_up_ik_node/joint_command``),
``rate_hz`` (default 50).
"""

from __future__ import annotations

import sys
from typing import List, Optional

import numpy as np
import rclpy
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from ..core.kinematics import mid_range
from ..robots import DEFAULT_ROBOT, bundled_robot


class CommandEcho(Node):
    """Republish the last joint command as the robot's joint state."""

    def __init__(self, **kwargs) -> None:
        super().__init__("command_echo", **kwargs)
        robot_name = self.declare_parameter(
            "robot", DEFAULT_ROBOT, ParameterDescriptor(description="bundled robot name",
                                                        read_only=True)).value
        topic = self.declare_parameter(
            "command_topic", "/direction_up_ik_node/joint_command",
            ParameterDescriptor(description="sensor_msgs/JointState command to echo",
                                read_only=True)).value
        rate = self.declare_parameter(
            "rate_hz", 50.0, ParameterDescriptor(
                description="joint_states publishing rate, Hz", read_only=True,
                floating_point_range=[FloatingPointRange(from_value=1.0, to_value=1000.0)])).value
        model = bundled_robot(robot_name).load()
        self._names = list(model.joint_names)
        self._positions = dict(zip(self._names, mid_range(model)))
        self._pub = self.create_publisher(JointState, "joint_states", 10)
        self.create_subscription(JointState, topic, self._on_command, 10)
        self.create_timer(1.0 / rate, self._publish)

    def _on_command(self, msg: JointState) -> None:
        if len(msg.name) != len(msg.position):
            return
        for name, value in zip(msg.name, msg.position):
            if name in self._positions and np.isfinite(value):
                self._positions[name] = float(value)

    def _publish(self) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self._names
        msg.position = [self._positions[n] for n in self._names]
        self._pub.publish(msg)


def main(args: Optional[List[str]] = None) -> int:
    rclpy.init(args=args)
    node = CommandEcho()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
