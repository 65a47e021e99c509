#!/usr/bin/env python3
"""What collision checking costs the node: ``DirectionUpIKNode.solve`` with and without it.

    .venv/bin/python benchmarks/bench_node_collisions.py [--requests 300] [--seed 0]

Creates the node in this process from ``config/dual_arm_torso.yaml`` (its table included),
publishes nothing: every request carries its start state (the middle of the joint limits).
Requests: both hands at the TCP poses of a random collision-free state near the start
(each joint within +-``--scale`` rad / m), the node's default search. Each request is solved
twice in a row, ``ignore_collisions`` false then true (paired, so that background load hits
both alike), and the table prints the median and 99th percentile of each, their paired
ratio, and how many answers were collision-free. Also the start-up time of the collision
model (first build in this process: the pair sampling; then the cached one).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=0.4)
    args = parser.parse_args(argv)

    import rclpy

    from direction_up_ik.core import warm_up_backend
    from direction_up_ik.core.kinematics import mid_range
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.ros.config import config_from_values
    from direction_up_ik.ros.parameter_files import parameter_file_values
    from direction_up_ik.ros.robot_model import load_robot_model
    from direction_up_ik.ros.obstacles import load_collision_scene
    from direction_up_ik.ros.node import DirectionUpIKNode
    from direction_up_ik.srv import SolveDirectionUpIK
    sys.path.insert(0, str(REPO / "test" / "ros"))
    from node_harness import target_msg, to_parameters

    warm_up_backend()
    values = parameter_file_values(REPO / "config" / "dual_arm_torso.yaml")
    values["markers.enabled"] = False
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=99)
    try:
        config = config_from_values(values)
        model = load_robot_model(config)
        builds = []
        for _ in range(2):  # the first build samples the pairs, the second finds them cached
            t0 = time.perf_counter()
            load_collision_scene(config, model)
            builds.append(time.perf_counter() - t0)
        node = DirectionUpIKNode(context=context, parameter_overrides=to_parameters(values))
        robot = node._robot
        scene = node._scene
        start = mid_range(robot)
        rng = np.random.default_rng(args.seed)
        goals = []
        while len(goals) < args.requests:
            q = np.clip(start + rng.uniform(-args.scale, args.scale, robot.num_dofs), robot.lower_limits,
                        robot.upper_limits)
            if scene.check(q).collision_free[0]:
                goals.append(q)
        times = {False: [], True: []}
        free = ok = 0
        for q in goals:
            tcp = robot.tcp_transforms(q)
            for ignore in (False, True):
                req = SolveDirectionUpIK.Request(ignore_collisions=ignore)
                req.candidates = [DirectionUpCandidate(targets=[target_msg(n, tcp[e]) for e, n in
                                                                enumerate(("left", "right"))])]
                req.initial_state.name = list(robot.joint_names)
                req.initial_state.position = start.tolist()
                t0 = time.perf_counter()
                response = node.solve(req, SolveDirectionUpIK.Response())
                times[ignore].append(time.perf_counter() - t0)
                if not ignore:
                    ok += response.success
                    free += response.success and response.results[0].collision_free
        checked, unchecked = np.array(times[False]) * 1e3, np.array(times[True]) * 1e3
        print(f"collision model build: first {builds[0]:.2f} s, cached {builds[1]:.3f} s "
              f"({len(scene.link_bodies)} link bodies, {len(scene.body_pairs)} checked pairs)")
        obstacles = ", ".join(o.name for o in node._scene.obstacles)
        print(f"{'requests':<28}{len(goals)} (node.solve in process, default search; obstacles: {obstacles})")
        print(f"{'collisions checked':<28}median {np.median(checked):.3f} ms, p99 {np.percentile(checked, 99):.3f} ms")
        print(f"{'ignore_collisions':<28}median {np.median(unchecked):.3f} ms, p99 {np.percentile(unchecked, 99):.3f} ms")
        print(f"{'paired ratio (median)':<28}{np.median(checked / unchecked):.2f}")
        print(f"{'successes, collision-free':<28}{ok}/{len(goals)}, {free}/{len(goals)}")
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
