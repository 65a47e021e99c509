"""Helpers shared by the tests (importable as ``helpers``; see pythonpath in setup.cfg)."""

from __future__ import annotations

import numpy as np

from direction_up_ik import DirectionUpTarget
from direction_up_ik.core.kinematics import mid_range, random_in_limits  # noqa: F401 (re-exported)


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
