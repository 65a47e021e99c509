"""Interactive markers of ``direction_up_ik_node`` with real rclpy, spoken to like RViz does.

:class:`RvizLikeClient` follows RViz 2's interactive-marker client: it subscribes to
``<ns>/update`` first, calls ``<ns>/get_interactive_markers``, applies only updates
numbered after the service's ``sequence_number``, and requires consecutive
``seq_num`` (a gap would make RViz reset). It sends feedback on ``<ns>/feedback``
as RViz does while dragging (MOUSE_DOWN, POSE_UPDATE..., MOUSE_UP) and for menus.
The solver node runs in-process on the dual-arm robot with its joint state
published once on ``joint_states``. Every wait has a timeout.
"""

from __future__ import annotations

import copy
import math
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from visualization_msgs.msg import (InteractiveMarkerControl, InteractiveMarkerFeedback,  # noqa: E402
                                    InteractiveMarkerUpdate, Marker, MarkerArray)
from visualization_msgs.srv import GetInteractiveMarkers  # noqa: E402

from direction_up_ik.core.rotations import rpy_to_matrix  # noqa: E402
from direction_up_ik.msg import DirectionUpTarget  # noqa: E402
from direction_up_ik.robots import load_robot  # noqa: E402
from direction_up_ik.ros.drag import COLOURS, MENU_MODE, MENU_PUBLISH, MENU_RESET  # noqa: E402
from direction_up_ik.ros.interactive_markers import (matrix_to_pose, non_finite_fields,  # noqa: E402
                                                     pose_to_matrix)

from helpers import mid_range  # noqa: E402
from node_harness import TIMEOUT, Harness, assert_reaches, wait_until  # noqa: E402

Feedback = InteractiveMarkerFeedback
Control = InteractiveMarkerControl
NAMESPACE = "direction_up_ik_markers"
MODEL = load_robot("dual_arm_torso")
START = mid_range(MODEL)
LEFT, RIGHT = 0, 1
RED = COLOURS["failed"]


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture
def rig(ros):
    """A dual-arm node with markers, its joint state at START, and a connected RViz-like client."""
    node = ros.start_node("dual_arm_torso", params={"markers.enabled": True})
    client = RvizLikeClient(ros, node)
    node.publish_full_state(START)
    client.initialize()
    return node, client


