#!/usr/bin/env python3
"""Load ``direction_up_ik_node``: concurrent clients while joint states and targets stream.

    .venv/bin/python scripts/load_node.py [--clients 8] [--requests 500] [--json out.json]

Starts the node (``config/dual_arm_torso.yaml``) as a subprocess in a namespace of its own,
then, all at the same time:

* one process streams ``joint_states`` at ``--joint-state-hz`` (500);
* one process streams two-hand candidates on ``~/target`` at ``--target-hz`` (100), cycling
  through 1000 reachable targets; the node solves each one it takes and publishes the
  solution on ``~/joint_command``, which this process records;
* ``--clients`` threads, each with its own rclpy node and executor, each send
  ``--requests`` valid SolveDirectionUpIK requests one after the other, every one with a
  target of its own (random, reachable), and check every response against ITS request with
  an independent FK (Pinocchio): a response lost, rejected, or belonging to another request
  (its errors would not match) is a violation. The clients' service QoS has history depth
  100 (``--client-qos-depth``; with the ROS default 10, rmw_fastrtps can drop a busy client's
  own response, see :func:`client_qos`).

Reports p50/p99 latency (all answers, and per answer code) and throughput of the service, the
achieved stream rates, the rate of joint commands from ``~/target`` (per second, during the
client phase), the lag from a target's publication to the command that solves it (the node's
``~/target`` subscription keeps only the newest message, so the lag must stay bounded -- a
queue that grew would show as a growing lag), and the node's RSS. Violations (exit code 1):
lost / mismatched / rejected responses, a command that is non-finite, outside the limits or
matches no target, a second of the client phase without a command, command lag p99 over
``--max-lag-s``, RSS growth over ``--rss-limit-mib``, streams below 90 % of their rate, the
node dying, or ``--max-seconds`` (300) passing after the start-up (which may take a while when
the solver's numba kernels compile). The clients start once the node's compiled kernels answer
(``NodeProcess.wait_kernels``; not with ``--smoke``, which also covers the numpy backend
answering before them).

``--smoke`` (the CI check, ``test/ros/test_reliability.py``): only defects are violations -- a
response lost (none within 300 s), rejected or wrong, a command outside the limits or for no
target, a crash, a leak; the timing limits (command lag, seconds without a command, stream
rates) are reported under "timing_notes" instead, so that a loaded machine cannot fail it.
Every run waits for its child processes and threads on events (their reports, their exit)
with deadlines that only catch hangs.
"""

from __future__ import annotations

import argparse
import copy
import math
import multiprocessing
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_common import (HANG_S, NodeProcess, RosClient, _streamer, close_report,  # noqa: E402
                           finish, gather, near, percentile, print_outcome, stop_worker, target_set,
                           tcp_target, unique_namespace, wait_for_joint_state, wait_for_response_path)
from driver_judge import Judge  # noqa: E402

REQUEST_TIMEOUT_S = 30.0  # a response later than this is lost (--smoke: HANG_S)
TARGET_COUNT = 1000     # distinct streamed targets (10 s of streaming at 100 Hz before repeating)
#: The streamed targets are independent random poses, not a teleoperated path: every command
#: must solve its target, so the node's step limit (which would approach each one a step at a
#: time, docs/design.md "Streaming") is lifted; rad or m per command.
NODE_PARAMS = {"streaming.max_joint_step": [1000.0]}


def two_hand_request(judge: Judge, rng, scale: float = 0.4):
    """One candidate: both hands at the TCP poses of a random state near the published one."""
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.srv import SolveDirectionUpIK
    tcp = judge.model.tcp_transforms(near(judge.model, judge.state, rng, scale))
    req = SolveDirectionUpIK.Request()
    req.candidates = [DirectionUpCandidate(targets=[tcp_target(n, tcp[e]) for e, n in enumerate(judge.ee_names)])]
    return req


class ClientStats:
    def __init__(self) -> None:
        self.latencies = []
        self.latencies_by_code = {}  # error code -> latencies (s) of the answers with it
        self.lost = 0
        self.rejected = 0
        self.mismatched = 0
        self.codes = {}
        self.done = 0
        self.problems = []
        self.error = None


