"""Robot model: FK against Pinocchio, and loading of messy real-world URDFs."""

import numpy as np
import pytest

from direction_up_ik import InputValidationError, RobotKinematics, RobotModelError
from direction_up_ik.robots import BUNDLED_ROBOTS, bundled_robot, load_robot

from helpers import random_in_limits

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI 'pin', requirements/dev.txt) "
                                              "is the independent FK reference")


def _pinocchio_q(model, robot, q):
    """Our (D,) coordinates -> Pinocchio's configuration vector."""
    out = pin.neutral(model)
    for name, value in zip(robot.joint_names, q):
        joint = model.joints[model.getJointId(name)]
        if joint.nq == 2:  # continuous: (cos, sin)
            out[joint.idx_q:joint.idx_q + 2] = (np.cos(value), np.sin(value))
        else:
            out[joint.idx_q] = value
    return out


@pytest.mark.parametrize("name", sorted(BUNDLED_ROBOTS))
def test_fk_matches_pinocchio_on_random_configurations(name):
    spec = bundled_robot(name)
    robot = spec.load()
    model = pin.buildModelFromUrdf(str(spec.urdf_path()))
    data = model.createData()
    rng = np.random.default_rng(10)
    qs = random_in_limits(robot, rng, 120)
    ours = robot.tcp_transforms(qs)
    for i, q in enumerate(qs):
        pin.framesForwardKinematics(model, data, _pinocchio_q(model, robot, q))
        for e, ee in enumerate(spec.end_effectors):
            link = data.oMf[model.getFrameId(ee.link)].homogeneous
            expected = link @ robot.end_effector_local_xforms[e]
            np.testing.assert_allclose(ours[i, e], expected, rtol=0, atol=1e-9)
    # update_fk with float32 joint_q and link_world_xform agree with the batched FK.
    robot.joint_q[:] = qs[0]
    robot.update_fk()
    np.testing.assert_allclose(robot.tcp_world_xforms,
                               robot.tcp_transforms(robot.joint_q.astype(float)), atol=1e-12)
    pin.framesForwardKinematics(model, data, _pinocchio_q(model, robot, robot.joint_q.astype(float)))
    for link in robot.link_names:
        np.testing.assert_allclose(robot.link_world_xform(link),
                                   data.oMf[model.getFrameId(link)].homogeneous, atol=1e-9)


def test_bundled_robots_have_the_promised_structure():
    dual = load_robot("dual_arm_torso")
    assert dual.num_dofs >= 2 + 2 * 6
    assert dual.joint_names[:2] == ("torso_lift_joint", "waist_yaw_joint")
    assert np.isinf(dual.upper_limits).any(), "a continuous joint is expected"
    assert len(dual.link_names) > dual.num_dofs + 3, "several fixed joints are expected"
    assert load_robot("panda_like").num_dofs == 7
    ur5 = load_robot("ur5_like")
    assert ur5.num_dofs == 6 and np.isinf(ur5.upper_limits[-1])


def test_joint_q_is_float32_writable_in_place_and_root_xform_applies(panda):
    robot = load_robot("panda_like", root_world_xform=np.array(
        [[0, -1, 0, 1.0], [1, 0, 0, 2.0], [0, 0, 1, 3.0], [0, 0, 0, 1]]))
    assert robot.joint_q.dtype == np.float32 and robot.joint_q.shape == (7,)
    robot.joint_q[3] = -1.0
    robot.update_fk()
    plain = panda.tcp_transforms(robot.joint_q.astype(float))[0]
    np.testing.assert_allclose(robot.tcp_world_xforms[0][:3, 3],
                               robot.root_world_xform[:3, :3] @ plain[:3, 3] + [1, 2, 3], atol=1e-12)
    robot.joint_q = np.zeros(7)
    assert robot.joint_q.dtype == np.float32 and robot.joint_q[3] == 0.0
    with pytest.raises(InputValidationError, match=r"joint_q: expected shape \(7,\)"):
        robot.joint_q = np.zeros(6)
    assert robot.dof_id("panda_joint4") == 3
    with pytest.raises(InputValidationError, match="unknown joint 'nope'"):
        robot.dof_id("nope")
    with pytest.raises(InputValidationError, match="unknown link 'nope'"):
        robot.link_world_xform("nope")


