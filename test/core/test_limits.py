"""float32_within_limits (core/limits.py): the float32 start state, rounded inside the limits."""

from __future__ import annotations

import numpy as np

from direction_up_ik.core.limits import float32_within_limits


def reference(q, lower, upper):
    """Round to float32, then step each value beyond a limit one float32 step back inside."""
    q32 = np.asarray(q, dtype=np.float64).astype(np.float32)
    for i, value in enumerate(q32):
        if float(value) > upper[i]:
            q32[i] = np.nextafter(value, np.float32(-np.inf))
        if float(q32[i]) < lower[i]:
            q32[i] = np.nextafter(q32[i], np.float32(np.inf))
    return q32


def test_it_rounds_inside_the_limits_and_is_exact_elsewhere():
    rng = np.random.default_rng(11)
    for _ in range(300):
        d = int(rng.integers(1, 20))
        lower = -rng.uniform(0.1, 3.0, d)
        upper = rng.uniform(0.1, 3.0, d)
        q = rng.uniform(lower, upper)
        on_limit = rng.random(d) < 0.3  # a state resting on a limit: its float32 may lie beyond
        q[on_limit] = np.where(rng.random(on_limit.sum()) < 0.5, lower[on_limit], upper[on_limit])
        got = float32_within_limits(q, lower, upper)
        assert got.dtype == np.float32 and got.shape == (d,)
        assert np.array_equal(got, reference(q, lower, upper))
        assert np.all(got.astype(np.float64) <= upper) and np.all(got.astype(np.float64) >= lower)
        # any array-like gives the same (the float64 array takes a path of its own)
        assert np.array_equal(float32_within_limits(q.tolist(), lower, upper), got)


def test_a_value_on_a_limit_comes_back_inside_and_nan_stays():
    lower, upper = np.array([-0.4, -1.0]), np.array([0.4, 1.0])
    got = float32_within_limits(np.array([0.4, np.nan]), lower, upper)
    assert float(got[0]) <= 0.4 and got[0] == np.nextafter(np.float32(0.4), np.float32(0.0))
    assert np.isnan(got[1])
    # a caller's array is never returned or written
    q = np.array([0.1, 0.2])
    got = float32_within_limits(q, lower, upper)
    got[0] = 5.0
    assert q[0] == 0.1
