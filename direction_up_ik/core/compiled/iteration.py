"""The iteration of the batch solver in the kernels (spec 5.3, 5.4) and its entry point.

:func:`run_serial` (called from Python) allocates the scratch and runs :func:`solve_rows`,
which starts every candidate, then iterates them in blocks of :data:`BLOCK_ROWS` rows,
"iteration-major" like the numpy reference (every live candidate takes iteration k before
any takes k + 1). Candidates are independent, so the results are those of one pass over
all. A relay (the search's seeds of one target) runs its rows one after another
(:func:`relay_turn`). ``solve_rows`` is compiled without numba's runtime: nothing below it
allocates (scratch comes from ``run_serial`` or :func:`~.numba_support.stack_array`).
``solve_block`` and ``solve_rows`` are kernels of their own, which the kernels above them
call through their symbols (:func:`~.numba_support.native_call`): compiled once, not again
inside every caller.

Argument names: ``model``, ``targets``, ``config``, ``state``, ``work`` are the named
tuples of :mod:`.layout`; ``b`` is a candidate's row of ``state``, ``w`` its row of ``work``.
"""

from __future__ import annotations

import numpy as np

from .jacobians import jacobian_analytic, jacobian_full_fk, jacobian_shortcut
from .layout import (CONVERGED, MAX_ITERS, NO_ACCEPTABLE_STEP, NO_ACTIVE_JOINTS, PHASE_JACOBIAN,
                     PHASE_RESIDUAL, PHASE_SINGULAR, PHASE_STEP, PHASES_PER_ITERATION, STALLED,
                     STEP_TOO_SMALL, SUPERSEDED, TIME_BUDGET, TURN, Config, Model, State, Targets, Work)
from .numba_support import CLOCK, clock_ns, jitable, native_call, njit_cached
from .residuals import evaluate_inlined, evaluate_row, max_position_error, meets_tolerances
from .step import limited_dls_step, step_damping, to_float32_in_limits
from .vector_math import all_finite, all_finite2, copy1, copy2, nearest_turns, pairwise_sum, sum_of_squares


#: Rows per block of :func:`solve_rows`, whose scratch is allocated for one block (a few
#: tens of kB, kept in the L1 cache; scratch for a whole batch is slower:
#: docs/performance.md).
BLOCK_ROWS = 16


@jitable(force_inline=True)
def fail(state, b, it, phase):
    """Record a numerical failure of candidate b at iteration ``it``, ``phase``."""
    state.fail_key[b] = (it + 1) * PHASES_PER_ITERATION + phase
    state.done[b] = True


@jitable(force_inline=True, own_code=True)
def iterate(b, w, it, model, targets, config, state, work):
    """One solver iteration (spec 5.3, 5.4) of live candidate b (row w of ``work``): Jacobian,
    limited DLS step, step scales 1 .. 1/128 with the position guard; updates ``state`` row b."""
    q, r = state.q[b], state.r[b]
    # wk's row w holds the node frames and TCP poses of q: the last evaluate() of
    # this candidate was of q (its start state, or the trial just accepted).
    jac = work.jac[w]
    node_rot, node_pos, tcp_rot, tcp_pos = work.node_rot[w], work.node_pos[w], work.tcp_rot[w], work.tcp_pos[w]
    if config.analytic:
        jacobian_analytic(model, targets, config.w_pos, config.w_rot, config.active, b, node_rot, node_pos, tcp_rot, tcp_pos,
                          jac)
    elif model.full_fk:
        jacobian_full_fk(model, targets, config, b, w, q, r, work, jac)
    else:
        jacobian_shortcut(model, targets, config.w_pos, config.w_rot, config.eps, config.cos_eps, config.sin_eps, config.active, b, r,
                          node_rot, node_pos, tcp_rot, tcp_pos, work.rot_p[w], work.r_p[w], work.err_t[w], jac)
    if not all_finite2(jac):
        fail(state, b, it, PHASE_JACOBIAN)
        return
    step, scratch = work.step[w], work.sq[w]
    damping = step_damping(config.residual_damping, config.damping, config.damping_floor, state.ssr[b])
    if not limited_dls_step(damping, config.max_step_norm, config.active, config.lower, config.upper, jac, r, q,
                            work.h[w], work.g[w], step, work.matrix[w], work.rhs[w],
                            work.value[w], work.fixed[w], scratch, config.fast_math):
        fail(state, b, it, PHASE_SINGULAR)
        return
    if not all_finite(step):
        fail(state, b, it, PHASE_STEP)
        return
    if np.sqrt(sum_of_squares(step, scratch)) < config.min_step_norm:
        state.reason[b] = STEP_TOO_SMALL
        state.done[b] = True
    else:
        old_max = max_position_error(state.err[b])
        trial, r_t, err_t = work.trial[w], work.r_t[w], work.err_t[w]
        accepted = False
        for si in range(config.step_scales.shape[0]):
            scale = config.step_scales[si]
            copy1(trial, q)
            for i in range(config.active.shape[0]):
                d = config.active[i]
                trial[d] = trial[d] + scale * step[i]
            to_float32_in_limits(trial, config.active, config.lower, config.upper)
            evaluate_inlined(model, targets, config.w_pos, config.w_rot, config.fast_math, b, trial, node_rot, node_pos, tcp_rot, tcp_pos,
                             r_t, err_t)
            if not all_finite(r_t):
                fail(state, b, it, PHASE_RESIDUAL + si)
                return
            ssr_t = sum_of_squares(r_t, scratch)
            new_max = max_position_error(err_t)
            if old_max <= config.max_position_error:
                guard = new_max <= config.max_position_error
            else:
                guard = new_max < old_max
            if ssr_t < state.ssr[b] and guard:
                copy1(q, trial)
                copy1(r, r_t)
                state.ssr[b] = ssr_t
                copy2(state.err[b], err_t)
                state.iterations[b] += 1
                accepted = True
                break
        if not accepted:
            state.reason[b] = NO_ACCEPTABLE_STEP
            state.done[b] = True
    if meets_tolerances(targets, config, b, state.err[b]):
        state.reason[b] = CONVERGED
        state.done[b] = True
    elif config.stall_window > 0 and not state.done[b]:
        stall_test(b, config, state, work.ssr_history[w])