MESSY_URDF = """<?xml version="1.0" encoding="utf-8"?>
<robot name="messy" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <material name="grey"><color rgba="0.5 0.5 0.5 1"/></material>
  <link name="base">
    <visual><geometry><mesh filename="package://does_not_exist/base.dae"/></geometry></visual>
    <collision><geometry><mesh filename="file:///nowhere/base.stl" scale="1 1 1"/></geometry></collision>
    <inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>
  </link>
  <link name="l1"/><link name="l2"/><link name="tool"/>
  <link name="finger_a"/><link name="finger_b"/><link name="sensor"/>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="l1"/><origin xyz="0 0 0.5" rpy="0 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="10" velocity="1"/>
    <safety_controller k_velocity="1" k_position="10" soft_lower_limit="-1.5" soft_upper_limit="1.25"/>
    <dynamics damping="0.1"/>
  </joint>
  <joint name="j2" type="prismatic">
    <parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0" rpy="0 1.5707963267948966 0"/>
    <axis xyz="0 0 2"/><limit lower="0" upper="0.2" effort="10" velocity="1"/>
    <safety_controller k_velocity="1"/>
  </joint>
  <joint name="tool_fixed" type="fixed"><parent link="l2"/><child link="tool"/>
    <origin xyz="0 0 0.1"/></joint>
  <joint name="finger_a_joint" type="prismatic">
    <parent link="tool"/><child link="finger_a"/><axis xyz="0 1 0"/>
    <limit lower="0" upper="0.04" effort="1" velocity="1"/>
  </joint>
  <joint name="finger_b_joint" type="prismatic">
    <parent link="tool"/><child link="finger_b"/><axis xyz="0 -1 0"/>
    <limit lower="0" upper="0.04" effort="1" velocity="1"/>
    <mimic joint="finger_a_joint" multiplier="2.0" offset="0.01"/>
  </joint>
  <joint name="sensor_joint" type="continuous">
    <parent link="base"/><child link="sensor"/><origin xyz="0 0.2 0"/><axis xyz="1 0 0"/>
  </joint>
  <transmission name="t1">
    <type>transmission_interface/SimpleTransmission</type>
    <joint name="j1"><hardwareInterface>hardware_interface/PositionJointInterface</hardwareInterface></joint>
    <actuator name="m1"><mechanicalReduction>fifty</mechanicalReduction></actuator>
  </transmission>
  <gazebo reference="l1"><material>Gazebo/Grey</material></gazebo>
  <ros2_control name="sys" type="system"><hardware><plugin>mock_components/GenericSystem</plugin></hardware>
    <joint name="j1"><command_interface name="position"/></joint></ros2_control>
  <some_vendor_tag foo="bar"><nested/></some_vendor_tag>
</robot>
"""


def test_messy_urdf_loads_and_keeps_only_kinematics(tmp_path):
    robot = RobotKinematics.from_urdf(MESSY_URDF, ["tool", "finger_b"])
    # mimic joint is not a coordinate; document order otherwise
    assert robot.joint_names == ("j1", "j2", "finger_a_joint", "sensor_joint")
    assert robot.mimic_joints == {"finger_b_joint": ("finger_a_joint", 2.0, 0.01)}
    # safety_controller narrows <limit>; a controller without soft bounds changes nothing
    np.testing.assert_allclose(robot.lower_limits[:3], [-1.5, 0.0, 0.0])
    np.testing.assert_allclose(robot.upper_limits[:3], [1.25, 0.2, 0.04])
    assert np.isinf(robot.lower_limits[3]) and np.isinf(robot.upper_limits[3])
    # Analytic FK: j1 about z at height 0.5, then 0.3 along x, then pitch +90 deg: tool axis
    # z -> world x after yaw; prismatic along that axis, tool 0.1 further.
    q = np.array([0.5, 0.1, 0.02, 0.0])
    tcp = robot.tcp_transforms(q)
    c, s = np.cos(0.5), np.sin(0.5)
    reach = 0.3 + 0.1 + 0.1
    np.testing.assert_allclose(tcp[0, :3, 3], [reach * c, reach * s, 0.5], atol=1e-12)
    # finger_b = mimic: 2 * 0.02 + 0.01 = 0.05 along the tool's -y
    tool_y = tcp[0, :3, 1]
    np.testing.assert_allclose(tcp[1, :3, 3], tcp[0, :3, 3] - 0.05 * tool_y, atol=1e-12)
    # the same from a file, encoding declaration and all
    path = tmp_path / "messy.urdf"
    path.write_bytes(MESSY_URDF.encode("utf-8"))
    from_file = RobotKinematics.from_urdf(str(path), ["tool"])
    np.testing.assert_allclose(from_file.tcp_transforms(q)[0], tcp[0], atol=1e-15)


def test_root_link_selects_a_sub_tree():
    robot = RobotKinematics.from_urdf(MESSY_URDF, ["tool"], root_link="l1")
    assert robot.joint_names == ("j2", "finger_a_joint")
    assert "base" not in robot.link_names and "sensor" not in robot.link_names
    with pytest.raises(RobotModelError, match="end_effector_links\\[0\\]: unknown link 'sensor'"):
        RobotKinematics.from_urdf(MESSY_URDF, ["sensor"], root_link="l1")


def _urdf(joints: str, links=("a", "b")) -> str:
    return ("<robot name='r'>" + "".join(f"<link name='{l}'/>" for l in links) + joints + "</robot>")


