#!/usr/bin/env python3
"""Benchmark the ROS path: ``~/solve`` round trip against the in-process solve, and the
``~/target`` -> command streaming lag.

    .venv/bin/python benchmarks/bench_ros.py [--requests 500] [--stream-seconds 10] \
        [--target-hz 100] [--seed 0] [--search] [--json out.json]

Starts ``direction_up_ik_node`` with ``config/dual_arm_torso.yaml`` as a subprocess in a
namespace of its own (as ``scripts/load_node.py`` does), waits until it is ready and has
taken the published joint state (the middle of the joint limits), then measures in one run:

a. **core**: ``--requests`` small requests (one candidate, both end effectors at the TCP
   poses of a random state near the published one) solved by
   ``robo_solve_ik_direction_up_multi_batch`` in this process, on a model loaded the way the
   node loads it (``config_from_values`` + ``load_robot_model``), with the node's solver
   settings and the same start state (with ``--search``, the node's default instead: the
   YAML's search with its collision scene, ``search_with_settings``, on both sides);
b. **service**: the same requests through ``~/solve`` from a client in this process, one in
   flight at a time (round trip: serialisation, transport, the node's executor and callback,
   the response's way back); the overhead is round trip - core, paired per request;
b'. **floor**: the same requests to an echo server (this script with ``--echo-server``): a bare
   rclpy node answering one canned response shaped like the node's, spun like the node's
   ``main`` -- serialisation, transport and executors without the node's work. Round trip -
   echo round trip is what the node adds to the floor;
c. **node.solve**: the same requests through ``DirectionUpIKNode.solve`` of a node instance
   in this process (no executor, no transport): the node's own time in its service callback,
   and its parts measured separately -- message -> core targets (``targets_from_candidates``),
   ``fill_response`` and ``publish_command`` -- and its ``~/target`` callback (solve + publish);
d. **streaming**: a separate process publishes two-hand candidates on ``~/target`` at
   ``--target-hz`` for ``--stream-seconds``, each target once; this process records every
   command on ``~/joint_command``, matches it to the target it solves (FK, as load_node.py
   does) and reports the lag from that target's publication to the command's arrival
   (p50/p99) and of its last leg (the command's stamp -> arrival), commands per second, and
   how many solvable targets got no command (skipped:
   the subscription keeps only the newest target; targets the solver cannot reach from the
   start state are found beforehand in process and counted apart);
d'. **streaming floor**: the same stream to the echo server, which sends each target's
   positions straight back as a command (subscribed and published like the node's): the lag
   of the two transport legs and executors without the node's work. Node and echo stream
   in alternating segments (two each); the lags pooled per node and the node's lag beyond
   the floor's are printed last.

a, b, b' and c run interleaved (request i through all of them, then i + 1), so background load
on a shared machine hits them alike; compare the ratios. Every service answer is checked to
equal the in-process one (same joint positions; the node's collision check may fail an answer
the core, which checks none, accepts: counted as ``in_collision``). Prints a table; ``--json``
writes it all.

``--base REV`` adds an earlier revision's node, side by side: its package is exported
(``git archive``) to ``build/bench_ros/<commit>/`` and put first on its ``PYTHONPATH``, its
kernels compiled there once (``direction_up_ik.precompile``, minutes the first time); each
request then also goes to it (the two nodes' order alternating request by request), and the
streaming runs in four alternating segments (this tree's node, the base's, again each). Printed
are the base's round trip, both beyond the echo floor, the paired ratios, and how many answers
of the two nodes differ (joint positions, bit for bit: none may).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))  # driver_common
from driver_common import (CONFIG, NODE_NAME, REPO, NodeProcess, RosClient,  # noqa: E402
                           _die_with_parent, _streamer, near, percentile, prepare_environment,
                           ros_environment, stop_worker, target_set, tcp_target, unique_namespace,
                           wait_for_joint_state)
from driver_judge import Judge  # noqa: E402
from load_node import analyse_commands  # noqa: E402
from bench_cold_start import export_revision  # noqa: E402


def stats_ms(seconds) -> dict:
    """median / p95 / p99 / mean of durations in seconds, as milliseconds."""
    return dict(n=len(seconds), median=round(1e3 * percentile(seconds, 50), 4),
                p95=round(1e3 * percentile(seconds, 95), 4), p99=round(1e3 * percentile(seconds, 99), 4),
                mean=round(1e3 * float(np.mean(seconds)) if len(seconds) else math.nan, 4))


#: The node's spec single start (its default is the search): the core side of the comparison
#: is the spec's solve, so that the ratios measure the node's path, not the search's rounds.
#: The streamed targets are independent random poses, each matched to its command: solved from
#: the joint state without the step limit (``benchmarks/bench_streaming.py`` measures those).
NODE_PARAMS = {"search.num_seeds": 0, "streaming.start_from": "joint_states",
               "streaming.max_joint_step": [1000.0]}


def node_params(search: bool = False) -> dict:
    """:data:`NODE_PARAMS`; ``search``: without its ``search.num_seeds``, so the node answers
    with the YAML's search and collision check (its default)."""
    return {k: v for k, v in NODE_PARAMS.items() if not (search and k == "search.num_seeds")}


