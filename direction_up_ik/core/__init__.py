"""The pure core of direction_up_ik: numpy/scipy only, no ROS imports.

Build a model (:class:`RobotKinematics`), describe targets
(:class:`DirectionUpTarget`), call :func:`robo_solve_ik_direction_up_multi_batch`
and read the :class:`IKBatchResult`.
"""

from .errors import (CandidateStructureError, DirectionUpIKError, DirectionValidationError,
                     InputTypeError, InputValidationError, JointLimitError,
                     LocalAxisConfigurationError, NumericalFailure, RobotModelError,
                     UnsupportedDeviceError)
from .backend import solve_problem, warm_up_backend
from .batch import robo_solve_ik_direction_up_multi_batch
from .collision import BodyPart, CollisionGeometryWarning, CollisionReport, CollisionScene, Obstacle
from .kinematics import RobotKinematics
from .problem import IKProblem, build_problem
from .result import IKBatchResult
from .search import SearchResult, search_problem
from .search_api import robo_search_ik_direction_up, warm_up_search
from .settings import SearchSettings, SolverSettings
from .targets import DirectionUpTarget, TargetBatch
from .xacro_files import xacro_to_urdf

__all__ = [
    "BodyPart", "CandidateStructureError", "CollisionGeometryWarning", "CollisionReport", "CollisionScene",
    "DirectionUpIKError", "DirectionUpTarget",
    "DirectionValidationError", "IKBatchResult", "IKProblem", "InputTypeError",
    "InputValidationError", "JointLimitError", "LocalAxisConfigurationError",
    "NumericalFailure", "Obstacle", "RobotKinematics", "RobotModelError", "SearchResult", "SearchSettings",
    "SolverSettings", "TargetBatch", "UnsupportedDeviceError", "build_problem", "robo_search_ik_direction_up",
    "robo_solve_ik_direction_up_multi_batch", "search_problem", "solve_problem", "warm_up_backend",
    "warm_up_search", "xacro_to_urdf",
]
