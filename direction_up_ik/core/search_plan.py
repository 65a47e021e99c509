"""The search's plan: where each round's seeds come from, and how answers are scored.

Pure functions of the search's options and a built problem, shared by the search's Python
rounds (:mod:`.search`), the compiled search's set-up and the one-target path: which library
and ranks a round of seeds takes (:func:`seed_source`), how many rounds the compiled search
runs (:func:`kernel_rounds`), the score that picks among a candidate's successes
(:func:`selection_score`) and the nearness that picks its reported attempt when none succeeded
(:func:`closeness`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .problem import IKProblem
from .result import IKBatchResult

#: Rounds of seeds from the uniform library before the library near the limits takes turns with
#: it (:func:`seed_source`), in a search of counted rounds (:func:`uniform_rounds`). The compiled
#: search runs these rounds; later ones run in Python (``search._search`` resumes), few candidates
#: being left by then (docs/performance.md, "Later rounds from a library near the limits").
UNIFORM_ROUNDS = 3


def uniform_rounds(num_seeds: int, max_rounds: Optional[int], library_size: int) -> int:
    """Rounds of seeds from the uniform library before the library near the limits takes turns
    with it (:func:`seed_source`): ``UNIFORM_ROUNDS`` when the rounds are counted
    (``max_rounds``); with a time budget alone, every round the uniform library of
    ``library_size`` states holds. The compiled search runs those rounds, a round in a fraction
    of a Python round's time, and a budget then reaches the uniform library's deep ranks as
    before; a Python round is affordable where few rounds are left (docs/performance.md)."""
    if max_rounds is None:
        return library_size // num_seeds
    return UNIFORM_ROUNDS


def seed_source(round_index: int, num_seeds: int, first_rounds: Optional[int] = None):
    """(near_limits, first rank) of the library seeds of round ``round_index`` (1 = the first
    round of seeds): rounds 1 .. ``first_rounds`` (:func:`uniform_rounds`) take the uniform
    library's ranks (0 = nearest) one round after another; after them the library near the limits
    (``seeds.limit_library_for``, from its nearest) and the uniform library's next ranks take
    turns, the library near the limits first. Targets whose in-limit solutions lie near the
    limits get seeds there, and the others keep the uniform library's next seeds every other round.
    ``first_rounds`` None: ``UNIFORM_ROUNDS``."""
    first_rounds = UNIFORM_ROUNDS if first_rounds is None else first_rounds
    if round_index <= first_rounds:
        return False, (round_index - 1) * num_seeds
    later = round_index - first_rounds - 1
    if later % 2 == 0:
        return True, (later // 2) * num_seeds
    return False, (first_rounds + later // 2) * num_seeds


def kernel_rounds(num_seeds: int, max_rounds: Optional[int], library_size: int, timed: bool,
                  limit_library_size: int = 0):
    """(rounds of seeds the compiled search runs, whether the Python rounds may go on after them)
    for a search of ``num_seeds`` seeds per round and ``max_rounds`` (None: until the deadline;
    ``timed``: the search has one) on a uniform library of ``library_size`` states: the uniform
    rounds (:func:`uniform_rounds`) that library holds; with ``limit_library_size`` (the
    library near the limits in the kernel too) every counted round whose seeds both libraries
    hold. Later rounds (and those past a small library's end) are ``search._search``'s. None
    when the library holds no round of seeds, or for rounds until every candidate succeeds
    (neither a round limit nor a deadline: random draws after the library): the Python rounds
    then do all."""
    if num_seeds == 0:
        return 0, False
    if max_rounds is None and not timed:
        return None
    first_rounds = uniform_rounds(num_seeds, max_rounds, library_size)
    rounds = min(first_rounds, library_size // num_seeds)
    if max_rounds is not None and max_rounds <= rounds:
        return max_rounds, False
    if limit_library_size and max_rounds is not None and rounds == first_rounds and \
            ranks_fit(num_seeds, max_rounds, first_rounds, library_size, limit_library_size):
        return max_rounds, False
    return (rounds, True) if rounds else None


def ranks_fit(num_seeds: int, rounds: int, first_rounds: int, library_size: int, limit_library_size: int) -> bool:
    """Whether the seeds of rounds 1 .. ``rounds`` (:func:`seed_source` with ``first_rounds``)
    lie within the uniform library of ``library_size`` states and the one near the limits of
    ``limit_library_size``. Each library's ranks grow round by round, so its last round tells."""
    for r in {min(rounds, first_rounds), rounds - 1, rounds}:
        if r >= 1:
            near_limits, first = seed_source(r, num_seeds, first_rounds)
            if first + num_seeds > (limit_library_size if near_limits else library_size):
                return False
    return True


def selection_score(problem: IKProblem, q: np.ndarray, cost: np.ndarray, selection: str) -> np.ndarray:
    """(n,) score, lower is better: the spec cost, or squared normalised distance to limit centres.

    ``q``: (n, D) joints (any float dtype; float64 arithmetic); ``cost``: (n,), inf = not a success.
    """
    if selection == "least_motion":
        return cost
    mid, half, bounded = center_scales(problem)
    z = np.where(bounded, (q[:, problem.active].astype(np.float64) - mid) / half, 0.0)
    return np.where(np.isfinite(cost), np.sum(z * z, axis=-1), np.inf)


def closeness(problem: IKProblem, result: IKBatchResult, rows=slice(None)) -> np.ndarray:
    """(n,) how near each of ``result``'s ``rows`` came, lower is nearer: per target
    (position_weight e_p)^2 + (rotation_weight e_d)^2 + (rotation_weight e_u)^2 of its
    unweighted errors (the parts it leaves free out), summed target by target: the solver's
    weighted squared residual. The compiled search's is ``search_rounds.closeness``."""
    weights = problem.settings
    parts = (result.position_error[rows], result.direction_error[rows], result.up_error[rows])
    total = np.zeros(len(parts[0]))
    for e in range(parts[0].shape[1]):
        term = (weights.position_weight * parts[0][:, e]) ** 2
        for angle in (parts[1][:, e], parts[2][:, e]):
            term = term + np.where(np.isnan(angle), 0.0, (weights.rotation_weight * angle) ** 2)
        total = total + term
    return total


def center_scales(problem: IKProblem):
    """(mid, half, bounded), each (A,): the limit-centre score's centre and half range of
    each active joint, and whether it counts (both bounds finite and apart; else mid 0,
    half 1)."""
    a = problem.active
    lo, hi = problem.lower[a], problem.upper[a]
    center, bounded = _limit_centers(problem)
    bounded = bounded[a] & (hi > lo)
    mid = np.where(bounded, center[a], 0.0)
    half = np.where(bounded, 0.5 * (np.where(bounded, hi, 1) - np.where(bounded, lo, 0)), 1.0)
    return mid, half, bounded


def seed_anchor(problem: IKProblem, selection: str) -> np.ndarray:
    """(D,) joint state the library's seeds turn their periodic joints towards (whole turns,
    :meth:`~.seeds.SeedLibrary.seeds`): the current state for "least_motion", the limit
    centres (bounded joints) for "limit_center"."""
    if selection == "least_motion":
        return problem.q_initial
    center, bounded = _limit_centers(problem)
    return np.where(bounded, center, problem.q_initial)


def _limit_centers(problem: IKProblem):
    """((D,) centres of the joint bounds, 0 where unbounded; (D,) bool, both bounds finite)."""
    bounded = np.isfinite(problem.lower) & np.isfinite(problem.upper)
    center = 0.5 * (np.where(bounded, problem.lower, 0.0) + np.where(bounded, problem.upper, 0.0))
    return center, bounded
