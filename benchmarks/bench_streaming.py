#!/usr/bin/env python3
"""Streaming without joint jumps: a target path streamed into ``~/target`` at 200 Hz.

    .venv/bin/python benchmarks/bench_streaming.py [--seconds 30] [--rate-hz 200] [--laps 3] \
        [--robots ur5_like dual_arm_torso] [--robot-lag-ticks 4] [--json out.json]

Per robot, a ``DirectionUpIKNode`` with the robot's config runs **in this process** (no
executor, no transport: each target is handed to its ``~/target`` callback, ``_on_target``,
in turn, so the figures are the node's own work, not the middleware's; ``make bench-ros``
measures the transport). The target path (full poses of every end effector) is the FK of a
smooth joint-space path (``--laps`` rounds of start -> waypoint -> end -> start, at rest at
each waypoint) that passes **near a singular pose** (UR5: wrist 2 to 0.02 rad and back
through 0, wrist 1 and 3 aligned; dual arm: the left elbow 0.03 rad from straight) and, for a stretch
of the path, is pushed **out of reach** (the last TCP ramped out to 0.05 m beyond the distance
no joint state reaches, and back). The joint state the node receives is the command of ``--robot-lag-ticks``
ticks before (a robot following 20 ms behind), as a real cell's would lag.

Two configurations run side by side on the same path:

* ``streaming``: the node's defaults (``streaming.start_from`` last_command,
  ``streaming.max_joint_step`` 0.1);
* ``before``: what the node did before issue 26 (solve from the joint states, no step limit).

Figures per run: commands published, **published jumps** above the step limit (consecutive
published commands more than 0.1 rad or m apart in any joint; must be 0 with the limit),
the largest published step, targets held by the limit, commands that were a step of an
approach (the target's own solution too far), targets without a solution, and
the callback's time per target (target in -> command out, the node's ``~/target`` lag
without transport) p50 / p99 / max. Prints a table; ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LIMIT = 0.1  # rad / m, the node's default streaming.max_joint_step (checked below)
#: (start, near-singular waypoint, end) joint states per robot; the path goes start -> waypoint
#: -> end -> start with cosine-smoothed segments.
WAYPOINTS = {
    "ur5_like": (np.array([0.2, -1.2, 1.4, -1.6, -1.5, 0.3]),
                 np.array([0.6, -1.0, 1.2, -1.8, 0.02, 0.9]),   # wrist 2 near 0: wrist singularity
                 np.array([-0.3, -1.5, 1.7, -1.2, -1.1, -0.4])),
    "dual_arm_torso": None,  # built from the limits in waypoints()
}
OUT_OF_REACH_M = 0.05


def waypoints(robot) -> tuple:
    from direction_up_ik.core.kinematics import mid_range

    if WAYPOINTS.get(robot.robot_name) is not None:
        return WAYPOINTS[robot.robot_name]
    start = mid_range(robot)
    names = list(robot.joint_names)
    via = start.copy()
    via[names.index("left_elbow_joint")] = -0.03     # elbow almost straight: elbow singularity
    via[names.index("right_elbow_joint")] = -1.6
    via[names.index("waist_yaw_joint")] += 0.3
    end = start.copy()
    end[names.index("left_shoulder_pitch_joint")] -= 0.5
    end[names.index("right_shoulder_pitch_joint")] -= 0.4
    end[names.index("torso_lift_joint")] = 0.3
    return start, via, end


def joint_path(points, ticks: int, laps: int = 1) -> np.ndarray:
    """(ticks, D) joint states: ``laps`` times start -> via -> end -> start, each leg
    cosine-smoothed (at rest at every waypoint)."""
    a, b, c = points
    legs = [(a, b), (b, c), (c, a)] * laps
    out = []
    for i in range(ticks):
        s = len(legs) * i / max(ticks - 1, 1)
        leg = min(int(s), len(legs) - 1)
        u = 0.5 - 0.5 * math.cos(math.pi * (s - leg))
        p, q = legs[leg]
        out.append((1.0 - u) * p + u * q)
    return np.array(out)


def target_poses(robot, path: np.ndarray) -> np.ndarray:
    """(ticks, E, 4, 4) TCP poses along ``path``; from 60 % to 70 % of the way the last TCP is
    pushed away from the root, ramped up and down, to OUT_OF_REACH_M beyond the distance no
    joint state reaches (``tcp_reach_bounds``) at the middle: out of reach for a while."""
    poses = np.array([robot.tcp_transforms(q) for q in path])
    ticks, e = len(path), robot.num_end_effectors - 1
    far = float(robot.tcp_reach_bounds()[e]) + OUT_OF_REACH_M
    for i in range(ticks):
        s = i / max(ticks - 1, 1)
        if 0.6 <= s <= 0.7:
            ramp = math.sin(math.pi * (s - 0.6) / 0.1)
            p = poses[i, e, :3, 3]
            poses[i, e, :3, 3] = p * (1.0 + ramp * (far / np.linalg.norm(p) - 1.0))
    return poses


def candidate(names, poses):
    from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget

    targets = []
    for name, pose in zip(names, poses):
        t = DirectionUpTarget(end_effector=name, mode=DirectionUpTarget.MODE_FULL,
                              local_axes=DirectionUpTarget.LOCAL_AXES_TCP)
        t.position.x, t.position.y, t.position.z = (float(v) for v in pose[:3, 3])
        t.direction.x, t.direction.y, t.direction.z = (float(v) for v in pose[:3, 2])
        t.up.x, t.up.y, t.up.z = (float(v) for v in pose[:3, 1])
        targets.append(t)
    return DirectionUpCandidate(targets=targets)


def run_stream(context, robot_name: str, params: dict, poses, start, lag_ticks: int) -> dict:
    """Stream ``poses`` into a fresh node's ~/target callback; the figures of one run."""
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from direction_up_ik.ros.parameter_files import parameter_file_values
    from direction_up_ik.ros.node import DirectionUpIKNode

    values = parameter_file_values(REPO / "config" / f"{robot_name}.yaml")
    values["command.topic"] = "~/joint_command"  # in the node's namespace, whatever the config says
    values.update(params)
    overrides = [Parameter(k, value=list(v) if isinstance(v, tuple) else v) for k, v in values.items()
                 if not (isinstance(v, (list, tuple)) and not v)]
    node = DirectionUpIKNode(context=context, namespace=f"/bench_{uuid.uuid4().hex[:8]}",
                             parameter_overrides=overrides)
    try:
        names = [e.name for e in node._config.end_effectors]
        joints = list(node._robot.joint_names)
        published = []
        real_publish = node.publish_command

        def record(q):
            published.append(np.array(q, dtype=np.float64))
            real_publish(q)
        node.publish_command = record  # the benchmark's own probe on its own node

        commanded = [np.asarray(start, dtype=np.float64)]  # what the robot was told, per tick
        node._on_joint_state(JointState(name=joints, position=[float(v) for v in start]))
        seconds = []
        held_before, approached_before = node.commands.held, node.commands.approached
        for i, tick_poses in enumerate(poses):
            # The robot is lag_ticks behind the commands.
            lagged = commanded[max(0, len(commanded) - 1 - lag_ticks)]
            node._on_joint_state(JointState(name=joints, position=[float(v) for v in lagged]))
            msg = candidate(names, tick_poses)
            before = len(published)
            t0 = time.perf_counter()
            node._on_target(msg)
            seconds.append(time.perf_counter() - t0)
            commanded.append(published[-1] if len(published) > before else commanded[-1])
        held = node.commands.held - held_before
        approached = node.commands.approached - approached_before
        steps = (np.abs(np.diff(np.vstack([start] + published), axis=0)) if published
                 else np.zeros((0, len(joints))))
        largest = steps.max(axis=1) if len(steps) else np.zeros(0)
        return dict(targets=len(poses), published=len(published), held=held, approach_steps=approached,
                    without_command=len(poses) - len(published),
                    unsolved=len(poses) - len(published) - held,
                    jumps_above_limit=int(np.sum(largest > LIMIT + 1e-9)),
                    largest_step=round(float(largest.max()) if len(largest) else 0.0, 4),
                    callback_ms_p50=round(1e3 * float(np.percentile(seconds, 50)), 3),
                    callback_ms_p99=round(1e3 * float(np.percentile(seconds, 99)), 3),
                    callback_ms_max=round(1e3 * float(np.max(seconds)), 3),
                    over_period=int(np.sum(np.array(seconds) > 1.0 / RATE_HZ)),
                    backend=node._backend_summary())
    finally:
        node.destroy_node()


