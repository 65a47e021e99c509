"""In-process and subprocess harness for tests of ``direction_up_ik_node`` (real rclpy).

Importable from the tests as ``node_harness``: ``test/ros`` has no ``__init__.py``, so
pytest's default (prepend) import mode puts it on ``sys.path`` for ``test_node.py``.

* :class:`Harness` owns a client node and a ``SingleThreadedExecutor`` spun in a
  background thread; :meth:`Harness.start_node` creates a
  :class:`~direction_up_ik.ros.node.DirectionUpIKNode` in its own namespace, so
  nodes of one context never see each other's topics.
* :class:`NodeUnderTest` wraps one node: the ``~/solve`` client, a ``joint_states``
  publisher, a ``~/target`` publisher, a subscription to the joint command and the
  ``~/set_parameters`` / ``~/get_parameters`` clients.
* :class:`NodeProcess` runs ``python -m direction_up_ik.ros.node`` as a subprocess and
  collects its output.

Every wait has a timeout; nothing here blocks forever. The timeouts only catch hangs: they are
minutes where the quiet-machine times are milliseconds to seconds, so that a loaded machine
(issue 28) makes the tests slower, not failing.
"""

from __future__ import annotations

import array
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter, parameter_value_to_python
from rcl_interfaces.srv import GetParameters, SetParameters
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from direction_up_ik.msg import DirectionUpCandidate, DirectionUpTarget
from direction_up_ik.srv import SolveDirectionUpIK
from direction_up_ik.ros.config import PARAMETER_BY_NAME
from direction_up_ik.ros.parameter_files import parameter_file_values
from direction_up_ik.ros.node import DirectionUpIKNode

import workers

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "config"
NODE_NAME = "direction_up_ik_node"
Response = SolveDirectionUpIK.Response
# Seconds for every single wait, a hang catcher: a solve that waits behind a 10^5-entry
# joint_states message took 10 s at load average 4 on 2 cores (milliseconds otherwise).
TIMEOUT = 120.0
# Seconds for a node process to log "ready:" (it compiles the solver's numba kernels when their
# cache is stale: minutes on a loaded machine) or to exit.
PROCESS_TIMEOUT = 900.0

COMMAND_TYPES = {"joint_state": JointState, "joint_trajectory": JointTrajectory,
                 "float64_multi_array": Float64MultiArray}


# ----------------------------------------------------------------------------- utilities
def wait_until(predicate: Callable[[], bool], timeout: float = TIMEOUT, what: str = "condition",
               period: float = 0.005) -> None:
    """Poll ``predicate`` until it is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(period)


def domain_id() -> int:
    """The ROS domain of the in-process tests (the Makefile sets ROS_DOMAIN_ID)."""
    return int(os.environ.get("ROS_DOMAIN_ID", "77"))


def private_domain_id() -> int:
    """A random domain id of this test worker's own (workers.py), for graphs that use fixed
    global names."""
    return workers.private_domain()


def subprocess_env(domain: int) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1", RCUTILS_LOGGING_BUFFERED_STREAM="0",
               RCUTILS_COLORIZED_OUTPUT="0")
    return env


def yaml_parameters(robot: str) -> dict:
    """``ros__parameters`` of ``config/<robot>.yaml``."""
    return parameter_file_values(CONFIG_DIR / f"{robot}.yaml")


def to_parameters(values: dict) -> List[Parameter]:
    """Parameter overrides; empty lists are skipped (rclpy types them BYTE_ARRAY; they are
    the defaults anyway)."""
    out = []
    for name, value in values.items():
        if isinstance(value, (list, tuple)) and not value:
            continue
        if isinstance(value, tuple):
            value = list(value)
        out.append(Parameter(name, value=value))
    return out


def parameter_msg(name: str, value):
    """A rcl_interfaces/Parameter message; empty lists are typed by the node's schema."""
    param = Parameter(name, value=value)
    if isinstance(value, (list, tuple)) and not value and name in PARAMETER_BY_NAME:
        kind = {"string_array": Parameter.Type.STRING_ARRAY,
                "double_array": Parameter.Type.DOUBLE_ARRAY}[PARAMETER_BY_NAME[name].type]
        param = Parameter(name, kind, [])
    return param.to_parameter_msg()


def value_of(msg) -> object:
    """Python value of a rcl_interfaces ParameterValue (lists for arrays, None when unset)."""
    value = parameter_value_to_python(msg)
    return list(value) if isinstance(value, (list, tuple, array.array)) else value


