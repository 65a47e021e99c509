"""The child processes that compile kernels: their command line, and their set-up (run in
the child, before exec)."""

from __future__ import annotations

import ctypes
import os
import pathlib
import signal
import sys
from typing import List

#: The folder this package is imported from (the one holding ``direction_up_ik/``), as
#: imported: symbolic links are not resolved, so that under ``colcon build --symlink-install``
#: a child imports the package by the same file paths, which key numba's cache.
PACKAGE_ROOT = str(pathlib.Path(os.path.abspath(__file__)).parents[2])


def python_command(code: str) -> List[str]:
    """argv of a child Python that runs ``code`` with this very package: its folder
    (:data:`PACKAGE_ROOT`) takes the place of the working folder at the head of the child's
    path (as a script's own folder would). A plain ``python -c`` or ``-m`` child puts its
    working folder there, so started from a folder holding another copy of the package (a
    source checkout beside an installed build) it would compile that copy's kernels into that
    copy's cache, and this process would then compile its own."""
    return [sys.executable, "-c", f"import sys; sys.path[0] = {PACKAGE_ROOT!r}; {code}"]


def die_with_parent() -> None:
    """SIGKILL this child when the thread that started it ends, e.g. with its process (Linux
    ``prctl(PR_SET_PDEATHSIG)``); elsewhere a stopped parent may leave the child running."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (AttributeError, OSError):
        pass


def background_compile_child() -> None:
    """A compile a server starts in the background: it dies with the server, and runs at a
    lower CPU priority (nice 10), so that the server (building its model, answering with
    numpy) keeps the cores."""
    die_with_parent()
    try:
        os.nice(10)
    except (AttributeError, OSError):  # not POSIX, or not allowed: the default priority
        pass
