"""The node's start on an empty kernel cache: time to its "ready" log line and to its first answer.

    python benchmarks/bench_cold_start.py [--configs dual_arm_torso panda_like ur5_like] [--runs 3]
        [--base REV] [--without-bytecode] [--warm] [--json out.json]

Each run launches ``python -m direction_up_ik.ros.node --ros-args --params-file config/<name>.yaml``
with ``NUMBA_CACHE_DIR`` a new empty folder (as after a fresh install or a numba upgrade), reads
its output until the "ready" line, then calls ``~/solve`` once (one candidate at a pose near the
mid-range state) and reports the seconds from the launch to each. ``--warm`` uses one shared
cache folder filled before the first run instead, and also reports the seconds to the node's log
line saying its compiled kernels are loaded. ``--base REV`` also runs the package of an earlier
revision (``git archive`` into a temporary folder, put first on ``PYTHONPATH``), the two
alternating run by run so that the machine's load falls on both; printed are both medians and
the paired ratios. ``--without-bytecode`` runs this checkout a second way in the same
alternation: with no Python bytecode to read (``PYTHONPYCACHEPREFIX`` an empty folder, nothing
written), as in a venv installed without bytecode where ``PYTHONDONTWRITEBYTECODE`` is set.
Figures and method: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))  # driver_common
from driver_common import KERNELS_MARK, READY_MARK  # noqa: E402
#: Seconds a run may take before it counts as hung (a cold compile runs in the background and is
#: not waited for).
RUN_TIMEOUT = 120.0


def export_revision(rev: str, into: str) -> str:
    """The ``direction_up_ik`` package of git revision ``rev`` unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "direction_up_ik"], check=True,
                             capture_output=True).stdout
    os.makedirs(into, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def _client_script(config: str, domain: int) -> str:
    """Python code that calls ~/solve once and prints the seconds since its own start."""
    return f"""
import time, rclpy
from rclpy.executors import SingleThreadedExecutor
from direction_up_ik.core.kinematics import mid_range
from direction_up_ik.robots import bundled_robot
from direction_up_ik.srv import SolveDirectionUpIK
from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
from sensor_msgs.msg import JointState
bundled = bundled_robot({config!r})
robot = bundled.load()
start = mid_range(robot)
poses = robot.tcp_transforms(start + 0.05)
rclpy.init(domain_id={domain})
node = rclpy.create_node("bench_cold_start_client")
executor = SingleThreadedExecutor()
executor.add_node(node)
client = node.create_client(SolveDirectionUpIK, "/direction_up_ik_node/solve")
candidate = DirectionUpCandidate()
for ee, pose in zip(bundled.end_effectors, poses):
    target = DirectionUpTarget(end_effector=ee.name, local_axes=DirectionUpTarget.LOCAL_AXES_TCP)
    target.position.x, target.position.y, target.position.z = (float(v) for v in pose[:3, 3])
    target.direction.x, target.direction.y, target.direction.z = (float(v) for v in pose[:3, 2])
    target.up.x, target.up.y, target.up.z = (float(v) for v in pose[:3, 1])
    candidate.targets.append(target)
request = SolveDirectionUpIK.Request(candidates=[candidate])
request.initial_state = JointState(name=list(robot.joint_names), position=[float(v) for v in start])
client.wait_for_service()
while True:
    future = client.call_async(request)
    executor.spin_until_future_complete(future, timeout_sec=0.25)
    if future.done():
        break
    client.remove_pending_request(future)
response = future.result()
print("ANSWERED", time.monotonic(), response.error_code, response.solver_backend, flush=True)
"""


def one_run(config: str, source: str, cache: str, domain: int, extra_env: dict, wait_kernels: bool) -> dict:
    """Launch the node from ``source`` ("" = this checkout) on ``cache``, with ``extra_env`` set for
    the node and its client; seconds to ready and to the answer, and with ``wait_kernels`` to the
    node's log line saying its kernels are loaded (NaN without)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, ROS_DOMAIN_ID=str(domain), PYTHONUNBUFFERED="1",
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", **extra_env)
    if source:
        env["PYTHONPATH"] = source + os.pathsep + env.get("PYTHONPATH", "")
    params = str(REPO / "config" / f"{config}.yaml")
    client = subprocess.Popen([sys.executable, "-c", _client_script(config, domain)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1.0)  # the client's own imports, before the node starts
    start = time.monotonic()
    node = subprocess.Popen([sys.executable, "-m", "direction_up_ik.ros.node", "--ros-args", "--params-file",
                             params], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=tempfile.gettempdir())
    ready, kernels, loaded = [], [], threading.Event()

    def read_node():
        for line in node.stdout:
            if not ready and READY_MARK in line:
                ready.append(time.monotonic() - start)
            if not kernels and KERNELS_MARK in line:
                kernels.append(time.monotonic() - start)
                loaded.set()
    reader = threading.Thread(target=read_node, daemon=True)
    reader.start()
    try:
        out, _ = client.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        client.kill()
        out = ""
    finally:
        if wait_kernels:
            loaded.wait(timeout=max(0.0, RUN_TIMEOUT - (time.monotonic() - start)))
        node.send_signal(signal.SIGINT)
        try:
            node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            node.kill()
    answered = [line.split() for line in out.splitlines() if line.startswith("ANSWERED")]
    if not ready or not answered:
        raise SystemExit(f"{config}: no ready line or no answer within {RUN_TIMEOUT} s:\n{out[-2000:]}")
    return dict(ready_s=ready[0], answer_s=float(answered[0][1]) - start, error_code=int(answered[0][2]),
                backend=answered[0][3], kernels_s=kernels[0] if kernels else float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=["dual_arm_torso", "panda_like", "ur5_like"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base", help="also run this git revision, alternating with the checkout")
    parser.add_argument("--without-bytecode", action="store_true",
                        help="also run this checkout with no Python bytecode to read, alternating")
    parser.add_argument("--warm", action="store_true", help="a warm kernel cache instead of an empty one")
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0")) or 88)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        sources = {"this checkout": ("", {})}  # label: (package folder, environment)
        if args.base:
            sources[f"base {args.base}"] = (export_revision(args.base, os.path.join(work, "base")), {})
        if args.without_bytecode:
            empty = os.path.join(work, "no_bytecode")
            os.makedirs(empty)
            sources["without bytecode"] = ("", dict(PYTHONPYCACHEPREFIX=empty, PYTHONDONTWRITEBYTECODE="1"))
        warm = {label: os.path.join(work, f"cache{i}") for i, label in enumerate(sources)}
        if args.warm:
            for label, (source, _) in sources.items():
                env = dict(os.environ, NUMBA_CACHE_DIR=warm[label])
                if source:
                    env["PYTHONPATH"] = source
                subprocess.run([sys.executable, "-m", "direction_up_ik.precompile", "--quiet"], env=env,
                               check=True, cwd=tempfile.gettempdir())
        rows = {}
        for config in args.configs:
            runs = {label: [] for label in sources}
            for k in range(args.runs):
                for label, (source, extra_env) in sources.items():
                    cache = warm[label] if args.warm else tempfile.mkdtemp(dir=work)
                    runs[label].append(one_run(config, source, cache, args.domain, extra_env, args.warm))
            rows[config] = runs
            for label, values in runs.items():
                ready = [r["ready_s"] for r in values]
                answer = [r["answer_s"] for r in values]
                loaded = [r["kernels_s"] for r in values]
                print(f"{config} ({label}): ready {statistics.median(ready):.2f} s "
                      f"[{min(ready):.2f}-{max(ready):.2f}], first answer {statistics.median(answer):.2f} s "
                      f"[{min(answer):.2f}-{max(answer):.2f}], kernels loaded {statistics.median(loaded):.2f} s "
                      f"[{min(loaded):.2f}-{max(loaded):.2f}], backend {values[0]['backend']}, "
                      f"error codes {sorted({r['error_code'] for r in values})}")
            for label in sources:
                if label == "this checkout":
                    continue
                mine, other = runs["this checkout"], runs[label]
                for key in ("ready_s", "kernels_s") if args.warm else ("ready_s",):
                    ratio = [a[key] / b[key] for a, b in zip(mine, other)]
                    print(f"{config}: {key[:-2]}, this checkout / {label}, paired: {min(ratio):.2f}-{max(ratio):.2f} "
                          f"(median {statistics.median(ratio):.2f})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
