"""Direction-Up targets (spec section 2).

A target asks the TCP of end effector ``ee_id`` to reach ``position_world`` with
its local working axis along ``direction_world`` and its local up axis along
``up_world`` (the up axis fixes the roll about the direction; it is a tool axis,
not "world up").

Constraint modes, chosen per target (beyond the spec's full mode):

=============  ==============================  ==========================================
mode           how to ask for it               constrains
=============  ==============================  ==========================================
``"full"``     direction_world and up_world    position + direction + roll (full pose)
``"axis"``     ``up_world=None``               position + direction (roll free, Axis IK)
``"position"`` both world directions ``None``  position only (rotation free)
=============  ==============================  ==========================================

Local axes (which TCP axes are the working and up axes):

* both ``local_direction`` and ``local_up`` omitted: +X and +Y;
* both given as vectors: those vectors;
* both ``None``: the full TCP convention, +Z working axis, +Y up (+X = Up x Direction);
* exactly one ``None``: :class:`LocalAxisConfigurationError`.
"""

from __future__ import annotations

import math
import numbers
import struct
from typing import Optional, Tuple

import numpy as np

from .errors import (DirectionValidationError, InputTypeError, InputValidationError,
                     LocalAxisConfigurationError)

#: Default local working axis (+X) and up axis (+Y) when both are omitted.
DEFAULT_LOCAL_DIRECTION = (1.0, 0.0, 0.0)
DEFAULT_LOCAL_UP = (0.0, 1.0, 0.0)
#: Full TCP convention, selected by ``local_direction=None, local_up=None``.
TCP_LOCAL_DIRECTION = (0.0, 0.0, 1.0)
TCP_LOCAL_UP = (0.0, 1.0, 0.0)

#: Direction and Up closer than this (sine of their angle) count as parallel.
PARALLEL_SINE_TOL = 1e-6

MODES = ("full", "axis", "position")


def _floats3(value, field: str) -> Tuple[float, float, float]:
    """The three components of a 3-sequence as finite Python floats (float64 values).

    Raises:
        InputTypeError: not a sequence of three real numbers.
        DirectionValidationError: a component is NaN or infinite.
    """
    if type(value) is np.ndarray and value.shape == (3,) and value.dtype.kind == "f":
        # the common case, without the per-component checks (tolist of a longdouble array
        # would give longdoubles: rounded to float64 first, as everywhere else)
        x, y, z = (value if value.dtype == np.float64 else value.astype(np.float64)).tolist()
    elif (type(value) is tuple or type(value) is list) and len(value) == 3 \
            and type(value[0]) is float and type(value[1]) is float and type(value[2]) is float:
        x, y, z = value  # a sequence of Python floats (a message's, a computed pose's)
    else:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or \
                (isinstance(value, np.ndarray) and value.ndim != 1):
            raise InputTypeError(field, f"expected a 3-sequence of numbers, got {type(value).__name__}")
        if len(value) != 3:
            raise InputTypeError(field, f"expected 3 components, got {len(value)}")
        for component in value:
            if isinstance(component, bool) or not isinstance(component, (numbers.Real, np.number)) \
                    or isinstance(component, np.complexfloating):
                raise InputTypeError(field, f"components must be real numbers, got {component!r}")
        try:
            x, y, z = (float(c) for c in value)
        except OverflowError:  # an int beyond the float range
            raise DirectionValidationError(field, "every component must be finite, got an integer "
                                                  "beyond the float range") from None
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise DirectionValidationError(field, f"every component must be finite, got {[x, y, z]}")
    return x, y, z


# The vector helpers below work on 3-tuples of Python floats: IEEE arithmetic on floats rounds
# exactly as numpy's elementwise operations do, and a dot product is summed in index order, as
# numpy's dot of two (3,) arrays gives it (test_targets checks both against numpy), without
# numpy's per-call overhead on three numbers (docs/performance.md).
def _unit3(v, field: str) -> Tuple[float, float, float]:
    """The unit vector along a finite 3-tuple ``v``; any length, 1e-308 to 1e308."""
    x, y, z = v
    scale = max(abs(x), abs(y), abs(z))
    if scale == 0.0:
        raise DirectionValidationError(field, "must be a non-zero vector")
    # rescale first so tiny or huge inputs neither underflow nor overflow
    x, y, z = x / scale, y / scale, z / scale
    norm = _norm3((x, y, z))
    return x / norm, y / norm, z / norm


