"""IK of one planning group from tip poses, with MoveIt's error codes.

:class:`GroupIK` is shaped like MoveIt's ``kinematics::KinematicsBase`` (``initialize``,
``get_position_ik``, ``search_position_ik`` with consistency limits and solution
callbacks), with results instead of output arguments; it never raises for an unreachable
pose: every outcome carries a MoveIt error code. The MoveIt front end
(:class:`direction_up_ik.moveit.DirectionUpKinematicsPlugin`) and the node's
GetPositionIK bridge (:mod:`.position_ik`) both use it.

Poses are ``geometry_msgs/Pose``-like objects (``.position.x/y/z``,
``.orientation.x/y/z/w``) of the tip links in ``base_frame``. A pose becomes a
Direction-Up target through the group's configured TCP axes (``local_axes``:
"tcp" = direction +Z / up +Y, "x_y" = +X / +Y); several tips form one
multi-end-effector candidate.

Rules of the MoveIt front end, for the plugin class and the node's GetPositionIK bridge alike:

* precision: MoveIt's (``MOVEIT_SOLVER_DEFAULTS`` in :mod:`.kinematics_yaml`);
* seeds: MoveIt sends the robot's current state unclamped; a seed joint at most
  ``LIMIT_TOLERANCE`` (1e-3 rad / m) past a limit is clamped onto it, only one farther out is
  refused (INVALID_ROBOT_STATE), as the node does with joint states;
* unreachable: every pose not solved is NO_IK_SOLUTION (as MoveIt's own IK answers), also when
  the budget ran out; a tip pose farther from ``base_frame`` than the chain's longest reach
  (``RobotKinematics.tcp_reach_bounds``: fixed offsets plus prismatic travel plus the TCP offset
  along the chain) is answered at once, without spending the budget;
* collisions: after :meth:`GroupIK.enable_collisions` (the node does it while its
  ``collision.enabled`` is true and the robot has collision geometry; the plugin class when
  kinematics.yaml says ``avoid_collisions: true``) the search keeps only collision-free
  solutions: the group model's links (every link below ``base_frame``) among themselves and
  against the obstacles of :meth:`GroupIK.set_obstacles` (in ``base_frame``). Joints of the
  model outside the group stand where :meth:`GroupIK.set_joint_state` put them (the bridge:
  MoveIt's robot state). Links above ``base_frame`` are not part of the model and not checked.
  Per query, ``avoid_collisions`` (MoveIt's flag) turns the check on or off; its default is
  kinematics.yaml's ``avoid_collisions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Sequence

import numpy as np

from ..core import CollisionScene, DirectionUpIKError, DirectionUpTarget, RobotKinematics, warm_up_search
from ..core.backend import prepare_kernels
from ..core.batch import solve_with_settings
from ..core.limits import LIMIT_TOLERANCE, clamp_to_limits, float32_within_limits
from ..core.rotations import make_transform, quaternion_to_matrix, rpy_to_matrix
from ..core.search_api import search_with_settings
from ..core.settings import search_settings
from .kinematics_yaml import GroupKinematicsConfig
from .srdf import chain_links


class MoveItErrorCode:
    """Values of moveit_msgs/msg/MoveItErrorCodes used here."""

    SUCCESS = 1
    FAILURE = 99999
    TIMED_OUT = -6
    INVALID_GROUP_NAME = -15
    INVALID_GOAL_CONSTRAINTS = -16
    INVALID_ROBOT_STATE = -17
    INVALID_LINK_NAME = -18
    NO_IK_SOLUTION = -31


@dataclass(frozen=True)
class IKResult:
    """``solution``: joint positions in ``get_joint_names()`` order (None unless SUCCESS)."""

    solution: Optional[List[float]]
    error_code: int
    message: str = ""


#: callback(ik_poses, solution) -> bool or MoveIt error code; SUCCESS/True accepts.
SolutionCallback = Callable[[list, List[float]], object]


def _pose_arrays(pose):
    p, o = pose.position, pose.orientation
    position = np.array([p.x, p.y, p.z], dtype=np.float64)
    quat = np.array([o.x, o.y, o.z, o.w], dtype=np.float64)
    return position, quat


class GroupIK:
    """KinematicsBase-shaped IK for one planning group (a chain or several tips)."""

    def __init__(self, config: Optional[GroupKinematicsConfig] = None) -> None:
        self._config = config
        self._robot: Optional[RobotKinematics] = None
        self._link_solvers = {}
        self._scene: Optional[CollisionScene] = None
        self._collision_options = None  # enable_collisions() arguments, for the link solvers
        self._obstacles = ()

    @property
    def config(self) -> Optional[GroupKinematicsConfig]:
        """The group's kinematics.yaml settings."""
        return self._config

    # ------------------------------------------------------------ set-up
    def initialize(self, robot_description: str, group_name: str, base_frame: str,
                   tip_frames: Sequence[str], search_discretization: float = 0.005) -> bool:
        """Build the model of ``base_frame`` -> ``tip_frames``; False (and a reason) on failure.

        The group's joints are the movable joints on the paths from ``base_frame``
        to the tips, in URDF order; a tip with a ``tcp_offsets`` entry is solved for that TCP.
        ``search_discretization`` is accepted for API compatibility; the search samples seeds
        (library states nearest the target, then random ones) instead of discretising. Loads
        the compiled kernel and builds the group's seed library (:meth:`_warm_up`), without
        waiting for a first compile.
        """
        if isinstance(tip_frames, str):
            tip_frames = [tip_frames]
        config = self._config or GroupKinematicsConfig(group=group_name)
        offsets = []
        for tip in tip_frames:
            offset = config.tcp_offset(tip)
            offsets.append(np.eye(4) if offset is None else make_transform(rpy_to_matrix(offset[1]), offset[0]))
        try:
            robot = RobotKinematics.from_urdf(robot_description, list(tip_frames), offsets, root_link=base_frame)
        except DirectionUpIKError as exc:
            self.error = f"initialize failed: {exc}"
            return False
        moving = np.any(robot.dof_moves_tcp, axis=1)
        self._robot = robot
        self._config = config
        self._group = group_name
        self._base = base_frame
        self._tips = tuple(tip_frames)
        self._search_discretization = float(search_discretization)
        self._active = np.flatnonzero(moving)
        self._active_ids = tuple(self._active.tolist())  # as the core's one-candidate path keys them
        self._joint_names = [robot.joint_names[i] for i in self._active]
        self._reach = robot.tcp_reach_bounds()
        self._description = robot_description
        self._link_solvers = {}
        self._chain = None  # chain_links(), parsed on first use
        self._scene = None
        self.error = ""
        self._warm_up()
        if config.avoid_collisions:
            try:
                self.enable_collisions(padding=config.collision_padding)
            except DirectionUpIKError as exc:
                self.error = f"initialize failed: collision model: {exc}"
                self._robot = None
                return False
        return True

    # ------------------------------------------------------------ collisions
    def enable_collisions(self, urdf=None, *, srdf=None, padding: float = 0.0, mesh_paths=()) -> None:
        """Build the collision model of the group's robot model (``CollisionScene.from_urdf``:
        ``urdf`` default the description given to :meth:`initialize`; ``srdf``'s disabled pairs;
        ``padding`` metres; ``mesh_paths``), with the obstacles set so far. Queries then keep only
        collision-free solutions unless they pass ``avoid_collisions=False``.

        Raises:
            DirectionUpIKError: an unreadable SRDF or collision element (from the core).
        """
        options = dict(urdf=self._description if urdf is None else urdf, srdf=srdf, padding=padding,
                       mesh_paths=tuple(mesh_paths))
        scene = CollisionScene.from_urdf(self._robot, options["urdf"], srdf=srdf, padding=padding,
                                         mesh_paths=options["mesh_paths"])
        scene.set_obstacles(self._obstacles)
        self._scene, self._collision_options = scene, options
        for solver in self._link_solvers.values():
            solver.enable_collisions(**options)

    @property
    def collision_scene(self) -> Optional[CollisionScene]:
        """The group's collision model (None until :meth:`enable_collisions`)."""
        return self._scene

    def set_obstacles(self, obstacles) -> None:
        """Replace the world obstacles (core ``Obstacle`` s with poses in ``base_frame``)."""
        self._obstacles = tuple(obstacles)
        if self._scene is not None:
            self._scene.set_obstacles(self._obstacles)
        for solver in self._link_solvers.values():
            solver.set_obstacles(self._obstacles)

    def set_joint_state(self, positions: Mapping[str, float]) -> None:
        """Place the model's joints outside the group (the collision check sees them) at
        ``positions`` (name -> rad / m, clamped into the limits); other names are ignored."""
        robot = self._robot
        q = np.array(robot.joint_q, dtype=np.float64)
        active = set(self._active.tolist())
        for i, name in enumerate(robot.joint_names):
            value = positions.get(name)
            if i not in active and value is not None and np.isfinite(value):
                q[i] = value
        robot.joint_q[:] = float32_within_limits(np.clip(q, robot.lower_limits, robot.upper_limits),
                                                 robot.lower_limits, robot.upper_limits)
        for solver in self._link_solvers.values():
            solver.set_joint_state(positions)

    def _warm_up(self) -> None:
        """Build the seed library now and start loading (or compiling) the compiled kernels in
        the background (MoveIt initializes a plugin once, at start-up), not inside the first
        queries' timeouts, which are milliseconds; queries are answered by the numpy backend
        until the kernels are ready. The library holds for queries without consistency limits
        (those seed the search with uniform draws in their box instead)."""
        prepare_kernels()
        robot = self._robot
        tcp = robot.tcp_transforms(robot.joint_q[None])[0]
        example = tuple(self._target_at(e, tcp[e, :3, 3], tcp[e, :3, :3]) for e in range(len(self._tips)))
        try:
            warm_up_search(robot, [example], tuple(self._active))
        except DirectionUpIKError:
            pass  # a set-up the search cannot serve: its queries report why

    def get_joint_names(self) -> List[str]:
        """Joints of the group (the order of seeds and solutions)."""
        return list(self._joint_names) if self._robot else []

    def get_link_names(self) -> List[str]:
        """Tip links of the group."""
        return list(self._tips) if self._robot else []

    def get_group_name(self) -> str:
        return self._group if self._robot else ""

    def get_base_frame(self) -> str:
        return self._base if self._robot else ""

    def joint_limits(self):
        """(lower, upper): (J,) limits of the group's joints (rad / m; +-inf for continuous)."""
        return self._robot.lower_limits[self._active], self._robot.upper_limits[self._active]

    def reach_bounds(self) -> np.ndarray:
        """(tips,) upper bound (m) of each tip's (TCP's) distance from ``base_frame``."""
        return self._reach.copy()

    def chain_links(self) -> tuple:
        """Links IK can be solved for besides the tips: for a one-tip group, the links of its chain
        from ``base_frame`` to the tip (base first); () for a group of several tips."""
        if self._robot is None or len(self._tips) != 1:
            return ()
        if self._chain is None:  # (parses the URDF: once)
            self._chain = chain_links(self._description, self._base, self._tips[0]) or ()
        return self._chain

    def solver_for(self, links: Sequence[str]):
        """(solver, "") of IK for ``links``: this group when they are its tips (any order); for a
        one-tip group and one other link of its chain, a solver of that link (its TCP offset from
        kinematics.yaml if one is configured, else the link's frame) whose joints are those of the
        group that move the link, built on first use and kept. (None, reason) otherwise."""
        links = tuple(links)
        if sorted(links) == sorted(self._tips):
            return self, ""
        chain = self.chain_links()
        if len(links) != 1 or links[0] not in chain:
            where = f"or one link of its chain {list(chain)}" if chain else "(a group of several tips)"
            return None, f"ik link names {list(links)} must be the group's tips {list(self._tips)} {where}"
        solver = self._link_solvers.get(links[0])
        if solver is None:
            solver = GroupIK(self._config)
            if not solver.initialize(self._description, self._group, self._base, list(links),
                                     self._search_discretization) or not solver.get_joint_names():
                return None, f"link '{links[0]}' cannot be solved for: {solver.error or 'no joint moves it'}"
            solver._obstacles = self._obstacles
            if self._collision_options is not None:
                solver.enable_collisions(**self._collision_options)
            self._link_solvers[links[0]] = solver
        return solver, ""

    def supports_group(self, joint_names: Sequence[str], tip_frames: Optional[Sequence[str]] = None):
        """(True, "") when a group of these joints (and tips) can be served, else (False, reason)."""
        if self._robot is None:
            return False, "plugin not initialized"
        unknown = [n for n in joint_names if n not in self._robot.joint_names]
        if unknown:
            return False, f"joints {unknown} are not below base frame '{self._base}'"
        if tip_frames is not None:
            missing = [t for t in tip_frames if t not in self._robot.link_names]
            if missing:
                return False, f"tip frames {missing} are not below base frame '{self._base}'"
        return True, ""

    # -------------------------------------------------------------- IK
    def get_position_ik(self, ik_poses, ik_seed_state: Sequence[float], options=None, *,
                        avoid_collisions: Optional[bool] = None) -> IKResult:
        """One local solve (the spec's algorithm, with the group's solver settings: the search's
        defaults when the group searches, see kinematics_yaml) from the seed state; with collision
        checking (see the module), a solution in collision is NO_IK_SOLUTION."""
        return self._solve(ik_poses, ik_seed_state, timeout=None, consistency_limits=None,
                           solution_callback=None, search=False, avoid_collisions=avoid_collisions)

    def search_position_ik(self, ik_poses, ik_seed_state: Sequence[float], timeout: Optional[float] = None,
                           consistency_limits: Optional[Sequence[float]] = None,
                           solution_callback: Optional[SolutionCallback] = None, options=None, *,
                           avoid_collisions: Optional[bool] = None) -> IKResult:
        """Multi-seed search until a solution is accepted or ``timeout`` (s) passes.

        ``consistency_limits`` bound each joint to seed +- limit; a ``solution_callback``
        returning anything but True/SUCCESS rejects a solution and the search goes on; so does a
        solution in collision while collisions are checked (``avoid_collisions``, default the
        group's kinematics.yaml ``avoid_collisions``; needs :meth:`enable_collisions`).
        """
        return self._solve(ik_poses, ik_seed_state, timeout=timeout, consistency_limits=consistency_limits,
                           solution_callback=solution_callback, search=True, avoid_collisions=avoid_collisions)

    def _solve(self, ik_poses, seed, timeout, consistency_limits, solution_callback, search,
               avoid_collisions=None) -> IKResult:
        if self._robot is None:
            return IKResult(None, MoveItErrorCode.FAILURE, "plugin not initialized")
        poses = list(ik_poses) if isinstance(ik_poses, (list, tuple)) else [ik_poses]
        if len(poses) != len(self._tips):
            return IKResult(None, MoveItErrorCode.INVALID_GOAL_CONSTRAINTS,
                            f"expected {len(self._tips)} poses (one per tip), got {len(poses)}")
        robot, config = self._robot, self._config
        try:
            seed = np.asarray(seed, dtype=np.float64)
        except (TypeError, ValueError):
            return IKResult(None, MoveItErrorCode.INVALID_ROBOT_STATE, "ik_seed_state must be numbers")
        if seed.shape != (len(self._active),) or not np.all(np.isfinite(seed)):
            return IKResult(None, MoveItErrorCode.INVALID_ROBOT_STATE,
                            f"ik_seed_state must be {len(self._active)} finite values ({self._joint_names})")
        lower, upper = self.joint_limits()
        seed, outside = clamp_to_limits(seed, lower, upper)
        if outside is not None:
            return IKResult(None, MoveItErrorCode.INVALID_ROBOT_STATE,
                            f"ik_seed_state: joint '{self._joint_names[outside]}' is at {seed[outside]:.6g}, "
                            f"outside its limits [{lower[outside]:.6g}, {upper[outside]:.6g}] by more than "
                            f"{LIMIT_TOLERANCE:g}")
        try:
            targets = tuple(self._target(e, pose) for e, pose in enumerate(poses))
        except (DirectionUpIKError, ValueError, AttributeError, TypeError) as exc:
            return IKResult(None, MoveItErrorCode.INVALID_GOAL_CONSTRAINTS, f"invalid pose: {exc}")
        for e, target in enumerate(targets):
            distance = float(np.linalg.norm(target.position_world))
            if distance > self._reach[e] + config.settings.position_tol:
                return IKResult(None, MoveItErrorCode.NO_IK_SOLUTION,
                                f"no solution: '{self._tips[e]}' target {distance:.4g} m from '{self._base}', "
                                f"beyond the chain's reach (at most {self._reach[e]:.4g} m)")
        bounds = None
        if consistency_limits is not None:
            limits = np.asarray(consistency_limits, dtype=np.float64)
            if limits.shape != seed.shape or np.any(~np.isfinite(limits)) or np.any(limits < 0):
                return IKResult(None, MoveItErrorCode.INVALID_ROBOT_STATE,
                                f"consistency_limits must be {len(seed)} finite non-negative values")
            lower, upper = robot.lower_limits.copy(), robot.upper_limits.copy()
            lower[self._active] = np.maximum(lower[self._active], seed - limits)
            upper[self._active] = np.minimum(upper[self._active], seed + limits)
            bounds = (lower, upper)
        q = np.array(robot.joint_q, dtype=np.float64)
        q[self._active] = seed
        robot.joint_q[:] = float32_within_limits(q, robot.lower_limits, robot.upper_limits)
        timeout = config.timeout if timeout is None or timeout <= 0 else float(timeout)
        check = config.avoid_collisions if avoid_collisions is None else bool(avoid_collisions)
        scene = self._scene if check and self._scene is not None and self._scene.link_bodies else None
        def accepted(_, joints):
            verdict = solution_callback(poses, joints[self._active].astype(float).tolist())
            return verdict is True or verdict == MoveItErrorCode.SUCCESS
        accept = None if solution_callback is None else accepted
        # Through the core's calls for validated settings: without bounds or a callback they take
        # the one-candidate path (arrays kept between calls), with the same answers.
        found = None
        try:
            if not search:
                result = solve_with_settings(robot, (targets,), config.settings, self._active_ids,
                                             joint_bounds=bounds)
                timed_out = False
            else:
                found = search_with_settings(robot, (targets,), config.settings,
                                             self._search_options(timeout, bounds is not None), self._active_ids,
                                             collision_scene=scene, accept=accept, joint_bounds=bounds)
                result, timed_out = found.result, found.timed_out
        except FloatingPointError as exc:  # NumericalFailure
            return IKResult(None, MoveItErrorCode.NO_IK_SOLUTION, str(exc))
        except DirectionUpIKError as exc:
            return IKResult(None, MoveItErrorCode.INVALID_ROBOT_STATE, str(exc))
        return self._answer(result, timed_out, found, scene, search)

    def _search_options(self, timeout: float, bounded: bool):
        """The group's search options (kinematics.yaml) with this budget (s), validated.
        Consistency limits (``bounded``) narrow the bounds to a box around the seed: uniform
        starts in it, not the seed library, which such bounds would rebuild for every query
        (most of a time budget of milliseconds)."""
        options = self._config.search
        return search_settings(num_seeds=options.num_seeds, time_budget=timeout, max_rounds=None,
                               min_successes=options.min_successes, selection=options.selection,
                               random_seed=options.random_seed, seeding="random" if bounded else options.seeding)

    def _answer(self, result, timed_out: bool, found, scene, search: bool) -> IKResult:
        """The IKResult of a solve's ``result`` (one candidate; ``found``: the search's
        SearchResult, which checked its answer against ``scene`` already, or None)."""
        config = self._config
        if scene is None:
            report = None
        elif found is not None and result.best_index is not None:
            report = found.collision_report()  # the search checked its answer already
        else:
            report = scene.check(result.joint_q[0])
        if result.best_index is None or not (report is None or report.collision_free[0]):
            # NO_IK_SOLUTION also when the budget ran out, as MoveIt's own IK answers (TIMED_OUT
            # reads as "try again with more time", which does not help an unreachable pose).
            spent = "; the time budget ran out" if search and timed_out else ""
            if report is not None and not report.collision_free[0] and result.position_error[0].max() < \
                    config.settings.position_tol:
                pair = " - ".join(report.closest_pair[0])
                return IKResult(None, MoveItErrorCode.NO_IK_SOLUTION,
                                f"no collision-free solution: the nearest one collides ({pair}, "
                                f"{1e3 * report.clearance[0]:.1f} mm){spent}")
            return IKResult(None, MoveItErrorCode.NO_IK_SOLUTION,
                            f"no solution (position error {result.position_error[0].max():.4g} m{spent})")
        solution = result.joint_q[0][self._active].astype(np.float64).tolist()
        return IKResult(solution, MoveItErrorCode.SUCCESS)

    def _target(self, ee: int, pose) -> DirectionUpTarget:
        position, quat = _pose_arrays(pose)
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(quat))) or np.linalg.norm(quat) < 1e-9:
            raise ValueError("position and orientation must be finite with a non-zero quaternion")
        return self._target_at(ee, position, quaternion_to_matrix(quat))

    def _target_at(self, ee: int, position: np.ndarray, rot: np.ndarray) -> DirectionUpTarget:
        """The group's target (its mode and local axes) for tip ``ee`` at this pose (m, (3, 3))."""
        axis = 2 if self._config.local_axes == "tcp" else 0
        up = None if self._config.mode == "axis" else rot[:, 1]
        if self._config.local_axes == "tcp":
            return DirectionUpTarget(ee, position, rot[:, axis], up, None, None)
        return DirectionUpTarget(ee, position, rot[:, axis], up)