@jitable(force_inline=True)
def stall_test(b, config, state, history):
    """After an accepted step of candidate b: stop it as stalled when its residual is above
    ``stall_ratio`` times the one ``stall_window`` steps before; record the residual.
    history[k % w] holds the residual after k accepted steps (slot 0: the start state)."""
    k = state.iterations[b]
    slot = k % config.stall_window
    if k >= config.stall_window and state.ssr[b] > config.stall_ratio * history[slot]:
        state.reason[b] = STALLED
        state.done[b] = True
    history[slot] = state.ssr[b]


@jitable(own_code=True)
def start_candidate(b, w, model, targets, config, state, work):
    """Round candidate b's start state into the bounds and evaluate it (row w of ``work``);
    converged or nothing-to-move candidates are done at once. Returns False on a
    non-finite residual."""
    to_float32_in_limits(state.q[b], config.active, config.lower, config.upper)
    evaluate_row(model, targets, config, b, w, state.q[b], work, state.r[b], state.err[b])
    if not all_finite(state.r[b]):
        fail(state, b, -1, PHASE_RESIDUAL)
        return False
    state.ssr[b] = sum_of_squares(state.r[b], work.sq[w])
    work.ssr_history[w, 0] = state.ssr[b]
    state.reason[b] = MAX_ITERS
    if meets_tolerances(targets, config, b, state.err[b]):
        state.reason[b] = CONVERGED
        state.done[b] = True
    elif config.active.shape[0] == 0:
        state.reason[b] = NO_ACTIVE_JOINTS
        state.done[b] = True
    return True


@jitable(own_code=True)
def relay_turn(state, work, lo, hi, it, max_iters):
    """Before iteration ``it`` of rows lo:hi (whole runs; ``work`` rows 0..): rows that have
    run ``max_iters`` iterations stop (reason max_iters); in a relay (a run of consecutive
    rows with equal ``group`` and ``quota`` > 0) the rest stop as superseded once ``quota``
    rows have converged, else, when none of its rows is running, the next waiting row
    starts. Same as the relay in ``_Solver.run``."""
    for b in range(lo, hi):
        w = b - lo
        if not state.done[b] and not work.waiting[w] and it - work.started_at[w] >= max_iters:
            state.done[b] = True
    start = lo
    while start < hi:
        end, count, running = start, 0, 0
        while end < hi and state.group[end] == state.group[start]:
            if state.done[end]:
                count += state.reason[end] == CONVERGED
            elif not work.waiting[end - lo]:
                running += 1
            end += 1
        if state.quota[start] > 0:
            if count >= state.quota[start]:
                for k in range(start, end):
                    if not state.done[k]:
                        state.reason[k] = SUPERSEDED
                        state.done[k] = True
                        work.waiting[k - lo] = False
            elif running == 0:
                for k in range(start, end):
                    if work.waiting[k - lo]:
                        work.waiting[k - lo] = False
                        work.started_at[k - lo] = it
                        break
        start = end


