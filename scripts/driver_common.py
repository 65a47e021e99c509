"""Shared parts of ``scripts/fuzz_node.py`` and ``scripts/load_node.py``.

* :class:`NodeProcess`: ``direction_up_ik_node`` as a subprocess in its own namespace, with
  ``config/<robot>.yaml`` (plus overrides), its output collected and its resident memory read
  from ``/proc/<pid>/status``;
* :class:`Judge`: re-checks a SolveDirectionUpIK response against the request that produced
  it with an independent forward kinematics (Pinocchio from the URDF when it is installed, else
  the project's model in this process): joint limits, inactive joints, cost, best index, the
  reported errors and every claimed success;
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

from direction_up_ik.core.kinematics import mid_range, random_in_limits

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
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            self.line_count += 1
            if "ready:" in line:
                self._ready.set()
            if "[ERROR]" in line or "[FATAL]" in line or "Traceback" in line:
                self.error_lines += "[ERROR]" in line or "[FATAL]" in line
                self.tracebacks += "Traceback" in line
                if len(self.first_errors) < 10:
                    self.first_errors.append(line.rstrip()[:400])

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = START_S) -> None:
        """Until the node logs "ready:" (it compiles the solver's numba kernels first: tens of
        seconds when their cache is stale, minutes under load); at once if it exits."""
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the node did not become ready (exit code {self.proc.poll()}):\n"
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


# ----------------------------------------------------------------------------- geometry
def unit(v) -> np.ndarray:
    """v / |v|, scaled first so that 1e308 or denormal components neither overflow nor vanish."""
    v = np.asarray(v, dtype=np.float64)
    v = v / np.max(np.abs(v))
    return v / np.linalg.norm(v)


def angle(a, b) -> float:
    """Angle (rad) between two non-zero vectors, robust near 0 and pi."""
    a, b = unit(a), unit(b)
    return float(math.atan2(np.linalg.norm(np.cross(a, b)), float(np.dot(a, b))))


def rotation_between(a, b) -> np.ndarray:
    """Smallest rotation taking unit(a) onto unit(b)."""
    a, b = unit(a), unit(b)
    axis = np.cross(a, b)
    s, c = np.linalg.norm(axis), float(np.dot(a, b))
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        perp = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(perp) < 1e-6:
            perp = np.cross(a, [0.0, 1.0, 0.0])
        k = unit(perp)
        return 2.0 * np.outer(k, k) - np.eye(3)  # rotation by pi about k
    k = axis / s
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * kx + (1.0 - c) * kx @ kx


def perpendicular_part(v, axis) -> np.ndarray:
    """The part of unit(v) perpendicular to ``axis`` (only directions matter here)."""
    axis, v = unit(axis), unit(v)
    return v - np.dot(v, axis) * axis


# ----------------------------------------------------------------------------- the judge
class PinocchioFK:
    """TCP poses (E, 4, 4) from Pinocchio's FK of the URDF, in the project's joint order."""

    def __init__(self, urdf_path: str, joint_names: Sequence[str], ee_links: Sequence[str],
                 tcp_xforms: Sequence[np.ndarray]) -> None:
        import pinocchio as pin
        self.pin = pin
        self.model = pin.buildModelFromUrdf(urdf_path)
        names = list(joint_names)
        self.columns = []
        for jid in range(1, self.model.njoints):
            name = self.model.names[jid]
            joint = self.model.joints[jid]
            if name not in names:
                raise RuntimeError(f"pinocchio joint '{name}' is not a coordinate of the model")
            self.columns.append((joint.idx_q, joint.nq, names.index(name)))
        self.frame_ids = []
        for link, tcp in zip(ee_links, tcp_xforms):
            parent = self.model.getFrameId(link)
            frame = self.model.frames[parent]
            placement = frame.placement * pin.SE3(np.array(tcp[:3, :3]), np.array(tcp[:3, 3]))
            self.frame_ids.append(self.model.addFrame(pin.Frame(
                f"judge_tcp_{link}", frame.parentJoint, parent, placement, pin.FrameType.OP_FRAME)))
        self.data = self.model.createData()

    def __call__(self, q: np.ndarray) -> np.ndarray:
        config = np.zeros(self.model.nq)
        for idx, nq, col in self.columns:
            if nq == 1:
                config[idx] = q[col]
            else:  # continuous joint: (cos, sin)
                config[idx], config[idx + 1] = math.cos(q[col]), math.sin(q[col])
        self.pin.framesForwardKinematics(self.model, self.data, config)
        out = np.zeros((len(self.frame_ids), 4, 4))
        for e, fid in enumerate(self.frame_ids):
            m = self.data.oMf[fid]
            out[e, :3, :3], out[e, :3, 3], out[e, 3, 3] = m.rotation, m.translation, 1.0
        return out


class Judge:
    """Independent re-check of SolveDirectionUpIK responses for ``dual_arm_torso`` as configured
    by ``config/dual_arm_torso.yaml`` (end effectors, TCP offsets, local axes, tolerances).

    ``state`` is the joint state the driver publishes on ``joint_states`` (the node's initial
    state when a request names none).
    """

    #: slack on top of the tolerances for the independent FK (Pinocchio vs the solver's own
    #: float64 FK differ by ~1e-15; this only absorbs rounding)
    SLACK = 1e-7

    def __init__(self, state: Optional[np.ndarray] = None) -> None:
        from direction_up_ik.core.rotations import make_transform, rpy_to_matrix
        from direction_up_ik.robots import bundled_robot, load_robot
        from direction_up_ik.srv import SolveDirectionUpIK

        from direction_up_ik.ros.parameter_files import parameter_file_values
        params = parameter_file_values(CONFIG)
        self.params = params
        self.model = load_robot(ROBOT)
        self.joint_names = list(self.model.joint_names)
        self.lower = np.asarray(self.model.lower_limits, dtype=np.float64)
        self.upper = np.asarray(self.model.upper_limits, dtype=np.float64)
        self.ee_names = list(params["end_effectors"])
        self.ee_links = [params[f"end_effector.{n}.link"] for n in self.ee_names]
        self.ee_axes = {n: params.get(f"end_effector.{n}.local_axes", "x_y") for n in self.ee_names}  # the default
        self.tcp = [make_transform(rpy_to_matrix(params[f"end_effector.{n}.tcp_rpy"]),
                                   params[f"end_effector.{n}.tcp_xyz"]) for n in self.ee_names]
        assert list(self.model.end_effector_links) == self.ee_links, "config and bundled robot differ"
        self.position_tol = float(params["solver.position_tol"])
        self.frame_tol = float(params["solver.frame_tol_rad"])
        self.frames = {"": np.eye(4), **self.model.static_link_xforms()}
        self.codes = {getattr(SolveDirectionUpIK.Response, k): k for k in dir(SolveDirectionUpIK.Response)
                      if k.isupper() and isinstance(getattr(SolveDirectionUpIK.Response, k), int)}
        self.Response = SolveDirectionUpIK.Response
        #: Codes of a solved request (results present): IN_COLLISION when no success but a
        #: candidate reached its targets only in collision (collision.enabled, issue 24).
        self.outcomes = (self.Response.SUCCESS, self.Response.NO_SOLUTION, self.Response.IN_COLLISION)
        self.state = mid_range(self.model) if state is None else np.asarray(state, dtype=np.float64)
        try:
            self.fk = PinocchioFK(str(bundled_robot(ROBOT).urdf_path()), self.joint_names, self.ee_links,
                                  self.tcp)
            self.fk_name = "pinocchio"
            rng = np.random.default_rng(0)
            for q in random_in_limits(self.model, rng, 5):  # the two FKs must agree before judging
                assert np.allclose(self.fk(q), self.model.tcp_transforms(q), atol=1e-9), "FK mismatch"
        except ImportError:
            self.fk = lambda q: self.model.tcp_transforms(np.asarray(q, dtype=np.float64))
            self.fk_name = "project model (pinocchio not installed)"

    # ------------------------------------------------------------------ request semantics
    def local_axes(self, msg) -> tuple:
        """(local direction, local up) of a target message (valid local_axes only)."""
        from direction_up_ik.msg import DirectionUpTarget as T
        mode = msg.local_axes
        if mode == T.LOCAL_AXES_CONFIGURED:
            mode = T.LOCAL_AXES_TCP if self.ee_axes[msg.end_effector] == "tcp" else T.LOCAL_AXES_DEFAULT
        if mode == T.LOCAL_AXES_DEFAULT:
            return np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
        if mode == T.LOCAL_AXES_TCP:
            return np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
        return vec(msg.local_direction), vec(msg.local_up)

    def initial_state(self, request) -> np.ndarray:
        """The state the node starts from: the published state, overridden, clamped onto limits."""
        q = self.state.copy()
        for name, value in zip(request.initial_state.name, request.initial_state.position):
            q[self.joint_names.index(name)] = value
        return np.clip(q, self.lower, self.upper)

    def tolerances(self, request) -> tuple:
        o = request.overrides
        return (o.position_tol if o.position_tol > 0 else self.position_tol,
                o.frame_tol_rad if o.frame_tol_rad > 0 else self.frame_tol)

    def target_errors(self, tcp: np.ndarray, msg) -> tuple:
        """(position, direction, up) errors of one target for TCP poses ``tcp`` (E, 4, 4);
        NaN where the target's mode leaves the quantity free."""
        from direction_up_ik.msg import DirectionUpTarget as T
        frame = self.frames[msg.frame_id]
        pose = tcp[self.ee_names.index(msg.end_effector)]
        position = frame[:3, :3] @ vec(msg.position) + frame[:3, 3]
        p_err = float(np.linalg.norm(pose[:3, 3] - position))
        if msg.mode == T.MODE_POSITION:
            return p_err, math.nan, math.nan
        local_d, local_u = self.local_axes(msg)
        d_target = frame[:3, :3] @ vec(msg.direction)
        d_tcp = pose[:3, :3] @ unit(local_d)
        d_err = angle(d_tcp, d_target)
        if msg.mode == T.MODE_AXIS:
            return p_err, d_err, math.nan
        # Up error: align the TCP's working axis with the target direction first (smallest
        # rotation), then compare the up axes' components perpendicular to the direction.
        u_tcp = rotation_between(d_tcp, d_target) @ (pose[:3, :3] @ perpendicular_part(local_u, local_d))
        u_target = perpendicular_part(frame[:3, :3] @ vec(msg.up), d_target)
        return p_err, d_err, angle(perpendicular_part(u_tcp, d_target), u_target)

    # ------------------------------------------------------------------ the check
    def check(self, request, response, check_errors: bool = True) -> List[str]:
        """Problems of a SUCCESS / NO_SOLUTION / IN_COLLISION response to ``request`` (empty list = fine)."""
        R = self.Response
        problems = []
        if list(response.joint_names) != self.joint_names:
            problems.append(f"joint_names {list(response.joint_names)[:4]}... differ from the model")
        if len(response.results) != len(request.candidates):
            return problems + [f"{len(response.results)} results for {len(request.candidates)} candidates"]
        q0 = self.initial_state(request)
        active = ([self.joint_names.index(n) for n in request.active_joints] if request.active_joints
                  else list(range(len(self.joint_names))))
        inactive = [i for i in range(len(self.joint_names)) if i not in set(active)]
        tol_p, tol_f = self.tolerances(request)
        # the node's float32 start, rounded towards the inside of the limits
        q0_32 = q0.astype(np.float32)
        q0_32 = np.where(q0_32.astype(np.float64) > self.upper, np.nextafter(q0_32, np.float32(-np.inf)),
                         np.where(q0_32.astype(np.float64) < self.lower,
                                  np.nextafter(q0_32, np.float32(np.inf)), q0_32)).astype(np.float64)
        costs, successes = [], []
        for b, (cand, res) in enumerate(zip(request.candidates, response.results)):
            where = f"results[{b}]"
            q = np.asarray(res.joint_positions, dtype=np.float64)
            if q.shape != (len(self.joint_names),) or not np.all(np.isfinite(q)):
                problems.append(f"{where}.joint_positions: shape {q.shape} / non-finite")
                continue
            if np.any(q < self.lower) or np.any(q > self.upper):
                i = int(np.flatnonzero((q < self.lower) | (q > self.upper))[0])
                problems.append(f"{where}: joint '{self.joint_names[i]}' = {q[i]!r} outside "
                                f"[{self.lower[i]}, {self.upper[i]}]")
            if inactive and np.max(np.abs(q[inactive] - q0_32[inactive])) > 1e-6:
                problems.append(f"{where}: an inactive joint moved")
            if len(res.errors) != len(cand.targets) or [e.end_effector for e in res.errors] != \
                    [t.end_effector for t in cand.targets]:
                problems.append(f"{where}.errors: names {[e.end_effector for e in res.errors]} do not "
                                f"match the targets")
                continue
            tcp = self.fk(q)
            met = True
            for k, (target, reported) in enumerate(zip(cand.targets, res.errors)):
                p, d, u = self.target_errors(tcp, target)
                met &= p < tol_p + self.SLACK and (math.isnan(d) or d < tol_f + self.SLACK) and \
                    (math.isnan(u) or u < tol_f + 1e-6)
                if not check_errors:
                    continue
                checks = [("position_error", p, reported.position_error, 1e-6),
                          ("direction_error", d, reported.direction_error, 1e-5)]
                if math.isnan(d) or d < math.pi - 1e-3:  # (aligning opposite axes is ambiguous)
                    checks.append(("up_error", u, reported.up_error, 1e-4))
                for label, mine, theirs, atol in checks:
                    if min(abs(mine), abs(theirs)) > 1e300:  # both overflow-sized: nothing to compare
                        continue
                    if math.isnan(mine) != math.isnan(theirs) or (not math.isnan(mine)
                                                                  and abs(mine - theirs) > atol):
                        problems.append(f"{where}.errors[{k}].{label}: reported {theirs!r}, independent "
                                        f"FK gives {mine!r}")
            if res.success and response.collisions_checked and not res.collision_free:
                problems.append(f"{where}: success reported in collision (clearance {res.clearance})")
            if res.success and not met:
                problems.append(f"{where}: success reported but the independent FK misses the targets "
                                f"(tolerances {tol_p} m / {tol_f} rad)")
            if res.success:
                cost = float(np.sum((q[active] - q0_32[active]) ** 2))
                if not math.isclose(res.cost, cost, rel_tol=1e-6, abs_tol=1e-9):
                    problems.append(f"{where}.cost {res.cost!r} != sum of squared active changes {cost!r}")
            elif res.cost != math.inf:
                problems.append(f"{where}.cost {res.cost!r} for a failed candidate (expected inf)")
            costs.append(res.cost if res.success else math.inf)
            successes.append(bool(res.success))
        any_success = any(successes)
        colliding = any(res.stop_reason == "in_collision" for res in response.results)
        if response.error_code != (R.SUCCESS if any_success else R.IN_COLLISION if colliding else R.NO_SOLUTION):
            problems.append(f"error_code {response.error_code} but {sum(successes)} successes")
        if response.success != any_success:
            problems.append(f"success flag {response.success} but {sum(successes)} successes")
        if any_success:
            best = response.best_index
            if not (0 <= best < len(costs)) or not successes[best] or costs[best] > min(costs) + 1e-12:
                problems.append(f"best_index {best} is not the least-cost success (costs {costs})")
        elif response.best_index != -1:
            problems.append(f"best_index {response.best_index} without a success")
        return problems

    def check_rejection(self, response) -> List[str]:
        """Problems of a rejected (error code other than SUCCESS / NO_SOLUTION / IN_COLLISION) response."""
        problems = []
        if response.success or response.best_index != -1 or len(response.results) != 0:
            problems.append(f"rejected response carries success={response.success}, best_index="
                            f"{response.best_index}, {len(response.results)} results")
        return problems


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
