"""The result of a batch solve (spec section 4, plus diagnostics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

#: Values of :attr:`IKBatchResult.stop_reason`.
STOP_CONVERGED = "converged"              # every EE met the tolerances
STOP_NO_ACCEPTABLE_STEP = "no_acceptable_step"  # no step scale lowered the residual within the guard
STOP_STEP_TOO_SMALL = "step_too_small"    # the capped joint step fell below MIN_STEP_NORM
STOP_MAX_ITERS = "max_iters"              # iteration budget used up
STOP_NO_ACTIVE_JOINTS = "no_active_joints"  # nothing to move and tolerances not met
STOP_TIME_BUDGET = "time_budget"          # a caller's deadline passed (search only)
STOP_SUPERSEDED = "superseded"            # enough other starts of its candidate succeeded (search only)
STOP_STALLED = "stalled"                  # < 5 % residual progress in stall_window steps (opt-in)
STOP_IN_COLLISION = "in_collision"        # converged, but in collision (a search with a collision scene)
#: Every stop reason; the compiled kernel's integer reason codes index this tuple (it never
#: gives the last, which only the search sets).
STOP_REASONS = (STOP_CONVERGED, STOP_NO_ACCEPTABLE_STEP, STOP_STEP_TOO_SMALL, STOP_MAX_ITERS,
                STOP_NO_ACTIVE_JOINTS, STOP_TIME_BUDGET, STOP_SUPERSEDED, STOP_STALLED, STOP_IN_COLLISION)


def frozen_instance(cls, **fields):
    """An instance of the frozen dataclass ``cls`` holding ``fields`` (all of its fields, the
    defaulted ones too), made without the generated ``__init__``, which stores each field
    through ``object.__setattr__``: about 4 of a one-target search's microseconds for its two
    results (docs/performance.md). For values the caller has built itself."""
    out = object.__new__(cls)
    out.__dict__.update(fields)
    return out


@dataclass(frozen=True)
class IKBatchResult:
    """Outcome of one call over B candidates with E targets each, D joint coordinates.

    Spec fields:
        joint_q: float32 (B, D) final joint coordinates of each candidate.
        success: int32 (B,) 1 when every EE meets the position and angle tolerances.
        cost: float64 (B,) sum of squared active-joint changes from the initial
            state for successful candidates, +inf for failed ones.
        best_index: index of the least-cost successful candidate, None when none.

    Diagnostics (unweighted, at the returned ``joint_q``):
        position_error: float64 (B, E) metres.
        direction_error: float64 (B, E) radians; NaN for position-only targets.
        up_error: float64 (B, E) radians, after aligning Direction; NaN unless full.
        iterations: int32 (B,) accepted steps per candidate.
        stop_reason: (B,) strings, see the ``STOP_*`` constants of this module.
        active_dof_ids: the joint coordinate indices the solver could move.
        device: always "cpu".
        backend: which backend solved: "numba" (the compiled kernels) or "numpy" (the
            reference); a search whose rounds ran on both says "numba+numpy".
    """

    joint_q: np.ndarray
    success: np.ndarray
    cost: np.ndarray
    best_index: Optional[int]
    position_error: np.ndarray
    direction_error: np.ndarray
    up_error: np.ndarray
    iterations: np.ndarray
    stop_reason: Tuple[str, ...]
    active_dof_ids: Tuple[int, ...]
    device: str = "cpu"
    backend: str = "numpy"

    @property
    def num_candidates(self) -> int:
        """B."""
        return int(self.joint_q.shape[0])

    @property
    def best_joint_q(self) -> Optional[np.ndarray]:
        """(D,) float32 joints of the chosen candidate, or None."""
        return None if self.best_index is None else self.joint_q[self.best_index]


def replace_rows(old: IKBatchResult, rows: np.ndarray, new: IKBatchResult, score) -> IKBatchResult:
    """``old`` with candidates ``rows`` replaced by ``new``'s (its rows in that order);
    ``best_index`` the least of ``score(success, cost, joint_q)`` (B,) over the result's fields
    (inf: no success), None without a success."""
    def put(field):
        values = getattr(old, field).copy()
        values[rows] = getattr(new, field)
        return values
    reasons = list(old.stop_reason)
    for i, row in enumerate(rows.tolist()):
        reasons[row] = new.stop_reason[i]
    success, cost, joint_q = put("success"), put("cost"), put("joint_q")
    return IKBatchResult(
        joint_q=joint_q, success=success, cost=cost,
        best_index=int(np.argmin(score(success, cost, joint_q))) if success.any() else None,
        position_error=put("position_error"), direction_error=put("direction_error"), up_error=put("up_error"),
        iterations=put("iterations"), stop_reason=tuple(reasons), active_dof_ids=old.active_dof_ids,
        backend=merged_backend([old, new]))


def select_rows(result: IKBatchResult, rows: np.ndarray) -> IKBatchResult:
    """``result``'s candidates ``rows`` (``best_index`` not kept: None)."""
    return IKBatchResult(
        joint_q=result.joint_q[rows], success=result.success[rows], cost=result.cost[rows], best_index=None,
        position_error=result.position_error[rows], direction_error=result.direction_error[rows],
        up_error=result.up_error[rows], iterations=result.iterations[rows],
        stop_reason=tuple(result.stop_reason[i] for i in rows.tolist()), active_dof_ids=result.active_dof_ids,
        backend=result.backend)


def merged_backend(results) -> str:
    """The backend of some results: one name, or "numba+numpy" when they differ."""
    return "+".join(sorted({r.backend for r in results}))
