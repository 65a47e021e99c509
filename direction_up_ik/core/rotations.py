"""Small, batched rotation helpers (numpy only), and the check of a rigid transform.

All functions accept arrays with arbitrary leading batch dimensions ``(...)``
and work in float64. Angles are radians.
"""

from __future__ import annotations

import numpy as np

from .errors import InputValidationError

#: Below this |a x b| the two unit axes are treated as parallel/opposite.
_PARALLEL_EPS = 1e-12


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll/pitch/yaw (fixed axes X, Y, Z) -> rotation matrix (3, 3).

    ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``.
    """
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def matrix_to_rpy(rotation: np.ndarray) -> np.ndarray:
    """Inverse of :func:`rpy_to_matrix` for one (3, 3) matrix -> (3,) roll, pitch, yaw."""
    r = np.asarray(rotation, dtype=np.float64)
    pitch = np.arctan2(-r[2, 0], np.hypot(r[0, 0], r[1, 0]))
    if np.hypot(r[0, 0], r[1, 0]) < 1e-12:  # gimbal lock: put all of it in roll
        return np.array([np.arctan2(-r[1, 2], r[1, 1]), pitch, 0.0])
    return np.array([np.arctan2(r[2, 1], r[2, 2]), pitch, np.arctan2(r[1, 0], r[0, 0])])


def quaternion_to_matrix(xyzw) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion ``(x, y, z, w)`` (the ``geometry_msgs``
    order), normalised first. The caller rejects non-finite or zero quaternions."""
    x, y, z, w = (float(v) for v in xyzw)
    n = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def make_transform(rotation=None, translation=None) -> np.ndarray:
    """Homogeneous transform (4, 4) from a (3, 3) rotation and a (3,) translation."""
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    if translation is not None:
        t[:3, 3] = translation
    return t


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrix of one (3,) vector, so that ``skew(a) @ b == cross(a, b)``."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def orthogonal_unit(v: np.ndarray) -> np.ndarray:
    """A deterministic unit vector orthogonal to each unit vector ``v`` (..., 3).

    Crosses ``v`` with the world axis it is least aligned with (lowest index on
    ties), so the same input always gives the same axis.
    """
    v = np.asarray(v, dtype=np.float64)
    k = np.argmin(np.abs(v), axis=-1)
    basis = np.eye(3)[k]
    w = np.cross(v, basis)
    return w / np.linalg.norm(w, axis=-1, keepdims=True)