# ----------------------------------------------------------------------------- RViz-like client
class RvizLikeClient:
    """Protocol-level interactive-marker client (what RViz's InteractiveMarkers display does)."""

    def __init__(self, harness: Harness, node) -> None:
        self.node = node
        self.controller = node.node.markers
        self.ns = f"{node.namespace}/{NAMESPACE}"
        cn = harness.client_node
        self._lock = threading.Lock()
        self.updates = []          # every update received, in arrival order
        self.arrays = []           # ~/markers messages
        self.markers = {}          # client-side state: name -> InteractiveMarker
        self.initial_seq = None
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)  # what RViz uses
        self.update_sub = cn.create_subscription(InteractiveMarkerUpdate, f"{self.ns}/update",
                                                 self._on_update, reliable)
        self.feedback_pub = cn.create_publisher(InteractiveMarkerFeedback, f"{self.ns}/feedback", reliable)
        self.array_sub = cn.create_subscription(MarkerArray, f"{node.fqn}/markers", self._on_array, 10)
        self.get_client = cn.create_client(GetInteractiveMarkers, f"{self.ns}/get_interactive_markers")
        assert self.get_client.wait_for_service(timeout_sec=TIMEOUT), "get_interactive_markers missing"
        wait_until(lambda: self.update_sub.get_publisher_count() >= 1
                   and self.feedback_pub.get_subscription_count() >= 1
                   and self.array_sub.get_publisher_count() >= 1, what="marker topics to match")

    # ------------------------------------------------------------------ protocol
    def _on_update(self, msg) -> None:
        with self._lock:
            self.updates.append(msg)
            if self.initial_seq is not None and msg.seq_num > self.initial_seq:
                self._apply(msg)

    def _on_array(self, msg) -> None:
        with self._lock:
            self.arrays.append(msg)

    def _apply(self, msg) -> None:
        for marker in msg.markers:
            self.markers[marker.name] = copy.deepcopy(marker)
        for pose in msg.poses:
            assert pose.name in self.markers, f"pose update for unknown marker {pose.name}"
            self.markers[pose.name].pose = copy.deepcopy(pose.pose)
        for name in msg.erases:
            self.markers.pop(name, None)

    def call_get(self):
        future = self.get_client.call_async(GetInteractiveMarkers.Request())
        wait_until(future.done, what="get_interactive_markers response")
        return future.result()

    def initialize(self) -> None:
        """Ask for the markers until the node has created them (it needs the joint state)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            response = self.call_get()
            if response.markers:
                break
            assert time.monotonic() < deadline, "the node never served markers"
            time.sleep(0.05)
        with self._lock:
            self.initial_seq = response.sequence_number
            self.markers = {m.name: copy.deepcopy(m) for m in response.markers}
            for msg in self.updates:  # updates that arrived meanwhile and are newer
                if msg.seq_num > self.initial_seq:
                    self._apply(msg)

    def assert_consecutive(self) -> None:
        """Every update: type UPDATE, server_id set, payload, seq_num = previous + 1, up to the
        server's current sequence number (waited for: the last update may still be in flight
        when the service answers)."""
        current = self.call_get().sequence_number

        def latest():
            with self._lock:
                return self.updates[-1].seq_num if self.updates else -1
        wait_until(lambda: latest() >= current, what=f"the update with seq_num {current}")
        with self._lock:
            updates = list(self.updates)
        assert updates, "no update received"
        for msg in updates:
            assert msg.type == InteractiveMarkerUpdate.UPDATE
            assert msg.server_id
            assert msg.markers or msg.poses or msg.erases, f"empty update {msg.seq_num}"
        seqs = [m.seq_num for m in updates]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        assert seqs[-1] == current

    def count(self) -> int:
        with self._lock:
            return len(self.updates)

    def last_full(self, name: str, since: int = 0):
        """The newest full marker ``name`` among the updates from index ``since`` on, or None."""
        with self._lock:
            found = [m for u in self.updates[since:] for m in u.markers if m.name == name]
        return found[-1] if found else None

    def last_array(self) -> MarkerArray:
        wait_until(lambda: self.arrays, what="a ~/markers message")
        with self._lock:
            return self.arrays[-1]

    # ------------------------------------------------------------------ feedback
    def send(self, name: str, event: int, pose=None, menu_entry_id: int = 0) -> None:
        msg = Feedback(client_id="/rviz_like", marker_name=name, control_name="move_x", event_type=event,
                       menu_entry_id=menu_entry_id)
        msg.header.frame_id = "base_link"
        if pose is None:
            with self._lock:
                pose = copy.deepcopy(self.markers[name].pose)
        msg.pose = pose if not isinstance(pose, np.ndarray) else matrix_to_pose(pose)
        self.feedback_pub.publish(msg)

    def drag(self, name: str, poses) -> None:
        """MOUSE_DOWN, one POSE_UPDATE per pose (a rendered frame apart), MOUSE_UP at the last."""
        self.send(name, Feedback.MOUSE_DOWN)
        for pose in poses:
            self.send(name, Feedback.POSE_UPDATE, pose)
            time.sleep(0.005)
        self.send(name, Feedback.MOUSE_UP, poses[-1])

    def menu(self, name: str, entry: int) -> None:
        self.send(name, Feedback.MENU_SELECT, menu_entry_id=entry)

    def settle(self, quiet: float = 0.25) -> None:
        """Wait until no solve is pending and none ran for ``quiet`` seconds."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            before = self.controller.solve_count
            time.sleep(quiet)
            if not self.controller.pending and self.controller.solve_count == before:
                return
            assert time.monotonic() < deadline, "the markers never settled"


# ----------------------------------------------------------------------------- helpers
def tcp_at(q=START):
    return MODEL.tcp_transforms(np.asarray(q, dtype=np.float64))


