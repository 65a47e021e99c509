"""Smoke run of benchmarks/bench_cold_start.py (a benchmark, not a test): one node start of one
robot on an empty kernel cache, with and without Python bytecode to read, its ready line and
first answer found and in order; the figures are the benchmark's (docs/performance.md), not
judged here."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("numba", reason="a cold kernel cache needs the compiled backend (requirements/core.txt)")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_bench_cold_start_smoke(tmp_path):
    out = tmp_path / "cold_start.json"
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.run([sys.executable, "benchmarks/bench_cold_start.py", "--configs", "ur5_like", "--runs", "1",
                           "--without-bytecode", "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cells = json.loads(out.read_text(encoding="utf-8"))["ur5_like"]
    for label in ("this checkout", "without bytecode"):
        runs = cells[label]
        assert len(runs) == 1
        run = runs[0]
        assert 0.0 < run["ready_s"] <= run["answer_s"], run
        assert run["error_code"] == 0 and run["backend"] == "numpy", run  # answered before any compile ends
        assert f"ur5_like ({label}): ready" in proc.stdout
    assert "ur5_like: ready, this checkout / without bytecode, paired" in proc.stdout
