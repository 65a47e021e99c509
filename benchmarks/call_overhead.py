#!/usr/bin/env python3
"""Where one single-target search call spends its time: Python around the kernel vs the kernel.

    .venv/bin/python benchmarks/call_overhead.py [--robots panda_like ur5_like] [--targets 400]
        [--repeats 5] [--profile]

On the peer benchmark's targets (``bench_peers.Problem``) from both of its start states, after
warm-up, it replays the stages of one ``robo_search_ik_direction_up(num_seeds=4,
time_budget=0.005)`` call (the compiled search) one by one and times each with
``perf_counter_ns``, per target the fastest of ``--repeats`` (the stages are deterministic):

* ``settings``: the memoised solver and search settings;
* ``build``: ``build_problem`` (validation and packing of the request);
* ``select``: picking the compiled backend;
* ``pack``: the kernel's arrays (model, targets, config, state);
* ``kernel``: round 0 (``run_serial``), dispatch included; ``dispatch``: the same call on a
  zero-row state (numba's argument checks and unboxing, the scratch allocation);
* ``assemble``: the ``IKBatchResult`` and ``SearchResult``;
* ``seeded``: for targets round 0 misses, the rounds of seeds (seed arrays and ``run_search``);
* ``one target``: the same search through the one-target path (``search._search_one_target``,
  settings validated), and ``its kernel``: its round 0 on the kept arrays alone
  (``OneCandidate.solve``, the compiled ``solve_rows`` without the dispatcher).

It prints each stage's median and the whole call's median and p99 (timed as a call, which
includes what the replay leaves out), and the share of targets round 0 solves. ``--profile``
adds a cProfile of the calls (own time of the top functions).

``--paired`` instead times three calls per target side by side (``bench_peers.paired_timing``:
target by target, the order rotating, ``--sweeps`` sweeps, each target's median sweep): the
search (the one-target path, ``core.one_target``), the same search through the general path
(``search.ONE_TARGET_PATH = False``: the code before that path) and roboticstoolbox's ``ik_LM``
(when installed, ``make bench-peers`` sets it up), and prints the medians, the p99 and the
ratios, with each one's success as the peer benchmark's judge counts it. Timings are wall clock
on a shared machine: compare figures within one run.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one BLAS thread, as the benchmarks

import numpy as np  # noqa: E402

import bench_peers  # noqa: E402  (this folder's)
from direction_up_ik.core import robo_search_ik_direction_up, warm_up_search  # noqa: E402
from direction_up_ik.core import one_target  # noqa: E402
from direction_up_ik.core import search as search_module  # noqa: E402
from direction_up_ik.core import search_api  # noqa: E402
from direction_up_ik.core.backend import compiled_backend, warm_up_backend  # noqa: E402
from direction_up_ik.core.compiled import api  # noqa: E402
from direction_up_ik.core.compiled.iteration import run_serial  # noqa: E402
from direction_up_ik.core.compiled.layout import State  # noqa: E402
from direction_up_ik.core.problem import build_problem  # noqa: E402
from direction_up_ik.core.settings import SEARCH_SOLVER_DEFAULTS, search_settings, solver_settings  # noqa: E402

KW = dict(max_position_error=bench_peers.MAX_POSITION_ERROR, num_seeds=bench_peers.NUM_SEEDS,
          time_budget=bench_peers.TIME_BUDGET)


def zero_row_state(problem) -> tuple:
    """A State of no rows of ``problem``'s shapes: the kernel call then only dispatches."""
    d, e = len(problem.q_initial), problem.num_targets
    empty, i8 = np.empty, np.int64
    return tuple(State(q=empty((0, d)), r=empty((0, 9 * e)), ssr=empty(0), err=empty((0, 3, e)),
                       iterations=empty(0, np.int32), reason=empty(0, i8), fail_key=empty(0, i8),
                       done=empty(0, np.bool_), success=empty(0, np.int32), cost=empty(0),
                       group=empty(0, i8), quota=empty(0, i8)))


