"""The node's collision model and world obstacles: fixed ones from parameters, changing ones
from ``~/obstacles``.

:func:`load_collision_scene` builds the CollisionScene of the ``collision.*`` parameters.

Plain functions and one small registry, :class:`ObstacleSet`, on duck-typed
``direction_up_ik/msg/CollisionObstacle`` messages (``header.frame_id``, ``id``,
``operation``, ``shape.type`` / ``shape.dimensions``, ``pose``), so that every rule is
tested without a node:

* poses are resolved into the robot's root frame: ``frame_id`` empty, the root, or a
  frame fixed to it (the node passes ``{frame: (4, 4) root -> frame}``); the node has no
  tf, so a frame that moves with the joints or is unknown is rejected;
* shapes are shape_msgs/SolidPrimitive BOX, SPHERE and CYLINDER with the message's
  dimension order (:data:`~direction_up_ik.ros.config.OBSTACLE_SHAPES`);
* a bad message raises :class:`ObstacleError` naming the field, and the set is unchanged;
* the parameter obstacles (``collision.obstacles``) cannot be replaced or removed from the
  topic; CLEAR removes the topic's obstacles only.
"""

from __future__ import annotations

import pathlib
import warnings
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..core import CollisionGeometryWarning, CollisionScene, DirectionUpIKError, RobotModelError
from ..core.errors import InputValidationError
from ..core.rotations import make_transform, rpy_to_matrix
from .config import OBSTACLE_SHAPES, ConfigError, NodeConfig, ObstacleConfig, primitive_dimensions
from .interactive_markers import pose_to_matrix
from .robot_model import robot_description_text, robot_source

#: CollisionObstacle.operation values.
ADD, REMOVE, CLEAR = 0, 1, 2
#: Most obstacles the node keeps at once (parameters and topic): every solution is checked
#: against each of them.
MAX_OBSTACLES = 1000
_SHAPE_OF_TYPE = {code: name for name, (code, _) in OBSTACLE_SHAPES.items()}


class ObstacleError(InputValidationError):
    """A CollisionObstacle message the node cannot apply; ``field`` names the message field."""


@dataclass(frozen=True)
class ObstacleEntry:
    """One obstacle as the node keeps it.

    Attributes:
        id: its name.
        shape: "box", "sphere" or "cylinder".
        dimensions: metres, SolidPrimitive order (box x, y, z; sphere radius; cylinder height, radius).
        pose: (4, 4) root -> shape centre (cylinder axis = local Z).
        fixed: True for a parameter obstacle (collision.obstacles).
    """

    id: str
    shape: str
    dimensions: Tuple[float, ...]
    pose: np.ndarray
    fixed: bool = False

    def to_core(self):
        """The core's ``Obstacle`` (robot root frame), named by the id."""
        from ..core import Obstacle

        if self.shape == "box":
            return Obstacle.box(self.dimensions, self.pose, name=self.id)
        if self.shape == "sphere":
            return Obstacle.sphere(self.dimensions[0], self.pose, name=self.id)
        height, radius = self.dimensions
        return Obstacle.cylinder(radius, height, self.pose, name=self.id)


def entry_from_config(config: ObstacleConfig) -> ObstacleEntry:
    """The fixed obstacle of a ``collision.obstacle.<id>.*`` parameter set (already validated)."""
    return ObstacleEntry(config.id, config.shape, tuple(config.dimensions),
                         make_transform(rpy_to_matrix(config.rpy), config.xyz), fixed=True)


def entry_from_message(msg, frames: Mapping[str, np.ndarray]) -> ObstacleEntry:
    """The obstacle an ADD message describes, in the root frame.

    Args:
        msg: a CollisionObstacle (ADD).
        frames: ``{frame_id: (4, 4) root -> frame}`` of the frames the node resolves ('' included).
    Raises:
        ObstacleError: empty id, unknown frame, unsupported shape type, bad dimensions, bad pose.
    """
    if not msg.id:
        raise ObstacleError("id", "must not be empty")
    frame = msg.header.frame_id
    if frame not in frames:
        raise ObstacleError("header.frame_id", f"cannot resolve frame '{frame}' without tf; use '' (the root) "
                                               f"or a frame fixed to the root: {sorted(f for f in frames if f)}")
    shape = _SHAPE_OF_TYPE.get(int(msg.shape.type))
    if shape is None:
        raise ObstacleError("shape.type", f"unsupported type {msg.shape.type}; valid: "
                                          + ", ".join(f"{code} {name}" for name, (code, _) in OBSTACLE_SHAPES.items()))
    try:
        dimensions = primitive_dimensions(shape, msg.shape.dimensions, "shape.dimensions")
    except InputValidationError as exc:
        raise ObstacleError(exc.field, exc.rule) from None
    try:
        pose = pose_to_matrix(msg.pose)
    except ValueError as exc:
        raise ObstacleError("pose", str(exc).split(": ", 1)[-1]) from None
    return ObstacleEntry(msg.id, shape, dimensions, frames[frame] @ pose)


