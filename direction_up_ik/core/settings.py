"""Settings of the solver and of the multi-seed search: one schema each.

:class:`SolverSettings` (the spec's parameters, section 3, plus opt-in rules beyond it) and
:class:`SearchSettings` (the multi-seed search's options) are frozen dataclasses that
validate themselves. Each field carries a :class:`Rule` as metadata (what it means, its
unit, the values it takes) and one validator, :func:`check`, enforces every rule. The
adapters generate their parameters from these fields: the node's ``solver.*`` /
``search.*`` ROS parameters (``ros/config.py``) and the ``direction_up_ik`` keys of
MoveIt's kinematics.yaml (``groups/kinematics_yaml.py``); no default, description or
field list is typed twice.

The fixed rules of the iteration (finite-difference step, step scales, stall ratio, ...)
are constants of this module, read by both backends.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from .errors import InputTypeError, InputValidationError

# ------------------------------------------------------------ fixed rules (spec 5.3, 5.4)
#: Finite-difference perturbation of each active joint (rad or m), spec 5.3.
FD_EPSILON = 1e-4
#: Step scales tried in order, spec 5.4.
STEP_SCALES = tuple(0.5 ** k for k in range(8))  # 1, 1/2, ..., 1/128
#: A capped joint step shorter than this (norm, rad/m) stops the candidate.
MIN_STEP_NORM = 1e-8
#: ``stall_window``: the residual must fall below this fraction of its value
#: ``stall_window`` accepted steps earlier, or the candidate stops as stalled.
STALL_RATIO = 0.95
#: ``damping_mode="residual"``: a step's damping is at least this fraction of ``damping``
#: (keeps J^T J + damping I positive definite at a singular pose with a near-zero residual).
RESIDUAL_DAMPING_FLOOR = 1e-6

#: Values of ``SolverSettings.jacobian``: the spec's forward differences or the exact derivative.
JACOBIANS = ("finite_difference", "analytic")
#: Values of ``SolverSettings.damping_mode``: the spec's constant damping or one that fades
#: with the residual.
DAMPING_MODES = ("constant", "residual")
#: Values of ``SolverSettings.periodic_joints``: the spec's final state of the iteration, or
#: each wide periodic joint of a success moved by whole turns nearest the initial state.
PERIODIC_JOINTS = ("as_solved", "nearest_turn")
#: Values of ``SearchSettings.selection``.
SELECTIONS = ("least_motion", "limit_center")
#: Values of ``SearchSettings.seeding``.
SEEDINGS = ("nearest", "random")


# ----------------------------------------------------------------------- the schema
@dataclass(frozen=True)
class Rule:
    """What a setting means and which values it takes.

    Attributes:
        kind: "number" (a finite positive real), "integer" (in [minimum, maximum]),
            "choice" (one of ``choices``) or "seed" (an integer >= 0, a random generator's seed).
        description: its meaning, one sentence.
        unit: "m", "rad", "s", "rad or m" or "" (none).
        minimum, maximum: inclusive bounds of an integer (maximum None: unbounded).
        choices: the values of a choice.
        optional: None is allowed too (its meaning is in the description).
    """

    kind: str
    description: str
    unit: str = ""
    minimum: Optional[int] = None
    maximum: Optional[int] = None
    choices: Tuple[str, ...] = ()
    optional: bool = False

    def text(self) -> str:
        """The rule in words, as error messages give it ("a positive integer", ...)."""
        if self.kind == "number":
            words = "a finite positive number"
        elif self.kind == "seed":
            words = "an integer >= 0"
        elif self.kind == "choice":
            words = f"one of {list(self.choices)}"
        elif self.maximum is not None:
            words = f"an integer in [{self.minimum}, {self.maximum}]"
        else:
            words = "a positive integer" if self.minimum == 1 else f"an integer >= {self.minimum}"
        return f"None or {words}" if self.optional else words


def setting(default=dataclasses.MISSING, **rule) -> Any:
    """A dataclass field with its :class:`Rule` (keywords) as metadata."""
    return dataclasses.field(default=default, metadata={"rule": Rule(**rule)})


def is_real(value) -> bool:
    """True for a real number (Python or numpy), bool excluded."""
    return not isinstance(value, bool) and isinstance(value, (numbers.Real, np.floating, np.integer))


def as_float(value) -> float:
    """``float(value)`` of a real number; +inf for an int beyond the float range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def check(rule: Rule, name: str, value):
    """The one validator: ``value`` normalised (a float, an int, a str or None) when it obeys
    ``rule``, else InputTypeError (wrong type) or InputValidationError naming ``name`` and
    the rule."""
    if value is None and rule.optional:
        return None
    if rule.kind == "choice":
        if not isinstance(value, str):
            raise InputTypeError(name, f"must be {rule.text()}, got {value!r}")
        if value not in rule.choices:
            raise InputValidationError(name, f"must be {rule.text()}, got {value!r}")
        return value
    if rule.kind in ("integer", "seed"):
        least = 0 if rule.kind == "seed" else rule.minimum
        if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
            raise InputTypeError(name, f"must be {rule.text()}, got {value!r}")
        if value < least or (rule.maximum is not None and value > rule.maximum):
            raise InputValidationError(name, f"must be {rule.text()}, got {value}")
        return int(value)
    if not is_real(value):
        raise InputTypeError(name, f"must be {rule.text()}, got {value!r}")
    number = as_float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise InputValidationError(name, f"must be {rule.text()}, got {value!r}")
    return number


def rules(cls) -> Dict[str, Rule]:
    """{field name: Rule} of a settings class, in field order."""
    return {f.name: f.metadata["rule"] for f in dataclasses.fields(cls)}


def defaults(cls) -> Dict[str, Any]:
    """{field name: default} of a settings class (fields without a default left out)."""
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


class _Validated:
    """Frozen settings that validate (and normalise) every field on construction."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = check(field.metadata["rule"], field.name, getattr(self, field.name))
            object.__setattr__(self, field.name, value)

    def replace(self, **changes):
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class SolverSettings(_Validated):
    """Parameters of :func:`robo_solve_ik_direction_up_multi_batch` and of the search's local
    solves (spec section 3; the defaults are the spec's). Success is judged on unweighted
    errors, each strictly below its tolerance."""

    max_position_error: float = setting(
        kind="number", unit="m",
        description="position guard inside the iteration (spec 5.4), not the success tolerance")
    max_iters: int = setting(32, kind="integer", minimum=1, description="iterations per candidate")
    position_tol: float = setting(
        1e-3, kind="number", unit="m", description="success: each end effector's position error below this")
    frame_tol_rad: float = setting(
        1e-2, kind="number", unit="rad",
        description="success: each end effector's direction and aligned-up errors below this")
    position_weight: float = setting(1.0, kind="number", description="weight of the position residuals")
    rotation_weight: float = setting(1.0, kind="number", description="weight of the direction/up residuals")
    damping: float = setting(1e-3, kind="number", description="damping added to the diagonal of J^T J")
    max_step_norm: float = setting(
        0.25, kind="number", unit="rad or m", description="cap on the norm of the whole active-joint step")
    jacobian: str = setting(
        "finite_difference", kind="choice", choices=JACOBIANS,
        description="finite_difference (the spec's, eps = 1e-4) or analytic: the exact derivative of "
                    "the same residuals (cheaper; robots with a mimic joint on a TCP chain keep finite "
                    "differences)")
    stall_window: int = setting(
        0, kind="integer", minimum=0,
        description="0 = the spec's stopping rules; w >= 1 also stops a candidate (reason stalled) "
                    "whose residual fell by less than 5 % over its last w steps")
    num_step_scales: int = setting(
        len(STEP_SCALES), kind="integer", minimum=1, maximum=len(STEP_SCALES),
        description="step scales 1, 1/2, ... a step tries before it is not acceptable (8, the spec's: "
                    "down to 1/128)")
    damping_mode: str = setting(
        "constant", kind="choice", choices=DAMPING_MODES,
        description="constant (the spec's) or residual: damping min(damping, the weighted squared "
                    "residual), Levenberg-Marquardt damping that fades near the target")
    periodic_joints: str = setting(
        "as_solved", kind="choice", choices=PERIODIC_JOINTS,
        description="as_solved (the spec's: the iteration's final state) or nearest_turn: in a successful "
                    "answer each revolute joint whose bounds span more than a turn takes the in-bound "
                    "value nearest its initial one, whole turns away (same pose, less motion; its errors "
                    "re-evaluated, and kept only when it still meets the tolerances)")


@dataclass(frozen=True)
class SearchSettings(_Validated):
    """Options of the multi-seed search (:func:`robo_search_ik_direction_up`, beyond the spec)."""

    num_seeds: int = setting(
        4, kind="integer", minimum=0,
        description="starts per candidate and round of seeds after the solve from the current state "
                    "(the seed library's states nearest the target first); 0 = the current state only")
    time_budget: Optional[float] = setting(
        None, kind="number", unit="s", optional=True,
        description="wall-clock budget of the whole search; None = none (then max_rounds)")
    max_rounds: Optional[int] = setting(
        None, kind="integer", minimum=1, optional=True,
        description="rounds of seeds at most; None = until the budget or enough successes (one round "
                    "without a budget)")
    min_successes: int = setting(
        1, kind="integer", minimum=1, description="a candidate's rounds stop after this many successes")
    selection: str = setting(
        "least_motion", kind="choice", choices=SELECTIONS,
        description="among a candidate's successes keep least_motion (the spec's cost) or limit_center")
    random_seed: Optional[int] = setting(
        0, kind="seed", optional=True,
        description="seed of the random starts (same request, same answer); None = from the OS")
    seeding: str = setting(
        "nearest", kind="choice", choices=SEEDINGS,
        description="where rounds of seeds start: nearest (library states nearest the target, then "
                    "random ones) or random (uniform in the bounds)")


# ------------------------------------------------------- defaults the front ends choose
#: The search's defaults for the solver settings of its local solves (the spec's single
#: solve keeps SolverSettings' defaults): a larger step cap and fewer step scales (seeds
#: take over where a short step would not help), the exact Jacobian, the stall stop and
#: the damping that fades near the target. Each made a search faster at the same success
#: and joint motion; figures in docs/performance.md. A seed's answer may lie whole turns
#: away from the start on a periodic joint: ``nearest_turn`` brings it back.
SEARCH_SOLVER_DEFAULTS = MappingProxyType(dict(max_step_norm=1.5, jacobian="analytic", stall_window=3,
                                               num_step_scales=3, damping_mode="residual",
                                               periodic_joints="nearest_turn"))

#: ``max_position_error`` where a front end needs a default (the ROS node's
#: ``solver.max_position_error``, kinematics.yaml): the spec makes it a required argument
#: and leaves its value to the caller; the benchmarks and examples use 3 cm.
DEFAULT_MAX_POSITION_ERROR = 0.03

#: The ROS node's own search defaults (``search.*`` parameters): the search with its 4 seeds
#: per round and a 0.1 s budget, so that a planner calling ``~/solve`` with defaults gets the
#: search's success (the spec's single start solves far fewer random reachable targets; it is
#: ``search.num_seeds: 0`` or ``overrides.num_seeds: -1`` away). Figures in docs/performance.md.
NODE_SEARCH_DEFAULTS = MappingProxyType(dict(time_budget=0.1))


# --------------------------------------------------------------- memoised construction
_CACHE: dict = {}
_CACHE_SIZE = 256


def _memoised(cls, values: Mapping[str, Any]):
    """``cls(**values)``, memoised: repeated calls with the same keywords skip the validation.
    The key holds each value's type, so ``1`` and ``1.0`` or ``True`` are still told apart;
    unhashable values are simply not cached."""
    try:
        key = (cls, tuple(values.items()), tuple(map(type, values.values())))
        hit = _CACHE.get(key)
    except TypeError:
        return cls(**values)
    if hit is None:
        hit = cls(**values)
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = hit
    return hit


def solver_settings(**values) -> SolverSettings:
    """``SolverSettings(**values)``, memoised (see :func:`_memoised`)."""
    return _memoised(SolverSettings, values)


def search_settings(**values) -> SearchSettings:
    """``SearchSettings(**values)``, memoised (see :func:`_memoised`)."""
    return _memoised(SearchSettings, values)
