#!/usr/bin/env python3
"""Burst ``direction_up_ik_node``'s ``~/solve``: many requests sent at once (issue 23, item 1).

    .venv/bin/python scripts/burst_node.py [--processes 4] [--requests 200] [--queue-depth N]
                                           [--client-qos-depth 1000] [--json out.json]

Starts the node (``config/dual_arm_torso.yaml``; ``service_queue_depth`` = ``--queue-depth``
when given, else the node's default) as a subprocess in a namespace of its own. Then
``--processes`` client processes, each with its own rclpy context and one ``~/solve`` client
(history depth ``--client-qos-depth``), send their share of ``--requests`` at once: every
``call_async`` before any response is awaited, all processes released together. Each request
has a reachable two-hand target of its own and names its initial state; each response is
checked against ITS request by an independent FK (:class:`driver_judge.Judge`).

Lost requests are told without a clock: after its burst each process sends one more request
(the closer). The node takes a client's requests in the order they arrive and answers them in
that order, and one client receives the responses in that order, so once the closer's answer
is in, every earlier request of that process without an answer is lost (pushed out of the
node's or the client's queue). A closer can be pushed out too; an unanswered one is sent again
(:func:`close_burst`); none answered for ``HANG_S`` is a hang.

Report: requests answered, lost and wrongly answered, per process and in all. Exit code 1
when a request is lost or wrongly answered, a process fails, or the node dies.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_common import (HANG_S, NodeProcess, RosClient, close_report, finish, gather,  # noqa: E402
                           near, stop_worker, tcp_target, unique_namespace, wait_for_response_path)
from driver_judge import Judge  # noqa: E402

#: The clients' history depth: at least the requests one process has in flight, since rmw_fastrtps
#: delivers every response of a service to each of its clients (each keeps its own).
CLIENT_QOS_DEPTH = 1000


def burst_requests(judge: Judge, seed: int, count: int) -> list:
    """``count`` requests, each one candidate with both hands at the TCP poses of a random state
    near the judge's state (reachable), and that state's neighbourhood start as initial state."""
    from direction_up_ik.msg import DirectionUpCandidate
    from direction_up_ik.srv import SolveDirectionUpIK
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        tcp = judge.model.tcp_transforms(near(judge.model, judge.state, rng, 0.3))
        req = SolveDirectionUpIK.Request()
        req.candidates = [DirectionUpCandidate(targets=[tcp_target(n, tcp[e])
                                                        for e, n in enumerate(judge.ee_names)])]
        req.initial_state.name = list(judge.joint_names)
        req.initial_state.position = [float(v) for v in judge.state]
        out.append(req)
    return out


def close_burst(rc: RosClient, client) -> bool:
    """Send closers (empty requests: answered at once) until one is answered; True then, False
    after HANG_S. A closer can itself be pushed out of a queue that is too small (the node's
    queue is shared by all clients), so an unanswered one is sent again, with growing patience:
    a retry, not a judgement of speed."""
    from direction_up_ik.srv import SolveDirectionUpIK
    deadline = time.monotonic() + HANG_S
    patience = 5.0
    while time.monotonic() < deadline:
        closer = client.call_async(SolveDirectionUpIK.Request())
        wait_until = min(deadline, time.monotonic() + patience)
        while not closer.done() and time.monotonic() < wait_until:
            rc.executor.spin_once(timeout_sec=0.05)
        if closer.done():
            return True
        patience = min(2.0 * patience, 60.0)
    return False


def client_process(index: int, fqn: str, count: int, seed: int, qos_depth: int, go, out) -> None:
    """One client process: handshake, report "ready", wait for ``go``, send ``count`` requests at
    once and the closer, then report "done" with what came back."""
    import copy
    from rclpy.qos import qos_profile_services_default
    from direction_up_ik.srv import SolveDirectionUpIK
    kind = f"client{index}"
    rc = None
    try:
        judge = Judge()
        requests = burst_requests(judge, seed + index, count)
        rc = RosClient(f"burst_client_{index}")
        qos = copy.copy(qos_profile_services_default)
        qos.depth = qos_depth
        client = rc.node.create_client(SolveDirectionUpIK, f"{fqn}/solve", qos_profile=qos)
        wait_for_response_path(rc, client)  # our responses reach us: none is lost to matching
        out.put(("ready", kind, None))
        if not go.wait(timeout=HANG_S):
            raise RuntimeError("never released")
        futures = [client.call_async(req) for req in requests]
        closed = close_burst(rc, client)
        answered = [f.done() for f in futures]
        wrong, codes = [], {}
        for i, (req, future) in enumerate(zip(requests, futures)):
            if not future.done():
                continue
            response = future.result()
            codes[response.error_code] = codes.get(response.error_code, 0) + 1
            if response.error_code not in judge.outcomes:
                wrong.append(f"request {i}: code {response.error_code}: {response.message[:200]}")
                continue
            problems = judge.check(req, response)
            if problems:
                wrong.append(f"request {i}: {problems[:2]}")
        out.put(("done", kind, dict(sent=count, answered=int(sum(answered)), lost=count - int(sum(answered)),
                                    closer_answered=closed, wrong=len(wrong), first_wrong=wrong[:10],
                                    lost_indices=[i for i, a in enumerate(answered) if not a][:20],
                                    codes={str(k): v for k, v in sorted(codes.items())})))
    except Exception:  # noqa: BLE001 - reported to the driver
        out.put(("error", kind, traceback.format_exc()[-2000:]))
    finally:
        if rc is not None:
            rc.close()


def run(processes: int = 4, requests: int = 200, queue_depth: Optional[int] = None,
        client_qos_depth: int = CLIENT_QOS_DEPTH, seed: int = 0) -> dict:
    """One burst; the report (see the module's docstring)."""
    t_begin = time.monotonic()
    shares = [requests // processes + (1 if p < requests % processes else 0) for p in range(processes)]
    report = dict(processes=processes, requests=requests, per_process=shares, queue_depth=queue_depth,
                  client_qos_depth=client_qos_depth)
    violations = []
    namespace = unique_namespace("burst")
    params = {} if queue_depth is None else {"service_queue_depth": queue_depth}
    node = NodeProcess(namespace, params=params)
    mp = multiprocessing.get_context("spawn")
    go, out = mp.Event(), mp.Queue()
    procs = {}
    try:
        node.wait_ready()
        procs = {f"client{p}": mp.Process(target=client_process, daemon=True,
                                          args=(p, node.fqn, shares[p], seed + 1000 * p, client_qos_depth, go, out))
                 for p in range(processes)}
        for proc in procs.values():
            proc.start()
        gather(out, procs, "ready")
        go.set()
        results = gather(out, procs, "done")
        report["clients"] = results
        report["answered"] = sum(r["answered"] for r in results.values())
        report["lost"] = sum(r["lost"] for r in results.values())
        report["wrong"] = sum(r["wrong"] for r in results.values())
        for name, r in sorted(results.items()):
            if not r["closer_answered"]:
                violations.append(f"{name}: the closing request got no answer within {HANG_S} s (hang)")
            if r["lost"]:
                violations.append(f"{name}: {r['lost']} of {r['sent']} requests never answered "
                                  f"(first: {r['lost_indices'][:5]})")
            violations.extend(f"{name}: {w}" for w in r["first_wrong"])
        report["node_alive"] = node.alive()
        if not report["node_alive"]:
            violations.append(f"the node exited (code {node.proc.returncode})")
    except Exception as exc:  # noqa: BLE001 - a run that cannot finish is a violation, reported
        violations.append(f"run failed: {exc!r}")
    finally:
        go.set()
        for proc in procs.values():
            stop_worker(proc)
    return close_report(report, node, t_begin, violations)


def print_report(r: dict) -> None:
    print(f"burst of {r['requests']} requests from {r['processes']} process(es) {r['per_process']}, "
          f"service_queue_depth {r['queue_depth'] or 'default'}, client depth {r['client_qos_depth']}")
    for name, c in sorted(r.get("clients", {}).items()):
        print(f"  {name}: answered {c['answered']}/{c['sent']}, lost {c['lost']}, wrong {c['wrong']}, "
              f"codes {c['codes']}")
    if "answered" in r:
        print(f"answered {r['answered']}/{r['requests']}, lost {r['lost']}, wrong {r['wrong']}")
    print(f"node exit code {r.get('node_exit_code')}; runtime {r['runtime_s']} s; violations: {r['violations']}")
    for v in r["first_violations"][:20]:
        print("  -", v)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--requests", type=int, default=200, help="requests in all (default 200)")
    parser.add_argument("--queue-depth", type=int, default=None,
                        help="the node's service_queue_depth (default: the node's default)")
    parser.add_argument("--client-qos-depth", type=int, default=CLIENT_QOS_DEPTH,
                        help=f"history depth of each client (default {CLIENT_QOS_DEPTH})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.requests < args.processes:
        parser.error("need --processes >= 1 and --requests >= --processes")
    report = run(args.processes, args.requests, args.queue_depth, args.client_qos_depth, args.seed)
    return finish(report, args.json, print_report)


if __name__ == "__main__":
    sys.exit(main())
