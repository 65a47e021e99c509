"""The benchmarks' smoke tests: ``benchmarks/`` (scripts, not part of the package) on the path."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