def replay(robot, cand) -> dict:
    """Nanoseconds of each stage of one call's path (the compiled search's), and its outcome."""
    ns = time.perf_counter_ns
    t = [ns()]
    settings = solver_settings(max_position_error=KW["max_position_error"], **SEARCH_SOLVER_DEFAULTS)
    search_settings(num_seeds=KW["num_seeds"], time_budget=KW["time_budget"], max_rounds=None,
                    min_successes=1, selection="least_motion", random_seed=0, seeding="nearest")
    t.append(ns())
    problem = build_problem(robot, (cand,), None, "cpu", None, settings)
    t.append(ns())
    compiled_backend(problem)  # the stage timed: the backend choice
    t.append(ns())
    b, d = problem.num_candidates, len(problem.q_initial)
    q = np.empty((b, d))
    q[:] = problem.q_initial
    model, targets, config = api.model_arrays(problem), api.target_arrays(problem), api.config_fields(problem)
    zeros = np.zeros(b, dtype=np.int64)
    empty, e = np.empty, problem.num_targets
    state = State(q=q, r=empty((b, 9 * e)), ssr=empty(b), err=empty((b, 3, e)), iterations=empty(b, np.int32),
                  reason=empty(b, np.int64), fail_key=empty(b, np.int64), done=empty(b, np.bool_),
                  success=empty(b, np.int32), cost=empty(b), group=zeros, quota=zeros)
    model_t, targets_t, state_t = tuple(model), tuple(targets), tuple(state)
    t.append(ns())
    run_serial(model_t, targets_t, config, state_t, True, time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 10**9)
    t.append(ns())
    result = api._assemble_result(problem, state)
    search_module.SearchResult(result=result, rounds=1, starts=np.ones(b, dtype=np.int64),
                               successes=state.success.astype(np.int64), elapsed_s=0.0, timed_out=False,
                               iterations=state.iterations.astype(np.int64))
    t.append(ns())
    blank = zero_row_state(problem)
    t.append(ns())
    run_serial(model_t, targets_t, config, blank, True, time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 10**9)
    t.append(ns())
    pair = search_api._one_target_settings(
        (KW["max_position_error"],) + tuple(SEARCH_SOLVER_DEFAULTS[k] for k in (
            "max_step_norm", "jacobian", "stall_window", "num_step_scales", "damping_mode", "periodic_joints"))
        + (KW["num_seeds"], KW["time_budget"], None, 1, 0, "least_motion"), {})
    t0 = ns()
    search_api._search_one_target(robot, (cand,), "cpu", *pair)
    one = ns() - t0
    kernel = one_target.layout_of(robot, (cand,), "cpu", pair[0], search_api._one_target_seed_arrays)[0].kernel
    kernel.q_initial[:] = robot.joint_q
    kernel.state.q[0] = kernel.q_initial
    t0 = ns()
    kernel.solve(kernel.model, kernel.targets, kernel.config, kernel.state, kernel.work, False, 0)
    its_kernel = ns() - t0
    seeded = None
    if not state.success[0]:
        t0 = ns()
        search_module._compiled_search(problem, num_seeds=KW["num_seeds"], deadline=time.perf_counter() + 0.005,
                                       max_rounds=None, min_successes=1, selection="least_motion")
        seeded = ns() - t0
    dt = np.diff(t)
    return dict(settings=dt[0], build=dt[1], select=dt[2], pack=dt[3], kernel=dt[4], assemble=dt[5],
                dispatch=dt[7], seeded=seeded, solved0=bool(state.success[0]), one_target=one,
                one_target_kernel=its_kernel)


class GeneralPath(bench_peers.SearchSingle):
    """The search one target per call through the general path (``search.ONE_TARGET_PATH`` off)."""
    key, label = "general_path", "search, general path"

    def call_one(self, problem, q_start):
        one = super().call_one(problem, q_start)

        def general(i):
            search_api.ONE_TARGET_PATH = False
            try:
                return one(i)
            finally:
                search_api.ONE_TARGET_PATH = True
        return general


