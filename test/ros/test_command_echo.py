"""command_echo republishes joint commands as joint_states (real rclpy, in-process and as
processes), in every command format of the bundled robots' configs, and exits cleanly on SIGINT."""

import os
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from direction_up_ik.msg import DirectionUpCandidate  # noqa: E402
from direction_up_ik.robots import bundled_robot, load_robot  # noqa: E402
from direction_up_ik.ros.command_echo import CommandEcho  # noqa: E402
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402

from node_harness import PROCESS_TIMEOUT, REPO, TIMEOUT, domain_id, subprocess_env  # noqa: E402


def test_echoes_the_last_command_as_joint_states(monkeypatch):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID", "77")))
    try:
        echo = CommandEcho(context=context, parameter_overrides=[
            rclpy.parameter.Parameter("robot", value="panda_like"),
            rclpy.parameter.Parameter("command_topic", value="/test_echo/joint_command")])
        peer = rclpy.create_node("echo_peer", context=context)
        states = []
        peer.create_subscription(JointState, "joint_states", states.append, 10)
        command_pub = peer.create_publisher(JointState, "/test_echo/joint_command", 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(echo)
        executor.add_node(peer)
        names = list(load_robot("panda_like").joint_names)

        def spin_until(predicate, timeout=120.0):  # a hang catcher: ~0.1 s on a quiet machine
            end = time.monotonic() + timeout
            while not predicate() and time.monotonic() < end:
                executor.spin_once(timeout_sec=0.02)
            return predicate()

        assert spin_until(lambda: len(states) > 0)
        assert list(states[-1].name) == names
        assert states[-1].position[3] == pytest.approx((-3.0718 - 0.0698) / 2)  # mid-range start

        command = JointState(name=[names[0], names[3], "unknown_joint"], position=[0.5, -1.0, 9.0])
        assert spin_until(lambda: (command_pub.publish(command) or True)
                          and states[-1].position[0] == pytest.approx(0.5))
        assert states[-1].position[3] == pytest.approx(-1.0)
        assert len(states[-1].position) == len(names)
        executor.shutdown()
        echo.destroy_node()
        peer.destroy_node()
    finally:
        rclpy.shutdown(context=context)


# ----------------------------------------------------------------------------- as a process
def _process(module: str, namespace: str, *ros_args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}", *ros_args],
                            cwd=REPO, env=subprocess_env(domain_id()), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


class _Listener:
    """A node in its own context that records the joint_states of several namespaces."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id())
        self.node = rclpy.create_node(f"echo_listener_{uuid.uuid4().hex[:6]}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.states = {}

    def listen(self, namespace: str) -> None:
        self.states[namespace] = []
        self.node.create_subscription(JointState, f"{namespace}/joint_states", self.states[namespace].append, 10)

    def spin_until(self, predicate, what: str, timeout: float = TIMEOUT) -> None:
        end = time.monotonic() + timeout  # a hang catcher
        while not predicate():
            assert time.monotonic() < end, f"timed out waiting for {what}"
            self.executor.spin_once(timeout_sec=0.02)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.mark.parametrize("module", ["direction_up_ik.ros.command_echo", "direction_up_ik.ros.node"])
def test_sigint_twice_exits_0_without_a_traceback(module):
    """Issue 23 item 8: under ``ros2 launch`` a Ctrl-C reaches every process twice (from the
    terminal, and forwarded by launch a moment later). command_echo died in destroy_node
    (KeyboardInterrupt, exit -2). Each process here gets two SIGINTs, the second right after the
    first or a little later; every one must exit 0 without a traceback. The node, whose clean
    shutdown command_echo now shares, is held to the same."""
    gaps = (0.0, 0.01, 0.2, 1.0)  # seconds between the two SIGINTs
    namespaces = [f"/sigint_{uuid.uuid4().hex[:8]}" for _ in gaps]
    args = ("-p", "robot:=panda_like") if module.endswith("command_echo") else \
        ("--params-file", str(REPO / "config" / "panda_like.yaml"), "-p", "command.topic:=~/joint_command")
    listener = _Listener()
    procs = []
    try:
        for ns in namespaces:
            listener.listen(ns)
            procs.append(_process(module, ns, *args))
        if module.endswith("command_echo"):  # running: its joint_states arrive
            listener.spin_until(lambda: all(listener.states[ns] for ns in namespaces), "joint_states")
        else:  # running: its parameter service answers
            for ns in namespaces:
                client = listener.node.create_client(GetParameters, f"{ns}/direction_up_ik_node/get_parameters")
                assert client.wait_for_service(timeout_sec=PROCESS_TIMEOUT), ns
        for proc, gap in zip(procs, gaps):
            proc.send_signal(signal.SIGINT)
            if gap:
                time.sleep(gap)
            proc.send_signal(signal.SIGINT)
        for proc, gap in zip(procs, gaps):
            out, _ = proc.communicate(timeout=TIMEOUT)  # a hang catcher
            assert proc.returncode == 0 and "Traceback" not in out, f"gap {gap} s: exit {proc.returncode}\n{out}"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
        listener.close()


@pytest.mark.parametrize("robot", ["dual_arm_torso", "panda_like", "ur5_like"])
def test_echoes_the_command_the_robot_s_config_publishes(robot):
    """Issue 23 item 8: demo.launch.py with panda_like / ur5_like never moved the robot, because
    their configs command a controller (JointTrajectory / Float64MultiArray on the controller's
    topic) and command_echo listened to JointState only. Here, per bundled robot: the node
    with config/<robot>.yaml (as the demo starts it) and command_echo with the parameters the demo
    derives from the same file; a solve with ``publish`` moves the echoed joint_states to the
    answer."""
    from direction_up_ik.ros.launch_support import command_echo_parameters
    from direction_up_ik.ros.parameter_files import parameter_file_values

    namespace = f"/demo_{uuid.uuid4().hex[:8]}"
    config = REPO / "config" / f"{robot}.yaml"
    fqn = f"{namespace}/direction_up_ik_node"
    # A controller topic given absolute in the file is moved into this test's namespace (the
    # node by its own parameter, command_echo by the same derivation), so that parallel runs
    # cannot hear each other.
    values = parameter_file_values(config, fqn)
    topic = values.get("command.topic", "~/joint_command")
    node_args = ["--params-file", str(config)]
    if topic.startswith("/"):
        values["command.topic"] = topic.lstrip("/")
        node_args += ["-p", f"command.topic:={values['command.topic']}"]
    echo = command_echo_parameters(values, fqn)
    assert echo["command_type"] == values.get("command.type", "joint_state")
    echo_args = ["-p", f"robot:={robot}", "-p", f"command_type:={echo['command_type']}",
                 "-p", f"command_topic:={echo['command_topic']}"]
    if echo.get("joint_order"):
        echo_args += ["-p", f"joint_order:=[{', '.join(echo['joint_order'])}]"]
    model = load_robot(robot)
    listener = _Listener()
    listener.listen(namespace)
    procs = [_process("direction_up_ik.ros.command_echo", namespace, *echo_args),
             _process("direction_up_ik.ros.node", namespace, *node_args)]
    try:
        solve = listener.node.create_client(SolveDirectionUpIK, f"{fqn}/solve")
        assert solve.wait_for_service(timeout_sec=PROCESS_TIMEOUT), "the node never served ~/solve"
        states = listener.states[namespace]
        listener.spin_until(lambda: states, "command_echo's joint_states")
        start = np.array([dict(zip(states[-1].name, states[-1].position))[n] for n in model.joint_names])
        goal = np.clip(start + 0.15, np.where(np.isfinite(model.lower_limits), model.lower_limits, -3.0),
                       np.where(np.isfinite(model.upper_limits), model.upper_limits, 3.0))
        names = [e.name for e in bundled_robot(robot).end_effectors]
        tcp = model.tcp_transforms(goal)
        req = SolveDirectionUpIK.Request(publish=True)
        req.candidates = [DirectionUpCandidate(targets=[_target(n, tcp[e]) for e, n in enumerate(names)])]
        response = _call(listener, solve, req)
        end = time.monotonic() + TIMEOUT  # a hang catcher: until the node has command_echo's state
        while response.error_code == SolveDirectionUpIK.Response.NO_JOINT_STATE and time.monotonic() < end:
            listener.executor.spin_once(timeout_sec=0.05)
            response = _call(listener, solve, req)
        assert response.error_code == SolveDirectionUpIK.Response.SUCCESS, response.message
        answer = np.asarray(response.results[response.best_index].joint_positions)

        def echoed():
            q = dict(zip(states[-1].name, states[-1].position))
            return np.allclose([q[n] for n in model.joint_names], answer, atol=1e-9)

        listener.spin_until(echoed, "the echoed joint_states to reach the published answer")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            out, _ = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, out
        listener.close()


def _target(end_effector: str, pose: np.ndarray):
    """A full target in the TCP convention (+Z direction, +Y up) at ``pose`` (4x4, root frame)."""
    from direction_up_ik.msg import DirectionUpTarget
    t = DirectionUpTarget(end_effector=end_effector, mode=DirectionUpTarget.MODE_FULL,
                          local_axes=DirectionUpTarget.LOCAL_AXES_TCP)
    t.position.x, t.position.y, t.position.z = (float(v) for v in pose[:3, 3])
    t.direction.x, t.direction.y, t.direction.z = (float(v) for v in pose[:3, 2])
    t.up.x, t.up.y, t.up.z = (float(v) for v in pose[:3, 1])
    return t


def _call(listener: _Listener, client, request):
    """The response to ``request``, sent again while unanswered (a response sent before the
    node's writer has matched this client is lost); a hang catcher bounds it."""
    patience = 5.0
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        future = client.call_async(request)
        wait_end = min(end, time.monotonic() + patience)
        while not future.done() and time.monotonic() < wait_end:
            listener.executor.spin_once(timeout_sec=0.02)
        if future.done():
            return future.result()
        client.remove_pending_request(future)
        patience = min(2 * patience, 60.0)
    raise AssertionError("no response from ~/solve")
