"""Helpers shared by the tests (importable as ``helpers``; see pythonpath in setup.cfg)."""

from __future__ import annotations

import numpy as np

from direction_up_ik import DirectionUpTarget


def mid_range(robot) -> np.ndarray:
    """(D,) middle of the limits (0 for unbounded joints)."""
    lo, hi = robot.lower_limits, robot.upper_limits
    bounded = np.isfinite(lo) & np.isfinite(hi)
    return np.where(bounded, 0.5 * (np.where(bounded, lo, 0.0) + np.where(bounded, hi, 0.0)), 0.0)


def random_in_limits(robot, rng, n: int) -> np.ndarray:
    """(n, D) random joint states within the limits (+-pi for unbounded joints)."""
    lo = np.where(np.isfinite(robot.lower_limits), robot.lower_limits, -np.pi)
    hi = np.where(np.isfinite(robot.upper_limits), robot.upper_limits, np.pi)
    return rng.uniform(lo, hi, size=(n, robot.num_dofs))


def targets_at(robot, q: np.ndarray, ee_ids=None, tcp_convention: bool = True):
    """Full-pose targets that the TCPs reach at joint state ``q`` (D,): one candidate."""
    tcp = robot.tcp_transforms(q)
    ee_ids = range(robot.num_end_effectors) if ee_ids is None else ee_ids
    out = []
    for e in ee_ids:
        rot, pos = tcp[e, :3, :3], tcp[e, :3, 3]
        if tcp_convention:
            out.append(DirectionUpTarget(e, pos, rot[:, 2], rot[:, 1], None, None))
        else:
            out.append(DirectionUpTarget(e, pos, rot[:, 0], rot[:, 1]))
    return tuple(out)
