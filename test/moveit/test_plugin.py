"""The MoveIt-style plugin class on the bundled robots (kinematics.yaml and the GetPositionIK
conversion: test/groups/)."""

import pathlib
import time

import numpy as np
import pytest

geometry_msgs = pytest.importorskip("geometry_msgs.msg", reason="needs geometry_msgs (ROS wheels)")
from geometry_msgs.msg import Pose  # noqa: E402

from direction_up_ik.moveit import DirectionUpKinematicsPlugin, MoveItErrorCode, load_kinematics_yaml  # noqa: E402
from direction_up_ik.core import search, seeds  # noqa: E402
from direction_up_ik.robots import bundled_robot  # noqa: E402
from helpers import count_collision_checks  # noqa: E402

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config"


def _urdf(name):
    return bundled_robot(name).urdf_path().read_text()


@pytest.fixture
def panda_plugin():
    groups = load_kinematics_yaml(CONFIG / "panda_like_kinematics.yaml")
    plugin = DirectionUpKinematicsPlugin(groups["panda_arm"])
    assert plugin.initialize(_urdf("panda_like"), "panda_arm", "panda_link0", ["panda_hand"], 0.005)
    return plugin


def _mid(plugin):
    lo = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
    hi = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
    return (lo + hi) / 2, lo, hi


def test_pose_round_trip_and_group_queries(panda_plugin):
    mid, lo, hi = _mid(panda_plugin)
    assert panda_plugin.get_joint_names() == [f"panda_joint{i}" for i in range(1, 8)]
    assert panda_plugin.get_link_names() == ["panda_hand"]
    assert panda_plugin.supports_group(panda_plugin.get_joint_names()) == (True, "")
    ok, why = panda_plugin.supports_group(["nope"])
    assert not ok and "nope" in why
    rng = np.random.default_rng(4)
    for _ in range(10):
        q = rng.uniform(lo, hi)
        fk = panda_plugin.get_position_fk(["panda_hand"], q)
        assert fk.error_code == MoveItErrorCode.SUCCESS
        result = panda_plugin.search_position_ik(fk.poses[0], mid, timeout=0.5)
        assert result.error_code == MoveItErrorCode.SUCCESS, result.message
        back = panda_plugin.get_position_fk(["panda_hand"], result.solution).poses[0]
        p = np.array([back.position.x, back.position.y, back.position.z])
        goal = np.array([fk.poses[0].position.x, fk.poses[0].position.y, fk.poses[0].position.z])
        assert np.linalg.norm(p - goal) < 1e-3
        qa = np.array([back.orientation.x, back.orientation.y, back.orientation.z, back.orientation.w])
        qb = np.array([fk.poses[0].orientation.x, fk.poses[0].orientation.y, fk.poses[0].orientation.z,
                       fk.poses[0].orientation.w])
        assert 2 * np.arccos(min(1.0, abs(qa @ qb))) < 2e-2  # both axes within 0.01 rad
        assert np.all(np.array(result.solution) >= lo) and np.all(np.array(result.solution) <= hi)


def test_unreachable_pose_gives_error_codes_not_exceptions(panda_plugin):
    mid, _, _ = _mid(panda_plugin)
    far = Pose()
    far.position.x, far.orientation.w = 3.0, 1.0
    assert panda_plugin.get_position_ik(far, mid).error_code == MoveItErrorCode.NO_IK_SOLUTION
    timed = panda_plugin.search_position_ik(_within_reach_unreachable(panda_plugin), mid, timeout=0.05)
    assert timed.error_code == MoveItErrorCode.NO_IK_SOLUTION and timed.solution is None
    bad = Pose()
    bad.position.x = float("nan")
    bad.orientation.w = 1.0
    assert panda_plugin.get_position_ik(bad, mid).error_code == MoveItErrorCode.INVALID_GOAL_CONSTRAINTS
    assert panda_plugin.get_position_ik(far, mid[:3]).error_code == MoveItErrorCode.INVALID_ROBOT_STATE
    assert panda_plugin.get_position_ik([far, far], mid).error_code == MoveItErrorCode.INVALID_GOAL_CONSTRAINTS
    assert panda_plugin.get_position_fk(["nope"], mid).error_code == MoveItErrorCode.INVALID_LINK_NAME
    assert DirectionUpKinematicsPlugin().get_position_ik(far, mid).error_code == MoveItErrorCode.FAILURE


def _within_reach_unreachable(plugin):
    """A pose out of reach that the reach bound does not rule out (0.97 x the bound): searched."""
    pose = Pose()
    pose.position.x, pose.orientation.w = 0.97 * float(plugin.reach_bounds()[0]), 1.0
    return pose


