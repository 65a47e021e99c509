"""ros/log_throttle.py: a line is due at once, then not again within its period, per key."""

from __future__ import annotations

from direction_up_ik.ros.log_throttle import LogThrottle


def test_a_key_is_due_once_per_period_and_keys_are_independent():
    now = [100.0]
    throttle = LogThrottle(clock=lambda: now[0])
    assert throttle.due("held", 1.0)  # the first time at once
    assert not throttle.due("held", 1.0)
    assert throttle.due("approach", 1.0)  # another key has its own limit
    now[0] += 0.999
    assert not throttle.due("held", 1.0)
    now[0] += 0.002
    assert throttle.due("held", 1.0)
    assert not throttle.due("held", 1.0)
    now[0] += 5.0
    assert throttle.due("held", 5.0) and not throttle.due("held", 5.0)
