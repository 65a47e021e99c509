"""``moveit_msgs/srv/GetPositionIK`` served by planning-group IK, without importing moveit_msgs.

MoveIt's ``srv_kinematics_plugin/SrvKinematicsPlugin`` sends IK requests to a
GetPositionIK service (name from ``kinematics_solver_service_name``, default
``solve_ik``). :func:`solve_position_ik` does the whole request -> answer
conversion on duck-typed messages (``ik_request.group_name``,
``ik_request.robot_state.joint_state.name/position``, ``ik_request.pose_stamped``
or ``pose_stamped_vector`` + ``ik_link_names``, ``ik_request.timeout``), so it is
testable here; the node registers the service only when ``moveit_msgs`` imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping

from .group_ik import GroupIK, MoveItErrorCode
from .kinematics_yaml import GroupKinematicsConfig, KinematicsYamlError

FRAME_TRANSFORM_FAILURE = -21


@dataclass(frozen=True)
class PositionIKAnswer:
    """What goes into the GetPositionIK response: ``solution.joint_state`` and ``error_code.val``."""

    joint_names: List[str]
    positions: List[float]
    error_code: int
    message: str


def make_group_solvers(robot_description: str, groups: Mapping[str, GroupKinematicsConfig]
                       ) -> Dict[str, GroupIK]:
    """One initialised :class:`GroupIK` per group that names base_frame and tip_frames.

    Raises:
        KinematicsYamlError: a group misses base/tips or cannot be initialised (message names it).
    """
    solvers = {}
    for name, config in groups.items():
        if not config.base_frame or not config.tip_frames:
            raise KinematicsYamlError(f"kinematics group '{name}': direction_up_ik.base_frame and tip_frames "
                                      "are required to serve GetPositionIK")
        solver = GroupIK(config)
        if not solver.initialize(robot_description, name, config.base_frame, config.tip_frames,
                                 config.search_resolution):
            raise KinematicsYamlError(f"kinematics group '{name}': {solver.error}")
        solvers[name] = solver
    return solvers


def _seconds(duration) -> float:
    if hasattr(duration, "sec"):
        return float(duration.sec) + 1e-9 * float(duration.nanosec)
    return float(duration or 0.0)


def solve_position_ik(solvers: Mapping[str, GroupIK], ik_request) -> PositionIKAnswer:
    """Serve one ``moveit_msgs/PositionIKRequest``-shaped request; never raises."""
    group = ik_request.group_name
    solver = solvers.get(group)
    if solver is None:
        return PositionIKAnswer([], [], MoveItErrorCode.INVALID_GROUP_NAME,
                                f"unknown group '{group}'; groups: {sorted(solvers)}")
    joint_names = solver.get_joint_names()
    state = ik_request.robot_state.joint_state
    given = dict(zip(state.name, state.position))
    missing = [n for n in joint_names if n not in given]
    if missing:
        return PositionIKAnswer(joint_names, [], MoveItErrorCode.INVALID_ROBOT_STATE,
                                f"robot_state lacks joints {missing} of group '{group}'")
    seed = [given[n] for n in joint_names]
    stamped = list(ik_request.pose_stamped_vector)
    links = list(ik_request.ik_link_names)
    if not stamped:
        stamped = [ik_request.pose_stamped]
        links = [ik_request.ik_link_name or solver.get_link_names()[0]]
    if len(links) != len(stamped):
        return PositionIKAnswer(joint_names, [], MoveItErrorCode.INVALID_LINK_NAME,
                                f"{len(stamped)} poses but {len(links)} ik_link_names")
    tips = solver.get_link_names()
    if sorted(links) != sorted(tips):
        return PositionIKAnswer(joint_names, [], MoveItErrorCode.INVALID_LINK_NAME,
                                f"ik_link_names {links} must be the group's tips {tips}")
    base = solver.get_base_frame()
    for ps in stamped:
        if ps.header.frame_id not in ("", base):
            return PositionIKAnswer(joint_names, [], FRAME_TRANSFORM_FAILURE,
                                    f"poses must be in the group's base frame '{base}', got "
                                    f"'{ps.header.frame_id}'")
    by_link = dict(zip(links, (ps.pose for ps in stamped)))
    result = solver.search_position_ik([by_link[t] for t in tips], seed, timeout=_seconds(ik_request.timeout))
    return PositionIKAnswer(joint_names, result.solution or [], result.error_code, result.message)
