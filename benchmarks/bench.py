"""Benchmark of the spec solver on the bundled robots (a script, not a test).

    .venv/bin/python benchmarks/bench.py [--targets 1000] [--robots panda_like ur5_like dual_arm_torso]
        [--backend {numpy,numba,auto}] [--compare-backends] [--search] [--memory N] [--json F]

For each robot: N reproducible random reachable full-pose targets (FK of random
in-limit configurations, TCP convention, all end effectors in one candidate),
all solved from the same fixed start (the middle of the joint limits):

* success rate of the spec's single-seed solve (the spec's default parameters,
  ``max_position_error`` 0.03 m),
* B = 1: median and p95 wall time per candidate when the targets are solved one
  call at a time,
* B = N: wall time per candidate of one batched call,
* the speed-up of the batched call over the loop, and whether both agree.

``--backend`` picks the solver backend (default auto: the compiled numba one
when available); ``--compare-backends`` runs numpy and numba on the same
targets and prints them side by side (success rates must be identical). The
numba kernels are compiled or loaded before timing (``compiled.warm_up``).
``--search`` adds the multi-seed search (``robo_search_ik_direction_up``,
4 seeds, 5 ms budget), one target at a time: success rate, median/p95 ms.
``--memory N`` measures, in a fresh process per robot and backend, the peak
resident set size (RSS) of one batched call over N candidates (e.g. 10000),
against the process's RSS just before the call.

Timings are wall clock on a shared machine: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import time
from typing import Dict, List

import numpy as np

from direction_up_ik.core import robo_solve_ik_direction_up_multi_batch
from direction_up_ik.core.kinematics import mid_range, random_in_limits
from direction_up_ik.core.targets import full_pose_candidates
from direction_up_ik.robots import load_robot

DEFAULT_ROBOTS = ("panda_like", "ur5_like", "dual_arm_torso")
MAX_POSITION_ERROR = 0.03


#: (n, D) random in-limit joint states (kept under this name for callers of the benchmark).
random_configurations = random_in_limits


def reachable_candidates(robot, configurations: np.ndarray) -> List[tuple]:
    """One full-pose candidate (every EE, TCP convention) per configuration."""
    return full_pose_candidates(robot.tcp_transforms(configurations))


def bench_robot(name: str, n: int, seed: int, backend: str = "auto") -> Dict:
    """Run the benchmark for one bundled robot; returns the figures as a dict."""
    robot = load_robot(name)
    robot.joint_q[:] = mid_range(robot)
    rng = np.random.default_rng(seed)
    candidates = reachable_candidates(robot, random_configurations(robot, rng, n))
    solve = functools.partial(robo_solve_ik_direction_up_multi_batch, backend=backend)
    solve(robot, candidates[:2], max_position_error=MAX_POSITION_ERROR)  # warm caches

    times, loop_success, loop_q = [], [], []
    for cand in candidates:
        t0 = time.perf_counter()
        r = solve(robot, [cand], max_position_error=MAX_POSITION_ERROR)
        times.append(time.perf_counter() - t0)
        loop_success.append(int(r.success[0]))
        loop_q.append(r.joint_q[0])
    t0 = time.perf_counter()
    batch = solve(robot, candidates, max_position_error=MAX_POSITION_ERROR)
    batch_time = time.perf_counter() - t0

    times_ms = np.array(times) * 1e3
    per_candidate_batch_ms = batch_time * 1e3 / n
    return {
        "robot": name, "backend": backend, "dofs": robot.num_dofs, "end_effectors": robot.num_end_effectors,
        "targets": n, "seed": seed,
        "success_rate": float(batch.success.mean()),
        "loop_success_rate": float(np.mean(loop_success)),
        "batch_matches_loop": bool(np.array_equal(batch.success, loop_success)
                                   and np.allclose(batch.joint_q, np.array(loop_q), atol=1e-5)),
        "b1_median_ms": float(np.median(times_ms)),
        "b1_p95_ms": float(np.percentile(times_ms, 95)),
        "b1_total_s": float(np.sum(times)),
        "batch_total_s": batch_time,
        "batch_per_candidate_ms": per_candidate_batch_ms,
        "batch_speedup_vs_loop": float(np.sum(times) / batch_time),
        "median_iterations": float(np.median(batch.iterations)),
        "_batch_success": batch.success.tolist(),  # not written to --json
    }


@contextlib.contextmanager
def auto_backend(backend: str):
    """Make "auto" mean ``backend`` (the search has no backend argument of its own)."""
    from direction_up_ik.core.backend import BACKEND_ENV
    saved = os.environ.get(BACKEND_ENV)
    if backend != "auto":
        os.environ[BACKEND_ENV] = backend
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(BACKEND_ENV, None)
        else:
            os.environ[BACKEND_ENV] = saved


def bench_search(name: str, n: int, seed: int, backend: str = "auto", num_seeds: int = 4,
                 time_budget: float = 0.005) -> Dict:
    """Multi-seed search on N reachable targets, one call per target (same targets as bench_robot)."""
    from direction_up_ik.core.search_api import robo_search_ik_direction_up, warm_up_search
    robot = load_robot(name)
    robot.joint_q[:] = mid_range(robot)
    rng = np.random.default_rng(seed)
    candidates = reachable_candidates(robot, random_configurations(robot, rng, n))
    search = functools.partial(robo_search_ik_direction_up, robot, max_position_error=MAX_POSITION_ERROR,
                               num_seeds=num_seeds, time_budget=time_budget)
    times, success, rounds = [], [], []
    with auto_backend(backend):
        search([candidates[0]])  # warm caches: the kernel ...
        warm_up_search(robot, [candidates[0]])  # ... and the seed library, which the first seeded
        # search would otherwise build inside its 5 ms (it did: one dual-arm target failed)
        for cand in candidates:
            t0 = time.perf_counter()
            out = search([cand])
            times.append(time.perf_counter() - t0)
            success.append(int(out.result.success[0]))
            rounds.append(out.rounds)
    times_ms = np.array(times) * 1e3
    return {"robot": name, "backend": backend, "targets": n, "num_seeds": num_seeds,
            "time_budget_ms": time_budget * 1e3, "success_rate": float(np.mean(success)),
            "median_ms": float(np.median(times_ms)), "p95_ms": float(np.percentile(times_ms, 95)),
            "mean_rounds": float(np.mean(rounds))}


def memory_figures(name: str, n: int, seed: int, backend: str) -> Dict:
    """Peak RSS of one batched call over n candidates, measured in a fresh (spawned) process."""
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_memory_child, (name, n, seed, backend))


def _rss_mib() -> float:
    """Current resident set size of this process, MiB (Linux /proc)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _memory_child(name: str, n: int, seed: int, backend: str) -> Dict:
    import resource
    robot = load_robot(name)
    robot.joint_q[:] = mid_range(robot)
    candidates = reachable_candidates(robot, random_configurations(robot, np.random.default_rng(seed), n))
    solve = functools.partial(robo_solve_ik_direction_up_multi_batch, backend=backend)
    solve(robot, candidates[:2], max_position_error=MAX_POSITION_ERROR)  # load the kernel first
    before = _rss_mib()
    t0 = time.perf_counter()
    result = solve(robot, candidates, max_position_error=MAX_POSITION_ERROR)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    return {"robot": name, "backend": backend, "candidates": n, "rss_before_mib": before,
            "peak_rss_mib": peak, "peak_increase_mib": peak - before, "seconds": seconds,
            "success_rate": float(result.success.mean())}


