"""``direction_up_ik_node``: joint states in, SolveDirectionUpIK served, joint command out.

Interfaces (names relative to the node's namespace):

* subscribes ``joint_states`` (``sensor_msgs/JointState``, merged by name);
* serves ``~/solve`` (``direction_up_ik/srv/SolveDirectionUpIK``);
* subscribes ``~/target`` (``direction_up_ik/msg/DirectionUpCandidate``), depth 1 so
  the newest target wins when solving lags, and publishes the best solution;
* publishes the command on ``command.topic`` as ``sensor_msgs/JointState``,
  ``trajectory_msgs/JointTrajectory`` or ``std_msgs/Float64MultiArray``; streamed solves
  (``~/target``, drags) start from the last command and are held when a joint would jump
  (:mod:`direction_up_ik.ros.streaming_node`, its rules in :mod:`direction_up_ik.ros.streaming`);
* with ``robot_description_topic``: subscribes that ``std_msgs/String`` (transient local)
  and comes up when the first valid URDF arrives; until then requests get NO_ROBOT_MODEL;
* with ``markers.enabled``: RViz interactive markers on ``<markers.namespace>/...`` and
  ``~/markers`` (:mod:`direction_up_ik.ros.drag`);
* subscribes ``~/obstacles`` (``direction_up_ik/msg/CollisionObstacle``): world obstacles that
  solutions are checked against with the robot's collision bodies (``collision.*``,
  :mod:`direction_up_ik.ros.obstacles`).

Parameters: :mod:`direction_up_ik.ros.config`. Bad configuration at start-up
logs one line naming the parameter and exits with code 1.
"""

from __future__ import annotations

import array
import dataclasses
import functools
import sys
import threading
from typing import List, Optional

import numpy as np
from rclpy.parameter import Parameter
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType, SetParametersResult)
from rclpy.exceptions import (InvalidParameterTypeException, InvalidParameterValueException,
                               ParameterUninitializedException)
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from direction_up_ik.msg import CollisionObstacle, DirectionUpCandidate
from direction_up_ik.srv import SolveDirectionUpIK

from ..core import DirectionUpIKError, JointLimitError, NumericalFailure, warm_up_search
from ..core.batch import solve_with_settings
from ..core.search_api import search_with_settings
from ..core.settings import search_settings
from ..core.backend import (KERNELS_ABSENT, KERNELS_PREPARING, KERNELS_READY, kernel_state, prepare_kernels,
                            stop_preparing)
from ..groups import solve_position_ik
from .command_output import CommandOutput
from .config import (LOCAL_AXES_WORDS, PARAMETERS, ConfigError, NodeConfig, ParameterSpec,
                     bundled_end_effector_defaults, config_from_values, default_end_effector_names,
                     end_effector_parameters, obstacle_parameters)
from .conversions import (STOP_IN_COLLISION, RequestError, end_effector_ids, fill_response, search_options,
                          settings_with_overrides, targets_from_candidates, with_collisions)
from .obstacles import ObstacleError, ObstacleSet, entry_from_config, load_collision_scene
from .drag import DragMarkers
from .joint_state import JointStateError, JointStateStore, float32_within_limits
from .log_throttle import LogThrottle, prime_caller_lookup
from .process import run_node, settle_heap
from .robot_model import check_step_limits, load_group_solvers, load_robot_model, robot_description_text
from .streaming import CommandMemory
from .streaming_node import StreamingSolves

Response = SolveDirectionUpIK.Response

_TYPES = {
    "string": ParameterType.PARAMETER_STRING, "double": ParameterType.PARAMETER_DOUBLE,
    "integer": ParameterType.PARAMETER_INTEGER, "bool": ParameterType.PARAMETER_BOOL,
    "string_array": ParameterType.PARAMETER_STRING_ARRAY,
    "double_array": ParameterType.PARAMETER_DOUBLE_ARRAY,
}
#: While the compiled kernels are still being prepared the numpy reference answers, tens of
#: times slower: a search's time budget is this many times longer then (SolveDirectionUpIK.srv).
NUMPY_BUDGET_SCALE = 20.0
_JOINT_STATE_CODES = {"missing": Response.NO_JOINT_STATE, "unknown": Response.UNKNOWN_JOINT,
                      "invalid": Response.INVALID_REQUEST,
                      "out_of_limits": Response.JOINT_STATE_OUT_OF_LIMITS}