def paired(names, n: int, seed: int, sweeps: int) -> None:
    """Per robot and start: the one-target path, the general path and ik_LM timed in pairs."""
    for name in names:
        problem = bench_peers.Problem(name, n, seed)
        judge = bench_peers.Judge(problem)
        solvers = [bench_peers.SearchSingle(), GeneralPath()]
        peer = bench_peers.RtbIkLM()
        try:
            peer.prepare(problem)
            solvers.append(peer)
        except bench_peers.Skip as reason:
            print(f"{name}: ik_LM skipped: {reason}")
        for start, q0 in problem.starts.items():
            calls = [(solver.key, solver.call_one(problem, q0)) for solver in solvers]
            seconds = {key: np.full((sweeps, problem.n), np.inf) for key, _ in calls}
            answers = {key: [None] * problem.n for key, _ in calls}
            for sweep in range(sweeps):
                for i in range(problem.n):
                    shift = (i + sweep) % len(calls)
                    for key, one in calls[shift:] + calls[:shift]:
                        t0 = time.perf_counter()
                        out = one(i)
                        seconds[key][sweep, i] = time.perf_counter() - t0
                        answers[key][i] = out
            times = {key: np.median(t, axis=0) for key, t in seconds.items()}
            ok = {}
            for key, outs in answers.items():
                if key == bench_peers.RtbIkLM.key:
                    q = np.tile(q0, (problem.n, 1))
                    q[:, peer.columns] = [sol.q for sol in outs]
                else:
                    q = np.array([r.result.joint_q[0] for r in outs], dtype=np.float64)
                ok[key] = 100.0 * judge.evaluate(q)["success"].mean()
            same = all(np.array_equal(a.result.joint_q, b.result.joint_q)
                       for a, b in zip(answers["multi_seed_search"], answers["general_path"]))
            text = ", ".join(f"{key} median {np.median(t) * 1e3:.4f} ms p99 {np.percentile(t, 99) * 1e3:.3f} ms "
                             f"success {ok[key]:.1f} %" for key, t in times.items())
            print(f"{name} / {start} ({problem.n} targets, {sweeps} sweeps): {text}")
            fast, general = np.median(times["multi_seed_search"]), np.median(times["general_path"])
            line = f"  one-target path / general path {fast / general:.2f} x; same answers: {same}"
            if bench_peers.RtbIkLM.key in times:
                lm = np.median(times[bench_peers.RtbIkLM.key])
                line += f"; / ik_LM: one-target path {fast / lm:.2f} x, general path {general / lm:.2f} x"
            print(line, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["panda_like", "ur5_like"])
    parser.add_argument("--targets", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5, help="replays per target (fastest counts)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--profile", action="store_true", help="also cProfile the calls")
    parser.add_argument("--paired", action="store_true",
                        help="time the one-target path, the general path and ik_LM in pairs instead")
    parser.add_argument("--sweeps", type=int, default=3, help="sweeps of --paired")
    args = parser.parse_args(argv)
    print(f"kernel ready in {warm_up_backend() or 0.0:.1f} s", flush=True)
    if args.paired:
        paired(args.robots, args.targets, args.seed, args.sweeps)
        return 0
    for name in args.robots:
        problem = bench_peers.Problem(name, args.targets, args.seed)
        robot = problem.robot
        for start, q0 in problem.starts.items():
            bench_peers._set_start(robot, q0)
            warm_up_search(robot, problem.candidates[:1])
            for cand in problem.candidates[:20]:
                robo_search_ik_direction_up(robot, (cand,), **KW)
            stages = []
            for cand in problem.candidates:
                runs = [replay(robot, cand) for _ in range(args.repeats)]
                stages.append({k: (min(r[k] for r in runs) if runs[0][k] is not None and not isinstance(runs[0][k], bool)
                                   else runs[0][k]) for k in runs[0]})
            calls = np.empty(problem.n)
            for i, cand in enumerate(problem.candidates):
                t0 = time.perf_counter_ns()
                robo_search_ik_direction_up(robot, (cand,), **KW)
                calls[i] = time.perf_counter_ns() - t0
            solved0 = np.array([s["solved0"] for s in stages])
            print(f"{name} / {start}: call median {np.median(calls) / 1e3:.1f} us, p99 "
                  f"{np.percentile(calls, 99) / 1e3:.1f} us; round 0 solves {100 * solved0.mean():.1f} %")
            parts = []
            for key in ("settings", "build", "select", "pack", "kernel", "dispatch", "assemble"):
                parts.append(f"{key} {np.median([s[key] for s in stages]) / 1e3:.1f}")
            print("  stages, median us: " + ", ".join(parts))
            one = np.array([s["one_target"] for s in stages])
            its = np.array([s["one_target_kernel"] for s in stages])
            print(f"  one-target path, targets round 0 solves (us): whole {np.median(one[solved0]) / 1e3:.1f}, "
                  f"its kernel {np.median(its[solved0]) / 1e3:.1f}; every target: whole {np.median(one) / 1e3:.1f}")
            k0 = np.array([s["kernel"] for s in stages])
            print(f"  round 0 kernel call (us): solved {np.median(k0[solved0]) / 1e3:.1f}, "
                  f"missed {np.median(k0[~solved0]) / 1e3 if (~solved0).any() else float('nan'):.1f}")
            if (~solved0).any():
                seeded = np.array([s["seeded"] for s in stages if s["seeded"] is not None])
                print(f"  missed by round 0: whole compiled search median {np.median(seeded) / 1e3:.1f} us, "
                      f"p99 {np.percentile(seeded, 99) / 1e3:.1f} us")
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                for cand in problem.candidates:
                    robo_search_ik_direction_up(robot, (cand,), **KW)
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
