"""Groups as MoveIt defines them (issue 29): chains from the SRDF, a request's ik_link_name on the
group's chain, and the rules of moveit_msgs/PositionIKRequest (message-shaped objects, no
moveit_msgs needed)."""

from types import SimpleNamespace

import numpy as np
import pytest

geometry_msgs = pytest.importorskip("geometry_msgs.msg", reason="needs geometry_msgs (ROS wheels)")
from geometry_msgs.msg import PoseStamped  # noqa: E402

from direction_up_ik.core import RobotKinematics  # noqa: E402
from direction_up_ik.core.rotations import make_transform, rpy_to_matrix  # noqa: E402
from direction_up_ik.groups import (KinematicsYamlError, MoveItErrorCode, load_kinematics_yaml,  # noqa: E402
                                    make_group_solvers, solve_position_ik)
from direction_up_ik.groups.srdf import SrdfError, srdf_groups  # noqa: E402
from direction_up_ik.robots import bundled_robot  # noqa: E402

from test_moveit_rules import _pose, request  # noqa: E402

# MoveIt's standard Panda setup: the arm's chain ends at the flange panda_link8, the hand is
# another group; the same arm as a joint list; a group of links only.
PANDA_SRDF = """<?xml version="1.0"?>
<robot name="panda_like">
  <group name="panda_arm"><chain base_link="panda_link0" tip_link="panda_link8"/></group>
  <group name="arm_by_joints">
    <joint name="panda_joint1"/><joint name="panda_joint2"/><joint name="panda_joint3"/>
    <joint name="panda_joint4"/><joint name="panda_joint5"/><joint name="panda_joint6"/>
    <joint name="panda_joint7"/><joint name="panda_joint8"/>
  </group>
  <group name="hand"><link name="panda_hand"/></group>
  <group name="broken"><joint name="panda_joint1"/><joint name="no_such_joint"/></group>
  <end_effector name="hand" parent_link="panda_link8" group="hand"/>
</robot>"""
DUAL_SRDF = """<robot name="dual_arm_torso">
  <group name="left_arm"><chain base_link="base_link" tip_link="left_hand_link"/></group>
  <group name="right_arm"><chain base_link="base_link" tip_link="right_hand_link"/></group>
  <group name="both_arms"><group name="left_arm"/><group name="right_arm"/></group>
</robot>"""
KINEMATICS = """
panda_arm: {kinematics_solver: srv_kinematics_plugin/SrvKinematicsPlugin, kinematics_solver_timeout: 0.005}
arm_by_joints:
  kinematics_solver_timeout: 0.005
  direction_up_ik: {tcp_offsets: {panda_link8: {xyz: [0, 0, 0.2], rpy: [0, 0, 0.5]}}}
"""
ARM = [f"panda_joint{i}" for i in range(1, 8)]


def _urdf(name):
    return bundled_robot(name).urdf_path().read_text()


def _fk(robot, links, q, offsets=None, root="panda_link0"):
    model = RobotKinematics.from_urdf(_urdf(robot), links, offsets, root_link=root)
    full = np.array(model.joint_q, dtype=np.float64)
    full[:len(q)] = q
    return model.tcp_transforms(full[None])[0]


def _mid(solver):
    lower, upper = solver.joint_limits()
    return (lower + upper) / 2


def test_srdf_groups_chains_joint_lists_and_subgroups():
    groups = srdf_groups(PANDA_SRDF, _urdf("panda_like"))
    assert (groups["panda_arm"].base, groups["panda_arm"].tips) == ("panda_link0", ("panda_link8",))
    assert (groups["arm_by_joints"].base, groups["arm_by_joints"].tips) == ("panda_link0", ("panda_link8",))
    assert "hand" not in groups  # links only: nothing to solve
    assert "no_such_joint" in groups["broken"].error
    dual = srdf_groups(DUAL_SRDF, _urdf("dual_arm_torso"))
    assert dual["both_arms"].base == "base_link"
    assert dual["both_arms"].tips == ("left_hand_link", "right_hand_link")
    with pytest.raises(SrdfError, match="invalid XML"):
        srdf_groups("<robot>", _urdf("panda_like"))
    with pytest.raises(SrdfError, match="not found"):
        srdf_groups("/nope.srdf", _urdf("panda_like"))


