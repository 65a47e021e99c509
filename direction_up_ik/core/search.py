"""Multi-seed global search (beyond the spec; opt-in).

A local damped-least-squares solve from the current state fails on far targets.
:func:`~.search_api.robo_search_ik_direction_up` (the public call, in :mod:`.search_api`)
first solves every candidate from the current state (round 0: the spec's local solve, with the search's step cap and
Jacobian), then, for the candidates
still short of ``min_successes`` accepted solutions, runs rounds of K in-limit
seeds each, all seeds of a round in one vectorised batch, until each
candidate has enough successes, a time budget or a round limit is reached.
The seeds are, by default, the states of a fixed library whose TCP poses lie
nearest the target (:mod:`.seeds`), next-nearest in each further round; after
``search_plan.UNIFORM_ROUNDS`` rounds (with a round limit; with a time budget alone, after the
library's end) a second library, of states near the joint limits, takes turns with it
(:func:`~.search_plan.seed_source`); ``seeding="random"`` draws them uniformly instead.
Within a round a candidate's seeds are tried one after another, nearest first
(a relay, in one batch with the other candidates' seeds): a seed starts when the
one before it has stopped, and once as many have converged as the candidate still
needs, its remaining seeds never start, so a round costs about the iterations of
the seeds tried up to its first success.
Trying the current state alone first costs one local solve for the targets it
reaches (most of them, in practice) and keeps their answer the nearest one.
Among the successes of a candidate it keeps the one with the least joint motion
from the current state (the spec's cost) or, selectable, the one closest to the
joint-limit centres.

With the compiled backend, the library seeding and no ``accept`` callback (the usual
call), the whole search runs in compiled code (:func:`_compiled_search`,
``compiled.search``): a call per chunk of candidates does round 0 and every round of seeds
of its candidates, a big batch's chunks queued for the worker threads, with the same
results as the rounds in Python (:func:`_search`, the reference, which runs every other
search). Those split a big batch into one search per core
(:data:`SPLIT_MIN_CANDIDATES`), with the same results. The spec's solver
(:func:`~direction_up_ik.core.batch.robo_solve_ik_direction_up_multi_batch`)
is untouched by this module.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import namedtuple
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .backend import batch_threads, compiled_backend, compiled_module, solve_problem
from .collision import CollisionReport, CollisionScene
from .errors import InputValidationError, NumericalFailure
from .problem import IKProblem
from .result import (STOP_CONVERGED, STOP_IN_COLLISION, STOP_SUPERSEDED, IKBatchResult, merged_backend,
                     replace_rows, select_rows)
from .seeds import (LIBRARY_SIZE, LIMIT_LIBRARY_SIZE, library_for, limit_library_for, pose_features, random_starts,
                    start_bounds)
from .search_plan import (center_scales, closeness, kernel_rounds, ranks_fit, seed_anchor, seed_source,
                          selection_score, uniform_rounds)
from .settings import search_settings

#: A search of at least this many candidates that cannot run whole in compiled code runs as
#: one search per thread of the compiled backend, each on a contiguous slice of the
#: candidates (:func:`search_problem`): the slices' Python and seed-ranking steps then
#: overlap the other slices' solves. Results are the same.
SPLIT_MIN_CANDIDATES = 128

#: accept(candidate_index, joint_q (D,) float32) -> bool; False rejects a solution.
AcceptFn = Callable[[int, np.ndarray], bool]
#: row_filter(joint_q (n, D) float32) -> (n,) bool: the solutions kept (vectorised, thread-safe:
#: the collision scene's check).
RowFilter = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SearchResult:
    """Outcome of a multi-seed search.

    Attributes:
        result: per candidate the selected start's outcome (an IKBatchResult;
            ``cost`` is joint motion from the current state as in the spec;
            ``best_index`` follows ``selection``; ``iterations`` those of that start).
            A candidate without an accepted success reports the attempt that came
            nearest (:func:`~.search_plan.closeness`: least weighted squared error; the
            first of equal ones, round 0 first), so its errors tell "far out of reach"
            from "almost".
        rounds: rounds run, round 0 (the current state) included;
        starts: (B,) starts solved per candidate (a round's seeds after its last needed
            success are not);
        successes: (B,) accepted successes per candidate; elapsed_s: wall time;
        timed_out: True when the time budget stopped the search;
        iterations: (B,) int64 iterations summed over every start of the candidate's search;
        clearance: (B,) float64 metres, with a ``collision_scene``: the clearance
            (``CollisionReport.clearance``) of each candidate's returned ``joint_q``, > 0 for
            every success; NaN without a scene (not checked).
        closest_pair: (B,) tuples (body, body), with a ``collision_scene``: the pair
            (link or obstacle names) at that clearance (``CollisionReport.closest_pair`` of the
            returned ``joint_q``); ("", "") without a scene or where no pair is checked.
    """

    result: IKBatchResult
    rounds: int
    starts: np.ndarray
    successes: np.ndarray
    elapsed_s: float
    timed_out: bool
    iterations: np.ndarray
    clearance: Optional[np.ndarray] = None
    closest_pair: Optional[tuple] = None

    def collision_report(self) -> CollisionReport:
        """The :class:`~.collision.CollisionReport` of the returned ``joint_q`` (B, D), as the
        scene's ``check`` of them gives it, from what the search checked (a search with a
        ``collision_scene``; without one every clearance is NaN and so not collision-free)."""
        return CollisionReport(collision_free=self.clearance > 0.0, clearance=self.clearance,
                               closest_pair=self.closest_pair)


#: The ``closest_pair`` of a candidate searched without a collision scene.
NO_PAIR = ("", "")

_thread_local = threading.local()


def _spare_generators() -> dict:
    """This thread's idle generators: {int seed: (generator, its seeded state)}."""
    spare = getattr(_thread_local, "generators", None)
    if spare is None:
        spare = _thread_local.generators = {}
    return spare