def _cross3(a, b) -> Tuple[float, float, float]:
    """a x b of two 3-tuples (numpy's component formulas)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


def _norm3(v) -> float:
    x, y, z = v
    return math.sqrt(x * x + y * y + z * z)


_PACK3 = struct.Struct("3d").pack


def _frozen3(v) -> np.ndarray:
    """A read-only (3,) float64 array of a 3-tuple of floats (its buffer is immutable bytes)."""
    return np.frombuffer(_PACK3(*v))


def _orthonormal3(direction, up, direction_field: str, up_field: str):
    """:func:`orthonormal_pair` of two 3-sequences, as two 3-tuples of floats."""
    d = _unit3(_floats3(direction, direction_field), direction_field)
    u0 = _unit3(_floats3(up, up_field), up_field)
    if _norm3(_cross3(d, u0)) < PARALLEL_SINE_TOL:
        raise DirectionValidationError(
            f"{direction_field}/{up_field}",
            "Direction and Up must not be parallel or anti-parallel")
    return d, _perpendicular_up(d, u0, _norm3)


def _perpendicular_up(d, u0, norm):
    """Unit ``u0`` made perpendicular to unit ``d`` (both 3-tuples of floats, or of component
    arrays with ``norm`` their row-wise norm): ``d x (u x d)`` normalised, u the rejection."""
    along = u0[0] * d[0] + u0[1] * d[1] + u0[2] * d[2]
    u = (u0[0] - along * d[0], u0[1] - along * d[1], u0[2] - along * d[2])
    length = norm(u)
    u = (u[0] / length, u[1] / length, u[2] / length)
    x = _cross3(u, d)
    length = norm(x)
    x = (x[0] / length, x[1] / length, x[2] / length)
    return _cross3(d, x)


def orthonormal_pair(direction, up, direction_field: str, up_field: str):
    """Normalise ``direction`` and project ``up`` onto its perpendicular plane (spec 5.1).

    Returns:
        (d, u): (3,) read-only unit vectors, ``u`` perpendicular to ``d``.
    Raises:
        DirectionValidationError: zero, non-finite, parallel or anti-parallel inputs.
    """
    d, u = _orthonormal3(direction, up, direction_field, up_field)
    return _frozen3(d), _frozen3(u)


def frame_from_pair(d: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``F = [d | cross(u, d) | u]`` (3, 3), columns, for an orthonormal pair."""
    return np.column_stack([d, np.cross(u, d), u])


