"""Read MoveIt's ``kinematics.yaml`` for this solver.

Per planning group, MoveIt's keys::

    arm:
      kinematics_solver: srv_kinematics_plugin/SrvKinematicsPlugin   # or direction_up_ik/...
      kinematics_solver_search_resolution: 0.005   # rad; accepted, unused (no discretisation)
      kinematics_solver_timeout: 0.005             # s; the search's time budget
      kinematics_solver_attempts: 3                # removed in MoveIt 2: accepted, ignored, warned
      kinematics_solver_service_name: solve_ik     # srv_kinematics_plugin only
      direction_up_ik:                             # this solver's own keys (all optional)
        position_tol: 1.0e-5       # any SolverSettings field (core/settings.py)
        num_seeds: 4               # any SearchSettings field but time_budget and max_rounds
        mode: full                 # full | axis (roll about the tip's direction axis free)
        local_axes: tcp            # tcp: direction = tip +Z, up = +Y; x_y: direction = +X, up = +Y
        base_frame: panda_link0    # the group's root and tips; default: the SRDF group's chain
        tip_frames: [panda_hand]   # (base = chain base, tips = chain tips, as MoveIt takes them)
        tcp_offsets:               # link -> TCP offset of a link IK is solved for; default none:
          panda_hand: {xyz: [0, 0, 0.1034], rpy: [0, 0, 0]}   # a request's pose is then the TCP's
        avoid_collisions: false    # the plugin class: keep only solutions free of self-collision
        collision_padding: 0.0     # m around every link (with avoid_collisions)

``avoid_collisions`` (default false: MoveIt checks answers itself) makes the plugin class check
its answers against the robot's own collision geometry (URDF ``<collision>``, the group model's
links); the node's GetPositionIK bridge follows each request's ``avoid_collisions`` and its
``collision.*`` parameters instead.

The ``direction_up_ik`` keys are generated from the settings schema (:data:`SOLVER_KEYS`,
:data:`SEARCH_KEYS`) and checked by its validator. Defaults: the schema's, with
``max_position_error`` 0.03 m, MoveIt's precision (:data:`MOVEIT_SOLVER_DEFAULTS`:
``position_tol`` 1e-5 m, ``frame_tol_rad`` 1e-4 rad) and, when the group searches
(``num_seeds`` > 0, the default), the search's solver defaults (``SEARCH_SOLVER_DEFAULTS``).
The search runs until ``kinematics_solver_timeout``; ``random_seed`` -1 draws from the OS.

The file may also be wrapped as ROS parameters (``<node>: ros__parameters:
robot_description_kinematics: {group: ...}``) or as ``robot_description_kinematics:``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping

from ..core.errors import DirectionUpIKError, InputValidationError
from ..core.settings import DEFAULT_MAX_POSITION_ERROR, SEARCH_SOLVER_DEFAULTS, SearchSettings, SolverSettings

LOG = logging.getLogger(__name__)
MOVEIT_KEYS = ("kinematics_solver", "kinematics_solver_search_resolution", "kinematics_solver_timeout",
               "kinematics_solver_attempts", "kinematics_solver_service_name")
OWN_KEY = "direction_up_ik"
#: ``direction_up_ik`` keys that are solver settings: every SolverSettings field.
SOLVER_KEYS = tuple(f.name for f in dataclasses.fields(SolverSettings))
#: ``direction_up_ik`` keys that are search options: SearchSettings but the two the plugin
#: takes from MoveIt (the budget is kinematics_solver_timeout; rounds run until it).
SEARCH_KEYS = tuple(f.name for f in dataclasses.fields(SearchSettings) if f.name not in ("time_budget", "max_rounds"))
#: ``direction_up_ik`` keys of the group itself.
GROUP_KEYS = ("mode", "local_axes", "base_frame", "tip_frames", "tcp_offsets", "avoid_collisions",
              "collision_padding")
MODES = ("full", "axis")
LOCAL_AXES = ("tcp", "x_y")
DEFAULT_TIMEOUT = 0.005
#: The MoveIt front end's precision (the plugin class and the node's GetPositionIK bridge): MoveIt
#: checks every IK answer against its goal's tolerances, MoveGroupInterface's defaults 1e-4 m and
#: 1e-3 rad (OMPL's goal sampler drops the answers outside). The spec's 1e-3 m / 1e-2 rad let about
#: half the answers fail that check; a tenth of MoveIt's tolerances passes all of them, at about the
#: same cost (the search's Newton-like steps converge fast near the goal; docs/performance.md).
#: The node's own service keeps the spec's defaults.
MOVEIT_SOLVER_DEFAULTS = {"position_tol": 1e-5, "frame_tol_rad": 1e-4}


class KinematicsYamlError(DirectionUpIKError, ValueError):
    """kinematics.yaml content breaks a rule; the message names group and key."""


def _default_settings() -> SolverSettings:
    return SolverSettings(max_position_error=DEFAULT_MAX_POSITION_ERROR, **MOVEIT_SOLVER_DEFAULTS,
                          **SEARCH_SOLVER_DEFAULTS)


@dataclass(frozen=True)
class GroupKinematicsConfig:
    """One planning group's settings. Timeouts in seconds; see the module docstring."""

    group: str
    kinematics_solver: str = "direction_up_ik/DirectionUpKinematicsPlugin"
    search_resolution: float = 0.005
    timeout: float = DEFAULT_TIMEOUT
    service_name: str = "solve_ik"
    settings: SolverSettings = field(default_factory=_default_settings)
    search: SearchSettings = field(default_factory=SearchSettings)
    mode: str = "full"
    local_axes: str = "tcp"
    base_frame: str = ""
    tip_frames: tuple = ()
    #: ((link, (x, y, z) m, (roll, pitch, yaw) rad), ...): link -> TCP offsets (URDF rpy).
    tcp_offsets: tuple = ()
    #: Queries keep only collision-free solutions by default (the robot's own geometry).
    avoid_collisions: bool = False
    #: m added around every link of the collision model.
    collision_padding: float = 0.0

    def tcp_offset(self, link: str):
        """((x, y, z), (roll, pitch, yaw)) link -> TCP of ``link`` (metres, radians); None: none."""
        return next(((xyz, rpy) for name, xyz, rpy in self.tcp_offsets if name == link), None)


