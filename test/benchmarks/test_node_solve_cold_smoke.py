"""Smoke run of benchmarks/node_solve_cold.py (a benchmark, not a test): a tiny run of the
tree's child process answers the parent's blocks and reports both medians."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_node_solve_cold_smoke():
    proc = subprocess.run([sys.executable, "benchmarks/node_solve_cold.py", "--requests", "3", "--calls", "5",
                           "--block", "2"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = re.search(r"5 calls: cold ([0-9.]+) us, warm ([0-9.]+) us", proc.stdout)
    assert found, proc.stdout
    cold, warm = float(found.group(1)), float(found.group(2))
    assert cold > 0.0 and warm > 0.0
