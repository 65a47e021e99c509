"""The MoveIt front end as MoveIt calls it (issue 29): MoveIt's precision, seeds at a limit,
unreachable poses (NO_IK_SOLUTION, the reach bound) and the request's timeout cap.

Requests are shaped as srv_kinematics_plugin (jazzy) sends them: ``pose_stamped`` +
``ik_link_name`` in the group's base frame, the robot's state as seed, ``avoid_collisions``
true, timeout 0; message-shaped objects with moveit_msgs' field names, so no moveit_msgs here.
"""

import pathlib
import time
from types import SimpleNamespace

import numpy as np
import pytest

geometry_msgs = pytest.importorskip("geometry_msgs.msg", reason="needs geometry_msgs (ROS wheels)")
from geometry_msgs.msg import Pose, PoseStamped  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

from direction_up_ik.core import RobotKinematics  # noqa: E402
from direction_up_ik.core.kinematics import random_in_limits  # noqa: E402
from direction_up_ik.core.rotations import make_transform, rpy_to_matrix  # noqa: E402
from direction_up_ik.groups import (GroupIK, MoveItErrorCode, load_kinematics_yaml, make_group_solvers,  # noqa: E402
                                    solve_position_ik)
from direction_up_ik.groups.kinematics_yaml import MOVEIT_SOLVER_DEFAULTS  # noqa: E402
from direction_up_ik.robots import BUNDLED_ROBOTS, bundled_robot  # noqa: E402

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config"
ROBOTS = ("panda_like", "ur5_like", "dual_arm_torso")
# MoveGroupInterface's default goal tolerances, which MoveIt checks every IK answer against.
MOVEIT_POSITION_TOL, MOVEIT_ORIENTATION_TOL = 1e-4, 1e-3


def _urdf(name):
    return bundled_robot(name).urdf_path().read_text()


def _solvers(robot):
    return make_group_solvers(_urdf(robot), load_kinematics_yaml(CONFIG / f"{robot}_kinematics.yaml"))


def _pose(xform):
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in xform[:3, 3])
    x, y, z, w = Rotation.from_matrix(xform[:3, :3]).as_quat()
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = (float(x), float(y), float(z),
                                                                                      float(w))
    return pose


def _xform(pose):
    out = np.eye(4)
    out[:3, 3] = [pose.position.x, pose.position.y, pose.position.z]
    o = pose.orientation
    out[:3, :3] = Rotation.from_quat([o.x, o.y, o.z, o.w]).as_matrix()
    return out


def request(group, names, positions, pose, link, timeout=0.0):
    """A PositionIKRequest as srv_kinematics_plugin sends it (timeout 0 unless given)."""
    stamped = PoseStamped()
    stamped.pose = pose
    return SimpleNamespace(
        group_name=group, robot_state=SimpleNamespace(joint_state=SimpleNamespace(name=list(names),
                                                                                  position=list(positions))),
        constraints=SimpleNamespace(), avoid_collisions=True, ik_link_name=link, pose_stamped=stamped,
        ik_link_names=[], pose_stamped_vector=[],
        timeout=SimpleNamespace(sec=int(timeout), nanosec=int(round((timeout % 1) * 1e9))))


def _model(solver, robot):
    """The group's model (base -> tips with their TCP offsets), built independently of the solver."""
    config = solver.config
    offsets = []
    for tip in solver.get_link_names():
        offset = config.tcp_offset(tip)
        offsets.append(np.eye(4) if offset is None else make_transform(rpy_to_matrix(offset[1]), offset[0]))
    return RobotKinematics.from_urdf(_urdf(robot), list(solver.get_link_names()), offsets,
                                     root_link=solver.get_base_frame())


def _group_state(solver, model, q):
    return [float(q[model.joint_names.index(n)]) for n in solver.get_joint_names()]


def _errors(model, solver, q_group, goal):
    """(position m, rotation angle rad) of the tip's pose at ``q_group`` against ``goal`` (4, 4)."""
    q = np.array(model.joint_q, dtype=np.float64)
    for name, value in zip(solver.get_joint_names(), q_group):
        q[model.joint_names.index(name)] = value
    got = model.tcp_transforms(q[None])[0, 0]
    angle = Rotation.from_matrix(got[:3, :3].T @ goal[:3, :3]).magnitude()
    return float(np.linalg.norm(got[:3, 3] - goal[:3, 3])), float(angle)


