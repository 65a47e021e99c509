"""An install of the package whose kernels are not compiled yet, compiled by the precompile
command in the background (importable as ``cold_install``; see pythonpath in setup.cfg).

The copy's in-tree cache cannot be written (as for an install tree owned by another user):
read-only for every user but root, and ``core/compiled/__pycache__`` is a file, so that not
even root can make the folder there; so numba caches the kernels per user, under ``home``.
``test/conftest.py`` starts the compile when a test that needs it was collected, so that its
minutes overlap the other tests; :func:`precompiled` waits for it, in whichever pytest-xdist
worker runs that test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict

REPO = Path(__file__).resolve().parents[1]
#: Environment variable naming the run's shared folder of the cold install.
SHARED_ENV = "DIRECTION_UP_IK_TEST_COLD_INSTALL"


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


def _shared() -> Path:
    """The folder of this test run's cold install, the same for every pytest-xdist worker
    (``test/conftest.py`` names it in the environment before the workers start)."""
    folder = os.environ.get(SHARED_ENV)
    if not folder:
        folder = tempfile.mkdtemp(prefix="direction_up_ik_cold_")
        os.environ[SHARED_ENV] = folder
    return Path(folder)


def start() -> None:
    """Make the copy and start ``python -m direction_up_ik.precompile`` there, once per test
    run whichever worker asks first (a file lock); output and exit code go to files."""
    shared = _shared()
    with open(shared / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (shared / "pid").exists():
            return
        root = make(shared)
        script = '"$0" -m direction_up_ik.precompile >"$1" 2>&1; echo $? >"$2.tmp"; mv "$2.tmp" "$2"'
        process = subprocess.Popen(["sh", "-c", script, sys.executable, str(shared / "output.txt"),
                                    str(shared / "exit_code")],
                                   cwd=root, env=environment(root), start_new_session=True)
        (shared / "pid").write_text(str(process.pid))


def precompiled(timeout: float) -> tuple:
    """(root, exit code, output) of the background precompile, started now if it was not."""
    start()
    shared = _shared()
    deadline = time.monotonic() + timeout
    while not (shared / "exit_code").exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the cold install's precompile did not end within {timeout} s")
        time.sleep(0.5)
    return shared, int((shared / "exit_code").read_text()), (shared / "output.txt").read_text()


def cleanup() -> None:
    """Stop the precompile if it still runs and remove the copy (once, by the run's main process)."""
    folder = os.environ.get(SHARED_ENV)
    if not folder or not Path(folder).is_dir():
        return
    shared = Path(folder)
    if (shared / "pid").exists() and not (shared / "exit_code").exists():
        try:
            os.killpg(int((shared / "pid").read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass
    for path in shared.rglob("*"):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    shutil.rmtree(shared, ignore_errors=True)
