"""The node's joint command: positions published in the configured message type (``command.*``).

``sensor_msgs/JointState`` (positions by name), ``trajectory_msgs/JointTrajectory`` (one point
at ``command.time_from_start``) or ``std_msgs/Float64MultiArray`` (positions in
``command.joint_order``, for a forward_command_controller). Every published command is
recorded in the node's ``CommandMemory`` (:mod:`.streaming`: a stream's start, counters).
"""

from __future__ import annotations

import threading
import time
from typing import Mapping, Sequence

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from .config import NodeConfig
from .streaming import CommandMemory

#: The message type of each ``command.type`` (``config.COMMAND_TYPES``).
MESSAGE_TYPES = {"joint_state": JointState, "joint_trajectory": JointTrajectory,
                 "float64_multi_array": Float64MultiArray}


class CommandOutput:
    """The command publisher of ``node`` (an rclpy Node) for ``config.command_type`` on
    ``config.command_topic`` (both read-only parameters), recording into ``memory``."""

    def __init__(self, node, config: NodeConfig, memory: CommandMemory) -> None:
        self.publisher = node.create_publisher(MESSAGE_TYPES[config.command_type], config.command_topic, 10)
        self._clock = node.get_clock()
        self._memory = memory
        # joint_state, the streaming default: one kept message, filled and published under the
        # lock (publish serialises it at once), instead of a JointState, Header and Time each time.
        self._joint_state, self._lock = JointState(), threading.Lock()

    def publish(self, q: np.ndarray, config: NodeConfig, joint_names: Sequence[str],
                joint_ids: Mapping[str, int]) -> None:
        """Publish joint positions ``q`` (D,) of ``joint_names`` (the model's order;
        ``joint_ids`` name -> index) as ``config`` (the live snapshot) says."""
        names = list(joint_names)
        if config.command_type == "joint_state":
            with self._lock:
                msg = self._joint_state
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(self._clock.now().nanoseconds,
                                                                        1_000_000_000)
                msg.name, msg.position = names, q.tolist()
                self.publisher.publish(msg)
        else:
            if config.command_type == "joint_trajectory":
                msg = JointTrajectory()
                msg.header.stamp = self._clock.now().to_msg()
                msg.joint_names = names
                point = JointTrajectoryPoint()
                point.positions = q.tolist()
                sec, nanosec = divmod(int(round(config.command_time_from_start * 1e9)), 1_000_000_000)
                point.time_from_start.sec, point.time_from_start.nanosec = sec, nanosec
                msg.points = [point]
            else:
                order = config.command_joint_order or tuple(names)
                msg = Float64MultiArray()
                msg.data = [float(q[joint_ids[n]]) for n in order]
            self.publisher.publish(msg)
        self._memory.record(q, time.monotonic())
