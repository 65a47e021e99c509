"""The numpy reference of the batched Direction-Up damped-least-squares solver (spec 3, 5).

This is the executable reference of the algorithm: the compiled backend
(:mod:`.compiled`) reproduces it operation by operation, and tests pin the two together
(``docs/design.md``). :mod:`.backend` picks which of them runs a problem.

One call iterates all B candidates together: FK of every candidate and of every
finite-difference perturbation runs as one numpy batch; candidates that stop
drop out of the batch while the others continue. No Python loop runs over
candidates.

Per iteration, for each live candidate (spec 5.3, 5.4):

1. r(q): 9 weighted residual components per EE (position, Direction, aligned Up).
2. J by forward differences, eps = 1e-4 per active joint (or, with the setting
   ``jacobian="analytic"``, beyond the spec, the exact derivative of r).
3. Solve (J^T J + damping I) dq = -J^T r inside the joint limits: joints whose
   step would leave [lower, upper] are fixed at the bound and the rest re-solved.
4. Scale dq so that |dq| <= max_step_norm.
5. Try scales 1, 1/2, ..., 1/128; accept the first that lowers sum(r^2) and obeys
   the position guard. None acceptable, |dq| < MIN_STEP_NORM, tolerances met or
   max_iters used up stops the candidate (and, with the opt-in ``stall_window``,
   less than 5 % residual progress over that many steps).

Every evaluated state is rounded to float32 (the result type) and kept within
the limits first, so the reported errors and success are exactly those of the
returned ``joint_q``.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from . import result as res
from .errors import NumericalFailure
from .problem import TURN, IKProblem, nearest_turns
from .result import IKBatchResult
from .rotations import align_vector, align_vector_derivative, axis_error, axis_error_derivative
from .settings import FD_EPSILON, MIN_STEP_NORM, RESIDUAL_DAMPING_FLOOR, STALL_RATIO, STEP_SCALES


def solve_reference(problem: IKProblem, q_start: Optional[np.ndarray] = None,
                    deadline: Optional[float] = None, relay: Optional[tuple] = None) -> IKBatchResult:
    """Iterate a built problem with numpy (the reference backend).

    Args:
        problem: from :func:`~direction_up_ik.core.problem.build_problem`.
        q_start: (B, D) per-candidate start states (default: all at ``problem.q_initial``);
            ``cost`` is always measured from ``problem.q_initial``.
        deadline: ``time.perf_counter()`` value after which no new iteration starts;
            candidates still running stop with reason ``time_budget``.
        relay: optional ``(group, quota)``, each (B,) integers, for the search's
            seeds: a run of consecutive candidates with equal ``group`` (and quota > 0)
            are starts of one target, tried one after another: a start iterates once
            every earlier start of its run has stopped, and once ``quota`` of the run's
            starts have converged the others stop with reason ``superseded`` (those
            that never ran with 0 iterations). Each start has its own ``max_iters``.
            Starts that meet the tolerances as given count as converged from the outset.
            Quota 0: independent candidates. None = all candidates independent.
    Raises:
        NumericalFailure: non-finite residual, Jacobian or step.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return ReferenceSolver(problem).run(q_start, deadline, relay)


