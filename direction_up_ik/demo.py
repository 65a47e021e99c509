"""Main job: bring up the node on the bundled dual-arm robot and solve a real request.

    python -m direction_up_ik.demo [--robot dual_arm_torso] [--config FILE] [--plot out.png]

1. starts ``direction_up_ik_node`` as its own process with the robot's YAML config;
2. publishes a joint state (the middle of the joint limits);
3. calls ``~/solve`` with several dual-arm candidates, one of them out of reach,
   asking the node to publish the best one;
4. prints a table of the outcome and the joint command that was published;
5. with ``--plot``, draws the published pose and the chosen candidate's targets (PNG).

Exit code 0 when a candidate was chosen and the published command equals it.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Optional

import numpy as np

from .core.processes import python_command
from .robots import DEFAULT_ROBOT, bundled_robot

PACKAGE = "direction_up_ik"


def find_config(robot: str) -> pathlib.Path:
    """The robot's YAML: the source tree's config/, else the installed share folder."""
    here = pathlib.Path(__file__).resolve().parent
    for folder in (here.parent / "config", pathlib.Path(sys.prefix) / "share" / PACKAGE / "config"):
        path = folder / f"{robot}.yaml"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no config file {robot}.yaml in config/ or share/{PACKAGE}/config")


def make_candidates(robot_name: str):
    """(start (D,), list of candidates as (end_effector name, 4x4 TCP pose) tuples)."""
    from .core.kinematics import mid_range
    model = bundled_robot(robot_name).load()
    start = mid_range(model)
    names = [e.name for e in bundled_robot(robot_name).end_effectors]
    offsets = [np.full(model.num_dofs, 0.15), np.linspace(-0.2, 0.2, model.num_dofs),
               np.zeros(model.num_dofs)]
    offsets[2][1] = 0.3  # turn the waist (or the first joint)
    candidates = []
    for off in offsets:
        q = np.clip(start + off, np.where(np.isfinite(model.lower_limits), model.lower_limits, -3),
                    np.where(np.isfinite(model.upper_limits), model.upper_limits, 3))
        tcp = model.tcp_transforms(q)
        candidates.append([(n, tcp[e]) for e, n in enumerate(names)])
    far = model.tcp_transforms(start).copy()
    far[:, :3, 3] += (1.5, 0.0, 0.8)  # 1.7 m away: out of reach
    candidates.insert(1, [(n, far[e]) for e, n in enumerate(names)])
    return model, start, candidates


def run(robot_name: str, config: pathlib.Path, timeout: float = 60.0,
        plot: Optional[pathlib.Path] = None) -> int:
    import rclpy
    from geometry_msgs.msg import Point, Vector3
    from sensor_msgs.msg import JointState

    from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
    from direction_up_ik.srv import SolveDirectionUpIK

    model, start, candidates = make_candidates(robot_name)
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    node_args = ["--ros-args", "--params-file", str(config), "-p", f"robot:={robot_name}",
                 "-p", "command.type:=joint_state", "-p", "command.topic:=~/joint_command"]
    # This very package's node, whatever the working folder holds (core.processes).
    node_cmd = python_command("from direction_up_ik.ros.node import main; raise SystemExit(main())") + node_args
    print(f"$ python -m direction_up_ik.ros.node {' '.join(node_args)}")
    node_proc = subprocess.Popen(node_cmd, env=env)
    rclpy.init()
    client_node = rclpy.create_node("direction_up_ik_demo_client")
    try:
        commands = []
        client_node.create_subscription(JointState, "/direction_up_ik_node/joint_command",
                                        commands.append, 10)
        state_pub = client_node.create_publisher(JointState, "joint_states", 10)
        client = client_node.create_client(SolveDirectionUpIK, "/direction_up_ik_node/solve")
        state = JointState(name=list(model.joint_names), position=start.tolist())
        deadline = time.monotonic() + timeout
        while not client.wait_for_service(timeout_sec=0.2):
            if node_proc.poll() is not None or time.monotonic() > deadline:
                print("the node did not come up", file=sys.stderr)
                return 1
        request = SolveDirectionUpIK.Request(publish=True)
        for cand in candidates:
            msg = DirectionUpCandidate()
            for name, pose in cand:
                t = DirectionUpTarget(end_effector=name, mode=DirectionUpTarget.MODE_FULL,
                                      local_axes=DirectionUpTarget.LOCAL_AXES_TCP)
                t.position = Point(x=pose[0, 3], y=pose[1, 3], z=pose[2, 3])
                t.direction = Vector3(x=pose[0, 2], y=pose[1, 2], z=pose[2, 2])
                t.up = Vector3(x=pose[0, 1], y=pose[1, 1], z=pose[2, 1])
                msg.targets.append(t)
            request.candidates.append(msg)
        # The node may answer NO_JOINT_STATE until it has seen our joint state: retry briefly.
        while True:
            state.header.stamp = client_node.get_clock().now().to_msg()
            state_pub.publish(state)
            rclpy.spin_once(client_node, timeout_sec=0.05)
            future = client.call_async(request)
            rclpy.spin_until_future_complete(client_node, future, timeout_sec=max(1.0, deadline - time.monotonic()))
            response = future.result()
            if response is None or time.monotonic() > deadline:
                print("no response from the node", file=sys.stderr)
                return 1
            if response.error_code != SolveDirectionUpIK.Response.NO_JOINT_STATE:
                break
            time.sleep(0.1)
        end = time.monotonic() + 5.0
        while response.success and not commands and time.monotonic() < end:
            rclpy.spin_once(client_node, timeout_sec=0.05)
        print_report(response, commands)
        if not response.success or not commands:
            return 1
        chosen = np.array(response.results[response.best_index].joint_positions)
        published = np.array(commands[-1].position)
        if list(commands[-1].name) != list(response.joint_names) or not np.allclose(chosen, published):
            print("published command differs from the chosen candidate", file=sys.stderr)
            return 1
        print("published command equals candidate", response.best_index)
        if plot is not None:
            from .plot import plot_pose
            names = [name for name, _ in candidates[response.best_index]]
            targets = [(names.index(name), pose) for name, pose in candidates[response.best_index]]
            print("wrote", plot_pose(model, published, plot, targets, ee_names=names,
                                     title=f"{robot_name}: published command (candidate "
                                           f"{response.best_index}) and its targets"))
        return 0
    finally:
        client_node.destroy_node()
        rclpy.try_shutdown()
        node_proc.send_signal(signal.SIGINT)
        try:
            node_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            node_proc.kill()


def print_report(response, commands) -> None:
    """Readable table of a SolveDirectionUpIK response."""
    print(f"\nerror_code {response.error_code}: {response.message}")
    print(f"{'cand':>4} {'success':>7} {'cost':>10} {'iters':>5} {'stop':<20} per end effector: "
          "position mm / direction deg / up deg")
    for i, r in enumerate(response.results):
        errs = "  ".join(f"{e.end_effector}: {1e3 * e.position_error:8.2f} / "
                         f"{np.degrees(e.direction_error):6.2f} / {np.degrees(e.up_error):6.2f}"
                         for e in r.errors)
        print(f"{i:>4} {str(r.success):>7} {r.cost:>10.4g} {r.iterations:>5} {r.stop_reason:<20} {errs}")
    print(f"best_index: {response.best_index}; solved by the {response.solver_backend} backend"
          + (" (it answers until the compiled kernels are ready)"
             if response.solver_backend == "numpy" else ""))
    if commands:
        cmd = commands[-1]
        print("published joint command (sensor_msgs/JointState):")
        for name, value in zip(cmd.name, cmd.position):
            print(f"  {name:<28} {value: .5f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default=DEFAULT_ROBOT)
    parser.add_argument("--config", type=pathlib.Path, help="node parameter YAML (default: config/<robot>.yaml)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the node")
    parser.add_argument("--plot", type=pathlib.Path, help="also draw the published pose and its targets "
                                                          "into this PNG (needs matplotlib)")
    args = parser.parse_args(argv)
    config = args.config or find_config(args.robot)
    return run(args.robot, config, args.timeout, args.plot)


if __name__ == "__main__":
    sys.exit(main())
