"""The node before its compiled kernels are ready: it answers at once (numpy), switches to the
kernels without a restart and ends cleanly on SIGINT at any time; and an install tree whose
own cache cannot be written gets the kernels in the per-user cache, from the precompile
command (core/backend.py, direction_up_ik/precompile.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

import cold_install  # noqa: E402
from direction_up_ik.core.backend import kernel_lock  # noqa: E402
from direction_up_ik.core.kinematics import mid_range  # noqa: E402
from direction_up_ik.robots import bundled_robot  # noqa: E402
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from node_harness import CONFIG_DIR, PROCESS_TIMEOUT, NodeProcess, candidate_at, request, wait_until  # noqa: E402

Response = SolveDirectionUpIK.Response


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
    """Pids of the processes whose environment holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _nice(pid: int):
    """The nice value of process ``pid``, None when it has ended."""
    try:
        return os.getpriority(os.PRIO_PROCESS, pid)
    except ProcessLookupError:
        return None


def test_node_answers_with_numpy_until_its_kernels_load_then_with_them():
    """While another process holds the kernels (this test, by their lock: as a compile would),
    the node answers with numpy; once it may load them it answers with them, in the same
    process, and says so in its log."""
    req = _request()
    with kernel_lock():
        started = time.monotonic()
        node = NodeProcess(["--params-file", str(CONFIG_DIR / "dual_arm_torso.yaml")])
        try:
            with _solver(node.domain) as solve:
                first = solve(req)
                first_s = time.monotonic() - started
                assert first.error_code == Response.SUCCESS, first.message
                assert first.solver_backend == "numpy", node.output
                assert "solver backend numpy until the compiled kernels are ready" in node.output
                assert solve(req).solver_backend == "numpy"  # still: the kernels wait for the lock
        except BaseException:
            node.kill()
            raise
    try:
        with _solver(node.domain) as solve:
            answers = []
            wait_until(lambda: answers.append(solve(req)) or answers[-1].solver_backend == "numba",
                       PROCESS_TIMEOUT, "the compiled kernels to answer", period=0.5)
        assert answers[-1].error_code == Response.SUCCESS
        assert answers[-1].results[0].joint_positions == pytest.approx(first.results[0].joint_positions,
                                                                       abs=1e-5)  # either backend
        assert "compiled solver kernels ready after" in node.output
    finally:
        node.send(signal.SIGINT)
        assert node.wait() == 0, node.output
    print(f"first answer {first_s:.2f} s after the node's launch (numpy)")


def test_sigint_ends_a_node_while_its_kernels_compile(tmp_path):
    """SIGINT during the background compile (an empty cache): the node exits 0 and its compile
    ends too."""
    cache = tmp_path / "empty cache"
    node = NodeProcess(["--params-file", str(CONFIG_DIR / "ur5_like.yaml")],
                       env={"NUMBA_CACHE_DIR": str(cache), "DIRECTION_UP_IK_BACKEND": None})
    try:
        node.wait_ready()
        wait_until(lambda: len(_processes_with(str(cache))) >= 2, what="the compile to start", period=0.1)

        # The compile runs at a lower priority than the node (core/backend.py). A child seen
        # between its fork and its os.nice(10) still has the node's priority for a moment.
        def lowered() -> bool:
            nice = [_nice(pid) for pid in _processes_with(str(cache)) if pid != node.proc.pid]
            return any(n is not None for n in nice) and all(n is None or n >= 10 for n in nice)
        wait_until(lowered, 10.0, "the compile's priority to be nice 10 or lower", period=0.05)
    finally:
        node.send(signal.SIGINT)
        assert node.wait() == 0, node.output
    wait_until(lambda: not _processes_with(str(cache)), what="the compile to end", period=0.1)
    assert "compiled solver kernels ready" not in node.output


@pytest.mark.slow
def test_an_unwritable_install_caches_the_kernels_per_user(tmp_path):
    """The precompile command, run for an install whose own cache cannot be written, compiles
    the kernels into the per-user cache; a fresh process then finds them there (a load, not a
    compile), as a node of that install would. The copy's per-user cache starts with this
    session's kernels but one entry point (test/cold_install.py), so that the command compiles
    and writes that one instead of minutes of the same compile again."""
    from direction_up_ik.core import compiled
    root = cold_install.make(tmp_path)
    try:
        folder = cold_install.seed_user_cache(root, compiled.cache_folder())
        assert str(folder).startswith(str(root / "home" / ".cache" / "numba")), folder
        left = cold_install.LEFT_TO_COMPILE + "-"
        assert not any(p.name.startswith(left) for p in folder.iterdir())
        run = subprocess.run([sys.executable, "-m", "direction_up_ik.precompile"], cwd=root,
                             env=cold_install.environment(root), capture_output=True, text=True,
                             timeout=PROCESS_TIMEOUT)
        assert run.returncode == 0 and str(folder) in run.stdout, run.stdout + run.stderr
        assert any(p.name.startswith(left) and p.suffix == ".nbi" for p in folder.iterdir()), \
            "the precompile did not write the compiled entry point into the per-user cache"
        probe = ("import json; from direction_up_ik.core import compiled; "
                 "print(json.dumps([compiled.cache_folder(), compiled.cache_is_warm()]))")
        out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=cold_install.environment(root),
                             capture_output=True, text=True, timeout=PROCESS_TIMEOUT)
        assert json.loads(out.stdout.strip().splitlines()[-1]) == [str(folder), True], out.stderr
    finally:
        cold_install.release(root)
    print(f"per-user cache: {run.stdout.strip()}")