def _take_generator(seed):
    """``(np.random.default_rng(seed), key)``; for an int seed, this thread's generator
    of an earlier call reset to the seeded state (cheaper than seeding a new one).
    Return it with :func:`_give_back`; one taken and not given back is simply dropped."""
    if type(seed) is not int:
        return np.random.default_rng(seed), None
    entry = _spare_generators().pop(seed, None)
    if entry is None:
        generator = np.random.default_rng(seed)
        entry = (generator, generator.bit_generator.state)
    else:
        entry[0].bit_generator.state = entry[1]
    return entry[0], (seed, entry)


def _give_back(key) -> None:
    spare = _spare_generators()
    if key is not None and len(spare) < 16:
        seed, entry = key
        spare[seed] = entry


def _best_of_each(owner: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Positions of each owner's lowest score (the first of equal scores), owners ascending."""
    order = np.lexsort((np.arange(len(owner)), score, owner))
    first = np.ones(len(order), dtype=bool)
    first[1:] = owner[order[1:]] != owner[order[:-1]]
    return order[first]


def search_problem(problem: IKProblem, *, num_seeds: int = 4, time_budget: Optional[float] = None,
                   max_rounds: Optional[int] = None, min_successes: int = 1,
                   selection: str = "least_motion", random_seed: Optional[int] = 0,
                   accept: Optional[AcceptFn] = None, seeding: str = "nearest",
                   collision_scene: Optional[CollisionScene] = None) -> SearchResult:
    """Run the search on a built problem (see :func:`.search_api.robo_search_ik_direction_up`).

    The problem's settings are used as they are (build it with ``**SEARCH_SOLVER_DEFAULTS``
    for the search's defaults). The options follow
    :class:`~direction_up_ik.core.settings.SearchSettings`.
    A big batch may run as one search per core on slices of the candidates
    (:data:`SPLIT_MIN_CANDIDATES`, :func:`split_count`); each candidate's search is the
    same, so the results are too.
    """
    options = search_settings(num_seeds=num_seeds, time_budget=time_budget, max_rounds=max_rounds,
                              min_successes=min_successes, selection=selection, random_seed=random_seed,
                              seeding=seeding)
    if collision_scene is None:
        found = _search_problem(problem, options, accept, None)
        return dataclasses.replace(found, clearance=np.full(problem.num_candidates, np.nan),
                                   closest_pair=(NO_PAIR,) * problem.num_candidates)
    return _collision_search(problem, options, accept, checked_scene(problem.robot, collision_scene))


def checked_scene(robot, scene) -> CollisionScene:
    """``scene`` when it is a CollisionScene of ``robot``'s model."""
    if not isinstance(scene, CollisionScene):
        raise InputValidationError("collision_scene", f"must be a CollisionScene or None, got "
                                                      f"{type(scene).__name__}")
    if tuple(scene.robot.joint_names) != tuple(robot.joint_names):
        raise InputValidationError("collision_scene", "was built for another robot model (its joints "
                                                      f"{list(scene.robot.joint_names)} differ)")
    return scene


def _collision_search(problem: IKProblem, options, accept: Optional[AcceptFn], scene: CollisionScene) -> SearchResult:
    """The search with a collision scene: first the search without it (the compiled one, when it
    applies), whose answers mostly are collision-free already; then the candidates whose answer
    collides again, from the start, in the time left, in the Python rounds with the scene's check
    as a row filter (their colliding successes do not count, so their seeds go on)."""
    start = time.perf_counter()
    first = _search_problem(problem, options, accept, None)
    return collision_search_after(first, lambda: problem, options, accept, scene, start)


def collision_search_after(first: SearchResult, problem_of: Callable[[], IKProblem], options,
                           accept: Optional[AcceptFn], scene: CollisionScene, start: float) -> SearchResult:
    """:func:`_collision_search` after its first search, ``first`` (begun at ``perf_counter``
    time ``start``): the check of its answers and the search again of the candidates whose
    success collides, on the problem ``problem_of()`` gives (asked for only then: a caller
    with kept arrays, ``search_api``'s one-candidate path, builds none otherwise)."""
    report = scene.check(first.result.joint_q)
    redo = np.flatnonzero((first.result.success == 1) & ~report.collision_free)
    clearance, pairs = report.clearance, report.closest_pair
    if len(redo):
        problem = problem_of()
        left = None
        if options.time_budget is not None:
            # round 0 always runs: a spent budget still gives each candidate its current state
            left = max(options.time_budget - (time.perf_counter() - start), 1e-9)
        again = _search_problem(problem.select(redo), dataclasses.replace(options, time_budget=left), accept,
                                scene.collision_free)
        first = _splice(problem, options.selection, first, again, redo)
        checked = scene.check(again.result.joint_q)
        clearance = clearance.copy()
        clearance[redo] = checked.clearance
        pairs = list(pairs)
        for i, row in enumerate(redo.tolist()):
            pairs[row] = checked.closest_pair[i]
        pairs = tuple(pairs)
    result = first.result
    reasons = tuple(STOP_IN_COLLISION if (reason == STOP_CONVERGED and not ok and gap <= 0.0) else reason
                    for reason, ok, gap in zip(result.stop_reason, result.success.tolist(), clearance.tolist()))
    if reasons != result.stop_reason:
        result = dataclasses.replace(result, stop_reason=reasons)
    return dataclasses.replace(first, result=result, clearance=clearance, closest_pair=pairs,
                               elapsed_s=time.perf_counter() - start)


def _splice(problem: IKProblem, selection: str, found: SearchResult, again: SearchResult,
            rows: np.ndarray) -> SearchResult:
    """``found`` with candidates ``rows`` replaced by ``again`` (their new search); starts and
    iterations add up, ``best_index`` is chosen anew."""
    result = replace_rows(found.result, rows, again.result, lambda success, cost, joint_q: selection_score(
        problem, joint_q, np.where(success == 1, cost, np.inf), selection))
    starts, iterations, successes = found.starts.copy(), found.iterations.copy(), found.successes.copy()
    starts[rows] += again.starts
    iterations[rows] += again.iterations
    successes[rows] = again.successes
    return SearchResult(result=result, rounds=max(found.rounds, again.rounds), starts=starts, successes=successes,
                        elapsed_s=0.0, timed_out=found.timed_out or again.timed_out, iterations=iterations)


def _search_problem(problem: IKProblem, options, accept: Optional[AcceptFn],
                    row_filter: Optional[RowFilter]) -> SearchResult:
    """:func:`search_problem` of validated ``options`` (a SearchSettings)."""
    num_seeds, time_budget, max_rounds = options.num_seeds, options.time_budget, options.max_rounds
    min_successes, selection, seeding = options.min_successes, options.selection, options.seeding
    random_seed = options.random_seed
    start_time = time.perf_counter()
    deadline = None if time_budget is None else start_time + float(time_budget)
    options = dict(num_seeds=num_seeds, deadline=deadline, max_rounds=max_rounds,
                   min_successes=min_successes, selection=selection, random_seed=random_seed,
                   accept=accept, seeding=seeding, row_filter=row_filter)
    if accept is None and row_filter is None and seeding == "nearest":
        found = _compiled_search(problem, num_seeds=num_seeds, deadline=deadline, max_rounds=max_rounds,
                                 min_successes=min_successes, selection=selection)
        if found is not None and found.used_up:
            found, _ = _search(problem, parallel=None, resume=found, **options)
        if found is not None:
            return SearchResult(result=found.result, rounds=found.rounds, starts=found.starts,
                                successes=found.successes, elapsed_s=time.perf_counter() - start_time,
                                timed_out=found.timed_out, iterations=found.iterations)
    parts = split_count(problem, num_seeds=num_seeds, max_rounds=max_rounds, timed=deadline is not None,
                        accept=accept, seeding=seeding)
    if parts == 1:
        found, _ = _search(problem, parallel=None, **options)
    else:
        cuts = np.linspace(0, problem.num_candidates, parts + 1).astype(int)
        pool = compiled_module().executor()  # parts > 1: the compiled backend's threads
        jobs = [pool.submit(_search, problem.select(np.arange(lo, hi)), parallel=False, **options)
                for lo, hi in zip(cuts[:-1], cuts[1:])]
        try:
            found = _merge([job.result() for job in jobs])
        except NumericalFailure:
            # A slice's failure names its own rows: search all at once to raise what an
            # unsplit search raises (the same candidates, the earliest failure of all).
            found, _ = _search(problem, parallel=None, **options)
    return SearchResult(result=found.result, rounds=found.rounds, starts=found.starts,
                        successes=found.successes, elapsed_s=time.perf_counter() - start_time,
                        timed_out=found.timed_out, iterations=found.iterations)


#: False keeps every search on the Python rounds of :func:`_search` (the reference of the
#: compiled search, :func:`_compiled_search`; tests compare the two).
COMPILED_SEARCH = True


#: What :func:`_compiled_search` found: a SearchResult's result, rounds, starts, successes,
#: timed_out, iterations, and each candidate's ``best_score`` (inf: none) and ``closest`` (the
#: :func:`~.search_plan.closeness` of the attempt reported where no success; None when round 0
#: settled every candidate); ``used_up``: the kernel's rounds
#: (:func:`~.search_plan.kernel_rounds`) ended before the deadline and the round limit with
#: candidates pending (:func:`_search` goes on from there).
_Compiled = namedtuple("_Compiled", ("result", "rounds", "starts", "successes", "best_score", "timed_out",
                                     "used_up", "iterations", "closest"))


def _compiled_search(problem: IKProblem, *, num_seeds: int, deadline: Optional[float],
                     max_rounds: Optional[int], min_successes: int, selection: str) -> Optional[_Compiled]:
    """The search of validated options with nearest seeding and no callback, as compiled
    calls (``compiled.search``): the same rounds as :func:`_search` with no Python between
    them, each candidate's seeds ranked by a scan of the library instead of the k-d tree
    (the same ranks), a big batch in chunks queued for the worker threads. None when it
    does not apply, and :func:`_search` runs: numba unavailable or off for this robot,
    candidates of several constraint patterns, no active joint, untimed rounds without a
    round limit, or a numerical failure (which :func:`_search` raises). It runs the rounds
    :func:`~.search_plan.kernel_rounds` gives it (counted rounds with both libraries, else the
    uniform library's); candidates still pending after them with rounds left before the
    deadline and the round limit come back ``used_up``: :func:`_search` goes on from them (the
    library near the limits after a budget's uniform rounds, random draws after the
    libraries), as it would have."""
    module = compiled_backend(problem) if COMPILED_SEARCH else None
    b = problem.num_candidates
    if module is None or b == 0 or len(problem.active) == 0:
        return None
    has_direction, has_up = problem.has_direction, problem.has_up
    if b > 1 and not ((has_direction == has_direction[0]).all() and (has_up == has_up[0]).all()):
        return None
    plan = kernel_rounds(num_seeds, max_rounds, LIBRARY_SIZE, deadline is not None, LIMIT_LIBRARY_SIZE)
    if plan is None:
        return None
    rounds, more = plan
    first_rounds = uniform_rounds(num_seeds, max_rounds, LIBRARY_SIZE)
    limit_center = selection == "limit_center"
    # With ``more``, candidates pending after the kernel's rounds come back used_up (status 2).
    out = module.search(problem, num_seeds=num_seeds, max_rounds=rounds, unlimited=more,
                        min_successes=min_successes, limit_center=limit_center,
                        seed_arrays=lambda: seed_arrays_of(problem, num_seeds, rounds, selection, first_rounds),
                        deadline=deadline)
    if out is None:
        return None
    result, score, timed_out, closest = out.result, out.best_score, out.status == 1, out.closest
    if score is None:  # round 0 settled every candidate, as in _search's shortcut
        score = selection_score(problem, result.joint_q, result.cost, selection)
        # closest stays None: only a search that used up the library resumes from it
        if limit_center:
            result = dataclasses.replace(result, best_index=int(np.argmin(score)) if result.success.any()
                                         else None)
        late = deadline is not None and time.perf_counter() >= deadline
        timed_out = bool(late and (out.successes < min_successes).any())
    return _Compiled(result, out.rounds, out.starts, out.successes, score, timed_out, out.status == 2,
                     out.iterations, closest)


def seed_arrays_of(problem: IKProblem, num_seeds: int, rounds: int, selection: str,
                   first_rounds: Optional[int] = None) -> Optional[dict]:
    """The library and selection arrays of the compiled search (``compiled.search``'s
    ``seed_arrays``) for ``rounds`` rounds of ``num_seeds`` seeds of the problem's candidates
    (one constraint pattern): rounds after ``first_rounds`` (None: none) take turns with the
    library near the limits (``search_plan.seed_source``). None when the libraries hold fewer
    states (only where a test makes a small one)."""
    library = library_for(problem)
    first_rounds = rounds if first_rounds is None else min(first_rounds, rounds)
    limit = limit_library_for(problem) if rounds > first_rounds else None
    if not ranks_fit(num_seeds, rounds, first_rounds, len(library), 0 if limit is None else len(limit)):
        return None
    has_direction, has_up = problem.has_direction[0], problem.has_up[0]
    leaves, lib_q, periodic = library.kernel_arrays(problem, has_direction, has_up)
    # Without later rounds the kernel never reads the second library: the uniform one stands in.
    limit_leaves, limit_q, _ = (leaves, lib_q, None) if limit is None else \
        limit.kernel_arrays(problem, has_direction, has_up)
    query = pose_features(problem.target_position, problem.target_direction, problem.target_up,
                          has_direction, has_up)
    if selection == "limit_center":
        mid, half, bounded = (np.ascontiguousarray(x) for x in center_scales(problem))
    else:
        mid, half, bounded = np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool)
    return dict(leaves=leaves, query=np.ascontiguousarray(query, dtype=np.float64), lib_q=lib_q,
                periodic=periodic, periodic_lo=np.array(problem.lower[periodic], dtype=np.float64),
                periodic_hi=np.array(problem.upper[periodic], dtype=np.float64),
                anchor=np.array(seed_anchor(problem, selection), dtype=np.float64),
                center_mid=mid, center_half=half, center_bounded=bounded, first_rounds=int(first_rounds),
                limit_leaves=limit_leaves, limit_lib_q=limit_q)


