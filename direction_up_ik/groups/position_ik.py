"""``moveit_msgs/srv/GetPositionIK`` served by planning-group IK, without importing moveit_msgs.

MoveIt's ``srv_kinematics_plugin/SrvKinematicsPlugin`` sends IK requests to a
GetPositionIK service (name from ``kinematics_solver_service_name``, default
``solve_ik``). :func:`solve_position_ik` does the whole request -> answer
conversion on duck-typed messages (``ik_request.group_name``,
``ik_request.robot_state.joint_state.name/position``, ``ik_request.pose_stamped``
or ``pose_stamped_vector`` + ``ik_link_names``, ``ik_request.timeout``), so it is
testable here; the node registers the service only when ``moveit_msgs`` imports.

The rules of ``moveit_msgs/PositionIKRequest`` (its field comments), as served here:

* ``pose_stamped`` is used when ``pose_stamped_vector`` is empty, else ignored;
* ``ik_link_name`` is optional (default: the group's tip) and ignored when ``ik_link_names``
  has elements; ``ik_link_names`` is optional too (default: the group's tips, in order);
* the links may be the group's tips (any order) or, for a one-tip group, one other link of its
  chain (e.g. ``panda_link8`` of a group whose tip is ``panda_hand``);
* poses are in the group's base frame (``header.frame_id`` empty or the base frame);
* ``timeout`` 0 (what srv_kinematics_plugin always sends) means the group's
  ``kinematics_solver_timeout``; every budget is capped by ``max_timeout``;
* ``avoid_collisions``: when true and the group's collision model is enabled
  (:meth:`GroupIK.enable_collisions`), only a collision-free solution is an answer (the
  search goes on while its solutions collide); the group model's joints outside the group
  stand as in ``robot_state``. False: answers are not checked. ``constraints`` are not read.

The answer carries the group's joint names and positions on success and neither on failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

import numpy as np

from .group_ik import GroupIK, MoveItErrorCode
from .kinematics_yaml import GroupKinematicsConfig, KinematicsYamlError

FRAME_TRANSFORM_FAILURE = -21


@dataclass(frozen=True)
class PositionIKAnswer:
    """What goes into the GetPositionIK response: ``solution.joint_state`` (names and positions,
    both empty unless SUCCESS), ``error_code.val`` and a message."""

    joint_names: List[str]
    positions: List[float]
    error_code: int
    message: str


def make_group_solvers(robot_description: str, groups: Mapping[str, GroupKinematicsConfig],
                       srdf: Optional[str] = None) -> Dict[str, GroupIK]:
    """One initialised :class:`GroupIK` per group.

    A group's base and tips are its ``direction_up_ik.base_frame`` / ``tip_frames`` where
    kinematics.yaml names them, else those of its SRDF group (``srdf``: SRDF XML or a path; see
    :mod:`.srdf`): base = the chain's base, tips = the chains' tips, as MoveIt takes them.

    Raises:
        KinematicsYamlError: a group has no base/tips or cannot be initialised (message names it).
        SrdfError: an unreadable SRDF.
    """
    from .srdf import srdf_groups

    described = srdf_groups(srdf, robot_description) if srdf else {}
    solvers = {}
    for name, config in groups.items():
        base, tips = config.base_frame, config.tip_frames
        if not base or not tips:
            found = described.get(name)
            if found is None:
                where = "no SRDF given" if not srdf else "not a group of the SRDF"
                raise KinematicsYamlError(f"kinematics group '{name}': {where}; its chain comes from the SRDF "
                                          "or from direction_up_ik.base_frame and tip_frames")
            if found.error:
                raise KinematicsYamlError(f"kinematics group '{name}': {found.error}")
            base, tips = base or found.base, tips or found.tips
        solver = GroupIK(config)
        if not solver.initialize(robot_description, name, base, tips, config.search_resolution):
            raise KinematicsYamlError(f"kinematics group '{name}': {solver.error}")
        solvers[name] = solver
    return solvers


def _seconds(duration) -> float:
    if hasattr(duration, "sec"):
        return float(duration.sec) + 1e-9 * float(duration.nanosec)
    return float(duration or 0.0)


def _failure(code: int, message: str) -> PositionIKAnswer:
    return PositionIKAnswer([], [], code, message)


def solve_position_ik(solvers: Mapping[str, GroupIK], ik_request,
                      max_timeout: Optional[float] = None, check_collisions: bool = True) -> PositionIKAnswer:
    """Serve one ``moveit_msgs/PositionIKRequest``-shaped request; never raises.

    ``max_timeout`` (s, None = no cap) caps the search budget: the request's ``timeout``, or the
    group's ``kinematics_solver_timeout`` when the request's is 0. ``check_collisions`` False
    turns the request's ``avoid_collisions`` off (the node's collision.enabled).
    """
    group = ik_request.group_name
    solver = solvers.get(group)
    if solver is None:
        return _failure(MoveItErrorCode.INVALID_GROUP_NAME, f"unknown group '{group}'; groups: {sorted(solvers)}")
    joint_names = solver.get_joint_names()
    state = ik_request.robot_state.joint_state
    given = dict(zip(state.name, state.position))
    missing = [n for n in joint_names if n not in given]
    if missing:
        return _failure(MoveItErrorCode.INVALID_ROBOT_STATE, f"robot_state lacks joints {missing} of group '{group}'")
    stamped = list(ik_request.pose_stamped_vector) or [ik_request.pose_stamped]
    links = list(ik_request.ik_link_names)
    if not links:
        tips = solver.get_link_names()
        links = [ik_request.ik_link_name] if len(stamped) == 1 and ik_request.ik_link_name else tips
    if len(links) != len(stamped):
        return _failure(MoveItErrorCode.INVALID_LINK_NAME, f"{len(stamped)} poses but {len(links)} ik link names "
                                                           f"({links})")
    target, why = solver.solver_for(links)
    if target is None:
        return _failure(MoveItErrorCode.INVALID_LINK_NAME, why)
    base = solver.get_base_frame()
    for ps in stamped:
        if ps.header.frame_id not in ("", base):
            return _failure(FRAME_TRANSFORM_FAILURE, f"poses must be in the group's base frame '{base}', got "
                                                     f"'{ps.header.frame_id}'")
    by_link = dict(zip(links, (ps.pose for ps in stamped)))
    timeout = _seconds(ik_request.timeout)
    if timeout <= 0:
        timeout = solver.config.timeout
    if max_timeout is not None:
        timeout = min(timeout, max_timeout)
    avoid = check_collisions and bool(getattr(ik_request, "avoid_collisions", False))
    if avoid and target.collision_scene is not None:
        target.set_joint_state(given)  # the other joints, as the collision check sees them
    result = target.search_position_ik([by_link[t] for t in target.get_link_names()],
                                       [given[n] for n in target.get_joint_names()], timeout=timeout,
                                       avoid_collisions=avoid)
    if result.solution is None:
        return _failure(result.error_code, result.message)
    # The group's joints that do not move the solved link keep their seed (within the limits).
    solved = dict(zip(target.get_joint_names(), result.solution))
    lower, upper = solver.joint_limits()
    positions = [solved[n] if n in solved else float(np.clip(given[n], lower[i], upper[i]))
                 for i, n in enumerate(joint_names)]
    return PositionIKAnswer(joint_names, positions, result.error_code, result.message)
