"""The batched Direction-Up damped-least-squares solver (spec sections 3 and 5).

One call iterates all B candidates together: FK of every candidate and of every
finite-difference perturbation runs as one numpy batch; candidates that stop
drop out of the batch while the others continue. No Python loop runs over
candidates.

Per iteration, for each live candidate (spec 5.3, 5.4):

1. r(q): 9 weighted residual components per EE (position, Direction, aligned Up).
2. J by forward differences, eps = 1e-4 per active joint.
3. Solve (J^T J + damping I) dq = -J^T r inside the joint limits: joints whose
   step would leave [lower, upper] are fixed at the bound and the rest re-solved.
4. Scale dq so that |dq| <= max_step_norm.
5. Try scales 1, 1/2, ..., 1/128; accept the first that lowers sum(r^2) and obeys
   the position guard. None acceptable, |dq| < MIN_STEP_NORM, tolerances met or
   max_iters used up stops the candidate.

Every evaluated state is rounded to float32 (the result type) and kept within
the limits first, so the reported errors and success are exactly those of the
returned ``joint_q``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import result as res
from .errors import NumericalFailure
from .kinematics import RobotKinematics
from .problem import IKProblem, build_problem
from .result import IKBatchResult
from .rotations import align_vector, axis_error
from .settings import FD_EPSILON, MIN_STEP_NORM, STEP_SCALES, SolverSettings


def robo_solve_ik_direction_up_multi_batch(
        robot: RobotKinematics, candidates, active_dof_ids=None, device: str = "cpu", *,
        max_position_error: float, root_world_xform=None, max_iters: int = 32,
        position_tol: float = 1e-3, frame_tol_rad: float = 1e-2, position_weight: float = 1.0,
        rotation_weight: float = 1.0, damping: float = 1e-3,
        max_step_norm: float = 0.25) -> IKBatchResult:
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
        rotation_weight, damping, max_step_norm (rad/m): see
            :class:`~direction_up_ik.core.settings.SolverSettings`.
    Returns:
        IKBatchResult (unreachable targets are ``success == 0``, not exceptions).
    Raises:
        InputValidationError / InputTypeError: any input rule broken.
        JointLimitError: an active joint starts outside its limits.
        NumericalFailure (a FloatingPointError): non-finite numbers while solving.
    """
    settings = SolverSettings(
        max_position_error=max_position_error, max_iters=max_iters, position_tol=position_tol,
        frame_tol_rad=frame_tol_rad, position_weight=position_weight,
        rotation_weight=rotation_weight, damping=damping, max_step_norm=max_step_norm)
    problem = build_problem(robot, candidates, active_dof_ids, device, root_world_xform, settings)
    return solve_problem(problem)