def yaml_values(search: bool = False) -> dict:
    """The YAML's parameters with :func:`node_params`."""
    from direction_up_ik.ros.parameter_files import parameter_file_values
    return {**parameter_file_values(CONFIG), **node_params(search)}


def make_requests(model, names, state, count: int, seed: int, scale: float):
    """``count`` SolveDirectionUpIK requests: one candidate, every end effector at the TCP pose
    of a random state within ``scale`` of ``state``."""
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.srv import SolveDirectionUpIK
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        tcp = model.tcp_transforms(near(model, state, rng, scale))
        req = SolveDirectionUpIK.Request()
        req.candidates = [DirectionUpCandidate(targets=[tcp_target(n, tcp[e]) for e, n in enumerate(names)])]
        out.append(req)
    return out


class CoreSolver:
    """The core as the node drives it, without ROS: model, frames and settings of the YAML;
    ``search``: the node's default request, the search with the YAML's collision scene."""

    def __init__(self, state: np.ndarray, search: bool = False) -> None:
        from direction_up_ik.ros.config import config_from_values
        from direction_up_ik.ros.robot_model import load_robot_model
        from direction_up_ik.ros.joint_state import float32_within_limits
        self.config = config_from_values(yaml_values(search))
        self.robot = load_robot_model(self.config)
        self.frames = {"": np.eye(4), **self.robot.static_link_xforms()}
        self.robot.joint_q[:] = float32_within_limits(state, self.robot.lower_limits, self.robot.upper_limits)
        s = self.config.solver
        self.kwargs = dict(max_position_error=s.max_position_error, max_iters=s.max_iters,
                           position_tol=s.position_tol, frame_tol_rad=s.frame_tol_rad,
                           position_weight=s.position_weight, rotation_weight=s.rotation_weight,
                           damping=s.damping, max_step_norm=s.max_step_norm)
        self.search = None
        if search:
            from direction_up_ik.core.settings import search_settings
            from direction_up_ik.msg import SolverOverrides
            from direction_up_ik.ros.conversions import search_options
            from direction_up_ik.ros.obstacles import load_collision_scene
            self.search = search_settings(**search_options(self.config, SolverOverrides()))
            self.scene = load_collision_scene(self.config, self.robot)[0] if self.config.collision_enabled else None

    def targets(self, request):
        from direction_up_ik.ros.conversions import targets_from_candidates
        return targets_from_candidates(request.candidates, self.config.end_effectors, self.frames)

    def solve(self, targets):
        if self.search is not None:
            from direction_up_ik.core.search_api import search_with_settings
            return search_with_settings(self.robot, targets, self.config.search_solver, self.search,
                                        collision_scene=self.scene).result
        from direction_up_ik.core import robo_solve_ik_direction_up_multi_batch
        return robo_solve_ik_direction_up_multi_batch(self.robot, targets, **self.kwargs)