@pytest.mark.parametrize("budget", [0.05, 0.2])
def test_timeout_is_honoured(panda_plugin, budget):
    mid, _, _ = _mid(panda_plugin)
    far = _within_reach_unreachable(panda_plugin)
    panda_plugin.search_position_ik(far, mid, timeout=0.01)  # warm-up
    # Behaviour, not speed (issue 28): every call searches until its timeout, then stops and
    # says NO_IK_SOLUTION (as MoveIt's own IK does). The pose is unreachable and the plugin's search has no round limit, so a
    # search that missed its deadline would not stop at all; it stops at its first check after
    # the deadline (a round: milliseconds). The 0.5 s margin only absorbs a loaded machine's
    # scheduling (load average 5 on 2 cores); how close to the budget a call ends is a figure
    # for the benchmarks.
    for _ in range(3):
        t0 = time.perf_counter()
        result = panda_plugin.search_position_ik(far, mid, timeout=budget)
        elapsed = time.perf_counter() - t0
        assert result.error_code == MoveItErrorCode.NO_IK_SOLUTION
        assert 0.8 * budget <= elapsed < budget + 0.5, f"{elapsed} s for a {budget} s budget"


def test_consistency_limits_are_respected(panda_plugin):
    mid, lo, hi = _mid(panda_plugin)
    target_q = mid + 0.3
    pose = panda_plugin.get_position_fk(["panda_hand"], target_q).poses[0]
    limits = np.full(7, 0.35)
    result = panda_plugin.search_position_ik(pose, mid, timeout=0.5, consistency_limits=limits)
    assert result.error_code == MoveItErrorCode.SUCCESS
    assert np.all(np.abs(np.array(result.solution) - mid) <= limits + 1e-6)
    tight = panda_plugin.search_position_ik(pose, mid, timeout=0.1, consistency_limits=np.full(7, 0.05))
    assert tight.error_code == MoveItErrorCode.NO_IK_SOLUTION


def test_rejecting_callback_makes_the_search_continue(panda_plugin):
    mid, _, _ = _mid(panda_plugin)
    pose = panda_plugin.get_position_fk(["panda_hand"], mid + 0.2).poses[0]
    calls = []

    def callback(poses, solution):
        calls.append(solution)
        return MoveItErrorCode.SUCCESS if len(calls) >= 3 else MoveItErrorCode.NO_IK_SOLUTION
    result = panda_plugin.search_position_ik(pose, mid, timeout=2.0, solution_callback=callback)
    assert result.error_code == MoveItErrorCode.SUCCESS
    assert len(calls) >= 3
    assert any(result.solution == pytest.approx(c) for c in calls[2:])  # an accepted one
    assert all(result.solution != pytest.approx(c) for c in calls[:2])  # never a rejected one
    never = panda_plugin.search_position_ik(pose, mid, timeout=0.1, solution_callback=lambda p, s: False)
    assert never.error_code == MoveItErrorCode.NO_IK_SOLUTION





def test_initialize_builds_the_seed_library_and_searches_reuse_it(monkeypatch):
    """MoveIt initializes once: the kernel and the group's seed library are ready before the
    first query (else its 5 ms would go to loading them), and queries reuse the library."""
    builds, lookups = [], []
    build = seeds.SeedLibrary.__init__
    monkeypatch.setattr(seeds.SeedLibrary, "__init__", lambda self, *a, **k: builds.append(1) or build(self, *a, **k))
    lookup = search.library_for
    monkeypatch.setattr(search, "library_for", lambda problem: lookups.append(1) or lookup(problem))
    groups = load_kinematics_yaml(CONFIG / "panda_like_kinematics.yaml")
    plugin = DirectionUpKinematicsPlugin(groups["panda_arm"])
    assert plugin.initialize(_urdf("panda_like"), "panda_arm", "panda_link0", ["panda_hand"], 0.005)
    assert len(builds) == 2  # at initialize, for the group's joints and limits: uniform, near the limits
    mid, lo, hi = _mid(plugin)
    rng = np.random.default_rng(8)
    for _ in range(12):  # from mid-range, about one target in three needs seeds
        pose = plugin.get_position_fk(["panda_hand"], rng.uniform(lo, hi)).poses[0]
        assert plugin.search_position_ik(pose, mid, timeout=0.5).error_code == MoveItErrorCode.SUCCESS
    assert lookups and len(builds) == 2


