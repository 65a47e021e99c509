"""scripts/bootstrap.sh leaves bytecode for what a node process imports.

Without it, where ``PYTHONDONTWRITEBYTECODE`` is set, every process would compile numpy, scipy,
numba, rclpy and the package from source (seconds per node start; docs/performance.md, the
thirteenth session). Checked in a fresh interpreter that imports what the node imports at
start-up (its module, the core, the compiled kernels' modules): every module it loads from the
venv has a current bytecode file, every module of the package's sources one (an edit since the
last bootstrap leaves it stale, which costs only that file's compile).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

#: The stamp the bootstrap's bytecode step writes into the venv it made.
STAMP = pathlib.Path(sys.prefix) / ".bootstrap" / "bytecode"
ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(not STAMP.is_file(), reason="not a venv made by scripts/bootstrap.sh (no bytecode stamp)"),
    pytest.mark.skipif(bool(os.environ.get("PYTHONPYCACHEPREFIX")),
                       reason="PYTHONPYCACHEPREFIX moves bytecode out of the venv, where this test looks"),
]

#: Lists (root index, file, its bytecode file or "", current) of every source module the node's
#: imports load from one of the roots given (the venv, the package's sources). Run with bytecode
#: writing off, so that the check cannot write what it checks. "Current": the bytecode file
#: records the source's size and modification time (or is checked by hash).
_PROBE = r"""
import importlib.util, json, os, sys
import direction_up_ik.ros.node, direction_up_ik.core, direction_up_ik.core.compiled.api
roots = [os.path.realpath(p) for p in sys.argv[1:]]
rows = []
for module in list(sys.modules.values()):
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        continue
    real = os.path.realpath(path)
    inside = [i for i, root in enumerate(roots) if real.startswith(root + os.sep)]
    if not inside:
        continue
    cached = importlib.util.cache_from_source(path)
    current = False
    if os.path.exists(cached):
        with open(cached, "rb") as handle:
            header = handle.read(16)
        stat = os.stat(path)
        flags = int.from_bytes(header[4:8], "little")
        current = flags != 0 or (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
                                 and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)
    rows.append((inside[0], path, cached if os.path.exists(cached) else "", current))
print(json.dumps(rows))
"""


def test_node_imports_have_current_bytecode():
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", _PROBE, sys.prefix, str(ROOT / "direction_up_ik")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.splitlines()[-1])
    venv = [row for row in rows if row[0] == 0]
    package = [row for row in rows if row[0] == 1]
    assert len(venv) > 300 and len(package) > 20, f"{len(venv)} + {len(package)} modules seen: wrong roots"
    missing = [path for _, path, cached, _ in rows if not cached]
    stale = [path for _, path, cached, current in venv if cached and not current]
    assert not missing, f"{len(missing)} of {len(rows)} modules without bytecode, e.g. {missing[:5]}"
    assert not stale, f"{len(stale)} of {len(venv)} venv modules with stale bytecode, e.g. {stale[:5]}"