class InProcessNode:
    """A DirectionUpIKNode in this process with the YAML's parameters, driven by direct calls."""

    def __init__(self, state: np.ndarray, search: bool = False) -> None:
        import rclpy
        from rclpy.parameter import Parameter
        from sensor_msgs.msg import JointState
        from direction_up_ik.ros.node import DirectionUpIKNode
        prepare_environment()
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        overrides = [Parameter(k, value=list(v) if isinstance(v, tuple) else v)
                     for k, v in yaml_values(search).items() if not (isinstance(v, (list, tuple)) and not v)]
        self.node = DirectionUpIKNode(context=self.context, namespace=f"/bench_inproc_{uuid.uuid4().hex[:8]}",
                                      parameter_overrides=overrides)
        self.node._on_joint_state(JointState(name=list(self.node._robot.joint_names),
                                             position=[float(v) for v in state]))

    def close(self) -> None:
        import rclpy
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


ECHO_SERVER = "--echo-server"


def echo_server_main(argv) -> int:
    """The floor of a round trip: a bare rclpy node named like the solver node, serving ``~/solve``
    with one canned answer shaped like a real one (16 joints, one candidate, two end effectors) and
    spun like the node's ``main`` spins (the executor ``DIRECTION_UP_IK_EXECUTOR`` names). A round
    trip to it is request and response (de)serialisation, transport and the two executors, without
    the node's own work."""
    import signal
    import threading
    import rclpy
    import rclpy.signals
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from direction_up_ik.msg import CandidateResult, DirectionUpCandidate, EndEffectorError
    from direction_up_ik.ros.process import make_executor
    from direction_up_ik.robots import load_robot
    from direction_up_ik.srv import SolveDirectionUpIK
    rclpy.init(args=argv, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = rclpy.create_node(NODE_NAME)
    joints = list(load_robot("dual_arm_torso").joint_names)
    errors = [EndEffectorError(end_effector=n, position_error=1e-4, direction_error=1e-3, up_error=1e-3)
              for n in ("left", "right")]
    canned = SolveDirectionUpIK.Response(
        success=True, best_index=0, error_code=SolveDirectionUpIK.Response.SUCCESS, joint_names=joints,
        message="1/1 candidates succeeded; best 0 (cost 0.0123457)",
        results=[CandidateResult(joint_positions=[0.1] * len(joints), success=True, cost=0.0123457,
                                 iterations=4, stop_reason="converged", errors=errors)])
    node.create_service(SolveDirectionUpIK, "~/solve", lambda request, response: canned)
    # The floor of the streaming lag: each ~/target straight back as a 16-joint command whose
    # first values are the targets' positions (the driver matches them), subscribed and
    # published as the node does (depth 1 in, 10 out).
    command_pub = node.create_publisher(JointState, "~/joint_command", 10)
    padding = [0.0] * len(joints)

    def echo_target(msg) -> None:
        values = [c for t in msg.targets for c in (t.position.x, t.position.y, t.position.z)]
        command = JointState(name=joints, position=values + padding[len(values):])
        command.header.stamp = node.get_clock().now().to_msg()
        command_pub.publish(command)

    node.create_subscription(DirectionUpCandidate, "~/target", echo_target,
                             QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                                        reliability=ReliabilityPolicy.RELIABLE))
    executor = make_executor()  # the node's kind (DIRECTION_UP_IK_EXECUTOR)
    executor.add_node(node)
    while not stop.is_set() and rclpy.ok():
        executor.spin_once(timeout_sec=0.1)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def solvable(core: CoreSolver, messages) -> np.ndarray:
    """(K,) bool: which streamed candidates the solver reaches from the start state."""
    from direction_up_ik.srv import SolveDirectionUpIK
    out = np.zeros(len(messages), dtype=bool)
    for k, msg in enumerate(messages):
        req = SolveDirectionUpIK.Request()
        req.candidates = [msg]
        out[k] = core.solve(core.targets(req)).best_index is not None
    return out


