"""Planning groups: IK of a group's tips from poses, configured by MoveIt's kinematics.yaml.

Message-independent and ROS-free: :mod:`.kinematics_yaml` reads the groups,
:mod:`.group_ik` solves one group's poses with MoveIt's error codes, :mod:`.position_ik`
answers ``moveit_msgs/GetPositionIK``-shaped requests. Both adapters use it: the MoveIt
front end (:mod:`direction_up_ik.moveit`) and the ROS node's GetPositionIK bridge
(:mod:`direction_up_ik.ros`).
"""

from .group_ik import GroupIK, IKResult, MoveItErrorCode
from .kinematics_yaml import GroupKinematicsConfig, KinematicsYamlError, load_kinematics_yaml
from .position_ik import PositionIKAnswer, make_group_solvers, solve_position_ik

__all__ = ["GroupIK", "GroupKinematicsConfig", "IKResult", "KinematicsYamlError", "MoveItErrorCode",
           "PositionIKAnswer", "load_kinematics_yaml", "make_group_solvers", "solve_position_ik"]
