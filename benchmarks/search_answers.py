#!/usr/bin/env python3
"""What the search answers, per bundled robot and start: success, time and whole turns.

    .venv/bin/python benchmarks/search_answers.py [--targets 300] [--seed 2026] [--json out.json]

For each bundled robot from its mid-range and from a random start: ``--targets`` random
reachable full poses, one ``robo_search_ik_direction_up`` call each (4 seeds, 5 ms budget,
after ``warm_up_search``), printing the success count, the median and p95 time per call, and
how many answers leave a joint whole turns away from an in-limit value of the same pose nearer
the start (with the largest extra motion). Run it on two revisions (``PYTHONPATH`` at an
exported tree) for before/after figures; for paired timing use ``ab_compare.py``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from direction_up_ik import robo_search_ik_direction_up
from direction_up_ik.core.backend import warm_up_backend
from direction_up_ik.core.kinematics import mid_range, random_in_limits
from direction_up_ik.core.search_api import warm_up_search
from direction_up_ik.core.targets import full_pose_candidates
from direction_up_ik.robots import load_robot

TURN = 2.0 * np.pi


def extra_turn_motion(q: np.ndarray, q0: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Largest motion (rad) an answer ``q`` (D,) saves by moving one joint whole turns, in limits."""
    best = 0.0
    for d in range(len(q)):
        for turns in (-2, -1, 1, 2):
            other = q[d] + turns * TURN
            if lower[d] <= other <= upper[d] and abs(other - q0[d]) < abs(q[d] - q0[d]) - 1e-6:
                best = max(best, abs(q[d] - q0[d]) - abs(other - q0[d]))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json")
    args = parser.parse_args()
    warm_up_backend()
    out = {}
    for name in ("panda_like", "ur5_like", "dual_arm_torso"):
        robot = load_robot(name)
        for start in ("mid-range", "random"):
            rng = np.random.default_rng(args.seed)
            robot.joint_q[:] = mid_range(robot) if start == "mid-range" else random_in_limits(robot, rng, 1)[0]
            q0 = robot.joint_q.astype(np.float64)
            warm_up_search(robot)
            candidates = full_pose_candidates(robot.tcp_transforms(random_in_limits(robot, rng, args.targets)))
            times, solved, extra = [], 0, []
            for candidate in candidates:
                begin = time.perf_counter()
                found = robo_search_ik_direction_up(robot, [candidate], max_position_error=0.03, num_seeds=4,
                                                    time_budget=0.005)
                times.append(time.perf_counter() - begin)
                if found.result.success[0]:
                    solved += 1
                    saved = extra_turn_motion(found.result.joint_q[0].astype(np.float64), q0,
                                              robot.lower_limits, robot.upper_limits)
                    if saved > 0:
                        extra.append(saved)
            ms = np.array(times) * 1e3
            row = dict(solved=solved, targets=len(candidates), median_ms=float(np.median(ms)),
                       p95_ms=float(np.percentile(ms, 95)), whole_turns=len(extra),
                       max_extra_rad=float(max(extra, default=0.0)))
            out[f"{name}/{start}"] = row
            print(f"{name:15s} {start:9s} solved {solved}/{len(candidates)}  median {row['median_ms']:.3f} ms  "
                  f"p95 {row['p95_ms']:.3f} ms  answers with a nearer whole-turn equivalent: {len(extra)} "
                  f"(largest extra motion {row['max_extra_rad']:.2f} rad)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
