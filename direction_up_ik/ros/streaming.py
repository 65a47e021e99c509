"""Streamed commands without joint jumps (``~/target`` and marker drags); no ROS imports.

Teleoperation streams targets at 100-500 Hz while the joint states lag the commands by a
controller cycle or more (or never move, with no robot behind the command). Two rules
(``streaming.*`` parameters, docs/design.md "Streaming"):

* **Start**: a streamed solve starts from the last command the node published, while that
  command is at most ``streaming.last_command_timeout`` s old (``streaming.start_from`` =
  ``last_command``), else from the joint states. Each command of a stream thus starts from
  the one before, and after a pause the robot's own state is the start again.
* **Step limit**: a solution whose joints move more than ``streaming.max_joint_step`` (rad
  or m per command, one value or one per joint) from that start is not published. The node
  then **approaches** the target: sub-targets on the way from the TCPs at the start to it
  (:func:`approach_steps`, :func:`slerp`), each solved from the one before, and publishes the
  farthest whose solution stays within the limit of the start (and of the sub-step before):
  the robot catches up along a continuous path, a step per command. When not even the first
  sub-step is continuous the command is held: counted, and a warning names the joint.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

START_FROM_CHOICES = ("last_command", "joint_states")
#: Spacing of an approach's sub-targets, m and rad (a step of the arm's joints well inside
#: the default limit at arm-length levers), and the most sub-targets of one approach.
APPROACH_STEP_M = 0.01
APPROACH_STEP_RAD = 0.03
MAX_APPROACH_STEPS = 100


@dataclass(frozen=True)
class Jump:
    """A step beyond the limit: joint index, its step (rad or m, signed) and its limit."""

    joint: int
    step: float
    limit: float


@dataclass(frozen=True)
class StreamOutcome:
    """What a streamed solve (``DirectionUpIKNode.stream``) did.

    Attributes:
        response: the SolveDirectionUpIK response (``success``: a candidate met the tolerances).
        start: (D,) joint state it started from (rad / m), or None when rejected before.
        jump: the step beyond ``streaming.max_joint_step`` that held the solution, or None.
        published: whether a command went out.
        command: (D,) the command published, or None; a step of an approach when
            ``approach`` < 1, else the solution of ``response``.
        approach: fraction of the way to the target the command solves (1: the target).
    """

    response: Any  # SolveDirectionUpIK.Response (this module imports no messages)
    start: Optional[np.ndarray]
    jump: Optional[Jump]
    published: bool
    command: Optional[np.ndarray] = None
    approach: float = 1.0

    @property
    def held(self) -> bool:
        return self.jump is not None


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


def first_jump(start, solution, limits) -> Optional[Jump]:
    """The joint whose step from ``start`` to ``solution`` (both (D,), finite) exceeds its limit
    (``limits`` (D,), > 0) by the most relative to the limit, the first of equals; None when
    every step is within its limit. On Python floats: it runs for every streamed command."""
    start, solution, limits = _floats(start), _floats(solution), _floats(limits)
    worst, joint = 1.0, -1
    for i, limit in enumerate(limits):
        over = abs(solution[i] - start[i]) / limit
        if over > worst:
            worst, joint = over, i
    if joint < 0:
        return None
    return Jump(joint, solution[joint] - start[joint], limits[joint])


def _floats(values) -> list:
    """``values`` (D,) as a list of Python floats."""
    return values.tolist() if isinstance(values, np.ndarray) else [float(v) for v in values]


def slerp(a: np.ndarray, b: np.ndarray, s: float) -> np.ndarray:
    """The unit vector a fraction ``s`` in [0, 1] of the way from unit ``a`` to unit ``b`` (3,)
    along the great circle (opposite vectors: about an axis normal to ``a``)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    axis = np.cross(a, b)
    sin, cos = float(np.linalg.norm(axis)), float(np.dot(a, b))
    total = math.atan2(sin, cos)
    if sin < 1e-12:
        if cos > 0.0:
            return b.copy()
        axis = np.cross(a, (1.0, 0.0, 0.0) if abs(a[0]) < 0.9 else (0.0, 1.0, 0.0))
    axis /= np.linalg.norm(axis)
    angle = s * total
    # Rodrigues: a turned by angle about axis (axis is normal to a).
    return a * math.cos(angle) + np.cross(axis, a) * math.sin(angle)


def approach_steps(starts, targets) -> int:
    """Sub-targets of an approach from ``starts`` to ``targets`` (per end effector
    ``(position (3,), direction (3,) or None, up (3,) or None)``, None where the mode leaves the
    axis free): enough for APPROACH_STEP_M / APPROACH_STEP_RAD each, 1 to MAX_APPROACH_STEPS."""
    need = 1.0
    for (p0, d0, u0), (p1, d1, u1) in zip(starts, targets):
        need = max(need, float(np.linalg.norm(np.subtract(p1, p0))) / APPROACH_STEP_M)
        for v0, v1 in ((d0, d1), (u0, u1)):
            if v0 is not None and v1 is not None:
                angle = math.acos(max(-1.0, min(1.0, float(np.dot(v0, v1)))))
                need = max(need, angle / APPROACH_STEP_RAD)
    return int(min(MAX_APPROACH_STEPS, math.ceil(need - 1e-9)))


class CommandMemory:
    """The last published command and the streaming counters (thread-safe).

    ``published`` counts every command, ``held`` the streamed solutions not published
    because of the step limit, ``approached`` the streamed commands that are a step of an
    approach toward a target whose own solution was too far.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._q: Optional[np.ndarray] = None
        self._time = 0.0
        self.published = 0
        self.held = 0
        self.approached = 0

    def record(self, q: np.ndarray, now: float) -> None:
        """A command ``q`` (D,) was published at ``now`` (monotonic seconds)."""
        with self._lock:
            self._q, self._time = np.array(q, dtype=np.float64), now
            self.published += 1

    def count_held(self) -> int:
        with self._lock:
            self.held += 1
            return self.held

    def count_approached(self) -> int:
        with self._lock:
            self.approached += 1
            return self.approached

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
