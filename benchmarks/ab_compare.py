#!/usr/bin/env python3
"""Time this checkout's solver against an earlier revision's, interleaved in one process.

    .venv/bin/python benchmarks/ab_compare.py [--base HEAD~1] [--robots ur5_like panda_like]
        [--mode batch|single|spec] [--targets 1000] [--sweeps 12] [--singles 300]
        [--targets-set random|near-limits|far-reach] [--fresh-settings] [--still K]

On this shared 2-core machine a benchmark cell moves between runs by more than most single
changes gain; a ratio measured in one process, old and new calls alternating, resolves them. The script exports ``--base`` (``git archive``) to ``build/ab/<commit>/`` with the
package renamed ``dui_base`` (its imports rewritten), imports it beside the working tree's
``direction_up_ik`` and, on the peer benchmark's reproducible targets
(``bench_peers.Problem``) from both start states:

* ``batch``: one ``robo_search_ik_direction_up`` call over all targets (the working tree's
  ``bench_peers`` batch settings for both), ``--sweeps`` alternations: median wall and CPU
  time, new / old, and each side's successes, iterations and starts;
* ``single``: the multi-seed search one target per call (4 seeds, 5 ms), ``--singles`` targets
  alternating: median and p95, new / old;
* ``spec``: the spec's single solve one target per call: median and p95, and whether every
  answer is the same (a change of the code must not change the spec mode's answers).

``--fresh-settings`` (``single``, ``spec``): each call's ``max_position_error`` differs from every
other call's by a nanometre or so, so that no call finds settings an earlier one made (a caller
that builds its settings afresh each time); both sides get the same values. ``--still K``
(``single``, ``spec``): the first K joints stay still (``active_dof_ids`` the others, as a
tuple), e.g. 2 for the dual arm's lift and waist.

Each line also gives successes and the median cost (joint motion) of both. The exported copy's
numba kernel compiles on its first use and is cached with it. This is a
developer's tool, not part of the package; it needs git.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import io
import sys
import tarfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one BLAS thread, as the benchmarks

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "direction_up_ik"
RENAMED = "dui_base"


def kernel_module(package: str):
    """The compiled backend of ``package``: ``core.compiled``, or ``core.fast`` in revisions
    from before it became a package."""
    import importlib
    try:
        return importlib.import_module(f"{package}.core.compiled")
    except ImportError:
        return importlib.import_module(f"{package}.core.fast")


def export(base: str) -> Path:
    """Folder holding revision ``base``'s package as ``dui_base`` (exported once per commit)."""
    commit = subprocess.run(["git", "rev-parse", base], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.strip()
    folder = ROOT / "build" / "ab" / commit
    if not (folder / RENAMED / "__init__.py").exists():
        archive = subprocess.run(["git", "archive", commit, PACKAGE], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder / "tmp", filter="data")
        (folder / "tmp" / PACKAGE).rename(folder / RENAMED)
        (folder / "tmp").rmdir()
        word = re.compile(rf"\b{PACKAGE}\b")
        for path in (folder / RENAMED).rglob("*.py"):
            path.write_text(word.sub(RENAMED, path.read_text()))
    print(f"base: {base} = {commit[:10]} (exported to {folder})", flush=True)
    return folder


def ratio_line(label: str, new: np.ndarray, old: np.ndarray, p95: bool) -> str:
    text = f"{label} median {np.median(old) * 1e3:.3f} -> {np.median(new) * 1e3:.3f} ms " \
           f"({np.median(new) / np.median(old):.2f} x)"
    if p95:
        text += f", p95 ({np.percentile(new, 95) / np.percentile(old, 95):.2f} x)"
    return text


def outcome(result) -> str:
    ok = np.asarray(result.success) == 1
    cost = np.asarray(result.cost)[ok]
    return f"{int(ok.sum())} ok, cost median {np.median(cost):.2f}" if ok.any() else "0 ok"


def search_outcome(found) -> str:
    """:func:`outcome` of a search, with its iterations and starts summed over the candidates."""
    return f"{outcome(found.result)}, {int(np.sum(found.iterations))} iterations, {int(np.sum(found.starts))} starts"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="HEAD", help="git revision to compare against (default HEAD)")
    parser.add_argument("--robots", nargs="+", default=["ur5_like", "panda_like"])
    parser.add_argument("--mode", choices=("batch", "single", "spec"), default="batch")
    parser.add_argument("--targets", type=int, default=1000, help="targets per robot (batch mode)")
    parser.add_argument("--sweeps", type=int, default=12, help="alternations of the batch calls")
    parser.add_argument("--singles", type=int, default=300, help="targets timed one by one")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--targets-set", choices=("random", "near-limits", "far-reach"), default="random",
                        help="bench_peers' target set")
    parser.add_argument("--fresh-settings", action="store_true",
                        help="single / spec: another max_position_error in every call")
    parser.add_argument("--still", type=int, default=0, help="single / spec: the first K joints stay still")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(export(args.base)))
    import dui_base.core as base_core  # noqa: E402
    from dui_base.core.targets import full_pose_candidates as base_candidates  # noqa: E402
    from dui_base.robots import load_robot as base_load  # noqa: E402

    import bench_peers  # noqa: E402  (this folder's)
    import direction_up_ik.core as new_core  # noqa: E402

    for label, package in (("base", "dui_base"), ("working tree", PACKAGE)):
        print(f"{label}: kernel ready in {kernel_module(package).warm_up():.1f} s", flush=True)
    mpe = bench_peers.MAX_POSITION_ERROR
    batch_kw = dict(max_position_error=mpe, num_seeds=bench_peers.BATCH_NUM_SEEDS,
                    max_rounds=bench_peers.BATCH_MAX_ROUNDS)
    single_kw = dict(max_position_error=mpe, num_seeds=bench_peers.NUM_SEEDS,
                     time_budget=bench_peers.TIME_BUDGET)
    for name in args.robots:
        problem = bench_peers.Problem(name, args.targets, args.seed, args.targets_set)
        old_robot = base_load(name)
        old_cands = base_candidates(problem.targets)
        for start, q0 in problem.starts.items():
            bench_peers._set_start(problem.robot, q0)
            old_robot.joint_q[:] = problem.robot.joint_q
            old_robot.update_fk()
            sides = {"old": (base_core, old_robot, old_cands), "new": (new_core, problem.robot, problem.candidates)}
            for core, robot, cands in sides.values():
                core.warm_up_search(robot, cands[:1])
            head = f"{name} {start}:"
            if args.mode == "batch":
                wall = {"old": [], "new": []}
                cpu = {"old": [], "new": []}
                last = {}
                for sweep in range(args.sweeps):
                    for side in (("old", "new") if sweep % 2 else ("new", "old")):
                        core, robot, cands = sides[side]
                        t, c = time.perf_counter(), time.process_time()
                        last[side] = core.robo_search_ik_direction_up(robot, cands, **batch_kw)
                        wall[side].append(time.perf_counter() - t)
                        cpu[side].append(time.process_time() - c)
                print(f"{head} {ratio_line('wall', np.array(wall['new']), np.array(wall['old']), False)}; "
                      f"{ratio_line('cpu', np.array(cpu['new']), np.array(cpu['old']), False)} | "
                      f"old {search_outcome(last['old'])}, new {search_outcome(last['new'])}", flush=True)
                continue
            times = {"old": [], "new": []}
            answers = {"old": [], "new": []}
            active = tuple(range(args.still, problem.robot.num_dofs)) if args.still else None
            count = min(args.singles, problem.n)
            for i in range(count):
                call_mpe = mpe + 1e-9 * (i + 1) if args.fresh_settings else mpe
                for side in (("old", "new") if i % 2 else ("new", "old")):
                    core, robot, cands = sides[side]
                    t = time.perf_counter()
                    if args.mode == "spec":
                        out = core.robo_solve_ik_direction_up_multi_batch(robot, (cands[i],), active,
                                                                           max_position_error=call_mpe)
                    else:
                        out = core.robo_search_ik_direction_up(robot, (cands[i],), active,
                                                               **dict(single_kw, max_position_error=call_mpe)).result
                    times[side].append(time.perf_counter() - t)
                    answers[side].append(out)
            same = all(np.array_equal(a.joint_q, b.joint_q) for a, b in zip(answers["old"], answers["new"]))
            ok = {side: sum(int(r.success[0]) for r in answers[side]) for side in answers}
            print(f"{head} {ratio_line('one target', np.array(times['new']), np.array(times['old']), True)} | "
                  f"successes {ok['old']} -> {ok['new']} of {count}; same answers: {same}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