@jitable
def nearest_turn(b, w, model, targets, config, state, work):
    """``periodic_joints="nearest_turn"`` for solved candidate b (row w of ``work``): each
    ``config.turn_joints`` joint moves by the whole turns that bring it nearest
    ``config.q_initial`` within its bounds (ties to the even count); the moved state, rounded
    to float32, replaces row b (with its residuals and errors) only when it still meets the
    tolerances. The reference is ``ReferenceSolver.nearest_turn``."""
    q, trial = state.q[b], work.trial[w]
    moved = False
    copy1(trial, q)
    for p in range(config.turn_joints.shape[0]):
        i = config.turn_joints[p]
        d = config.active[i]
        lo, hi = config.lower[i], config.upper[i]
        turns = nearest_turns(q[d], config.q_initial[d], lo, hi)
        if turns != 0.0:
            trial[d] = q[d] + TURN * turns
            moved = True
    if not moved:
        return
    to_float32_in_limits(trial, config.active, config.lower, config.upper)
    r_t, err_t = work.r_t[w], work.err_t[w]
    evaluate_row(model, targets, config, b, w, trial, work, r_t, err_t)
    if all_finite(r_t) and meets_tolerances(targets, config, b, err_t):
        copy1(q, trial)
        copy1(state.r[b], r_t)
        copy2(state.err[b], err_t)
        state.ssr[b] = sum_of_squares(r_t, work.sq[w])


@jitable
def finish_candidate(b, w, targets, config, state, work):
    """Spec 4 outcome of candidate b: ``success``, ``cost`` (sum of squared active-joint
    changes from ``config.q_initial``, pairwise like ``np.sum``; +inf on failure), then NaN
    in ``err`` for the parts its targets leave free."""
    err = state.err[b]
    state.success[b] = meets_tolerances(targets, config, b, err)
    if state.success[b]:
        q, scratch = state.q[b], work.sq[w]
        for i in range(config.active.shape[0]):
            d = config.active[i]
            delta = q[d] - config.q_initial[d]
            scratch[i] = delta * delta
        state.cost[b] = pairwise_sum(scratch, 0, config.active.shape[0])
    else:
        state.cost[b] = np.inf
    for e in range(err.shape[1]):
        if not targets.has_direction[b, e]:
            err[1, e] = np.nan
        if not targets.has_up[b, e]:
            err[2, e] = np.nan


@jitable
def alloc_work(b, k, e, a, d, w):
    """Scratch arrays for b rows, k nodes, e slots, a active joints, d coordinates,
    stall window w."""
    n = 9 * e
    return Work(
        np.zeros((b, k, 3, 3)), np.zeros((b, k, 3)), np.zeros((b, e, 3, 3)), np.zeros((b, e, 3)),
        np.zeros((b, 3, 3)), np.zeros((b, a, n)), np.zeros((b, n)),
        np.zeros((b, a, a)), np.zeros((b, a)), np.zeros((b, a)), np.zeros((b, a, a)),
        np.zeros((b, a)), np.zeros((b, a)), np.zeros((b, a), dtype=np.bool_), np.zeros((b, d)),
        np.zeros((b, n)), np.zeros((b, 3, e)), np.zeros((b, d)), np.zeros((b, max(n, a))),
        np.zeros((b, max(1, w))), np.zeros(b, dtype=np.int64), np.zeros(b, dtype=np.bool_))


@jitable
def block_end(state, lo, size):
    """End of the block of rows that starts at row lo: lo + ``size`` rows (at most all),
    extended to the end of a relay (its rows interact) cut by that point."""
    n = state.err.shape[0]
    hi = min(lo + size, n)
    while hi < n and state.quota[hi] > 0 and state.group[hi] == state.group[hi - 1]:
        hi += 1
    return hi


@jitable
def block_size(state, has_deadline):
    """Rows per block (:func:`solve_rows`): all rows with a deadline, else :data:`BLOCK_ROWS`."""
    n = state.err.shape[0]
    return n if has_deadline else min(n, BLOCK_ROWS)


