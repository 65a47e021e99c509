"""Streamed commands without joint jumps (``~/target`` and marker drags); no ROS imports.

Teleoperation streams targets at 100-500 Hz while the joint states lag the commands by a
controller cycle or more (or never move, with no robot behind the command). Two rules
(``streaming.*`` parameters, docs/design.md "Streaming"):

* **Start**: a streamed solve starts from the last command the node published, while that
  command is at most ``streaming.last_command_timeout`` s old (``streaming.start_from`` =
  ``last_command``), else from the joint states. Each command of a stream thus starts from
  the one before, and after a pause the robot's own state is the start again.
* **Step limit**: a solution whose joints move more than ``streaming.max_joint_step`` (rad
  or m per command, one value or one per joint) from that start is held: not published,
  counted, and a warning names the joint. The next target is solved from the same start,
  so the stream goes on as soon as a continuous solution exists.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

START_FROM_CHOICES = ("last_command", "joint_states")


@dataclass(frozen=True)
class Jump:
    """A step beyond the limit: joint index, its step (rad or m, signed) and its limit."""

    joint: int
    step: float
    limit: float


def step_limits(max_joint_step: Sequence[float], num_joints: int) -> np.ndarray:
    """(D,) per-joint step limits from ``streaming.max_joint_step``: one value for every
    joint, or one per joint (``RobotKinematics.joint_names`` order).

    Raises:
        ValueError: another length (the node reports it as the parameter's error).
    """
    values = np.asarray(list(max_joint_step), dtype=np.float64)
    if values.size == 1:
        return np.full(num_joints, float(values[0]))
    if values.size != num_joints:
        raise ValueError(f"needs 1 value or one per joint ({num_joints}), got {values.size}")
    return values


def first_jump(start: np.ndarray, solution: np.ndarray, limits: np.ndarray) -> Optional[Jump]:
    """The joint whose step from ``start`` to ``solution`` (both (D,)) exceeds its limit by the
    most (relative to the limit), or None when every step is within its limit."""
    steps = np.asarray(solution, dtype=np.float64) - np.asarray(start, dtype=np.float64)
    over = np.abs(steps) / limits
    i = int(np.argmax(over))
    if over[i] <= 1.0:
        return None
    return Jump(i, float(steps[i]), float(limits[i]))


class CommandMemory:
    """The last published command and the streaming counters (thread-safe).

    ``published`` counts every command, ``held`` the streamed solutions not published
    because of the step limit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._q: Optional[np.ndarray] = None
        self._time = 0.0
        self.published = 0
        self.held = 0

    def record(self, q: np.ndarray, now: float) -> None:
        """A command ``q`` (D,) was published at ``now`` (monotonic seconds)."""
        with self._lock:
            self._q, self._time = np.array(q, dtype=np.float64), now
            self.published += 1

    def count_held(self) -> int:
        with self._lock:
            self.held += 1
            return self.held

    def forget(self) -> None:
        """Start the next stream from the joint states (e.g. after a new robot model)."""
        with self._lock:
            self._q = None

    def last(self, now: float, timeout: float) -> Optional[Tuple[np.ndarray, float]]:
        """(q (D,), age s) of the last command if it is at most ``timeout`` s old (0 = any
        age), else None."""
        with self._lock:
            if self._q is None:
                return None
            age = now - self._time
            if timeout > 0.0 and age > timeout:
                return None
            return self._q.copy(), age
