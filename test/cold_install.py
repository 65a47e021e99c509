"""An install of the package whose own cache cannot be written, for the per-user cache test
(importable as ``cold_install``; see pythonpath in setup.cfg).

The copy's in-tree cache cannot be written (as for an install tree owned by another user):
read-only for every user but root, and ``core/compiled/__pycache__`` is a file, so that not
even root can make the folder there; so numba caches the kernels per user, under ``home``.

Compiling every kernel again for the copy would take minutes of each test run, the same work
the session's own warm-up has done: :func:`seed_user_cache` copies the session's cached kernels
into the copy's per-user cache but for one small entry point, which the precompile command
then compiles and writes there.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict

REPO = Path(__file__).resolve().parents[1]
#: The entry point left for the copy's precompile to compile (a small one: seconds).
LEFT_TO_COMPILE = "seed_scan.nearest_ranks_into"


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


def cache_folder(root: Path) -> str:
    """The kernels' cache folder as the copy under ``root`` sees it (its per-user cache)."""
    probe = "import json; from direction_up_ik.core import compiled; print(json.dumps(compiled.cache_folder()))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=environment(root), capture_output=True,
                         text=True, timeout=600)  # a hang catcher: the probe takes seconds
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def seed_user_cache(root: Path, session_cache: str) -> Path:
    """Copy the kernels cached in ``session_cache`` (this test session's, warm) into the copy's
    per-user cache folder, but for :data:`LEFT_TO_COMPILE`; returns that folder. The files are
    valid there: numba keys them on the entry point's name and line and on the sources' stamp
    (``compiled.numba_support``), which the copy shares."""
    folder = Path(cache_folder(root))
    folder.mkdir(parents=True, exist_ok=True)
    for path in Path(session_cache).iterdir():
        if path.suffix in (".nbi", ".nbc") and not path.name.startswith(LEFT_TO_COMPILE + "-"):
            shutil.copy2(path, folder / path.name)
    return folder


def release(root: Path) -> None:
    """Make the copy under ``root`` writable again, so that its temporary folder can be removed."""
    for path in root.rglob("*"):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
