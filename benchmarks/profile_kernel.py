#!/usr/bin/env python3
"""Profile the compiled (numba) solver kernel with ``perf``, function by function.

    .venv/bin/python benchmarks/profile_kernel.py [--robot panda_like] [--start random] \
        [--mode batch|single|search] [--targets 1000] [--seconds 10] [--jacobian analytic|finite_difference] \
        [--output kernel.perf.data]
    perf report -i kernel.perf.data --no-children --sort symbol

``perf`` (Debian package ``linux-perf``) sees numba's machine code as anonymous ``[JIT]``
addresses. This script compiles the kernel afresh in a temporary cache folder,
prepares the workload, then attaches ``perf record`` to itself for the timed part only, and
writes ``/tmp/perf-<pid>.map`` naming every compiled function of the kernel (``solve_rows``,
``evaluate``, ``jacobian_shortcut``, ``limited_dls_step``, ...), which ``perf report`` reads. The
garbage collector is frozen after set-up, so the profile is the solver's. (A kernel loaded
from numba's disk cache has no addresses to name, hence the fresh compile.)

Workloads, on the benchmark's reproducible targets (``bench_peers.Problem``): ``batch``
solves all targets from the start state and then two random seeds, tried in turn (the search's
relay), for each target it missed, both as serial calls (one thread: one profile); ``single`` solves the targets one per
call, with the search's step cap; both with the search's Jacobian unless ``--jacobian`` says
otherwise; ``search`` makes the batched search call of ``bench_batch.py`` (``num_seeds=4,
max_rounds=5``; set ``NUMBA_NUM_THREADS=1`` for one thread). docs/performance.md keeps what it found (e.g. why ``iteration.solve_rows`` is
compiled without numba's runtime).

This reads numba internals (the compiled library's execution engine); it is a developer's
tool, not part of the package.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CACHE = tempfile.mkdtemp(prefix="direction_up_ik_profile_")
os.environ["NUMBA_CACHE_DIR"] = CACHE  # a fresh compile (see the docstring)

import numpy as np  # noqa: E402

from bench_peers import Problem  # noqa: E402  (this folder's)
from direction_up_ik.core import compiled, robo_search_ik_direction_up, warm_up_backend  # noqa: E402
from direction_up_ik.core.compiled import iteration, search_rounds, seed_scan  # noqa: E402
from direction_up_ik.core.problem import build_problem  # noqa: E402
from direction_up_ik.core.seeds import random_starts  # noqa: E402
from direction_up_ik.core.settings import JACOBIANS, SEARCH_SOLVER_DEFAULTS, solver_settings  # noqa: E402


def _short_name(mangled: str) -> str:
    """``module.function`` of a mangled kernel symbol (``_ZN15direction_up_ik4core8compiled9iteration
    10solve_rowsB...``), or the symbol itself."""
    parts, rest = [], mangled[3:] if mangled.startswith("_ZN") else ""
    while rest[:1].isdigit():
        digits = re.match(r"\d+", rest).group()
        size = int(digits)
        parts.append(rest[len(digits):len(digits) + size])
        rest = rest[len(digits) + size:]
    return ".".join(parts[-2:]) if parts else mangled


def write_perf_map(path: str) -> int:
    """Name the kernel's compiled functions for perf: "<start> <size> <name>" lines (hex)."""
    entries = []
    # Every compiled entry point of the kernel modules (numba dispatchers have ``overloads``);
    # the helpers inlined into them or called through their symbols are in their libraries.
    kernels = {id(k): k for module in (iteration, search_rounds, seed_scan, compiled.api)
               for k in vars(module).values() if hasattr(k, "overloads")}.values()
    for kernel in [overload for kernel in kernels for overload in kernel.overloads.values()]:
        engine = kernel.library._codegen._engine._ee
        for function in kernel.library._final_module.functions:
            if function.is_declaration:
                continue
            address = engine.get_function_address(function.name)
            if address:
                entries.append((address, function.name))
    entries.sort()
    with open(path, "w", encoding="utf-8") as out:
        for (address, name), following in zip(entries, entries[1:] + [(entries[-1][0] + 4096, "")]):
            out.write(f"{address:x} {max(1, following[0] - address):x} {_short_name(name)}\n")
    return len(entries)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="panda_like")
    parser.add_argument("--start", choices=("mid_range", "random"), default="random")
    parser.add_argument("--mode", choices=("batch", "single", "search"), default="batch")
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the profiled part")
    parser.add_argument("--jacobian", choices=JACOBIANS, default=SEARCH_SOLVER_DEFAULTS["jacobian"],
                        help="of the local solves (default: the search's)")
    parser.add_argument("--output", default="kernel.perf.data", help="perf's data file")
    args = parser.parse_args(argv)

    problem = Problem(args.robot, args.targets, 2026)
    problem.robot.joint_q[:] = problem.starts[args.start]
    settings = solver_settings(max_position_error=0.03, **dict(SEARCH_SOLVER_DEFAULTS, jacobian=args.jacobian))
    t0 = time.perf_counter()
    if args.mode == "batch":
        built = build_problem(problem.robot, problem.candidates, settings=settings)
        missed = np.flatnonzero(~compiled.solve(built, parallel=False).success.astype(bool))
        cand = np.repeat(missed, 2)
        seeded = built.select(cand)
        starts = random_starts(built, len(cand), np.random.default_rng(0))
        relay = (cand, np.ones(len(cand), dtype=np.int64))

        def work():
            compiled.solve(built, parallel=False)
            compiled.solve(seeded, starts, relay=relay, parallel=False)
    elif args.mode == "search":
        kw = dict(max_position_error=0.03, num_seeds=4, max_rounds=5)
        warm_up_backend()  # compiles here: the search alone would solve with numpy meanwhile
        robo_search_ik_direction_up(problem.robot, problem.candidates, **kw)

        def work():
            robo_search_ik_direction_up(problem.robot, problem.candidates, **kw)
    else:
        singles = [build_problem(problem.robot, (c,), settings=settings) for c in problem.candidates]
        compiled.solve(singles[0])

        def work():
            for one in singles:
                compiled.solve(one)
    print(f"kernel compiled and workload prepared in {time.perf_counter() - t0:.1f} s", flush=True)
    gc.collect()
    gc.freeze()
    try:
        perf = subprocess.Popen(["perf", "record", "-F", "4000", "-p", str(os.getpid()), "-o", args.output],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        print("perf is not installed (Debian: linux-perf); running the workload unprofiled")
        perf = None
    time.sleep(1.0)  # perf attaches
    t0, calls = time.perf_counter(), 0
    while time.perf_counter() - t0 < args.seconds:
        work()
        calls += 1
    print(f"{calls} rounds of the {args.mode} workload in {time.perf_counter() - t0:.1f} s")
    path = f"/tmp/perf-{os.getpid()}.map"
    print(f"wrote {write_perf_map(path)} function names to {path}")
    shutil.rmtree(CACHE, ignore_errors=True)
    if perf is not None:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
        print(f"perf report -i {args.output} --no-children --sort symbol")
    return 0


if __name__ == "__main__":
    sys.exit(main())
