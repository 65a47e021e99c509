"""Smoke run of the peer benchmark (benchmarks/bench_peers.py --smoke).

The benchmark itself is not a test; this checks that its CI-sized mode runs,
writes its JSON and plot, and that its independent judge (Pinocchio FK) never
rejects a success the project's own solver reports.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROJECT_MODES = {"spec_single_seed", "multi_seed_search", "batched_spec", "batched_search"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_peers")
    json_path, png_path = out / "smoke.json", out / "smoke.png"
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_peers.py", "--smoke", "--json", str(json_path),
         "--plot", str(png_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(json_path.read_text(encoding="utf-8")), png_path


def test_smoke_runs_the_project_modes_only(smoke):
    proc, doc, png = smoke
    assert doc["smoke"] is True
    assert doc["settings"]["targets"] == 20 and doc["settings"]["robots"] == ["panda_like"]
    assert [(r["robot"], r["start"]) for r in doc["runs"]] == [("panda_like", "mid_range"),
                                                               ("panda_like", "random")]
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "numpy" in doc["environment"] and "cpu" in doc["environment"]
    for run in doc["runs"]:
        assert run["targets"] == 20
        rows = {row["key"]: row for row in run["solvers"]}
        assert set(rows) == PROJECT_MODES  # smoke: no peers
        for row in rows.values():
            assert row["status"] == "ok"
            assert 0.0 <= row["success_rate"] <= 1.0
            assert 0.0 <= row["own_success_rate"] <= 1.0
            assert row["median_ms"] > 0 and row["p95_ms"] >= row["median_ms"]
            assert row["limit_violations"] == 0  # the project keeps joints in their limits
        assert f"start = {run['start']}" in proc.stdout


def test_judge_never_rejects_a_reported_success(smoke):
    _, doc, _ = smoke
    for run in doc["runs"]:
        rows = {row["key"]: row for row in run["solvers"]}
        spec = rows["spec_single_seed"]
        assert spec["own_ok_judge_rejects"] == 0, run["start"]
        assert spec["successes"] >= round(spec["own_success_rate"] * run["targets"])
        # The batched spec call solves the same problems as the one-by-one loop.
        assert rows["batched_spec"]["success_rate"] == spec["success_rate"]
        for key in PROJECT_MODES:
            assert rows[key]["own_ok_judge_rejects"] == 0, (run["start"], key)


def test_judge_rejects_misses_and_limit_violations():
    from bench_peers import Judge, Problem

    problem = Problem("ur5_like", 6, seed=5)
    judge = Judge(problem)
    q = problem.q_targets.copy()
    assert judge.evaluate(q)["success"].all()
    # The continuous wrist is free: a full turn lands on the same pose and stays valid.
    q_turn = q.copy()
    q_turn[:, 5] += 2 * np.pi * 3
    assert judge.evaluate(q_turn)["success"].all()
    bad = q.copy()
    bad[0, 0] += 0.01                    # ~ centimetres off at the TCP
    bad[1, 4] += 0.02                    # wrist: orientation off by ~0.02 rad
    bad[2, 0] += np.copysign(2 * np.pi, bad[2, 0])  # same pose, beyond the +-2 pi URDF limit
    verdict = judge.evaluate(bad)
    assert not verdict["success"][:3].any() and verdict["success"][3:].all()
    assert verdict["position_error"][0] > 1e-3
    assert max(verdict["z_error"][1], verdict["y_error"][1]) > 1e-2
    assert not verdict["in_limits"][2] and verdict["position_error"][2] < 1e-9


def test_smoke_reports_the_goals_it_can_judge(smoke):
    proc, doc, _ = smoke
    for run in doc["runs"]:
        goals = {g["goal"]: g for g in run["goals"]}
        search = {row["key"]: row for row in run["solvers"]}["multi_seed_search"]
        assert goals["search success"]["met"] == (search["success_rate"] >= 0.995)
        assert goals["search p95"]["met"] == (search["p95_ms"] <= 5.0)
        assert goals["search success vs best peer"]["met"] is None  # smoke: no peer ran
        assert not any("ik_LM" in name for name in goals)          # ratios need ik_LM
    assert "goals, panda_like / mid_range:" in proc.stdout


def test_goal_ratios_are_project_over_ik_lm():
    from bench_peers import PEER, PROJECT, goals

    def row(key, kind, success, median, p95=None):
        return {"key": key, "label": key, "kind": kind, "status": "ok", "success_rate": success,
                "median_ms": median, "p95_ms": median if p95 is None else p95}
    run = {"solvers": [row("multi_seed_search", PROJECT, 0.999, 0.14, 6.0),
                       row("batched_search", PROJECT, 0.99, 0.01),
                       row("rtb_ik_lm", PEER, 0.98, 0.05), row("kdl_nr_jl", PEER, 1.0, 1.0),
                       {"key": "ikpy", "kind": PEER, "status": "skipped", "reason": "x"}]}
    by = {g["goal"]: g for g in goals(run)}
    assert by["search success"]["met"] is True
    assert by["search success vs best peer"]["met"] is False      # KDL's 100 % beats 99.9 %
    assert "kdl_nr_jl" in by["search success vs best peer"]["value"]
    assert by["search p95"]["met"] is False                       # 6 ms > 5 ms
    assert by["search median / ik_LM median"]["met"] is True      # 0.14 / 0.05 = 2.8
    assert by["search median / ik_LM median"]["value"].startswith("2.80 x")
    assert by["batched_search per target / ik_LM median"]["met"] is True  # 0.01 / 0.05 = 0.2


def test_goal_ratio_uses_the_paired_timing_when_there_is_one():
    from bench_peers import PEER, PROJECT, goals

    def row(key, kind, median):
        return {"key": key, "label": key, "kind": kind, "status": "ok", "success_rate": 1.0,
                "median_ms": median, "p95_ms": median}
    run = {"solvers": [row("multi_seed_search", PROJECT, 0.20), row("rtb_ik_lm", PEER, 0.05)],
           "paired": {"sweeps": 3, "median_ms": {"multi_seed_search": 0.12, "rtb_ik_lm": 0.05}}}
    goal = {g["goal"]: g for g in goals(run)}["search median / ik_LM median"]
    assert goal["met"] is True                                   # paired 2.4 x, though 4 x in blocks
    assert goal["value"].startswith("2.40 x") and "in blocks 4.00 x" in goal["value"]


def test_paired_timing_alternates_the_solvers_target_by_target():
    from bench_peers import paired_timing

    calls = []
    clock = [0.0]  # a fake perf_counter: the fakes' durations are exact under any load (issue 28)

    class FakeTime:
        perf_counter = staticmethod(lambda: clock[0])

    class Fake:
        def __init__(self, key, seconds):
            self.key, self.seconds = key, seconds

        def call_one(self, problem, q_start):
            def one(i):
                calls.append((self.key, i))
                clock[0] += self.seconds[len([c for c in calls if c[0] == self.key]) - 1]
            return one

    class Problem:
        n = 3
    # a: 6 ms in its first sweep, then 1 ms; b: 2 ms throughout
    a, b = Fake("a", [0.006] * 3 + [0.001] * 6), Fake("b", [0.002] * 9)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[paired_timing.__module__], "time", FakeTime)
        times = paired_timing([a, b], Problem(), None, sweeps=3)
    assert len(calls) == 18
    firsts = [calls[k][0] for k in range(0, 18, 2)]           # who went first, target by target
    assert firsts == ["a", "b", "a", "b", "a", "b", "a", "b", "a"]
    assert [calls[k][1] for k in range(0, 18, 2)] == [0, 1, 2] * 3
    assert times["a"].shape == (3,) and np.allclose(times["a"], 0.001)  # the median sweep counts
    assert np.allclose(times["b"], 0.002)


def test_batch_goal_uses_the_paired_batch_timing_when_there_is_one():
    from bench_peers import PEER, PROJECT, goals

    def row(key, kind, median):
        return {"key": key, "label": key, "kind": kind, "status": "ok", "success_rate": 1.0,
                "median_ms": median, "p95_ms": median}
    run = {"solvers": [row("batched_search", PROJECT, 0.020), row("batched_spec", PROJECT, 0.020),
                       row("rtb_ik_lm", PEER, 0.050)],
           "paired_batch": {"sweeps": 5, "batch_per_target_ms": 0.012, "peer_median_ms": 0.048}}
    by = {g["goal"]: g for g in goals(run)}
    search = by["batched_search per target / ik_LM median"]
    assert search["met"] is True                                 # paired 0.25 x, though 0.4 x in blocks
    assert search["value"].startswith("0.25 x") and "in blocks 0.40 x" in search["value"]
    spec = by["batched_spec per target / ik_LM median"]          # not paired: its block figure
    assert spec["met"] is False and spec["value"].startswith("0.40 x")


def test_paired_batch_timing_alternates_one_batched_call_and_one_peer_sweep():
    from bench_peers import paired_batch_timing

    calls = []
    clock = [0.0]  # a fake perf_counter: the fakes' durations are exact under any load (issue 28)

    class FakeTime:
        perf_counter = staticmethod(lambda: clock[0])

    class Batched:
        def call_all(self, problem, q_start):
            def call():  # cold calls (odd ones) are slow; of the counted ones, two are too
                calls.append("batch")
                k = calls.count("batch")
                clock[0] += 0.030 if k % 2 or k in (2, 10) else 0.006
            return call

    class Peer:
        def call_one(self, problem, q_start):
            def one(i):
                calls.append(i)
                clock[0] += 0.004 if i == 2 else 0.001
            return one

    class Problem:
        n = 3
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[paired_batch_timing.__module__], "time", FakeTime)
        out = paired_batch_timing(Batched(), Peer(), Problem(), None, sweeps=5)
    b = ["batch", "batch"]
    assert calls == (b + [0, 1, 2] + [0, 1, 2] + b) * 2 + b + [0, 1, 2]
    assert out["batch_per_target_s"] == pytest.approx(0.006 / 3)  # the median second call
    assert out["peer_median_s"] == pytest.approx(0.001)            # the median target (not 4 ms)
