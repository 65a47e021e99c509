"""Exceptions of direction_up_ik.

Mistakes raise; outcomes do not. An unreachable target is an outcome
(``success == 0``, ``best_index is None``); a malformed target, a bad parameter
or a broken robot model is a mistake and raises one of the classes below.

Every class derives from :class:`DirectionUpIKError`. Validation errors also
derive from the matching builtin (``ValueError`` or ``TypeError``) so that
``except ValueError`` works for callers that do not know this package, and the
numerical failure of spec section 6 is a ``FloatingPointError``.
"""

from __future__ import annotations

from typing import Optional, Sequence


class DirectionUpIKError(Exception):
    """Base class of every exception raised on purpose by this package."""


def _where(candidate: Optional[int], ee: Optional[int]) -> str:
    parts = []
    if candidate is not None:
        parts.append(f"candidate {candidate}")
    if ee is not None:
        parts.append(f"target {ee}")
    return (" of ".join(reversed(parts)) + ": ") if parts else ""


class InputValidationError(DirectionUpIKError, ValueError):
    """A value breaks an input rule.

    Attributes:
        field: name of the offending argument or target field.
        rule: the rule that was broken, in words.
        candidate: candidate index, when the value belongs to one.
        target: index of the target inside its candidate, when it applies.
    """

    def __init__(self, field: str, rule: str, *, candidate: Optional[int] = None,
                 target: Optional[int] = None) -> None:
        self.field = field
        self.rule = rule
        self.candidate = candidate
        self.target = target
        super().__init__(f"{_where(candidate, target)}{field}: {rule}")


class InputTypeError(InputValidationError, TypeError):
    """A value has the wrong type; both a ``ValueError`` and a ``TypeError``."""


class DirectionValidationError(InputValidationError):
    """Direction/Up input is non-finite, zero or (anti-)parallel (spec section 2)."""


class LocalAxisConfigurationError(InputValidationError):
    """``local_direction``/``local_up`` given inconsistently (spec section 2.1, 6)."""


class CandidateStructureError(InputValidationError):
    """Candidates differ in EE count, EE order or local axes, or repeat an EE id."""


class UnsupportedDeviceError(InputValidationError):
    """A ``device`` other than ``"cpu"`` was requested."""


class JointLimitError(InputValidationError):
    """An active joint starts outside its model limits (spec section 6).

    Attributes:
        joint: joint name; value, lower, upper: its value and limits (rad or m).
    """

    def __init__(self, joint: str, value: float, lower: float, upper: float) -> None:
        self.joint = joint
        self.value = value
        self.lower = lower
        self.upper = upper
        super().__init__(
            "robot.joint_q",
            f"active joint '{joint}' starts at {value:.9g}, outside its limits "
            f"[{lower:.9g}, {upper:.9g}]; put the robot in a state within its model "
            "limits first")


class RobotModelError(DirectionUpIKError, ValueError):
    """The robot description cannot be used (malformed URDF, unknown link, ...)."""


class NumericalFailure(DirectionUpIKError, FloatingPointError):
    """Non-finite numbers appeared while solving.

    Attributes:
        candidates: sorted indices of the candidates that produced them.
    """

    def __init__(self, candidates: Sequence[int], detail: str) -> None:
        self.candidates = tuple(int(c) for c in candidates)
        super().__init__(
            f"numerical failure ({detail}) in candidate indices {list(self.candidates)}")
