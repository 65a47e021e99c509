"""Helpers shared by the tests (importable as ``helpers``; see pythonpath in setup.cfg)."""

from __future__ import annotations

import numpy as np

from direction_up_ik import DirectionUpTarget
from direction_up_ik.core.kinematics import mid_range, random_in_limits  # noqa: F401 (re-exported)
from direction_up_ik.core.targets import full_pose_candidates

#: (n, D) random in-limit joint states (the benchmarks' name for ``random_in_limits``).
random_configurations = random_in_limits


def reachable_candidates(robot, configurations: np.ndarray) -> list:
    """One full-pose candidate (every EE, TCP convention) per configuration (n, D): the poses
    the TCPs reach there, so every candidate is reachable."""
    return full_pose_candidates(robot.tcp_transforms(configurations))


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


def relay_never_started(alone, group: np.ndarray, quota: np.ndarray) -> np.ndarray:
    """(B,) bool: the rows a relay of starts (``solve_problem(..., relay=(group, quota))``)
    never runs, given ``alone``, every row solved on its own. A run's starts are tried in
    order; a start within tolerance as given counts from the outset; once quota of the run
    converged, its later starts never start. Every other row is its solve alone."""
    as_given = (alone.iterations == 0) & (alone.success == 1)
    never = np.zeros(len(group), dtype=bool)
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        won = int(np.sum(as_given[rows]))
        for i in rows:
            if as_given[i]:
                continue
            if won >= quota[i]:
                never[i] = True
            else:
                won += int(alone.success[i])
    return never