def _table(columns, rows: List[Dict]) -> str:
    """Fixed-width text table: columns are (title, width, cell(row) -> str); the first
    column is left-aligned, the others right-aligned; a rule under the header."""
    widths = [width for _, width, _ in columns]

    def line(cells):
        return "".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths)))
    head = line([title for title, _, _ in columns])
    return "\n".join([head, "-" * len(head)] + [line([cell(r) for _, _, cell in columns]) for r in rows])


def _percent(key):
    return lambda r: f"{100 * r[key]:.1f}%"


def format_memory_table(rows: List[Dict]) -> str:
    return _table([("memory", 16, lambda r: r["robot"]), ("backend", 8, lambda r: r["backend"]),
                   ("candidates", 11, lambda r: str(r["candidates"])),
                   ("RSS before MiB", 16, lambda r: f"{r['rss_before_mib']:.1f}"),
                   ("peak RSS MiB", 14, lambda r: f"{r['peak_rss_mib']:.1f}"),
                   ("increase MiB", 14, lambda r: f"{r['peak_increase_mib']:.1f}"),
                   ("seconds", 9, lambda r: f"{r['seconds']:.2f}"), ("success", 9, _percent("success_rate"))],
                  rows)


def format_search_table(rows: List[Dict]) -> str:
    return _table([("search", 16, lambda r: r["robot"]), ("backend", 8, lambda r: r["backend"]),
                   ("seeds", 6, lambda r: str(r["num_seeds"])),
                   ("budget ms", 10, lambda r: f"{r['time_budget_ms']:.1f}"),
                   ("N", 6, lambda r: str(r["targets"])), ("success", 9, _percent("success_rate")),
                   ("med ms", 9, lambda r: f"{r['median_ms']:.2f}"),
                   ("p95 ms", 9, lambda r: f"{r['p95_ms']:.2f}"),
                   ("rounds", 8, lambda r: f"{r['mean_rounds']:.2f}")], rows)


