"""The node on a cold kernel cache: it answers at once (numpy) while the compiled kernels are
compiled in the background, switches to them without a restart, and ends cleanly on SIGINT at
any time. The package here is a copy whose in-tree cache cannot be written, as for an install
tree owned by another user: the kernels land in the per-user cache, and the precompile
command finds them there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from direction_up_ik.core.kinematics import mid_range  # noqa: E402
from direction_up_ik.robots import bundled_robot  # noqa: E402
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from node_harness import (CONFIG_DIR, PROCESS_TIMEOUT, REPO, NodeProcess, candidate_at, request,  # noqa: E402
                          wait_until)

Response = SolveDirectionUpIK.Response


def _unwritable_package(tmp_path: Path) -> Path:
    """A copy of the package (a folder for PYTHONPATH) whose in-tree kernel cache cannot be
    written: read-only for every user but root, and ``compiled/__pycache__`` is a file, so that
    not even root can make the folder there."""
    root = tmp_path / "install"
    shutil.copytree(REPO / "direction_up_ik", root / "direction_up_ik",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "direction_up_ik" / "core" / "compiled" / "__pycache__").write_text("not a folder\n")
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return root


def _request(robot: str = "dual_arm_torso"):
    model = bundled_robot(robot).load()
    start = mid_range(model)
    names = [e.name for e in bundled_robot(robot).end_effectors]
    req = request(candidate_at(model, start + 0.05, names))
    req.initial_state = JointState(name=list(model.joint_names), position=[float(v) for v in start])
    return req


@contextlib.contextmanager
def _solver(domain: int):
    """``solve(request)`` against ``/direction_up_ik_node/solve`` in ROS domain ``domain``: asks
    again while unanswered (a response can be lost before discovery completes)."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain)
    node = rclpy.create_node("cold_start_client", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    client = node.create_client(SolveDirectionUpIK, "/direction_up_ik_node/solve")

    def solve(req):
        assert client.wait_for_service(timeout_sec=PROCESS_TIMEOUT)  # a hang catcher
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while True:
            future = client.call_async(req)
            executor.spin_until_future_complete(future, timeout_sec=5.0)
            if future.done():
                return future.result()
            client.remove_pending_request(future)
            assert time.monotonic() < deadline, "no answer from ~/solve"
    try:
        yield solve
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


def _processes_with(marker: str):
    """Pids of this user's processes whose environment holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow
def test_cold_node_answers_at_once_and_the_kernels_take_over(tmp_path):
    """One cold compile: the first request is answered by numpy, long before the kernels are
    ready; later ones by the kernels, in the same process; the kernels are in the per-user
    cache; the precompile command then finds them there."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"PYTHONPATH": str(_unwritable_package(tmp_path)), "HOME": str(home), "XDG_CACHE_HOME": None,
           "NUMBA_CACHE_DIR": None, "DIRECTION_UP_IK_BACKEND": None}
    req = _request()
    started = time.monotonic()
    node = NodeProcess(["--params-file", str(CONFIG_DIR / "dual_arm_torso.yaml")], env=env, cwd=tmp_path)
    try:
        with _solver(node.domain) as solve:
            first = solve(req)
            first_s = time.monotonic() - started
            assert first.error_code == Response.SUCCESS, first.message
            assert first.solver_backend == "numpy", node.output  # the compile is still running
            assert "solver backend numpy until the compiled kernels are ready" in node.output
            answers = []
            wait_until(lambda: answers.append(solve(req)) or answers[-1].solver_backend == "numba",
                       PROCESS_TIMEOUT, "the compiled kernels to answer", period=1.0)
            kernels_s = time.monotonic() - started
            assert answers[-1].error_code == Response.SUCCESS
            assert np.allclose(answers[-1].results[0].joint_positions, first.results[0].joint_positions,
                               atol=1e-5)  # the same answer from either backend
        assert "compiled solver kernels ready after" in node.output
    finally:
        node.send(signal.SIGINT)
        assert node.wait() == 0, node.output
    cache = home / ".cache" / "numba"
    assert list(cache.rglob("*.nbi")), f"no kernels in the per-user cache {cache}"
    run_env = {name: value for name, value in {**os.environ, **env}.items() if value is not None}
    precompiled = subprocess.run([sys.executable, "-m", "direction_up_ik.precompile"], cwd=tmp_path, env=run_env,
                                 capture_output=True, text=True, timeout=PROCESS_TIMEOUT)
    assert precompiled.returncode == 0, precompiled.stderr
    assert str(cache) in precompiled.stdout, precompiled.stdout
    print(f"cold start: first answer {first_s:.1f} s after the node's launch, the kernels answered "
          f"after {kernels_s:.1f} s; precompile then: {precompiled.stdout.strip()}")


def test_sigint_ends_a_node_while_its_kernels_compile(tmp_path):
    """SIGINT during the background compile: the node exits 0 at once and its compile ends too."""
    cache = tmp_path / "empty cache"
    node = NodeProcess(["--params-file", str(CONFIG_DIR / "ur5_like.yaml")],
                       env={"NUMBA_CACHE_DIR": str(cache), "DIRECTION_UP_IK_BACKEND": None})
    try:
        node.wait_ready()
        wait_until(lambda: _processes_with(str(cache)) and len(_processes_with(str(cache))) >= 2,
                   what="the compile to start", period=0.1)
    finally:
        node.send(signal.SIGINT)
        assert node.wait() == 0, node.output
    wait_until(lambda: not _processes_with(str(cache)), what="the compile to end", period=0.1)
    assert "compiled solver kernels ready" not in node.output