RATE_HZ = 200.0
CONFIGS = {"streaming": {},
           "before": {"streaming.start_from": "joint_states", "streaming.max_joint_step": [float("inf")]}}


def main(argv=None) -> int:
    global RATE_HZ
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the target path")
    parser.add_argument("--rate-hz", type=float, default=200.0, help="targets per second of the path")
    parser.add_argument("--robots", nargs="+", default=["ur5_like", "dual_arm_torso"])
    parser.add_argument("--robot-lag-ticks", type=int, default=4, help="joint states lag the commands")
    parser.add_argument("--laps", type=int, default=3, help="times the path goes round its waypoints")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    RATE_HZ = args.rate_hz

    import rclpy

    from direction_up_ik.core.backend import warm_up_backend
    from direction_up_ik.robots import load_robot
    from direction_up_ik.ros.config import DEFAULT_MAX_JOINT_STEP

    assert DEFAULT_MAX_JOINT_STEP == LIMIT, "update LIMIT to the node's default"
    warm_up_backend()
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID", "77")))
    rows = []
    try:
        for robot_name in args.robots:
            robot = load_robot(robot_name)
            points = waypoints(robot)
            ticks = int(round(args.seconds * args.rate_hz))
            poses = target_poses(robot, joint_path(points, ticks, args.laps))
            for config, params in CONFIGS.items():
                row = dict(robot=robot_name, config=config, seconds=args.seconds, rate_hz=args.rate_hz,
                           robot_lag_ticks=args.robot_lag_ticks, laps=args.laps,
                           **run_stream(context, robot_name, params, poses, points[0], args.robot_lag_ticks))
                rows.append(row)
                print(f"{robot_name:15s} {config:9s} targets {row['targets']:5d}  published {row['published']:5d}  "
                      f"jumps>{LIMIT} {row['jumps_above_limit']:4d} (largest {row['largest_step']:.3f})  "
                      f"held {row['held']:4d}  approach steps {row['approach_steps']:4d}  "
                      f"unsolved {row['unsolved']:4d}  callback ms p50 "
                      f"{row['callback_ms_p50']:.3f} p99 {row['callback_ms_p99']:.3f} max {row['callback_ms_max']:.1f}"
                      f"  over {1e3 / args.rate_hz:.0f} ms {row['over_period']}", flush=True)
    finally:
        rclpy.shutdown(context=context)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(machine=platform.platform(), cpus=os.cpu_count(), rows=rows),
                                        indent=2), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