def descriptor(spec: ParameterSpec) -> ParameterDescriptor:
    """ROS parameter descriptor of one schema entry (type, description, range, read-only)."""
    d = ParameterDescriptor(name=spec.name, type=_TYPES[spec.type], description=spec.description,
                            read_only=spec.read_only)
    if spec.type == "double" and (spec.min_value is not None or spec.max_value is not None):
        d.floating_point_range = [FloatingPointRange(
            from_value=float(spec.min_value if spec.min_value is not None else -1e308),
            to_value=float(spec.max_value if spec.max_value is not None else 1e308), step=0.0)]
    if spec.type == "integer" and (spec.min_value is not None or spec.max_value is not None):
        d.integer_range = [IntegerRange(
            from_value=int(spec.min_value if spec.min_value is not None else -2 ** 63),
            to_value=int(spec.max_value if spec.max_value is not None else 2 ** 63 - 1), step=1)]
    return d


class DirectionUpIKNode(StreamingSolves, Node):
    """The solver node. Raises ConfigError from the constructor on bad configuration.

    ``owns_process``: this node is its process's only purpose (``main``), so it may freeze the
    process's heap (:func:`~.process.settle_heap`) after start-up, when its kernels are loaded
    and when it adopts a model from the description topic; other keywords go to rclpy's Node.
    """

    def __init__(self, node_name: str = "direction_up_ik_node", *, owns_process: bool = False, **kwargs) -> None:
        self._owns_process, self._constructed = owns_process, False
        prime_caller_lookup()  # the first log line's cost, off the start-up's path
        super().__init__(node_name, **kwargs)
        for spec in PARAMETERS:
            self._declare(spec)
        values = self._parameter_values()
        self._ee_specs = {}
        names = default_end_effector_names(values)
        if len(set(names)) != len(names):  # before declaring end_effector.<name>.* twice
            raise ConfigError("end_effectors", f"names must be unique, got {list(names)}")
        for name in names:
            for spec in end_effector_parameters(name, bundled_end_effector_defaults(values, name)):
                self._declare(spec)
                self._ee_specs[spec.name] = spec
        self._obstacle_specs = {spec.name: spec for name in values.get("collision.obstacles") or ()
                                for spec in obstacle_parameters(name)}
        for spec in self._obstacle_specs.values():
            self._declare(spec)
        self._config: NodeConfig = config_from_values(self._parameter_values())
        # The robot model and what depends on it: set once, by _adopt_model (at start-up, or when
        # the first valid description arrives on robot_description_topic).
        self._robot = None
        self._description: Optional[str] = None
        self._joint_ids = {}
        self._joint_states: Optional[JointStateStore] = None
        self._group_solvers = {}
        self._frames = {"": np.eye(4)}
        self._scene = None  # the collision scene (collision.*), with the model
        self._obstacles: Optional[ObstacleSet] = None
        self.obstacles_version = 0  # ObstacleSet.version once the scene (and the groups) have it
        self.markers: Optional[DragMarkers] = None
        self.commands = CommandMemory()  # last published command, streaming counters
        self._log_throttle = LogThrottle()  # warnings a stream can repeat (ros/log_throttle.py)
        self.descriptions_received = 0  # messages on robot_description_topic handled
        self._solve_lock = threading.Lock()
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self._command_out = CommandOutput(self, self._config, self.commands)
        self.create_subscription(JointState, self._config.joint_states_topic, self._on_joint_state,
                                 QoSProfile(depth=10))
        self.create_subscription(DirectionUpCandidate, "~/target", self._on_target,
                                 QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                                            reliability=ReliabilityPolicy.RELIABLE))
        self.create_service(SolveDirectionUpIK, "~/solve", self._on_solve, qos_profile=self._service_qos())
        self.create_subscription(CollisionObstacle, "~/obstacles", self._on_obstacle,
                                 QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                                            reliability=ReliabilityPolicy.RELIABLE))
        self._kernel_state = kernel_state()
        topic = self._config.robot_description_topic
        if topic:
            # As robot_state_publisher publishes it (and ros2_control / MoveIt subscribe): the
            # latest description waits for late joiners.
            self._description_sub = self.create_subscription(
                String, topic, self._on_description,
                QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL))
            self.get_logger().info(f"waiting for the robot description on "
                                   f"'{self._description_sub.topic_name}' (robot_description_topic); "
                                   "requests get NO_ROBOT_MODEL until it arrives")
        else:
            self._adopt_model(load_robot_model(self._config), None)
        # The compiled kernels load (or compile, the first time) in the background; requests are
        # answered by the numpy backend until they are ready (core/backend.py). Started after the
        # model, so that the background import of numba does not slow the start-up.
        self._kernel_state = prepare_kernels(self._on_kernels_ready)
        self._constructed = True  # before settling: kernels ready from now on settle again
        self._settle_heap()

    def _settle_heap(self) -> None:
        """:func:`~.process.settle_heap` when the node owns its process and is constructed
        (the constructor settles once at its end)."""
        if self._owns_process and self._constructed:
            settle_heap()

    def _adopt_model(self, robot, description: Optional[str]) -> None:
        """Make ``robot`` the node's model: joint-state store, frames, collision scene, MoveIt
        groups, markers. Everything that may fail runs before anything is set, so a refused
        description leaves the node as it was. Raises ConfigError."""
        group_solvers = load_group_solvers(self._config, description)
        scene, warnings = load_collision_scene(self._config, robot, description)
        obstacles = ObstacleSet(tuple(entry_from_config(o) for o in self._config.obstacles),
                                reserved=robot.link_names)
        frames = {"": np.eye(4), **robot.static_link_xforms()}
        self._enable_group_collisions(group_solvers, scene, frames, description)
        for warning in warnings:
            self.get_logger().warning(warning)
        self._joint_ids = {n: i for i, n in enumerate(robot.joint_names)}
        self._frames = frames
        self._scene, self._obstacles = scene, obstacles
        self._joint_states = JointStateStore(robot.joint_names, robot.lower_limits, robot.upper_limits)
        self._group_solvers = group_solvers
        self._set_group_obstacles()
        self._description = description
        self._robot = robot  # last: requests see a model only once everything is in place
        if self._group_solvers:
            self._serve_moveit_bridge()
        # RViz interactive markers (markers.*): drag targets, solved through stream().
        self.markers = (DragMarkers(self, self._robot, lambda: self._config, self._joint_states.latest,
                                    self.stream, collision_scene=lambda: self._scene)
                        if self._config.markers_enabled else None)
        self._warm_up_search()
        self._log_summary()
        self._settle_heap()  # a model from the description topic (at start-up: the constructor's)

    def _on_description(self, msg: String) -> None:
        """A URDF on robot_description_topic: the first valid one becomes the model; a later
        different one is refused (the model is read-only: restart the node to change it)."""
        topic = self._description_sub.topic_name
        try:
            if self._robot is None:
                self._adopt_model(load_robot_model(self._config, msg.data), msg.data)
            elif msg.data != self._description:
                self.get_logger().warning(
                    f"robot description on '{topic}' changed: refused, the node keeps robot "
                    f"'{self._robot.robot_name}' ({self._robot.num_dofs} joints); restart the node to "
                    "use the new description")
        except ConfigError as exc:
            self.get_logger().error(f"robot description on '{topic}' refused: {exc}; still waiting for "
                                    "a valid one")
        except Exception as exc:  # noqa: BLE001 - no description may stop the node
            self.get_logger().error(f"robot description on '{topic}' refused (internal error {exc!r}); "
                                    "still waiting for a valid one")
        finally:
            self.descriptions_received += 1

    # ------------------------------------------------------------ collisions
    def collision_scene(self, ignore: bool = False):
        """The scene solutions are checked against now, or None (collision.enabled false, no
        collision bodies on the robot, or ``ignore``)."""
        if ignore or self._scene is None or not self._config.collision_enabled or not self._scene.link_bodies:
            return None
        return self._scene

    def obstacles(self):
        """The obstacles in force (ObstacleEntry list: parameters first, then the topic's; none
        before the node has a robot model)."""
        return [] if self._obstacles is None else self._obstacles.entries()

    def _on_obstacle(self, msg: CollisionObstacle) -> None:
        if self._robot is None:
            self.get_logger().warning("~/obstacles: message rejected, no robot model yet (waiting for "
                                      "robot_description_topic)", throttle_duration_sec=5.0)
            return
        try:
            with self._solve_lock:  # no solve sees half a change
                done = self._obstacles.apply(msg, self._frames)
                self._scene.set_obstacles([e.to_core() for e in self._obstacles.entries()])
                self._set_group_obstacles()
                self.obstacles_version = self._obstacles.version
        except ObstacleError as exc:
            self.get_logger().warning(f"~/obstacles: message rejected, {exc}; the obstacles in force are "
                                      "unchanged")
            return
        self.get_logger().info(f"~/obstacles: {done}; {len(self._obstacles)} obstacle(s) in force")
        if not self._scene.link_bodies:
            self.get_logger().warning("~/obstacles: the robot has no collision geometry, so no solution is "
                                      "checked against obstacles", throttle_duration_sec=60.0)
        if self.markers is not None:
            self.markers.refresh()

    def _enable_group_collisions(self, group_solvers, scene, frames, description: Optional[str]) -> None:
        """The bridge's groups check collisions like ~/solve (collision.* parameters), with the
        obstacles moved into each group's base frame. Raises ConfigError."""
        if not scene.link_bodies:
            return
        config = self._config
        srdf, _ = config.collision_srdf_source()
        urdf = robot_description_text(config, description)
        for name, solver in sorted(group_solvers.items()):
            try:
                solver.enable_collisions(urdf, srdf=srdf or None, padding=config.collision_padding,
                                         mesh_paths=config.collision_mesh_paths)
            except DirectionUpIKError as exc:
                raise ConfigError("moveit.kinematics_yaml", f"group '{name}': collision model: {exc}") from None
            if solver.get_base_frame() not in frames:
                self.get_logger().warning(
                    f"GetPositionIK group '{name}': base frame '{solver.get_base_frame()}' moves with the "
                    "joints, so its answers are checked for self-collision only, not against obstacles")

    def _set_group_obstacles(self) -> None:
        """Hand the obstacles to the bridge's groups, in each group's base frame (when it is
        fixed to the root)."""
        if not self._group_solvers or not self._scene.link_bodies:
            return
        for solver in self._group_solvers.values():
            root_to_base = self._frames.get(solver.get_base_frame())
            if root_to_base is None:
                continue
            base_from_root = np.linalg.inv(root_to_base)
            solver.set_obstacles([dataclasses.replace(e, pose=base_from_root @ e.pose).to_core()
                                  for e in self._obstacles.entries()])

    def _service_qos(self) -> QoSProfile:
        """The services' QoS: rclpy's service default (reliable, volatile), but a history of
        ``service_queue_depth`` requests instead of 10, so that a burst of requests waits to be
        answered instead of pushing earlier ones out unanswered."""
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self._config.service_queue_depth,
                          reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)

    def _warm_up_search(self) -> None:
        """Build the search's seed library for the configured active joints (at a state within
        the limits; exact for the default, every joint active), off the first request."""
        active = tuple(self._joint_ids[n] for n in self._config.active_joints) or None
        with self._solve_lock:
            lower, upper = self._robot.lower_limits, self._robot.upper_limits
            inside = np.clip(self._robot.joint_q.astype(np.float64), lower, upper)
            self._robot.joint_q[:] = float32_within_limits(inside, lower, upper)
            try:
                seconds = warm_up_search(self._robot, active_dof_ids=active)
            except DirectionUpIKError as exc:  # e.g. a limit the clip could not meet
                self.get_logger().warning(f"search warm-up skipped: {exc}")
                return
        self.get_logger().debug(f"search seed library ready in {1e3 * seconds:.1f} ms")

    # ------------------------------------------------------------ parameters
    def _declare(self, spec: ParameterSpec) -> None:
        # An empty list carries no element type: declare those by type.
        default = spec.default
        typed = isinstance(default, list) and not default
        if typed:
            default = (Parameter.Type.STRING_ARRAY if spec.type == "string_array"
                       else Parameter.Type.DOUBLE_ARRAY)
        desc = descriptor(spec)
        desc.read_only = spec.read_only and not typed  # typed: made read-only once it has a value
        try:
            self.declare_parameter(spec.name, default, desc)
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            # An override of the wrong type or outside the descriptor's range (e.g. from
            # --params-file or -p) is bad configuration too, not an internal error.
            raise ConfigError(spec.name, str(exc)) from None
        if typed:
            # Declared by type, the parameter has no value yet and ~/get_parameters (ros2
            # param get/dump) answers nothing for any request naming it: give it the empty list.
            try:
                self.get_parameter(spec.name)
            except ParameterUninitializedException:
                self.set_parameters([Parameter(spec.name, default, [])])
            if spec.read_only:
                self.set_descriptor(spec.name, descriptor(spec))

    def _parameter_values(self) -> dict:
        """Current value of every declared parameter; unset arrays read as []."""
        names = ([p.name for p in PARAMETERS] + list(getattr(self, "_ee_specs", {}))
                 + list(getattr(self, "_obstacle_specs", {})))
        values = {}
        for name in names:
            try:
                value = self.get_parameter(name).value
            except ParameterUninitializedException:
                value = []
            values[name] = list(value) if isinstance(value, (list, tuple, array.array)) else value
        return values

    def _on_set_parameters(self, params) -> SetParametersResult:
        values = self._parameter_values()
        values.update({p.name: p.value for p in params})
        try:
            config = config_from_values(values)
            if self._robot is not None:  # else load_robot_model checks these when a model arrives
                check_step_limits(config, self._robot.num_dofs)
                for name in config.active_joints + config.command_joint_order:
                    if name not in self._joint_ids:
                        field = "active_joints" if name in config.active_joints else "command.joint_order"
                        raise ConfigError(field, f"unknown joint '{name}'; joints: {list(self._robot.joint_names)}")
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self._config = config
        return SetParametersResult(successful=True)

    def _on_kernels_ready(self, seconds, error) -> None:
        """Logs once when the compiled kernels take over (or cannot); from a background thread."""
        if error:
            self.get_logger().warning(f"compiled solver kernels unavailable ({error}): the numpy backend "
                                      "keeps answering")
        elif seconds is not None:
            self.get_logger().info(f"compiled solver kernels ready after {seconds:.1f} s: the numba "
                                   "backend answers from now on")
            self._settle_heap()  # numba's objects: loaded once, alive until the process ends

    def _log_summary(self) -> None:
        c, r = self._config, self._robot
        active = list(c.active_joints) or ["all"]
        ees = ", ".join(f"{e.name}={e.link}{list(e.tcp_xyz)} local_axes {e.local_axes} "
                        f"({LOCAL_AXES_WORDS[e.local_axes]})" for e in c.end_effectors)
        s, search = c.solver, c.search
        mode = (f"search ({search.num_seeds} seeds per round, budget {search.time_budget} s)"
                if search.num_seeds else "the spec's single start")
        self.get_logger().info(
            f"ready: robot '{r.robot_name}' root '{r.root_link}' with {r.num_dofs} joints; end effectors "
            f"{ees} (markers and LOCAL_AXES_CONFIGURED use these; LOCAL_AXES_DEFAULT targets use "
            f"+X/+Y); active joints {active}; tolerances {s.position_tol} m / {s.frame_tol_rad} rad, "
            f"max_iters {s.max_iters}; ~/solve answers with {mode}; command {c.command_type} on "
            f"{self._command_out.publisher.topic_name}; service {self.resolve_service_name('~/solve')}; "
            f"solver backend {self._backend_summary()}")

    def _backend_summary(self) -> str:
        if self._kernel_state == KERNELS_READY:
            return "numba"
        if self._kernel_state == KERNELS_ABSENT:
            return "numpy (numba unavailable or DIRECTION_UP_IK_BACKEND=numpy)"
        return ("numpy until the compiled kernels are ready (preparing them in the background; "
                "`python -m direction_up_ik.precompile` does it ahead of time)")

    # ------------------------------------------------------------- inputs
    def _on_joint_state(self, msg: JointState) -> None:
        if self._joint_states is None:
            return  # no model yet: its joints are unknown
        for warning in self._joint_states.update(msg.name, msg.position):
            if self._log_throttle.due("joint_states", 5.0):
                self.get_logger().warning(warning)

    def _on_solve(self, request, response):
        return self.solve(request, response)

    # -------------------------------------------------------------- solving
    def solve(self, request, response):
        """Serve one SolveDirectionUpIK request (or a streamed one, ``StreamedRequest``); never
        raises."""
        if self._robot is None:
            response.success, response.best_index = False, -1
            response.error_code = Response.NO_ROBOT_MODEL
            response.message = (f"no robot model yet: waiting for a URDF on "
                                f"'{self._description_sub.topic_name}' (robot_description_topic)")
            return response
        try:
            result, names, totals, report = self._solve(request)
        except RequestError as exc:
            response.success, response.best_index = False, -1
            response.error_code, response.message = exc.code, str(exc)
            response.joint_names = list(self._robot.joint_names)
            return response
        except Exception as exc:  # noqa: BLE001 - the node must keep serving
            self.get_logger().error(f"internal error while solving: {exc!r}")
            response.success, response.best_index = False, -1
            response.error_code, response.message = Response.INTERNAL_ERROR, f"internal error: {exc!r}"
            return response
        fill_response(response, result, self._robot.joint_names, names, *totals, report=report)
        response.success = result.best_index is not None
        if response.success:
            response.error_code = Response.SUCCESS
            best = result.best_index
            # From the response's Python lists (fill_response built them), not the result's arrays
            succeeded = sum(1 for item in response.results if item.success)
            response.message = (f"{succeeded}/{result.num_candidates} candidates succeeded; best {best} "
                                f"(cost {response.results[best].cost:.6g})")
            if request.publish:
                self.publish_command(result.joint_q[best].astype(np.float64))
                response.message += "; command published"
        elif STOP_IN_COLLISION in result.stop_reason:
            response.error_code = Response.IN_COLLISION
            b = result.stop_reason.index(STOP_IN_COLLISION)
            response.message = (f"no collision-free solution: candidate {b} (of {result.num_candidates}) reached "
                                f"its targets only in collision ({' - '.join(report.closest_pair[b])}, "
                                f"{1e3 * report.clearance[b]:.1f} mm)")
        else:
            response.error_code = Response.NO_SOLUTION
            response.message = f"no candidate met the tolerances ({result.num_candidates} tried)"
        return response

    def _solve(self, request):
        config = self._config  # one consistent snapshot for the whole request
        candidates = request.candidates
        if len(candidates) == 0:
            raise RequestError(Response.INVALID_REQUEST, "candidates: at least one candidate is required")
        if len(candidates) > config.max_candidates:
            raise RequestError(Response.REQUEST_TOO_LARGE, f"candidates: {len(candidates)} exceeds "
                               f"limits.max_candidates={config.max_candidates}")
        total = 0
        for b, c in enumerate(candidates):
            if len(c.targets) > config.max_targets_per_candidate:
                raise RequestError(Response.REQUEST_TOO_LARGE, f"candidates[{b}].targets: {len(c.targets)} "
                                   f"exceeds limits.max_targets_per_candidate={config.max_targets_per_candidate}")
            total += len(c.targets)
        if total > config.max_batch_size:
            raise RequestError(Response.REQUEST_TOO_LARGE, f"candidates: {total} targets in all exceeds "
                               f"limits.max_batch_size={config.max_batch_size}")
        search = search_options(config, request.overrides)
        if search is not None and search["time_budget"] and kernel_state() == KERNELS_PREPARING:
            # The numpy reference answers until the compiled kernels are ready, far slower.
            search["time_budget"] = min(3600.0, search["time_budget"] * NUMPY_BUDGET_SCALE)
        settings = settings_with_overrides(config.solver if search is None else config.search_solver,
                                           request.overrides)
        active_names = list(request.active_joints) or list(config.active_joints)
        unknown = [n for n in active_names if n not in self._joint_ids]
        if unknown:
            raise RequestError(Response.UNKNOWN_JOINT, f"active_joints: unknown joints {unknown}; "
                               f"joints: {list(self._robot.joint_names)}")
        if len(set(active_names)) != len(active_names):
            raise RequestError(Response.INVALID_REQUEST, "active_joints: names must be unique")
        active = tuple(self._joint_ids[n] for n in active_names) if active_names else None
        try:
            # Every joint, active or not, must be within its limits: the published command
            # carries all of them, and a command is never outside the limits.
            q0, _ = self._joint_states.initial_state(request.initial_state.name,
                                                     request.initial_state.position)
        except JointStateError as exc:
            raise RequestError(_JOINT_STATE_CODES[exc.kind], str(exc)) from None
        targets = targets_from_candidates(candidates, config.end_effectors, self._frames)
        names = [config.end_effectors[i].name for i in end_effector_ids(targets)]
        with self._solve_lock:
            self._robot.joint_q[:] = float32_within_limits(q0, self._robot.lower_limits,
                                                           self._robot.upper_limits)
            scene = self.collision_scene(request.ignore_collisions)
            try:
                if search is None:  # the spec's single start (the core's one-candidate path)
                    result = solve_with_settings(self._robot, targets, settings, active)
                    totals, report = (None, None), None if scene is None else scene.check(result.joint_q)
                else:
                    # The search chose collision-free successes and checked its answers already.
                    found = search_with_settings(self._robot, targets, settings, search_settings(**search), active,
                                                 collision_scene=scene)
                    result, totals = found.result, (found.iterations, found.starts)
                    report = None if scene is None else found.collision_report()
                if report is None:
                    return result, names, totals, None
                return with_collisions(result, report), names, totals, report
            except JointLimitError as exc:
                raise RequestError(Response.JOINT_STATE_OUT_OF_LIMITS, str(exc)) from None
            except NumericalFailure as exc:
                raise RequestError(Response.NUMERICAL_FAILURE, str(exc)) from None
            except np.linalg.LinAlgError as exc:  # e.g. a singular damped system (damping 5e-324)
                raise RequestError(Response.NUMERICAL_FAILURE, f"numerical failure: the damped "
                                   f"least-squares system is singular ({exc}); check overrides.damping "
                                   "and the weights") from None
            except DirectionUpIKError as exc:
                raise RequestError(Response.INVALID_REQUEST, str(exc)) from None

    def _serve_moveit_bridge(self) -> None:
        """moveit_msgs/srv/GetPositionIK for srv_kinematics_plugin, when moveit_msgs imports."""
        groups = sorted(self._group_solvers)
        try:
            from moveit_msgs.srv import GetPositionIK
        except ImportError:
            self.get_logger().warning(
                f"moveit.kinematics_yaml groups {groups} loaded, but moveit_msgs is not installed: "
                "the GetPositionIK bridge is off")
            return
        name = self._config.moveit_service_name or next(
            iter(self._group_solvers.values())).config.service_name
        self.create_service(GetPositionIK, name, self._on_get_position_ik, qos_profile=self._service_qos())
        self.get_logger().info(f"serving moveit_msgs/GetPositionIK on '{name}' for groups {groups}")

    def _on_get_position_ik(self, request, response):
        """One GetPositionIK request (groups/position_ik.py has the message rules); its budget is
        capped by moveit.max_timeout. ``avoid_collisions`` is honoured while collision.enabled."""
        with self._solve_lock:
            answer = solve_position_ik(self._group_solvers, request.ik_request,
                                       max_timeout=self._config.moveit_max_timeout,
                                       check_collisions=self._config.collision_enabled)
        response.solution.joint_state.name = answer.joint_names
        response.solution.joint_state.position = [float(v) for v in answer.positions]
        response.error_code.val = int(answer.error_code)
        if hasattr(response.error_code, "message"):  # moveit_msgs >= 2.3
            response.error_code.message = answer.message
        return response

    # ------------------------------------------------------------- output
    def publish_command(self, q: np.ndarray) -> None:
        """Publish joint positions (D,) in the configured command format (``ros/command_output.py``)."""
        self._command_out.publish(q, self._config, self._robot.joint_names, self._joint_ids)


def main(args: Optional[List[str]] = None) -> int:
    """Console entry point: run the node until SIGINT/SIGTERM (exit 0); exit 1 on bad configuration."""
    return run_node(functools.partial(DirectionUpIKNode, owns_process=True), "direction_up_ik_node", args,
                    on_stop=stop_preparing)  # no compile outlives the node


if __name__ == "__main__":
    sys.exit(main())
