"""The multi-seed search in the kernels: rounds of library seeds after round 0.

The same rounds as the search's Python reference (``core.search``, nearest seeding, no
callback): each round gives every candidate still short of successes its next K library
states, tried as a relay; the best success by the selection score is kept.
:func:`run_search` is the entry point called from Python.
"""

from __future__ import annotations

import numpy as np

from .iteration import BLOCK_ROWS, alloc_work, call_solve_rows
from .layout import SUPERSEDED, TURN, Leaves, Model, Scan, Search, State, Targets, Config
from .numba_support import CLOCK, clock_ns, jitable, native_call, njit_cached
from .seed_scan import nearest_into
from .vector_math import copy1, copy2, nearest_turns, pairwise_sum


@jitable
def selection_score(config, search, state, b, scratch):
    """The search's score of solved row b of ``state`` (lower is better, a success assumed):
    its cost (least motion), or with ``search.limit_center`` the squared normalised distance
    of its active joints to the limit centres, summed like ``np.sum`` (the reference's
    ``core.search_plan.selection_score``)."""
    if not search.limit_center:
        return state.cost[b]
    q = state.q[b]
    for i in range(config.active.shape[0]):
        if search.center_bounded[i]:
            z = (q[config.active[i]] - search.center_mid[i]) / search.center_half[i]
        else:
            z = 0.0
        scratch[i] = z * z
    return pairwise_sum(scratch, 0, config.active.shape[0])


@jitable
def closeness(config, err):
    """How near a solved row came, lower is nearer: per slot (w_pos e_p)^2 + (w_rot e_d)^2 +
    (w_rot e_u)^2 of its unweighted errors ``err`` (3, E), the free parts (NaN) left out, summed
    slot by slot (the reference's ``core.search_plan.closeness``)."""
    total = 0.0
    for e in range(err.shape[1]):
        x = config.w_pos * err[0, e]
        term = x * x
        if not np.isnan(err[1, e]):
            x = config.w_rot * err[1, e]
            term += x * x
        if not np.isnan(err[2, e]):
            x = config.w_rot * err[2, e]
            term += x * x
        total += term
    return total