# --------------------------------------------------------------------------- 1. precision
def test_moveit_front_end_defaults_to_moveit_s_precision():
    groups = load_kinematics_yaml("arm: {}\nspec_search: {direction_up_ik: {num_seeds: 0}}\n"
                                  "coarse: {direction_up_ik: {position_tol: 1.0e-3, frame_tol_rad: 1.0e-2}}")
    for name in ("arm", "spec_search"):
        assert groups[name].settings.position_tol == MOVEIT_SOLVER_DEFAULTS["position_tol"] == 1e-5
        assert groups[name].settings.frame_tol_rad == MOVEIT_SOLVER_DEFAULTS["frame_tol_rad"] == 1e-4
    assert (groups["coarse"].settings.position_tol, groups["coarse"].settings.frame_tol_rad) == (1e-3, 1e-2)
    assert GroupIK().get_group_name() == ""  # (a plugin without a config uses the same default)
    for robot in ROBOTS:  # every bundled kinematics.yaml solves to a tenth of MoveIt's tolerances
        for group in load_kinematics_yaml(CONFIG / f"{robot}_kinematics.yaml").values():
            assert group.settings.position_tol <= MOVEIT_POSITION_TOL / 10
            assert group.settings.frame_tol_rad <= MOVEIT_ORIENTATION_TOL / 10


@pytest.mark.parametrize("robot", ROBOTS)
def test_bridge_answers_lie_within_moveit_s_default_goal_tolerances(robot):
    """Random reachable poses, requested as srv_kinematics_plugin does from a random current state:
    every answer is within 1e-4 m and 1e-3 rad of the pose (the spec's 1e-3 m / 1e-2 rad left about
    half outside). The budget is generous: the property is precision, not speed."""
    solvers = _solvers(robot)
    rng = np.random.default_rng(29)
    for name, solver in solvers.items():
        if len(solver.get_link_names()) != 1:
            continue
        model = _model(solver, robot)
        qs = random_in_limits(model, rng, 24)
        for goal_q, start_q in zip(qs[:12], qs[12:]):
            goal = model.tcp_transforms(goal_q[None])[0, 0]
            names = solver.get_joint_names()
            ik = request(name, names, _group_state(solver, model, start_q), _pose(goal), solver.get_link_names()[0],
                         timeout=2.0)
            answer = solve_position_ik(solvers, ik)
            assert answer.error_code == MoveItErrorCode.SUCCESS, answer.message
            position, angle = _errors(model, solver, answer.positions, goal)
            assert position <= MOVEIT_POSITION_TOL and angle <= MOVEIT_ORIENTATION_TOL, (position, angle)


# --------------------------------------------------------------------------- 2. seeds at a limit
def test_seed_just_past_a_limit_is_clamped_one_clearly_outside_is_refused():
    solvers = _solvers("panda_like")
    solver = solvers["panda_arm"]
    lower, upper = solver.joint_limits()
    model = _model(solver, "panda_like")
    goal = model.tcp_transforms(((lower + upper) / 2 + 0.2)[None])[0, 0]
    names = solver.get_joint_names()
    for past in (0.0, 1e-7, 5e-4, 0.99e-3):  # at the limit, encoder noise, up to the tolerance
        seed = (lower + upper) / 2
        seed[0], seed[5] = upper[0] + past, lower[5] - past
        answer = solve_position_ik(solvers, request("panda_arm", names, seed, _pose(goal), "panda_hand", 2.0))
        assert answer.error_code == MoveItErrorCode.SUCCESS, (past, answer.message)
        assert np.all(np.array(answer.positions) >= lower) and np.all(np.array(answer.positions) <= upper)
        result = solver.search_position_ik(_pose(goal), seed, timeout=2.0)  # the plugin class too
        assert result.error_code == MoveItErrorCode.SUCCESS, (past, result.message)
    seed = (lower + upper) / 2
    seed[5] = lower[5] - 0.01
    answer = solve_position_ik(solvers, request("panda_arm", names, seed, _pose(goal), "panda_hand"))
    assert answer.error_code == MoveItErrorCode.INVALID_ROBOT_STATE
    assert "panda_joint6" in answer.message and "by more than 0.001" in answer.message
    assert solver.get_position_ik(_pose(goal), seed).error_code == MoveItErrorCode.INVALID_ROBOT_STATE


