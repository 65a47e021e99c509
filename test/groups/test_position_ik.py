"""The GetPositionIK conversion (groups.position_ik) on message-shaped requests, as the node
serves it to MoveIt's srv_kinematics_plugin."""

import pathlib
from types import SimpleNamespace

import numpy as np
import pytest

geometry_msgs = pytest.importorskip("geometry_msgs.msg", reason="needs geometry_msgs (ROS wheels)")
from geometry_msgs.msg import PoseStamped  # noqa: E402

from direction_up_ik.groups import MoveItErrorCode, load_kinematics_yaml, solve_position_ik  # noqa: E402
from direction_up_ik.groups import make_group_solvers as make_plugins  # noqa: E402
from direction_up_ik.moveit import DirectionUpKinematicsPlugin  # noqa: E402
from direction_up_ik.robots import bundled_robot  # noqa: E402

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config"


def _urdf(name):
    return bundled_robot(name).urdf_path().read_text()


def _fk(solver, robot, links, joints):
    """geometry_msgs/Pose of ``links`` at the group's ``joints`` (bundled ``robot``), by the MoveIt
    plugin's FK."""
    plugin = DirectionUpKinematicsPlugin(solver.config)
    assert plugin.initialize(_urdf(robot), solver.get_group_name(), solver.get_base_frame(),
                             solver.get_link_names())
    return plugin.get_position_fk(links, joints)


def _ik_request(group, names, positions, poses, links, timeout=0.5, frame=""):
    stamped = []
    for pose in poses:
        ps = PoseStamped()
        ps.header.frame_id = frame
        ps.pose = pose
        stamped.append(ps)
    return SimpleNamespace(
        group_name=group, robot_state=SimpleNamespace(joint_state=SimpleNamespace(name=names, position=positions)),
        pose_stamped=stamped[0] if len(stamped) == 1 else PoseStamped(),
        pose_stamped_vector=stamped if len(stamped) > 1 else [], ik_link_name=links[0] if len(links) == 1 else "",
        ik_link_names=links if len(links) > 1 else [], timeout=SimpleNamespace(sec=int(timeout),
                                                                                nanosec=int((timeout % 1) * 1e9)))


def test_bridge_serves_single_and_multi_tip_requests():
    groups = load_kinematics_yaml(CONFIG / "dual_arm_torso_kinematics.yaml")
    plugins = make_plugins(_urdf("dual_arm_torso"), groups)
    both = plugins["both_arms"]
    names = both.get_joint_names()
    assert names[:2] == ["torso_lift_joint", "waist_yaw_joint"] and len(names) == 16
    seed = np.zeros(16)
    seed[0] = 0.2
    for i, n in enumerate(names):
        if "elbow" in n:
            seed[i] = -1.3
    goal = seed + 0.15
    poses = _fk(both, "dual_arm_torso", ["left_hand_link", "right_hand_link"], goal).poses
    # the tips may come in either order in the request
    answer = solve_position_ik(plugins, _ik_request("both_arms", names, seed.tolist(), poses[::-1],
                                                    ["right_hand_link", "left_hand_link"]))
    assert answer.error_code == MoveItErrorCode.SUCCESS, answer.message
    assert answer.joint_names == names and len(answer.positions) == 16
    back = _fk(both, "dual_arm_torso", ["left_hand_link", "right_hand_link"], answer.positions).poses
    for got, want in zip(back, poses):
        assert abs(got.position.x - want.position.x) + abs(got.position.y - want.position.y) < 2e-3
    left = plugins["left_arm"]
    left_names = left.get_joint_names()
    assert len(left_names) == 9 and not any(n.startswith("right_") for n in left_names)
    full_state = dict(zip(names, seed))
    answer = solve_position_ik(plugins, _ik_request("left_arm", names, seed.tolist(), poses[:1], ["left_hand_link"]))
    assert answer.error_code == MoveItErrorCode.SUCCESS and len(answer.positions) == 9
    assert full_state  # the seed came from a full robot state with extra joints


@pytest.mark.parametrize("change,code", [
    (dict(group="nope"), MoveItErrorCode.INVALID_GROUP_NAME),
    (dict(names_cut=3), MoveItErrorCode.INVALID_ROBOT_STATE),
    (dict(links=["no_such_link"]), MoveItErrorCode.INVALID_LINK_NAME),
    (dict(frame="world"), -21),
])
def test_bridge_error_codes(change, code):
    plugins = make_plugins(_urdf("ur5_like"), load_kinematics_yaml(CONFIG / "ur5_like_kinematics.yaml"))
    plugin = plugins["manipulator"]
    names = plugin.get_joint_names()
    seed = [0.1, -1.0, 1.0, -1.0, 0.5, 0.0]
    pose = _fk(plugin, "ur5_like", ["tool0"], seed).poses[0]
    request = _ik_request(change.get("group", "manipulator"), names[change.get("names_cut", 0):],
                          seed[change.get("names_cut", 0):], [pose], change.get("links", ["tool0"]),
                          frame=change.get("frame", "base_link"))
    answer = solve_position_ik(plugins, request)
    assert answer.error_code == code and answer.message


def test_group_ik_takes_a_robot_description_with_a_byte_order_mark():
    """Issue 23 item 7 for the planning groups (the MoveIt bridge): a BOM before the XML."""
    from direction_up_ik.groups.group_ik import GroupIK

    text = _urdf("panda_like")
    solver = GroupIK()
    assert solver.initialize("\ufeff" + text, "panda_arm", "panda_link0", ["panda_hand"]), solver.error
