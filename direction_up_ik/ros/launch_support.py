"""What the launch files compute, as plain functions (no ROS import), so that tests check it
without ``launch`` / ``launch_ros`` (not installable from PyPI).

* :func:`command_echo_parameters`: ``command_echo``'s parameters that make it listen to the
  command the node publishes with a given parameter file (type, absolute topic, joint order);
* :func:`find_executable` / :func:`missing_executables`: whether ``ros2 run`` would find an
  executable, so that ``demo.launch.py`` checks everything it needs before it starts anything;
* :func:`node_parameters`: the node's parameters from ``direction_up_ik.launch.py``'s
  arguments (the robot model from the bundled robot, a URDF or xacro file, or a topic).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .config import COMMAND_TYPES, NODE_NAME, PARAMETER_BY_NAME, ConfigError


def node_fqn(namespace: str = "", name: str = NODE_NAME) -> str:
    """Fully qualified node name of ``name`` in ``namespace`` ("" or "/" = the root)."""
    namespace = "/" + namespace.strip("/") if namespace.strip("/") else ""
    return f"{namespace}/{name}"


def resolve_topic(topic: str, fqn: str) -> str:
    """The absolute name of ``topic`` as the node ``fqn`` resolves it (``~`` = the node's
    name, a relative name is in the node's namespace)."""
    namespace = fqn.rsplit("/", 1)[0]
    if topic.startswith("~"):
        return fqn + topic[1:]
    if topic.startswith("/"):
        return topic
    return f"{namespace}/{topic}"


def command_echo_parameters(values: Mapping[str, Any], fqn: str = node_fqn()) -> Dict[str, Any]:
    """Parameters of ``command_echo`` that make it listen to the command that the node ``fqn``
    publishes with parameter values ``values`` (e.g. :func:`parameter_files.parameter_file_values`):
    ``command_type``, the absolute ``command_topic`` and, when the node's
    ``command.joint_order`` is set, ``joint_order`` (a launch file cannot pass an empty list).

    Raises:
        ConfigError: ``command.type`` or ``command.topic`` breaks its rule.
    """
    command_type = values.get("command.type", PARAMETER_BY_NAME["command.type"].default)
    if command_type not in COMMAND_TYPES:
        raise ConfigError("command.type", f"must be one of {list(COMMAND_TYPES)}, got {command_type!r}")
    topic = values.get("command.topic", PARAMETER_BY_NAME["command.topic"].default)
    if not isinstance(topic, str) or not topic:
        raise ConfigError("command.topic", f"must be a non-empty topic name, got {topic!r}")
    out: Dict[str, Any] = {"command_type": command_type, "command_topic": resolve_topic(topic, fqn)}
    order = [str(n) for n in values.get("command.joint_order") or []]
    if order:
        out["joint_order"] = order
    return out


def _prefixes(prefixes: Optional[Sequence[str]]) -> List[str]:
    if prefixes is not None:
        return list(prefixes)
    return [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def find_executable(package: str, executable: str, prefixes: Optional[Sequence[str]] = None) -> Optional[Path]:
    """``<prefix>/lib/<package>/<executable>`` of the first prefix (default: AMENT_PREFIX_PATH)
    whose ament index lists ``package``, as ``ros2 run`` finds it; None when the package is
    not installed or lacks the executable."""
    for prefix in _prefixes(prefixes):
        if (Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / package).is_file():
            path = Path(prefix) / "lib" / package / executable
            return path if path.is_file() and os.access(path, os.X_OK) else None
    return None


def missing_executables(needed: Iterable[Tuple[str, str]], prefixes: Optional[Sequence[str]] = None) -> List[str]:
    """``"<package>/<executable>"`` of every (package, executable) in ``needed`` that
    :func:`find_executable` does not find."""
    return [f"{package}/{executable}" for package, executable in needed
            if find_executable(package, executable, prefixes) is None]


#: ``direction_up_ik.launch.py``'s arguments: name -> (default, description).
NODE_LAUNCH_ARGUMENTS = {
    "robot": ("dual_arm_torso", "bundled robot name; also names the default config"),
    "config": ("", "parameter YAML (default: config/<robot>.yaml)"),
    "namespace": ("", "node namespace"),
    "urdf_path": ("", "URDF or .xacro file of the robot (instead of the bundled robot)"),
    "xacro_args": ("", "arguments of a .xacro urdf_path, space-separated name:=value"),
    "robot_description_topic": ("", "take the URDF from this std_msgs/String topic, e.g. "
                                    "/robot_description (robot_state_publisher's)"),
}


def node_parameters(arguments: Mapping[str, str], config: str) -> List[Any]:
    """The ``parameters`` of the node's launch action: the parameter file ``config``, then the
    robot-model parameters the launch ``arguments`` (``NODE_LAUNCH_ARGUMENTS``; strings) set.
    ``robot`` always; ``urdf_path`` with ``xacro_args`` split at whitespace, and
    ``robot_description_topic``, only when given, so that the file's values stay otherwise.
    """
    overrides: Dict[str, Any] = {"robot": arguments.get("robot") or NODE_LAUNCH_ARGUMENTS["robot"][0]}
    if arguments.get("urdf_path"):
        overrides["urdf_path"] = arguments["urdf_path"]
    xacro_args = str(arguments.get("xacro_args") or "").split()
    if xacro_args:
        overrides["xacro_args"] = xacro_args
    if arguments.get("robot_description_topic"):
        overrides["robot_description_topic"] = arguments["robot_description_topic"]
    return [config, overrides]