def test_consistency_limited_searches_draw_seeds_in_their_box(panda_plugin, monkeypatch):
    """Consistency limits narrow the bounds around the seed: the seeded rounds draw uniform
    starts in that box rather than building a seed library for every query's box."""
    draws, lookups = [], []
    draw = search.random_starts
    monkeypatch.setattr(search, "random_starts", lambda *a, **k: draws.append(1) or draw(*a, **k))
    lookup = search.library_for
    monkeypatch.setattr(search, "library_for", lambda problem: lookups.append(1) or lookup(problem))
    _, lo, hi = _mid(panda_plugin)
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = rng.uniform(lo + 0.9, hi - 0.9)
        pose = panda_plugin.get_position_fk(["panda_hand"], q).poses[0]
        seed = q + rng.choice([-0.9, 0.9], 7)  # a corner of the box: the local solve often fails
        result = panda_plugin.search_position_ik(pose, seed, timeout=0.5, consistency_limits=np.full(7, 1.0))
        assert result.error_code == MoveItErrorCode.SUCCESS, result.message
        assert np.all(np.abs(np.array(result.solution) - seed) <= 1.0 + 1e-6)
    assert draws and not lookups


def _left_arm_with_collisions():
    """(plugin, seed, pose): the dual arm's left arm with avoid_collisions, a seed with the elbow
    bent and the hand's pose after its shoulder pitch moves 0.3 rad from it (collision-free)."""
    from direction_up_ik.groups.kinematics_yaml import group_config

    config = group_config("left_arm", {"kinematics_solver_timeout": 0.5, "direction_up_ik": {
        "avoid_collisions": True, "num_seeds": 4, "random_seed": 0}})
    plugin = DirectionUpKinematicsPlugin(config)
    assert plugin.initialize(_urdf("dual_arm_torso"), "left_arm", "base_link", ["left_hand_link"]), plugin.error
    names = plugin.get_joint_names()
    robot = plugin.collision_scene.robot
    seed = np.clip(np.zeros(len(names)), robot.lower_limits[plugin._active], robot.upper_limits[plugin._active])
    seed[names.index("left_elbow_joint")] = -1.3
    goal = seed.copy()
    goal[names.index("left_shoulder_pitch_joint")] -= 0.3
    return plugin, seed, plugin.get_position_fk(["left_hand_link"], goal).poses[0]


def test_a_collision_checked_answer_is_checked_once(monkeypatch):
    """With avoid_collisions, a search's answer comes with the search's own collision report
    (``SearchResult.collision_report``): one check per query, none after the search."""
    plugin, seed, pose = _left_arm_with_collisions()
    checks = count_collision_checks(monkeypatch)
    assert plugin.search_position_ik([pose], seed, timeout=0.5).error_code == MoveItErrorCode.SUCCESS
    assert checks == [1]  # the search's check of its one candidate


def test_avoid_collisions_from_kinematics_yaml_and_per_query():
    """kinematics.yaml avoid_collisions: the plugin builds the group's collision model at
    initialize and keeps only collision-free answers; a query may turn the check off; joints outside
    the group stand where set_joint_state puts them (clamped into their limits)."""
    from direction_up_ik import Obstacle
    from direction_up_ik.core.rotations import make_transform

    plugin, seed, pose = _left_arm_with_collisions()
    assert plugin.collision_scene is not None and "left_hand_link" in plugin.collision_scene.link_bodies
    robot = plugin.collision_scene.robot
    assert plugin.search_position_ik([pose], seed, timeout=0.5).error_code == MoveItErrorCode.SUCCESS
    hand = np.array([pose.position.x, pose.position.y, pose.position.z])
    plugin.set_obstacles([Obstacle.box((0.3, 0.3, 0.3), make_transform(None, hand), name="crate")])
    blocked = plugin.search_position_ik([pose], seed, timeout=0.5)
    assert blocked.error_code == MoveItErrorCode.NO_IK_SOLUTION and "collision" in blocked.message
    assert plugin.get_position_ik([pose], seed).error_code == MoveItErrorCode.NO_IK_SOLUTION
    free = plugin.search_position_ik([pose], seed, timeout=0.5, avoid_collisions=False)
    assert free.error_code == MoveItErrorCode.SUCCESS
    right = robot.joint_names.index("right_elbow_joint")
    plugin.set_joint_state({"right_elbow_joint": -100.0, "left_elbow_joint": 0.5})
    assert robot.joint_q[right] == pytest.approx(robot.lower_limits[right], abs=1e-6)  # clamped
    assert robot.joint_q[robot.joint_names.index("left_elbow_joint")] != pytest.approx(0.5)  # a group joint