def moved(pose: np.ndarray, offset, rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    """``pose`` translated by ``offset`` (root frame) and turned by ``rpy`` (in its own frame)."""
    out = pose.copy()
    out[:3, 3] += offset
    out[:3, :3] = pose[:3, :3] @ rpy_to_matrix(rpy)
    return out


def path(start: np.ndarray, end: np.ndarray, steps: int):
    """Poses from ``start`` to ``end``: position interpolated, rotation switched halfway."""
    out = []
    for s in np.linspace(0.0, 1.0, steps + 1)[1:]:
        pose = end.copy() if s >= 0.5 else start.copy()
        pose[:3, 3] = (1 - s) * start[:3, 3] + s * end[:3, 3]
        out.append(pose)
    return out


def command_q(command) -> np.ndarray:
    return np.asarray(command.position, dtype=np.float64)


def wait_reaching(node, ee: int, goal: np.ndarray) -> None:
    """Wait until the newest command puts TCP ``ee`` within 1 mm of ``goal``'s position."""
    def reached():
        if not node.commands:
            return False
        return np.linalg.norm(tcp_at(command_q(node.commands[-1]))[ee, :3, 3] - goal[:3, 3]) < 1e-3
    wait_until(reached, what=f"a command putting end effector {ee} on its goal")


def body_colour(marker):
    (body,) = [c for c in marker.controls if c.name == "solve"]
    c = body.markers[0].color
    return (c.r, c.g, c.b, c.a)


def menu_titles(marker) -> dict:
    return {e.id: e.title for e in marker.menu_entries}


def assert_same_pose(a: np.ndarray, b: np.ndarray, tol: float = 1e-9) -> None:
    np.testing.assert_allclose(a, b, atol=tol)


# ----------------------------------------------------------------------------- protocol
def test_initial_markers_follow_the_protocol(rig):
    """get_interactive_markers: one 6-DOF marker per end effector at its TCP, root frame,
    stamp 0, finite, with controls and a menu; the update topic is RELIABLE / KEEP_LAST 100;
    nothing is published while idle (no keep-alives)."""
    node, client = rig
    response = client.call_get()
    assert response.sequence_number >= 1
    markers = {m.name: m for m in response.markers}
    assert sorted(markers) == ["left", "right"]
    tcp = tcp_at()
    for e, name in enumerate(("left", "right")):
        m = markers[name]
        assert m.header.frame_id == "base_link"
        assert (m.header.stamp.sec, m.header.stamp.nanosec) == (0, 0)
        assert non_finite_fields(m) == []
        assert_same_pose(pose_to_matrix(m.pose), tcp[e], tol=1e-6)
        modes = {c.name: c.interaction_mode for c in m.controls}
        for axis in "xyz":
            assert modes[f"move_{axis}"] == Control.MOVE_AXIS
            assert modes[f"rotate_{axis}"] == Control.ROTATE_AXIS
        for c in m.controls:
            q = c.orientation
            assert math.isclose(q.x ** 2 + q.y ** 2 + q.z ** 2 + q.w ** 2, 1.0, rel_tol=1e-9)
        # The three axis controls point along the marker's three axes.
        axes = []
        for axis in "xyz":
            (c,) = [c for c in m.controls if c.name == f"move_{axis}"]
            axes.append(np.abs(pose_to_matrix(type(m.pose)(orientation=c.orientation))[:3, 0]))
        np.testing.assert_allclose(axes, np.eye(3), atol=1e-12)
        assert sorted(menu_titles(m)) == [MENU_RESET, MENU_MODE, MENU_PUBLISH]
        assert all(e.parent_id == 0 for e in m.menu_entries)
        assert "(full)" in m.description
    (info,) = node.harness.client_node.get_publishers_info_by_topic(f"{client.ns}/update")
    assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE  # as discovered
    qos = client.controller.server.update_qos  # history/depth are not discoverable
    assert qos.history == HistoryPolicy.KEEP_LAST and qos.depth == 100
    # Idle: not a single update (no keep-alives), the sequence number stays.
    before = client.count()
    time.sleep(0.6)
    assert client.count() == before
    assert client.call_get().sequence_number == response.sequence_number


def test_dragging_one_arm_solves_both_targets_in_one_candidate(rig):
    """MOUSE_DOWN, POSE_UPDATEs, MOUSE_UP on the left marker: the published command puts the
    left TCP on the dragged pose and keeps the right TCP on its previous target; accepted
    poses are echoed back; seq_num stays consecutive."""
    node, client = rig
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.04, 0.03, 0.05), (0.15, -0.1, 0.2))
    client.drag("left", path(tcp[LEFT], goal, 8))
    wait_reaching(node, LEFT, goal)
    client.settle()
    q = command_q(node.commands[-1])
    assert list(node.commands[-1].name) == list(MODEL.joint_names)
    assert_reaches(MODEL, q, {LEFT: goal, RIGHT: tcp[RIGHT]})
    # Both targets went into each solve: the last request held left (dragged) and right (kept).
    candidate = client.controller.candidate()
    assert [t.end_effector for t in candidate.targets] == ["left", "right"]
    assert [len(r.errors) for r in client.controller.last_response.results] == [2]
    # The echo: every client sees the marker where it was dropped.
    wait_until(lambda: np.allclose(pose_to_matrix(client.markers["left"].pose), goal, atol=1e-9),
               what="the echoed pose")
    assert_same_pose(pose_to_matrix(client.markers["right"].pose), tcp[RIGHT], tol=1e-6)
    assert body_colour(client.markers["left"]) == pytest.approx(COLOURS["ok"], abs=1e-6)
    client.assert_consecutive()


def test_second_drag_keeps_the_first_arms_target(rig):
    """Drag left, then right: the second command keeps left on its dragged target."""
    node, client = rig
    tcp = tcp_at()
    left_goal = moved(tcp[LEFT], (0.0, 0.04, 0.03))
    right_goal = moved(tcp[RIGHT], (0.03, -0.03, -0.04), (0.0, 0.2, 0.0))
    client.drag("left", [left_goal])
    client.settle()
    client.drag("right", path(tcp[RIGHT], right_goal, 4))
    wait_reaching(node, RIGHT, right_goal)
    client.settle()
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: left_goal, RIGHT: right_goal})
    client.assert_consecutive()