# ----------------------------------------------------------------------------- messages
def target_msg(end_effector: str, pose: np.ndarray, *, frame_id: str = "",
               mode: int = DirectionUpTarget.MODE_FULL,
               local_axes: int = DirectionUpTarget.LOCAL_AXES_TCP,
               axes: Optional[Sequence[int]] = None) -> DirectionUpTarget:
    """A target at ``pose`` (4x4, in ``frame_id``).

    ``axes`` = (column used as direction, column used as up); default (2, 1) = TCP +Z/+Y,
    or (0, 1) for LOCAL_AXES_DEFAULT.
    """
    if axes is None:
        axes = (0, 1) if local_axes == DirectionUpTarget.LOCAL_AXES_DEFAULT else (2, 1)
    t = DirectionUpTarget(end_effector=end_effector, frame_id=frame_id, mode=mode, local_axes=local_axes)
    t.position.x, t.position.y, t.position.z = (float(v) for v in pose[:3, 3])
    t.direction.x, t.direction.y, t.direction.z = (float(v) for v in pose[:3, axes[0]])
    t.up.x, t.up.y, t.up.z = (float(v) for v in pose[:3, axes[1]])
    return t


def candidate_at(model, q, names: Sequence[str], **kwargs) -> DirectionUpCandidate:
    """One candidate: every end effector (names in ee_id order) at its TCP pose for ``q``."""
    tcp = model.tcp_transforms(np.asarray(q, dtype=np.float64))
    return DirectionUpCandidate(targets=[target_msg(n, tcp[e], **kwargs) for e, n in enumerate(names)])


def request(*candidates, **fields) -> SolveDirectionUpIK.Request:
    req = SolveDirectionUpIK.Request(**fields)
    req.candidates = list(candidates)
    return req


def angle(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    c = np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
    return float(math.acos(max(-1.0, min(1.0, c))))


def pose_errors(model, q, ee: int, pose: np.ndarray):
    """(position m, direction rad, up rad) between the TCP of ``ee`` at ``q`` and a TCP-convention
    ``pose`` (root frame): direction = +Z, up = +Y, each compared as a raw axis angle."""
    tcp = model.tcp_transforms(np.asarray(q, dtype=np.float64))[ee]
    return (float(np.linalg.norm(tcp[:3, 3] - pose[:3, 3])), angle(tcp[:3, 2], pose[:3, 2]),
            angle(tcp[:3, 1], pose[:3, 1]))


def assert_reaches(model, q, poses: Dict[int, np.ndarray], position_tol=1e-3, frame_tol=1e-2) -> None:
    """FK of ``q`` puts every TCP on its pose: position within the tolerance, +Z within it and
    +Y within twice it (direction error + remaining roll)."""
    for ee, pose in poses.items():
        p, d, u = pose_errors(model, q, ee, pose)
        assert p < position_tol, f"end effector {ee}: position error {p} m"
        assert d < frame_tol, f"end effector {ee}: direction error {d} rad"
        assert u < 2 * frame_tol, f"end effector {ee}: up error {u} rad"


# ----------------------------------------------------------------------------- in-process
class Harness:
    """A client node and an executor spinning in a background thread, in ``context``."""

    def __init__(self, context) -> None:
        self.context = context
        self.client_node = rclpy.create_node(f"test_client_{uuid.uuid4().hex[:8]}", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.client_node)
        self.nodes: List[NodeUnderTest] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.02)
            except Exception:  # noqa: BLE001 - shutdown races; the tests see the effect
                if self._stop.is_set() or not self.context.ok():
                    return
                raise

    def start_node(self, robot: str = "dual_arm_torso", params: Optional[dict] = None,
                   from_yaml: bool = True, **kwargs) -> "NodeUnderTest":
        """A DirectionUpIKNode in a fresh namespace.

        ``from_yaml``: start from ``config/<robot>.yaml`` (absolute command topics are made
        relative so that they stay in the namespace); ``params`` override.
        """
        values = yaml_parameters(robot) if from_yaml else {"robot": robot}
        topic = str(values.get("command.topic", "~/joint_command"))
        if topic.startswith("/"):
            values["command.topic"] = topic.lstrip("/")
        values.update(params or {})
        node = NodeUnderTest(self, values, **kwargs)
        self.nodes.append(node)
        return node

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        for n in self.nodes:
            n.node.destroy_node()
        self.executor.shutdown(timeout_sec=1.0)
        self.client_node.destroy_node()


