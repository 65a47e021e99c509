"""MoveIt-style front end: a KinematicsBase-shaped plugin class, kinematics.yaml
loading, and message-independent GetPositionIK conversions. Only calls the core."""

from .kinematics_yaml import GroupKinematicsConfig, KinematicsYamlError, load_kinematics_yaml
from .plugin import DirectionUpKinematicsPlugin, FKResult, IKResult, MoveItErrorCode

__all__ = ["DirectionUpKinematicsPlugin", "FKResult", "GroupKinematicsConfig", "IKResult",
           "KinematicsYamlError", "MoveItErrorCode", "load_kinematics_yaml"]
