"""Shared parts of ``scripts/fuzz_node.py`` and ``scripts/load_node.py``.

* :class:`NodeProcess`: ``direction_up_ik_node`` as a subprocess in its own namespace, with
  ``config/<robot>.yaml`` (plus overrides), its output collected and its resident memory read
  from ``/proc/<pid>/status``;
* the judge of responses is in ``driver_judge.py``;
* message builders and small statistics helpers;
* :func:`gather`: the streamer processes' reports, read while watching that they are alive.

Every wait here has a timeout; nothing blocks forever. The timeouts on the node, the child
processes, the threads and on a response are deadlines that only catch hangs
(:data:`HANG_S`, :data:`START_S`): a slow machine makes a run slower, never a failure (issue
28: a streamer's start under load average 3 on 2 cores failed a fixed 60 s wait). Where a
driver judges a figure (latency, lag, rates) it says so; with ``--smoke`` those figures are
only reported.
"""

from __future__ import annotations

import collections
import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import yaml

from direction_up_ik.core.kinematics import mid_range

REPO = Path(__file__).resolve().parents[1]
ROBOT = "dual_arm_torso"
NODE_NAME = "direction_up_ik_node"
CONFIG = REPO / "config" / f"{ROBOT}.yaml"

#: Seconds a wait on a response, a child process's report, a thread or a shutdown may last
#: before it is a hang. Not a figure: the quiet-machine times are a second or less.
HANG_S = 300.0
#: Seconds the node may take to log "ready:": with a stale numba cache it compiles the solver's
#: kernels first (tens of seconds on a quiet machine, several minutes on a loaded one).
START_S = 900.0


def ros_environment() -> Dict[str, str]:
    """Environment of the drivers and their node: this machine only, unbuffered output."""
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.update(PYTHONUNBUFFERED="1", RCUTILS_LOGGING_BUFFERED_STREAM="0", RCUTILS_COLORIZED_OUTPUT="0")
    return env


def prepare_environment() -> None:
    """Set the discovery range of this process before rclpy.init (loopback unless told)."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def unique_namespace(prefix: str) -> str:
    return f"/{prefix}_{uuid.uuid4().hex[:8]}"


# ----------------------------------------------------------------------------- node process
def read_status_kib(pid: int, field: str = "VmRSS") -> Optional[int]:
    """A ``/proc/<pid>/status`` field in KiB (VmRSS = resident now, VmHWM = peak), None if gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the driver dies, so no node outlives its driver."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: Substrings of the node's log lines: its start-up is done ("ready: ..."), and its compiled
#: kernels took over or are unavailable (the node's ``_on_kernels_ready``).
READY_MARK = "ready:"
KERNELS_MARK = "compiled solver kernels"


