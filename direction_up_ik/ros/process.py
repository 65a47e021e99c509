"""Run one node as a process: until SIGINT or SIGTERM, then a clean exit.

The console entry points of ``direction_up_ik_node`` and ``command_echo`` share this. rclpy's
own signal handler shuts the context down on the first SIGINT and lets the next one raise
``KeyboardInterrupt`` wherever the process happens to be (``destroy_node`` included): under
``ros2 launch`` a terminal's Ctrl-C reaches a node twice (from the terminal and forwarded by
launch), so the node died with a traceback and a non-zero exit code. Here a signal only sets
an event; the spin loop sees it, the node is destroyed once and the process exits 0, however
many signals arrive (also while the interpreter finalises: they are ignored by then).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from typing import Callable, List, Optional

import rclpy
import rclpy.executors
import rclpy.logging
import rclpy.signals

from .config import ConfigError

#: Seconds the spin loop waits for work before it looks at the stop event again.
_SPIN_PERIOD_S = 0.1
#: The environment variable that selects the executor: "single_threaded" (default, rclpy's
#: SingleThreadedExecutor) or "events" (rclpy.experimental.EventsExecutor: its wait and dispatch
#: in C++, a shorter service round trip; docs/performance.md, "ROS path").
EXECUTOR_ENV = "DIRECTION_UP_IK_EXECUTOR"
EXECUTORS = ("single_threaded", "events")


def settle_heap() -> None:
    """Collect the garbage once, then exempt every object alive from later collections
    (``gc.freeze``).

    A node's long-lived objects (the model, numba's kernels, rclpy, the message classes) are
    then never traversed again. Without it, each full collection that a long stream of
    requests brings on walks all of them and stalls the process for tens of milliseconds
    (docs/performance.md, "A node's heap frozen after start-up"). A process that runs one node
    calls it after start-up and after each change of what lives long (the kernels loaded, a new
    model); the collection it runs first takes as long as one such stall.
    """
    gc.collect()
    gc.freeze()


def make_executor(context=None):
    """The executor :data:`EXECUTOR_ENV` names (one callback at a time either way).

    Raises:
        ConfigError: another value.
    """
    kind = os.environ.get(EXECUTOR_ENV, "") or EXECUTORS[0]
    if kind == "events":
        from rclpy.experimental import EventsExecutor
        return EventsExecutor(context=context)
    if kind != "single_threaded":
        raise ConfigError(f"environment {EXECUTOR_ENV}", f"unknown executor {kind!r} (valid: "
                                                       f"{', '.join(EXECUTORS)})")
    return rclpy.executors.SingleThreadedExecutor(context=context)


def run_node(make_node: Callable[[], "rclpy.node.Node"], name: str, args: Optional[List[str]] = None,
             on_stop: Optional[Callable[[], None]] = None) -> int:
    """Build a node with ``make_node()`` and spin it until SIGINT / SIGTERM.

    Args:
        make_node: builds the node (after ``rclpy.init``); may raise ConfigError.
        name: logger name of a configuration error.
        args: command-line arguments for ``rclpy.init`` (None: ``sys.argv``).
        on_stop: called after spinning stops, before the node is destroyed.
    Returns:
        the exit code: 0 after a signal (or an external shutdown), 1 on bad configuration
        (one log line naming the parameter, no traceback).
    """
    rclpy.init(args=args, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    code = 0
    try:
        executor = make_executor()
        node = make_node()
    except ConfigError as exc:
        rclpy.logging.get_logger(name).fatal(f"invalid configuration: {exc}")
        node, code = None, 1
    if node is not None:
        executor.add_node(node)
        try:
            while not stop.is_set() and rclpy.ok():
                executor.spin_once(timeout_sec=_SPIN_PERIOD_S)
        except rclpy.executors.ExternalShutdownException:
            pass
        node.get_logger().info("shutting down")
        if on_stop is not None:
            on_stop()
        node.destroy_node()
    if rclpy.ok():
        rclpy.try_shutdown()
    # From here on the process only exits. Python restores the default handlers when it
    # finalises, so a repeated Ctrl-C arriving then would kill it (exit -2) after a clean
    # shutdown; ignored signals stay ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    return code
