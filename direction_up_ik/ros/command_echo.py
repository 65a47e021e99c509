"""``command_echo``: a stand-in robot and controller for demos without hardware.

Subscribes to the solver's joint command, in the form the node publishes it
(``command.type``), and publishes the commanded positions back as ``joint_states`` at a
fixed rate, starting from the middle of the joint limits, so that
``robot_state_publisher`` and RViz show the robot "moving" to every published solution
and the solver always has a current state:

* ``joint_state``: ``sensor_msgs/JointState``, joints by name;
* ``joint_trajectory``: ``trajectory_msgs/JointTrajectory``, joints by name; the robot jumps
  to the last point (the node sends one);
* ``float64_multi_array``: ``std_msgs/Float64MultiArray`` (forward_command_controller), the
  values in ``joint_order``.

Parameters (read-only): ``robot`` (bundled robot name, for the joint names and start pose),
``command_type`` (default ``joint_state``), ``command_topic`` (default
``/direction_up_ik_node/joint_command``), ``joint_order`` (``float64_multi_array`` only;
empty = the model's joint order), ``rate_hz`` (default 50).
:func:`direction_up_ik.ros.config.command_echo_parameters` derives the first three from the
node's parameters (``demo.launch.py`` does). Bad parameters: one log line naming the
parameter, exit code 1.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from ..core.kinematics import mid_range
from ..robots import BUNDLED_ROBOTS, DEFAULT_ROBOT, bundled_robot
from .config import COMMAND_TYPES, ConfigError
from .log_throttle import LogThrottle
from .process import run_node

_MESSAGE_TYPES = {"joint_state": JointState, "joint_trajectory": JointTrajectory,
                  "float64_multi_array": Float64MultiArray}


def _read_only(description: str, **kwargs) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, read_only=True, **kwargs)


class CommandEcho(Node):
    """Republish the last joint command as the robot's joint state.

    Raises ConfigError from the constructor on bad parameters.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("command_echo", **kwargs)
        self._log_throttle = LogThrottle()
        robot_name = self.declare_parameter(
            "robot", DEFAULT_ROBOT, _read_only(f"bundled robot name: {', '.join(sorted(BUNDLED_ROBOTS))}")).value
        self._type = self.declare_parameter(
            "command_type", "joint_state",
            _read_only(f"message type of the command: {', '.join(COMMAND_TYPES)}")).value
        topic = self.declare_parameter(
            "command_topic", "/direction_up_ik_node/joint_command",
            _read_only("topic of the command to echo")).value
        order = self.declare_parameter(  # by type: an empty list has no element type
            "joint_order", Parameter.Type.STRING_ARRAY,
            _read_only("float64_multi_array: joint of each value; unset or empty = the model's "
                       "joint order")).value or []
        rate = self.declare_parameter(
            "rate_hz", 50.0, _read_only("joint_states publishing rate, Hz",
                                        floating_point_range=[FloatingPointRange(
                                            from_value=1.0, to_value=1000.0)])).value
        if robot_name not in BUNDLED_ROBOTS:
            raise ConfigError("robot", f"unknown bundled robot {robot_name!r}; choose one of "
                                       f"{sorted(BUNDLED_ROBOTS)}")
        if self._type not in COMMAND_TYPES:
            raise ConfigError("command_type", f"must be one of {list(COMMAND_TYPES)}, got {self._type!r}")
        model = bundled_robot(robot_name).load()
        self._names = list(model.joint_names)
        self._order = [n for n in order if n] or list(self._names)
        unknown = [n for n in self._order if n not in self._names]
        if unknown:
            raise ConfigError("joint_order", f"unknown joints {unknown}; joints: {self._names}")
        self._positions = dict(zip(self._names, mid_range(model)))
        self._pub = self.create_publisher(JointState, "joint_states", 10)
        handler = {"joint_state": self._on_joint_state, "joint_trajectory": self._on_trajectory,
                   "float64_multi_array": self._on_array}[self._type]
        self._sub = self.create_subscription(_MESSAGE_TYPES[self._type], topic, handler, 10)
        self.create_timer(1.0 / rate, self._publish)
        self.get_logger().info(f"echoing {self._type} commands on {self._sub.topic_name} as "
                               f"{self._pub.topic_name} of robot '{robot_name}'")

    def _take(self, names: Sequence[str], positions: Sequence[float]) -> None:
        """Move the named joints; a message whose lists differ in length is ignored."""
        if len(names) != len(positions):
            if self._log_throttle.due("lengths", 5.0):
                self.get_logger().warning(f"{self._type} command ignored: {len(names)} joints, "
                                          f"{len(positions)} positions")
            return
        for name, value in zip(names, positions):
            if name in self._positions and np.isfinite(value):
                self._positions[name] = float(value)

    def _on_joint_state(self, msg: JointState) -> None:
        self._take(msg.name, msg.position)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if msg.points:
            self._take(msg.joint_names, msg.points[-1].positions)

    def _on_array(self, msg: Float64MultiArray) -> None:
        self._take(self._order, msg.data)

    def _publish(self) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self._names
        msg.position = [self._positions[n] for n in self._names]
        self._pub.publish(msg)


def main(args: Optional[List[str]] = None) -> int:
    """Console entry point: echo until SIGINT/SIGTERM (exit 0); exit 1 on bad parameters."""
    return run_node(CommandEcho, "command_echo", args)


if __name__ == "__main__":
    sys.exit(main())
