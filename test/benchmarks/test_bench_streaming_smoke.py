"""Smoke run of benchmarks/bench_streaming.py (a benchmark, not a test): a short path on both
robots, both configurations; with the step limit no published command jumps, and the path
really leaves the reach (targets without a solution) and passes where the limit holds."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rclpy")

from bench_streaming import joint_path, target_poses, waypoints  # noqa: E402 (benchmarks/ on the path)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_path_passes_near_a_singular_pose_and_out_of_reach():
    from direction_up_ik.robots import load_robot

    robot = load_robot("ur5_like")
    path = joint_path(waypoints(robot), 300)
    assert np.min(np.abs(path[:, 4])) < 0.02  # wrist 2 at (crossing) 0: wrist 1 and 3 aligned
    poses = target_poses(robot, path)
    distance = np.linalg.norm(poses[:, 0, :3, 3], axis=1)
    assert distance.max() > robot.tcp_reach_bounds()[0]  # beyond any joint state's reach


def test_bench_streaming_smoke(tmp_path):
    out = tmp_path / "streaming.json"
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "benchmarks/bench_streaming.py", "--seconds", "2",
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert [(r["robot"], r["config"]) for r in rows] == [
        ("ur5_like", "streaming"), ("ur5_like", "before"),
        ("dual_arm_torso", "streaming"), ("dual_arm_torso", "before")]
    for r in rows:
        assert r["targets"] == 400 and r["published"] + r["held"] + r["unsolved"] == r["targets"]
        assert r["unsolved"] > 0  # the out-of-reach stretch
        assert 0 < r["callback_ms_p50"] <= r["callback_ms_p99"] <= r["callback_ms_max"]
    for r in rows:
        if r["config"] == "streaming":
            assert r["jumps_above_limit"] == 0 and r["largest_step"] <= 0.1
        else:
            assert r["held"] == 0  # no limit before
    assert "jumps>0.1" in proc.stdout
