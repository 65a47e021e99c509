"""ROS 2 parameter YAML files read as rcl reads them, for the node's own checks, launch files,
tests and drivers (the node itself gets its values from rcl).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping

from .config import NODE_NAME, ConfigError


def _node_key_matches(key: str, node_fqn: str) -> bool:
    """Whether a parameter-file key names the node ``node_fqn``, as rcl matches them: a key
    without a leading '/' is taken from the root namespace; ``/*`` stands for one name token,
    ``/**`` for any number of them (so ``/**`` names every node, ``/**/name`` a node called
    ``name`` in any namespace, ``name`` only the un-namespaced one)."""
    key = key if key.startswith("/") else "/" + key
    pattern = re.escape(key).replace(r"/\*\*", r"(/\w+)*").replace(r"/\*", r"(/\w+)")
    return re.fullmatch(pattern, node_fqn) is not None


def parameter_file_values(path, node_fqn: str = "/" + NODE_NAME) -> Dict[str, Any]:
    """``{name: value}`` that a ROS 2 parameter YAML file sets on the node ``node_fqn``.

    Merges the ``ros__parameters`` of every entry whose key names the node (later entries
    win): ``/**``, ``/**/<name>``, ``/*/<name>``, ``<name>`` (root namespace only),
    ``/<ns>/<name>``. Nested mappings become dotted names, as ROS reads them. Scripts and
    tests read the shipped ``config/*.yaml`` with it.

    Raises:
        ConfigError: (parameter ``params_file``) unreadable file or not a parameter file.
    """
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("params_file", f"cannot read '{path}': {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError("params_file", f"'{path}' must map node names to ros__parameters")
    values: Dict[str, Any] = {}
    for key, entry in data.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("ros__parameters"), Mapping):
            raise ConfigError("params_file", f"'{path}': entry '{key}' has no ros__parameters mapping")
        if _node_key_matches(str(key), node_fqn):
            values.update(_flatten(entry["ros__parameters"]))
    return values


def _flatten(mapping: Mapping, prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out
