"""Smoke run of benchmarks/bench_batch.py (a benchmark, not a test): a tiny run reports a one-arm
and the two-arm robot from both starts with the figures of the batch goal, and the batched
search solves its targets under the Pinocchio judge; the request built as a TargetBatch gets
the same answers and is timed too; the round-0 bound adds up."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_bench_batch_smoke(tmp_path):
    out = tmp_path / "batch.json"
    proc = subprocess.run([sys.executable, "benchmarks/bench_batch.py", "--targets", "8", "--calls", "2",
                           "--robots", "ur5_like", "dual_arm_torso", "--target-batch", "--round0-bound", "--json",
                           str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = report["rows"]
    assert [(r["robot"], r["start"]) for r in rows] == [
        (robot, start) for robot in ("ur5_like", "dual_arm_torso") for start in ("mid_range", "random")]
    for row in rows:
        assert row["targets"] == 8 and row["wall_us"] > 0 and row["cpu_us"] > 0, row
        assert row["success_rate"] >= 0.75, row  # 5 rounds of 4 seeds solve nearly every random target
        assert row["goal_wall_us"] == (30.0 if row["robot"] == "dual_arm_torso" else 10.0)
        assert row["batch_wall_us"] > 0, row
        bound = row["round0_bound"]
        assert (bound["robot"], bound["start"]) == (row["robot"], row["start"])
        assert 0 <= bound["round0_solves"] <= 8 and bound["search_us"] > 0 and bound["round0_us"] > 0, bound
        assert abs(bound["bound_us"] - (bound["search_us"] - bound["round0_failing_us"])) < 0.02, bound
    assert [b["robot"] for b in report["request_building"]] == ["ur5_like", "dual_arm_torso"]
    for built in report["request_building"]:
        assert built["same_answers"] is True and built["objects_us"] > 0 and built["batch_us"] > 0, built
    assert "median of 2 calls" in proc.stdout