def test_burst_of_pose_updates_is_coalesced_and_the_last_pose_wins(rig):
    """50 POSE_UPDATEs at once: far fewer solves than messages; the last pose is solved last."""
    node, client = rig
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.05, -0.02, 0.06), (0.0, 0.0, 0.3))
    poses = path(tcp[LEFT], goal, 50)
    before = client.controller.solve_count
    start = time.monotonic()
    client.send("left", Feedback.MOUSE_DOWN)
    for pose in poses:
        client.send("left", Feedback.POSE_UPDATE, pose)
    client.send("left", Feedback.MOUSE_UP, poses[-1])
    wait_reaching(node, LEFT, goal)
    client.settle()
    window = time.monotonic() - 0.25 - start  # up to the last solve (settle: 0.25 s without one)
    solves = client.controller.solve_count - before
    # Solves are a timer period apart (markers.rate_hz = 30): at most 1 + 30 per second of the
    # exchange, 10 on a quiet machine (~0.3 s). A loaded machine stretches the exchange, not
    # the rule, so the bound follows the measured window.
    assert 1 <= solves <= max(10, math.ceil(30.0 * window) + 1), f"{solves} solves for 52 feedback messages"
    assert len(node.wait_commands(solves)) == solves  # each solve's command, however late it arrives
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})
    assert_same_pose(client.controller.targets()["left"].pose, pose_to_matrix(matrix_to_pose(goal)))
    client.assert_consecutive()


def test_solves_are_rate_limited(ros):
    """A drag streaming POSE_UPDATEs at ~100 Hz for 1 s with markers.rate_hz = 4: at most
    about 4 solves, each on a newer pose than the one before."""
    node = ros.start_node("dual_arm_torso", params={"markers.enabled": True, "markers.rate_hz": 4.0})
    client = RvizLikeClient(ros, node)
    node.publish_full_state(START)
    client.initialize()
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.0, 0.06, 0.03))
    poses = path(tcp[LEFT], goal, 100)
    before = client.controller.solve_count
    start = time.monotonic()
    client.send("left", Feedback.MOUSE_DOWN)
    for pose in poses:
        client.send("left", Feedback.POSE_UPDATE, pose)
        time.sleep(0.01)
    client.send("left", Feedback.MOUSE_UP, poses[-1])
    client.settle(quiet=0.4)
    elapsed = time.monotonic() - 0.4 - start  # up to the last solve (settle: 0.4 s without one)
    solves = client.controller.solve_count - before
    # Solves are a timer period (0.25 s) apart however loaded the machine, which only stretches
    # the drag (~1 s quiet): at most 1 + 4 per second of it, against one per message unlimited.
    assert 1 <= solves <= math.ceil(4.0 * elapsed) + 1, (solves, elapsed)
    node.wait_commands(solves)  # the last solve's command may still be on its way
    heights = [tcp_at(command_q(c))[LEFT, 1, 3] for c in node.commands]
    assert heights == sorted(heights)  # never an older pose after a newer one
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})


def test_unknown_marker_and_non_finite_poses_are_ignored(rig):
    """Feedback for unknown markers and with NaN/inf/zero-quaternion poses changes nothing; the
    node keeps serving markers and ~/solve."""
    node, client = rig
    updates, solves = client.count(), client.controller.solve_count
    tcp = tcp_at()
    client.send("nonexistent", Feedback.POSE_UPDATE, moved(tcp[LEFT], (0.05, 0.0, 0.0)))
    client.send("nonexistent", Feedback.MENU_SELECT, tcp[LEFT], menu_entry_id=MENU_PUBLISH)
    bad = []
    for field, value in (("position.x", math.nan), ("position.z", math.inf), ("orientation.w", -math.inf)):
        pose = matrix_to_pose(moved(tcp[LEFT], (0.02, 0.0, 0.0)))
        part, attr = field.split(".")
        setattr(getattr(pose, part), attr, value)
        bad.append(pose)
    zero = matrix_to_pose(tcp[LEFT])
    zero.orientation.x = zero.orientation.y = zero.orientation.z = zero.orientation.w = 0.0
    bad.append(zero)
    for pose in bad:
        client.send("left", Feedback.POSE_UPDATE, pose)
        client.send("left", Feedback.MOUSE_UP, pose)
    client.send("left", Feedback.MENU_SELECT, bad[0], menu_entry_id=MENU_PUBLISH)
    time.sleep(0.5)
    assert client.count() == updates and client.controller.solve_count == solves
    assert node.commands == []
    assert client.controller.publishing
    assert_same_pose(client.controller.targets()["left"].pose, tcp[LEFT], tol=1e-12)
    # Still serving: a valid drag solves and publishes.
    goal = moved(tcp[LEFT], (0.02, 0.0, 0.02))
    client.drag("left", [goal])
    node.wait_commands(1)
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})
    client.assert_consecutive()