def _positive(group, key, value):
    where = f"{group}.{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KinematicsYamlError(f"{where}: must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise KinematicsYamlError(f"{where}: must be finite and positive, got {value!r}")
    return float(value)


def _settings(cls, group: str, values: Mapping[str, Any]):
    """``cls(**values)``, its errors naming the group's key."""
    try:
        return cls(**values)
    except InputValidationError as exc:
        raise KinematicsYamlError(f"{group}.{OWN_KEY}.{exc.field}: {exc.rule}") from None


def group_config(group: str, entry: Mapping[str, Any]) -> GroupKinematicsConfig:
    """Validate one group's mapping.

    Raises:
        KinematicsYamlError: unknown key, wrong type, non-positive or non-finite value.
    """
    if not isinstance(entry, Mapping):
        raise KinematicsYamlError(f"{group}: expected a mapping of kinematics settings, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(MOVEIT_KEYS) - {OWN_KEY})
    if unknown:
        raise KinematicsYamlError(f"{group}: unknown keys {unknown}; known: {list(MOVEIT_KEYS) + [OWN_KEY]}")
    kwargs: Dict[str, Any] = {"group": group}
    if "kinematics_solver" in entry:
        if not isinstance(entry["kinematics_solver"], str) or not entry["kinematics_solver"]:
            raise KinematicsYamlError(f"{group}.kinematics_solver: must be a plugin name string")
        kwargs["kinematics_solver"] = entry["kinematics_solver"]
    if "kinematics_solver_search_resolution" in entry:
        kwargs["search_resolution"] = _positive(group, "kinematics_solver_search_resolution",
                                                entry["kinematics_solver_search_resolution"])
    if "kinematics_solver_timeout" in entry:
        kwargs["timeout"] = _positive(group, "kinematics_solver_timeout", entry["kinematics_solver_timeout"])
    if "kinematics_solver_attempts" in entry:
        LOG.warning("%s.kinematics_solver_attempts is ignored: MoveIt 2 removed it; the search runs "
                    "until kinematics_solver_timeout", group)
    if "kinematics_solver_service_name" in entry:
        name = entry["kinematics_solver_service_name"]
        if not isinstance(name, str) or not name:
            raise KinematicsYamlError(f"{group}.kinematics_solver_service_name: must be a non-empty string")
        kwargs["service_name"] = name
    own = entry.get(OWN_KEY) or {}
    if not isinstance(own, Mapping):
        raise KinematicsYamlError(f"{group}.{OWN_KEY}: expected a mapping")
    known = SOLVER_KEYS + SEARCH_KEYS + GROUP_KEYS
    unknown = sorted(set(own) - set(known))
    if unknown:
        raise KinematicsYamlError(f"{group}.{OWN_KEY}: unknown keys {unknown}; known: {list(known)}")
    search = {k: own[k] for k in SEARCH_KEYS if k in own}
    if isinstance(search.get("random_seed"), int) and search["random_seed"] < 0:
        search["random_seed"] = None  # -1: from the OS
    kwargs["search"] = _settings(SearchSettings, group, search)
    settings = {k: own[k] for k in SOLVER_KEYS if k in own}
    settings.setdefault("max_position_error", DEFAULT_MAX_POSITION_ERROR)
    for name, value in MOVEIT_SOLVER_DEFAULTS.items():
        settings.setdefault(name, value)
    if kwargs["search"].num_seeds > 0:
        for name, value in SEARCH_SOLVER_DEFAULTS.items():
            settings.setdefault(name, value)
    kwargs["settings"] = _settings(SolverSettings, group, settings)
    for key, choices in (("mode", MODES), ("local_axes", LOCAL_AXES)):
        if key in own:
            if own[key] not in choices:
                raise KinematicsYamlError(f"{group}.{OWN_KEY}.{key}: must be one of {list(choices)}, "
                                          f"got {own[key]!r}")
            kwargs[key] = own[key]
    if "base_frame" in own:
        if not isinstance(own["base_frame"], str) or not own["base_frame"]:
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.base_frame: must be a link name")
        kwargs["base_frame"] = own["base_frame"]
    if "tip_frames" in own:
        tips = own["tip_frames"]
        if isinstance(tips, str):
            tips = [tips]
        if not isinstance(tips, (list, tuple)) or not tips or not all(isinstance(t, str) and t for t in tips):
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.tip_frames: must be a non-empty list of link names")
        kwargs["tip_frames"] = tuple(tips)
    if "tcp_offsets" in own:
        kwargs["tcp_offsets"] = _tcp_offsets(group, own["tcp_offsets"])
    if "avoid_collisions" in own:
        if not isinstance(own["avoid_collisions"], bool):
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.avoid_collisions: must be true or false, "
                                      f"got {own['avoid_collisions']!r}")
        kwargs["avoid_collisions"] = own["avoid_collisions"]
    if "collision_padding" in own:
        padding = own["collision_padding"]
        if isinstance(padding, bool) or not isinstance(padding, (int, float)) or not (
                math.isfinite(padding) and padding >= 0):
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.collision_padding: must be a finite number >= 0 "
                                      f"(metres), got {padding!r}")
        kwargs["collision_padding"] = float(padding)
    return GroupKinematicsConfig(**kwargs)