@pytest.mark.parametrize("text,pattern", [
    (_urdf("<joint name='free' type='floating'><parent link='a'/><child link='b'/></joint>"),
     "joint 'free' is of type 'floating'"),
    (_urdf("<joint name='pl' type='planar'><parent link='a'/><child link='b'/><axis xyz='0 0 1'/></joint>"),
     "joint 'pl' is of type 'planar'"),
    (_urdf("<joint name='j' type='revolute'><parent link='a'/><child link='b'/></joint>"),
     "joint 'j' \\(revolute\\) has no <limit>"),
    (_urdf("<joint name='j' type='revolute'><parent link='a'/><child link='c'/>"
           "<limit lower='0' upper='1' effort='1' velocity='1'/></joint>"),
     "joint 'j' names child link 'c', which is not defined"),
    (_urdf("<joint name='j' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 0 0'/>"
           "<limit lower='0' upper='1' effort='1' velocity='1'/></joint>"), "zero-length axis"),
    (_urdf("<joint name='j' type='revolute'><parent link='a'/><child link='b'/>"
           "<limit lower='1' upper='0' effort='1' velocity='1'/></joint>"), "invalid limits"),
    (_urdf("<joint name='j' type='revolute'><parent link='a'/><child link='b'/><mimic joint='zz'/>"
           "<limit lower='0' upper='1' effort='1' velocity='1'/></joint>"), "mimics 'zz'"),
    ("<robot name='r'><link name='a'/>", "not well-formed XML"),
    ("<model/>", "root element must be <robot>"),
    (_urdf(""), "expected exactly one root link"),
    ("/no/such/file.urdf", "cannot read file '/no/such/file.urdf'"),
])
def test_unusable_urdfs_raise_clear_model_errors(text, pattern):
    with pytest.raises(RobotModelError, match=pattern):
        RobotKinematics.from_urdf(text, ["b"])


def test_end_effector_configuration_errors():
    text = _urdf("<joint name='j' type='continuous'><parent link='a'/><child link='b'/></joint>")
    with pytest.raises(RobotModelError, match="end_effector_links\\[0\\]: unknown link 'x'.*links: a, b"):
        RobotKinematics.from_urdf(text, ["x"])
    with pytest.raises(RobotModelError, match="expected 1 transforms"):
        RobotKinematics.from_urdf(text, ["b"], [np.eye(4), np.eye(4)])
    bad = np.eye(4)
    bad[0, 0] = 2.0
    with pytest.raises(RobotModelError, match="end_effector_local_xforms\\[0\\]: rotation part"):
        RobotKinematics.from_urdf(text, ["b"], [bad])
    with pytest.raises(RobotModelError, match="at least one end effector"):
        RobotKinematics.from_urdf(text, [])


@pytest.mark.parametrize("name", sorted(BUNDLED_ROBOTS))
def test_perturbed_tcp_poses_equal_full_fk_at_the_perturbed_states(name):
    robot = load_robot(name)
    rng = np.random.default_rng(12)
    q = random_in_limits(robot, rng, 25)
    dofs = np.arange(robot.num_dofs)
    rot, pos, rot_p, pos_p = robot.joint_perturbed_tcp_poses(q, dofs, 1e-4)
    shifted = np.repeat(q[:, None, :], len(dofs), axis=1)
    shifted[:, dofs, dofs] += 1e-4
    full_r, full_p = robot.tcp_poses(shifted)
    np.testing.assert_allclose(rot_p, full_r, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pos_p, full_p, rtol=0, atol=1e-12)
    base_r, base_p = robot.tcp_poses(q)
    np.testing.assert_allclose(rot, base_r, atol=1e-15)
    np.testing.assert_allclose(pos, base_p, atol=1e-15)


def test_perturbed_tcp_poses_with_mimic_joints_use_full_fk():
    robot = RobotKinematics.from_urdf(MESSY_URDF, ["tool", "finger_b"])
    q = np.array([[0.3, 0.05, 0.01, 0.2]])
    _, _, rot_p, pos_p = robot.joint_perturbed_tcp_poses(q, [0, 1, 2, 3], 1e-4)
    shifted = np.repeat(q[:, None, :], 4, axis=1)
    shifted[:, np.arange(4), np.arange(4)] += 1e-4
    full_r, full_p = robot.tcp_poses(shifted)
    np.testing.assert_allclose(pos_p, full_p, atol=1e-15)
    # finger_a's coordinate moves finger_b through the mimic (x2): 2e-4 along -y of the tool
    np.testing.assert_allclose(np.linalg.norm(pos_p[0, 2, 1] - robot.tcp_poses(q)[1][0, 1]), 2e-4, rtol=1e-9)
    assert robot.dof_moves_tcp[2].tolist() == [False, True]
    assert robot.dof_moves_tcp[3].tolist() == [False, False]