def test_menu_mode_cycle_publishing_toggle_and_reset(rig):
    """Menu entries: the mode cycles full -> axis -> position -> full (marker and target),
    publishing off stops commands (solves go on), reset puts the target back on the TCP."""
    node, client = rig
    ctrl = client.controller
    tcp = tcp_at()
    T = DirectionUpTarget
    for expected, constant in (("axis", T.MODE_AXIS), ("position", T.MODE_POSITION), ("full", T.MODE_FULL)):
        since = client.count()
        client.menu("left", MENU_MODE)
        wait_until(lambda: client.last_full("left", since) is not None, what=f"the {expected} marker")
        marker = client.last_full("left", since)
        assert f"({expected})" in marker.description
        assert menu_titles(marker)[MENU_MODE].startswith(f"Constraint: {expected}")
        assert ctrl.targets()["left"].mode == expected
        assert ctrl.candidate().targets[LEFT].mode == constant
        assert ctrl.candidate().targets[RIGHT].mode == DirectionUpTarget.MODE_FULL
        client.settle()
    # Publishing off: a drag is solved but nothing is published; both markers' menus say so.
    since = client.count()
    client.menu("left", MENU_PUBLISH)
    wait_until(lambda: client.last_full("right", since) is not None, what="the menu update")
    assert menu_titles(client.last_full("left", since))[MENU_PUBLISH].startswith("Publishing: off")
    assert menu_titles(client.last_full("right", since))[MENU_PUBLISH].startswith("Publishing: off")
    commands, solves = len(node.commands), ctrl.solve_count
    client.drag("left", [moved(tcp[LEFT], (0.03, 0.0, 0.0))])
    wait_until(lambda: ctrl.solve_count > solves, what="the drag to be solved")
    client.settle()
    assert ctrl.last_response.success and len(node.commands) == commands
    client.menu("right", MENU_PUBLISH)
    wait_until(lambda: ctrl.publishing, what="publishing back on")
    goal = moved(tcp[LEFT], (0.0, 0.0, 0.04))
    client.drag("left", [goal])
    node.wait_commands(commands + 1)
    client.settle()
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})
    # Reset: the target (and the marker) return to the current TCP, the joint state at START.
    since = client.count()
    client.menu("left", MENU_RESET)
    wait_until(lambda: client.last_full("left", since) is not None, what="the reset marker")
    assert_same_pose(pose_to_matrix(client.last_full("left", since).pose), tcp[LEFT], tol=1e-6)
    assert_same_pose(ctrl.targets()["left"].pose, tcp[LEFT], tol=1e-9)
    assert ctrl.targets()["left"].status == "idle"
    client.assert_consecutive()


def test_failure_marks_the_marker_red_and_publishes_nothing(rig):
    """An unreachable drag: no command, the dragged marker turns red in an update, the per-EE
    errors are reported (result and ~/markers text); reset clears it."""
    node, client = rig
    tcp = tcp_at()
    far = moved(tcp[RIGHT], (1.5, 0.0, 0.8))
    since, solves = client.count(), client.controller.solve_count
    client.drag("right", [far])
    wait_until(lambda: client.controller.solve_count > solves, what="the failed solve")
    client.settle()
    assert node.commands == []
    marker = client.last_full("right", since)
    assert marker is not None and body_colour(marker) == pytest.approx(RED, abs=1e-6)
    assert client.last_full("left", since) is None  # the other marker is untouched
    response = client.controller.last_response
    assert not response.success
    errors = {e.end_effector: e.position_error for e in response.results[0].errors}
    assert errors["right"] > 0.5 and set(errors) == {"left", "right"}
    state = client.controller.targets()["right"]
    assert state.status == "failed" and state.solver_errors[0] == pytest.approx(errors["right"])
    wait_until(lambda: any(m.ns == "right" and m.type == Marker.TEXT_VIEW_FACING and "NO SOLUTION" in m.text
                           for m in client.last_array().markers), what="the failure text")
    since = client.count()
    client.menu("right", MENU_RESET)
    wait_until(lambda: client.last_full("right", since) is not None, what="the reset marker")
    assert body_colour(client.last_full("right", since)) != pytest.approx(RED, abs=1e-6)
    client.assert_consecutive()


def _spy_solves(node) -> list:
    """(num_seeds, initial_state positions) of every solve the node runs from now on."""
    seen, real = [], node.node.solve

    def spy(req, resp):
        seen.append((req.overrides.num_seeds, np.asarray(req.initial_state.position, dtype=np.float64)))
        return real(req, resp)
    node.node.solve = spy
    return seen


