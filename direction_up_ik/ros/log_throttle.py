"""Throttled log lines that cost next to nothing while they are suppressed; no ROS imports.

rclpy's logger looks up its caller's frame (``inspect``, with file-system look-ups) on every
call, before its own ``throttle_duration_sec`` filter decides: milliseconds per call on this
project's machines (docs/performance.md, "Log lines in hot paths"). Lines a stream can repeat
at hundreds of hertz (a held or approached target, a rejected joint state) are throttled here,
before the logger is called.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from typing import Callable, Dict


class LogThrottle:
    """Per-key rate limits: :meth:`due` is True at most once per period for each key, the
    first time at once (as rclpy's throttle filter)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._next: Dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, key: str, period_s: float) -> bool:
        """Whether the line ``key`` may be logged now (then not again for ``period_s`` seconds)."""
        now = self._clock()
        with self._lock:
            if now < self._next.get(key, now):
                return False
            self._next[key] = now + period_s
            return True


def prime_caller_lookup() -> threading.Thread:
    """Fill ``inspect``'s module-by-file cache in a background thread and return the thread.

    A process's first rclpy log line looks up its caller's module, which makes ``inspect``
    resolve the file of every imported module (hundreds of ``realpath`` calls, most of a
    second at a node's start-up here); started early, that overlaps the node's own start-up
    (the file-system calls release the interpreter) instead of delaying its "ready" line."""
    thread = threading.Thread(target=lambda: inspect.getmodule(sys._getframe()), name="inspect_cache",
                              daemon=True)
    thread.start()
    return thread
