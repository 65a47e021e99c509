"""Solver settings: the one schema of the spec's parameters (spec section 3).

:class:`SolverSettings` is frozen and validates itself on construction, so
every adapter (function keywords, ROS parameters, kinematics.yaml) converts its
input into one and gets the same checks and the same messages.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np

from .errors import InputTypeError, InputValidationError

#: Finite-difference perturbation of each active joint (rad or m), spec 5.3.
FD_EPSILON = 1e-4
#: Step scales tried in order, spec 5.4.
STEP_SCALES = tuple(0.5 ** k for k in range(8))  # 1, 1/2, ..., 1/128
#: A capped joint step shorter than this (norm, rad/m) stops the candidate.
MIN_STEP_NORM = 1e-8
#: Values of ``SolverSettings.jacobian``: the spec's forward differences (spec 5.3,
#: the default) or the exact derivative of the same residuals (beyond the spec).
JACOBIANS = ("finite_difference", "analytic")
#: Values of ``SolverSettings.damping_mode``: the spec's constant damping (spec 5.3, the
#: default) or damping that fades with the residual (beyond the spec).
DAMPING_MODES = ("constant", "residual")
#: ``damping_mode="residual"``: a step's damping is at least this fraction of ``damping``
#: (keeps J^T J + damping I positive definite at a singular pose with a near-zero residual).
RESIDUAL_DAMPING_FLOOR = 1e-6
#: String settings and their values.
_CHOICES = {"jacobian": JACOBIANS, "damping_mode": DAMPING_MODES}


def is_real(value) -> bool:
    """True for a real number (Python or numpy), bool excluded."""
    return not isinstance(value, bool) and isinstance(value, (numbers.Real, np.floating, np.integer))


def as_float(value) -> float:
    """``float(value)`` of a real number; +inf for an int beyond the float range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


#: Integer settings and their (least, greatest) values (None: no upper bound).
_INTEGERS = {"max_iters": (1, None), "stall_window": (0, None), "num_step_scales": (1, len(STEP_SCALES))}
#: ``SolverSettings.stall_window``: the residual must fall below this fraction of its
#: value ``stall_window`` accepted steps earlier, or the candidate stops as stalled.
STALL_RATIO = 0.95


@dataclass(frozen=True)
class SolverSettings:
    """Parameters of :func:`robo_solve_ik_direction_up_multi_batch`.

    Attributes:
        max_position_error: metres; position guard inside the iteration (spec 5.4),
            not the success tolerance. Required.
        max_iters: iterations per candidate, positive integer.
        position_tol: metres; each EE's position error must be strictly less.
        frame_tol_rad: radians; each EE's Direction and aligned-Up errors must
            each be strictly less.
        position_weight, rotation_weight: weights of the residual components
            (success is judged on unweighted errors).
        damping: added to the diagonal of J^T J.
        max_step_norm: cap on the norm of the whole active-joint step (rad/m).
        jacobian: "finite_difference" (spec 5.3: eps = 1e-4 per active joint) or
            "analytic": the exact derivative of the same residuals, from the
            joints' world axes (about 2.5 x cheaper to compute; it differs from
            the forward difference by O(eps), so iterations and answers differ
            slightly). Robots with a mimic joint on a TCP chain use finite
            differences either way. The multi-seed search defaults to "analytic".
            With "analytic" the compiled backend also takes its own sin/cos in FK
            (within 1.5 ulp) and solves each step by L D L^T instead of pivoted LU:
            the same equations to rounding, 0.88-0.92 x a search batch's time; the
            numpy backend keeps libm and LU (so the two backends differ a little more
            in this mode; "finite_difference" keeps them the same).
        stall_window: 0 (the spec's stopping rules only) or w >= 1: a candidate
            also stops, with reason "stalled", once its weighted sum of squared
            residuals after k >= w accepted steps is more than ``STALL_RATIO``
            (0.95) times the sum w steps before (less than 5 % progress in w
            steps). The multi-seed search defaults to 3 (``SEARCH_STALL_WINDOW``).
        num_step_scales: how many of the step scales ``STEP_SCALES`` (1, 1/2, ...,
            1/128) a step tries before it is not acceptable: 8 (the spec, 5.4) or
            fewer, 1 .. 8 (then the smallest scale is 1/2^(n-1)). The multi-seed search
            defaults to 3 (``SEARCH_NUM_STEP_SCALES``: down to 1/4).
        damping_mode: "constant" (spec 5.3: every step adds ``damping``) or "residual":
            a step adds min(damping, E), E the candidate's weighted sum of squared
            residuals (at least ``RESIDUAL_DAMPING_FLOOR`` x damping), the
            Levenberg-Marquardt damping that fades with the residual (Yamashita and
            Fukushima, 2001). Far from the target (E >= damping) the steps are the
            spec's; close to it, a near-singular pose no longer creeps towards the
            tolerance by a few per cent a step (constant damping shrinks the step
            along a singular value s by s^2 / (s^2 + damping)). The multi-seed search
            defaults to "residual" (``SEARCH_DAMPING_MODE``).
    """

    max_position_error: float
    max_iters: int = 32
    position_tol: float = 1e-3
    frame_tol_rad: float = 1e-2
    position_weight: float = 1.0
    rotation_weight: float = 1.0
    damping: float = 1e-3
    max_step_norm: float = 0.25
    jacobian: str = "finite_difference"
    stall_window: int = 0
    num_step_scales: int = len(STEP_SCALES)
    damping_mode: str = "constant"

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _CHOICES:
                choices = list(_CHOICES[field.name])
                if not isinstance(value, str):
                    raise InputTypeError(field.name, f"must be one of {choices}, got {value!r}")
                if value not in choices:
                    raise InputValidationError(field.name, f"must be one of {choices}, got {value!r}")
                continue
            if field.name in _INTEGERS:
                least, most = _INTEGERS[field.name]
                if most is not None:
                    rule = f"an integer in [{least}, {most}]"
                else:
                    rule = "a positive integer" if least == 1 else f"an integer >= {least}"
                if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
                    raise InputTypeError(field.name, f"must be {rule}, got {value!r}")
                if value < least or (most is not None and value > most):
                    raise InputValidationError(field.name, f"must be {rule}, got {value}")
                object.__setattr__(self, field.name, int(value))
                continue
            if not is_real(value):
                raise InputTypeError(field.name, f"must be a finite positive number, got {value!r}")
            value = as_float(value)
            if not math.isfinite(value) or value <= 0.0:
                raise InputValidationError(field.name,
                                           f"must be a finite positive number, got {value!r}")
            object.__setattr__(self, field.name, value)

    def replace(self, **changes) -> "SolverSettings":
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)


_CACHE: dict = {}
_CACHE_SIZE = 256


def solver_settings(**values) -> SolverSettings:
    """``SolverSettings(**values)``, memoised: repeated solves with the same keywords
    skip the validation (about 7 us). The key holds each value's type, so ``1`` and
    ``1.0`` or ``True`` are still told apart; unhashable values are simply not cached."""
    try:
        key = tuple((name, type(value), value) for name, value in values.items())
        hit = _CACHE.get(key)
    except TypeError:
        return SolverSettings(**values)
    if hit is None:
        hit = SolverSettings(**values)
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = hit
    return hit
