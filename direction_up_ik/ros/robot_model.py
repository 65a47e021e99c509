"""What a node configuration builds: the robot model (from the bundled robot, a URDF or xacro
file, the robot_description parameter or topic), its URDF text, and the MoveIt groups of
``moveit.kinematics_yaml``. Every failure is a :class:`~.config.ConfigError` naming the
parameter.
"""

from __future__ import annotations

import os
import pathlib
from typing import Dict, Optional, Tuple

from ..core.errors import DirectionUpIKError
from ..core.xacro_files import is_xacro_path
from ..robots import bundled_robot
from .config import ConfigError, NodeConfig
from .streaming import step_limits


def load_robot_model(config: NodeConfig, description: Optional[str] = None):
    """Build the RobotKinematics the configuration describes and check names against it.

    Args:
        description: URDF XML received on ``robot_description_topic`` (wins over the rest).
    Raises:
        ConfigError: unreadable URDF (a xacro error: its file and message), unknown links or
            joints in the parameters.
    """
    from ..core.errors import RobotModelError
    from ..core.kinematics import RobotKinematics
    from ..core.rotations import make_transform, rpy_to_matrix

    source, parameter = robot_source(config, description)
    if parameter == "urdf_path" and is_xacro_path(source):
        source = robot_description_text(config)  # expanded once for the model, scene and groups
    root = config.root_link or (bundled_robot(config.robot).root_link
                               if parameter == "robot" else None)
    try:
        model = RobotKinematics.from_urdf(
            source, [e.link for e in config.end_effectors],
            [make_transform(rpy_to_matrix(e.tcp_rpy), e.tcp_xyz) for e in config.end_effectors],
            root_link=root)
    except RobotModelError as exc:
        text, culprit = str(exc), parameter
        for i, e in enumerate(config.end_effectors):
            if text.startswith(f"end_effector_links[{i}]"):
                culprit, text = f"end_effector.{e.name}.link", text.split(": ", 1)[1]
        if text.startswith("root_link"):
            culprit, text = "root_link", text.split(": ", 1)[1]
        raise ConfigError(culprit, text) from None
    for name in config.active_joints:
        if name not in model.joint_names:
            raise ConfigError("active_joints", f"unknown joint '{name}'; joints: {list(model.joint_names)}")
    for name in config.command_joint_order:
        if name not in model.joint_names:
            raise ConfigError("command.joint_order",
                              f"unknown joint '{name}'; joints: {list(model.joint_names)}")
    check_step_limits(config, model.num_dofs)
    return model


def check_step_limits(config: NodeConfig, num_joints: int):
    """(D,) step limits of ``streaming.max_joint_step`` for a model of ``num_joints`` joints.

    Raises:
        ConfigError: neither one value nor one per joint.
    """
    try:
        return step_limits(config.streaming_max_joint_step, num_joints)
    except ValueError as exc:
        raise ConfigError("streaming.max_joint_step", str(exc)) from None


def robot_description_text(config: NodeConfig, description: Optional[str] = None) -> str:
    """The URDF XML of the configured robot (``description`` from the topic, robot_description,
    urdf_path (a xacro file expanded) or bundled)."""
    if description is not None:
        return description
    if config.robot_description:
        return config.robot_description
    if is_xacro_path(config.urdf_path):
        return _expanded_xacro(config.urdf_path, tuple(config.xacro_args))
    path = config.urdf_path or str(bundled_robot(config.robot).urdf_path())
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError("urdf_path" if config.urdf_path else "robot", f"cannot read '{path}': {exc}") from None


def robot_source(config: NodeConfig, description: Optional[str] = None) -> Tuple[str, str]:
    """(URDF XML or path, the parameter it comes from) of the configured robot; ``description``
    (the URDF received on ``robot_description_topic``) wins over the rest.

    Raises:
        ConfigError: an empty description from the topic.
    """
    if description is not None:
        if not description.strip():
            raise ConfigError("robot_description_topic", "received an empty robot description")
        return description, "robot_description_topic"
    if config.robot_description:
        return config.robot_description, "robot_description"
    if config.urdf_path:
        return config.urdf_path, "urdf_path"
    return str(bundled_robot(config.robot).urdf_path()), "robot"


def load_group_solvers(config: NodeConfig, description: Optional[str] = None):
    """{group: GroupIK} for ``moveit.kinematics_yaml`` ({} when unset): the planning groups the
    node's GetPositionIK bridge serves (``description``: the URDF from the topic, if any).

    Raises:
        ConfigError: unreadable or invalid kinematics.yaml, groups the robot cannot serve.
    """
    if not config.moveit_kinematics_yaml:
        return {}
    from ..groups import KinematicsYamlError, load_kinematics_yaml, make_group_solvers
    from ..groups.srdf import SrdfError

    srdf = config.robot_description_semantic or None
    if srdf is None and config.moveit_srdf_path:
        if not pathlib.Path(config.moveit_srdf_path).is_file():
            raise ConfigError("moveit.srdf_path", f"file '{config.moveit_srdf_path}' not found")
        srdf = config.moveit_srdf_path
    try:
        if not pathlib.Path(config.moveit_kinematics_yaml).is_file():
            raise KinematicsYamlError(f"file '{config.moveit_kinematics_yaml}' not found")
        groups = load_kinematics_yaml(config.moveit_kinematics_yaml)
        return make_group_solvers(robot_description_text(config, description), groups, srdf)
    except SrdfError as exc:
        raise ConfigError("robot_description_semantic" if config.robot_description_semantic
                          else "moveit.srdf_path", str(exc)) from None
    except DirectionUpIKError as exc:
        raise ConfigError("moveit.kinematics_yaml", str(exc)) from None


_EXPANDED: Dict[tuple, str] = {}  # (path, args, size, mtime) -> URDF text: one expansion per file state


def _expanded_xacro(path: str, args: Tuple[str, ...]) -> str:
    """The URDF text of the xacro file ``path`` with ``args``, expanded once while the file is
    unchanged (the model, the collision scene and the MoveIt groups all read it at start-up).

    Raises:
        ConfigError: urdf_path, naming the file and xacro's message.
    """
    from ..core.errors import RobotModelError
    from ..core.xacro_files import xacro_to_urdf
    try:
        stat = os.stat(path)
        key = (os.path.abspath(path), args, stat.st_size, stat.st_mtime_ns)
    except OSError:
        key = None  # xacro reports the missing file in its own words
    if key in _EXPANDED:
        return _EXPANDED[key]
    try:
        text = xacro_to_urdf(path, args)
    except RobotModelError as exc:
        raise ConfigError("urdf_path", str(exc)) from None
    if key is not None:
        _EXPANDED[key] = text
    return text
