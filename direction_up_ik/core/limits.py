"""Joint states at their limits: the tolerance within which a state just past a limit is clamped
onto it, and the float32 rounding that keeps a clamped state inside.

Robots report states a little past a limit (encoder noise, a controller's overshoot, a float
round trip), and a robot at rest on a limit keeps reporting them. Both front ends that take a
start state from outside -- the node's joint states and the MoveIt bridge's seeds -- clamp such
states within :data:`LIMIT_TOLERANCE` and refuse only states farther out.
"""

from __future__ import annotations

from array import array
from typing import Optional, Tuple

import numpy as np

#: rad / m: a start state at most this far beyond a limit is clamped onto it; farther is an error.
LIMIT_TOLERANCE = 1e-3


def float32_within_limits(q: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``q`` (D,) as the solver's float32 joint state, rounded towards the inside of the limits.

    Plain rounding can land one float32 step beyond a float64 limit (float32(0.4) is
    0.4000000059604645), and joints the solve does not move are returned -- and published --
    as they were given.
    """
    if type(q) is np.ndarray and q.ndim == 1 and q.dtype == np.float64:
        # The usual call (a start state already inside): rounded and checked on Python floats,
        # a few numpy calls fewer on the node's per-request path (docs/performance.md).
        q32 = array("f", q.tolist())  # C's double -> float, round to nearest as numpy's
        lo, hi = _limit_lists(lower, upper)
        if len(q32) == len(lo):
            for v, a, b in zip(q32, lo, hi):
                if not a <= v <= b:  # (NaN too)
                    break
            else:
                return np.frombuffer(q32, dtype=np.float32)
    q32 = np.array(q, dtype=np.float32)  # always a copy
    wide = q32.astype(np.float64)
    above = wide > upper
    if above.any():  # (rare; the masked writes cost more than the test)
        q32[above] = np.nextafter(q32[above], np.float32(-np.inf))
        wide = q32.astype(np.float64)
    below = wide < lower
    if below.any():
        q32[below] = np.nextafter(q32[below], np.float32(np.inf))
    return q32


#: (lower, upper, lower as floats, upper as floats) of the last limits asked for.
_LAST_LIMITS: tuple = (None, None, [], [])


def _limit_lists(lower: np.ndarray, upper: np.ndarray):
    """The limits as lists of floats, kept while the same two arrays are asked for (a model's
    limits are read-only arrays, built once)."""
    global _LAST_LIMITS
    last = _LAST_LIMITS
    if last[0] is not lower or last[1] is not upper:
        last = _LAST_LIMITS = (lower, upper, np.asarray(lower, dtype=np.float64).tolist(),
                               np.asarray(upper, dtype=np.float64).tolist())
    return last[2], last[3]


def clamp_to_limits(q: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    tolerance: float = LIMIT_TOLERANCE) -> Tuple[np.ndarray, Optional[int]]:
    """(q clipped into [lower, upper], None), or (q, index of the first value farther than
    ``tolerance`` beyond its limit). ``q``, ``lower``, ``upper``: (D,) rad / m."""
    q = np.asarray(q, dtype=np.float64)
    outside = (q < lower - tolerance) | (q > upper + tolerance)
    if outside.any():
        return q, int(np.flatnonzero(outside)[0])
    return np.clip(q, lower, upper), None
