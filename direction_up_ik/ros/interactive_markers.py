"""An interactive-marker server that speaks RViz 2's protocol with ``visualization_msgs`` only.

The ``interactive_markers`` library is not installable from PyPI, so this module
implements the server side of its protocol (as RViz 2 Jazzy's client expects it):

* ``<ns>/update`` (``visualization_msgs/InteractiveMarkerUpdate``, RELIABLE,
  KEEP_LAST 100): every message has ``type = UPDATE``, ``server_id`` set and
  ``seq_num`` = previous + 1, the first one after the number the service last
  reported. Full markers travel in ``markers``, pose-only changes in ``poses``,
  removals in ``erases``. Nothing is published when nothing changed, and there are
  no keep-alives (a client seeing a gap in ``seq_num`` resets itself).
* ``<ns>/get_interactive_markers`` (``visualization_msgs/srv/GetInteractiveMarkers``):
  the last published ``sequence_number`` and every marker as of that update.
* ``<ns>/feedback`` (``visualization_msgs/InteractiveMarkerFeedback``): feedback for
  unknown marker names is ignored; feedback with a non-finite pose or a zero
  quaternion is rejected (logged, never raised). The pose of POSE_UPDATE (and of
  MOUSE_UP, which carries the final pose of a drag) becomes the marker's pose and
  is echoed back as a ``poses`` update, so every client sees the marker move.
  Every accepted feedback message, quaternion normalised, goes to ``on_feedback``.

The server knows nothing about what the markers mean: its user inserts markers,
sets poses, erases them, calls :meth:`InteractiveMarkerServer.apply_changes` and
receives feedback through one callback. Changes are collected until
:meth:`~InteractiveMarkerServer.apply_changes`, which publishes them as one update.
Thread-safe: a lock guards the marker state and keeps sequence numbers in
publishing order under multi-threaded executors.
"""

from __future__ import annotations

import copy
import math
import threading
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from geometry_msgs.msg import Pose
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import (InteractiveMarker, InteractiveMarkerFeedback,
                                    InteractiveMarkerPose, InteractiveMarkerUpdate)
from visualization_msgs.srv import GetInteractiveMarkers

from ..core.rotations import quaternion_to_matrix

#: QoS of ``<ns>/update``: what RViz's client subscribes with (rclcpp::QoS(100)).
UPDATE_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                        reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
#: QoS of ``<ns>/feedback``: deep enough that a MOUSE_UP or MENU_SELECT behind a burst of
#: POSE_UPDATEs is never dropped; whoever uses the poses coalesces them.
FEEDBACK_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                          reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)

#: Feedback event types whose pose moves the marker.
POSE_EVENTS = (InteractiveMarkerFeedback.POSE_UPDATE, InteractiveMarkerFeedback.MOUSE_UP)

FeedbackCallback = Callable[[InteractiveMarkerFeedback], None]


# ----------------------------------------------------------------------------- poses
def pose_to_matrix(pose: Pose) -> np.ndarray:
    """(4, 4) transform of a ``geometry_msgs/Pose``; the quaternion is normalised.

    Raises:
        ValueError: a non-finite component or a zero quaternion.
    """
    p, o = pose.position, pose.orientation
    values = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w], dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"pose: every component must be finite, got position ({p.x}, {p.y}, {p.z}) "
                         f"orientation ({o.x}, {o.y}, {o.z}, {o.w})")
    if math.sqrt(float(np.dot(values[3:], values[3:]))) < 1e-9:
        raise ValueError("pose.orientation: the quaternion must not be zero")
    out = np.eye(4)
    out[:3, :3] = quaternion_to_matrix(values[3:])
    out[:3, 3] = values[:3]
    return out