class DirectionUpTarget:
    """One end-effector target. Immutable once built; all inputs validated here.

    Args:
        ee_id: end-effector index (0-based) of the robot model.
        position_world: (3,) metres, world frame; the TCP origin's goal.
        direction_world: (3,) any non-zero length, world frame; goal of the
            local working axis. ``None`` (with ``up_world=None``) = position only.
        up_world: (3,) any non-zero length, not parallel to ``direction_world``;
            goal of the local up axis. ``None`` = axis mode (roll free).
        local_direction, local_up: (3,) TCP-frame axes, both vectors or both
            ``None`` (full TCP convention +Z/+Y); default +X/+Y.

    Attributes (normalised, read-only arrays):
        position_world; direction_world (unit) or None; up_world (unit, made
        perpendicular to the direction) or None; local_direction, local_up (the
        resolved TCP axes, unit and perpendicular); mode ("full", "axis",
        "position"); uses_tcp_convention (both local fields were None).
    """

    __slots__ = ("ee_id", "position_world", "direction_world", "up_world", "local_direction",
                 "local_up", "mode", "uses_tcp_convention")

    def __init__(self, ee_id, position_world, direction_world, up_world,
                 local_direction=DEFAULT_LOCAL_DIRECTION, local_up=DEFAULT_LOCAL_UP) -> None:
        if type(ee_id) is not int and (isinstance(ee_id, bool)
                                       or not isinstance(ee_id, (numbers.Integral, np.integer))):
            raise InputTypeError("ee_id", f"must be an integer, got {ee_id!r}")
        if ee_id < 0:
            raise InputValidationError("ee_id", f"must be >= 0, got {ee_id}")
        if (local_direction is None) != (local_up is None):
            raise LocalAxisConfigurationError(
                "local_direction/local_up",
                "give both local fields as vectors or both as None (full TCP convention); "
                "exactly one of them is None")
        tcp = local_direction is None
        if tcp:
            ld, lu = _TCP_LOCAL_PAIR
        elif local_direction is DEFAULT_LOCAL_DIRECTION and local_up is DEFAULT_LOCAL_UP:
            ld, lu = _DEFAULT_LOCAL_PAIR
        else:
            ld, lu = orthonormal_pair(local_direction, local_up, "local_direction", "local_up")
        position = _floats3(position_world, "position_world")
        if direction_world is None:
            if up_world is not None:
                raise DirectionValidationError(
                    "direction_world", "is None but up_world is given; an Up needs a Direction "
                                       "(use up_world=None too for a position-only target)")
            mode, d, u = "position", None, None
        elif up_world is None:
            mode, d, u = "axis", _unit3(_floats3(direction_world, "direction_world"), "direction_world"), None
        else:
            mode = "full"
            d, u = _orthonormal3(direction_world, up_world, "direction_world", "up_world")
        set_ = object.__setattr__
        set_(self, "ee_id", int(ee_id))
        set_(self, "position_world", _frozen3(position))
        set_(self, "direction_world", None if d is None else _frozen3(d))
        set_(self, "up_world", None if u is None else _frozen3(u))
        set_(self, "local_direction", ld)  # read-only; the two conventions' shared by all
        set_(self, "local_up", lu)
        set_(self, "mode", mode)
        set_(self, "uses_tcp_convention", tcp)

    def __setattr__(self, name, value):
        raise AttributeError("DirectionUpTarget is immutable")

    @property
    def rotation_world(self) -> Optional[np.ndarray]:
        """(3, 3) target TCP rotation ``F_world @ F_local.T`` (spec 5.1); None unless full."""
        if self.mode != "full":
            return None
        return (frame_from_pair(self.direction_world, self.up_world)
                @ frame_from_pair(self.local_direction, self.local_up).T)

    def same_local_axes(self, other: "DirectionUpTarget") -> bool:
        """True when ``other`` maps Direction/Up to the same TCP axes."""
        if self.local_direction is other.local_direction and self.local_up is other.local_up:
            return True
        return (float(np.max(np.abs(self.local_direction - other.local_direction))) <= 1e-12
                and float(np.max(np.abs(self.local_up - other.local_up))) <= 1e-12)

    def __repr__(self) -> str:
        def fmt(v):
            return None if v is None else tuple(round(float(x), 6) for x in v)
        return (f"DirectionUpTarget(ee_id={self.ee_id}, mode={self.mode!r}, "
                f"position_world={fmt(self.position_world)}, "
                f"direction_world={fmt(self.direction_world)}, up_world={fmt(self.up_world)}, "
                f"local_direction={fmt(self.local_direction)}, local_up={fmt(self.local_up)})")


# The resolved local axes of the two conventions, computed once and shared (read-only).
_TCP_LOCAL_PAIR = orthonormal_pair(TCP_LOCAL_DIRECTION, TCP_LOCAL_UP, "local_direction", "local_up")
_DEFAULT_LOCAL_PAIR = orthonormal_pair(DEFAULT_LOCAL_DIRECTION, DEFAULT_LOCAL_UP, "local_direction", "local_up")


