"""Wall and CPU time per target of one batched search call (a benchmark, not a test).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_batch.py [--targets 1000] [--calls 11]
        [--robots panda_like ur5_like dual_arm_torso] [--targets-set random] [--target-batch] [--json F]

Per robot and start (the middle of the limits, and a random state), the targets of
``bench_peers.py`` (same seed, same sets) go to one ``robo_search_ik_direction_up(num_seeds=4,
max_rounds=5)`` call, as ``bench_peers``' batched search does; ``--calls`` calls are timed
after a warm-up call, each with the wall clock and the process's CPU clock (all threads).
Prints per cell the median of both per target (µs), their ratio (about the number of threads
busy), the success rate under the Pinocchio judge of ``bench_peers`` and the goal of issue 27
(wall <= 10 µs and CPU <= 20 µs per target for one arm, wall <= 30 µs for the dual arm;
every target solved). The machine is shared: report its load with the figures
(``docs/performance.md``).

Per robot it also times what the call leaves out, building the request from arrays of TCP
poses (N, E, 4, 4): as N tuples of ``DirectionUpTarget`` (``full_pose_candidates``, the form
timed above) and as one ``TargetBatch``, per target, medians of ``--calls``; and checks that
the search answers the batch exactly as it answers the tuples. ``--target-batch`` also times
each cell's call given the TargetBatch, its calls alternating with the tuples' ones.

``--round0-bound`` (set ``NUMBA_NUM_THREADS=1`` to read it as work) bounds what stopping
failing starts early could gain: per cell it times, interleaved, the search, round 0 alone
(``num_seeds=0``) over all targets and over the targets round 0 solves. Their difference is
what round 0 spends on the starts it fails; the search without it, ``search - (all - solved)``,
is what a search that dropped every failing round-0 start at no cost would take at best.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from typing import Dict, List

import numpy as np

import bench_peers
from direction_up_ik.core import TargetBatch, robo_search_ik_direction_up, warm_up_backend
from direction_up_ik.core.targets import full_pose_candidates

DEFAULT_ROBOTS = ("panda_like", "ur5_like", "dual_arm_torso")
#: Goals per target (issue 27 point 2): (wall µs, CPU µs or None), by number of end effectors.
GOALS_US = {1: (10.0, 20.0), 2: (30.0, None)}


def time_calls(call, calls: int, other=None) -> Dict[str, float]:
    """Medians over ``calls`` calls of ``call()``: wall and process CPU seconds, and the last
    result; with ``other``, its calls alternate with them (the order turning each time) and
    ``other_wall_s`` is their median wall time."""
    walls, cpus, others = [], [], []
    result = None
    for k in range(calls):
        if other is not None and k % 2:
            w0 = time.perf_counter()
            other()
            others.append(time.perf_counter() - w0)
        c0, w0 = time.process_time(), time.perf_counter()
        result = call()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        if other is not None and not k % 2:
            w0 = time.perf_counter()
            other()
            others.append(time.perf_counter() - w0)
    out = dict(wall_s=float(np.median(walls)), cpu_s=float(np.median(cpus)),
               wall_min_s=float(np.min(walls)), result=result)
    if other is not None:
        out["other_wall_s"] = float(np.median(others))
    return out


def run_cell(problem: bench_peers.Problem, judge: bench_peers.Judge, start: str, calls: int,
             with_batch: bool = False) -> Dict:
    """One robot and start: the batched search timed ``calls`` times, judged once; with
    ``with_batch`` the same call given the targets as a TargetBatch alternates with it."""
    robot = problem.robot
    # bench_peers' batched search: its start, arguments and warm-up, then the call itself
    other = bench_peers.BatchedSearch().call_all(as_target_batch(problem), problem.starts[start]) \
        if with_batch else None
    timing = time_calls(bench_peers.BatchedSearch().call_all(problem, problem.starts[start]), calls, other)
    verdict = judge.evaluate(timing.pop("result").result.joint_q.astype(np.float64))
    n = problem.n
    wall_us, cpu_us = 1e6 * timing["wall_s"] / n, 1e6 * timing["cpu_s"] / n
    goal_wall, goal_cpu = GOALS_US[min(robot.num_end_effectors, 2)]
    success = float(np.mean(verdict["success"]))
    met = wall_us <= goal_wall and (goal_cpu is None or cpu_us <= goal_cpu) and success == 1.0
    return dict(robot=problem.name, start=start, target_set=problem.target_set, targets=n, calls=calls,
                wall_us=round(wall_us, 2), cpu_us=round(cpu_us, 2),
                wall_min_us=round(1e6 * timing["wall_min_s"] / n, 2),
                cpu_per_wall=round(cpu_us / wall_us, 2), success_rate=success,
                goal_wall_us=goal_wall, goal_cpu_us=goal_cpu, goal_met=bool(met),
                batch_wall_us=round(1e6 * timing["other_wall_s"] / n, 2) if with_batch else None)


def as_target_batch(problem: bench_peers.Problem) -> bench_peers.Problem:
    """``problem`` with its candidates as one TargetBatch of its poses."""
    as_batch = copy.copy(problem)
    as_batch.candidates = TargetBatch.from_tcp_poses(problem.targets)
    return as_batch


def request_building(problem: bench_peers.Problem, calls: int) -> Dict:
    """Per target µs to build the request from its poses, both forms, and whether the search
    answers the batch as it answers the tuples (from the middle of the limits)."""
    poses = problem.targets
    objects = time_calls(lambda: full_pose_candidates(poses), calls)["wall_s"]
    batch = time_calls(lambda: TargetBatch.from_tcp_poses(poses), calls)["wall_s"]
    start = problem.starts["mid_range"]
    a = bench_peers.BatchedSearch().call_all(problem, start)().result
    b = bench_peers.BatchedSearch().call_all(as_target_batch(problem), start)().result
    same = bool(np.array_equal(a.joint_q, b.joint_q) and np.array_equal(a.success, b.success))
    return dict(objects_us=round(1e6 * objects / problem.n, 2), batch_us=round(1e6 * batch / problem.n, 3),
                same_answers=same)


def round0_bound(problem: bench_peers.Problem, start: str, calls: int) -> Dict:
    """µs per target (medians of ``calls`` interleaved calls): the batched search, its round 0
    alone over all targets and over the targets round 0 solves, and the bound of
    ``--round0-bound`` (see the module docstring)."""
    robot = problem.robot
    search = bench_peers.BatchedSearch().call_all(problem, problem.starts[start])  # sets the start
    kw = dict(max_position_error=bench_peers.MAX_POSITION_ERROR, num_seeds=0, **problem.tolerances)
    first = robo_search_ik_direction_up(robot, problem.candidates, **kw)
    solved = tuple(problem.candidates[i] for i in np.flatnonzero(first.result.success == 1))
    calls_by_part = dict(search=search,
                         round0=lambda: robo_search_ik_direction_up(robot, problem.candidates, **kw),
                         # (a search needs a candidate: with none solved, that part is empty)
                         round0_solved=lambda: robo_search_ik_direction_up(robot, solved, **kw) if solved else None)
    walls: Dict[str, List[float]] = {key: [] for key in calls_by_part}
    for k in range(calls):
        order = list(calls_by_part)
        for key in order[k % 3:] + order[:k % 3]:  # each part first in turn
            w0 = time.perf_counter()
            calls_by_part[key]()
            walls[key].append(time.perf_counter() - w0)
    us = {key: 1e6 * float(np.median(v)) / problem.n for key, v in walls.items()}
    failing = us["round0"] - us["round0_solved"]
    bound = us["search"] - failing
    return dict(robot=problem.name, start=start, round0_solves=len(solved), search_us=round(us["search"], 2),
                round0_us=round(us["round0"], 2), round0_failing_us=round(failing, 2),
                bound_us=round(bound, 2), bound_ratio=round(bound / us["search"], 3))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=11, help="timed calls per cell (median)")
    parser.add_argument("--seed", type=int, default=2026, help="bench_peers' target seed")
    parser.add_argument("--robots", nargs="+", default=list(DEFAULT_ROBOTS))
    parser.add_argument("--targets-set", default="random", choices=list(bench_peers.TARGET_SETS))
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--target-batch", action="store_true",
                        help="also time the call given a TargetBatch, alternating with the tuples' call")
    parser.add_argument("--round0-bound", action="store_true",
                        help="also bound what dropping failing round-0 starts could gain (module docstring)")
    args = parser.parse_args(argv)
    warm_up_backend()
    threads = os.environ.get("NUMBA_NUM_THREADS", "numba's default")
    print(f"batched search, {args.targets} targets per call, median of {args.calls} calls; "
          f"NUMBA_NUM_THREADS {threads}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'robot / start':32s} {'wall µs':>8s} {'CPU µs':>8s} {'CPU/wall':>8s} {'success':>8s}  goal")
    rows: List[Dict] = []
    building: List[Dict] = []  # request_building per robot
    for name in args.robots:
        problem = bench_peers.Problem(name, args.targets, args.seed, args.targets_set)
        judge = bench_peers.Judge(problem)
        built = request_building(problem, args.calls)
        print(f"{name:32s} request from poses, per target: DirectionUpTarget tuples {built['objects_us']:.2f} µs, "
              f"TargetBatch {built['batch_us']:.3f} µs; same answers {built['same_answers']}", flush=True)
        building.append(dict(robot=name, **built))
        for start in bench_peers.STARTS:
            row = run_cell(problem, judge, start, args.calls, args.target_batch)
            rows.append(row)
            cpu_goal = "" if row["goal_cpu_us"] is None else f", CPU <= {row['goal_cpu_us']:g}"
            batch = "" if row["batch_wall_us"] is None else \
                f"; as a TargetBatch {row['batch_wall_us']:.2f} µs wall ({row['batch_wall_us'] / row['wall_us']:.3f} x)"
            print(f"{name + ' / ' + start:32s} {row['wall_us']:8.2f} {row['cpu_us']:8.2f} "
                  f"{row['cpu_per_wall']:8.2f} {100 * row['success_rate']:7.1f}%  "
                  f"{'met' if row['goal_met'] else 'missed'} (wall <= {row['goal_wall_us']:g}{cpu_goal}, all solved)"
                  f"{batch}", flush=True)
            if args.round0_bound:
                bound = round0_bound(problem, start, args.calls)
                row["round0_bound"] = bound
                print(f"{'':32s} round 0 solves {bound['round0_solves']} of {problem.n}; µs per target: search "
                      f"{bound['search_us']:.2f}, round 0 {bound['round0_us']:.2f}, of it the starts it fails "
                      f"{bound['round0_failing_us']:.2f}; search without those at best {bound['bound_us']:.2f} "
                      f"({bound['bound_ratio']:.2f} x)", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dict(rows=rows, request_building=building, load_average=os.getloadavg()), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
