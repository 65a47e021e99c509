"""What the launch files compute, as plain functions (no ROS import), so that tests check it
without ``launch`` / ``launch_ros`` (not installable from PyPI).

* :func:`command_echo_parameters`: ``command_echo``'s parameters that make it listen to the
  command the node publishes with a given parameter file (type, absolute topic, joint order).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

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
    publishes with parameter values ``values`` (e.g. :func:`config.parameter_file_values`):
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

