"""An install of the package whose kernels are not compiled yet, compiled by the precompile
command in the background (importable as ``cold_install``; see pythonpath in setup.cfg).

The copy's in-tree cache cannot be written (as for an install tree owned by another user):
read-only for every user but root, and ``core/compiled/__pycache__`` is a file, so that not
even root can make the folder there; so numba caches the kernels per user, under ``home``.
``test/conftest.py`` starts the compile when a test that needs it was collected, so that its
minutes overlap the other tests; :func:`precompiled` waits for it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional

REPO = Path(__file__).resolve().parents[1]
_state: Dict[str, object] = {}


def environment(root: Path) -> Dict[str, str]:
    """The environment of a process that runs the copy in ``root`` as its own user would."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR", "DIRECTION_UP_IK_BACKEND")}
    env.update(PYTHONPATH=str(root / "install"), HOME=str(root / "home"))
    return env


def make(root: Path) -> Path:
    """The unwritable copy of the package under ``root``/install, with ``root``/home."""
    install = root / "install"
    shutil.copytree(REPO / "direction_up_ik", install / "direction_up_ik",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (install / "direction_up_ik" / "core" / "compiled" / "__pycache__").write_text("not a folder\n")
    for path in sorted(install.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    (root / "home").mkdir()
    return root


def start() -> None:
    """Make the copy and start ``python -m direction_up_ik.precompile`` there (once)."""
    if "process" in _state:
        return
    root = make(Path(tempfile.mkdtemp(prefix="direction_up_ik_cold_")))
    _state["root"] = root
    _state["process"] = subprocess.Popen([sys.executable, "-m", "direction_up_ik.precompile"], cwd=root,
                                         env=environment(root), stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True)


def precompiled(timeout: float) -> tuple:
    """(root, exit code, output) of the background precompile, started now if it was not."""
    start()
    process: subprocess.Popen = _state["process"]  # type: ignore[assignment]
    output, _ = process.communicate(timeout=timeout)
    return _state["root"], process.returncode, output


def cleanup() -> None:
    process: Optional[subprocess.Popen] = _state.pop("process", None)  # type: ignore[assignment]
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
    root: Optional[Path] = _state.pop("root", None)  # type: ignore[assignment]
    if root is not None:
        for path in root.rglob("*"):
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(root, ignore_errors=True)