def _tcp_offsets(group: str, value) -> tuple:
    where = f"{group}.{OWN_KEY}.tcp_offsets"
    if not isinstance(value, Mapping):
        raise KinematicsYamlError(f"{where}: expected a mapping link -> {{xyz: [x, y, z], rpy: [r, p, y]}}")
    out = []
    for link, offset in value.items():
        if not isinstance(offset, Mapping) or set(offset) - {"xyz", "rpy"}:
            raise KinematicsYamlError(f"{where}.{link}: expected {{xyz: [x, y, z], rpy: [r, p, y]}}")
        parts = []
        for key in ("xyz", "rpy"):
            v = offset.get(key, [0.0, 0.0, 0.0])
            if (not isinstance(v, (list, tuple)) or len(v) != 3 or
                    not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                            for x in v)):
                raise KinematicsYamlError(f"{where}.{link}.{key}: must be 3 finite numbers, got {v!r}")
            parts.append(tuple(float(x) for x in v))
        out.append((str(link), parts[0], parts[1]))
    return tuple(out)


def load_kinematics_yaml(source) -> Dict[str, GroupKinematicsConfig]:
    """Parse a kinematics.yaml (path, YAML text or already-loaded mapping) -> {group: config}.

    Raises:
        KinematicsYamlError: unreadable file, invalid YAML, or an invalid group entry.
    """
    import yaml

    data = source
    if isinstance(source, (str, os.PathLike)):
        text = str(source)
        if os.path.isfile(text):
            with open(text, encoding="utf-8") as handle:
                text = handle.read()
        elif "\n" not in text and text.endswith((".yaml", ".yml")):
            raise KinematicsYamlError(f"kinematics.yaml: file '{text}' not found")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise KinematicsYamlError(f"kinematics.yaml: invalid YAML: {exc}") from None
    if not isinstance(data, Mapping) or not data:
        raise KinematicsYamlError("kinematics.yaml: expected a mapping of planning groups")
    # Unwrap "<node>: ros__parameters: robot_description_kinematics:" layouts.
    if len(data) == 1:
        (only,) = data.values()
        if isinstance(only, Mapping) and "ros__parameters" in only:
            data = only["ros__parameters"]
    if isinstance(data, Mapping) and "robot_description_kinematics" in data:
        data = data["robot_description_kinematics"]
    return {str(group): group_config(str(group), entry) for group, entry in data.items()}
