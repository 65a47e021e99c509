"""The arrays the kernels work on, as named tuples, and the kernels' integer codes.

Shapes: B candidates (rows), E target slots per candidate, D joint coordinates, A active
coordinates, K model nodes (movable joints, mimic ones included). The Python side
(``api``) builds these from an :class:`~direction_up_ik.core.problem.IKProblem`; the
kernels only read the model, targets and config, and write the state and scratch.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import result as res

#: ``Model.jtype`` of a revolute (or continuous) and of a prismatic joint.
REVOLUTE = 0
PRISMATIC = 1

#: Stop reasons as small ints inside the kernels: indices into ``result.STOP_REASONS``.
REASONS = res.STOP_REASONS
(CONVERGED, NO_ACCEPTABLE_STEP, STEP_TOO_SMALL, MAX_ITERS, NO_ACTIVE_JOINTS, TIME_BUDGET,
 SUPERSEDED, STALLED) = (REASONS.index(reason) for reason in (
     res.STOP_CONVERGED, res.STOP_NO_ACCEPTABLE_STEP, res.STOP_STEP_TOO_SMALL, res.STOP_MAX_ITERS,
     res.STOP_NO_ACTIVE_JOINTS, res.STOP_TIME_BUDGET, res.STOP_SUPERSEDED, res.STOP_STALLED))

# A numerical failure is recorded per candidate as fail_key = (iteration + 1) * 16 + phase
# (iteration -1 = the start state), -1 when none: the smallest key is where the numpy
# reference raises, and the candidates with that key are the ones it lists.
PHASE_JACOBIAN = 0
PHASE_SINGULAR = 1      # exactly singular system: numpy.linalg.LinAlgError in the reference
PHASE_STEP = 2
PHASE_RESIDUAL = 3      # + index of the step scale (the start state uses 3)
PHASES_PER_ITERATION = 16

#: Robot arrays of one problem (K nodes, E target slots, D coordinates); see
#: :class:`~direction_up_ik.core.kinematics.KernelArrays` for the node fields.
#: ``chain``: (C,) nodes needed by the slots' TCPs in tree order; ``ee_node``
#: (E,), ``ee_fixed`` (E, 4, 4): per slot; ``moves`` (D, E): coordinate moves
#: the slot's TCP; ``full_fk``: perturbed poses by full FK (mimic on a chain);
#: ``root_rot`` (3, 3), ``root_pos`` (3,): root -> world.
Model = namedtuple("Model", (
    "parent", "dof", "scale", "offset", "jtype", "rot", "pos", "rot_cross", "rot_outer",
    "axis_parent", "axis_local", "chain", "ee_node", "ee_fixed", "dof_node", "moves", "full_fk",
    "root_rot", "root_pos"))

#: Targets of B candidates with E slots: ``position`` (B, E, 3) m, ``direction``
#: and ``up`` (B, E, 3) unit, ``has_direction``/``has_up`` (B, E) bool,
#: ``local_direction``/``local_up`` (E, 3) unit TCP axes.
Targets = namedtuple("Targets", (
    "position", "direction", "up", "has_direction", "has_up", "local_direction", "local_up"))

#: Settings and the active set: weights, damping, caps, tolerances (floats);
#: ``eps``, ``cos_eps``, ``sin_eps``: FD perturbation; ``step_scales`` (n,): the first
#: ``num_step_scales`` of ``STEP_SCALES``, tried in order;
#: ``active`` (A,) int64; ``lower``/``upper`` (A,) bounds of the active joints;
#: ``q_initial`` (D,) the state the cost is measured from; ``analytic``: the
#: exact Jacobian (``jacobians.jacobian_analytic``) instead of forward differences;
#: ``stall_window`` (0 = off) and ``stall_ratio``: see ``SolverSettings.stall_window``;
#: ``residual_damping`` (``damping_mode="residual"``) and ``damping_floor``: see
#: ``step.step_damping``;
#: ``fast_math``: the kernel's own sin/cos (``vector_math.own_sincos``) in FK and an L D L^T
#: solve of the step (``step.ldl_sized``) instead of libm's and pivoted LU (whose numbers the
#: numpy reference's follow): set with ``jacobian="analytic"`` (the search's mode, whose
#: answers differ from the spec's anyway); the spec's finite-difference mode keeps libm and LU;
#: ``turn_joints`` (P,) int64: positions in ``active`` whose successful values move by whole
#: turns nearest ``q_initial`` (``periodic_joints="nearest_turn"``; empty otherwise).
Config = namedtuple("Config", (
    "w_pos", "w_rot", "damping", "max_step_norm", "max_position_error", "position_tol",
    "frame_tol", "eps", "cos_eps", "sin_eps", "min_step_norm", "step_scales", "max_iters",
    "active", "lower", "upper", "q_initial", "analytic", "stall_window", "stall_ratio",
    "fast_math", "residual_damping", "damping_floor", "turn_joints"))

#: Per-candidate state (B leading): ``q`` (B, D) float64 (float32 values in the
#: active columns), ``r`` (B, 9E), ``ssr`` (B,), ``err`` (B, 3, E) unweighted
#: position/direction/up errors (NaN, once solved, for the parts a target leaves
#: free), ``iterations`` (B,) int32, ``reason``, ``fail_key`` (B,), ``done`` (B,) bool, and
#: once solved ``success`` (B,) int32 0/1 and ``cost`` (B,) (spec 4; +inf on failure).
#: The kernel initialises these fields; the caller may pass np.empty. Inputs:
#: ``q`` (the start states), ``group`` (B,) int64 and ``quota`` (B,) int64: a run of
#: consecutive rows with equal ``group`` is a relay of starts (``iteration.relay_turn``;
#: quota 0 = independent rows).
State = namedtuple("State", ("q", "r", "ssr", "err", "iterations", "reason", "fail_key", "done",
                             "success", "cost", "group", "quota"))

#: Per-candidate scratch (B leading) so that no iteration allocates: node frames
#: (K, 3, 3)/(K, 3), TCP poses (E, 3, 3)/(E, 3), a perturbed TCP rotation (3, 3), the Jacobian
#: (A, 9E), perturbed residuals (9E,), DLS arrays (A, A)/(A,), the trial state
#: (D,) with its residuals/errors, a perturbed state (D,), squares (max(9E, A),), and
#: the residual history of the stall test (max(1, stall_window),), and the relay's
#: bookkeeping: the iteration a row started at and whether it still waits for its turn.
Work = namedtuple("Work", (
    "node_rot", "node_pos", "tcp_rot", "tcp_pos", "rot_p", "jac", "r_p", "h", "g",
    "step", "matrix", "rhs", "value", "fixed", "trial", "r_t", "err_t", "q_p", "sq", "ssr_history",
    "started_at", "waiting"))

#: A multi-seed search in the kernel (``search_rounds.search_rounds``; ``core.search`` holds
#: its reference, ``api.search`` drives it). Settings: ``round0_done`` (the state holds
#: round 0's outcome already), ``num_seeds`` K, ``max_rounds`` (rounds of seeds at most),
#: ``unlimited`` (``max_rounds`` is only the library's end: rounds that reach it report
#: status 2), ``min_successes``, ``limit_center`` (the selection; else least motion). The
#: seed library: its M states ``lib_q`` (M, D) and their features (``seeds.pose_features``)
#: in leaves, ``leaves`` (:data:`Leaves`), the candidates' target features ``query``
#: (B, F); periodic joints turned towards ``anchor`` (D,): columns ``periodic`` (P,) int64
#: and their bounds ``periodic_lo``/``periodic_hi`` (P,). Limit centres of the active
#: joints ``center_mid``, ``center_half`` (A,) float, ``center_bounded`` (A,) bool. Outputs
#: per candidate: ``starts``, ``successes`` (B,) int64, ``best_score`` (B,) (inf: none),
#: ``iterations`` (B,) int64 summed over every start, ``closest`` (B,) the
#: ``search_rounds.closeness`` of the attempt a candidate without a success reports; and
#: ``outcome`` (2,) int64: rounds run (round 0 included), status (0 done, 1 stopped by the
#: deadline with candidates pending, 2 library used up with candidates pending). With
#: ``own_query`` the rounds first write ``query`` themselves, the features of each
#: candidate's targets (``search_rounds.target_features``, ``feature_reach`` and
#: ``axis_scale`` the library's), and ``config.q_initial`` into ``anchor`` (the one-target
#: path, ``api.OneCandidate``). Rounds 1 .. ``first_rounds`` rank that library; later ones take
#: turns with the library near the limits, ``limit_leaves`` and ``limit_lib_q`` (its states),
#: as ``search_plan.seed_source`` orders them (``first_rounds >= max_rounds``: never; then
#: those two may be the uniform library's own, unread).
Search = namedtuple("Search", (
    "round0_done", "num_seeds", "max_rounds", "unlimited", "min_successes", "limit_center", "leaves",
    "query", "lib_q", "periodic", "periodic_lo", "periodic_hi", "anchor", "center_mid", "center_half",
    "center_bounded", "starts", "successes", "best_score", "outcome", "iterations", "closest", "own_query",
    "feature_reach", "axis_scale", "first_rounds", "limit_leaves", "limit_lib_q"))

#: M points (a seed library's features) cut into L leaves for ``seed_scan.nearest_into``:
#: ``points_t`` (F, M) in leaf order, one feature per row, ``index`` (M,) int64 their
#: indices in the library, ``start`` (L + 1,) int64 where each leaf's points begin,
#: ``lo_t``/``hi_t`` (F, L) the leaves' bounding boxes, one feature per row
#: (``seeds.leaf_layout`` builds it).
Leaves = namedtuple("Leaves", ("points_t", "index", "start", "lo_t", "hi_t"))

#: Scratch of the seed ranking (``seed_scan.nearest_into``): the leaves' bounds (L,), the
#: best distances and indices so far (max_rounds * K,).
Scan = namedtuple("Scan", ("bound", "best_d", "best_i"))

#: A whole turn (rad): the seeds' periodic joints move by multiples of it.
TURN = 2.0 * np.pi