def test_group_from_the_srdf_serves_moveit_s_panda_setup_ending_at_panda_link8(tmp_path):
    """No base_frame/tip_frames in the YAML: base and tip come from the SRDF (text or a file), and
    a request for the chain's tip panda_link8 -- what srv_kinematics_plugin sends -- is solved."""
    path = tmp_path / "panda.srdf"
    path.write_text(PANDA_SRDF)
    for srdf in (PANDA_SRDF, str(path)):
        solvers = make_group_solvers(_urdf("panda_like"), load_kinematics_yaml(KINEMATICS), srdf)
        arm = solvers["panda_arm"]
        assert (arm.get_base_frame(), arm.get_link_names(), arm.get_joint_names()) == ("panda_link0",
                                                                                      ["panda_link8"], ARM)
    goal_q = _mid(arm) + 0.25
    goal = _fk("panda_like", ["panda_link8"], goal_q)[0]
    answer = solve_position_ik(solvers, request("panda_arm", ARM, _mid(arm), _pose(goal), "panda_link8", 2.0))
    assert answer.error_code == MoveItErrorCode.SUCCESS, answer.message
    assert answer.joint_names == ARM
    got = _fk("panda_like", ["panda_link8"], answer.positions)[0]
    assert np.linalg.norm(got[:3, 3] - goal[:3, 3]) < 1e-4


def test_a_link_of_the_chain_is_served_with_its_tcp_offset_if_configured():
    solvers = make_group_solvers(_urdf("panda_like"), load_kinematics_yaml(KINEMATICS), PANDA_SRDF)
    arm, by_joints = solvers["panda_arm"], solvers["arm_by_joints"]
    seed = _mid(arm)
    goal_q = seed + 0.2
    # panda_link6 is on panda_arm's chain: solved, all 7 joints answered, joint 7 keeps its seed.
    goal = _fk("panda_like", ["panda_link6"], goal_q)[0]
    answer = solve_position_ik(solvers, request("panda_arm", ARM, seed, _pose(goal), "panda_link6", 2.0))
    assert answer.error_code == MoveItErrorCode.SUCCESS, answer.message
    assert answer.joint_names == ARM and answer.positions[6] == pytest.approx(seed[6])
    assert np.linalg.norm(_fk("panda_like", ["panda_link6"], answer.positions)[0][:3, 3] - goal[:3, 3]) < 1e-4
    # arm_by_joints configures a TCP offset for panda_link8: the pose is that TCP's.
    offset = make_transform(rpy_to_matrix((0, 0, 0.5)), (0, 0, 0.2))
    goal = _fk("panda_like", ["panda_link8"], goal_q, [offset])[0]
    answer = solve_position_ik(solvers, request("arm_by_joints", ARM, seed, _pose(goal), "panda_link8", 2.0))
    assert answer.error_code == MoveItErrorCode.SUCCESS, answer.message
    got = _fk("panda_like", ["panda_link8"], answer.positions, [offset])[0]
    assert np.linalg.norm(got[:3, 3] - goal[:3, 3]) < 1e-4
    # not on the chain: the hand beyond the tip, a link of nothing
    for link in ("panda_hand", "nope"):
        answer = solve_position_ik(solvers, request("panda_arm", ARM, seed, _pose(goal), link))
        assert answer.error_code == MoveItErrorCode.INVALID_LINK_NAME and "panda_link8" in answer.message
        assert answer.joint_names == [] and answer.positions == []
    assert by_joints.get_link_names() == ["panda_link8"]


def test_groups_need_the_srdf_or_base_and_tips():
    yaml = load_kinematics_yaml(KINEMATICS)
    with pytest.raises(KinematicsYamlError, match="panda_arm.*no SRDF given"):
        make_group_solvers(_urdf("panda_like"), yaml)
    with pytest.raises(KinematicsYamlError, match="'hand'.*not a group of the SRDF"):
        make_group_solvers(_urdf("panda_like"), load_kinematics_yaml("hand: {}"), PANDA_SRDF)
    with pytest.raises(KinematicsYamlError, match="no_such_joint"):
        make_group_solvers(_urdf("panda_like"), load_kinematics_yaml("broken: {}"), PANDA_SRDF)
    # base_frame/tip_frames in the YAML win over the SRDF
    solvers = make_group_solvers(_urdf("panda_like"), load_kinematics_yaml(
        "panda_arm: {direction_up_ik: {base_frame: panda_link0, tip_frames: [panda_hand]}}"), PANDA_SRDF)
    assert solvers["panda_arm"].get_link_names() == ["panda_hand"]