def _solve_symmetric(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Batched ``matrix (n, A, A) x = rhs (n, A)``; the least-norm solution when singular.

    With a tiny ``damping`` and identical Jacobian columns J^T J + damping I can be
    exactly singular in floating point; the pseudo-inverse then gives the smallest step.
    """
    try:
        return np.linalg.solve(matrix, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return (np.linalg.pinv(matrix, hermitian=True) @ rhs[..., None])[..., 0]


class ReferenceSolver:
    """One solve of a problem with numpy: :meth:`run` iterates every candidate together.

    Shapes in the methods: n live candidates (rows), E target slots, A active coordinates,
    D coordinates; ``cand`` (n,) the candidate index of each row.
    """

    def __init__(self, problem: IKProblem) -> None:
        self.problem = problem
        self.settings = problem.settings
        self.active = problem.active
        self.lower = problem.lower
        self.upper = problem.upper
        self.e = problem.num_targets
        # Per-slot weights for the 9 residual components of each EE.
        self.w_pos = self.settings.position_weight
        self.w_rot = self.settings.rotation_weight
        self.analytic = problem.analytic_jacobian

    # -------------------------------------------------------------- residuals
    def evaluate(self, q: np.ndarray, cand: np.ndarray):
        """Residuals and unweighted errors of states ``q`` (n, D) of candidates ``cand`` (n,).

        Returns:
            r: (n, 9E) weighted residuals; pos_err, dir_err, up_err: (n, E)
            unweighted errors (m, rad, rad).
        """
        problem = self.problem
        rot, pos = problem.robot.tcp_poses(q, problem.root_world_xform)
        out = self.residuals(rot[:, None, problem.ee_ids], pos[:, None, problem.ee_ids], cand)
        return tuple(x[:, 0] for x in out)

    def jacobian(self, q: np.ndarray, r: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """Forward-difference Jacobians (spec 5.3), transposed: (n, A, 9E).

        Residuals at every ``q + FD_EPSILON * e_j`` come from one batched call
        (:meth:`RobotKinematics.joint_perturbed_tcp_poses`). With the analytic
        setting: :meth:`analytic_jacobian`.
        """
        if self.analytic:
            return self.analytic_jacobian(q, cand)
        problem = self.problem
        _, _, rot_p, pos_p = problem.robot.joint_perturbed_tcp_poses(q, self.active, FD_EPSILON,
                                                                problem.root_world_xform)
        r_p = self.residuals(rot_p[:, :, problem.ee_ids], pos_p[:, :, problem.ee_ids], cand)[0]
        return (r_p - r[:, None, :]) / FD_EPSILON

    def analytic_jacobian(self, q: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """Exact Jacobians of the residuals, transposed: (n, A, 9E) (settings.jacobian = "analytic").

        A joint's rate moves each TCP with angular velocity w and linear velocity v
        (:meth:`RobotKinematics.tcp_joint_motions`). The position rows are w_p v.
        The Direction and Up errors depend on the TCP rotation only, through
        current Direction d and Up u (dd = w x d, du = w x u), and linearly in w:
        per EE a 3x3 matrix M (column b: the derivative for w = e_b) gives the rows
        w_r M w. ``compiled.jacobians.jacobian_analytic`` computes the same.
        """
        problem = self.problem
        rot, pos, angular, linear = problem.robot.tcp_joint_motions(q, self.active, problem.root_world_xform)
        rot, angular, linear = rot[:, problem.ee_ids], angular[:, :, problem.ee_ids], linear[:, :, problem.ee_ids]
        cur_dir = np.einsum("neij,ej->nei", rot, problem.local_direction)[:, :, None]  # (n, E, 1, 3)
        cur_up = np.einsum("neij,ej->nei", rot, problem.local_up)[:, :, None]
        t_dir = problem.target_direction[cand][:, :, None]
        t_up = problem.target_up[cand][:, :, None]
        basis = np.eye(3)  # w = e_b, b = 0, 1, 2 along axis 2
        d_dir, d_up = np.cross(basis, cur_dir), np.cross(basis, cur_up)  # (n, E, 3, 3)
        m_dir = axis_error_derivative(cur_dir, t_dir, d_dir)
        aligned = align_vector(cur_up, cur_dir, t_dir)
        m_up = axis_error_derivative(aligned, t_up, align_vector_derivative(cur_up, cur_dir, t_dir, d_up, d_dir))
        m_dir = np.where(problem.has_direction[cand][:, :, None, None], m_dir, 0.0)
        m_up = np.where(problem.has_up[cand][:, :, None, None], m_up, 0.0)
        j_dir = np.einsum("naeb,nebj->naej", angular, m_dir)
        j_up = np.einsum("naeb,nebj->naej", angular, m_up)
        jac = np.concatenate([self.w_pos * linear, self.w_rot * j_dir, self.w_rot * j_up], axis=-1)
        return jac.reshape(len(q), len(self.active), 9 * self.e)

    def residuals(self, rot: np.ndarray, pos: np.ndarray, cand: np.ndarray):
        """Spec 5.2 errors of TCP poses ``rot`` (n, m, E, 3, 3), ``pos`` (n, m, E, 3).

        Returns:
            r: (n, m, 9E) weighted residuals [w_p e_pos, w_r e_dir, w_r e_up] per EE;
            pos_err, dir_err, up_err: (n, m, E) unweighted (m, rad, rad).
        """
        problem = self.problem
        n, m = pos.shape[:2]
        cur_dir = np.einsum("nmeij,ej->nmei", rot, problem.local_direction)
        cur_up = np.einsum("nmeij,ej->nmei", rot, problem.local_up)
        t_dir = np.broadcast_to(problem.target_direction[cand][:, None], cur_dir.shape)
        t_up = np.broadcast_to(problem.target_up[cand][:, None], cur_dir.shape)
        e_pos = pos - problem.target_position[cand][:, None]
        e_dir = axis_error(cur_dir, t_dir)
        e_up = axis_error(align_vector(cur_up, cur_dir, t_dir), t_up)
        e_dir = np.where(problem.has_direction[cand][:, None, :, None], e_dir, 0.0)
        e_up = np.where(problem.has_up[cand][:, None, :, None], e_up, 0.0)
        r = np.concatenate([self.w_pos * e_pos, self.w_rot * e_dir, self.w_rot * e_up], axis=-1)
        return (r.reshape(n, m, 9 * self.e), np.linalg.norm(e_pos, axis=-1),
                np.linalg.norm(e_dir, axis=-1), np.linalg.norm(e_up, axis=-1))

    def meets_tolerances(self, pos_err, dir_err, up_err, cand) -> np.ndarray:
        """(n,) True where every EE is strictly within the tolerances (unweighted)."""
        problem, settings = self.problem, self.settings
        ok = ((pos_err < settings.position_tol)
              & (~problem.has_direction[cand] | (dir_err < settings.frame_tol_rad))
              & (~problem.has_up[cand] | (up_err < settings.frame_tol_rad)))
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

    def damping(self, ssr: np.ndarray):
        """The damping of each step from states of weighted sums of squared residuals ``ssr``
        (n,): the float ``settings.damping``, or with ``damping_mode="residual"`` (n, 1, 1)
        min(damping, max(ssr, RESIDUAL_DAMPING_FLOOR x damping)), to add times the identity
        to each J^T J (``compiled.step.step_damping`` is the kernel's)."""
        d = self.settings.damping
        if self.settings.damping_mode == "constant":
            return d
        return np.minimum(d, np.maximum(ssr, RESIDUAL_DAMPING_FLOOR * d))[:, None, None]

    def limited_dls_step(self, jac_t: np.ndarray, r: np.ndarray, q_act: np.ndarray,
                         ssr: np.ndarray) -> np.ndarray:
        """Damped least-squares step kept inside the joint limits, norm-capped.

        Args:
            jac_t: (n, A, 9E) transposed Jacobians; r: (n, 9E); q_act: (n, A);
            ssr: (n,) the weighted sums of squared residuals (for :meth:`damping`).
        Returns:
            (n, A) joint steps.
        """
        n, a = q_act.shape
        eye = np.eye(a)
        h = jac_t @ np.swapaxes(jac_t, 1, 2) + self.damping(ssr) * eye
        g = -np.einsum("naj,nj->na", jac_t, r)
        lo = self.lower[self.active] - q_act
        hi = self.upper[self.active] - q_act
        step = _solve_symmetric(h, g)
        # Joints whose step leaves the limits are fixed at the bound and the others
        # re-solved, until no free joint violates (at most A passes, rows that need it).
        fixed = np.zeros((n, a), dtype=bool)
        value = np.zeros((n, a))
        rows = np.arange(n)
        for _ in range(a):
            below = ~fixed[rows] & (step[rows] < lo[rows])
            above = ~fixed[rows] & (step[rows] > hi[rows])
            hit = np.any(below | above, axis=-1)
            rows, below, above = rows[hit], below[hit], above[hit]
            if len(rows) == 0:
                break
            value[rows] = np.where(below, lo[rows], np.where(above, hi[rows], value[rows]))
            fixed[rows] |= below | above
            free, hr = ~fixed[rows], h[rows]
            matrix = np.where(free[:, :, None] & free[:, None, :], hr, 0.0) + eye * fixed[rows][:, :, None]
            rhs = np.where(free, g[rows] - np.einsum("nij,nj->ni", hr, value[rows]), value[rows])
            step[rows] = _solve_symmetric(matrix, rhs)
        norm = np.linalg.norm(step, axis=-1, keepdims=True)
        scale = np.minimum(1.0, self.settings.max_step_norm / np.where(norm > 0.0, norm, 1.0))
        return step * scale

    # --------------------------------------------------------------- loop
    def run(self, q_start: Optional[np.ndarray], deadline: Optional[float] = None,
            relay: Optional[tuple] = None) -> IKBatchResult:
        problem, settings = self.problem, self.settings
        b, a = problem.num_candidates, len(self.active)
        q0 = problem.q_initial
        q = np.broadcast_to(q0, (b, len(q0))).copy() if q_start is None else \
            np.array(q_start, dtype=np.float64).reshape(b, len(q0))
        q = self.to_float32_in_limits(q)
        everyone = np.arange(b)
        r, pos_err, dir_err, up_err = self.evaluate(q, everyone)
        self.check_finite(r, everyone, "residual")
        ssr = np.sum(r * r, axis=-1)
        iterations = np.zeros(b, dtype=np.int32)
        reason = np.full(b, res.STOP_MAX_ITERS, dtype=object)
        done = self.meets_tolerances(pos_err, dir_err, up_err, everyone)
        reason[done] = res.STOP_CONVERGED
        if a == 0:
            reason[~done] = res.STOP_NO_ACTIVE_JOINTS
            done[:] = True

        # Each candidate iterates from its start iteration (all 0 without a relay) for at
        # most max_iters iterations; a relay's later starts wait for their turn.
        started_at = np.zeros(b, dtype=np.int64)
        waiting = np.zeros(b, dtype=bool)
        if relay is not None:
            group, quota = (np.asarray(x, dtype=np.int64).reshape(b) for x in relay)
            first = np.r_[True, group[1:] != group[:-1]]
            run_id = np.cumsum(first) - 1  # runs of equal group
            relayed = quota > 0
            waiting = relayed & ~first & ~done
        window = settings.stall_window
        if window:  # history[c, k % w]: the residual after k accepted steps, kept for w steps
            history = np.empty((b, window))
            history[:, 0] = ssr
        it = 0
        while True:
            used_up = ~done & ~waiting & (it - started_at >= settings.max_iters)
            done[used_up] = True  # reason stays max_iters
            if relay is not None:
                # A run with enough successes stops the rest of it; a run with none of its
                # starts running hands over to its next waiting start.
                won = np.bincount(run_id, weights=done & (reason == res.STOP_CONVERGED))
                stop = ~done & relayed & (won[run_id] >= quota)
                reason[stop] = res.STOP_SUPERSEDED
                done[stop] = True
                waiting &= ~stop
                running = np.bincount(run_id, weights=~done & ~waiting)
                idle = np.flatnonzero(waiting & (running[run_id] == 0))
                _, first_waiting = np.unique(run_id[idle], return_index=True)
                turn = idle[first_waiting]  # each idle run's first waiting start
                waiting[turn] = False
                started_at[turn] = it
            live = np.flatnonzero(~done & ~waiting)
            if len(live) == 0:
                break
            if deadline is not None and time.perf_counter() > deadline:
                reason[~done] = res.STOP_TIME_BUDGET  # the waiting starts too
                break
            it += 1
            ql, rl = q[live], r[live]
            jac_t = self.jacobian(ql, rl, live)
            self.check_finite(jac_t, live, "Jacobian")
            step = self.limited_dls_step(jac_t, rl, ql[:, self.active], ssr[live])
            self.check_finite(step, live, "joint step")

            tiny = np.linalg.norm(step, axis=-1) < MIN_STEP_NORM
            reason[live[tiny]] = res.STOP_STEP_TOO_SMALL
            done[live[tiny]] = True
            pending = np.flatnonzero(~tiny)
            max_pos = pos_err[live].max(axis=-1)
            for scale in STEP_SCALES[:settings.num_step_scales]:
                if len(pending) == 0:
                    break
                idx = live[pending]
                trial = ql[pending].copy()
                trial[:, self.active] += scale * step[pending]
                trial = self.to_float32_in_limits(trial)
                r_t, pe_t, de_t, ue_t = self.evaluate(trial, idx)
                self.check_finite(r_t, idx, "residual")
                ssr_t = np.sum(r_t * r_t, axis=-1)
                new_max, old_max = pe_t.max(axis=-1), max_pos[pending]
                guard = np.where(old_max <= settings.max_position_error,
                                 new_max <= settings.max_position_error, new_max < old_max)
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
            if window:
                going = live[~done[live]]  # each took a step this iteration
                k = iterations[going]
                slot = k % window
                stalled = (k >= window) & (ssr[going] > STALL_RATIO * history[going, slot])
                reason[going[stalled]] = res.STOP_STALLED
                done[going[stalled]] = True
                history[going, slot] = ssr[going]

        success = self.meets_tolerances(pos_err, dir_err, up_err, everyone)
        if self.settings.periodic_joints == "nearest_turn":
            self.nearest_turn(q, pos_err, dir_err, up_err, np.flatnonzero(success))
        delta = q[:, self.active] - q0[self.active]
        cost = np.where(success, np.sum(delta * delta, axis=-1), np.inf)
        best = int(np.argmin(cost)) if np.any(success) else None
        dir_out = np.where(problem.has_direction, dir_err, np.nan)
        up_out = np.where(problem.has_up, up_err, np.nan)
        return IKBatchResult(
            joint_q=q.astype(np.float32), success=success.astype(np.int32),
            cost=cost.astype(np.float64), best_index=best, position_error=pos_err,
            direction_error=dir_out, up_error=up_out, iterations=iterations,
            stop_reason=tuple(str(x) for x in reason),
            active_dof_ids=tuple(int(i) for i in self.active))

    def nearest_turn(self, q: np.ndarray, pos_err: np.ndarray, dir_err: np.ndarray, up_err: np.ndarray,
                     solved: np.ndarray) -> None:
        """``periodic_joints="nearest_turn"``: move each :attr:`IKProblem.turn_joints` joint of
        the ``solved`` rows by whole turns to its in-bound value nearest ``q_initial``
        (:func:`~.problem.nearest_turns`). A moved row is rounded to float32 again and
        re-evaluated; it replaces the row in ``q`` and the errors (in place) only when it
        still meets the tolerances, so the errors stay those of the returned state."""
        columns = self.active[self.problem.turn_joints]
        if len(columns) == 0 or len(solved) == 0:
            return
        turns = nearest_turns(q[np.ix_(solved, columns)], self.problem.q_initial[columns], self.lower[columns],
                              self.upper[columns])
        turning = np.any(turns != 0, axis=1)
        rows = solved[turning]
        if len(rows) == 0:
            return
        moved = q[rows].copy()
        moved[:, columns] += TURN * turns[turning]
        moved = self.to_float32_in_limits(moved)
        r, pe, de, ue = self.evaluate(moved, rows)
        keep = np.all(np.isfinite(r), axis=-1) & self.meets_tolerances(pe, de, ue, rows)
        rows = rows[keep]
        q[rows], pos_err[rows], dir_err[rows], up_err[rows] = moved[keep], pe[keep], de[keep], ue[keep]

    @staticmethod
    def check_finite(values: np.ndarray, cand: np.ndarray, what: str) -> None:
        bad = ~np.all(np.isfinite(values.reshape(len(cand), -1)), axis=-1)
        if np.any(bad):
            raise NumericalFailure(sorted(set(int(c) for c in cand[bad])), f"non-finite {what}")
