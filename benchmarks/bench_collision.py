"""Collision-aware search vs the search without collisions, and the cost of ``CollisionScene.check``.

    python benchmarks/bench_collision.py [--targets 1000] [--json out.json]

Per robot and scene (dual_arm_torso with a table under the hands and a box between them;
panda_like with a table): targets are the TCP poses of random collision-free in-limit states
(so each has at least one collision-free solution), solved from the mid-range state by
``robo_search_ik_direction_up`` (4 seeds, 0.1 s budget) without and with ``collision_scene``,
one after the other per target (side by side, same load). Printed: success, how many plain
answers collide, collision-free success with the scene, median and 90th percentile time per
target and their ratio, and the time of ``check`` for 1000 random states (compiled kernel and
numpy reference). Figures and method: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from direction_up_ik import (CollisionScene, Obstacle, robo_search_ik_direction_up, warm_up_backend,
                             warm_up_search)
from direction_up_ik.core import collision_distance
from direction_up_ik.core.kinematics import mid_range, random_in_limits
from direction_up_ik.core.rotations import make_transform
from direction_up_ik.core.targets import full_pose_candidates
from direction_up_ik.robots import bundled_robot, load_robot


def box(size, xyz, name):
    return Obstacle.box(size, make_transform(np.eye(3), xyz), name=name)


#: The benchmark's scenes, in the robot's root frame (metres).
SCENES = {
    "dual_arm_torso": [box((0.7, 1.2, 0.05), (0.75, 0.0, 0.9), "table"),
                       box((0.2, 0.06, 0.3), (0.6, 0.0, 1.15), "divider")],
    "panda_like": [box((0.7, 1.2, 0.1), (0.65, 0.0, 0.0), "table")],
}


def free_states(robot, scene, rng, count: int) -> np.ndarray:
    """(count, D) random in-limit states that ``scene`` calls collision-free."""
    out = []
    while sum(len(x) for x in out) < count:
        states = random_in_limits(robot, rng, 4 * count)
        out.append(states[scene.check(states).collision_free])
    return np.concatenate(out)[:count]


def run(name: str, targets: int, seed: int) -> dict:
    robot = load_robot(name)
    robot.joint_q[:] = mid_range(robot)
    robot.update_fk()
    start = time.perf_counter()
    scene = CollisionScene.from_urdf(robot, bundled_robot(name).urdf_path(), obstacles=SCENES[name])
    build_s = time.perf_counter() - start
    if not scene.check(robot.joint_q).collision_free[0]:
        raise SystemExit(f"{name}: the mid-range start collides with the scene")
    rng = np.random.default_rng(seed)
    goals = free_states(robot, scene, rng, targets)
    candidates = full_pose_candidates(robot.tcp_transforms(goals))
    warm_up_search(robot)
    options = dict(max_position_error=0.03, num_seeds=4, time_budget=0.1)
    for candidate in candidates[:5]:  # first calls of each path outside the timing
        robo_search_ik_direction_up(robot, [candidate], **options)
        robo_search_ik_direction_up(robot, [candidate], collision_scene=scene, **options)
    plain_t, aware_t = np.empty(targets), np.empty(targets)
    plain_ok, plain_free, aware_free = (np.zeros(targets, dtype=bool) for _ in range(3))
    for i, candidate in enumerate(candidates):
        t0 = time.perf_counter()
        plain = robo_search_ik_direction_up(robot, [candidate], **options)
        t1 = time.perf_counter()
        aware = robo_search_ik_direction_up(robot, [candidate], collision_scene=scene, **options)
        t2 = time.perf_counter()
        plain_t[i], aware_t[i] = t1 - t0, t2 - t1
        plain_ok[i] = plain.result.success[0] == 1
        plain_free[i] = plain_ok[i] and scene.check(plain.result.joint_q[0]).collision_free[0]
        aware_free[i] = aware.result.success[0] == 1 and scene.check(aware.result.joint_q[0]).collision_free[0]
    states = random_in_limits(robot, np.random.default_rng(seed + 1), 1000)
    scene.check(states[:2])
    t0 = time.perf_counter()
    scene.check(states)
    check_s = time.perf_counter() - t0
    parts, pairs, _ = scene.arrays()
    t0 = time.perf_counter()
    collision_distance.reference_clearance(robot, parts, pairs, states)
    check_numpy_s = time.perf_counter() - t0
    return dict(robot=name, targets=targets, scene_build_s=build_s, body_pairs=len(scene.body_pairs),
                plain_success=float(plain_ok.mean()), plain_colliding=float((plain_ok & ~plain_free).mean()),
                aware_success_free=float(aware_free.mean()),
                plain_median_ms=1e3 * float(np.median(plain_t)), aware_median_ms=1e3 * float(np.median(aware_t)),
                plain_p90_ms=1e3 * float(np.percentile(plain_t, 90)),
                aware_p90_ms=1e3 * float(np.percentile(aware_t, 90)),
                median_ratio=float(np.median(aware_t) / np.median(plain_t)),
                check_1000_ms=1e3 * check_s, check_1000_numpy_ms=1e3 * check_numpy_s,
                compiled_check=collision_distance._kernels() is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--robots", nargs="*", default=list(SCENES))
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    warm_up_backend()
    rows = {}
    for name in args.robots:
        row = rows[name] = run(name, args.targets, args.seed)
        print(f"{name}: {row['targets']} targets, {row['body_pairs']} checked pairs "
              f"(scene built in {row['scene_build_s']:.2f} s)")
        print(f"  without collisions: success {100 * row['plain_success']:.1f} %, of which colliding "
              f"{100 * row['plain_colliding']:.1f} % of targets; median {row['plain_median_ms']:.2f} ms, "
              f"p90 {row['plain_p90_ms']:.2f} ms")
        print(f"  collision-aware:    collision-free success {100 * row['aware_success_free']:.1f} %; "
              f"median {row['aware_median_ms']:.2f} ms, p90 {row['aware_p90_ms']:.2f} ms; "
              f"median ratio {row['median_ratio']:.2f}")
        print(f"  check of 1000 states: {row['check_1000_ms']:.1f} ms "
              f"({'compiled' if row['compiled_check'] else 'numpy'}), numpy reference "
              f"{row['check_1000_numpy_ms']:.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
