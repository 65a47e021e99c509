"""Helpers shared by the tests (importable as ``helpers``; see pythonpath in setup.cfg)."""

from __future__ import annotations

import numpy as np

from direction_up_ik import DirectionUpTarget
from direction_up_ik.core.kinematics import mid_range, random_in_limits  # noqa: F401 (re-exported)
from direction_up_ik.core.targets import full_pose_candidates

#: (n, D) random in-limit joint states (the benchmarks' name for ``random_in_limits``).
random_configurations = random_in_limits


def reachable_candidates(robot, configurations: np.ndarray) -> list:
    """One full-pose candidate (every EE, TCP convention) per configuration (n, D): the poses
    the TCPs reach there, so every candidate is reachable."""
    return full_pose_candidates(robot.tcp_transforms(configurations))


def targets_at(robot, q: np.ndarray, ee_ids=None, tcp_convention: bool = True):
    """Full-pose targets that the TCPs reach at joint state ``q`` (D,): one candidate."""
    tcp = robot.tcp_transforms(q)
    ee_ids = range(robot.num_end_effectors) if ee_ids is None else ee_ids
    out = []
    for e in ee_ids:
        rot, pos = tcp[e, :3, :3], tcp[e, :3, 3]
        if tcp_convention:
            out.append(DirectionUpTarget(e, pos, rot[:, 2], rot[:, 1], None, None))
        else:
            out.append(DirectionUpTarget(e, pos, rot[:, 0], rot[:, 1]))
    return tuple(out)


def relay_never_started(alone, group: np.ndarray, quota: np.ndarray) -> np.ndarray:
    """(B,) bool: the rows a relay of starts (``solve_problem(..., relay=(group, quota))``)
    never runs, given ``alone``, every row solved on its own. A run's starts are tried in
    order; a start within tolerance as given counts from the outset; once quota of the run
    converged, its later starts never start. Every other row is its solve alone."""
    as_given = (alone.iterations == 0) & (alone.success == 1)
    never = np.zeros(len(group), dtype=bool)
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        won = int(np.sum(as_given[rows]))
        for i in rows:
            if as_given[i]:
                continue
            if won >= quota[i]:
                never[i] = True
            else:
                won += int(alone.success[i])
    return never


# ----------------------------------------------------------------------------- a xacro robot
#: xacro sample (write_xacro_robot): a planar chain of ``dof`` revolute joints about +Z, each link ``link_length`` m along +X,
#: made by a recursive macro from the package "test_arm_description".
XACRO_MACRO = """<?xml version="1.0"?>
<robot xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:macro name="segment" params="prefix index count length">
    <link name="${prefix}link_${index}"/>
    <joint name="${prefix}joint_${index}" type="revolute">
      <parent link="${prefix}link_${index - 1}"/>
      <child link="${prefix}link_${index}"/>
      <origin xyz="${length if index > 1 else 0} 0 0" rpy="0 0 0"/>
      <axis xyz="0 0 1"/>
      <limit lower="${-joint_range}" upper="${joint_range}" effort="10" velocity="1"/>
    </joint>
    <xacro:if value="${index &lt; count}">
      <xacro:segment prefix="${prefix}" index="${index + 1}" count="${count}" length="${length}"/>
    </xacro:if>
  </xacro:macro>
</robot>
"""
XACRO_COMMON = """<?xml version="1.0"?>
<robot xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:property name="joint_range" value="2.5"/>
</robot>
"""
XACRO_TOP = """<?xml version="1.0"?>
<robot name="test_arm" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="dof" default="3"/>
  <xacro:arg name="prefix" default=""/>
  <xacro:arg name="link_length" default="0.3"/>
  <xacro:include filename="common.xacro"/>
  <xacro:include filename="$(find test_arm_description)/urdf/segment.xacro"/>
  <xacro:property name="prefix" value="$(arg prefix)"/>
  <link name="${prefix}link_0"/>
  <xacro:segment prefix="${prefix}" index="1" count="$(arg dof)" length="$(arg link_length)"/>
  <link name="${prefix}tool"><visual><geometry>
    <mesh filename="package://test_arm_description/meshes/tool.stl"/></geometry></visual></link>
  <joint name="${prefix}tool_joint" type="fixed">
    <parent link="${prefix}link_$(arg dof)"/>
    <child link="${prefix}tool"/>
    <origin xyz="$(arg link_length) 0 0" rpy="0 0 0"/>
  </joint>
</robot>
"""


def write_xacro_robot(root):
    """Write the sample xacro robot under ``root`` (a pathlib.Path): the top file
    ``robot/arm.urdf.xacro`` (args dof, prefix, link_length; includes ``common.xacro`` beside it
    and ``$(find test_arm_description)/urdf/segment.xacro``) and the package in an ament index
    at ``root/install``. Returns (top file, install prefix): put the prefix on AMENT_PREFIX_PATH."""
    prefix = root / "install"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "test_arm_description").write_text("")
    (prefix / "share" / "test_arm_description" / "urdf").mkdir(parents=True)
    (prefix / "share" / "test_arm_description" / "urdf" / "segment.xacro").write_text(XACRO_MACRO)
    robot = root / "robot"
    robot.mkdir()
    (robot / "common.xacro").write_text(XACRO_COMMON)
    top = robot / "arm.urdf.xacro"
    top.write_text(XACRO_TOP)
    return top, prefix


def count_collision_checks(monkeypatch) -> list:
    """Make every ``CollisionScene.check`` append the number of states it checks to the
    returned list (the check itself unchanged)."""
    from direction_up_ik import CollisionScene
    checks = []
    check = CollisionScene.check

    def counting(scene, joint_q):
        checks.append(len(np.atleast_2d(joint_q)))
        return check(scene, joint_q)
    monkeypatch.setattr(CollisionScene, "check", counting)
    return checks