def test_a_drag_starts_from_the_last_solution_not_the_joint_states(rig):
    """Nothing echoes the command (the joint state stays at START): each drag starts from the
    markers' last solution, so the model follows the drag; a reset starts from the joint
    state again."""
    node, client = rig
    tcp = tcp_at()
    seen = _spy_solves(node)
    goals = [moved(tcp[LEFT], (0.0, 0.015 * k, 0.01 * k)) for k in range(1, 5)]
    for k, goal in enumerate(goals, start=1):
        client.drag("left", [goal])
        node.wait_commands(k)
        client.settle()
    assert len(node.commands) == len(goals)
    np.testing.assert_allclose(seen[0][1], START)  # no solution yet, no command: the joint state
    for k in range(1, len(goals)):  # then the command before (= the markers' last solution)
        np.testing.assert_allclose(seen[-len(goals) + k][1], command_q(node.commands[k - 1]), atol=1e-12)
    np.testing.assert_allclose(client.controller.solution, command_q(node.commands[-1]))
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goals[-1], RIGHT: tcp[RIGHT]})
    assert all(s == -1 for s, _ in seen)  # local solves
    client.menu("left", MENU_RESET)
    wait_until(lambda: client.controller.solution is None, what="the reset to forget the solution")


def test_a_red_target_is_retried_without_a_reset(rig):
    """A failed (red) target: a click on it re-tries with the search; dragging it back into
    reach turns it green and publishes, without the reset menu."""
    node, client = rig
    tcp = tcp_at()
    seen = _spy_solves(node)
    far = moved(tcp[RIGHT], (1.5, 0.0, 0.8))
    client.drag("right", [far])
    wait_until(lambda: client.controller.targets()["right"].status == "failed", what="the red marker")
    client.settle()
    solves = len(seen)
    client.send("right", Feedback.BUTTON_CLICK)
    wait_until(lambda: len(seen) > solves, what="the retry")
    client.settle()
    assert seen[solves][0] == 0  # the node's search (search.num_seeds), not the single start
    assert client.controller.targets()["right"].status == "failed" and node.commands == []
    goal = moved(tcp[RIGHT], (0.02, -0.02, 0.03))
    since = client.count()
    client.drag("right", [goal])
    node.wait_commands(1)
    client.settle()
    assert client.controller.targets()["right"].status == "ok"
    assert body_colour(client.last_full("right", since)) == pytest.approx(COLOURS["ok"], abs=1e-6)
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: tcp[LEFT], RIGHT: goal})


def test_a_far_drop_is_walked_to_and_published(rig):
    """A target dropped 20 cm and 0.5 rad away in one update: its direct solution moves joints
    more than streaming.max_joint_step, so the drag walks there in sub-targets, each within
    the limit of the one before, and publishes the end."""
    node, client = rig
    tcp = tcp_at()
    seen = _spy_solves(node)
    goal = moved(tcp[LEFT], (0.12, 0.1, 0.12), (0.3, -0.2, 0.3))
    client.drag("left", [goal])
    node.wait_commands(1)
    client.settle()
    assert len(seen) > 2 and node.node.commands.held == 0  # the direct try, then the walk
    starts = np.array([q for _, q in seen[1:]])
    assert np.abs(np.diff(starts, axis=0)).max() <= 0.1 + 1e-9  # sub-solutions within the limit
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})
    assert client.controller.targets()["left"].status == "ok"


def test_a_held_drag_turns_orange_and_publishes_nothing(ros):
    """With a tiny step limit even the walk's sub-steps jump: held (orange, counted, nothing
    published); a click after raising the limit solves it."""
    node = ros.start_node("dual_arm_torso", params={"markers.enabled": True,
                                                    "streaming.max_joint_step": [0.002]})
    client = RvizLikeClient(ros, node)
    node.publish_full_state(START)
    client.initialize()
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.0, 0.03, 0.03))
    since = client.count()
    client.drag("left", [goal])
    wait_until(lambda: client.controller.targets()["left"].status == "held", what="the held marker")
    client.settle()
    assert node.commands == [] and node.node.commands.held >= 1
    assert client.controller.last_outcome.held and client.controller.solution is None
    assert body_colour(client.last_full("left", since)) == pytest.approx(COLOURS["held"], abs=1e-6)
    wait_until(lambda: any(m.ns == "left" and m.type == Marker.TEXT_VIEW_FACING and "HELD" in m.text
                           for m in client.last_array().markers), what="the held text")
    assert node.set_param("streaming.max_joint_step", [0.5]).successful
    client.send("left", Feedback.BUTTON_CLICK)
    node.wait_commands(1)
    client.settle()
    assert client.controller.targets()["left"].status == "ok"
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})