class NodeUnderTest:
    """One DirectionUpIKNode plus everything a test needs to talk to it."""

    def __init__(self, harness: Harness, values: dict, namespace: Optional[str] = None,
                 owns_process: bool = False) -> None:
        self.harness = harness
        self.values = values
        self.namespace = namespace or f"/t_{uuid.uuid4().hex[:10]}"
        self.node = DirectionUpIKNode(context=harness.context, namespace=self.namespace,
                                      parameter_overrides=to_parameters(values), owns_process=owns_process)
        harness.executor.add_node(self.node)
        self.fqn = f"{self.namespace}/{NODE_NAME}"
        cn = harness.client_node
        self.command_type = self.node.get_parameter("command.type").value
        self.command_topic = self.node.resolve_topic_name(self.node.get_parameter("command.topic").value)
        self.commands: list = []
        self.command_sub = cn.create_subscription(COMMAND_TYPES[self.command_type], self.command_topic,
                                                  self.commands.append, 10)
        self.solve_client = cn.create_client(SolveDirectionUpIK, f"{self.fqn}/solve")
        self.set_client = cn.create_client(SetParameters, f"{self.fqn}/set_parameters")
        self.get_client = cn.create_client(GetParameters, f"{self.fqn}/get_parameters")
        self.state_pub = cn.create_publisher(JointState, f"{self.namespace}/joint_states", 10)
        self.target_pub = cn.create_publisher(DirectionUpCandidate, f"{self.fqn}/target", 10)
        for client in (self.solve_client, self.set_client, self.get_client):
            assert client.wait_for_service(timeout_sec=TIMEOUT), f"{client.srv_name} did not appear"
        wait_until(lambda: self.state_pub.get_subscription_count() >= 1
                   and self.target_pub.get_subscription_count() >= 1
                   and self.command_sub.get_publisher_count() >= 1, what="topic matching")

    # ---------------------------------------------------------------- model
    @property
    def joint_names(self) -> List[str]:
        return list(self.node._robot.joint_names)

    @property
    def ee_names(self) -> List[str]:
        return [e.name for e in self.node._config.end_effectors]

    # ---------------------------------------------------------------- calls
    def _call(self, client, req, timeout: float = TIMEOUT):
        future = client.call_async(req)
        wait_until(future.done, timeout, f"a response from {client.srv_name}")
        if future.exception() is not None:
            raise future.exception()
        return future.result()

    def solve(self, req: SolveDirectionUpIK.Request, timeout: float = TIMEOUT) -> SolveDirectionUpIK.Response:
        return self._call(self.solve_client, req, timeout)

    def set_param(self, name: str, value):
        """Set one parameter through ``~/set_parameters``; its SetParametersResult."""
        req = SetParameters.Request()
        msg = parameter_msg(name, value)
        req.parameters = [msg]
        (result,) = self._call(self.set_client, req).results
        return result

    def get_params(self, *names: str) -> list:
        """Values of parameters through ``~/get_parameters``."""
        req = GetParameters.Request(names=list(names))
        return [value_of(v) for v in self._call(self.get_client, req).values]

    # ---------------------------------------------------------------- topics
    def received_states(self) -> int:
        return self.node._joint_states.messages

    def publish_state(self, names: Iterable[str], positions: Iterable[float], wait: bool = True) -> None:
        """Publish a JointState and (by default) wait until the node has merged it."""
        before = self.received_states()
        self.state_pub.publish(JointState(name=list(names), position=[float(p) for p in positions]))
        if wait:
            wait_until(lambda: self.received_states() > before, what="the joint state to arrive")

    def publish_full_state(self, q) -> None:
        self.publish_state(self.joint_names, q)

    def wait_commands(self, count: int, timeout: float = TIMEOUT) -> list:
        wait_until(lambda: len(self.commands) >= count, timeout, f"{count} joint command(s)")
        return self.commands


# ----------------------------------------------------------------------------- subprocess
class NodeProcess:
    """``python -m direction_up_ik.ros.node --ros-args ARGS`` with stdout+stderr collected."""

    def __init__(self, ros_args: Sequence[str], domain: Optional[int] = None,
                 env: Optional[Dict[str, Optional[str]]] = None, cwd: Optional[Path] = None) -> None:
        """``env``: variables to set (None: to remove) on top of :func:`subprocess_env`; ``cwd``:
        the working folder (default the repository, whose sources ``python -m`` then imports)."""
        self.domain = private_domain_id() if domain is None else domain
        self.cmd = [sys.executable, "-m", "direction_up_ik.ros.node", "--ros-args", *ros_args]
        environment = subprocess_env(self.domain)
        for name, value in (env or {}).items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        self.proc = subprocess.Popen(self.cmd, cwd=REPO if cwd is None else cwd, env=environment,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = PROCESS_TIMEOUT) -> None:
        wait_until(lambda: "ready:" in self.output or self.proc.poll() is not None, timeout,
                   "the node to log 'ready:'", period=0.05)
        assert "ready:" in self.output, f"node exited early ({self.proc.returncode}):\n{self.output}"

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = PROCESS_TIMEOUT) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.cmd} did not exit within {timeout} s:\n{self.output}")
        self._reader.join(timeout=5.0)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5.0)



def run_bad_configs(configs: dict) -> dict:
    """Start a node process per ``{case: (ros_args, parameter)}`` at once; ``{case: (code, output)}``.
    A dozen Python processes starting at once on 2 busy cores take minutes, not the seconds
    one takes alone: the wait (PROCESS_TIMEOUT) only catches a node that never exits."""
    procs = {name: NodeProcess(args) for name, (args, _) in configs.items()}
    try:
        return {name: (p.wait(), p.output) for name, p in procs.items()}
    finally:
        for p in procs.values():
            p.kill()


def assert_exit_1_with_one_line(code: int, output: str, parameter: str) -> None:
    """Bad configuration: exit code 1, one 'invalid configuration' line naming ``parameter``,
    no traceback, never ready."""
    assert code == 1, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if "invalid configuration" in line]
    assert len(lines) == 1, output
    assert f"parameter '{parameter}'" in lines[0], lines[0]
    assert "ready:" not in output