class NodeProcess:
    """``python -m direction_up_ik.ros.node`` with ``config/<robot>.yaml`` in ``namespace``.

    The YAML's parameters are rewritten under the node's fully qualified name (so the node
    can live in a namespace of its own) with ``params`` overriding them.
    """

    def __init__(self, namespace: str, config: Path = CONFIG, params: Optional[dict] = None,
                 env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> None:
        """``env``: variables set on top of :func:`ros_environment`; ``cwd``: the working folder
        (default the repository, whose sources ``python -m`` then imports)."""
        self.namespace = namespace
        self.fqn = f"{namespace}/{NODE_NAME}"
        from direction_up_ik.ros.parameter_files import parameter_file_values
        values = parameter_file_values(config)
        values.update(params or {})
        self._params = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="direction_up_ik_",
                                                   delete=False)
        yaml.safe_dump({self.fqn: {"ros__parameters": values}}, self._params)
        self._params.close()
        self.cmd = [sys.executable, "-m", "direction_up_ik.ros.node", "--ros-args",
                    "--params-file", self._params.name, "-r", f"__ns:={namespace}"]
        self.proc = subprocess.Popen(self.cmd, cwd=REPO if cwd is None else cwd,
                                     env={**ros_environment(), **(env or {})}, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace",
                                     preexec_fn=_die_with_parent)
        self.pid = self.proc.pid
        self.lines: collections.deque = collections.deque(maxlen=4000)  # bounded
        self.line_count = 0
        self.error_lines = 0     # [ERROR] / [FATAL] log lines
        self.tracebacks = 0
        self.first_errors: List[str] = []
        self._ready = threading.Event()
        self._kernels = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            self.line_count += 1
            if READY_MARK in line:
                self._ready.set()
            if KERNELS_MARK in line:
                self._kernels.set()
            if "[ERROR]" in line or "[FATAL]" in line or "Traceback" in line:
                self.error_lines += "[ERROR]" in line or "[FATAL]" in line
                self.tracebacks += "Traceback" in line
                if len(self.first_errors) < 10:
                    self.first_errors.append(line.rstrip()[:400])

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = START_S) -> None:
        """Until the node logs "ready:" (its model and services are up; its compiled kernels may
        still be loading, see :meth:`wait_kernels`); at once if it exits."""
        self._wait(self._ready, "become ready", timeout)

    def wait_kernels(self, timeout: float = START_S) -> None:
        """Until the node logs that its compiled solver kernels took over (or are unavailable).
        Before that it answers with the numpy backend while a thread of its own loads them (or
        compiles them: tens of seconds when their cache is stale, minutes under load), which
        slows its answers by tens of milliseconds: timings start after this."""
        self._wait(self._kernels, "log its solver backend", timeout)

    def _wait(self, event: threading.Event, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not event.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the node did not {what} (exit code {self.proc.poll()}):\n"
                                   f"{self.output[-4000:]}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_kib(self) -> Optional[int]:
        return read_status_kib(self.pid, "VmRSS")

    def peak_rss_kib(self) -> Optional[int]:
        return read_status_kib(self.pid, "VmHWM")

    def stop(self, timeout: float = 120.0) -> Optional[int]:
        """SIGINT, then SIGKILL after ``timeout`` (a hang: the node exits within a second or
        two even under load); the exit code."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5.0)
            self._reader.join(timeout=5.0)
            return self.proc.returncode
        finally:
            try:
                os.unlink(self._params.name)
            except OSError:
                pass


# ----------------------------------------------------------------------------- messages
def vec(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def set_vec(v, values) -> None:
    v.x, v.y, v.z = (float(x) for x in values)


def near(model, q, rng, scale: float) -> np.ndarray:
    """A random state within ``scale`` (rad / m, per joint) of ``q``, inside the limits."""
    lo = np.where(np.isfinite(model.lower_limits), model.lower_limits, -np.pi)
    hi = np.where(np.isfinite(model.upper_limits), model.upper_limits, np.pi)
    return np.clip(q + rng.uniform(-scale, scale, model.num_dofs), lo, hi)


def tcp_target(name: str, pose: np.ndarray, *, frame_id: str = "", frame: Optional[np.ndarray] = None,
               mode: int = 0, local_axes: int = 1, local=None, scale=(1.0, 1.0)):
    """A DirectionUpTarget putting end effector ``name`` at ``pose`` (root frame, 4x4).

    ``local`` = (local direction, local up) of the TCP (default: those ``local_axes`` implies
    for TCP +Z/+Y and default +X/+Y); the message is expressed in ``frame`` (4x4 root -> frame).
    """
    from direction_up_ik.msg import DirectionUpTarget as T
    if local is None:
        local = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)) if local_axes == T.LOCAL_AXES_DEFAULT else \
            ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0))
    inv = np.eye(4) if frame is None else np.linalg.inv(frame)
    rot = inv[:3, :3] @ pose[:3, :3]
    t = T(end_effector=name, frame_id=frame_id, mode=mode, local_axes=local_axes)
    set_vec(t.position, inv[:3, :3] @ pose[:3, 3] + inv[:3, 3])
    set_vec(t.direction, scale[0] * (rot @ np.asarray(local[0], float)))
    set_vec(t.up, scale[1] * (rot @ np.asarray(local[1], float)))
    if local_axes == T.LOCAL_AXES_EXPLICIT:
        set_vec(t.local_direction, local[0])
        set_vec(t.local_up, local[1])
    return t


def percentile(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), p)) if len(values) else math.nan


def stop_worker(proc, timeout: float = 60.0) -> None:
    """Join a multiprocessing worker that was told to stop; kill it after ``timeout`` s."""
    proc.join(timeout=timeout)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5.0)


def close_report(report: dict, node: "NodeProcess", t_begin: float, violations: List[str],
                 timing_notes: Optional[List[str]] = None) -> dict:
    """The closing fields of a driver's report: stops the node and records its exit code,
    the runtime since ``t_begin`` (time.monotonic) and the violations (first 50 listed);
    with ``timing_notes`` (``--smoke`` runs) the timing limits missed, which are not violations."""
    report["node_exit_code"] = node.stop()
    report["runtime_s"] = round(time.monotonic() - t_begin, 1)
    report["violations"] = len(violations)
    report["first_violations"] = violations[:50]
    if timing_notes is not None:
        report["timing_notes"] = timing_notes[:50]
    return report


def finish(report: dict, json_path: Optional[Path], print_report) -> int:
    """Print the report, write it to ``json_path`` (if given); exit status 1 on violations."""
    print_report(report)
    if json_path:
        json_path.write_text(json.dumps(report, indent=1))
    return 0 if report["violations"] == 0 else 1


def print_outcome(report: dict) -> None:
    """The last lines of a driver's printout: the node's health at the end (when the run got
    that far), exit code, runtime and the first violations."""
    if "node_alive" in report:
        print(f"node alive at the end: {report['node_alive']}; [ERROR] log lines: "
              f"{report['node_error_lines']}; tracebacks: {report['node_tracebacks']}")
    print(f"node exit code {report.get('node_exit_code')}; runtime {report['runtime_s']} s; "
          f"violations: {report['violations']}")
    for v in report["first_violations"][:20]:
        print("  -", v)
    if "timing_notes" in report:
        print(f"timing limits missed (--smoke: reported, not violations): {len(report['timing_notes'])}")
        for note in report["timing_notes"][:20]:
            print("  -", note)


class RosClient:
    """A client node with its own executor in ``context`` (created and initialised if None)."""

    def __init__(self, name: str, context=None) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        self.owns_context = context is None
        if context is None:
            prepare_environment()
            context = rclpy.Context()
            rclpy.init(context=context)
        self.context = context
        self.node = rclpy.create_node(name, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.last_send_s = 0.0

    def call(self, client, request, timeout: float):
        """The response, or None after ``timeout`` seconds (the request is then forgotten)."""
        t0 = time.monotonic()
        future = client.call_async(request)  # serialises the request: slow for 10^5 entries
        self.last_send_s = time.monotonic() - t0
        # spin_once until done: a fraction of a millisecond per call, where
        # spin_until_future_complete adds several.
        deadline = time.monotonic() + timeout
        while not future.done():
            remaining = deadline - time.monotonic()
            if remaining <= 0.0:
                break
            self.executor.spin_once(timeout_sec=min(0.05, remaining))
        if not future.done():
            client.remove_pending_request(future)
            return None
        return future.result()

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.01, max(0.0, end - time.monotonic())))

    def spin_in_background(self) -> None:
        def spin():
            while not self._stop.is_set() and self.context.ok():
                try:
                    self.executor.spin_once(timeout_sec=0.05)
                except Exception:  # noqa: BLE001 - shutdown races
                    if self._stop.is_set() or not self.context.ok():
                        return
                    raise
        self._thread = threading.Thread(target=spin, daemon=True)
        self._thread.start()

    def close(self) -> None:
        import rclpy
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        if self.owns_context:
            rclpy.try_shutdown(context=self.context)


def wait_for(predicate, timeout: float, what: str, period: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(period)


def wait_for_joint_state(client: RosClient, solve_client, state_pub, names, q, timeout: float = START_S) -> None:
    """Publish the joint state until the node answers a probe with something else than
    NO_JOINT_STATE (the probe: one position-only target). The first solve may compile the
    solver's numba kernels (tens of seconds when their cache is stale), hence the long timeout.
    A probe unanswered for a while is sent again (waiting longer each time): a response the
    node sends before its writer has matched this client's reader is lost, so the answer to a
    probe is also the handshake that this client's responses arrive."""
    from sensor_msgs.msg import JointState
    from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
    from direction_up_ik.srv import SolveDirectionUpIK
    if not solve_client.wait_for_service(timeout_sec=timeout):
        raise RuntimeError(f"{solve_client.srv_name} did not appear within {timeout} s")
    wait_for(lambda: state_pub.get_subscription_count() >= 1, timeout, "the joint_states subscription")
    probe = SolveDirectionUpIK.Request()
    probe.candidates = [DirectionUpCandidate(targets=[DirectionUpTarget(end_effector="left", mode=2)])]
    deadline = time.monotonic() + timeout
    patience = 5.0
    while True:
        state_pub.publish(JointState(name=list(names), position=[float(v) for v in q]))
        response = client.call(solve_client, probe, timeout=min(patience, max(0.1, deadline - time.monotonic())))
        if response is not None and response.error_code != SolveDirectionUpIK.Response.NO_JOINT_STATE:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node never took the joint state (waited {timeout} s)")
        if response is None:
            patience = min(2.0 * patience, 60.0)
        client.spin_for(0.05)


def wait_for_response_path(client: RosClient, solve_client, timeout: float = HANG_S) -> None:
    """Until ``solve_client`` has the answer to a request of its own: an empty request (no
    candidates: INVALID_REQUEST at once), sent again while unanswered. ``wait_for_service``
    only sees the request path matched; the node's response to a client whose reader its
    writer has not matched yet is lost (rmw_fastrtps), so a fixed pause before the first
    request is not enough on a loaded machine."""
    from direction_up_ik.srv import SolveDirectionUpIK
    if not solve_client.wait_for_service(timeout_sec=timeout):
        raise RuntimeError(f"{solve_client.srv_name} did not appear within {timeout} s")
    deadline = time.monotonic() + timeout
    patience = 1.0
    while client.call(solve_client, SolveDirectionUpIK.Request(),
                      timeout=min(patience, max(0.1, deadline - time.monotonic()))) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no response from {solve_client.srv_name} within {timeout} s")
        patience = min(2.0 * patience, 30.0)


def gather(out, procs: Dict[str, object], status: str, timeout: float = HANG_S) -> Dict[str, object]:
    """{kind: data} of the ``status`` ("ready" / "done") report of every streamer process in
    ``procs`` ({kind: multiprocessing.Process}), read from their queue ``out``.

    Waits on events, not on a clock: a streamer's "error" report raises at once, and so does a
    streamer that exits without its report (a crash; its exit code is named). Only one that
    stays alive and silent for ``timeout`` seconds is given up on (a hang). Reports of another
    status are skipped."""
    got: Dict[str, object] = {}
    deadline = time.monotonic() + timeout
    while len(got) < len(procs):
        try:
            st, kind, data = out.get(timeout=0.5)
        except queue.Empty:
            missing = [k for k in procs if k not in got]
            dead = {k: procs[k].exitcode for k in missing if not procs[k].is_alive()}
            if dead:
                try:  # what a process put before it ended is in the pipe: read it first
                    st, kind, data = out.get(timeout=2.0)
                except queue.Empty:
                    raise RuntimeError("streamer " + ", ".join(f"{k} exited (code {c})" for k, c in dead.items())
                                       + f" without its '{status}' report") from None
            elif time.monotonic() > deadline:
                raise RuntimeError(f"streamer(s) {missing} alive but without a '{status}' report "
                                   f"for {timeout} s (hung)") from None
            else:
                continue
        if st == "error":
            raise RuntimeError(f"{kind} streamer: {data}")
        if st == status:
            got[kind] = data
    return got


# ----------------------------------------------------------------------------- streamers
def target_set(seed: int, count: int):
    """``count`` reachable two-hand targets near the middle of the limits, reproducible from
    ``seed``: (candidate messages, TCP positions (count, E, 3))."""
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.robots import load_robot
    model = load_robot(ROBOT)
    start = mid_range(model)
    rng = np.random.default_rng(seed)
    from direction_up_ik.ros.parameter_files import parameter_file_values
    names = list(parameter_file_values(CONFIG)["end_effectors"])
    messages, positions = [], np.zeros((count, len(names), 3))
    for k in range(count):
        tcp = model.tcp_transforms(near(model, start, rng, 0.3))
        messages.append(DirectionUpCandidate(targets=[tcp_target(n, tcp[e]) for e, n in enumerate(names)]))
        positions[k] = tcp[:, :3, 3]
    return messages, positions


def _paced(publish, hz: float, stop, max_seconds: float):
    """Call ``publish()`` ``hz`` times a second (absolute schedule, no catch-up bursts) until
    ``stop`` is set or ``max_seconds`` pass. Returns (count, seconds, largest gap s)."""
    period = 1.0 / hz
    t0 = time.monotonic()
    t_next, last, max_gap, count = t0, None, 0.0, 0
    while not stop.is_set() and time.monotonic() - t0 < max_seconds:
        now = time.monotonic()
        if now < t_next:
            time.sleep(t_next - now)
        publish(count)
        now = time.monotonic()
        if last is not None:
            max_gap = max(max_gap, now - last)
        last = now
        count += 1
        t_next += period
        if now - t_next > 0.05:  # fell behind by more than 50 ms: restart the schedule
            t_next = now
    return count, time.monotonic() - t0, max_gap


def _streamer(kind: str, topic: str, hz: float, stop, out, max_seconds: float, payload) -> None:
    """Body of a streaming process: its own rclpy context, one publisher, paced publishing."""
    prepare_environment()
    import rclpy
    from sensor_msgs.msg import JointState
    from direction_up_ik.msg import DirectionUpCandidate
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f"{kind}_streamer_{os.getpid()}", context=context)
    try:
        if kind == "joint_states":
            pub = node.create_publisher(JointState, topic, 10)
            names, positions = payload
            msg = JointState(name=list(names), position=[float(v) for v in positions])
            sends = None

            def publish(i):
                msg.header.stamp = node.get_clock().now().to_msg()
                pub.publish(msg)
        else:
            pub = node.create_publisher(DirectionUpCandidate, topic, 10)
            seed, count = payload
            messages, _ = target_set(seed, count)
            sends = []

            def publish(i):
                k = i % len(messages)
                sends.append((k, time.monotonic()))
                pub.publish(messages[k])
        wait_for(lambda: pub.get_subscription_count() >= 1, HANG_S, f"a subscriber of {topic}")
        out.put(("ready", kind, None))
        count, seconds, max_gap = _paced(publish, hz, stop, max_seconds)
        out.put(("done", kind, dict(count=count, seconds=seconds, rate_hz=count / seconds if seconds else 0.0,
                                    max_gap_s=max_gap, sends=sends)))
    except Exception as exc:  # noqa: BLE001 - reported to the driver
        out.put(("error", kind, repr(exc)))
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