def format_table(rows: List[Dict]) -> str:
    return _table([("robot", 16, lambda r: r["robot"]), ("backend", 8, lambda r: r["backend"]),
                   ("DOF", 4, lambda r: str(r["dofs"])), ("EE", 3, lambda r: str(r["end_effectors"])),
                   ("N", 6, lambda r: str(r["targets"])), ("success", 9, _percent("success_rate")),
                   ("B=1 med ms", 12, lambda r: f"{r['b1_median_ms']:.2f}"),
                   ("B=1 p95 ms", 12, lambda r: f"{r['b1_p95_ms']:.2f}"),
                   ("B=N ms/cand", 13, lambda r: f"{r['batch_per_candidate_ms']:.3f}"),
                   ("speed-up", 10, lambda r: f"{r['batch_speedup_vs_loop']:.1f}x"),
                   ("batch==loop", 13, lambda r: str(r["batch_matches_loop"]))], rows)


def format_comparison(rows: List[Dict]) -> str:
    """numba against numpy per robot: speed-ups and whether the successes are identical."""
    by = {(r["robot"], r["backend"]): r for r in rows}
    head = (f"{'robot':<16}{'B=1 med x':>10}{'B=1 p95 x':>10}{'B=N x':>8}{'same success':>14}")
    lines = [head, "-" * len(head)]
    for robot in dict.fromkeys(r["robot"] for r in rows):
        a, b = by[(robot, "numpy")], by[(robot, "numba")]
        lines.append(f"{robot:<16}{a['b1_median_ms'] / b['b1_median_ms']:>9.1f}x"
                     f"{a['b1_p95_ms'] / b['b1_p95_ms']:>9.1f}x"
                     f"{a['batch_per_candidate_ms'] / b['batch_per_candidate_ms']:>7.1f}x"
                     f"{str(a['_batch_success'] == b['_batch_success']):>14}")
    return "\n".join(lines)


def warm_up_numba() -> None:
    """Compile or load the numba kernels (not timed); prints how long it took."""
    import numba

    from direction_up_ik.core import compiled
    print(f"numba {numba.__version__}: kernels ready in {compiled.warm_up():.1f} s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000, help="random targets per robot")
    parser.add_argument("--robots", nargs="+", default=list(DEFAULT_ROBOTS))
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--plot", help="also draw one solved example per robot into this PNG "
                                       "(<stem>_<robot>.png for several robots; needs matplotlib)")
    parser.add_argument("--backend", choices=("numpy", "numba", "auto"), default="auto",
                        help="solver backend (default auto: numba when available)")
    parser.add_argument("--compare-backends", action="store_true",
                        help="run numpy and numba on the same targets, side by side")
    parser.add_argument("--search", action="store_true",
                        help="also time the multi-seed search (4 seeds, 5 ms) one target at a time")
    parser.add_argument("--memory", type=int, metavar="N",
                        help="also measure the peak RSS of one batched call over N candidates "
                             "(fresh process per robot and backend)")
    args = parser.parse_args(argv)
    if args.targets < 2:
        parser.error("--targets must be at least 2")
    print(f"direction_up_ik benchmark: {args.targets} random reachable full-pose targets per robot, "
          f"start = mid-range, spec defaults (max_position_error={MAX_POSITION_ERROR})")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    backends = ("numpy", "numba") if args.compare_backends else (args.backend,)
    if "numpy" not in backends or len(backends) > 1:
        try:
            warm_up_numba()
        except ImportError as exc:
            if args.backend == "auto" and not args.compare_backends:
                print(f"numba unavailable ({exc}): auto uses numpy")
            else:
                parser.error(f"numba unavailable: {exc}")
    rows = []
    for name in args.robots:
        for backend in backends:
            rows.append(bench_robot(name, args.targets, args.seed, backend))
            print(f"  {name} ({backend}): done", flush=True)
    print(format_table(rows))
    if args.compare_backends:
        print(format_comparison(rows))
    if args.search:
        search_rows = [bench_search(name, args.targets, args.seed, backend)
                       for name in args.robots for backend in backends]
        print(format_search_table(search_rows))
        rows = rows + search_rows
    if args.memory:
        memory_rows = [memory_figures(name, args.memory, args.seed, backend)
                       for name in args.robots for backend in backends]
        print(format_memory_table(memory_rows))
        rows = rows + memory_rows
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
                      handle, indent=2)
        print(f"wrote {args.json}")
    if args.plot:
        from direction_up_ik.plot import plot_solved_example
        for name in args.robots:
            out = args.plot if len(args.robots) == 1 else f"{os.path.splitext(args.plot)[0]}_{name}.png"
            print(f"wrote {plot_solved_example(name, out, seed=args.seed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
