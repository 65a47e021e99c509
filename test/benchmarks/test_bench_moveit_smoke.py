"""Smoke run of benchmarks/bench_moveit.py (the MoveIt bridge's figures, issue 29): it runs, writes
its JSON, and its properties hold on a small sample: no reachable pose rejected by the reach bound,
every answer at MoveIt's precision within MoveIt's tolerances, the three request forms alike."""

import json

import pytest

pytest.importorskip("geometry_msgs.msg", reason="needs the ROS wheels")

import bench_moveit  # noqa: E402


def test_bench_moveit_smoke(tmp_path):
    out = tmp_path / "moveit.json"
    assert bench_moveit.main(["--poses", "4", "--far", "6", "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert {r["group"] for r in results} >= {"panda_like/panda_arm", "ur5_like/manipulator"}
    for r in results:
        for form in ("single", "vector", "stale"):
            cell = r[f"moveit_precision/{form}"]
            assert cell["rejected_by_reach_bound"] == 0
            assert cell["within_moveit_tolerances"] == cell["solved"]
        ball = r["random_ball"]
        assert ball["solved"] + ball["unsolved"] == ball["targets"] == 6
        assert ball["answered_by_bound"] <= ball["unsolved"]