def client_qos(depth: int):
    """Service QoS of the clients: the default (reliable, volatile) with ``depth``.

    rmw_fastrtps sends every response of a service to every client of it, each client keeps
    the ones for its own requests, and the default history is KEEP_LAST 10: a client that does
    not take its responses for a while (eight clients in one Python process share the GIL)
    can lose its own response to ten later ones for other clients. With depth 10 about one
    request in 1500 was lost that way in this driver (the node had answered every one of
    them); with 100, none.
    """
    from rclpy.qos import qos_profile_services_default
    qos = copy.copy(qos_profile_services_default)
    qos.depth = depth
    return qos


def client_worker(index: int, context, fqn: str, requests: int, seed: int, barrier, deadline: float,
                  stats: ClientStats, qos_depth: int = 100, request_timeout: float = REQUEST_TIMEOUT_S) -> None:
    from direction_up_ik.srv import SolveDirectionUpIK
    rc = None
    try:
        judge = Judge()  # per thread: Pinocchio's data is not shared between threads
        rng = np.random.default_rng([seed, index])
        rc = RosClient(f"load_client_{index}", context=context)
        client = rc.node.create_client(SolveDirectionUpIK, f"{fqn}/solve", qos_profile=client_qos(qos_depth))
        wait_for_response_path(rc, client)  # a response of its own came back: none of ours is lost to matching
        barrier.wait(timeout=HANG_S)
        for i in range(requests):
            if time.monotonic() > deadline:
                stats.problems.append(f"client {index}: time limit after {i} requests")
                break
            req = two_hand_request(judge, rng)
            t0 = time.monotonic()
            response = rc.call(client, req, timeout=request_timeout)
            dt = time.monotonic() - t0
            stats.done += 1
            if response is None:
                stats.lost += 1
                stats.problems.append(f"client {index} request {i}: no response within {request_timeout} s")
                continue
            stats.latencies.append(dt)
            stats.codes[response.error_code] = stats.codes.get(response.error_code, 0) + 1
            stats.latencies_by_code.setdefault(response.error_code, []).append(dt)
            if response.error_code not in judge.outcomes:
                stats.rejected += 1
                stats.problems.append(f"client {index} request {i}: rejected {response.error_code}: "
                                      f"{response.message[:200]}")
                continue
            problems = judge.check(req, response)
            if problems:
                stats.mismatched += 1
                stats.problems.append(f"client {index} request {i}: {problems[:3]}")
    except Exception as exc:  # noqa: BLE001 - reported
        stats.error = repr(exc)
        barrier.abort()  # the driver stops waiting for this client at once
    finally:
        if rc is not None:
            rc.close()


