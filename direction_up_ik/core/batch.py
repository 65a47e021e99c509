"""The spec's entry point: ``robo_solve_ik_direction_up_multi_batch`` (spec sections 3 to 6).

Validate the settings, build the problem (:mod:`.problem`), solve it on the selected
backend (:mod:`.backend`). A request of one candidate with the default backend and root
transform goes a shorter way (:func:`.one_target.solve_one`, arrays kept per slot layout) with
the same answers.
"""

from __future__ import annotations

from . import one_target
from .backend import solve_problem
from .kinematics import RobotKinematics
from .problem import build_problem
from .result import IKBatchResult
from .settings import SolverSettings, solver_settings

#: False sends a request of one candidate through the general path too (tests compare the two).
ONE_CANDIDATE_PATH = True


def robo_solve_ik_direction_up_multi_batch(
        robot: RobotKinematics, candidates, active_dof_ids=None, device: str = "cpu", *,
        max_position_error: float, root_world_xform=None, max_iters: int = 32,
        position_tol: float = 1e-3, frame_tol_rad: float = 1e-2, position_weight: float = 1.0,
        rotation_weight: float = 1.0, damping: float = 1e-3,
        max_step_norm: float = 0.25, jacobian: str = "finite_difference", stall_window: int = 0,
        num_step_scales: int = 8, damping_mode: str = "constant", periodic_joints: str = "as_solved",
        backend: str = "auto") -> IKBatchResult:
    """Solve B candidates of E simultaneous Direction-Up targets from ``robot.joint_q``.

    Args:
        robot: the model; only read (apply ``result.joint_q[result.best_index]``
            to ``robot.joint_q`` yourself, then call ``robot.update_fk()``).
        candidates: ``((t,),)`` one candidate with one target; ``((l, r),)`` one
            candidate for two EEs; ``((lA, rA), (lB, rB))`` two candidates. All
            candidates use the same EE count, EE order and local axes.
        active_dof_ids: indices into ``joint_q`` the solver may move; None = all.
        device: "cpu" only.
        max_position_error: metres, position guard of spec 5.4 (required).
        root_world_xform: (4, 4) root -> world; default ``robot.root_world_xform``.
        max_iters, position_tol (m), frame_tol_rad (rad), position_weight,
        rotation_weight, damping, max_step_norm (rad/m), jacobian
            ("finite_difference", the spec's, or "analytic"), stall_window (0, the
            spec's stopping rules, or an opt-in "no progress" stop), num_step_scales
            (8, the spec's step scales down to 1/128, or fewer), damping_mode
            ("constant", the spec's, or "residual"), periodic_joints ("as_solved", the
            spec's final state of the iteration, or "nearest_turn"): see
            :class:`~direction_up_ik.core.settings.SolverSettings`.
        backend: "numpy", "numba" or "auto"; see :func:`~.backend.solve_problem`.
    Returns:
        IKBatchResult (unreachable targets are ``success == 0``, not exceptions).
    Raises:
        InputValidationError / InputTypeError: any input rule broken.
        JointLimitError: an active joint starts outside its limits.
        NumericalFailure (a FloatingPointError): non-finite numbers while solving.
    """
    settings = solver_settings(
        max_position_error=max_position_error, max_iters=max_iters, position_tol=position_tol,
        frame_tol_rad=frame_tol_rad, position_weight=position_weight,
        rotation_weight=rotation_weight, damping=damping, max_step_norm=max_step_norm, jacobian=jacobian,
        stall_window=stall_window, num_step_scales=num_step_scales, damping_mode=damping_mode,
        periodic_joints=periodic_joints)
    return solve_with_settings(robot, candidates, settings, active_dof_ids, device, root_world_xform=root_world_xform,
                               backend=backend)


def solve_with_settings(robot: RobotKinematics, candidates, settings: SolverSettings, active_dof_ids=None,
                        device: str = "cpu", *, root_world_xform=None, backend: str = "auto",
                        joint_bounds=None) -> IKBatchResult:
    """:func:`robo_solve_ik_direction_up_multi_batch` of validated ``settings``
    (``settings.solver_settings``), for a caller that keeps them (the node, the MoveIt front
    end): the same answers, the one-candidate path included. ``joint_bounds``: optional
    (lower, upper) (D,) narrowing the limits (``build_problem``)."""
    if ONE_CANDIDATE_PATH and backend == "auto" and root_world_xform is None and joint_bounds is None:
        result = one_target.solve_one(robot, candidates, device, settings, active_dof_ids)
        if result is not None:
            return result
    problem = build_problem(robot, candidates, active_dof_ids, device, root_world_xform, settings,
                            joint_bounds=joint_bounds)
    return solve_problem(problem, backend=backend)
