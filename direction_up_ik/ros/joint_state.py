"""Latest joint state, merged by joint name (no ROS imports).

``sensor_msgs/JointState`` messages may be partial (one controller per arm) and
in any order: each message updates only the joints it names. Documented rules:

* a message whose ``position`` length differs from its ``name`` length is
  rejected as a whole (warning);
* NaN or infinite positions -- and those beyond float32's range (|v| > 3.4e38), which
  the solver's float32 joint state would turn into infinities -- are rejected joint by
  joint (warning), keeping the previous value of that joint;
* names the robot model does not know (grippers, wheels, mimic joints) are ignored;
* values are stored as received; limits are enforced when a solve starts
  (:meth:`JointStateStore.initial_state`).
"""

from __future__ import annotations

import math
import threading
from typing import List, Sequence, Tuple

import numpy as np

from ..core.errors import DirectionUpIKError
from ..core.limits import LIMIT_TOLERANCE, float32_within_limits  # noqa: F401 (re-exported)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _usable(value: float) -> bool:
    """Finite, and finite as the solver's float32 too (``math``: a scalar, called per joint)."""
    return math.isfinite(value) and abs(value) <= _FLOAT32_MAX


class JointStateError(DirectionUpIKError, ValueError):
    """A solve cannot start from the joint state. ``kind`` is "missing", "unknown",
    "invalid" or "out_of_limits"; the message names the joints."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class JointStateStore:
    """Thread-safe merge of joint-state messages into one (D,) vector.

    Args:
        joint_names: (D,) model joint names, ``RobotKinematics.joint_names`` order.
        lower, upper: (D,) limits (rad / m), +-inf for continuous joints.
        limit_tolerance: values at most this far (rad / m) beyond a limit are
            clamped onto it when a solve starts; farther ones are an error.
    """

    def __init__(self, joint_names: Sequence[str], lower: np.ndarray, upper: np.ndarray,
                 limit_tolerance: float = LIMIT_TOLERANCE) -> None:
        self.joint_names = tuple(joint_names)
        self._index = {n: i for i, n in enumerate(self.joint_names)}
        self._lower = np.asarray(lower, dtype=np.float64)
        self._upper = np.asarray(upper, dtype=np.float64)
        self._lower_list, self._upper_list = self._lower.tolist(), self._upper.tolist()
        self.limit_tolerance = float(limit_tolerance)
        self._q = np.full(len(self.joint_names), np.nan)
        self._lock = threading.Lock()
        self.messages = 0

    def update(self, names: Sequence[str], positions: Sequence[float]) -> List[str]:
        """Merge one message. Returns warnings (empty when all was taken)."""
        if len(names) != len(positions):
            return [f"joint_states message ignored: {len(names)} names but {len(positions)} positions"]
        warnings = []
        with self._lock:
            for name, value in zip(names, positions):
                i = self._index.get(name)
                if i is None:
                    continue
                value = float(value)
                if not _usable(value):
                    warnings.append(f"joint_states: non-finite position {value} for '{name}' ignored"
                                    if not math.isfinite(value) else f"joint_states: position {value} for "
                                    f"'{name}' beyond float32's range ignored")
                    continue
                self._q[i] = value
            self.messages += 1
        return warnings

    def latest(self) -> np.ndarray:
        """(D,) copy of the merged state; NaN for joints never received."""
        with self._lock:
            return self._q.copy()

    def initial_state(self, override_names: Sequence[str] = (),
                      override_positions: Sequence[float] = ()) -> Tuple[np.ndarray, List[str]]:
        """The state a solve starts from: latest values, overridden by name.

        Returns:
            (q, notes): (D,) float64 within the limits; notes on clamped joints.
        Raises:
            JointStateError: unknown override names, mismatched lengths, non-finite
                overrides, joints never received, values beyond the tolerance.
        """
        if len(override_names) != len(override_positions):
            raise JointStateError("invalid", f"initial_state has {len(override_names)} names but "
                                             f"{len(override_positions)} positions")
        if len(override_names) == len(self.joint_names) and tuple(override_names) == self.joint_names:
            # Every joint in model order (a streamed solve's start): the values as they are.
            q = np.array(override_positions, dtype=np.float64)
            if (np.abs(q) <= _FLOAT32_MAX).all():  # NaN fails too
                override_names = ()
            else:
                q = self.latest()  # the loop below names the first bad value
        else:
            q = self.latest()
        if override_names and len(set(override_names)) != len(override_names):
            raise JointStateError("invalid", "initial_state.name lists a joint twice")
        for name, value in zip(override_names, override_positions):
            i = self._index.get(name)
            if i is None:
                raise JointStateError("unknown", f"initial_state names unknown joint '{name}'; "
                                                 f"joints: {list(self.joint_names)}")
            if not _usable(value):
                raise JointStateError("invalid", f"initial_state position of '{name}' is not finite "
                                                 f"(or beyond float32's range): {value}")
            q[i] = float(value)
        values = q.tolist()
        if all(lo <= v <= hi for v, lo, hi in zip(values, self._lower_list, self._upper_list)):
            return q, []  # the common case: every joint received and within its limits (NaN fails)
        unset = np.isnan(q)
        if unset.any():
            missing = [self.joint_names[i] for i in np.flatnonzero(unset)]
            raise JointStateError("missing", f"no position received yet for joints {missing} "
                                             "(publish joint_states or pass initial_state)")
        below = q < self._lower - self.limit_tolerance
        above = q > self._upper + self.limit_tolerance
        if np.any(below | above):
            i = int(np.flatnonzero(below | above)[0])
            raise JointStateError(
                "out_of_limits", f"joint '{self.joint_names[i]}' is at {q[i]:.6g}, outside its limits "
                                 f"[{self._lower[i]:.6g}, {self._upper[i]:.6g}] by more than "
                                 f"{self.limit_tolerance:g}")
        clamped = np.clip(q, self._lower, self._upper)
        notes = [f"joint '{self.joint_names[i]}' clamped from {q[i]:.6g} to its limit {clamped[i]:.6g}"
                 for i in np.flatnonzero(clamped != q)]
        return clamped, notes