def analyse_commands(judge: Judge, commands, sends, target_positions, t_start: float, t_end: float,
                     max_lag_s: float, timing: Optional[list] = None, lags_out: Optional[list] = None) -> tuple:
    """(summary dict, problems) of the joint commands the streamed targets produced.

    The timing limits missed (a second of the client phase without a command, the lag p99 over
    ``max_lag_s``) are problems too, or go to ``timing`` when it is given. ``lags_out``: a list
    that receives every matched command's lag (s)."""
    problems = []
    timing = problems if timing is None else timing
    send_times = {}
    for k, t in sends or []:
        send_times.setdefault(k, []).append(t)
    lags, unmatched, bad = [], 0, 0
    for t, msg in commands:
        q = np.asarray(msg.position, dtype=np.float64)
        if list(msg.name) != judge.joint_names or q.shape != (len(judge.joint_names),) \
                or not np.all(np.isfinite(q)) or np.any(q < judge.lower) or np.any(q > judge.upper):
            bad += 1
            if bad <= 5:
                problems.append(f"command outside the limits / non-finite / wrong names: {q.tolist()}")
            continue
        reached = judge.fk(q)[:, :3, 3]
        dist = np.max(np.linalg.norm(target_positions - reached[None], axis=-1), axis=-1)
        k = int(np.argmin(dist))
        if dist[k] > 2 * judge.position_tol:
            unmatched += 1
            if unmatched <= 5:
                problems.append(f"command at {t:.3f} matches no streamed target ({dist[k]:.4f} m off)")
            continue
        before = [s for s in send_times.get(k, []) if s <= t]
        if before:
            lags.append(t - before[-1])
    times = np.array([t for t, _ in commands])
    phase = times[(times >= t_start) & (times < t_end)]
    bins = np.zeros(max(1, int(math.floor(t_end - t_start))), dtype=int)
    for t in phase:
        i = int(t - t_start)
        if i < len(bins):
            bins[i] += 1
    if len(bins) and bins.min() == 0:
        timing.append(f"{int(np.sum(bins == 0))} second(s) of the client phase without a command "
                      "from ~/target")
    if lags_out is not None:
        lags_out.extend(lags)
    lag_p99 = percentile(lags, 99)
    if lags and lag_p99 > max_lag_s:
        timing.append(f"command lag p99 {lag_p99:.3f} s > {max_lag_s} s")
    third = max(1, len(lags) // 3)
    summary = dict(
        received=len(commands), matched=len(lags), unmatched=unmatched, outside_limits_or_non_finite=bad,
        client_phase_rate_hz=round(len(phase) / (t_end - t_start), 1) if t_end > t_start else None,
        per_second_min=int(bins.min()) if len(bins) else None,
        per_second_median=float(np.median(bins)) if len(bins) else None,
        lag_ms=dict(p50=round(1e3 * percentile(lags, 50), 1), p99=round(1e3 * lag_p99, 1),
                    max=round(1e3 * max(lags, default=math.nan), 1),
                    first_third_p50=round(1e3 * percentile(lags[:third], 50), 1),
                    last_third_p50=round(1e3 * percentile(lags[-third:], 50), 1)))
    return summary, problems


def run(clients: int = 8, requests: int = 500, joint_state_hz: float = 500.0, target_hz: float = 100.0,
        seed: int = 0, max_seconds: float = 300.0, rss_limit_mib: float = 50.0, max_lag_s: float = 1.0,
        client_qos_depth: int = 100, smoke: bool = False) -> dict:
    """One load run; ``smoke``: the timing limits missed are notes, not violations, and a
    response is lost only after HANG_S (see the module's docstring)."""
    from sensor_msgs.msg import JointState
    from direction_up_ik.srv import SolveDirectionUpIK

    t_begin = time.monotonic()
    deadline = t_begin + max_seconds  # reset after the start-up (first solves may compile)
    judge = Judge()
    violations = []
    timing_notes = [] if smoke else None
    slow = violations if timing_notes is None else timing_notes  # where a timing limit missed goes
    request_timeout = HANG_S if smoke else REQUEST_TIMEOUT_S
    report = dict(clients=clients, requests_per_client=requests, joint_state_hz=joint_state_hz,
                  target_hz=target_hz, seed=seed, client_qos_depth=client_qos_depth, judge_fk=judge.fk_name)
    if smoke:
        report["smoke"] = True
    namespace = unique_namespace("load")
    node = NodeProcess(namespace, params=NODE_PARAMS)
    mp = multiprocessing.get_context("spawn")
    stop, out = mp.Event(), mp.Queue()
    procs = []
    main = probe = None
    try:
        node.wait_ready()
        if not smoke:  # latency figures of the compiled kernels, not of the numpy backend that answers first
            node.wait_kernels()
        main = RosClient(f"load_main_{namespace[1:]}")
        commands = []
        main.node.create_subscription(JointState, f"{node.fqn}/joint_command",
                                      lambda m: commands.append((time.monotonic(), m)), 100)
        probe = RosClient(f"load_probe_{namespace[1:]}", context=main.context)
        solve = probe.node.create_client(SolveDirectionUpIK, f"{node.fqn}/solve")
        state_pub = probe.node.create_publisher(JointState, f"{namespace}/joint_states", 10)
        wait_for_joint_state(probe, solve, state_pub, judge.joint_names, judge.state)
        rng = np.random.default_rng(seed)
        for _ in range(20):  # warm-up (first solves may compile)
            probe.call(solve, two_hand_request(judge, rng), timeout=HANG_S)
        main.spin_in_background()
        deadline = time.monotonic() + max_seconds

        _, target_positions = target_set(seed, TARGET_COUNT)
        stream_seconds = max_seconds
        streamers = {"joint_states": mp.Process(target=_streamer, daemon=True,
                                                args=("joint_states", f"{namespace}/joint_states", joint_state_hz,
                                                      stop, out, stream_seconds,
                                                      (judge.joint_names, judge.state.tolist()))),
                     "targets": mp.Process(target=_streamer, daemon=True,
                                           args=("targets", f"{node.fqn}/target", target_hz, stop, out,
                                                 stream_seconds, (seed, TARGET_COUNT)))}
        procs = list(streamers.values())
        for p in procs:
            p.start()
        gather(out, streamers, "ready")  # each publishing to a matched subscriber (or crashed: raises)
        time.sleep(2.0)  # streams alone first
        rss_start = node.rss_kib()
        rss_samples = []
        monitor_stop = threading.Event()

        def monitor():
            while not monitor_stop.wait(0.5):
                rss_samples.append((round(time.monotonic() - t_begin, 1), node.rss_kib()))

        monitor_thread = threading.Thread(target=monitor, daemon=True)
        monitor_thread.start()

        barrier = threading.Barrier(clients + 1)
        stats = [ClientStats() for _ in range(clients)]
        threads = [threading.Thread(target=client_worker, daemon=True,
                                    args=(c, main.context, node.fqn, requests, seed, barrier, deadline, stats[c],
                                          client_qos_depth, request_timeout))
                   for c in range(clients)]
        for t in threads:
            t.start()
        try:
            barrier.wait(timeout=HANG_S)  # every client has had a response: they start together
        except threading.BrokenBarrierError:
            raise RuntimeError(f"a client failed before the start: {[s.error for s in stats if s.error]}") from None
        t_start = time.monotonic()
        for t in threads:
            t.join(timeout=max(1.0, deadline - time.monotonic() + request_timeout + 10))
        t_end = time.monotonic()
        if any(t.is_alive() for t in threads):
            violations.append("a client thread did not finish")
        time.sleep(1.0)  # streams alone again
        stop.set()
        results = gather(out, streamers, "done")
        monitor_stop.set()
        monitor_thread.join(timeout=5.0)
        rss_end = node.rss_kib()
        alive = node.alive()
        if not alive:
            violations.append(f"the node exited (code {node.proc.returncode})")

        latencies = [v for s in stats for v in s.latencies]
        total = sum(s.done for s in stats)
        for s in stats:
            if s.error:
                violations.append(f"client error: {s.error}")
            violations.extend(s.problems[:10])
        lost, mismatched, rejected = (sum(s.lost for s in stats), sum(s.mismatched for s in stats),
                                      sum(s.rejected for s in stats))
        expected = clients * requests
        if total != expected:
            violations.append(f"{total} of {expected} requests were sent")
        summary, problems = analyse_commands(judge, list(commands), results["targets"]["sends"],
                                             target_positions, t_start, t_end, max_lag_s, timing=slow)
        violations.extend(problems)
        for kind, hz in (("joint_states", joint_state_hz), ("targets", target_hz)):
            if results[kind]["rate_hz"] < 0.9 * hz:
                slow.append(f"{kind} streamed at {results[kind]['rate_hz']:.0f} Hz only (asked {hz})")
        growth = (rss_end - rss_start) / 1024.0 if rss_end and rss_start else math.nan
        if not growth < rss_limit_mib:
            violations.append(f"RSS grew by {growth:.1f} MiB (limit {rss_limit_mib})")
        if alive:  # a known request still answered correctly
            req = two_hand_request(judge, rng)
            response = probe.call(solve, req, timeout=request_timeout)
            if response is None or response.error_code != SolveDirectionUpIK.Response.SUCCESS:
                violations.append(f"final valid request: {None if response is None else response.message}")
            else:
                violations.extend(f"final valid request: {p}" for p in judge.check(req, response))
        codes, by_code = {}, {}
        for s in stats:
            for c, n in s.codes.items():
                codes[judge.codes.get(c, str(c))] = codes.get(judge.codes.get(c, str(c)), 0) + n
            for c, values in s.latencies_by_code.items():
                by_code.setdefault(judge.codes.get(c, str(c)), []).extend(values)
        phase_s = t_end - t_start
        report.update(
            requests_sent=total, answered=len(latencies), lost=lost, mismatched=mismatched, rejected=rejected,
            codes=codes, client_phase_s=round(phase_s, 2),
            throughput_per_s=round(len(latencies) / phase_s, 1) if phase_s > 0 else None,
            latency_ms=dict(p50=round(1e3 * percentile(latencies, 50), 2),
                            p99=round(1e3 * percentile(latencies, 99), 2),
                            max=round(1e3 * max(latencies, default=math.nan), 1)),
            latency_ms_by_code={code: dict(count=len(v), p50=round(1e3 * percentile(v, 50), 2),
                                           p99=round(1e3 * percentile(v, 99), 2), max=round(1e3 * max(v), 1))
                                for code, v in sorted(by_code.items())},
            joint_states={k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in results["joint_states"].items() if k != "sends"},
            targets={k: (round(v, 3) if isinstance(v, float) else v)
                     for k, v in results["targets"].items() if k != "sends"},
            commands=summary,
            rss_kib=dict(start=rss_start, end=rss_end, growth_mib=round(growth, 2),
                         max_during=max((r for _, r in rss_samples if r), default=None),
                         peak=node.peak_rss_kib(), samples=rss_samples[::4]),
            node_alive=alive, node_error_lines=node.error_lines, node_tracebacks=node.tracebacks)
        if node.tracebacks:
            violations.append(f"the node printed {node.tracebacks} traceback(s): {node.first_errors[:3]}")
    except Exception as exc:  # noqa: BLE001 - reported as a violation with the node's output
        violations.append(f"driver error: {exc!r}")
        report["node_output_tail"] = node.output[-3000:]
    finally:
        stop.set()
        for p in procs:
            stop_worker(p)
        for c in (probe, main):
            if c is not None:
                c.close()
        close_report(report, node, t_begin, violations, timing_notes)
    return report


def print_report(r: dict) -> None:
    print(f"\nload_node: {r['clients']} clients x {r['requests_per_client']} requests (service QoS depth "
          f"{r['client_qos_depth']}), joint_states {r['joint_state_hz']} Hz, ~/target {r['target_hz']} Hz "
          f"(judge FK: {r['judge_fk']})")
    if "latency_ms" in r:
        lat, c, rss = r["latency_ms"], r["commands"], r["rss_kib"]
        print(f"requests: {r['requests_sent']} sent, {r['answered']} answered, lost {r['lost']}, mismatched "
              f"{r['mismatched']}, rejected {r['rejected']}; codes {r['codes']}")
        print(f"latency: p50 {lat['p50']} ms, p99 {lat['p99']} ms, max {lat['max']} ms; throughput "
              f"{r['throughput_per_s']} requests/s over {r['client_phase_s']} s")
        print("latency by answer: " + "; ".join(f"{code} ({v['count']}) p50 {v['p50']} / p99 {v['p99']} / max "
                                                f"{v['max']} ms" for code, v in r["latency_ms_by_code"].items()))
        js, tg = r["joint_states"], r["targets"]
        print(f"joint_states: {js['count']} published at {js['rate_hz']:.1f} Hz (largest gap "
              f"{1e3 * js['max_gap_s']:.1f} ms); ~/target: {tg['count']} published at {tg['rate_hz']:.1f} Hz")
        print(f"commands from ~/target: {c['received']} received ({c['matched']} matched to their target, "
              f"{c['unmatched']} unmatched, {c['outside_limits_or_non_finite']} bad); during the client "
              f"phase {c['client_phase_rate_hz']} Hz, per second min {c['per_second_min']} / median "
              f"{c['per_second_median']}")
        print(f"target -> command lag: p50 {c['lag_ms']['p50']} ms, p99 {c['lag_ms']['p99']} ms, max "
              f"{c['lag_ms']['max']} ms (p50 first third {c['lag_ms']['first_third_p50']} ms, last third "
              f"{c['lag_ms']['last_third_p50']} ms)")
        print(f"node RSS: {rss['start']} KiB before the clients, {rss['end']} KiB at the end, growth "
              f"{rss['growth_mib']} MiB, max during {rss['max_during']} KiB, peak (VmHWM) {rss['peak']} KiB")
    print_outcome(r)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=500, help="per client")
    parser.add_argument("--joint-state-hz", type=float, default=500.0)
    parser.add_argument("--target-hz", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="abort (violation) after this")
    parser.add_argument("--rss-limit-mib", type=float, default=50.0)
    parser.add_argument("--max-lag-s", type=float, default=1.0, help="limit on the target -> command lag p99")
    parser.add_argument("--client-qos-depth", type=int, default=100,
                        help="history depth of the clients' service QoS (ROS default 10; see client_qos)")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--smoke", action="store_true",
                        help="CI check: only lost / rejected / wrong answers, bad commands, crashes and leaks "
                             "are violations; timing limits missed are reported as notes")
    args = parser.parse_args(argv)
    report = run(args.clients, args.requests, args.joint_state_hz, args.target_hz, args.seed, args.max_seconds,
                 args.rss_limit_mib, args.max_lag_s, args.client_qos_depth, smoke=args.smoke)
    return finish(report, args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