# --------------------------------------------------------------------------- 3. unreachable poses
@pytest.mark.parametrize("robot", ROBOTS)
def test_reach_bound_rejects_no_reachable_target(robot):
    """The bound holds for every TCP of every bundled robot (its end effectors with their TCP
    offsets, prismatic lift included) and every group of its kinematics.yaml, on random states,
    states at the limits' corners and the zero state; a group never answers a reachable pose
    by the bound."""
    rng = np.random.default_rng(3)
    spec = BUNDLED_ROBOTS[robot]
    model = RobotKinematics.from_urdf(
        _urdf(robot), [e.link for e in spec.end_effectors],
        [make_transform(rpy_to_matrix(e.tcp_rpy), e.tcp_xyz) for e in spec.end_effectors], root_link=spec.root_link)
    qs = random_in_limits(model, rng, 5000)
    lo = np.where(np.isfinite(model.lower_limits), model.lower_limits, -np.pi)
    hi = np.where(np.isfinite(model.upper_limits), model.upper_limits, np.pi)
    corners = np.where(rng.random((2000, model.num_dofs)) < 0.5, lo, hi)
    states = np.vstack([qs, corners, np.clip(0.0, lo, hi)[None]])
    distances = np.linalg.norm(model.tcp_transforms(states)[..., :3, 3], axis=-1)
    bounds = model.tcp_reach_bounds()
    assert np.all(np.isfinite(bounds)) and np.all(distances <= bounds)
    assert np.all(bounds < 2.5 * distances.max(axis=0))  # an honest bound, not a huge number
    for name, solver in _solvers(robot).items():
        group_model = _model(solver, robot)
        qs = random_in_limits(group_model, rng, 3000)
        reach = np.linalg.norm(group_model.tcp_transforms(qs)[..., :3, 3], axis=-1)
        assert np.all(reach <= solver.reach_bounds())
        if len(solver.get_link_names()) == 1:  # the farthest sampled poses are not answered by the bound
            for i in np.argsort(reach[:, 0])[-5:]:
                pose = _pose(group_model.tcp_transforms(qs[i][None])[0, 0])
                seed = _group_state(solver, group_model, qs[(i + 1) % len(qs)])
                result = solver.get_position_ik(pose, seed)
                assert "beyond the chain's reach" not in result.message


def test_reach_bound_adds_prismatic_travel_and_tcp_offset():
    urdf = """<robot name="slider">
      <link name="base"/><link name="carriage"/><link name="arm"/>
      <joint name="slide" type="prismatic"><parent link="base"/><child link="carriage"/>
        <origin xyz="0 0 0.5"/><axis xyz="1 0 0"/><limit lower="-0.3" upper="1.2" effort="1" velocity="1"/></joint>
      <joint name="turn" type="revolute"><parent link="carriage"/><child link="arm"/>
        <origin xyz="0.4 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
    </robot>"""
    model = RobotKinematics.from_urdf(urdf, ["arm"], [make_transform(np.eye(3), (0.0, 0.2, 0.0))])
    assert model.tcp_reach_bounds()[0] == pytest.approx(0.5 + 1.2 + 0.4 + 0.2)
    q = np.array([[1.2, 0.0]])  # slide out, the TCP offset along the slide: 1.2 + 0.4 + 0.2 along x
    assert np.linalg.norm(model.tcp_transforms(q)[0, 0, :3, 3]) <= model.tcp_reach_bounds()[0]