def quaternion_from_matrix(rotation: np.ndarray) -> Tuple[float, float, float, float]:
    """Unit quaternion (x, y, z, w), w >= 0, of a (3, 3) rotation matrix."""
    r = np.asarray(rotation, dtype=np.float64)
    trace = r[0, 0] + r[1, 1] + r[2, 2]
    # Shepperd's method: pivot on the largest of w, x, y, z for accuracy.
    candidates = (trace, r[0, 0], r[1, 1], r[2, 2])
    k = int(np.argmax(candidates))
    if k == 0:
        s = 2.0 * math.sqrt(max(1.0 + trace, 1e-300))
        q = ((r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, 0.25 * s)
    elif k == 1:
        s = 2.0 * math.sqrt(max(1.0 + r[0, 0] - r[1, 1] - r[2, 2], 1e-300))
        q = (0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s, (r[2, 1] - r[1, 2]) / s)
    elif k == 2:
        s = 2.0 * math.sqrt(max(1.0 + r[1, 1] - r[0, 0] - r[2, 2], 1e-300))
        q = ((r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s, (r[0, 2] - r[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(max(1.0 + r[2, 2] - r[0, 0] - r[1, 1], 1e-300))
        q = ((r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s, (r[1, 0] - r[0, 1]) / s)
    q = np.array(q)
    q /= np.linalg.norm(q)
    if q[3] < 0.0:
        q = -q
    return tuple(float(v) for v in q)


def matrix_to_pose(xform: np.ndarray) -> Pose:
    """``geometry_msgs/Pose`` of a (4, 4) rigid transform."""
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in xform[:3, 3])
    o = pose.orientation
    o.x, o.y, o.z, o.w = quaternion_from_matrix(xform[:3, :3])
    return pose


def normalized_pose(pose: Pose) -> Pose:
    """A copy of ``pose`` with a unit quaternion. Raises ValueError like :func:`pose_to_matrix`."""
    pose_to_matrix(pose)  # validates
    o = pose.orientation
    norm = math.sqrt(o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w)
    out = copy.deepcopy(pose)
    out.orientation.x, out.orientation.y = o.x / norm, o.y / norm
    out.orientation.z, out.orientation.w = o.z / norm, o.w / norm
    return out


def non_finite_fields(msg, path: str = "") -> List[str]:
    """Dotted paths of every NaN/inf float inside a message (recursively)."""
    bad = []
    for field in msg.get_fields_and_field_types():
        value = getattr(msg, field)
        where = f"{path}.{field}" if path else field
        if hasattr(value, "get_fields_and_field_types"):
            bad += non_finite_fields(value, where)
        elif isinstance(value, float):
            if not math.isfinite(value):
                bad.append(where)
        elif isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "typecode")):
            for i, item in enumerate(value):
                if hasattr(item, "get_fields_and_field_types"):
                    bad += non_finite_fields(item, f"{where}[{i}]")
                elif isinstance(item, float) and not math.isfinite(item):
                    bad.append(f"{where}[{i}]")
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            bad.append(where)
    return bad


def _same_pose(a: Pose, b: Pose) -> bool:
    return (a.position.x, a.position.y, a.position.z, a.orientation.x, a.orientation.y,
            a.orientation.z, a.orientation.w) == (b.position.x, b.position.y, b.position.z,
                                                  b.orientation.x, b.orientation.y, b.orientation.z,
                                                  b.orientation.w)


# ----------------------------------------------------------------------------- server
class InteractiveMarkerServer:
    """Serve interactive markers on ``<namespace>/{update,feedback,get_interactive_markers}``.

    Args:
        node: the node that owns the publisher, subscription and service.
        namespace: one name token, relative to the node's namespace (or absolute).
        on_feedback: called with every accepted feedback message (known marker,
            finite pose, quaternion normalised), after a pose echo has been published.
            Exceptions it raises are logged, never propagated.
        server_id: ``server_id`` of every update; default the node's fully qualified
            name plus the namespace.
    """

    def __init__(self, node: Node, namespace: str, on_feedback: Optional[FeedbackCallback] = None,
                 server_id: Optional[str] = None) -> None:
        self._node = node
        self._on_feedback = on_feedback
        self._lock = threading.RLock()
        self._markers: Dict[str, InteractiveMarker] = {}  # state as of the last published update
        # name -> ("full", InteractiveMarker) | ("pose", Pose) | ("erase", None), until published
        self._pending: Dict[str, Tuple[str, object]] = {}
        self._seq = 0
        self.server_id = server_id or f"{node.get_fully_qualified_name()}/{namespace}"
        self._update_pub = node.create_publisher(InteractiveMarkerUpdate, f"{namespace}/update", UPDATE_QOS)
        self._feedback_sub = node.create_subscription(InteractiveMarkerFeedback, f"{namespace}/feedback",
                                                      self._handle_feedback, FEEDBACK_QOS)
        self._service = node.create_service(GetInteractiveMarkers, f"{namespace}/get_interactive_markers",
                                            self._handle_get)
        self.update_topic = self._update_pub.topic_name
        self.feedback_topic = self._feedback_sub.topic_name
        self.service_name = self._service.srv_name

    # ---------------------------------------------------------------- state
    @property
    def update_qos(self) -> QoSProfile:
        """QoS of the ``<ns>/update`` publisher."""
        return self._update_pub.qos_profile

    @property
    def sequence_number(self) -> int:
        """``seq_num`` of the last published update (0 before the first)."""
        with self._lock:
            return self._seq

    def names(self) -> List[str]:
        """Names of the markers, pending changes included."""
        with self._lock:
            names = set(self._markers)
            for name, (kind, _) in self._pending.items():
                (names.discard if kind == "erase" else names.add)(name)
            return sorted(names)

    def get(self, name: str) -> Optional[InteractiveMarker]:
        """A copy of marker ``name`` with pending changes applied, or None."""
        with self._lock:
            kind, payload = self._pending.get(name, (None, None))
            if kind == "erase":
                return None
            if kind == "full":
                return copy.deepcopy(payload)
            if name not in self._markers:
                return None
            marker = copy.deepcopy(self._markers[name])
            if kind == "pose":
                marker.pose = copy.deepcopy(payload)
            return marker

    # ---------------------------------------------------------------- changes
    def insert(self, marker: InteractiveMarker) -> None:
        """Add or replace a marker (a full update on the next :meth:`apply_changes`).

        Raises:
            ValueError: empty name, no controls or a non-finite value (RViz would
                drop the connection for any of them).
        """
        if not marker.name:
            raise ValueError("marker.name: must not be empty")
        if len(marker.controls) == 0:
            raise ValueError(f"marker '{marker.name}'.controls: at least one control is required")
        bad = non_finite_fields(marker)
        if bad:
            raise ValueError(f"marker '{marker.name}': non-finite values in {bad[:5]}")
        marker = copy.deepcopy(marker)
        marker.pose = normalized_pose(marker.pose)
        with self._lock:
            self._pending[marker.name] = ("full", marker)

    def set_pose(self, name: str, pose: Pose) -> None:
        """Move marker ``name`` (a ``poses`` entry, or folded into a pending full update).

        Raises:
            KeyError: no such marker. ValueError: a non-finite pose or zero quaternion.
        """
        pose = normalized_pose(pose)
        with self._lock:
            kind, payload = self._pending.get(name, (None, None))
            if kind == "full":
                payload.pose = pose
            elif kind == "erase" or (kind is None and name not in self._markers):
                raise KeyError(f"no interactive marker '{name}'")
            else:
                self._pending[name] = ("pose", pose)

    def erase(self, name: str) -> None:
        """Remove marker ``name`` on the next :meth:`apply_changes` (no-op when unknown)."""
        with self._lock:
            if name in self._markers:
                self._pending[name] = ("erase", None)
            else:
                self._pending.pop(name, None)

    def apply_changes(self) -> bool:
        """Publish the pending changes as one update; False (nothing sent) when there are none."""
        with self._lock:
            update = InteractiveMarkerUpdate(server_id=self.server_id, type=InteractiveMarkerUpdate.UPDATE)
            for name, (kind, payload) in sorted(self._pending.items()):
                if kind == "full":
                    if self._markers.get(name) == payload:
                        continue  # re-inserted unchanged
                    self._markers[name] = payload
                    update.markers.append(copy.deepcopy(payload))
                elif kind == "pose":
                    marker = self._markers[name]
                    if _same_pose(marker.pose, payload):
                        continue
                    marker.pose = payload
                    update.poses.append(InteractiveMarkerPose(header=copy.deepcopy(marker.header),
                                                              pose=copy.deepcopy(payload), name=name))
                elif name in self._markers:
                    del self._markers[name]
                    update.erases.append(name)
            self._pending.clear()
            if not (update.markers or update.poses or update.erases):
                return False
            # Number and publish under the lock: updates leave in seq_num order.
            self._seq += 1
            update.seq_num = self._seq
            self._update_pub.publish(update)
            return True

    # ---------------------------------------------------------------- protocol callbacks
    def _handle_get(self, request, response):
        with self._lock:
            response.sequence_number = self._seq
            response.markers = [copy.deepcopy(m) for _, m in sorted(self._markers.items())]
        return response

    def _handle_feedback(self, feedback: InteractiveMarkerFeedback) -> None:
        logger = self._node.get_logger()
        with self._lock:
            known = feedback.marker_name in self._markers
        if not known:
            logger.debug(f"feedback for unknown interactive marker '{feedback.marker_name}' ignored")
            return
        try:
            feedback.pose = normalized_pose(feedback.pose)
        except ValueError as exc:
            logger.warning(f"feedback for '{feedback.marker_name}' (event {feedback.event_type}) "
                           f"rejected: {exc}", throttle_duration_sec=2.0)
            return
        if feedback.event_type in POSE_EVENTS:
            try:
                self.set_pose(feedback.marker_name, feedback.pose)
            except KeyError:
                return  # erased meanwhile
            self.apply_changes()
        if self._on_feedback is not None:
            try:
                self._on_feedback(feedback)
            except Exception as exc:  # noqa: BLE001 - a handler bug must not stop the server
                logger.error(f"interactive-marker feedback handler failed: {exc!r}")
