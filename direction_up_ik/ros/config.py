"""The node's parameter schema, declared once, and its conversion to a frozen config.

This module imports no ROS package: :data:`PARAMETERS` lists every static
parameter (type, default, description with units, range, read-only flag) and
:func:`end_effector_parameters` the per-end-effector ones; the node turns them
into ``ParameterDescriptor`` s. The ``solver.*`` and ``search.*`` parameters are generated
from the core's settings schema (``core/settings.py``: SolverSettings, SearchSettings and
the node's own defaults stated there). :func:`config_from_values` converts a ``{name:
value}`` mapping into a :class:`NodeConfig` and re-validates everything, so YAML
files, live updates and tests share one set of rules and messages.

YAML layout (``config/<robot>.yaml``; ``/**/`` makes the entry apply in any namespace, as
``ros2 launch ... namespace:=left_cell`` puts the node in one)::

    /**/direction_up_ik_node:
      ros__parameters:
        robot: dual_arm_torso
        end_effectors: [left, right]
        end_effector.left.link: left_hand_link
        end_effector.left.tcp_xyz: [0.0, 0.0, 0.10]
        ...
        solver.max_position_error: 0.03
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ..core.errors import DirectionUpIKError, InputValidationError
from ..core.settings import (DEFAULT_MAX_POSITION_ERROR, NODE_SEARCH_DEFAULTS, SEARCH_SOLVER_DEFAULTS, Rule,
                             SearchSettings, SolverSettings, defaults as setting_defaults, rules)
from ..core.xacro_files import is_xacro_path, parse_xacro_args
from ..robots import BUNDLED_ROBOTS, DEFAULT_ROBOT
from .streaming import START_FROM_CHOICES


class ConfigError(DirectionUpIKError, ValueError):
    """A parameter value breaks its rule; the message names the parameter."""

    def __init__(self, parameter: str, rule: str) -> None:
        self.parameter = parameter
        self.rule = rule
        super().__init__(f"parameter '{parameter}': {rule}")


@dataclass(frozen=True)
class ParameterSpec:
    """One declared parameter.

    Attributes:
        name: full parameter name (dots separate YAML levels).
        type: "string", "double", "integer", "bool", "string_array" or "double_array".
        default: default value (the spec's default for solver settings).
        description: meaning and units.
        read_only: True when a change needs a restart (robot, topics, ...).
        min_value, max_value: inclusive range for numbers (None = open).
    """

    name: str
    type: str
    default: Any
    description: str
    read_only: bool = False
    min_value: Optional[float] = None
    max_value: Optional[float] = None


COMMAND_TYPES = ("joint_state", "joint_trajectory", "float64_multi_array")
#: Requests ~/solve holds while it answers others (rclpy's default, 10, lost requests sent at once
#: by a few planner threads); the most a user may configure, a bound on the memory it may take.
DEFAULT_SERVICE_QUEUE_DEPTH = 1000
MAX_SERVICE_QUEUE_DEPTH = 100_000
#: s, default of moveit.max_timeout: far above MoveIt's budgets (kinematics_solver_timeout 5 ms), far
#: below a request's 3600 s that would hold the node's one thread (and its shutdown) for an hour.
MOVEIT_MAX_TIMEOUT = 1.0
#: rad (m) per command, default of streaming.max_joint_step: at 100 Hz teleop 10 rad/s, above
#: the joint speed of arms (about 2-3 rad/s), far below a branch flip (most of a turn).
DEFAULT_MAX_JOINT_STEP = 0.1
LOCAL_AXES_CHOICES = ("x_y", "tcp")  # +X/+Y (spec default) or full TCP convention +Z/+Y
#: What each choice of ``end_effector.<name>.local_axes`` means, for logs and descriptions.
LOCAL_AXES_WORDS = {"x_y": "TCP +X along direction, +Y along up",
                    "tcp": "TCP +Z along direction, +Y along up"}

# ------------------------------------------- solver.* and search.*, from the settings schema
#: The search's solver settings the node exposes as ``search.<name>`` (the search's own
#: defaults); the other solver settings of the search's local solves are ``solver.*``'s.
SEARCH_SOLVER_FIELDS = tuple(SEARCH_SOLVER_DEFAULTS)
#: Upper bounds of parameters, so that no request keeps the node's one thread busy for long
#: (a request's overrides may not exceed them either).
_CAPS = {"solver.max_iters": 100_000, "solver.stall_window": 1000, "search.max_step_norm": 1000.0,
         "search.stall_window": 1000, "search.num_seeds": 100_000, "search.max_rounds": 100_000,
         "search.min_successes": 100_000, "search.time_budget": 3600.0, "search.random_seed": 2 ** 62}
#: How the node writes a SearchSettings None, which a ROS parameter cannot hold.
_NONE_AS = {"time_budget": 0.0, "max_rounds": 1, "random_seed": -1}
_NONE_MEANS = {"time_budget": "0 = none (then search.max_rounds rounds)",
               "max_rounds": "used when there is no time budget",
               "random_seed": "negative = from the OS"}
_UNIT_WORDS = {"m": "metres", "rad": "radians", "s": "seconds", "rad or m": "rad / m"}


def _setting_parameter(name: str, rule: Rule, default, note: str = "") -> ParameterSpec:
    """The ROS parameter ``name`` of a settings field with ``rule``."""
    field = name.split(".", 1)[1]
    description = rule.description + (f", {_UNIT_WORDS[rule.unit]}" if rule.unit else "")
    if rule.optional:
        description += f"; {_NONE_MEANS[field]}"
    description += note
    if default is None:
        default = _NONE_AS[field]
    high = _CAPS.get(name, rule.maximum)
    if rule.kind == "choice":
        return ParameterSpec(name, "string", default, f"{description}: {', '.join(rule.choices)}")
    if rule.kind == "number":
        return ParameterSpec(name, "double", float(default), description, min_value=0.0, max_value=high)
    low = -1 if rule.kind == "seed" else rule.minimum
    return ParameterSpec(name, "integer", int(default), description, min_value=low, max_value=high)


def _settings_parameters() -> Tuple[Tuple[ParameterSpec, ...], Tuple[ParameterSpec, ...]]:
    """(``solver.*``, ``search.*``) parameters generated from SolverSettings and SearchSettings."""
    solver_rules = rules(SolverSettings)
    solver_defaults = {**setting_defaults(SolverSettings), "max_position_error": DEFAULT_MAX_POSITION_ERROR}
    solver = tuple(_setting_parameter(f"solver.{name}", rule, solver_defaults[name],
                                      "; the spec's single start (and the search's, but search.*)")
                   for name, rule in solver_rules.items())
    search_defaults = {**setting_defaults(SearchSettings), **NODE_SEARCH_DEFAULTS}
    search = tuple(_setting_parameter(f"search.{name}", rule, search_defaults[name])
                   for name, rule in rules(SearchSettings).items())
    search += tuple(_setting_parameter(f"search.{name}", solver_rules[name], SEARCH_SOLVER_DEFAULTS[name],
                                       " (of the search's local solves; solver.* has the spec's single start's)")
                    for name in SEARCH_SOLVER_FIELDS)
    return solver, search


_SOLVER_PARAMETERS, _SEARCH_PARAMETERS = _settings_parameters()

# ------------------------------------------------------------------ collision.*
#: Obstacle shapes: name -> (shape_msgs/SolidPrimitive type constant, its dimensions in the
#: message's order). Cylinder axes are the local Z, as in URDF and SolidPrimitive.
OBSTACLE_SHAPES = {"box": (1, ("x", "y", "z")), "sphere": (2, ("radius",)),
                   "cylinder": (3, ("height", "radius"))}
#: m, largest collision.padding: beyond it every pose of an arm would collide with itself.
MAX_COLLISION_PADDING = 0.5
_COLLISION_PARAMETERS = (
    ParameterSpec("collision.enabled", "bool", True, "check solutions for collisions: the robot's "
                  "collision bodies (its URDF <collision> elements) among themselves and against the "
                  "obstacles (collision.obstacles and the ~/obstacles topic); a success is then a "
                  "collision-free solution. Without collision geometry in the URDF nothing is checked"),
    ParameterSpec("collision.padding", "double", 0.0, "metres added around every robot body; "
                  "read-only (the collision model is built at start-up)", read_only=True,
                  min_value=0.0, max_value=MAX_COLLISION_PADDING),
    ParameterSpec("collision.srdf", "string", "", "SRDF, a path or XML, whose <disable_collisions> link "
                  "pairs are not checked; empty = robot_description_semantic, else moveit.srdf_path, "
                  "else none", read_only=True),
    ParameterSpec("collision.mesh_paths", "string_array", [], "folders in which package:// and relative "
                  "collision mesh files are looked up (relative names also next to urdf_path)", read_only=True),
    ParameterSpec("collision.obstacles", "string_array", [], "ids of the fixed obstacles (cell "
                  "furniture) in the robot's root frame; each is described by "
                  "collision.obstacle.<id>.shape / dimensions / xyz / rpy", read_only=True),
)


def obstacle_parameters(obstacle_id: str) -> Tuple[ParameterSpec, ...]:
    """The read-only parameters of fixed obstacle ``obstacle_id`` (``collision.obstacles``)."""
    prefix = f"collision.obstacle.{obstacle_id}"
    words = "; ".join(f"{name} [{', '.join(dims)}]" for name, (_, dims) in OBSTACLE_SHAPES.items())
    return (
        ParameterSpec(f"{prefix}.shape", "string", "", f"shape of obstacle '{obstacle_id}': "
                      f"{', '.join(OBSTACLE_SHAPES)}", read_only=True),
        ParameterSpec(f"{prefix}.dimensions", "double_array", [], "metres, as shape_msgs/SolidPrimitive: "
                      f"{words} (box: full side lengths; cylinder axis: local Z)", read_only=True),
        ParameterSpec(f"{prefix}.xyz", "double_array", [0.0, 0.0, 0.0], "position of the shape's centre "
                      "in the robot's root frame, metres", read_only=True),
        ParameterSpec(f"{prefix}.rpy", "double_array", [0.0, 0.0, 0.0], "orientation, URDF "
                      "roll/pitch/yaw, radians", read_only=True),
    )


def primitive_dimensions(shape: str, dimensions, where: str) -> Tuple[float, ...]:
    """The dimensions of an obstacle ``shape`` (OBSTACLE_SHAPES), checked: the shape's count of
    finite, positive numbers (metres). ``where`` names the field in the message.

    Raises:
        InputValidationError: naming ``where``.
    """
    names = OBSTACLE_SHAPES[shape][1]
    try:
        values = tuple(float(v) for v in dimensions)
    except (TypeError, ValueError):
        raise InputValidationError(where, f"must be numbers, got {dimensions!r}") from None
    if len(values) != len(names):
        raise InputValidationError(where, f"a {shape} needs {len(names)} value(s) [{', '.join(names)}], "
                                          f"got {len(values)}")
    bad = [f"{n} {v}" for n, v in zip(names, values) if not (math.isfinite(v) and v > 0.0)]
    if bad:
        raise InputValidationError(where, f"every dimension of a {shape} must be finite and positive, got "
                                          f"{', '.join(bad)}")
    return values

PARAMETERS: Tuple[ParameterSpec, ...] = (
    ParameterSpec("robot", "string", DEFAULT_ROBOT,
                  f"bundled robot by name ({', '.join(sorted(BUNDLED_ROBOTS))}); used when "
                  "robot_description and urdf_path are empty", read_only=True),
    ParameterSpec("robot_description", "string", "", "URDF XML of the robot (wins over urdf_path "
                  "and robot)", read_only=True),
    ParameterSpec("robot_description_topic", "string", "", "std_msgs/String topic (transient local, "
                  "as robot_state_publisher publishes /robot_description) the URDF comes from; the node "
                  "waits for it, takes the first valid one and refuses later different ones (restart to "
                  "change the model); wins over robot_description, urdf_path and robot. Empty = off",
                  read_only=True),
    ParameterSpec("urdf_path", "string", "", "path of a URDF file, or a .xacro file expanded with "
                  "xacro_args (wins over robot)", read_only=True),
    ParameterSpec("xacro_args", "string_array", [], "arguments of a .xacro urdf_path, 'name:=value' "
                  "each (e.g. ur_type:=ur5e); $(find pkg) resolves through the ament index",
                  read_only=True),
    ParameterSpec("root_link", "string", "", "FK root link and frame of targets; empty = the "
                  "URDF's root (bundled robot: its root link)", read_only=True),
    ParameterSpec("end_effectors", "string_array", [], "end-effector names in ee_id order; empty = "
                  "the bundled robot's end effectors. Each needs end_effector.<name>.link",
                  read_only=True),
    ParameterSpec("active_joints", "string_array", [], "joints the solver may move by default; "
                  "empty = all joints"),
    ParameterSpec("joint_states_topic", "string", "joint_states", "sensor_msgs/JointState input",
                  read_only=True),
    ParameterSpec("service_queue_depth", "integer", DEFAULT_SERVICE_QUEUE_DEPTH, "requests that "
                  "may wait at once for ~/solve (and the GetPositionIK bridge) to answer them, in "
                  "the service's queue (middleware history depth, responses as well); a request "
                  "arriving while the queue is full pushes out the oldest waiting one, which is "
                  "never answered. Read-only: set it at start-up", read_only=True,
                  min_value=1, max_value=MAX_SERVICE_QUEUE_DEPTH),
    *_SOLVER_PARAMETERS,
    ParameterSpec("limits.max_candidates", "integer", 1000, "most candidates per request",
                  min_value=1, max_value=1_000_000),
    ParameterSpec("limits.max_targets_per_candidate", "integer", 8, "most targets per candidate",
                  min_value=1, max_value=1000),
    ParameterSpec("limits.max_batch_size", "integer", 20000, "most targets (candidates x targets) "
                  "per request", min_value=1, max_value=10_000_000),
    ParameterSpec("limits.max_seeds", "integer", 64, "most starts per candidate and round "
                  "of the multi-seed search (search.num_seeds or overrides.num_seeds)",
                  min_value=0, max_value=100000),
    *_SEARCH_PARAMETERS,
    ParameterSpec("moveit.kinematics_yaml", "string", "", "MoveIt kinematics.yaml whose groups "
                  "(direction_up_ik.base_frame / tip_frames) are served as moveit_msgs/GetPositionIK "
                  "when moveit_msgs is installed; empty = no bridge", read_only=True),
    ParameterSpec("moveit.service_name", "string", "", "GetPositionIK service name; empty = the "
                  "groups' kinematics_solver_service_name (MoveIt's default solve_ik)", read_only=True),
    ParameterSpec("robot_description_semantic", "string", "", "SRDF XML (MoveIt's parameter): the "
                  "chains (base and tip links) of the moveit.kinematics_yaml groups that do not name "
                  "direction_up_ik.base_frame / tip_frames; wins over moveit.srdf_path", read_only=True),
    ParameterSpec("moveit.srdf_path", "string", "", "path of an SRDF file, used like "
                  "robot_description_semantic", read_only=True),
    ParameterSpec("moveit.max_timeout", "double", MOVEIT_MAX_TIMEOUT, "seconds; cap of a GetPositionIK "
                  "request's search budget (its timeout, or the group's kinematics_solver_timeout when "
                  "it sends 0, as srv_kinematics_plugin does). The node answers one request at a time "
                  "and stops on SIGINT after the running one, so this also bounds both waits",
                  min_value=0.001, max_value=60.0),
    ParameterSpec("command.type", "string", "joint_state", "published command message: "
                  + ", ".join(COMMAND_TYPES), read_only=True),
    ParameterSpec("command.topic", "string", "~/joint_command", "topic of the joint command",
                  read_only=True),
    ParameterSpec("command.joint_order", "string_array", [], "joint order of a "
                  "float64_multi_array command (forward_command_controller); empty = joint_names"),
    ParameterSpec("command.time_from_start", "double", 0.5, "seconds; time_from_start of the "
                  "single joint_trajectory point", min_value=0.0, max_value=3600.0),
    ParameterSpec("command.publish_streaming", "bool", True, "publish the best solution of every "
                  "~/target message that succeeds"),
    ParameterSpec("streaming.start_from", "string", "last_command", "where ~/target and marker "
                  "solves start: " + ", ".join(START_FROM_CHOICES) + " (the last published command while "
                  "it is at most streaming.last_command_timeout old, else the joint states; the "
                  "markers: their last solution)"),
    ParameterSpec("streaming.last_command_timeout", "double", 1.0, "seconds a published command stays "
                  "the start of ~/target solves (joint states lag it while a stream runs); 0 = no "
                  "limit", min_value=0.0, max_value=3600.0),
    ParameterSpec("streaming.max_joint_step", "double_array", [DEFAULT_MAX_JOINT_STEP], "rad or m per "
                  "command; a ~/target solution moving a joint farther from its start is approached a "
                  "continuous step per command (a marker drop: walked to), or held (not published, "
                  "counted, warned) when no continuous step exists; one value for every joint or one "
                  "per joint; each > 0, .inf = no limit"),
    ParameterSpec("markers.enabled", "bool", False, "serve RViz interactive markers to drag the "
                  "end-effector targets (solved live, command published on success) and publish "
                  "~/markers (visualization_msgs/MarkerArray: target vs current TCP)", read_only=True),
    ParameterSpec("markers.namespace", "string", "direction_up_ik_markers", "interactive-marker "
                  "namespace, one level, relative to the node's namespace: <ns>/update, "
                  "<ns>/feedback, <ns>/get_interactive_markers", read_only=True),
    ParameterSpec("markers.rate_hz", "double", 30.0, "most drag solves per second, Hz in (0, 1000]; "
                  "feedback in between is coalesced (the newest target wins)",
                  min_value=0.0, max_value=1000.0),
    ParameterSpec("markers.collision_bodies", "bool", False, "also show the robot's collision bodies "
                  "(at the latest joint state) in ~/markers; the obstacles are always shown"),
    *_COLLISION_PARAMETERS,
)
PARAMETER_BY_NAME = {p.name: p for p in PARAMETERS}
_NAME_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def end_effector_parameters(name: str, defaults=None) -> Tuple[ParameterSpec, ...]:
    """The read-only parameters of end effector ``name``.

    ``defaults`` (an EndEffectorSpec of a bundled robot, or None) fills defaults.
    """
    prefix = f"end_effector.{name}"
    link = defaults.link if defaults is not None else ""
    xyz = list(defaults.tcp_xyz) if defaults is not None else [0.0, 0.0, 0.0]
    rpy = list(defaults.tcp_rpy) if defaults is not None else [0.0, 0.0, 0.0]
    return (
        ParameterSpec(f"{prefix}.link", "string", link, f"URDF link of end effector '{name}'",
                      read_only=True),
        ParameterSpec(f"{prefix}.tcp_xyz", "double_array", xyz, "link -> TCP translation, metres, "
                      "in the link frame", read_only=True),
        ParameterSpec(f"{prefix}.tcp_rpy", "double_array", rpy, "link -> TCP rotation, URDF "
                      "roll/pitch/yaw, radians", read_only=True),
        ParameterSpec(f"{prefix}.local_axes", "string", "x_y", "TCP axes of this end effector's "
                      "direction/up when a target uses LOCAL_AXES_CONFIGURED, and for the "
                      "interactive markers: 'x_y' (+X/+Y, the default, as LOCAL_AXES_DEFAULT and "
                      "the spec) or 'tcp' (+Z/+Y)"),
    )


@dataclass(frozen=True)
class EndEffectorConfig:
    """One configured end effector (ee_id = its index in NodeConfig.end_effectors)."""

    name: str
    link: str
    tcp_xyz: Tuple[float, float, float]
    tcp_rpy: Tuple[float, float, float]
    local_axes: str


@dataclass(frozen=True)
class ObstacleConfig:
    """One fixed obstacle of the parameters: ``shape`` (OBSTACLE_SHAPES) with ``dimensions``
    (metres, SolidPrimitive order) centred at ``xyz`` (m) / ``rpy`` (rad) in the root frame."""

    id: str
    shape: str
    dimensions: Tuple[float, ...]
    xyz: Tuple[float, float, float]
    rpy: Tuple[float, float, float]


@dataclass(frozen=True)
class NodeConfig:
    """Validated node configuration (see :data:`PARAMETERS` for the meaning of each field)."""

    robot: str
    robot_description: str
    urdf_path: str
    root_link: str
    end_effectors: Tuple[EndEffectorConfig, ...]
    active_joints: Tuple[str, ...]
    joint_states_topic: str
    service_queue_depth: int
    solver: SolverSettings
    max_candidates: int
    max_targets_per_candidate: int
    max_batch_size: int
    command_type: str
    command_topic: str
    command_joint_order: Tuple[str, ...]
    command_time_from_start: float
    publish_streaming: bool
    markers_enabled: bool
    markers_namespace: str
    markers_rate_hz: float
    max_seeds: int
    search: SearchSettings  # search.*: None where the parameter holds its "none" value
    search_solver: SolverSettings  # solver.* with search.<SEARCH_SOLVER_FIELDS>: the search's local solves
    moveit_kinematics_yaml: str
    moveit_service_name: str
    robot_description_semantic: str = ""
    moveit_srdf_path: str = ""
    moveit_max_timeout: float = MOVEIT_MAX_TIMEOUT
    robot_description_topic: str = ""
    xacro_args: Tuple[str, ...] = ()
    streaming_start_from: str = "last_command"
    streaming_last_command_timeout: float = 1.0
    streaming_max_joint_step: Tuple[float, ...] = (DEFAULT_MAX_JOINT_STEP,)
    collision_enabled: bool = True
    collision_padding: float = 0.0
    collision_srdf: str = ""
    collision_mesh_paths: Tuple[str, ...] = ()
    obstacles: Tuple[ObstacleConfig, ...] = ()
    markers_collision_bodies: bool = False

    def collision_srdf_source(self) -> Tuple[str, str]:
        """(SRDF path or XML, the parameter it comes from) of the collision model's disabled pairs:
        collision.srdf, else robot_description_semantic, else moveit.srdf_path; ("", "") for none."""
        for value, parameter in ((self.collision_srdf, "collision.srdf"),
                                 (self.robot_description_semantic, "robot_description_semantic"),
                                 (self.moveit_srdf_path, "moveit.srdf_path")):
            if value:
                return value, parameter
        return "", ""


def _uses_bundled_robot(values: Mapping[str, Any]) -> bool:
    """Whether the model is the bundled ``robot`` (no description, file or topic is set)."""
    return not (values.get("robot_description") or values.get("urdf_path")
                or values.get("robot_description_topic"))


def default_end_effector_names(values: Mapping[str, Any]) -> Tuple[str, ...]:
    """End-effector names: the parameter, else those of the bundled robot (when it is used)."""
    names = tuple(values.get("end_effectors") or ())
    if names:
        return names
    if _uses_bundled_robot(values):
        robot = values.get("robot", DEFAULT_ROBOT)
        if robot in BUNDLED_ROBOTS:
            return tuple(e.name for e in BUNDLED_ROBOTS[robot].end_effectors)
    return ()


def bundled_end_effector_defaults(values: Mapping[str, Any], name: str):
    """The bundled robot's EndEffectorSpec called ``name``, when the bundled robot is used."""
    if not _uses_bundled_robot(values):
        return None
    robot = BUNDLED_ROBOTS.get(values.get("robot", DEFAULT_ROBOT))
    if robot is None:
        return None
    return next((e for e in robot.end_effectors if e.name == name), None)


def _number(values, name):
    """The value of numeric parameter ``name`` (or its default) of the parameter's type."""
    spec = PARAMETER_BY_NAME[name]
    value = values.get(name, spec.default)
    if spec.type == "integer":
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConfigError(name, f"must be an integer, got {value!r}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ConfigError(name, f"must be a number, got {value!r}")
    return float(value)


def _check_range(name, value):
    spec = PARAMETER_BY_NAME[name]
    if spec.min_value is not None and value < spec.min_value:
        raise ConfigError(name, f"must be >= {spec.min_value}, got {value}")
    if spec.max_value is not None and value > spec.max_value:
        raise ConfigError(name, f"must be <= {spec.max_value}, got {value}")
    return value


def _finite_in_range(values, name, rule: str = "must be finite") -> float:
    """The value of double parameter ``name``: finite (else ``rule``) and in its range."""
    value = _number(values, name)
    if not math.isfinite(value):
        raise ConfigError(name, rule)
    return _check_range(name, value)


def _settings(cls, values: Mapping[str, Any], parameter_of):
    """``cls(**values)``; a broken rule becomes a ConfigError naming ``parameter_of(field)``."""
    try:
        return cls(**values)
    except InputValidationError as exc:
        raise ConfigError(parameter_of(exc.field), exc.rule) from None


def _setting_values(values: Mapping[str, Any], specs) -> Dict[str, Any]:
    """{field: value} of generated ``<prefix>.<field>`` parameters, range-checked (numbers in
    the parameter's range; choices are checked by the settings class)."""
    out = {}
    for spec in specs:
        field = spec.name.split(".", 1)[1]
        if spec.type == "string":
            out[field] = values.get(spec.name, spec.default)
        else:
            value = _number(values, spec.name)
            out[field] = _check_range(spec.name, value) if math.isfinite(value) else value
    return out


def settings_from_values(values: Mapping[str, Any]):
    """(solver, search_solver, search): the ``solver.*`` / ``search.*`` parameters as settings.

    Raises:
        ConfigError: naming the parameter whose value breaks its rule.
    """
    solver_values = _setting_values(values, _SOLVER_PARAMETERS)
    solver = _settings(SolverSettings, solver_values, lambda field: f"solver.{field}")
    search_values = _setting_values(values, _SEARCH_PARAMETERS)
    overrides = {name: search_values.pop(name) for name in SEARCH_SOLVER_FIELDS}
    search_solver = _settings(SolverSettings, {**solver_values, **overrides},
                              lambda field: f"{'search' if field in overrides else 'solver'}.{field}")
    if search_values["time_budget"] == 0.0:  # the parameters' "none"
        search_values["time_budget"] = None
    if search_values["random_seed"] < 0:
        search_values["random_seed"] = None
    search = _settings(SearchSettings, search_values, lambda field: f"search.{field}")
    return solver, search_solver, search


def _vector3(values, name):
    value = values.get(name)
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(name, f"must be 3 numbers, got {value!r}") from None
    if len(out) != 3 or not all(math.isfinite(v) for v in out):
        raise ConfigError(name, f"must be 3 finite numbers, got {list(out)}")
    return out


def config_from_values(values: Mapping[str, Any]) -> NodeConfig:
    """Validate parameter values and build the node configuration.

    ``values`` maps parameter names to values; missing entries take their defaults.
    Checks that need the robot model (link and joint names) are done by the node.

    Raises:
        ConfigError: the first rule broken, naming the parameter.
    """
    def get(name):
        return values.get(name, PARAMETER_BY_NAME[name].default)

    robot = get("robot")
    if _uses_bundled_robot(values):
        if robot not in BUNDLED_ROBOTS:
            raise ConfigError("robot", f"unknown bundled robot '{robot}'; choose one of "
                                       f"{sorted(BUNDLED_ROBOTS)} or set robot_description / urdf_path / "
                                       "robot_description_topic")
    xacro_args = tuple(get("xacro_args") or ())
    try:
        parse_xacro_args(xacro_args)
    except InputValidationError as exc:
        raise ConfigError("xacro_args", f"{exc.field}: {exc.rule}") from None
    if xacro_args and not is_xacro_path(get("urdf_path")):
        raise ConfigError("xacro_args", f"only applies when urdf_path names a .xacro file, got urdf_path "
                                        f"{get('urdf_path')!r}")
    names = default_end_effector_names(values)
    if not names:
        raise ConfigError("end_effectors", "at least one end effector is required")
    if len(set(names)) != len(names):
        raise ConfigError("end_effectors", f"names must be unique, got {list(names)}")
    end_effectors = []
    for name in names:
        if not name or any(c in name for c in " ./"):
            raise ConfigError("end_effectors", f"invalid name {name!r} (non-empty, no spaces, dots or "
                                               "slashes)")
        defaults = bundled_end_effector_defaults(values, name)
        spec = {p.name: p.default for p in end_effector_parameters(name, defaults)}
        merged = {**spec, **{k: v for k, v in values.items() if k in spec}}
        link = merged[f"end_effector.{name}.link"]
        if not link:
            raise ConfigError(f"end_effector.{name}.link", "must name the URDF link of this end effector")
        axes = merged[f"end_effector.{name}.local_axes"]
        if axes not in LOCAL_AXES_CHOICES:
            raise ConfigError(f"end_effector.{name}.local_axes",
                              f"must be one of {list(LOCAL_AXES_CHOICES)}, got {axes!r}")
        end_effectors.append(EndEffectorConfig(
            name=name, link=link, tcp_xyz=_vector3(merged, f"end_effector.{name}.tcp_xyz"),
            tcp_rpy=_vector3(merged, f"end_effector.{name}.tcp_rpy"), local_axes=axes))
    links = [e.link for e in end_effectors]
    if len(set(links)) != len(links):
        raise ConfigError("end_effectors", f"two end effectors use the same link: {links}")

    ints = {}
    for name in ("limits.max_candidates", "limits.max_targets_per_candidate", "limits.max_batch_size"):
        ints[name] = _check_range(name, _number(values, name))
    command_type = get("command.type")
    if command_type not in COMMAND_TYPES:
        raise ConfigError("command.type", f"must be one of {list(COMMAND_TYPES)}, got {command_type!r}")
    time_from_start = _finite_in_range(values, "command.time_from_start")
    active = tuple(get("active_joints") or ())
    if len(set(active)) != len(active):
        raise ConfigError("active_joints", f"names must be unique, got {list(active)}")
    for topic in ("joint_states_topic", "command.topic"):
        if not get(topic):
            raise ConfigError(topic, "must not be empty")
    namespace = get("markers.namespace")
    if not isinstance(namespace, str) or not _NAME_TOKEN.fullmatch(namespace):
        raise ConfigError("markers.namespace", f"must be one name token (letters, digits, '_'; not "
                                               f"starting with a digit), got {namespace!r}")
    rate = _number(values, "markers.rate_hz")
    if not math.isfinite(rate) or rate <= 0.0:
        raise ConfigError("markers.rate_hz", f"must be > 0, got {rate}")
    _check_range("markers.rate_hz", rate)
    ints["limits.max_seeds"] = _check_range("limits.max_seeds", _number(values, "limits.max_seeds"))
    ints["service_queue_depth"] = _check_range("service_queue_depth", _number(values, "service_queue_depth"))
    max_timeout = _finite_in_range(values, "moveit.max_timeout")
    solver, search_solver, search = settings_from_values(values)
    streaming = _streaming_values(values)
    padding = _finite_in_range(values, "collision.padding")
    return NodeConfig(
        robot=robot, robot_description=get("robot_description"), urdf_path=get("urdf_path"),
        root_link=get("root_link"), end_effectors=tuple(end_effectors), active_joints=active,
        joint_states_topic=get("joint_states_topic"), service_queue_depth=ints["service_queue_depth"],
        solver=solver,
        max_candidates=ints["limits.max_candidates"],
        max_targets_per_candidate=ints["limits.max_targets_per_candidate"],
        max_batch_size=ints["limits.max_batch_size"], command_type=command_type,
        command_topic=get("command.topic"), command_joint_order=tuple(get("command.joint_order") or ()),
        command_time_from_start=time_from_start, publish_streaming=bool(get("command.publish_streaming")),
        markers_enabled=bool(get("markers.enabled")), markers_namespace=namespace, markers_rate_hz=rate,
        max_seeds=ints["limits.max_seeds"], search=search, search_solver=search_solver,
        moveit_kinematics_yaml=get("moveit.kinematics_yaml"),
        moveit_service_name=get("moveit.service_name"),
        robot_description_semantic=get("robot_description_semantic"), moveit_srdf_path=get("moveit.srdf_path"),
        moveit_max_timeout=max_timeout, robot_description_topic=get("robot_description_topic"),
        xacro_args=xacro_args, collision_enabled=bool(get("collision.enabled")),
        collision_padding=padding, collision_srdf=get("collision.srdf"),
        collision_mesh_paths=tuple(get("collision.mesh_paths") or ()), obstacles=obstacles_from_values(values),
        markers_collision_bodies=bool(get("markers.collision_bodies")), **streaming)


def obstacles_from_values(values: Mapping[str, Any]) -> Tuple[ObstacleConfig, ...]:
    """The fixed obstacles of ``collision.obstacles`` and ``collision.obstacle.<id>.*``.

    Raises:
        ConfigError: naming the parameter whose value breaks its rule.
    """
    ids = tuple(values.get("collision.obstacles") or ())
    if len(set(ids)) != len(ids):
        raise ConfigError("collision.obstacles", f"ids must be unique, got {list(ids)}")
    out = []
    for obstacle_id in ids:
        if not isinstance(obstacle_id, str) or not _NAME_TOKEN.fullmatch(obstacle_id):
            raise ConfigError("collision.obstacles", f"invalid id {obstacle_id!r} (letters, digits, '_'; "
                                                     "not starting with a digit)")
        prefix = f"collision.obstacle.{obstacle_id}"
        given = {spec.name: values.get(spec.name, spec.default) for spec in obstacle_parameters(obstacle_id)}
        shape = given[f"{prefix}.shape"]
        if shape not in OBSTACLE_SHAPES:
            raise ConfigError(f"{prefix}.shape", f"must be one of {list(OBSTACLE_SHAPES)}, got {shape!r}")
        try:
            dimensions = primitive_dimensions(shape, given[f"{prefix}.dimensions"], f"{prefix}.dimensions")
        except InputValidationError as exc:
            raise ConfigError(exc.field, exc.rule) from None
        out.append(ObstacleConfig(obstacle_id, shape, dimensions, _vector3(given, f"{prefix}.xyz"),
                                  _vector3(given, f"{prefix}.rpy")))
    return tuple(out)


def _streaming_values(values: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``streaming.*`` fields of NodeConfig (the step limits' length is checked against the
    model by :func:`~.robot_model.load_robot_model` and the node)."""
    start_from = values.get("streaming.start_from", PARAMETER_BY_NAME["streaming.start_from"].default)
    if start_from not in START_FROM_CHOICES:
        raise ConfigError("streaming.start_from", f"must be one of {list(START_FROM_CHOICES)}, got {start_from!r}")
    timeout = _finite_in_range(values, "streaming.last_command_timeout", "must be finite (0 = no limit)")
    steps = values.get("streaming.max_joint_step", PARAMETER_BY_NAME["streaming.max_joint_step"].default)
    try:
        steps = tuple(float(v) for v in steps)
    except (TypeError, ValueError):
        raise ConfigError("streaming.max_joint_step", f"must be numbers, got {steps!r}") from None
    if not steps or not all(v > 0.0 for v in steps):  # NaN fails too
        raise ConfigError("streaming.max_joint_step", f"needs one or more values > 0 (.inf = no limit), "
                                                      f"got {list(steps)}")
    return {"streaming_start_from": start_from, "streaming_last_command_timeout": timeout,
            "streaming_max_joint_step": steps}


# ------------------------------------------------------------------ parameter files
NODE_NAME = "direction_up_ik_node"
