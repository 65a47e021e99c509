#!/usr/bin/env python3
"""Where the compiled kernels' first compile spends its time, function by function.

    .venv/bin/python benchmarks/compile_profile.py [--top 25] [--json out.json]

Compiles every kernel afresh (``compiled.warm_up`` in an empty temporary cache folder) with
numba's event recorder on and prints:

* the wall time of the whole compile;
* per compiled function (a kernel entry point, or a helper numba compiles as a function of
  its own): how often it was compiled, its inclusive time and its own time (inclusive minus
  the functions compiled inside it), largest own time first;
* per compiler pass: the time summed over every function;
* the time spent holding numba's LLVM lock (optimising and emitting machine code).

Numbers are wall clock on a shared machine: compare them within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict

CACHE = tempfile.mkdtemp(prefix="direction_up_ik_compile_")
os.environ["NUMBA_CACHE_DIR"] = CACHE  # a fresh compile, not a load from the cache

from numba.core import event  # noqa: E402


class _Spans(event.Listener):
    """Start/end times of the events of one kind, nested, with a label per event."""

    def __init__(self, label):
        self.label, self.stack, self.spans = label, [], []

    def on_start(self, ev):
        self.stack.append((time.perf_counter(), self.label(ev.data)))

    def on_end(self, ev):
        start, name = self.stack.pop()
        self.spans.append((name, start, time.perf_counter(), len(self.stack)))


def _dispatcher_name(data):
    dispatcher = data["dispatcher"]
    func = getattr(dispatcher, "py_func", None)
    return f"{func.__module__.rsplit('.', 1)[-1]}.{func.__qualname__}" if func else repr(dispatcher)


def _own_times(spans):
    """{name: [count, inclusive s, own s]} from nested spans: own = a span less its direct
    children; inclusive counts only a name's outermost spans (no double counting)."""
    totals = defaultdict(lambda: [0, 0.0, 0.0])
    stack = []  # the open spans: [name, end, duration, children's duration]

    def close(span):
        name, _, duration, children = span
        totals[name][2] += duration - children

    for name, start, end, _ in sorted(spans, key=lambda s: (s[1], -s[2])):
        while stack and stack[-1][1] <= start:
            close(stack.pop())
        duration = end - start
        if stack:
            stack[-1][3] += duration
        totals[name][0] += 1
        if all(span[0] != name for span in stack):
            totals[name][1] += duration
        stack.append([name, end, duration, 0.0])
    while stack:
        close(stack.pop())
    return totals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="rows of the per-function table")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)

    compiles = _Spans(_dispatcher_name)
    passes = _Spans(lambda data: data["name"])
    llvm = _Spans(lambda data: "llvm")
    t0 = time.perf_counter()
    with event.install_listener("numba:compile", compiles), event.install_listener("numba:run_pass", passes), \
            event.install_listener("numba:llvm_lock", llvm):
        from direction_up_ik.core import compiled
        compiled.warm_up()
    total = time.perf_counter() - t0

    functions = _own_times(compiles.spans)
    by_pass = defaultdict(float)
    for name, start, end, _ in passes.spans:
        by_pass[name] += end - start
    llvm_s = sum(end - start for _, start, end, depth in llvm.spans if depth == 0)

    print(f"whole compile (compiled.warm_up, empty cache): {total:.1f} s; LLVM lock held {llvm_s:.1f} s")
    print(f"\n{'function':<44}{'compiles':>9}{'inclusive s':>13}{'own s':>9}")
    rows = sorted(functions.items(), key=lambda kv: -kv[1][2])
    for name, (count, inclusive, own) in rows[:args.top]:
        print(f"{name:<44}{count:>9}{inclusive:>13.2f}{own:>9.2f}")
    print(f"\n{'compiler pass':<44}{'s':>9}")
    for name, seconds in sorted(by_pass.items(), key=lambda kv: -kv[1])[:12]:
        print(f"{name:<44}{seconds:>9.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"total_s": total, "llvm_lock_s": llvm_s,
                       "functions": {k: {"compiles": v[0], "inclusive_s": v[1], "own_s": v[2]}
                                     for k, v in functions.items()},
                       "passes_s": dict(by_pass)}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
