"""Smoke run of benchmarks/search_answers.py (a benchmark, not a test): a tiny run reports
every robot and start, and the current search leaves no answer a whole turn too far."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np

from search_answers import extra_turn_motion  # benchmarks/ (conftest.py puts it on the path)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_extra_turn_motion_finds_the_nearer_equivalent():
    lower, upper = np.array([-2 * np.pi, -np.pi]), np.array([2 * np.pi, np.pi])
    q0 = np.zeros(2)
    assert extra_turn_motion(np.array([-4.6149, 0.5]), q0, lower, upper) == \
        np.float64(4.6149 - (2 * np.pi - 4.6149))
    assert extra_turn_motion(np.array([1.6682, 3.0]), q0, lower, upper) == 0.0  # -4.61 is farther


def test_search_answers_smoke(tmp_path):
    out = tmp_path / "answers.json"
    proc = subprocess.run([sys.executable, "benchmarks/search_answers.py", "--targets", "8", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)  # catches a hang only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert len(rows) == 6 and all(r["targets"] == 8 for r in rows.values())
    assert all(r["whole_turns"] == 0 for r in rows.values())