class ObstacleSet:
    """The obstacles in force: the fixed ones of the parameters and those of the topic.

    ``version`` grows with every change, so its user knows when to hand the obstacles on.
    ``reserved``: names an obstacle may not take (the robot's links, which collision reports
    name alongside the obstacles).
    """

    def __init__(self, fixed: Tuple[ObstacleEntry, ...] = (), reserved: Sequence[str] = ()) -> None:
        self._fixed: Dict[str, ObstacleEntry] = {e.id: e for e in fixed}
        self._reserved = frozenset(reserved)
        self._topic: Dict[str, ObstacleEntry] = {}
        self.version = 0

    def entries(self) -> List[ObstacleEntry]:
        """Every obstacle: the fixed ones (parameter order), then the topic's (arrival order)."""
        return list(self._fixed.values()) + list(self._topic.values())

    def __len__(self) -> int:
        return len(self._fixed) + len(self._topic)

    def apply(self, msg, frames: Mapping[str, np.ndarray]) -> str:
        """Apply one CollisionObstacle message; returns what it did, in words.

        Raises:
            ObstacleError: the message breaks a rule; nothing changed.
        """
        operation = int(msg.operation)
        if operation == CLEAR:
            count = len(self._topic)
            self._topic.clear()
            self.version += 1
            return f"cleared {count} obstacle(s) of the topic ({len(self._fixed)} of the parameters kept)"
        if operation not in (ADD, REMOVE):
            raise ObstacleError("operation", f"unknown value {operation} (valid: {ADD} ADD, {REMOVE} REMOVE, "
                                             f"{CLEAR} CLEAR)")
        if msg.id in self._fixed:
            raise ObstacleError("id", f"'{msg.id}' is a fixed obstacle of parameter collision.obstacles; "
                                      "it cannot be replaced or removed from the topic")
        if msg.id in self._reserved:
            raise ObstacleError("id", f"'{msg.id}' is a link of the robot; collision reports name links and "
                                      "obstacles alike, so choose another id")
        if operation == REMOVE:
            if self._topic.pop(msg.id, None) is None:
                return f"remove '{msg.id}': no such obstacle, nothing changed"
            self.version += 1
            return f"removed '{msg.id}'"
        entry = entry_from_message(msg, frames)
        if entry.id not in self._topic and len(self) >= MAX_OBSTACLES:
            raise ObstacleError("id", f"the node keeps at most {MAX_OBSTACLES} obstacles; remove or clear some "
                                      "first")
        verb = "replaced" if entry.id in self._topic else "added"
        self._topic[entry.id] = entry
        self.version += 1
        return f"{verb} {entry.shape} '{entry.id}' {list(entry.dimensions)} m at {np.round(entry.pose[:3, 3], 4).tolist()}"


def load_collision_scene(config: NodeConfig, robot, description: Optional[str] = None):
    """(CollisionScene of ``robot`` with the parameter obstacles, [warnings]) for ``collision.*``.

    Built whatever ``collision.enabled`` says (it is live); a robot without collision geometry
    gives a scene without link bodies, which checks nothing. The warnings name links whose mesh
    files cannot be used.

    Raises:
        ConfigError: an SRDF that cannot be read or names unknown links, collision elements the
            URDF breaks rules with, a parameter obstacle named like a robot link.
    """
    clash = sorted({o.id for o in config.obstacles} & set(robot.link_names))
    if clash:
        raise ConfigError("collision.obstacles", f"ids {clash} are links of the robot; collision reports "
                                                 "name links and obstacles alike, so choose others")
    srdf, srdf_parameter = config.collision_srdf_source()
    if srdf and "<" not in srdf and not pathlib.Path(srdf).is_file():
        raise ConfigError(srdf_parameter, f"file '{srdf}' not found")
    _, urdf_parameter = robot_source(config, description)
    urdf = robot_description_text(config, description)  # a xacro file expanded
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CollisionGeometryWarning)
        try:
            scene = CollisionScene.from_urdf(
                robot, urdf, srdf=srdf or None, padding=config.collision_padding,
                obstacles=[entry_from_config(o).to_core() for o in config.obstacles],
                mesh_paths=config.collision_mesh_paths)
        except RobotModelError as exc:
            raise ConfigError(urdf_parameter, str(exc)) from None
        except DirectionUpIKError as exc:
            field = getattr(exc, "field", "")
            parameter = {"srdf": srdf_parameter, "padding": "collision.padding"}.get(field, "collision.obstacles")
            raise ConfigError(parameter, str(exc)) from None
    return scene, [str(w.message) for w in caught if issubclass(w.category, CollisionGeometryWarning)]
