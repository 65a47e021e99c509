"""MoveIt front end: a KinematicsBase-shaped plugin class configured by kinematics.yaml.

Glue only: the planning-group IK, the kinematics.yaml reader and the GetPositionIK
conversion live in :mod:`direction_up_ik.groups`, which the ROS node uses too. Never
imports rclpy.
"""

from ..groups.group_ik import IKResult, MoveItErrorCode
from ..groups.kinematics_yaml import GroupKinematicsConfig, KinematicsYamlError, load_kinematics_yaml
from .plugin import DirectionUpKinematicsPlugin, FKResult

__all__ = ["DirectionUpKinematicsPlugin", "FKResult", "GroupKinematicsConfig", "IKResult",
           "KinematicsYamlError", "MoveItErrorCode", "load_kinematics_yaml"]
