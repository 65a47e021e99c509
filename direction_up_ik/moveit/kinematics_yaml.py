"""Read MoveIt's ``kinematics.yaml`` for this solver.

Per planning group, MoveIt's keys::

    arm:
      kinematics_solver: srv_kinematics_plugin/SrvKinematicsPlugin   # or direction_up_ik/...
      kinematics_solver_search_resolution: 0.005   # rad; accepted, unused (no discretisation)
      kinematics_solver_timeout: 0.005             # s; default search time budget
      kinematics_solver_attempts: 3                # removed in MoveIt 2: accepted, ignored, warned
      kinematics_solver_service_name: solve_ik     # srv_kinematics_plugin only
      direction_up_ik:                             # this solver's own keys (all optional)
        position_tol: 0.001        # m
        frame_tol_rad: 0.01        # rad
        max_position_error: 0.03   # m, position guard
        position_weight: 1.0
        rotation_weight: 1.0
        damping: 0.001
        max_step_norm: 1.5         # rad / m; default 1.5 with num_seeds > 0 (search), else 0.25 (spec)
        jacobian: analytic         # default analytic with num_seeds > 0 (search), else finite_difference (spec)
        stall_window: 3            # default 3 with num_seeds > 0 (search: stop a solve making < 5 % progress
                                   # in 3 steps), else 0 (spec)
        num_step_scales: 3         # default 3 with num_seeds > 0 (search: step scales 1 .. 1/4), else 8
                                   # (spec: 1 .. 1/128)
        damping_mode: residual     # default residual with num_seeds > 0 (search: min(damping, weighted
                                   # squared residual)), else constant (spec)
        max_iters: 32
        num_seeds: 4               # starts per round of seeds; 0 = the spec's single solve
        selection: least_motion    # or limit_center
        random_seed: 0             # starts generator; -1 = from the OS
        mode: full                 # full | axis (roll about the tip's direction axis free)
        local_axes: tcp            # tcp: direction = tip +Z, up = +Y; x_y: direction = +X, up = +Y
        base_frame: panda_link0    # the group's root and tips, for the GetPositionIK bridge
        tip_frames: [panda_hand]   # (MoveIt itself takes them from the SRDF)

The file may also be wrapped as ROS parameters (``<node>: ros__parameters:
robot_description_kinematics: {group: ...}``) or as ``robot_description_kinematics:``.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ..core.errors import DirectionUpIKError, InputValidationError
from ..core.search import SEARCH_SETTINGS, SELECTIONS
from ..core.settings import SolverSettings

LOG = logging.getLogger(__name__)
MOVEIT_KEYS = ("kinematics_solver", "kinematics_solver_search_resolution", "kinematics_solver_timeout",
               "kinematics_solver_attempts", "kinematics_solver_service_name")
OWN_KEY = "direction_up_ik"
_SETTINGS_KEYS = ("position_tol", "frame_tol_rad", "max_position_error", "position_weight",
                  "rotation_weight", "damping", "max_step_norm", "max_iters", "jacobian", "stall_window",
                  "num_step_scales", "damping_mode")
_OWN_KEYS = _SETTINGS_KEYS + ("num_seeds", "selection", "random_seed", "mode", "local_axes", "base_frame",
                              "tip_frames")
DEFAULT_TIMEOUT = 0.005
DEFAULT_MAX_POSITION_ERROR = 0.03


class KinematicsYamlError(DirectionUpIKError, ValueError):
    """kinematics.yaml content breaks a rule; the message names group and key."""


@dataclass(frozen=True)
class GroupKinematicsConfig:
    """One planning group's settings. Timeouts in seconds; see the module docstring."""

    group: str
    kinematics_solver: str = "direction_up_ik/DirectionUpKinematicsPlugin"
    search_resolution: float = 0.005
    timeout: float = DEFAULT_TIMEOUT
    service_name: str = "solve_ik"
    settings: SolverSettings = field(
        default_factory=lambda: SolverSettings(max_position_error=DEFAULT_MAX_POSITION_ERROR, **SEARCH_SETTINGS))
    num_seeds: int = 4
    selection: str = "least_motion"
    random_seed: Optional[int] = 0
    mode: str = "full"
    local_axes: str = "tcp"
    base_frame: str = ""
    tip_frames: tuple = ()


def _positive(group, key, value, integer=False):
    where = f"{group}.{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise KinematicsYamlError(f"{where}: must be a {'positive integer' if integer else 'number'}, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise KinematicsYamlError(f"{where}: must be finite and positive, got {value!r}")
    return value


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
        kwargs["search_resolution"] = float(_positive(group, "kinematics_solver_search_resolution",
                                                      entry["kinematics_solver_search_resolution"]))
    if "kinematics_solver_timeout" in entry:
        kwargs["timeout"] = float(_positive(group, "kinematics_solver_timeout", entry["kinematics_solver_timeout"]))
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
    unknown = sorted(set(own) - set(_OWN_KEYS))
    if unknown:
        raise KinematicsYamlError(f"{group}.{OWN_KEY}: unknown keys {unknown}; known: {list(_OWN_KEYS)}")
    if "num_seeds" in own:
        seeds = own["num_seeds"]
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 0:
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.num_seeds: must be an integer >= 0, got {seeds!r}")
        kwargs["num_seeds"] = seeds
    settings = {k: own[k] for k in _SETTINGS_KEYS if k in own}
    settings.setdefault("max_position_error", DEFAULT_MAX_POSITION_ERROR)
    if kwargs.get("num_seeds", GroupKinematicsConfig.num_seeds) > 0:
        for name, value in SEARCH_SETTINGS.items():
            settings.setdefault(name, value)
    try:
        kwargs["settings"] = SolverSettings(**settings)
    except InputValidationError as exc:
        raise KinematicsYamlError(f"{group}.{OWN_KEY}.{exc.field}: {exc.rule}") from None
    if "selection" in own:
        if own["selection"] not in SELECTIONS:
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.selection: must be one of {list(SELECTIONS)}, "
                                      f"got {own['selection']!r}")
        kwargs["selection"] = own["selection"]
    if "random_seed" in own:
        seed = own["random_seed"]
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise KinematicsYamlError(f"{group}.{OWN_KEY}.random_seed: must be an integer, got {seed!r}")
        kwargs["random_seed"] = None if seed < 0 else seed
    for key, choices in (("mode", ("full", "axis")), ("local_axes", ("tcp", "x_y"))):
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
    return GroupKinematicsConfig(**kwargs)


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
