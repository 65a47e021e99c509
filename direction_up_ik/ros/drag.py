"""Drag end-effector targets in RViz and solve them live: the solver node's markers.

:class:`DragMarkers` belongs to ``direction_up_ik_node`` (``markers.enabled``). It
serves one 6-DOF interactive marker per end effector through
:class:`~direction_up_ik.ros.interactive_markers.InteractiveMarkerServer` and
publishes ``~/markers`` (``visualization_msgs/MarkerArray``).

Behaviour:

* The markers appear once every joint has a position (``joint_states``), each at its
  end effector's current TCP, in the robot's root frame (frame-locked, stamp 0).
  The marker frame is the TCP frame: with ``end_effector.<name>.local_axes`` =
  ``tcp`` the target direction is the marker's +Z and up its +Y; with ``x_y``
  +X and +Y.
* Dragging one marker (POSE_UPDATE ... MOUSE_UP) changes that end effector's
  target; the others keep their last targets, and all of them are solved as ONE
  candidate through the node's own ``stream()`` (same parameters, active joints,
  command publishing and ``streaming.max_joint_step``). Each solve starts from the
  markers' last solution (``streaming.start_from`` last_command; the first from the
  node's last command or the joint states), not from joint states that may not have
  moved: the robot model follows the drag even with no robot behind the command.
  Feedback is coalesced: a timer at ``markers.rate_hz``
  solves the newest targets and restarts after each solve, so solves are at least a
  period apart and the feedback that arrived during one is read before the next:
  a slow solve never queues stale drags.
* Success publishes the joint command (while publishing is on) and colours the
  markers green; failure publishes nothing, colours the dragged marker red and
  logs the per-end-effector errors. A drop farther than the step limit is walked
  to (sub-targets, each solved from the one before, within the limit: the node's
  ``stream``); when no continuous way exists it is held: nothing published, orange. A failed (red) target is re-tried from the last
  solution by the next drag, or by a click on its sphere, which solves with the
  node's multi-seed search (least joint motion; the step limit still applies).
* Menu per marker: reset the target to the current TCP (and start the next solve
  from the joint states again); cycle that end effector's
  constraint full -> axis -> position (solved at once); publishing on/off (all
  markers).
* ``~/markers`` shows per end effector the target frame (direction and up arrows,
  coloured by the last outcome) against the current TCP frame (FK of the latest
  joint state, blue), and a text with the remaining position (mm) and angle (deg)
  errors. It is republished when a target, an outcome, the obstacles or the joint
  state changes.
* Collisions (``collision.*``): a drag whose solution collides fails like an unreachable
  one (red, nothing published; the text names the colliding pair). ``~/markers`` shows
  the obstacles (namespace ``obstacles``, brown, ids as texts in ``obstacle_names``) and,
  with ``markers.collision_bodies``, the robot's collision bodies at the latest joint
  state as the check bounds them (``collision_bodies``, grey).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Set, Tuple

import numpy as np
from geometry_msgs.msg import Point, Quaternion
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import (InteractiveMarker, InteractiveMarkerControl,
                                    InteractiveMarkerFeedback, Marker, MarkerArray, MenuEntry)

from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
from direction_up_ik.srv import SolveDirectionUpIK

from ..collision_shapes import Shape, obstacle_shapes, robot_shapes
from .config import NodeConfig
from .conversions import STOP_IN_COLLISION
from .log_throttle import LogThrottle
from .interactive_markers import (POSE_EVENTS, InteractiveMarkerServer, matrix_to_pose,
                                  pose_to_matrix)

Target = DirectionUpTarget
MODES = ("full", "axis", "position")
MODE_CONSTANTS = {"full": Target.MODE_FULL, "axis": Target.MODE_AXIS, "position": Target.MODE_POSITION}
MENU_RESET, MENU_MODE, MENU_PUBLISH = 1, 2, 3

#: RGBA per outcome of the last solve: not solved yet, solved, no solution.
COLOURS = {"idle": (0.55, 0.60, 0.95, 0.9), "ok": (0.10, 0.80, 0.25, 0.9),
           "failed": (0.95, 0.10, 0.10, 0.95), "held": (1.0, 0.55, 0.0, 0.95)}
CURRENT_COLOUR = (0.15, 0.35, 1.0, 0.9)  # current TCP frame arrows in ~/markers
OBSTACLE_COLOUR = (0.55, 0.34, 0.29, 0.6)  # obstacles in ~/markers
BODY_COLOUR = (0.6, 0.6, 0.6, 0.35)        # robot collision bodies in ~/markers
MARKER_SCALE = 0.25       # m, size of the interactive marker's handles
DIRECTION_LENGTH = 0.12   # m, direction arrows in ~/markers
UP_LENGTH = 0.07          # m, up arrows in ~/markers

_S = math.sqrt(0.5)
#: Control orientations (x, y, z, w) that turn the control's +X onto the marker's X, Y, Z.
_AXIS_ORIENTATIONS = {"x": (0.0, 0.0, 0.0, 1.0), "y": (0.0, 0.0, _S, _S), "z": (0.0, -_S, 0.0, _S)}

#: The node's ``stream(candidate, publish, start, search, approach=)`` -> ``StreamOutcome``.
StreamFunction = Callable[..., Any]


def local_columns(local_axes: str) -> Tuple[int, int]:
    """(column of the TCP rotation that is the direction, column that is up) for
    ``end_effector.<name>.local_axes``: ``tcp`` -> (+Z, +Y), ``x_y`` -> (+X, +Y)."""
    return (2, 1) if local_axes == "tcp" else (0, 1)


def target_message(name: str, pose: np.ndarray, mode: str, local_axes: str) -> DirectionUpTarget:
    """A DirectionUpTarget in the root frame from a (4, 4) TCP-frame pose."""
    d, u = local_columns(local_axes)
    msg = Target(end_effector=name, frame_id="", mode=MODE_CONSTANTS[mode],
                 local_axes=Target.LOCAL_AXES_TCP if local_axes == "tcp" else Target.LOCAL_AXES_DEFAULT)
    msg.position.x, msg.position.y, msg.position.z = (float(v) for v in pose[:3, 3])
    msg.direction.x, msg.direction.y, msg.direction.z = (float(v) for v in pose[:3, d])
    msg.up.x, msg.up.y, msg.up.z = (float(v) for v in pose[:3, u])
    return msg


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    c = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return math.acos(max(-1.0, min(1.0, c)))


def pose_errors(current: np.ndarray, target: np.ndarray, mode: str,
                local_axes: str) -> Tuple[float, float, float]:
    """(position m, direction rad, up rad) of a TCP pose against a target pose (both (4, 4));
    NaN for the angles the mode leaves free. Up is the raw angle between the up axes."""
    d, u = local_columns(local_axes)
    position = float(np.linalg.norm(current[:3, 3] - target[:3, 3]))
    direction = _angle(current[:3, d], target[:3, d]) if mode != "position" else math.nan
    up = _angle(current[:3, u], target[:3, u]) if mode == "full" else math.nan
    return position, direction, up


def format_errors(errors: Sequence[float]) -> str:
    """"12.3 mm, dir 4.5 deg, up 1.2 deg" (angles omitted when NaN)."""
    position, direction, up = errors
    parts = [f"{1e3 * position:.1f} mm"]
    if not math.isnan(direction):
        parts.append(f"dir {math.degrees(direction):.1f} deg")
    if not math.isnan(up):
        parts.append(f"up {math.degrees(up):.1f} deg")
    return ", ".join(parts)


def _rgba(marker: Marker, rgba) -> None:
    marker.color.r, marker.color.g, marker.color.b, marker.color.a = (float(v) for v in rgba)


def _point(v) -> Point:
    return Point(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def _quaternion(xyzw) -> Quaternion:
    return Quaternion(x=xyzw[0], y=xyzw[1], z=xyzw[2], w=xyzw[3])


def _arrow(frame: str, ns: str, marker_id: int, start, vector, diameter: float, rgba) -> Marker:
    m = Marker(ns=ns, id=marker_id, type=Marker.ARROW, action=Marker.ADD)
    m.header.frame_id = frame
    m.pose.orientation.w = 1.0
    m.points = [_point(start), _point(np.asarray(start) + np.asarray(vector))]
    m.scale.x, m.scale.y, m.scale.z = diameter, 2.0 * diameter, 2.5 * diameter
    _rgba(m, rgba)
    return m


@dataclass
class EndEffectorTarget:
    """Marker state of one end effector.

    Attributes:
        name: end-effector name (= interactive marker name).
        pose: (4, 4) target TCP pose in the root frame.
        mode: "full", "axis" or "position".
        status: outcome of the last solve: "idle" (none yet), "ok", "failed" or "held"
            (solved, but a joint would jump more than streaming.max_joint_step).
        solver_errors: (position m, direction rad, up rad) of the last solve's
            reported result, or None.
        collision: the colliding pair ("link - link") when the last solve reached the
            targets only in collision, else "".
    """

    name: str
    pose: np.ndarray
    mode: str = "full"
    status: str = "idle"
    solver_errors: Optional[Tuple[float, float, float]] = None
    collision: str = ""


class DragMarkers:
    """Interactive markers and ``~/markers`` of the solver node.

    Args:
        node: the solver node (publishers, timer, logger).
        robot: its RobotKinematics (FK of the current joint state; root frame).
        config: returns the node's current :class:`NodeConfig` (end effectors,
            ``markers.*``, ``command.publish_streaming`` as the initial publishing state).
        joint_state: returns the latest (D,) joint positions, NaN where none was received.
        stream: the node's ``stream(candidate, publish, start, search, approach)``: solves from
            ``start`` (None: the node's streaming start: its last command or the joint
            states), publishes the command when ``publish`` and the solution is within the step
            limit or at the end of a continuous walk (``approach="walk"``).
        collision_scene: returns the node's CollisionScene (its obstacles are shown; its robot
            bodies with ``markers.collision_bodies``), or None for none.
    """

    def __init__(self, node: Node, robot, config: Callable[[], NodeConfig],
                 joint_state: Callable[[], np.ndarray], stream: StreamFunction,
                 collision_scene: Callable[[], object] = lambda: None) -> None:
        cfg = config()
        self._node, self._robot, self._config = node, robot, config
        self._joint_state, self._stream_fn = joint_state, stream
        self._solution: Optional[np.ndarray] = None  # (D,) last solution: the next solve's start
        self._retry = False  # the next solve re-tries a failed target with the search
        self._collision_scene = collision_scene
        self._shown_counts: Dict[str, int] = {}  # collision markers per namespace last published
        self._frame = robot.root_link
        self._lock = threading.Lock()
        self._targets: Dict[str, EndEffectorTarget] = {}
        self._pending: Set[str] = set()   # end effectors whose target changed since the last solve
        self._dirty = False               # ~/markers needs republishing
        self._shown_q: Optional[np.ndarray] = None
        self.publishing = bool(cfg.publish_streaming)
        self.solve_count = 0
        self.last_response: Optional[SolveDirectionUpIK.Response] = None
        self.last_outcome = None  # the node's StreamOutcome of the last solve
        self._log_throttle = LogThrottle()  # a drag's warnings (ros/log_throttle.py)
        self.server = InteractiveMarkerServer(node, cfg.markers_namespace, self._on_feedback)
        self._marker_pub = node.create_publisher(
            MarkerArray, "~/markers", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                                 durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self._rate = cfg.markers_rate_hz
        self._timer = node.create_timer(1.0 / self._rate, self._tick)

    # ------------------------------------------------------------------ inspection
    def targets(self) -> Dict[str, EndEffectorTarget]:
        """Copies of the per-end-effector state (empty until the joint state is known)."""
        with self._lock:
            return {n: EndEffectorTarget(t.name, t.pose.copy(), t.mode, t.status, t.solver_errors, t.collision)
                    for n, t in self._targets.items()}

    def refresh(self) -> None:
        """Republish ``~/markers`` on the next tick (the obstacles changed)."""
        with self._lock:
            self._dirty = True

    @property
    def rate_hz(self) -> float:
        """Rate of the solve timer in force (follows ``markers.rate_hz``), Hz."""
        return 1e9 / self._timer.timer_period_ns

    @property
    def solution(self) -> Optional[np.ndarray]:
        """(D,) last solution of the markers (the next solve's start), or None."""
        with self._lock:
            return None if self._solution is None else self._solution.copy()

    @property
    def pending(self) -> Tuple[str, ...]:
        """End effectors whose changed target waits for the next solve."""
        with self._lock:
            return tuple(sorted(self._pending))

    def candidate(self) -> DirectionUpCandidate:
        """The candidate the next solve would send: every end effector's current target."""
        config = self._config()
        with self._lock:
            return self._candidate(config)

    def _candidate(self, config: NodeConfig) -> DirectionUpCandidate:
        return DirectionUpCandidate(targets=[
            target_message(e.name, self._targets[e.name].pose, self._targets[e.name].mode, e.local_axes)
            for e in config.end_effectors])

    # ------------------------------------------------------------------ feedback (executor thread)
    def _on_feedback(self, feedback: InteractiveMarkerFeedback) -> None:
        name = feedback.marker_name
        with self._lock:
            target = self._targets.get(name)
        if target is None:
            return
        if feedback.event_type in POSE_EVENTS:
            pose = pose_to_matrix(feedback.pose)  # validated by the server
            with self._lock:
                if not np.array_equal(pose, target.pose):
                    target.pose = pose
                    self._pending.add(name)
                    self._dirty = True
        elif feedback.event_type == InteractiveMarkerFeedback.MENU_SELECT:
            self._on_menu(name, feedback.menu_entry_id)
        elif feedback.event_type == InteractiveMarkerFeedback.BUTTON_CLICK:
            with self._lock:
                self._pending.add(name)  # solve the current targets again
                self._retry = self._retry or target.status == "failed"  # with the search

    def _on_menu(self, name: str, entry: int) -> None:
        logger = self._node.get_logger()
        if entry == MENU_RESET:
            q = self._joint_state()
            if not np.all(np.isfinite(q)):
                logger.warning(f"marker '{name}': reset needs a complete joint state")
                return
            e = self._ee_index(name)
            tcp = self._robot.tcp_transforms(q.astype(np.float64))[e]
            with self._lock:
                target = self._targets[name]
                target.pose, target.status, target.solver_errors = tcp, "idle", None
                self._pending.discard(name)
                self._solution = None  # the next solve starts where the robot is
                self.server.insert(self._interactive_marker(target))
                self._dirty = True
            logger.info(f"marker '{name}': target reset to the current TCP")
        elif entry == MENU_MODE:
            with self._lock:
                target = self._targets[name]
                target.mode = MODES[(MODES.index(target.mode) + 1) % len(MODES)]
                target.status = "idle"
                self.server.insert(self._interactive_marker(target))
                self._pending.add(name)
                self._dirty = True
            logger.info(f"marker '{name}': constraint mode {target.mode}")
        elif entry == MENU_PUBLISH:
            with self._lock:
                self.publishing = not self.publishing
                for target in self._targets.values():
                    self.server.insert(self._interactive_marker(target))
            logger.info(f"interactive markers: publishing {'on' if self.publishing else 'off'}")
        else:
            logger.debug(f"marker '{name}': unknown menu entry {entry} ignored")
            return
        self.server.apply_changes()

    # ------------------------------------------------------------------ timer
    def _tick(self) -> None:
        try:
            self._follow_rate()
            q = self._joint_state()
            if not self._targets:
                if not np.all(np.isfinite(q)):
                    return
                self._create(q)
            with self._lock:
                pending, self._pending = self._pending, set()
            if pending:
                self._solve(pending)
                # A whole period from the END of the solve to the next tick: the executor
                # reads the feedback that queued up meanwhile, so only its newest pose is solved.
                self._timer.reset()
            if self._dirty or self._shown_q is None or not np.array_equal(q, self._shown_q):
                self._publish_markers(q)
        except Exception as exc:  # noqa: BLE001 - the node must keep serving
            self._node.get_logger().error(f"interactive markers: {exc!r}", throttle_duration_sec=2.0)

    def _follow_rate(self) -> None:
        rate = self._config().markers_rate_hz
        if rate != self._rate:
            self._rate = rate
            self._timer.timer_period_ns = int(round(1e9 / rate))

    def _ee_index(self, name: str) -> int:
        return [e.name for e in self._config().end_effectors].index(name)

    def _create(self, q: np.ndarray) -> None:
        tcp = self._robot.tcp_transforms(q.astype(np.float64))
        with self._lock:
            for e, ee in enumerate(self._config().end_effectors):
                target = EndEffectorTarget(ee.name, tcp[e].copy())
                self._targets[ee.name] = target
                self.server.insert(self._interactive_marker(target))
            self._dirty = True
        self.server.apply_changes()
        self._node.get_logger().info(
            f"interactive markers {sorted(self._targets)} on {self.server.update_topic} "
            f"(frame '{self._frame}')")

    def _solve(self, dragged: Set[str]) -> None:
        config = self._config()
        with self._lock:
            candidate, retry, self._retry = self._candidate(config), self._retry, False
            start = self._solution if config.streaming_start_from == "last_command" else None
        # A drop farther than one step is walked to along a continuous path (node._approach).
        outcome = self._stream_fn(candidate, self.publishing, start, retry, approach="walk")
        response = outcome.response
        self.solve_count += 1
        self.last_response, self.last_outcome = response, outcome
        if response.success and not outcome.held:
            q = response.results[response.best_index].joint_positions
            with self._lock:
                self._solution = np.asarray(q, dtype=np.float64)
        errors, collision = {}, ""
        if len(response.results) == 1:
            result = response.results[0]
            errors = {e.end_effector: (e.position_error, e.direction_error, e.up_error) for e in result.errors}
            if result.stop_reason == STOP_IN_COLLISION:
                collision = " - ".join(result.closest_pair)
        with self._lock:
            for name, target in self._targets.items():
                if response.success and not outcome.held:
                    status = "ok"
                else:  # the dragged markers say why nothing moved; the others keep theirs
                    status = ("held" if outcome.held else "failed") if name in dragged else target.status
                target.solver_errors = errors.get(name)
                target.collision = collision if status == "failed" else ""
                if status != target.status:
                    target.status = status
                    self.server.insert(self._interactive_marker(target))
            self._dirty = True
        self.server.apply_changes()
        if outcome.held and self._log_throttle.due("held", 1.0):
            self._node.get_logger().warning(f"dragged {sorted(dragged)}: {response.message}")
        elif not outcome.held and not response.success and self._log_throttle.due("unsolved", 1.0):
            detail = "; ".join(f"{n}: {format_errors(v)}" for n, v in errors.items())
            self._node.get_logger().warning(
                f"dragged {sorted(dragged)}: {response.message}" + (f" ({detail})" if detail else "")
                + "; nothing published")

    # ------------------------------------------------------------------ messages
    def _interactive_marker(self, target: EndEffectorTarget) -> InteractiveMarker:
        """The full interactive marker of ``target`` (call with the lock held)."""
        local_axes = next((e.local_axes for e in self._config().end_effectors if e.name == target.name),
                          "x_y")
        marker = InteractiveMarker(name=target.name, description=f"{target.name} ({target.mode})",
                                   scale=MARKER_SCALE, pose=matrix_to_pose(target.pose))
        marker.header.frame_id = self._frame  # stamp 0: frame-locked
        following = MODES[(MODES.index(target.mode) + 1) % len(MODES)]
        marker.menu_entries = [
            MenuEntry(id=MENU_RESET, parent_id=0, title="Reset target to current TCP",
                      command_type=MenuEntry.FEEDBACK),
            MenuEntry(id=MENU_MODE, parent_id=0, title=f"Constraint: {target.mode} (switch to {following})",
                      command_type=MenuEntry.FEEDBACK),
            MenuEntry(id=MENU_PUBLISH, parent_id=0,
                      title="Publishing: on (click to pause)" if self.publishing
                      else "Publishing: off (click to resume)", command_type=MenuEntry.FEEDBACK),
        ]
        rgba = COLOURS[target.status]
        body = InteractiveMarkerControl(name="solve", interaction_mode=InteractiveMarkerControl.BUTTON,
                                        always_visible=True, description="click: solve again")
        body.orientation = _quaternion((0.0, 0.0, 0.0, 1.0))
        sphere = Marker(type=Marker.SPHERE, action=Marker.ADD)
        sphere.pose.orientation.w = 1.0
        sphere.scale.x = sphere.scale.y = sphere.scale.z = 0.05
        _rgba(sphere, rgba)
        body.markers = [sphere]
        d, u = local_columns(local_axes)
        if target.mode != "position":  # the constrained axes, drawn in the marker frame
            for column, length in ((d, 0.12), (u, 0.07)) if target.mode == "full" else ((d, 0.12),):
                arrow = Marker(type=Marker.ARROW, action=Marker.ADD)
                arrow.pose.orientation.w = 1.0
                tip = np.zeros(3)
                tip[column] = length
                arrow.points = [_point((0.0, 0.0, 0.0)), _point(tip)]
                arrow.scale.x, arrow.scale.y, arrow.scale.z = 0.012, 0.024, 0.03
                _rgba(arrow, rgba)
                body.markers.append(arrow)
        marker.controls = [body]
        for axis, xyzw in _AXIS_ORIENTATIONS.items():
            for kind, mode in (("move", InteractiveMarkerControl.MOVE_AXIS),
                               ("rotate", InteractiveMarkerControl.ROTATE_AXIS)):
                control = InteractiveMarkerControl(name=f"{kind}_{axis}", interaction_mode=mode,
                                                   orientation_mode=InteractiveMarkerControl.INHERIT)
                control.orientation = _quaternion(xyzw)
                marker.controls.append(control)
        return marker

    def _publish_markers(self, q: np.ndarray) -> None:
        complete = bool(np.all(np.isfinite(q)))
        current = self._robot.tcp_transforms(q.astype(np.float64)) if complete else None
        config = self._config()
        scene = self._collision_scene()
        obstacles = obstacle_shapes(scene.obstacles) if scene is not None else []
        bodies = (robot_shapes(scene, q.astype(np.float64))
                  if scene is not None and complete and config.markers_collision_bodies else [])
        with self._lock:
            array = target_markers(self._frame, config, self._targets, current)
            self._dirty = False
            self._shown_q = q.copy()
        array.markers += collision_markers(self._frame, obstacles, bodies, self._shown_counts)
        self._marker_pub.publish(array)


def target_markers(frame: str, config: NodeConfig, targets: Dict[str, EndEffectorTarget],
                   current: Optional[np.ndarray]) -> MarkerArray:
    """``~/markers`` content: per end effector (namespace = its name)

    * id 0: target direction arrow, id 1: target up arrow (coloured by the last
      outcome; deleted when the mode leaves them free), id 2: target position sphere;
    * id 3: current TCP direction arrow, id 4: current up arrow (blue);
    * id 5: text "name (mode): outcome" and the current-vs-target errors (mm, deg).

    ``current``: (E, 4, 4) TCP poses of the latest joint state, or None when unknown.
    """
    out = MarkerArray()
    for e, ee in enumerate(config.end_effectors):
        target = targets.get(ee.name)
        if target is None:
            continue
        d, u = local_columns(ee.local_axes)
        rgba = COLOURS[target.status]
        light = tuple(0.5 + 0.5 * c for c in rgba[:3]) + (rgba[3],)
        pos = target.pose[:3, 3]
        shown = {0: target.mode != "position", 1: target.mode == "full"}
        for marker_id, column, length, colour in ((0, d, DIRECTION_LENGTH, rgba), (1, u, UP_LENGTH, light)):
            if shown[marker_id]:
                out.markers.append(_arrow(frame, ee.name, marker_id, pos, length * target.pose[:3, column],
                                          0.012, colour))
            else:
                gone = Marker(ns=ee.name, id=marker_id, action=Marker.DELETE)
                gone.header.frame_id = frame
                gone.pose.orientation.w = 1.0
                out.markers.append(gone)
        sphere = Marker(ns=ee.name, id=2, type=Marker.SPHERE, action=Marker.ADD)
        sphere.header.frame_id = frame
        sphere.pose.position = _point(pos)
        sphere.pose.orientation.w = 1.0
        sphere.scale.x = sphere.scale.y = sphere.scale.z = 0.03
        _rgba(sphere, rgba)
        out.markers.append(sphere)
        outcome = {"idle": "not solved yet", "ok": "solved", "failed": "NO SOLUTION",
                   "held": "HELD (joint jump)"}[target.status]
        lines = [f"{ee.name} ({target.mode}): {outcome}"]
        if current is not None:
            tcp = current[e]
            for marker_id, column, length in ((3, d, DIRECTION_LENGTH), (4, u, UP_LENGTH)):
                out.markers.append(_arrow(frame, ee.name, marker_id, tcp[:3, 3], length * tcp[:3, column],
                                          0.008, CURRENT_COLOUR))
            lines.append("TCP vs target: " + format_errors(pose_errors(tcp, target.pose, target.mode,
                                                                        ee.local_axes)))
        if target.status == "failed" and target.collision:
            lines.append(f"in collision: {target.collision}")
        elif target.status == "failed" and target.solver_errors is not None:
            lines.append("best attempt: " + format_errors(target.solver_errors))
        text = Marker(ns=ee.name, id=5, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                      text="\n".join(lines))
        text.header.frame_id = frame
        text.pose.position = _point(pos + (0.0, 0.0, 0.10))
        text.pose.orientation.w = 1.0
        text.scale.z = 0.03
        _rgba(text, (1.0, 1.0, 1.0, 0.95))
        out.markers.append(text)
    return out


def _shape_markers(frame: str, ns: str, first_id: int, shape: Shape, rgba) -> list:
    """Markers of one shape: a box, sphere or cylinder, a capsule as a cylinder and two spheres."""
    def marker(kind, pose, scale):
        m = Marker(ns=ns, id=first_id + len(out), type=kind, action=Marker.ADD)
        m.header.frame_id = frame
        m.pose = matrix_to_pose(pose)
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
        _rgba(m, rgba)
        return m

    out: list = []
    if shape.kind == "box":
        out.append(marker(Marker.CUBE, shape.pose, shape.size))
    elif shape.kind == "sphere":
        out.append(marker(Marker.SPHERE, shape.pose, [2.0 * shape.size[0]] * 3))
    else:
        radius, length = shape.size
        out.append(marker(Marker.CYLINDER, shape.pose, (2.0 * radius, 2.0 * radius, length)))
        if shape.kind == "capsule":
            for sign in (-0.5, 0.5):
                end = shape.pose.copy()
                end[:3, 3] += sign * length * shape.pose[:3, 2]
                out.append(marker(Marker.SPHERE, end, [2.0 * radius] * 3))
    return out


def collision_markers(frame: str, obstacles: Sequence[Shape], bodies: Sequence[Shape],
                      shown: Dict[str, int]) -> list:
    """``~/markers`` content of the collision scene: namespace ``obstacles`` (one or three markers
    per obstacle), ``obstacle_names`` (their ids) and ``collision_bodies`` (the robot's bodies);
    DELETE for the ids a namespace had last time beyond what it has now. ``shown``: markers per
    namespace last published, updated in place."""
    out: list = []
    content: Dict[str, list] = {"obstacles": [], "obstacle_names": [], "collision_bodies": []}
    for shape in obstacles:
        content["obstacles"] += _shape_markers(frame, "obstacles", len(content["obstacles"]), shape,
                                               OBSTACLE_COLOUR)
        text = Marker(ns="obstacle_names", id=len(content["obstacle_names"]), type=Marker.TEXT_VIEW_FACING,
                      action=Marker.ADD, text=shape.body)
        text.header.frame_id = frame
        text.pose = matrix_to_pose(shape.pose)
        text.scale.z = 0.04
        _rgba(text, (1.0, 1.0, 1.0, 0.95))
        content["obstacle_names"].append(text)
    for shape in bodies:
        content["collision_bodies"] += _shape_markers(frame, "collision_bodies", len(content["collision_bodies"]),
                                                      shape, BODY_COLOUR)
    for ns, markers in content.items():
        out += markers
        for marker_id in range(len(markers), shown.get(ns, 0)):
            gone = Marker(ns=ns, id=marker_id, action=Marker.DELETE)
            gone.header.frame_id = frame
            gone.pose.orientation.w = 1.0
            out.append(gone)
        shown[ns] = len(markers)
    return out
