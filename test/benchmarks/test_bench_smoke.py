"""Smoke run of the solver benchmark (benchmarks/bench.py); the benchmark is not a test.

Checks that a tiny run of every mode works and reports consistent figures:
numpy and numba agree target by target, the batch equals the loop, and the
memory mode measures a peak at or above the RSS before the call.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

import bench  # benchmarks/ (conftest.py puts it on the path)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_bench_smoke_all_modes(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench.py", "--targets", "6", "--robots", "panda_like",
         "--compare-backends", "--search", "--memory", "40", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))
    spec = [r for r in rows if "b1_median_ms" in r]
    search = [r for r in rows if "num_seeds" in r]
    memory = [r for r in rows if "peak_rss_mib" in r]
    assert [r["backend"] for r in spec] == ["numpy", "numba"]
    assert spec[0]["success_rate"] == spec[1]["success_rate"]
    assert all(r["batch_matches_loop"] for r in spec)
    assert len(search) == 2 and all(0.0 <= r["success_rate"] <= 1.0 for r in search)
    assert [(r["backend"], r["candidates"]) for r in memory] == [("numpy", 40), ("numba", 40)]
    for r in memory:
        assert r["peak_rss_mib"] >= r["rss_before_mib"] > 10.0
        assert 0.0 <= r["success_rate"] <= 1.0 and r["seconds"] > 0
    assert "peak RSS MiB" in proc.stdout and "same success" in proc.stdout


def test_bench_plot_option_draws_a_solved_example(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from test_plot import image_stats

    out = tmp_path / "bench.png"
    assert bench.main(["--targets", "2", "--robots", "ur5_like", "--plot", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    _, _, ink, colours, hues = image_stats(out)
    assert ink > 0.02 and colours >= 8 and all(hues.values())