def split_count(problem: IKProblem, *, num_seeds: int, max_rounds: Optional[int], timed: bool,
                accept, seeding: str) -> int:
    """Slices :func:`search_problem` cuts the candidates into: the compiled backend's
    threads for at least :data:`SPLIT_MIN_CANDIDATES` candidates, else 1. Also 1 with an
    ``accept`` callback (called from one thread, as MoveIt's callbacks expect), with
    ``seeding="random"``, or when untimed rounds may use up the seed library (the random
    draws that follow depend on the order of all pending candidates, so slices would draw
    other seeds; with a time budget the rounds depend on timing anyway)."""
    if problem.num_candidates < SPLIT_MIN_CANDIDATES or accept is not None or seeding != "nearest":
        return 1
    if not timed and (max_rounds is None or max_rounds * num_seeds > LIBRARY_SIZE):
        return 1
    return max(1, min(batch_threads(problem), problem.num_candidates // (SPLIT_MIN_CANDIDATES // 2)))


def _merge(parts) -> SearchResult:
    """One search's outcome from its slices' (:func:`_search` results, in candidate order)."""
    results = [found.result for found, _ in parts]
    score = np.concatenate([best for _, best in parts])

    def cat(field):
        return np.concatenate([getattr(r, field) for r in results])
    success = cat("success")
    result = IKBatchResult(
        joint_q=cat("joint_q"), success=success, cost=cat("cost"),
        best_index=int(np.argmin(score)) if success.any() else None,
        position_error=cat("position_error"), direction_error=cat("direction_error"),
        up_error=cat("up_error"), iterations=cat("iterations"),
        stop_reason=tuple(reason for r in results for reason in r.stop_reason),
        active_dof_ids=results[0].active_dof_ids, backend=merged_backend(results))
    return SearchResult(result=result, rounds=max(found.rounds for found, _ in parts),
                        starts=np.concatenate([found.starts for found, _ in parts]),
                        successes=np.concatenate([found.successes for found, _ in parts]),
                        elapsed_s=0.0, timed_out=any(found.timed_out for found, _ in parts),
                        iterations=np.concatenate([found.iterations for found, _ in parts]))


def _search(problem: IKProblem, *, num_seeds: int, deadline: Optional[float], max_rounds: Optional[int],
            min_successes: int, selection: str, random_seed, accept: Optional[AcceptFn], seeding: str,
            parallel: Optional[bool], resume: Optional[_Compiled] = None,
            row_filter: Optional[RowFilter] = None):
    """The search of validated options: (SearchResult with elapsed_s 0, (B,) selection score
    of each candidate's pick, inf = none). ``parallel``: of the solves (solve_problem's).
    ``resume``: the rounds the compiled search ran (no callback), to go on from.
    ``row_filter``: rejects successes, like ``accept`` but a batch at a time."""
    b = problem.num_candidates
    if resume is not None:
        # Only the candidates still short of successes take more rounds, so the rounds run on
        # those rows alone (their bookkeeping then costs by pending candidate, not by batch; the
        # same rounds and seeds) and their outcome replaces theirs in the kernel's result.
        rows = np.flatnonzero(resume.successes < min_successes)
        best_score = resume.best_score.copy()
        found, best_score[rows] = _search_rounds(
            problem.select(rows), select_rows(resume.result, rows), resume.rounds, resume.starts[rows],
            resume.successes[rows], resume.best_score[rows], np.where(np.isfinite(resume.best_score[rows]), 0, -1),
            resume.iterations[rows], resume.closest[rows], num_seeds=num_seeds, deadline=deadline,
            max_rounds=max_rounds, min_successes=min_successes, selection=selection, random_seed=random_seed,
            accept=None, seeding=seeding, parallel=parallel, row_filter=row_filter)
        starts, successes, iterations = resume.starts.copy(), resume.successes.copy(), resume.iterations.copy()
        starts[rows], successes[rows], iterations[rows] = found.starts, found.successes, found.iterations
        result = replace_rows(resume.result, rows, found.result, lambda *fields: best_score)
        return SearchResult(result=result, rounds=found.rounds, starts=starts, successes=successes,
                            elapsed_s=0.0, timed_out=found.timed_out, iterations=iterations), best_score
    # Round 0: every candidate from the current state (the spec's local solve).
    first = solve_problem(problem, None, deadline, parallel=parallel)
    if accept is None and row_filter is None and selection == "least_motion" and min_successes == 1 \
            and (num_seeds == 0 or first.success.all()):
        # Nothing left to search (the common single-target case): round 0's result
        # is the answer as it stands, without the bookkeeping below.
        ok = first.success.astype(np.int64)
        late = deadline is not None and time.perf_counter() >= deadline
        return SearchResult(result=first, rounds=1, starts=np.ones(b, dtype=np.int64), successes=ok,
                            elapsed_s=0.0, timed_out=bool(late and not ok.all()),
                            iterations=first.iterations.astype(np.int64)), first.cost
    return _search_rounds(problem, first, 0, np.ones(b, dtype=np.int64), np.zeros(b, dtype=np.int64),
                          np.full(b, np.inf), np.full(b, -1), np.zeros(b, dtype=np.int64), np.full(b, np.inf),
                          num_seeds=num_seeds, deadline=deadline,
                          max_rounds=max_rounds, min_successes=min_successes, selection=selection,
                          random_seed=random_seed, accept=accept, seeding=seeding, parallel=parallel,
                          row_filter=row_filter)


def _search_rounds(problem: IKProblem, first: IKBatchResult, rounds: int, starts: np.ndarray,
                   successes: np.ndarray, best_score: np.ndarray, pick_round: np.ndarray, iterations: np.ndarray,
                   closest: np.ndarray, *, num_seeds: int,
                   deadline: Optional[float], max_rounds: Optional[int], min_successes: int, selection: str,
                   random_seed, accept: Optional[AcceptFn], seeding: str, parallel: Optional[bool],
                   row_filter: Optional[RowFilter] = None):
    """:func:`_search`'s rounds of seeds after ``rounds`` rounds (0: ``first`` is round 0's
    result, still to be counted; else the rounds so far summed up in ``first``, one row per
    candidate: its pick, or its nearest attempt where ``pick_round`` is -1, with ``starts``,
    ``successes``, ``best_score``, ``iterations`` and ``closest`` so far)."""
    b = problem.num_candidates
    results = []  # each round's result, round 0 (or the rounds so far) first
    # Per candidate its selected success: round (-1 = none yet) and row in that round.
    pick_row = np.arange(b)
    # A candidate without one reports its nearest attempt (closeness ``closest``): round
    # near_round, row near_row (at first row c of round 0, or of the rounds so far).
    near_round, near_row = np.zeros(b, dtype=np.int64), np.arange(b)

    def count_successes(out: IKBatchResult, cand: np.ndarray, ok: np.ndarray) -> None:
        """Count one round's accepted successes ``ok`` and keep each candidate's best."""
        score = selection_score(problem, out.joint_q, np.where(ok, out.cost, np.inf), selection)
        idx = np.flatnonzero(ok)
        owner = cand[idx]
        np.add.at(successes, owner, 1)
        # Each candidate's best row of this round, kept when strictly better than
        # its best so far (so earlier rounds win ties).
        best = idx[_best_of_each(owner, score[idx])]
        better = best[score[best] < best_score[cand[best]]]
        picked = cand[better]  # distinct: one row per candidate
        best_score[picked] = score[better]
        pick_round[picked] = len(results) - 1
        pick_row[picked] = better

    def record(out: IKBatchResult, cand: np.ndarray) -> None:
        """Count the accepted successes and the iterations of one round's rows (row i solved
        candidate cand[i]); keep the nearest attempt of candidates without a success."""
        results.append(out)
        np.add.at(iterations, cand, out.iterations)
        ok = out.success.astype(bool)
        if row_filter is not None and ok.any():
            rows = np.flatnonzero(ok)
            ok[rows] = row_filter(out.joint_q[rows])
        if accept is not None:
            for i in np.flatnonzero(ok):
                ok[i] = bool(accept(int(cand[i]), out.joint_q[i].copy()))
        if ok.any():
            count_successes(out, cand, ok)
        failed = np.flatnonzero(~ok & (successes[cand] == 0))
        if len(failed):
            near = closeness(problem, out, failed)
            mine = _best_of_each(cand[failed], near)
            row, near = failed[mine], near[mine]
            better = near < closest[cand[row]]
            owner = cand[row[better]]
            closest[owner] = near[better]
            near_round[owner] = len(results) - 1
            near_row[owner] = row[better]

    if rounds == 0:
        record(first, np.arange(b))
        rounds = 1
    else:
        results.append(first)
    rng = rng_key = bounds = anchor = first_rounds = None  # created when a round needs them
    libraries = {}  # near_limits -> the SeedLibrary of that kind, looked up when a round needs it
    timed_out = False
    while True:
        pending = np.flatnonzero(successes < min_successes)
        if deadline is not None and time.perf_counter() >= deadline and len(pending):
            timed_out = True
            break
        if len(pending) == 0 or num_seeds == 0 or (max_rounds is not None and rounds > max_rounds):
            break
        cand = np.repeat(pending, num_seeds)
        source = None
        if seeding == "nearest":
            if anchor is None:
                anchor = seed_anchor(problem, selection)
                libraries[False] = library_for(problem)
                first_rounds = uniform_rounds(num_seeds, max_rounds, len(libraries[False]))
            # every pending candidate was in every round: its ranks follow from the round
            near_limits, first_rank = seed_source(rounds, num_seeds, first_rounds)
            source = libraries.get(near_limits)
            if source is None:
                source = libraries[near_limits] = (limit_library_for if near_limits else library_for)(problem)
        if source is not None and first_rank + num_seeds <= len(source):
            seeds = source.seeds(problem, pending, first_rank, num_seeds, anchor)
        else:
            if rng is None:
                rng, rng_key = _take_generator(random_seed)
                bounds = start_bounds(problem)
            seeds = random_starts(problem, len(cand), rng, bounds)
        # A candidate's seeds are tried one after another (a relay), nearest first, until
        # as many converge as it still needs: most rounds end with their first seed.
        need = min_successes - successes[cand]
        out = solve_problem(problem.select(cand), seeds, deadline, relay=(cand, need), parallel=parallel)
        np.add.at(starts, cand, [reason != STOP_SUPERSEDED for reason in out.stop_reason])
        record(out, cand)
        rounds += 1
    _give_back(rng_key)
    picked = pick_round >= 0
    result = _assemble(results, np.where(picked, pick_round, near_round), np.where(picked, pick_row, near_row),
                       picked, best_score)
    return SearchResult(result=result, rounds=rounds, starts=starts, successes=successes,
                        elapsed_s=0.0, timed_out=timed_out, iterations=iterations), best_score


def _assemble(results, source: np.ndarray, pick_row: np.ndarray, picked: np.ndarray, best_score) -> IKBatchResult:
    """Per candidate row ``pick_row`` of round ``source`` of ``results``: its selected success
    where ``picked``, else the attempt it reports."""
    b = len(source)
    rounds = np.unique(source).tolist()
    if len(rounds) == 1:  # the usual case (e.g. one target): one fancy index per field
        out = results[rounds[0]]

        def gather(field):
            return getattr(out, field)[pick_row]
        reasons = [out.stop_reason[i] for i in pick_row.tolist()]
    else:
        def gather(field):
            like = getattr(results[0], field)
            values = np.empty((b,) + like.shape[1:], dtype=like.dtype)
            for r in rounds:
                mask = source == r
                values[mask] = getattr(results[r], field)[pick_row[mask]]
            return values
        reasons = [results[r].stop_reason[i] for r, i in zip(source.tolist(), pick_row.tolist())]
    success = picked.astype(np.int32)
    cost = np.where(success == 1, gather("cost"), np.inf)
    best = int(np.argmin(best_score)) if success.any() else None
    return IKBatchResult(
        joint_q=gather("joint_q"), success=success, cost=cost, best_index=best,
        position_error=gather("position_error"), direction_error=gather("direction_error"),
        up_error=gather("up_error"), iterations=gather("iterations"),
        stop_reason=tuple(reasons), active_dof_ids=results[0].active_dof_ids, backend=merged_backend(results))