# ------------------------------------------------------------------ many targets as arrays
def _real_array(value, field: str, shape_words: str) -> np.ndarray:
    """``value`` as a float64 array; InputTypeError unless it holds real numbers only."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):  # ragged nested sequences
        raise InputTypeError(field, f"expected {shape_words} of real numbers") from None
    if array.dtype.kind not in "fiu":
        raise InputTypeError(field, f"expected {shape_words} of real numbers, got dtype {array.dtype}")
    return array.astype(np.float64)


def _first_row(bad: np.ndarray, e: int, field: str, rule: str):
    """DirectionValidationError at the first target where ``bad`` (B * E,) holds (E per candidate)."""
    b, k = divmod(int(np.flatnonzero(bad)[0]), e)
    return DirectionValidationError(field, rule, candidate=b, target=k)


# The row-wise helpers below run the 3-tuple helpers' operations on three (B * E,) arrays of
# components (``_cross3`` itself takes them), so every row gets a DirectionUpTarget's values.
def _components(rows: np.ndarray):
    """(B, E, 3) -> three contiguous (B * E,) arrays x, y, z."""
    return tuple(np.ascontiguousarray(rows.reshape(-1, 3).T))


def _rows_of(v, shape) -> np.ndarray:
    """Three (B * E,) component arrays -> (B, E, 3)."""
    return np.stack(v, axis=-1).reshape(shape)


def _norms(v) -> np.ndarray:
    x, y, z = v
    return np.sqrt(x * x + y * y + z * z)


def _units(v, e: int, field: str):
    """:func:`_unit3` of every row of components ``v``."""
    x, y, z = v
    scale = np.maximum(np.maximum(np.abs(x), np.abs(y)), np.abs(z))
    if not scale.all():
        raise _first_row(scale == 0.0, e, field, "must be a non-zero vector")
    x, y, z = x / scale, y / scale, z / scale
    norm = _norms((x, y, z))
    return x / norm, y / norm, z / norm


def _orthonormal_rows(direction, up, e: int):
    """:func:`_orthonormal3` of every row pair of components."""
    d, u0 = _units(direction, e, "directions"), _units(up, e, "ups")
    parallel = _norms(_cross3(d, u0)) < PARALLEL_SINE_TOL
    if parallel.any():
        raise _first_row(parallel, e, "directions/ups", "Direction and Up must not be parallel or anti-parallel")
    return d, _perpendicular_up(d, u0, _norms)


class TargetBatch:
    """B candidates of E targets as arrays: the bulk form of a request's ``candidates``.

    Accepted wherever a sequence of candidates of :class:`DirectionUpTarget` is (the batch
    solve, the search) and packed without a Python object per target: the targets and their
    rules are those of E DirectionUpTarget per candidate built from the same rows, with the
    same normalised values. Every candidate constrains the same parts (the arrays given).

    Args:
        ee_ids: (E,) distinct end-effector indices, one per slot (an int: E = 1).
        positions: (B, E, 3) metres, world; (B, 3) when E = 1.
        directions: like ``positions``, any non-zero lengths, or None (position only).
        ups: like ``positions``, not parallel to ``directions``, or None (roll free).
        local_direction, local_up: TCP axes, (3,) for every slot or (E, 3), both vectors or
            both None (full TCP convention +Z/+Y); default +X/+Y.

    Attributes (read-only arrays): ee_ids (E,) int64; position (B, E, 3); direction, up
    (B, E, 3) unit (``up`` made perpendicular to ``direction``) or None; local_direction,
    local_up (E, 3); mode ("full", "axis", "position"); uses_tcp_convention.

    Raises:
        InputTypeError: a wrong type or shape; DirectionValidationError: non-finite, zero or
        parallel rows (naming the candidate and target); LocalAxisConfigurationError, and
        InputValidationError for ee_ids (negative or repeated).
    """

    __slots__ = ("ee_ids", "position", "direction", "up", "local_direction", "local_up", "mode",
                 "uses_tcp_convention")

    def __init__(self, ee_ids, positions, directions=None, ups=None,
                 local_direction=DEFAULT_LOCAL_DIRECTION, local_up=DEFAULT_LOCAL_UP) -> None:
        ids = np.atleast_1d(np.asarray(ee_ids))
        if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
            raise InputTypeError("ee_ids", f"expected an integer or a 1-D sequence of integers, got {ee_ids!r}")
        if (ids < 0).any():
            raise InputValidationError("ee_ids", f"must be >= 0, got {ids.tolist()}")
        if len(set(ids.tolist())) != ids.size:
            raise InputValidationError("ee_ids", f"must be distinct, got {ids.tolist()}")
        e = ids.size
        position = self._rows(positions, "positions", e)
        if position.shape[0] == 0:
            raise InputValidationError("positions", "must contain at least one candidate")
        if directions is None and ups is not None:
            raise DirectionValidationError("directions", "is None but ups are given; an Up needs a Direction")
        direction = up = None
        if directions is not None:
            direction = self._rows(directions, "directions", e)
            if direction.shape != position.shape:
                raise InputTypeError("directions", f"expected the shape of positions {position.shape}, "
                                                   f"got {direction.shape}")
            if ups is None:
                direction = _rows_of(_units(_components(direction), e, "directions"), position.shape)
            else:
                up = self._rows(ups, "ups", e)
                if up.shape != position.shape:
                    raise InputTypeError("ups", f"expected the shape of positions {position.shape}, got {up.shape}")
                d, u = _orthonormal_rows(_components(direction), _components(up), e)
                direction, up = _rows_of(d, position.shape), _rows_of(u, position.shape)
        if (local_direction is None) != (local_up is None):
            raise LocalAxisConfigurationError(
                "local_direction/local_up", "give both local fields as vectors or both as None (full TCP "
                                            "convention); exactly one of them is None")
        set_ = object.__setattr__
        set_(self, "ee_ids", ids.astype(np.int64))
        set_(self, "position", position)
        set_(self, "direction", direction)
        set_(self, "up", up)
        locals_ = self._local_axes(local_direction, local_up, e)
        set_(self, "local_direction", locals_[0])
        set_(self, "local_up", locals_[1])
        set_(self, "mode", "position" if direction is None else ("axis" if up is None else "full"))
        set_(self, "uses_tcp_convention", local_direction is None)
        for name in ("ee_ids", "position", "direction", "up", "local_direction", "local_up"):
            value = getattr(self, name)
            if value is not None:
                value.setflags(write=False)

    @staticmethod
    def _rows(value, field: str, e: int) -> np.ndarray:
        """(B, E, 3) float64 of finite rows; (B, 3) taken as (B, 1, 3) when E = 1."""
        array = _real_array(value, field, f"a (B, {e}, 3) array")
        if e == 1 and array.ndim == 2:
            array = array[:, None, :]
        if array.ndim != 3 or array.shape[1:] != (e, 3):
            raise InputTypeError(field, f"expected shape (B, {e}, 3) for {e} end effector(s), got {array.shape}")
        finite = np.isfinite(array).all(axis=-1).ravel()
        if not finite.all():
            raise _first_row(~finite, e, field, "every component must be finite")
        return array

    @staticmethod
    def _local_axes(local_direction, local_up, e: int):
        """(E, 3) local axes of every slot, resolved as DirectionUpTarget resolves them."""
        if local_direction is None:
            pairs = [_TCP_LOCAL_PAIR] * e
        elif local_direction is DEFAULT_LOCAL_DIRECTION and local_up is DEFAULT_LOCAL_UP:
            pairs = [_DEFAULT_LOCAL_PAIR] * e
        else:
            ld = _real_array(local_direction, "local_direction", "a (3,) or (E, 3) array")
            lu = _real_array(local_up, "local_up", "a (3,) or (E, 3) array")
            if ld.shape not in ((3,), (e, 3)) or lu.shape not in ((3,), (e, 3)):
                raise InputTypeError("local_direction/local_up", f"expected shape (3,) or ({e}, 3), got "
                                                                 f"{ld.shape} and {lu.shape}")
            ld, lu = np.broadcast_to(ld, (e, 3)), np.broadcast_to(lu, (e, 3))
            pairs = [orthonormal_pair(ld[k], lu[k], "local_direction", "local_up") for k in range(e)]
        return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])

    @classmethod
    def from_tcp_poses(cls, tcp, ee_ids=None) -> "TargetBatch":
        """Full-pose targets (TCP convention: +Z working axis, +Y up) at TCP world transforms
        ``tcp`` (B, E, 4, 4), for end effectors ``ee_ids`` (default 0 .. E-1): the batch form
        of :func:`full_pose_candidates`."""
        tcp = _real_array(tcp, "tcp", "a (B, E, 4, 4) array")
        if tcp.ndim != 4 or tcp.shape[2:] != (4, 4):
            raise InputTypeError("tcp", f"expected shape (B, E, 4, 4), got {tcp.shape}")
        ids = np.arange(tcp.shape[1]) if ee_ids is None else ee_ids
        return cls(ids, tcp[:, :, :3, 3], tcp[:, :, :3, 2], tcp[:, :, :3, 1], None, None)

    def __setattr__(self, name, value):
        raise AttributeError("TargetBatch is immutable")

    @property
    def num_candidates(self) -> int:
        return int(self.position.shape[0])

    @property
    def num_targets(self) -> int:
        return int(self.position.shape[1])

    def __repr__(self) -> str:
        return (f"TargetBatch({self.num_candidates} candidates x {self.num_targets} targets, ee_ids="
                f"{self.ee_ids.tolist()}, mode={self.mode!r})")


def full_pose_candidates(tcp) -> list:
    """One candidate per row of ``tcp`` (N, E, 4, 4) TCP world transforms: a full-pose target
    (TCP convention: +Z working axis, +Y up) for every end effector, at that pose."""
    return [tuple(DirectionUpTarget(e, t[e, :3, 3], t[e, :3, 2], t[e, :3, 1], None, None)
                  for e in range(len(t))) for t in tcp]
