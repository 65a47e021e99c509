"""Smoke run of benchmarks/bench_collision.py (a benchmark, not a test): a tiny run reports both
robots, and the collision-aware answers are collision-free."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_bench_collision_smoke(tmp_path):
    out = tmp_path / "collision.json"
    proc = subprocess.run([sys.executable, "benchmarks/bench_collision.py", "--targets", "6", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert set(rows) == {"dual_arm_torso", "panda_like"}
    for row in rows.values():
        assert row["targets"] == 6 and row["aware_success_free"] > 0.0
        assert row["check_1000_ms"] > 0.0 and row["median_ratio"] > 0.0