def base_environment(rev: str) -> dict:
    """Environment of a node of revision ``rev``: its package exported once to
    ``build/bench_ros/<commit>/`` (first on ``PYTHONPATH``), its kernels compiled into that
    folder's cache before it starts (so that it answers with them from its first request)."""
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=REPO, check=True, capture_output=True,
                            text=True).stdout.strip()
    source = REPO / "build" / "bench_ros" / commit
    if not (source / "direction_up_ik").is_dir():
        export_revision(commit, str(source))
    env = dict(PYTHONPATH=os.pathsep.join(filter(None, (str(source), os.environ.get("PYTHONPATH")))))
    print(f"bench_ros: base {commit}: compiling or loading its kernels ({source})", flush=True)
    subprocess.run([sys.executable, "-m", "direction_up_ik.precompile", "--quiet"], cwd=tempfile.gettempdir(),
                   env={**os.environ, **env}, check=True, timeout=3600)
    return dict(env, commit=commit)


def git_state() -> dict:
    def run(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    changed = run("status", "--porcelain", "--", "direction_up_ik", "scripts")
    return dict(commit=run("rev-parse", "--short", "HEAD"),
                changed=None if changed is None else changed.splitlines())


def run(requests: int = 500, seed: int = 0, scale: float = 0.3, stream_seconds: float = 10.0,
        target_hz: float = 100.0, publish: bool = False, base: Optional[str] = None, search: bool = False) -> dict:
    from sensor_msgs.msg import JointState
    from direction_up_ik.core.backend import warm_up_backend
    from direction_up_ik.ros.conversions import fill_response, targets_from_candidates
    from direction_up_ik.srv import SolveDirectionUpIK
    R = SolveDirectionUpIK.Response

    t_begin = time.monotonic()
    kernel_s = warm_up_backend()
    base_env = None if base is None else base_environment(base)
    judge = Judge()                      # model, joint names, state (mid-range), FK for matching
    state = judge.state
    core = CoreSolver(state, search)
    # Streamed targets are answered with the spec's single start either way (streaming_request).
    stream_core = CoreSolver(state) if search else core
    names = [e.name for e in core.config.end_effectors]
    reqs = make_requests(core.robot, names, state, requests, seed, scale)
    for r in reqs:
        r.publish = publish
    report = dict(robot="dual_arm_torso", requests=requests, seed=seed, scale=scale, publish=publish, search=search,
                  backend="numpy" if kernel_s is None else "numba", cpus=os.cpu_count(),
                  load_average_start=os.getloadavg(), python=platform.python_version(), git=git_state(),
                  base=None if base_env is None else base_env["commit"],
                  executor=os.environ.get("DIRECTION_UP_IK_EXECUTOR") or "single_threaded")
    namespace = unique_namespace("bench_ros")
    node = NodeProcess(namespace, params=node_params(search))
    base_node = None
    if base_env is not None:
        base_node = NodeProcess(unique_namespace("bench_ros_base"), params=node_params(search), cwd=Path(tempfile.gettempdir()),
                                env={k: v for k, v in base_env.items() if k != "commit"})
    echo_ns = unique_namespace("bench_ros_echo")
    echo = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), ECHO_SERVER, "--ros-args", "-r",
                             f"__ns:={echo_ns}"], cwd=REPO, env=ros_environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    client = inproc = None
    mp = multiprocessing.get_context("spawn")
    problems = []
    try:
        inproc = InProcessNode(state, search)
        client = RosClient(f"bench_ros_{namespace[1:]}")
        solvers = {}  # "new" / "base": its ~/solve client
        for key, proc in (("new", node), ("base", base_node)):
            if proc is None:
                continue
            proc.wait_ready()
            proc.wait_kernels()  # the numpy backend's answers while they load are not the node's
            solvers[key] = client.node.create_client(SolveDirectionUpIK, f"{proc.fqn}/solve")
            state_pub = client.node.create_publisher(JointState, f"{proc.namespace}/joint_states", 10)
            wait_for_joint_state(client, solvers[key], state_pub, judge.joint_names, state)
        report["startup_s"] = round(time.monotonic() - t_begin, 2)
        echo_solve = client.node.create_client(SolveDirectionUpIK, f"{echo_ns}/{NODE_NAME}/solve")
        if not echo_solve.wait_for_service(timeout_sec=30.0):
            raise RuntimeError("the echo server's ~/solve did not appear within 30 s")

        # ---------------------------------------------------------------- a, b, c interleaved
        n = inproc.node
        targets = [core.targets(r) for r in reqs]
        for r, t in list(zip(reqs, targets))[:20]:  # warm-up of every path
            core.solve(t)
            n.solve(r, R())
            for solver in solvers.values():
                client.call(solver, r, timeout=60.0)
            client.call(echo_solve, r, timeout=60.0)
        t_core, t_service, t_base, t_echo, t_node, t_conv, t_fill, t_pub, t_target = ([] for _ in range(9))
        differ = codes = in_collision = base_differ = 0
        successes = 0
        clock = time.perf_counter
        for i, (r, t) in enumerate(zip(reqs, targets)):
            t0 = clock()
            result = core.solve(t)
            t1 = clock()
            answers, spent = {}, {}
            for key in sorted(solvers, reverse=bool(i % 2)):  # "base" / "new" first by turns
                t_call = clock()
                answers[key] = client.call(solvers[key], r, timeout=30.0)
                spent[key] = clock() - t_call
            t2 = clock()
            echoed = client.call(echo_solve, r, timeout=30.0)
            t2e = clock()
            n.solve(r, R())
            t3 = clock()
            targets_from_candidates(r.candidates, n._config.end_effectors, n._frames)
            t4 = clock()
            fill_response(R(), result, n._robot.joint_names, names)
            t5 = clock()
            n.publish_command(result.joint_q[0].astype(np.float64))
            t6 = clock()
            n._on_target(r.candidates[0])
            t7 = clock()
            t_core.append(t1 - t0)
            t_node.append(t3 - t2e)
            t_conv.append(t4 - t3)
            t_fill.append(t5 - t4)
            t_pub.append(t6 - t5)
            t_target.append(t7 - t6)
            successes += result.best_index is not None
            response = answers["new"]
            if response is None or echoed is None or answers.get("base", response) is None:
                problems.append("a service request got no answer within 30 s")
                continue
            t_service.append(spent["new"])
            t_echo.append(t2e - t2)
            codes += response.error_code not in (R.SUCCESS, R.NO_SOLUTION, R.IN_COLLISION)
            expected = R.SUCCESS if result.best_index is not None else R.NO_SOLUTION
            in_collision += response.error_code == R.IN_COLLISION and expected == R.SUCCESS
            q = np.asarray(response.results[0].joint_positions)
            if response.error_code not in (expected, R.IN_COLLISION) or \
                    not np.array_equal(q, result.joint_q[0].astype(np.float64)):
                differ += 1
            if "base" in answers:
                t_base.append(spent["base"])
                based = answers["base"]
                base_differ += based.error_code != response.error_code or \
                    not np.array_equal(np.asarray(based.results[0].joint_positions), q)
        if differ:
            problems.append(f"{differ} service answers differ from the in-process solve")
        if base_differ:
            problems.append(f"{base_differ} answers of the base node differ from this tree's node")
        complete = len(t_service) == len(t_core)
        paired = np.asarray(t_service) - np.asarray(t_core) if complete else np.asarray([])
        beyond_floor = np.asarray(t_service) - np.asarray(t_echo)
        report["solve"] = dict(
            successes=successes, rejected=codes, in_collision=in_collision, answers_differ=differ,
            core=stats_ms(t_core), service_round_trip=stats_ms(t_service),
            overhead=stats_ms(paired), echo_round_trip=stats_ms(t_echo),
            round_trip_beyond_echo=stats_ms(beyond_floor),
            node_solve=stats_ms(t_node), node_on_target=stats_ms(t_target),
            node_parts=dict(targets_from_candidates=stats_ms(t_conv), fill_response=stats_ms(t_fill),
                            publish_command=stats_ms(t_pub)),
            ratio_service_to_core=dict(
                median=round(percentile(t_service, 50) / percentile(t_core, 50), 2),
                p99=round(percentile(t_service, 99) / percentile(t_core, 99), 2)),
            ratio_node_solve_to_core=round(percentile(t_node, 50) / percentile(t_core, 50), 2))
        if t_base:
            base_beyond = np.asarray(t_base) - np.asarray(t_echo)
            report["solve"]["base"] = dict(
                round_trip=stats_ms(t_base), round_trip_beyond_echo=stats_ms(base_beyond), answers_differ=base_differ,
                ratio_round_trip=round(percentile(t_service, 50) / percentile(t_base, 50), 3),
                ratio_beyond_echo=round(percentile(beyond_floor, 50) / percentile(base_beyond, 50), 3))

        # ---------------------------------------------------------------- d. streaming
        count = int(math.ceil(target_hz * stream_seconds)) + 50  # every target sent at most once
        messages, positions = target_set(seed, count)
        ok = solvable(stream_core, messages)
        commands = []
        realtime_offset = time.time() - time.monotonic()  # the command's stamp is system time
        client.spin_in_background()
        fqns = {"new": node.fqn, "echo": f"{echo_ns}/{NODE_NAME}"}
        if base_node is not None:
            fqns["base"] = base_node.fqn
        order = [key for key in ("new", "base", "echo") if key in fqns] * 2  # two segments each
        for key, fqn in fqns.items():
            client.node.create_subscription(JointState, f"{fqn}/joint_command",
                                            lambda m, key=key: commands.append((key, time.monotonic(), m)), 100)
        time.sleep(0.5)  # the subscriptions match
        segments, lags = [], {key: [] for key in fqns}
        for key in order:
            segments.append((key, stream_segment(mp, fqns[key], key == "echo", judge, commands, ok, messages,
                                                 positions, seed, count, target_hz, stream_seconds / 2,
                                                 realtime_offset, problems, lags[key])))
        report["streaming"] = [dict(node=key, **segment) for key, segment in segments]
        report["streaming_lag_ms"] = {key: dict(p50=round(1e3 * percentile(v, 50), 2),
                                                p99=round(1e3 * percentile(v, 99), 2), matched=len(v))
                                      for key, v in lags.items()}
        for proc in (node, base_node):
            if proc is None:
                continue
            if not proc.alive():
                problems.append(f"the node {proc.fqn} exited (code {proc.proc.returncode})")
            if proc.tracebacks:
                problems.append(f"the node printed {proc.tracebacks} traceback(s): {proc.first_errors[:3]}")
    except Exception as exc:  # noqa: BLE001 - reported with the node's output
        problems.append(f"driver error: {exc!r}")
        report["node_output_tail"] = node.output[-3000:]
    finally:
        if client is not None:
            client.close()
        if inproc is not None:
            inproc.close()
        report["node_exit_code"] = node.stop()
        if base_node is not None:
            report["base_node_exit_code"] = base_node.stop()
        if echo.poll() is None:
            echo.send_signal(signal.SIGINT)
            try:
                echo.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                echo.kill()
                echo.wait(timeout=5.0)
        report["load_average_end"] = os.getloadavg()
        report["runtime_s"] = round(time.monotonic() - t_begin, 1)
        report["problems"] = problems
    return report