def test_unreachable_targets_answer_no_ik_solution_far_ones_at_once():
    solvers = _solvers("panda_like")
    solver = solvers["panda_arm"]
    lower, upper = solver.joint_limits()
    seed = (lower + upper) / 2
    names = solver.get_joint_names()
    bound = float(solver.reach_bounds()[0])
    far = Pose()
    far.position.x, far.orientation.w = 5.0, 1.0
    # Budget 2 s, answered far sooner: the bound check runs before the search (typically well under
    # a millisecond; 0.5 s only allows for a loaded machine).
    for _ in range(3):
        t0 = time.perf_counter()
        answer = solve_position_ik(solvers, request("panda_arm", names, seed, far, "panda_hand", timeout=2.0))
        elapsed = time.perf_counter() - t0
        assert answer.error_code == MoveItErrorCode.NO_IK_SOLUTION
        assert "beyond the chain's reach" in answer.message and elapsed < 0.5, (answer.message, elapsed)
    # Inside the bound but out of reach: the search runs out of budget and says NO_IK_SOLUTION too.
    near = Pose()
    near.position.x, near.orientation.w = 0.97 * bound, 1.0
    answer = solve_position_ik(solvers, request("panda_arm", names, seed, near, "panda_hand", timeout=0.05))
    assert answer.error_code == MoveItErrorCode.NO_IK_SOLUTION and "time budget ran out" in answer.message
    assert solver.search_position_ik(near, seed, timeout=0.05).error_code == MoveItErrorCode.NO_IK_SOLUTION


# --------------------------------------------------------------------------- 4. timeouts
def test_a_request_s_timeout_is_capped():
    """3600 s asked for an unreachable pose within the reach bound: max_timeout ends it (the 60 s
    only catches a hang; uncapped, the call would search for an hour)."""
    solvers = _solvers("panda_like")
    solver = solvers["panda_arm"]
    lower, upper = solver.joint_limits()
    near = Pose()
    near.position.x, near.orientation.w = 0.97 * float(solver.reach_bounds()[0]), 1.0
    t0 = time.perf_counter()
    answer = solve_position_ik(solvers, request("panda_arm", solver.get_joint_names(), (lower + upper) / 2, near,
                                                "panda_hand", timeout=3600.0), max_timeout=0.2)
    assert answer.error_code == MoveItErrorCode.NO_IK_SOLUTION
    assert time.perf_counter() - t0 < 60.0


@pytest.mark.parametrize("robot", ["panda_like", "ur5_like", "dual_arm_torso"])
def test_group_answers_equal_with_and_without_the_core_s_one_candidate_path(robot, monkeypatch):
    """A group's get_position_ik and search_position_ik (no consistency limits, no callback) go
    through the core's one-candidate path (kept arrays, the group's active joints; the ur5's
    group selects by limit_center): the same solutions and codes as the general path's, seeds
    near and far from the goal; the kept layouts exist afterwards."""
    from direction_up_ik.core import batch, one_target, search_api
    solver = next(s for s in _solvers(robot).values() if len(s.get_link_names()) == 1)
    model = _model(solver, robot)
    rng = np.random.default_rng(35)
    goals, others = random_in_limits(model, rng, 12), random_in_limits(model, rng, 12)
    answers = {}
    for path in (False, True):
        monkeypatch.setattr(batch, "ONE_CANDIDATE_PATH", path)
        monkeypatch.setattr(search_api, "ONE_TARGET_PATH", path)
        found = []
        for q, other in zip(goals, others):
            pose = _pose(model.tcp_transforms(q[None])[0, 0])
            goal = _group_state(solver, model, q)
            for seed in (np.asarray(goal) + 0.05, _group_state(solver, model, other)):
                seed = list(np.clip(seed, *solver.joint_limits()))
                for _ in range(2):  # a layout is built on its key's second request
                    near = solver.get_position_ik(pose, seed)
                    far = solver.search_position_ik(pose, seed, timeout=1.0)
                found.append((near.solution, int(near.error_code), far.solution, int(far.error_code)))
        answers[path] = found
    assert answers[True] == answers[False]
    assert sum(a[2] is not None for a in answers[True]) >= 20  # the searches solved (nearly) all
    kinds = sorted(type(layout.kernel).__name__ for layout in one_target._layouts(solver._robot).values() if layout)
    assert kinds == ["OneCandidate", "OneSolve"]