@jitable
def seed_source(round_index, k, first_rounds):
    """(near the limits, first rank) of the library seeds of round ``round_index`` (1 = the
    first round of seeds): ``search_plan.seed_source``, the kernel's copy."""
    if round_index <= first_rounds:
        return False, (round_index - 1) * k
    later = round_index - first_rounds - 1
    if later % 2 == 0:
        return True, (later // 2) * k
    return False, (first_rounds + later // 2) * k


@jitable
def seed_rows(targets, search, leaves, lib_q, seed_state, seed_targets, c, base, first, need, scan):
    """Rows base .. base + K - 1 of ``seed_state``/``seed_targets``: candidate c's states of
    the library ``leaves``/``lib_q`` of distance ranks first .. first + K - 1 (nearest
    first), their periodic joints turned by whole turns towards ``search.anchor`` within the
    bounds (``SeedLibrary.seeds``), as one relay (group c, quota ``need``) towards c's targets."""
    k = search.num_seeds
    nearest_into(leaves, search.query[c], first, k, scan.bound, scan.best_d, scan.best_i)
    for s in range(k):
        row, library_state = base + s, lib_q[scan.best_i[first + s]]
        for j in range(library_state.shape[0]):
            seed_state.q[row, j] = library_state[j]
        for p in range(search.periodic.shape[0]):
            col, lo, hi = search.periodic[p], search.periodic_lo[p], search.periodic_hi[p]
            q = seed_state.q[row, col]
            seed_state.q[row, col] = min(max(q + TURN * nearest_turns(q, search.anchor[col], lo, hi), lo), hi)
        for e in range(targets.position.shape[1]):
            for j in range(3):
                seed_targets.position[row, e, j] = targets.position[c, e, j]
                seed_targets.direction[row, e, j] = targets.direction[c, e, j]
                seed_targets.up[row, e, j] = targets.up[c, e, j]
            seed_targets.has_direction[row, e] = targets.has_direction[c, e]
            seed_targets.has_up[row, e] = targets.has_up[c, e]
        seed_state.group[row] = c
        seed_state.quota[row] = need


@jitable
def take_row(dst, c, src, row):
    """Row ``row`` of state ``src`` becomes candidate c's outcome in ``dst``."""
    copy1(dst.q[c], src.q[row])
    copy2(dst.err[c], src.err[row])
    dst.iterations[c] = src.iterations[row]
    dst.reason[c] = src.reason[row]
    dst.success[c] = src.success[row]
    dst.cost[c] = src.cost[row]


@jitable
def target_features(targets, c, reach, axis_scale, out):
    """The seed library's query features of candidate c's targets into ``out`` (F,): per slot
    its position clipped to +-``reach`` and, where constrained, ``axis_scale`` times its axes
    (``seeds.pose_features`` with its ``FEATURE_REACH`` and ``AXIS_SCALE``, the same values)."""
    f = 0
    for e in range(targets.position.shape[1]):
        for j in range(3):
            out[f + j] = min(max(targets.position[c, e, j], -reach), reach)
        f += 3
        if targets.has_direction[c, e]:
            for j in range(3):
                out[f + j] = axis_scale * targets.direction[c, e, j]
            f += 3
        if targets.has_up[c, e]:
            for j in range(3):
                out[f + j] = axis_scale * targets.up[c, e, j]
            f += 3


@jitable
def search_rounds(model, targets, config, state, work, has_deadline, deadline_ns, search, seed_state,
                  seed_targets, scan):
    """The multi-seed search of every candidate of ``state``, whose round 0 (the solve from the
    current state) is done: the rounds of seeds of ``core.search`` (with ``seeding="nearest"``
    and no callback). Each round gives every candidate with fewer than ``search.min_successes``
    successes its next ``search.num_seeds`` library states, tried as a relay (:func:`seed_rows`,
    ``iteration.relay_turn``); a success whose score (:func:`selection_score`) is strictly
    below the candidate's best so far replaces its row of ``state`` (earlier rounds and nearer
    seeds win ties). A candidate without a success so far holds its nearest attempt
    (:func:`closeness`, strictly nearer replaces it). No round starts once the deadline (if
    any) has passed, and a round's rows stop at it. Fills ``search.starts``,
    ``search.successes``, ``search.best_score`` (inf: no success), ``search.iterations``,
    ``search.closest`` and ``search.outcome`` (with ``search.own_query`` it writes
    ``search.query`` and ``search.anchor``, ``search_plan.seed_anchor``'s, first). A round's
    seeds come from the library :func:`seed_source` names. Returns True on a numerical failure."""
    b, k = state.q.shape[0], search.num_seeds
    scratch = work.sq[0]
    if search.own_query:
        for c in range(b):
            target_features(targets, c, search.feature_reach, search.axis_scale, search.query[c])
        copy1(search.anchor, config.q_initial)
        if search.limit_center:  # bounded turned joints towards their limit centres (search_plan.seed_anchor)
            for p in range(search.periodic.shape[0]):
                lo, hi = search.periodic_lo[p], search.periodic_hi[p]
                if np.isfinite(lo) and np.isfinite(hi):
                    search.anchor[search.periodic[p]] = 0.5 * (lo + hi)
    for c in range(b):
        search.starts[c] = 1
        search.successes[c] = 0
        search.best_score[c] = np.inf
        search.iterations[c] = state.iterations[c]
        search.closest[c] = closeness(config, state.err[c])
        if state.success[c]:
            search.successes[c] = 1
            search.best_score[c] = selection_score(config, search, state, c, scratch)
    rounds, status = 1, 0
    while True:
        pending = 0
        for c in range(b):
            pending += search.successes[c] < search.min_successes
        if pending > 0 and has_deadline and clock_ns(CLOCK) >= deadline_ns:
            status = 1
            break
        if pending == 0 or k == 0:
            break
        if rounds > search.max_rounds:
            status = 2 if search.unlimited else 0
            break
        near_limits, first = seed_source(rounds, k, search.first_rounds)
        leaves, lib_q = (search.limit_leaves, search.limit_lib_q) if near_limits else (search.leaves, search.lib_q)
        n = 0
        for c in range(b):
            if search.successes[c] < search.min_successes:
                need = search.min_successes - search.successes[c]
                seed_rows(targets, search, leaves, lib_q, seed_state, seed_targets, c, n * k, first, need, scan)
                n += 1
        rows = n * k
        ss, ts = seed_state, seed_targets
        round_state = State(ss.q[:rows], ss.r[:rows], ss.ssr[:rows], ss.err[:rows], ss.iterations[:rows],
                            ss.reason[:rows], ss.fail_key[:rows], ss.done[:rows], ss.success[:rows],
                            ss.cost[:rows], ss.group[:rows], ss.quota[:rows])
        round_targets = Targets(ts.position[:rows], ts.direction[:rows], ts.up[:rows], ts.has_direction[:rows],
                                ts.has_up[:rows], ts.local_direction, ts.local_up)
        if call_solve_rows((model, round_targets, config, round_state, work, has_deadline, deadline_ns)):
            return True
        for row in range(rows):
            c = round_state.group[row]
            search.iterations[c] += round_state.iterations[row]
            if round_state.reason[row] != SUPERSEDED:
                search.starts[c] += 1
            if round_state.success[row]:
                search.successes[c] += 1
                score = selection_score(config, search, round_state, row, scratch)
                if score < search.best_score[c]:
                    search.best_score[c] = score
                    take_row(state, c, round_state, row)
            elif search.successes[c] == 0:
                near = closeness(config, round_state.err[row])
                if near < search.closest[c]:
                    search.closest[c] = near
                    take_row(state, c, round_state, row)
        rounds += 1
    search.outcome[0] = rounds
    search.outcome[1] = status
    return False


@njit_cached(nogil=True, _nrt=False)
def search_rows(model, targets, config, state, work, has_deadline, deadline_ns, search, seed_state,
                seed_targets, scan):
    """The multi-seed search of the candidates in ``targets``/``state`` in one compiled call:
    round 0 (``iteration.solve_rows`` from the start states in ``state``, unless
    ``search.round0_done``), then the rounds of seeds (:func:`search_rounds`, rows
    ``seed_state``/``seed_targets``). Compiled without numba's runtime, releases the GIL.
    Returns True on a numerical failure (the search stops there)."""
    if not search.round0_done and call_solve_rows((model, targets, config, state, work, has_deadline, deadline_ns)):
        return True
    return search_rounds(model, targets, config, state, work, has_deadline, deadline_ns, search, seed_state,
                         seed_targets, scan)


#: :func:`search_rows` called from :func:`run_search`, compiled once (:func:`~.numba_support.native_call`).
call_search_rows = native_call(search_rows)


@jitable
def search_scratch(b, k, max_rounds, has_deadline, model, targets, config, state, search):
    """The scratch of a search of ``b`` candidates with ``k`` seeds per round and at most
    ``max_rounds`` rounds (:func:`search_rows`): the rows of a round of seeds (a
    :data:`~.layout.State` and :data:`~.layout.Targets` of b * k rows, their local axes
    ``targets``'), the seed ranking's :data:`~.layout.Scan` (for either library of the
    :data:`~.layout.Search` ``search``) and the :data:`~.layout.Work` of
    the largest block (blocks of round 0 hold ``BLOCK_ROWS`` rows, blocks of seeds up to a
    relay more; with a deadline a round is one block). None of it needs initial values. Also
    plain Python: ``api.OneCandidate`` allocates it once with numpy."""
    d, e = state.q.shape[1], state.err.shape[2]
    if has_deadline:
        rows = max(1, b, b * k)
    else:
        rows = max(1, min(b, BLOCK_ROWS), min(b * k, BLOCK_ROWS + k - 1))
    seeds = State(np.empty((b * k, d)), np.empty((b * k, 9 * e)), np.empty(b * k), np.empty((b * k, 3, e)),
                  np.empty(b * k, dtype=np.int32), np.empty(b * k, dtype=np.int64),
                  np.empty(b * k, dtype=np.int64), np.empty(b * k, dtype=np.bool_),
                  np.empty(b * k, dtype=np.int32), np.empty(b * k), np.empty(b * k, dtype=np.int64),
                  np.empty(b * k, dtype=np.int64))
    seed_targets = Targets(np.empty((b * k, e, 3)), np.empty((b * k, e, 3)), np.empty((b * k, e, 3)),
                           np.empty((b * k, e), dtype=np.bool_), np.empty((b * k, e), dtype=np.bool_),
                           targets.local_direction, targets.local_up)
    ranks = max_rounds * k
    leaf_count = max(search.leaves.lo_t.shape[1], search.limit_leaves.lo_t.shape[1])
    scan = Scan(np.empty(leaf_count), np.empty(ranks), np.empty(ranks, dtype=np.int64))
    work = alloc_work(rows, model.parent.shape[0], e, config.active.shape[0], d, config.stall_window)
    return seeds, seed_targets, scan, work


@njit_cached(nogil=True)
def run_search(model_fields, target_fields, config_fields, state_fields, has_deadline, deadline_ns, search_fields):
    """The compiled entry point of a search (:func:`search_rows`): allocates its scratch
    (:func:`search_scratch`). Arguments as for ``iteration.run_serial`` (``has_deadline`` and
    ``deadline_ns`` come from Python even without a deadline, so that ``solve_rows`` is
    compiled for one signature, not a second one for the literal constants ``False, 0``);
    ``search_fields``: a :data:`Search` as a plain tuple (its ``leaves`` one too).
    Returns True when a candidate hit a numerical failure (then the search stopped)."""
    model, targets = Model(*model_fields), Targets(*target_fields)
    config, state = Config(*config_fields), State(*state_fields)
    f = search_fields
    search = Search(*(f[:6] + (Leaves(*f[6]),) + f[7:26] + (Leaves(*f[26]), f[27])))
    b, k = state.q.shape[0], search.num_seeds
    seeds, seed_targets, scan, work = search_scratch(b, k, search.max_rounds, has_deadline, model, targets, config,
                                                     state, search)
    return call_search_rows((model, targets, config, state, work, has_deadline, deadline_ns, search, seeds,
                             seed_targets, scan))
