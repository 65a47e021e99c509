#!/usr/bin/env python3
"""Garbage-collection pauses of a solver node's process, before and after ``settle_heap``.

    .venv/bin/python benchmarks/bench_gc.py [--requests 2000] [--collections 5]

A ``DirectionUpIKNode`` in this process (``bench_ros.InProcessNode``: the dual arm of
``make bench-ros``, its spec single start) answers ``--requests`` of ``bench_ros``' requests
through ``node.solve``; every collection CPython runs meanwhile is timed (``gc.callbacks``).
Then a full collection (``gc.collect()``, what a long stream brings on from time to time) is
timed ``--collections`` times. Both again after :func:`direction_up_ik.ros.process.settle_heap`,
which ``direction_up_ik_node``'s process runs after its start-up. Prints the objects the
collector tracks, the full collection's median and the collections during the requests per
generation (count, median, max).
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Dict, List

import numpy as np

import bench_ros
from direction_up_ik.core import warm_up_backend
from direction_up_ik.ros.process import settle_heap


class Pauses:
    """Durations (s) of the collections CPython runs while recording, per generation."""

    def __init__(self) -> None:
        self.by_generation: Dict[int, List[float]] = {0: [], 1: [], 2: []}
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.by_generation[info["generation"]].append(time.perf_counter() - self._start)

    def __enter__(self) -> "Pauses":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


def measure(node, requests, collections: int) -> dict:
    """The node answers ``requests`` (their collections recorded), then ``collections`` full ones."""
    from direction_up_ik.srv import SolveDirectionUpIK
    response = SolveDirectionUpIK.Response
    with Pauses() as pauses:
        for request in requests:
            node.solve(request, response())
    full = []
    for _ in range(collections):
        t0 = time.perf_counter()
        gc.collect()
        full.append(time.perf_counter() - t0)
    return dict(tracked=len(gc.get_objects()), frozen=gc.get_freeze_count(),
                full_ms=1e3 * float(np.median(full)), during=pauses.by_generation)


def report(label: str, row: dict, requests: int) -> None:
    print(f"{label}: {row['tracked']} objects tracked, {row['frozen']} frozen; full collection "
          f"median {row['full_ms']:.2f} ms")
    for generation, pauses in row["during"].items():
        if pauses:
            print(f"  during {requests} requests, generation {generation}: {len(pauses)} collections, "
                  f"median {1e3 * np.median(pauses):.3f} ms, max {1e3 * max(pauses):.3f} ms")
        else:
            print(f"  during {requests} requests, generation {generation}: none")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--collections", type=int, default=5)
    args = parser.parse_args(argv)
    warm_up_backend()
    judge = bench_ros.Judge()
    inproc = bench_ros.InProcessNode(judge.state)
    try:
        node = inproc.node
        names = [e.name for e in node._config.end_effectors]
        requests = bench_ros.make_requests(node._robot, names, judge.state, args.requests, 0, 0.3)
        measure(node, requests[:200], 1)  # warm-up: every path's lazy imports and caches
        report("as started", measure(node, requests, args.collections), args.requests)
        settle_heap()
        report("after settle_heap", measure(node, requests, args.collections), args.requests)
    finally:
        gc.unfreeze()
        inproc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