def stream_segment(mp, fqn: str, echo: bool, judge: Judge, commands: list, ok: np.ndarray, messages, positions,
                   seed: int, count: int, target_hz: float, seconds: float, realtime_offset: float, problems: list,
                   lags: list) -> dict:
    """Stream targets to the ``~/target`` of node ``fqn`` for ``seconds`` from a separate process; its
    commands (``commands``: (node key, arrival, message) appended by the subscriptions) matched to
    the targets, by FK, or for the ``echo`` server by the positions it copies back. ``ok``: (K,)
    which targets the solver reaches. The figures of the segment; ``lags`` receives its lags (s)."""
    stop, out = mp.Event(), mp.Queue()
    streamer = mp.Process(target=_streamer, daemon=True,
                          args=("targets", f"{fqn}/target", target_hz, stop, out, seconds, (seed, count)))
    streamer.start()
    try:
        status, kind, data = out.get(timeout=120.0)
        if status == "error":
            raise RuntimeError(f"streamer: {data}")
        commands.clear()
        t_start = time.monotonic()
        status, kind, data = out.get(timeout=seconds + 120.0)
        if status != "done":
            raise RuntimeError(f"streamer: {data}")
        t_end = time.monotonic()
        time.sleep(0.5)  # the last commands arrive
    finally:
        stop.set()
        stop_worker(streamer)
    received = [(t, m) for _, t, m in list(commands)]
    sends = data["sends"]
    if echo:
        summary = echo_lags(received, sends, messages, lags)
        reachable = data["count"]  # the echo answers every target
    else:
        summary, stream_problems = analyse_commands(judge, received, sends, positions, t_start, t_end,
                                                    max_lag_s=1.0, lags_out=lags)
        problems.extend(stream_problems)
        reachable = int(sum(ok[k] for k, _ in sends))
    # The last leg alone: the node's stamp (taken as it publishes) -> arrival here.
    leg = [t - (m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec - realtime_offset) for t, m in received]
    return dict(
        target_hz=target_hz, seconds=round(data["seconds"], 2), sent=data["count"],
        sent_rate_hz=round(data["rate_hz"], 1), sent_solvable=reachable,
        commands=len(received), commands_per_s=round(len(received) / data["seconds"], 1),
        matched=summary["matched"], skipped=reachable - summary["matched"],
        skipped_pct=round(100.0 * (reachable - summary["matched"]) / max(1, reachable), 2),
        lag_ms=summary["lag_ms"], per_second_min=summary.get("per_second_min"),
        command_leg_ms=dict(p50=round(1e3 * percentile(leg, 50), 2), p99=round(1e3 * percentile(leg, 99), 2)),
        unmatched=summary["unmatched"])


