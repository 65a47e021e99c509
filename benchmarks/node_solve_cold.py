#!/usr/bin/env python3
"""``DirectionUpIKNode.solve`` in process with cold caches, as it runs between a client's requests.

    .venv/bin/python benchmarks/node_solve_cold.py [--requests 200] [--calls 600] [--block 20] \
        [--base REV] [--search] [--candidates 1]

Between two ``~/solve`` requests the node waits on DDS while other processes (and, on a
shared host, other machines) run, and its caches lose what ``node.solve`` touched:
``bench_ros.py``'s in-process ``node.solve`` comes out 2-3 x a hot loop's. This script gives
that regime in one process, without ROS transport: before each call it writes one value per
64-byte line of a 64 MB buffer, then times ``node.solve`` of one of ``bench_ros``'s requests
(one dual-arm candidate, the spec's single start, as ``make bench-ros`` sends); it then
times the same request again, warm. Prints the medians of both. ``--search``: the node's
default ``~/solve`` instead, the search (4 seeds per round, a 0.1 s budget) with its collision
check, as a node started from ``config/dual_arm_torso.yaml`` answers. ``--candidates N``: each
request holds N such candidates (a planner's candidate set) instead of one.

Each tree runs in a child process; with ``--base REV`` a second child runs that revision's
package (exported and compiled as ``bench_ros.py --base`` does), the two taking turns every
``--block`` requests (the order alternating), and the ratios of their medians are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CHILD = "--child"
#: Written one value per 64-byte line before each cold call: larger than this host's caches.
EVICT_BYTES = 64 * 1024 * 1024


class ColdSolver:
    """A ``DirectionUpIKNode`` in this process (``bench_ros.InProcessNode``) and ``requests`` of
    ``bench_ros``'s requests, all solved once (warm-up)."""

    def __init__(self, requests: int, search: bool, candidates: int = 1) -> None:
        import bench_ros
        from direction_up_ik.core.backend import warm_up_backend
        from direction_up_ik.srv import SolveDirectionUpIK
        self.response = SolveDirectionUpIK.Response
        warm_up_backend()
        state = bench_ros.Judge().state
        self.inproc = bench_ros.InProcessNode(state, search)
        node = self.node = self.inproc.node
        names = [e.name for e in node._config.end_effectors]
        single = bench_ros.make_requests(node._robot, names, state, requests * candidates, 0, 0.3)
        self.requests = single[::candidates]
        for k, r in enumerate(self.requests):
            r.candidates = [c for s in single[k * candidates:(k + 1) * candidates] for c in s.candidates]
        for r in self.requests:
            node.solve(r, self.response())
        self.evict = np.ones(EVICT_BYTES // 8)
        self.next = 0
        self.cold, self.warm = [], []

    def block(self, count: int) -> None:
        """Time ``count`` requests (the next ones, in turn), each cold and then warm."""
        clock, node = time.perf_counter_ns, self.node
        for _ in range(count):
            r = self.requests[self.next % len(self.requests)]
            self.next += 1
            self.evict[::8] += 1.0
            t0 = clock()
            node.solve(r, self.response())
            self.cold.append(clock() - t0)
            t0 = clock()
            node.solve(r, self.response())
            self.warm.append(clock() - t0)

    def medians(self) -> dict:
        return dict(cold_us=float(np.median(self.cold)) / 1e3, warm_us=float(np.median(self.warm)) / 1e3)


def child(requests: int, search: bool, candidates: int) -> None:
    """Serve the parent over stdin / stdout: "block N" times N requests, "stop" prints the medians."""
    solver = ColdSolver(requests, search, candidates)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.startswith("block"):
            solver.block(int(line.split()[1]))
            print("ok", flush=True)
        else:
            print(json.dumps(solver.medians()), flush=True)
            break
    solver.inproc.close()


def start_child(pythonpath: str, requests: int, search: bool, candidates: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": pythonpath, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), CHILD, str(requests), str(int(search)),
                             str(candidates)],
                            env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    _expect(proc, "ready")
    return proc


def _expect(proc: subprocess.Popen, word: str) -> str:
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a child process ended before '{word}' (exit code {proc.wait()})")
        if line.startswith(word) or (word == "{" and line.startswith("{")):
            return line


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == CHILD:
        child(int(argv[1]), bool(int(argv[2])), int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="distinct requests, taken in turn")
    parser.add_argument("--calls", type=int, default=600, help="timed requests per tree")
    parser.add_argument("--block", type=int, default=20, help="requests per turn of a tree")
    parser.add_argument("--base", help="also this revision's node, in a second process, taking turns")
    parser.add_argument("--search", action="store_true", help="the node's default search, not the single start")
    parser.add_argument("--candidates", type=int, default=1, help="dual-arm candidates per request")
    args = parser.parse_args(argv)
    import bench_ros
    trees = {"tree": os.pathsep.join(filter(None, (str(bench_ros.REPO), os.environ.get("PYTHONPATH"))))}
    base = None
    if args.base is not None:
        base = bench_ros.base_environment(args.base)
        trees["base"] = base["PYTHONPATH"]
    procs = {name: start_child(path, args.requests, args.search, args.candidates) for name, path in trees.items()}
    try:
        for k in range(0, args.calls, args.block):
            for name in (sorted(procs) if (k // args.block) % 2 == 0 else sorted(procs, reverse=True)):
                procs[name].stdin.write(f"block {min(args.block, args.calls - k)}\n")
                procs[name].stdin.flush()
                _expect(procs[name], "ok")
        result = {}
        for name, proc in procs.items():
            proc.stdin.write("stop\n")
            proc.stdin.flush()
            result[name] = json.loads(_expect(proc, "{"))
    finally:
        for proc in procs.values():
            proc.wait(timeout=60)
    t = result["tree"]
    mode = "the node's search" if args.search else "the spec's single start"
    what = "one dual-arm candidate" if args.candidates == 1 else f"{args.candidates} dual-arm candidates"
    print(f"node.solve ({mode}), {what}, {args.calls} calls: cold {t['cold_us']:.1f} us, "
          f"warm {t['warm_us']:.1f} us (medians)")
    if base is not None:
        b = result["base"]
        print(f"base {base['commit']}: cold {b['cold_us']:.1f} us, warm {b['warm_us']:.1f} us; tree / base: "
              f"cold {t['cold_us'] / b['cold_us']:.3f} x, warm {t['warm_us'] / b['warm_us']:.3f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