@njit_cached(nogil=True, _nrt=False)
def solve_block(model, targets, config, state, work, lo, hi, iterations, has_deadline, deadline_ns):
    """Start rows lo:hi (scratch rows 0 .. hi - lo - 1 of ``work``), then up to ``iterations``
    iterations of them, iteration-major (every running row takes iteration k before any
    takes k + 1; a relay's waiting rows start later, :func:`relay_turn`). Returns -2 when
    a start state's residual is not finite (no iteration then runs), the iteration at
    which a row failed numerically (that iteration finished for the others), or -1."""
    ok = True
    for b in range(lo, hi):
        ok &= start_candidate(b, b - lo, model, targets, config, state, work)
        first = b == lo or state.group[b] != state.group[b - 1]
        work.waiting[b - lo] = state.quota[b] > 0 and not first and not state.done[b]
        work.started_at[b - lo] = 0
    if not ok:
        return -2
    for it in range(iterations):
        relay_turn(state, work, lo, hi, it, config.max_iters)
        live = 0
        for b in range(lo, hi):
            live += not state.done[b] and not work.waiting[b - lo]
        if live == 0:
            break
        if has_deadline:
            if clock_ns(CLOCK) > deadline_ns:
                for b in range(lo, hi):
                    if not state.done[b]:  # the waiting rows too
                        state.reason[b] = TIME_BUDGET
                        state.done[b] = True
                break
        failed = False
        for b in range(lo, hi):
            if not state.done[b] and not work.waiting[b - lo]:
                iterate(b, b - lo, it, model, targets, config, state, work)
                failed |= state.fail_key[b] >= 0
        if failed:
            return it
    return -1


#: :func:`solve_block` called from :func:`solve_rows`, compiled once (:func:`~.numba_support.native_call`).
call_solve_block = native_call(solve_block)


@njit_cached(nogil=True, _nrt=False)
def solve_rows(model, targets, config, state, work, has_deadline, deadline_ns):
    """The whole solve of the candidates in ``targets``/``state`` in one compiled call; releases
    the GIL (threaded batches run one call per chunk of candidates). Compiled without
    numba's runtime (no reference counting, no allocation; see the module docstring).
    Returns True when a candidate failed numerically (``state.fail_key``).

    The rows are solved in blocks (:func:`block_size`, :func:`block_end`): each block's
    rows are started, then iterated iteration-major, with ``work`` rows 0.. as their
    scratch. Rows are independent, so their results are those of one iteration-major
    pass over all rows, as in the reference; small blocks keep the scratch small
    (allocated once per call) and in the L1 cache. Numerical failures are reported as by one pass: every
    block's start states are evaluated (a failing one stops all iterations of the
    blocks after it), and after a failure at iteration k the later blocks run only
    up to k (an earlier failure there lowers k), so the smallest ``fail_key`` and the
    rows holding it are the same (iterations are counted from the call's start, also
    for a relay's later rows). With a deadline (``deadline_ns``, a :data:`CLOCK`
    reading in ns checked before every iteration when ``has_deadline``) all rows form
    one block: the deadline stops every live row at the same iteration boundary, with
    reason time_budget.
    """
    n = state.err.shape[0]
    for b in range(n):
        state.iterations[b] = 0
        state.reason[b] = MAX_ITERS
        state.fail_key[b] = -1
        state.done[b] = False
    size = block_size(state, has_deadline)
    cap = -1  # iterations the blocks after a failure may run (-1: no failure yet)
    lo = 0
    while lo < n:
        hi = block_end(state, lo, size)
        # Every row runs at most max_iters iterations, a relay's rows one after another.
        iterations = config.max_iters * (hi - lo)
        if cap >= 0:
            iterations = min(iterations, cap)
        at = call_solve_block((model, targets, config, state, work, lo, hi, iterations, has_deadline, deadline_ns))
        if at != -1:
            cap = 0 if at == -2 else (at + 1 if cap < 0 else min(cap, at + 1))
        lo = hi
    if cap >= 0:
        return True
    for b in range(n):
        if config.turn_joints.shape[0] > 0 and meets_tolerances(targets, config, b, state.err[b]):
            nearest_turn(b, 0, model, targets, config, state, work)
        finish_candidate(b, 0, targets, config, state, work)
    return False


#: :func:`solve_rows` called from other kernels, compiled once (:func:`~.numba_support.native_call`).
call_solve_rows = native_call(solve_rows)


@njit_cached(nogil=True)
def run_serial(model_fields, target_fields, config_fields, state_fields, has_deadline, deadline_ns):
    """The compiled entry point of a solve: allocates the scratch of the largest block
    (:func:`alloc_work`) and runs :func:`solve_rows`. Its four named tuples come as
    plain tuples (``tuple(model)``, ...), rebuilt here: numba's dispatcher types plain
    tuples in C but named tuples in Python (slower per call).
    Returns True when a candidate hit a numerical failure (``state.fail_key``)."""
    model, targets = Model(*model_fields), Targets(*target_fields)
    config, state = Config(*config_fields), State(*state_fields)
    size, rows, lo = block_size(state, has_deadline), 1, 0
    while lo < state.err.shape[0]:
        hi = block_end(state, lo, size)
        rows = max(rows, hi - lo)
        lo = hi
    work = alloc_work(rows, model.parent.shape[0], state.err.shape[2], config.active.shape[0],
                      state.q.shape[1], config.stall_window)
    return call_solve_rows((model, targets, config, state, work, has_deadline, deadline_ns))