def test_marker_array_shows_target_versus_current_tcp(rig):
    """~/markers per end effector: target direction/up arrows from the target position along its
    +Z/+Y (local_axes tcp), current TCP arrows from FK of the joint state, a text with mm and
    deg errors; free axes are deleted in position mode."""
    node, client = rig
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.0, 0.05, 0.0))
    client.drag("left", [goal])
    node.wait_commands(1)
    client.settle()

    def by_key():
        return {(m.ns, m.id): m for m in client.last_array().markers}

    wait_until(lambda: np.allclose([by_key()[("left", 0)].points[0].y], [goal[1, 3]]), what="the new array")
    markers = by_key()
    assert {m.header.frame_id for m in markers.values()} == {"base_link"}
    assert sorted(k for k in markers if k[0] == "left") == [("left", i) for i in range(6)]
    for (ns, marker_id), column, origin in (
            (("left", 0), 2, goal), (("left", 1), 1, goal), (("left", 3), 2, tcp[LEFT]),
            (("left", 4), 1, tcp[LEFT]), (("right", 0), 2, tcp[RIGHT]), (("right", 3), 2, tcp[RIGHT])):
        m = markers[(ns, marker_id)]
        assert m.type == Marker.ARROW and m.action == Marker.ADD
        a, b = (np.array([p.x, p.y, p.z]) for p in m.points)
        np.testing.assert_allclose(a, origin[:3, 3], atol=1e-9)
        np.testing.assert_allclose((b - a) / np.linalg.norm(b - a), origin[:3, column], atol=1e-9)
    assert markers[("left", 0)].color.g > 0.6  # solved: green
    text = markers[("left", 5)].text
    # The joint state still is START (nothing echoes the command): the TCP is 50 mm off.
    assert "left (full): solved" in text and "50.0 mm" in text and "deg" in text
    for m in markers.values():
        assert non_finite_fields(m) == []
    for _ in range(2):  # full -> axis -> position
        client.menu("left", MENU_MODE)
    wait_until(lambda: client.controller.targets()["left"].mode == "position", what="position mode")
    client.settle()
    wait_until(lambda: by_key()[("left", 0)].action == Marker.DELETE, what="the deleted arrows")
    assert by_key()[("left", 1)].action == Marker.DELETE
    assert "dir" not in by_key()[("left", 5)].text.split("\n")[-1]


def test_local_axes_x_y_takes_direction_from_the_marker_x_axis(ros):
    """end_effector.<name>.local_axes = x_y: direction = marker +X, up = +Y, LOCAL_AXES_DEFAULT."""
    node = ros.start_node("dual_arm_torso", params={"markers.enabled": True,
                                                    "end_effector.left.local_axes": "x_y"})
    client = RvizLikeClient(ros, node)
    node.publish_full_state(START)
    client.initialize()
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.02, 0.02, 0.02), (0.1, 0.0, 0.0))
    client.drag("left", [goal])
    node.wait_commands(1)
    client.settle()
    left, right = client.controller.candidate().targets
    assert left.local_axes == DirectionUpTarget.LOCAL_AXES_DEFAULT
    assert right.local_axes == DirectionUpTarget.LOCAL_AXES_TCP
    pose = pose_to_matrix(matrix_to_pose(goal))
    vector = lambda v: [v.x, v.y, v.z]  # noqa: E731
    np.testing.assert_allclose(vector(left.direction), pose[:3, 0], atol=1e-12)
    np.testing.assert_allclose(vector(left.up), pose[:3, 1], atol=1e-12)
    assert_reaches(MODEL, command_q(node.commands[-1]), {LEFT: goal, RIGHT: tcp[RIGHT]})


def test_active_joints_parameter_applies_to_drags(ros):
    """A drag solves with the node's active_joints: with only the left arm active, the torso and
    the right arm keep their positions."""
    left_arm = [n for n in MODEL.joint_names if n.startswith("left_")]
    node = ros.start_node("dual_arm_torso", params={"markers.enabled": True, "active_joints": left_arm})
    client = RvizLikeClient(ros, node)
    node.publish_full_state(START)
    client.initialize()
    tcp = tcp_at()
    goal = moved(tcp[LEFT], (0.03, 0.0, 0.03))
    client.drag("left", [goal])
    node.wait_commands(1)
    client.settle()
    q = command_q(node.commands[-1])
    fixed = [i for i, n in enumerate(MODEL.joint_names) if n not in left_arm]
    np.testing.assert_allclose(q[fixed], START[fixed], atol=1e-6)
    assert_reaches(MODEL, q, {LEFT: goal, RIGHT: tcp[RIGHT]})


