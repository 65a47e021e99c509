"""Set-up of the child processes that compile kernels (run in the child, before exec)."""

from __future__ import annotations

import ctypes
import os
import signal


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