def solve_problem(problem: IKProblem, q_start: Optional[np.ndarray] = None) -> IKBatchResult:
    """Iterate a built problem. ``q_start`` (B, D) overrides the per-candidate start.

    ``cost`` is always measured from ``problem.q_initial`` (the robot's state),
    so a caller may start candidates elsewhere (e.g. random seeds) and still rank
    them by joint motion from the current state.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return _Solver(problem).run(q_start)


class _Solver:
    def __init__(self, problem: IKProblem) -> None:
        self.p = problem
        self.s = problem.settings
        robot = problem.robot
        self.active = problem.active
        self.lower = robot.lower_limits
        self.upper = robot.upper_limits
        self.e = problem.num_targets
        # Per-slot weights for the 9 residual components of each EE.
        self.w_pos = self.s.position_weight
        self.w_rot = self.s.rotation_weight

    # -------------------------------------------------------------- residuals
    def evaluate(self, q: np.ndarray, cand: np.ndarray):
        """Residuals and unweighted errors.

        Args:
            q: (n, m, D) states; row i belongs to candidate ``cand[i]``.
            cand: (n,) candidate indices.
        Returns:
            r: (n, m, 9E) weighted residuals;
            pos_err, dir_err, up_err: (n, m, E) unweighted (m, rad, rad).
        """
        p = self.p
        n, m, d = q.shape
        rot, pos = p.robot.tcp_poses(q.reshape(n * m, d), p.root_world_xform)
        rot = rot[:, p.ee_ids].reshape(n, m, self.e, 3, 3)
        pos = pos[:, p.ee_ids].reshape(n, m, self.e, 3)
        cur_dir = np.einsum("nmeij,ej->nmei", rot, p.local_direction)
        cur_up = np.einsum("nmeij,ej->nmei", rot, p.local_up)
        t_dir = p.target_direction[cand][:, None]
        t_up = p.target_up[cand][:, None]
        e_pos = pos - p.target_position[cand][:, None]
        e_dir = axis_error(cur_dir, np.broadcast_to(t_dir, cur_dir.shape))
        aligned_up = align_vector(cur_up, cur_dir, np.broadcast_to(t_dir, cur_dir.shape))
        e_up = axis_error(aligned_up, np.broadcast_to(t_up, cur_dir.shape))
        has_dir = p.has_direction[cand][:, None, :, None]
        has_up = p.has_up[cand][:, None, :, None]
        e_dir = np.where(has_dir, e_dir, 0.0)
        e_up = np.where(has_up, e_up, 0.0)
        r = np.concatenate([self.w_pos * e_pos, self.w_rot * e_dir, self.w_rot * e_up], axis=-1)
        return (r.reshape(n, m, 9 * self.e), np.linalg.norm(e_pos, axis=-1),
                np.linalg.norm(e_dir, axis=-1), np.linalg.norm(e_up, axis=-1))

    def meets_tolerances(self, pos_err, dir_err, up_err, cand) -> np.ndarray:
        """(n,) True where every EE is strictly within the tolerances (unweighted)."""
        p, s = self.p, self.s
        ok = ((pos_err < s.position_tol)
              & (~p.has_direction[cand] | (dir_err < s.frame_tol_rad))
              & (~p.has_up[cand] | (up_err < s.frame_tol_rad)))
        return np.all(ok, axis=-1)

    # ------------------------------------------------------------- steps
    def to_float32_in_limits(self, q: np.ndarray) -> np.ndarray:
        """Clip active columns to the limits, round to float32 without leaving them."""
        a = self.active
        lo, hi = self.lower[a], self.upper[a]
        v = np.clip(q[..., a], lo, hi).astype(np.float32)
        v = np.where(v > hi, np.nextafter(v, np.float32(-np.inf)), v)
        v = np.where(v < lo, np.nextafter(v, np.float32(np.inf)), v)
        out = q.copy()
        out[..., a] = v
        return out

    def limited_dls_step(self, jac_t: np.ndarray, r: np.ndarray, q_act: np.ndarray) -> np.ndarray:
        """Damped least-squares step kept inside the joint limits, norm-capped.

        Args:
            jac_t: (n, A, 9E) transposed Jacobians; r: (n, 9E); q_act: (n, A).
        Returns:
            (n, A) joint steps.
        """
        n, a = q_act.shape
        eye = np.eye(a)
        h = jac_t @ np.swapaxes(jac_t, 1, 2) + self.s.damping * eye
        g = -np.einsum("naj,nj->na", jac_t, r)
        lo = self.lower[self.active] - q_act
        hi = self.upper[self.active] - q_act
        fixed = np.zeros((n, a), dtype=bool)
        value = np.zeros((n, a))
        for _ in range(a + 1):
            free = ~fixed
            matrix = np.where(free[:, :, None] & free[:, None, :], h, 0.0) + eye * fixed[:, :, None]
            rhs = np.where(free, g - np.einsum("nij,nj->ni", h, value), value)
            step = np.linalg.solve(matrix, rhs[..., None])[..., 0]
            below, above = free & (step < lo), free & (step > hi)
            if not (below.any() or above.any()):
                break
            value = np.where(below, lo, np.where(above, hi, value))
            fixed |= below | above
        norm = np.linalg.norm(step, axis=-1, keepdims=True)
        scale = np.minimum(1.0, self.s.max_step_norm / np.where(norm > 0.0, norm, 1.0))
        return step * scale

    # --------------------------------------------------------------- loop
    def run(self, q_start: Optional[np.ndarray]) -> IKBatchResult:
        p, s = self.p, self.s
        b, a = p.num_candidates, len(self.active)
        q0 = p.q_initial
        q = np.broadcast_to(q0, (b, len(q0))).copy() if q_start is None else \
            np.array(q_start, dtype=np.float64).reshape(b, len(q0))
        q = self.to_float32_in_limits(q)
        everyone = np.arange(b)
        r, pos_err, dir_err, up_err = (x[:, 0] for x in self.evaluate(q[:, None], everyone))
        self.check_finite(r, everyone, "residual")
        ssr = np.sum(r * r, axis=-1)
        iterations = np.zeros(b, dtype=np.int32)
        reason = np.full(b, res.STOP_MAX_ITERS, dtype=object)
        done = self.meets_tolerances(pos_err, dir_err, up_err, everyone)
        reason[done] = res.STOP_CONVERGED
        if a == 0:
            reason[~done] = res.STOP_NO_ACTIVE_JOINTS
            done[:] = True
        cols = np.arange(a)

        for _ in range(s.max_iters):
            live = np.flatnonzero(~done)
            if len(live) == 0:
                break
            ql, rl = q[live], r[live]
            # Forward-difference Jacobian: all candidates x all active joints in one FK batch.
            perturbed = np.repeat(ql[:, None, :], a, axis=1)
            perturbed[:, cols, self.active] += FD_EPSILON
            r_pert = self.evaluate(perturbed, live)[0]
            jac_t = (r_pert - rl[:, None, :]) / FD_EPSILON
            self.check_finite(jac_t, live, "Jacobian")
            step = self.limited_dls_step(jac_t, rl, ql[:, self.active])
            self.check_finite(step, live, "joint step")

            tiny = np.linalg.norm(step, axis=-1) < MIN_STEP_NORM
            reason[live[tiny]] = res.STOP_STEP_TOO_SMALL
            done[live[tiny]] = True
            pending = np.flatnonzero(~tiny)
            max_pos = pos_err[live].max(axis=-1)
            for scale in STEP_SCALES:
                if len(pending) == 0:
                    break
                idx = live[pending]
                trial = ql[pending].copy()
                trial[:, self.active] += scale * step[pending]
                trial = self.to_float32_in_limits(trial)
                r_t, pe_t, de_t, ue_t = (x[:, 0] for x in self.evaluate(trial[:, None], idx))
                self.check_finite(r_t, idx, "residual")
                ssr_t = np.sum(r_t * r_t, axis=-1)
                new_max, old_max = pe_t.max(axis=-1), max_pos[pending]
                guard = np.where(old_max <= s.max_position_error,
                                 new_max <= s.max_position_error, new_max < old_max)
                ok = (ssr_t < ssr[idx]) & guard
                acc = idx[ok]
                q[acc], r[acc], ssr[acc] = trial[ok], r_t[ok], ssr_t[ok]
                pos_err[acc], dir_err[acc], up_err[acc] = pe_t[ok], de_t[ok], ue_t[ok]
                iterations[acc] += 1
                pending = pending[~ok]
            reason[live[pending]] = res.STOP_NO_ACCEPTABLE_STEP
            done[live[pending]] = True
            converged = live[self.meets_tolerances(pos_err[live], dir_err[live], up_err[live], live)]
            reason[converged] = res.STOP_CONVERGED
            done[converged] = True

        success = self.meets_tolerances(pos_err, dir_err, up_err, everyone)
        delta = q[:, self.active] - q0[self.active]
        cost = np.where(success, np.sum(delta * delta, axis=-1), np.inf)
        best = int(np.argmin(cost)) if np.any(success) else None
        dir_out = np.where(p.has_direction, dir_err, np.nan)
        up_out = np.where(p.has_up, up_err, np.nan)
        return IKBatchResult(
            joint_q=q.astype(np.float32), success=success.astype(np.int32),
            cost=cost.astype(np.float64), best_index=best, position_error=pos_err,
            direction_error=dir_out, up_error=up_out, iterations=iterations,
            stop_reason=tuple(str(x) for x in reason),
            active_dof_ids=tuple(int(i) for i in self.active))

    @staticmethod
    def check_finite(values: np.ndarray, cand: np.ndarray, what: str) -> None:
        bad = ~np.all(np.isfinite(values.reshape(len(cand), -1)), axis=-1)
        if np.any(bad):
            raise NumericalFailure(sorted(set(int(c) for c in cand[bad])), f"non-finite {what}")