def test_marker_parameters(ros):
    """markers.enabled false: no marker interfaces; markers.rate_hz is checked and live."""
    plain = ros.start_node("dual_arm_torso", params={"markers.enabled": False})
    assert plain.node.markers is None
    topics = dict(plain.node.get_publisher_names_and_types_by_node(plain.node.get_name(), plain.namespace))
    assert f"{plain.namespace}/{NAMESPACE}/update" not in topics and f"{plain.fqn}/markers" not in topics
    node = ros.start_node("dual_arm_torso", params={"markers.enabled": True, "markers.rate_hz": 10.0})
    assert node.node.markers.rate_hz == pytest.approx(10.0)
    for value in (0.0, -1.0, 1001.0):
        result = node.set_param("markers.rate_hz", value)
        assert not result.successful and "markers.rate_hz" in result.reason, (value, result.reason)
    assert node.set_param("markers.rate_hz", 50.0).successful
    wait_until(lambda: node.node.markers.rate_hz == pytest.approx(50.0), what="the new timer period")
    assert not node.set_param("markers.namespace", "other").successful  # read-only
    assert not node.set_param("markers.enabled", False).successful


def test_bad_marker_namespace_is_a_configuration_error(ros_context):
    from direction_up_ik.ros.config import ConfigError
    from direction_up_ik.ros.node import DirectionUpIKNode
    from rclpy.parameter import Parameter
    with pytest.raises(ConfigError, match="markers.namespace"):
        DirectionUpIKNode(context=ros_context, namespace="/t_bad_ns",
                          parameter_overrides=[Parameter("markers.namespace", value="a/b")])


def test_server_alone_sends_full_pose_and_erase_updates(ros):
    """The protocol server without the solver: full markers, pose-only changes and removals
    each in their field, consecutive numbers, nothing for no change, callbacks per feedback."""
    from geometry_msgs.msg import Pose
    from visualization_msgs.msg import InteractiveMarker
    from direction_up_ik.ros.interactive_markers import InteractiveMarkerServer
    import uuid

    owner = rclpy.create_node(f"im_owner_{uuid.uuid4().hex[:8]}", namespace=f"/s_{uuid.uuid4().hex[:8]}",
                              context=ros.context)
    ros.executor.add_node(owner)
    received = []
    server = InteractiveMarkerServer(owner, "im", received.append, server_id="test_server")
    updates = []
    cn = ros.client_node
    sub = cn.create_subscription(InteractiveMarkerUpdate, server.update_topic, updates.append,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    pub = cn.create_publisher(InteractiveMarkerFeedback, server.feedback_topic, 10)
    wait_until(lambda: sub.get_publisher_count() == 1 and pub.get_subscription_count() == 1, what="matching")
    try:
        def marker(name, x=0.0):
            m = InteractiveMarker(name=name, scale=0.2)
            m.header.frame_id = "base_link"
            m.pose.position.x, m.pose.orientation.w = x, 1.0
            m.controls = [InteractiveMarkerControl(name="move_x", interaction_mode=Control.MOVE_AXIS)]
            m.controls[0].orientation.w = 1.0
            return m

        with pytest.raises(ValueError, match="control"):
            server.insert(InteractiveMarker(name="empty"))
        nan = marker("nan")
        nan.scale = math.nan
        with pytest.raises(ValueError, match="scale"):
            server.insert(nan)
        with pytest.raises(KeyError):
            server.set_pose("a", Pose())
        assert server.apply_changes() is False and server.sequence_number == 0
        server.insert(marker("a"))
        server.insert(marker("b"))
        assert server.apply_changes() and server.sequence_number == 1
        moved_pose = marker("a", 0.5).pose
        server.set_pose("a", moved_pose)
        server.erase("b")
        assert server.apply_changes()
        server.set_pose("a", moved_pose)      # same pose: no change
        server.insert(marker("a", 0.5))       # same marker: no change
        assert server.apply_changes() is False
        wait_until(lambda: len(updates) == 2, what="two updates")
        first, second = updates
        assert (first.seq_num, second.seq_num) == (1, 2)
        assert {m.name for m in first.markers} == {"a", "b"} and not first.poses and not first.erases
        assert not second.markers and [p.name for p in second.poses] == ["a"] and list(second.erases) == ["b"]
        assert second.poses[0].pose.position.x == 0.5 and second.poses[0].header.frame_id == "base_link"
        assert {u.server_id for u in updates} == {"test_server"}
        assert server.names() == ["a"] and server.get("b") is None
        # Feedback: the echo comes before the callback; an unnormalised quaternion is normalised.
        fb = Feedback(marker_name="a", event_type=Feedback.POSE_UPDATE)
        fb.pose.position.x, fb.pose.orientation.z, fb.pose.orientation.w = 0.7, 2.0, 0.0
        pub.publish(fb)
        pub.publish(Feedback(marker_name="zz", event_type=Feedback.POSE_UPDATE))
        wait_until(lambda: len(received) == 1 and len(updates) == 3, what="the echo and the callback")
        assert received[0].pose.orientation.z == pytest.approx(1.0)
        assert updates[2].seq_num == 3 and updates[2].poses[0].pose.position.x == 0.7
        time.sleep(0.2)
        assert len(received) == 1 and len(updates) == 3
    finally:
        ros.executor.remove_node(owner)
        owner.destroy_node()