def axis_error(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Rotation vector taking unit axis ``target`` onto unit axis ``current``.

    The sign convention matches ``e_position = current - target``. Its length is
    the angle between the axes in [0, pi] (radians). For opposite axes the
    rotation axis is :func:`orthogonal_unit` of ``target`` (spec section 5.2).

    Args:
        current, target: (..., 3) unit vectors.
    Returns:
        (..., 3) rotation vectors, radians.
    """
    v = np.cross(target, current)
    s = np.linalg.norm(v, axis=-1)
    c = np.sum(target * current, axis=-1)
    angle = np.arctan2(s, c)
    small = s < _PARALLEL_EPS
    # angle / s -> 1 as s -> 0 with c > 0, so the small-angle branch is v itself.
    scale = np.where(small, 1.0, angle / np.where(small, 1.0, s))
    out = v * scale[..., None]
    opposite = small & (c < 0.0)
    if np.any(opposite):
        out[opposite] = np.pi * orthogonal_unit(target[opposite] if target.ndim > 1
                                                else target)
    return out


def align_vector(v: np.ndarray, current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Apply the smallest rotation taking unit ``current`` onto unit ``target`` to ``v``.

    This is ``R_align @ v`` of spec section 5.2. Opposite axes use a rotation by pi
    about :func:`orthogonal_unit` of ``target`` (the axis :func:`axis_error` uses).

    Args:
        v, current, target: (..., 3); ``current`` and ``target`` unit vectors.
    Returns:
        (..., 3) rotated vectors.
    """
    axis = np.cross(current, target)
    # 1 + cos computed as |a + b|^2 / 2 keeps its relative accuracy near -1.
    one_plus_cos = 0.5 * np.sum((current + target) ** 2, axis=-1)
    opposite = one_plus_cos < _PARALLEL_EPS
    safe = np.where(opposite, 1.0, one_plus_cos)
    # Rodrigues for unit axes: R v = v + k x v + k x (k x v) / (1 + cos), k = a x b.
    kxv = np.cross(axis, v)
    out = v + kxv + np.cross(axis, kxv) / safe[..., None]
    if np.any(opposite):
        n = orthogonal_unit(target[opposite] if target.ndim > 1 else target)
        vo = v[opposite] if v.ndim > 1 else v
        out[opposite] = 2.0 * np.sum(n * vo, axis=-1, keepdims=True) * n - vo
    return out


def axis_error_derivative(current: np.ndarray, target: np.ndarray, d_current: np.ndarray) -> np.ndarray:
    """Derivative of :func:`axis_error` (``target`` fixed) along ``d_current``.

    With v = target x current, s = |v|, c = target . current, angle = atan2(s, c):
    axis_error = (angle / s) v, so its derivative is (angle / s) dv + d(angle / s) v,
    dv = target x d_current. Where the axes are parallel (s < 1e-12) axis_error is
    v itself (derivative dv); where they are opposite it is a constant (derivative 0).

    Args:
        current, target: (..., 3) unit vectors; d_current: (..., 3) the change of
            ``current`` (all broadcast together).
    Returns:
        (..., 3) radians per unit of the change.
    """
    v = np.cross(target, current)
    s = np.linalg.norm(v, axis=-1)
    c = np.sum(target * current, axis=-1)
    small = s < _PARALLEL_EPS
    safe = np.where(small, 1.0, s)
    scale = np.where(small, 1.0, np.arctan2(s, c) / safe)
    dv = np.cross(target, d_current)
    ds = np.sum(v * dv, axis=-1) / safe
    dc = np.sum(target * d_current, axis=-1)
    d_angle = (c * ds - s * dc) / (s * s + c * c)
    d_scale = np.where(small, 0.0, (d_angle - scale * ds) / safe)
    out = dv * scale[..., None] + v * d_scale[..., None]
    return np.where((small & (c < 0.0))[..., None], 0.0, out)


def align_vector_derivative(v: np.ndarray, current: np.ndarray, target: np.ndarray,
                            dv: np.ndarray, d_current: np.ndarray) -> np.ndarray:
    """Derivative of :func:`align_vector` (``target`` fixed) along ``dv``, ``d_current``.

    Differentiates the Rodrigues form v + k x v + k x (k x v) / (1 + cos), k =
    current x target, 1 + cos = |current + target|^2 / 2; for opposite axes the
    rotation by pi about a fixed axis n gives 2 (n . dv) n - dv.

    Args:
        v, current, target, dv, d_current: (..., 3), broadcast together.
    Returns:
        (..., 3) the change of the aligned vector.
    """
    k = np.cross(current, target)
    a = current + target
    one_plus_cos = 0.5 * np.sum(a * a, axis=-1)
    opposite = one_plus_cos < _PARALLEL_EPS
    safe = np.where(opposite, 1.0, one_plus_cos)[..., None]
    dk = np.cross(d_current, target)
    kxv = np.cross(k, v)
    d_kxv = np.cross(dk, v) + np.cross(k, dv)
    d_kkxv = np.cross(dk, kxv) + np.cross(k, d_kxv)
    d_one_plus_cos = np.sum(a * d_current, axis=-1)[..., None]
    out = dv + d_kxv + d_kkxv / safe - np.cross(k, kxv) * (d_one_plus_cos / (safe * safe))
    if np.any(opposite):
        shape = np.broadcast_shapes(v.shape, current.shape, target.shape, dv.shape, d_current.shape)
        out = np.array(np.broadcast_to(out, shape))
        opposite = np.broadcast_to(opposite, shape[:-1])
        n = orthogonal_unit(np.broadcast_to(target, shape)[opposite])
        dvo = np.broadcast_to(dv, shape)[opposite]
        out[opposite] = 2.0 * np.sum(n * dvo, axis=-1, keepdims=True) * n - dvo
    return out


def normalize(v: np.ndarray) -> np.ndarray:
    """Unit vectors of (..., 3) non-zero vectors."""
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def validate_transform(xform, field: str, error=InputValidationError) -> np.ndarray:
    """Check a (4, 4) rigid transform and return it as a read-only float64 copy.

    Raises ``error`` naming ``field`` when it is not finite, not 4x4, its last row
    is not (0, 0, 0, 1) or its rotation is not orthonormal with determinant +1
    (tolerance 1e-6).
    """
    try:
        complex_values = bool(np.iscomplexobj(xform))
        t = None if complex_values else np.array(xform, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise error(field, "must be a 4x4 numeric transform") from None
    if complex_values:
        raise error(field, "must be a 4x4 real transform, got complex values")
    if t.shape != (4, 4):
        raise error(field, f"must have shape (4, 4), got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise error(field, "must contain only finite values")
    if not np.allclose(t[3], (0.0, 0.0, 0.0, 1.0), atol=1e-9):
        raise error(field, "last row must be (0, 0, 0, 1)")
    r = t[:3, :3]
    if np.max(np.abs(r)) > 1.0 + 1e-6 or not np.allclose(r @ r.T, np.eye(3), atol=1e-6) \
            or np.linalg.det(r) < 0.0:
        raise error(field, "rotation part must be orthonormal with determinant +1")
    t.setflags(write=False)
    return t