# ----------------------------------------------------------------------- the message's rules
def _dual():
    solvers = make_group_solvers(_urdf("dual_arm_torso"), load_kinematics_yaml(
        "both_arms: {}\nleft_arm: {}\n"), DUAL_SRDF)
    both = solvers["both_arms"]
    names = both.get_joint_names()
    seed = np.clip(0.0, *both.joint_limits())
    seed[0] = 0.2
    for i, n in enumerate(names):
        if "elbow" in n:
            seed[i] = -1.3
    model = RobotKinematics.from_urdf(_urdf("dual_arm_torso"), ["left_hand_link", "right_hand_link"],
                                      root_link="base_link")
    full = np.array(model.joint_q, dtype=np.float64)
    for name, value in zip(names, seed + 0.15):
        full[model.joint_names.index(name)] = value
    goals = model.tcp_transforms(full[None])[0]
    return solvers, names, seed, [_pose(g) for g in goals]


def _vector_request(names, seed, poses, links, ik_link_name=""):
    ik = request("both_arms", names, seed, poses[0], ik_link_name, 2.0)
    ik.pose_stamped = PoseStamped()  # ignored: the vector has elements
    ik.pose_stamped_vector = []
    for pose in poses:
        stamped = PoseStamped()
        stamped.header.frame_id = "base_link"
        stamped.pose = pose
        ik.pose_stamped_vector.append(stamped)
    ik.ik_link_names = list(links)
    return ik


def test_all_three_request_forms_are_served():
    """srv_kinematics_plugin's single pose (pose_stamped + ik_link_name), pose_stamped_vector without
    ik_link_names (optional: the group's tips in order) and ik_link_names with a stale
    ik_link_name (ignored when ik_link_names has elements)."""
    solvers, names, seed, poses = _dual()
    left = solvers["left_arm"]
    single = request("left_arm", names, seed, poses[0], "left_hand_link", 2.0)
    without_names = _vector_request(names, seed, poses, [])
    stale = _vector_request(names, seed, poses[::-1], ["right_hand_link", "left_hand_link"],
                            ik_link_name="right_hand_link")
    for ik in (single, without_names, stale):
        answer = solve_position_ik(solvers, ik)
        assert answer.error_code == MoveItErrorCode.SUCCESS, answer.message
        group = solvers[ik.group_name]
        assert answer.joint_names == group.get_joint_names() and len(answer.positions) == len(answer.joint_names)
    assert len(left.get_joint_names()) == 9


def test_failure_answers_carry_neither_names_nor_positions():
    solvers, names, seed, poses = _dual()
    far = _pose(np.eye(4))
    far.position.x = 9.0
    cases = [request("nope", names, seed, poses[0], ""),                       # unknown group
             request("left_arm", names[3:], seed[3:], poses[0], ""),          # seed lacks joints
             request("left_arm", names, seed, far, "left_hand_link"),        # unreachable
             _vector_request(names, seed, poses, ["left_hand_link"])]        # 2 poses, 1 name
    codes = [MoveItErrorCode.INVALID_GROUP_NAME, MoveItErrorCode.INVALID_ROBOT_STATE,
             MoveItErrorCode.NO_IK_SOLUTION, MoveItErrorCode.INVALID_LINK_NAME]
    for ik, code in zip(cases, codes):
        answer = solve_position_ik(solvers, ik)
        assert answer.error_code == code and answer.message
        assert answer.joint_names == [] and answer.positions == []


def test_request_fields_as_moveit_msgs_declares_them():
    """The message-shaped requests above use PositionIKRequest's fields (moveit_msgs 2.6.0)."""
    ik = request("g", [], [], _pose(np.eye(4)), "")
    assert {"group_name", "robot_state", "constraints", "avoid_collisions", "ik_link_name", "pose_stamped",
            "ik_link_names", "pose_stamped_vector", "timeout"} == set(vars(ik))
    assert isinstance(ik.robot_state.joint_state, SimpleNamespace)