def echo_lags(received, sends, messages, lags_out: list) -> dict:
    """The echo server's commands matched to the streamed targets (``messages``, sent as
    ``sends``: (index, time)) by the target positions each copies back, exactly; their lags (s)
    are appended to ``lags_out``. A summary shaped like ``analyse_commands``' (the part the
    report prints)."""
    def key(values):
        return tuple(float(v) for v in values)

    index = {key(c for t in m.targets for c in (t.position.x, t.position.y, t.position.z)): k
             for k, m in enumerate(messages)}
    width = len(next(iter(index)))
    sent = {}
    for k, t in sends:
        sent.setdefault(k, t)
    lags, unmatched = [], 0
    for t, m in received:
        k = index.get(key(m.position[:width]))
        if k is None or k not in sent:
            unmatched += 1
        else:
            lags.append(t - sent[k])
    lags_out.extend(lags)
    return dict(matched=len(lags), unmatched=unmatched,
                lag_ms=dict(p50=round(1e3 * percentile(lags, 50), 1), p99=round(1e3 * percentile(lags, 99), 1),
                            max=round(1e3 * max(lags, default=math.nan), 1)))


def print_report(r: dict) -> None:
    base = f", base {r['base']} side by side" if r.get("base") else ""
    print(f"\nbench_ros: {r['robot']}, backend {r['backend']}, {r['requests']} requests of 1 candidate x 2 end "
          f"effectors (publish={r['publish']}), {r['cpus']} CPUs, load average at start "
          f"{r['load_average_start'][0]:.2f}, at end {r['load_average_end'][0]:.2f}{base}; executor "
          f"{r['executor']}; requests answered by "
          f"{'the search with collisions (--search)' if r.get('search') else 'the spec single start'}")
    if "solve" in r:
        s = r["solve"]
        rows = [("core solve, in process", s["core"]), ("node.solve(), in process", s["node_solve"]),
                ("  message -> targets", s["node_parts"]["targets_from_candidates"]),
                ("  fill_response", s["node_parts"]["fill_response"]),
                ("  publish_command", s["node_parts"]["publish_command"]),
                ("node._on_target() (streaming)", s["node_on_target"]),
                ("~/solve round trip", s["service_round_trip"]),
                ("overhead (round trip - core)", s["overhead"]),
                ("echo server round trip (floor)", s["echo_round_trip"]),
                ("round trip - echo round trip", s["round_trip_beyond_echo"])]
        if "base" in s:
            rows += [("base: ~/solve round trip", s["base"]["round_trip"]),
                     ("base: round trip - echo", s["base"]["round_trip_beyond_echo"])]
        print(f"{'':32s} {'median':>8s} {'p95':>8s} {'p99':>8s}   ms")
        for label, v in rows:
            print(f"{label:32s} {v['median']:8.3f} {v['p95']:8.3f} {v['p99']:8.3f}")
        print(f"round trip / core: {s['ratio_service_to_core']['median']}x median, "
              f"{s['ratio_service_to_core']['p99']}x p99; node.solve / core {s['ratio_node_solve_to_core']}x; "
              f"{s['successes']} of {r['requests']} solved; in collision (node) {s['in_collision']}; "
              f"answers differing {s['answers_differ']}")
        if "base" in s:
            b = s["base"]
            print(f"this tree / base, medians: round trip {b['ratio_round_trip']}x, beyond the echo floor "
                  f"{b['ratio_beyond_echo']}x; answers differing from the base's {b['answers_differ']}")
    for t in r.get("streaming", []):
        print(f"streaming ~/target ({t['node']}) at {t['target_hz']:g} Hz for {t['seconds']} s: {t['sent']} sent "
              f"({t['sent_rate_hz']} Hz, {t['sent_solvable']} solvable), {t['commands']} commands "
              f"({t['commands_per_s']}/s), skipped {t['skipped']} ({t['skipped_pct']} %), "
              f"unmatched {t['unmatched']}")
        print(f"  target -> command lag: p50 {t['lag_ms']['p50']} ms, p99 {t['lag_ms']['p99']} ms, "
              f"max {t['lag_ms']['max']} ms; of it the command's leg (node's stamp -> arrival): p50 "
              f"{t['command_leg_ms']['p50']} ms, p99 {t['command_leg_ms']['p99']} ms")
    pooled = r.get("streaming_lag_ms")
    if pooled:
        floor = pooled["echo"]
        print(f"streaming lag, all segments: echo server (floor) p50 {floor['p50']} / p99 {floor['p99']} ms"
              + "".join(f"; {key} p50 {v['p50']} / p99 {v['p99']} ms (beyond the floor's: "
                        f"{v['p50'] - floor['p50']:.2f} / {v['p99'] - floor['p99']:.2f})"
                        for key, v in pooled.items() if key != "echo"))
    print(f"runtime {r['runtime_s']} s, node exit code {r['node_exit_code']}, problems: {len(r['problems'])}")
    for p in r["problems"][:10]:
        print("  -", p)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == [ECHO_SERVER]:
        return echo_server_main(sys.argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per path (a, b, c)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=0.3,
                        help="request targets: TCP poses of states within this (rad / m per joint) of the start")
    parser.add_argument("--publish", action="store_true", help="set the requests' publish flag")
    parser.add_argument("--stream-seconds", type=float, default=10.0)
    parser.add_argument("--target-hz", type=float, default=100.0)
    parser.add_argument("--base", help="also run this revision's node, side by side (e.g. main)")
    parser.add_argument("--executor", choices=("single_threaded", "events"),
                        help="DIRECTION_UP_IK_EXECUTOR of the node and the echo server (a base node from "
                             "before the variable ignores it)")
    parser.add_argument("--search", action="store_true",
                        help="the node's default ~/solve (the YAML's search and collision check) instead of "
                             "the spec's single start, on both sides")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    if args.executor:
        os.environ["DIRECTION_UP_IK_EXECUTOR"] = args.executor  # the node processes inherit it
    report = run(args.requests, args.seed, args.scale, args.stream_seconds, args.target_hz, args.publish,
                 args.base, args.search)
    print_report(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if not report["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
