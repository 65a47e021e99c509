"""A Python class shaped like MoveIt's ``kinematics::KinematicsBase``.

MoveIt loads only C++ plugins; its ``srv_kinematics_plugin/SrvKinematicsPlugin``
forwards IK to a ``moveit_msgs/srv/GetPositionIK`` service, which the node serves with
the same planning-group IK (:mod:`direction_up_ik.groups`). Used directly from Python,
:class:`DirectionUpKinematicsPlugin` mirrors the C++ API with results instead of output
arguments and never raises for an unreachable pose: every outcome carries a MoveIt error
code. Poses are ``geometry_msgs/Pose`` (or objects with its fields) of the tip links in
the group's base frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.spatial.transform import Rotation

from ..groups.group_ik import GroupIK, MoveItErrorCode


@dataclass(frozen=True)
class FKResult:
    """``poses``: geometry_msgs/Pose per requested link (empty unless SUCCESS)."""

    poses: list
    error_code: int
    message: str = ""


class DirectionUpKinematicsPlugin(GroupIK):
    """KinematicsBase-shaped IK and FK for one planning group (a chain or several tips):
    :class:`~direction_up_ik.groups.group_ik.GroupIK` plus ``get_position_fk``."""

    def get_position_fk(self, link_names: Sequence[str], joint_angles: Sequence[float]) -> FKResult:
        """Poses (geometry_msgs/Pose, in base_frame) of ``link_names`` at the group's ``joint_angles``."""
        from geometry_msgs.msg import Pose

        if self._robot is None:
            return FKResult([], MoveItErrorCode.FAILURE, "plugin not initialized")
        unknown = [n for n in link_names if n not in self._robot.link_names]
        if unknown:
            return FKResult([], MoveItErrorCode.INVALID_LINK_NAME, f"unknown links {unknown}")
        angles = np.asarray(joint_angles, dtype=np.float64)
        if angles.shape != (len(self._active),) or not np.all(np.isfinite(angles)):
            return FKResult([], MoveItErrorCode.INVALID_ROBOT_STATE,
                            f"joint_angles must be {len(self._active)} finite values")
        q = np.array(self._robot.joint_q, dtype=np.float64)
        q[self._active] = angles
        xforms = self._robot.link_transforms(q, list(link_names))
        poses = []
        for xform in xforms:
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in xform[:3, 3])
            x, y, z, w = Rotation.from_matrix(xform[:3, :3]).as_quat()
            pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = \
                float(x), float(y), float(z), float(w)
            poses.append(pose)
        return FKResult(poses, MoveItErrorCode.SUCCESS)
