"""Small maths of the kernels: 3-vectors, sin/cos, the Direction-Up axis errors, sums.

3-vectors are tuples of floats (kept in registers). Every expression keeps the operation
order of the numpy reference (``core.rotations``, ``np.sum``), so both backends round
alike; ``test/core/test_compiled_backend.py`` checks that they agree.

The tuple helpers (``vec3`` ... ``mat_vec3``, ``axis_error_parts``) are ordinary calls that
LLVM inlines; the small loop helpers (``mat_mul3``, ``copy1``, ``copy2``) are marked
``force_inline``, since LLVM's own choice left them calls and the solves ran slower
(docs/performance.md).
"""

from __future__ import annotations

import math

import numpy as np

from .layout import TURN
from .numba_support import jitable, stack_array


@jitable
def vec3(a):
    """(3,) array -> 3-tuple."""
    return (a[0], a[1], a[2])


@jitable
def dot3(a, b):
    """Dot product of two 3-vectors, summed left to right like ``np.sum(a * b, -1)``."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jitable
def cross3(a, b):
    """Cross product a x b (numpy's component formulas)."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@jitable
def norm3(a):
    """Euclidean length of a 3-vector."""
    return np.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@jitable
def mat_vec3(a, v):
    """(3, 3) array times 3-vector -> 3-tuple."""
    return (a[0, 0] * v[0] + a[0, 1] * v[1] + a[0, 2] * v[2],
            a[1, 0] * v[0] + a[1, 1] * v[1] + a[1, 2] * v[2],
            a[2, 0] * v[0] + a[2, 1] * v[1] + a[2, 2] * v[2])


@jitable(force_inline=True)
def mat_mul3(a, b, out):
    """out (3, 3) = a (3, 3) @ b (3, 3); ``out`` must not alias ``a`` or ``b``."""
    for i in range(3):
        for j in range(3):
            out[i, j] = a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j]


# sin and cos of a joint angle without libm, whose sincos branches on the argument's range
# (mispredicted for the varied angles of a batch; docs/performance.md). Cody-Waite reduction
# by pi/2 in three parts (fdlibm's: the first two have 33 bits, so their products with the
# quadrant n are exact for |n| < 2^20, and the reduced angle keeps its relative accuracy
# near the zeros of sin and cos), then Taylor polynomials on |r| <= pi/4 whose first
# omitted terms are below 1e-17 relative.
_TWO_OVER_PI = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e+00
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_2T = 2.02226624879595063154e-21
_OWN_TRIG_RANGE = 100.0  # rad; larger (within 1.5 ulp up to here) or non-finite angles go to libm
_SIN = tuple((-1.0) ** i / math.factorial(2 * i + 1) for i in range(1, 9))
_COS = tuple((-1.0) ** i / math.factorial(2 * i) for i in range(1, 9))


@jitable
def own_sincos(x):
    """(sin x, cos x) of a float within 1.5 ulp (|x| < 100; libm beyond), without branches on its range."""
    if not abs(x) < _OWN_TRIG_RANGE:
        return np.sin(x), np.cos(x)
    n = np.rint(x * _TWO_OVER_PI)
    r = ((x - n * _PIO2_1) - n * _PIO2_2) - n * _PIO2_2T
    z = r * r
    s1, s2, s3, s4, s5, s6, s7, s8 = _SIN
    c1, c2, c3, c4, c5, c6, c7, c8 = _COS
    s = r + r * z * (s1 + z * (s2 + z * (s3 + z * (s4 + z * (s5 + z * (s6 + z * (s7 + z * s8)))))))
    c = 1.0 + z * (c1 + z * (c2 + z * (c3 + z * (c4 + z * (c5 + z * (c6 + z * (c7 + z * c8)))))))
    quadrant = np.int64(n) & 3
    sin_x = c if quadrant & 1 else s
    cos_x = s if quadrant & 1 else c
    if quadrant & 2:
        sin_x = -sin_x
    if (quadrant + 1) & 2:
        cos_x = -cos_x
    return sin_x, cos_x


@jitable
def orthogonal_unit(v):
    """Unit vector orthogonal to unit 3-vector ``v``: v x e_k, k = argmin |v_i| (first on ties).

    Same as :func:`direction_up_ik.core.rotations.orthogonal_unit`.
    """
    k = 0
    if abs(v[1]) < abs(v[k]):
        k = 1
    if abs(v[2]) < abs(v[k]):
        k = 2
    basis = (1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0)
    w = cross3(v, basis)
    n = norm3(w)
    return (w[0] / n, w[1] / n, w[2] / n)


@jitable
def axis_error_parts(current, target):
    """(v, s, c, scale) of :func:`axis_error` away from opposite axes: v = target x current,
    s = |v|, c = target . current, axis_error = scale * v (scale 1 where s < 1e-12)."""
    v = cross3(target, current)
    s = norm3(v)
    c = dot3(target, current)
    if s < 1e-12:  # rotations._PARALLEL_EPS
        return v, s, c, 1.0
    return v, s, c, np.arctan2(s, c) / s


@jitable
def axis_error(current, target):
    """Rotation vector (rad) taking unit axis ``target`` onto unit ``current``.

    Same as :func:`direction_up_ik.core.rotations.axis_error` (length = angle in
    [0, pi]; opposite axes: pi about :func:`orthogonal_unit` of ``target``).
    """
    v, s, c, scale = axis_error_parts(current, target)
    if s < 1e-12 and c < 0.0:
        n = orthogonal_unit(target)
        return (np.pi * n[0], np.pi * n[1], np.pi * n[2])
    return (v[0] * scale, v[1] * scale, v[2] * scale)  # scale 1.0 for parallel axes: v itself


@jitable
def align_vector(v, current, target):
    """``R_align @ v``, R_align the smallest rotation taking unit ``current`` onto unit ``target``.

    Same as :func:`direction_up_ik.core.rotations.align_vector`.
    """
    axis = cross3(current, target)
    a = (current[0] + target[0], current[1] + target[1], current[2] + target[2])
    one_plus_cos = 0.5 * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
    if one_plus_cos < 1e-12:  # opposite: rotate by pi about orthogonal_unit(target)
        n = orthogonal_unit(target)
        d = 2.0 * dot3(n, v)
        return (d * n[0] - v[0], d * n[1] - v[1], d * n[2] - v[2])
    kxv = cross3(axis, v)
    kkxv = cross3(axis, kxv)
    return (v[0] + kxv[0] + kkxv[0] / one_plus_cos, v[1] + kxv[1] + kkxv[1] / one_plus_cos,
            v[2] + kxv[2] + kkxv[2] / one_plus_cos)


@jitable
def pairwise_block(x, start, n):
    """numpy's pairwise sum of ``x[start:start + n]`` for n <= 128 (one leaf of its recursion).

    Fewer than 8 values: left to right; else eight interleaved partial sums
    combined as ((0+1)+(2+3))+((4+5)+(6+7)), then the rest left to right.
    """
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += x[i]
        return total
    r0, r1, r2, r3 = x[start], x[start + 1], x[start + 2], x[start + 3]
    r4, r5, r6, r7 = x[start + 4], x[start + 5], x[start + 6], x[start + 7]
    i = 8
    while i + 8 <= n:
        j = start + i
        r0 += x[j]
        r1 += x[j + 1]
        r2 += x[j + 2]
        r3 += x[j + 3]
        r4 += x[j + 4]
        r5 += x[j + 5]
        r6 += x[j + 6]
        r7 += x[j + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += x[start + i]
        i += 1
    return total


@jitable
def pairwise_sum(x, start, n):
    """Sum of ``x[start:start + n]`` in numpy's order (``np.add.reduce`` of a contiguous row).

    numpy splits more than 128 values into halves (the first a multiple of 8)
    recursively and adds the halves' sums; this evaluates that tree with an
    explicit stack in the caller's frame (numba cannot cache recursive functions,
    and the kernel has no heap: :func:`stack_array`). 64 frames suffice for any n
    (each level at least halves it).
    """
    if n <= 128:
        return pairwise_block(x, start, n)
    # post-order walk; a frame is (start, n, stage 0/1/2 = left/right/combine, left sum)
    s_start = stack_array(64, np.int64)
    s_n = stack_array(64, np.int64)
    s_left = stack_array(64, np.float64)
    s_stage = stack_array(64, np.int64)
    top = 0
    s_start[0], s_n[0], s_stage[0] = start, n, 0
    result = 0.0
    while top >= 0:
        fs, fn = s_start[top], s_n[top]
        half = fn // 2
        half -= half % 8
        if s_stage[top] == 0:       # descend into the left half
            s_stage[top] = 1
            child_start, child_n = fs, half
        elif s_stage[top] == 1:     # left done (in result): descend into the right half
            s_left[top] = result
            s_stage[top] = 2
            child_start, child_n = fs + half, fn - half
        else:                       # both done: combine and pop
            result = s_left[top] + result
            top -= 1
            continue
        if child_n <= 128:
            result = pairwise_block(x, child_start, child_n)
        else:
            top += 1
            s_start[top], s_n[top], s_stage[top] = child_start, child_n, 0
    return result


@jitable
def sum_of_squares(x, scratch):
    """``np.sum(x * x)`` of a 1-D array ``x`` (pairwise order); ``scratch``: at least x's length."""
    for i in range(x.shape[0]):
        scratch[i] = x[i] * x[i]
    return pairwise_sum(scratch, 0, x.shape[0])


@jitable
def all_finite(x):
    """True when every entry of the 1-D array ``x`` is finite."""
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@jitable
def all_finite2(x):
    """True when every entry of the 2-D array ``x`` is finite."""
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            if not np.isfinite(x[i, j]):
                return False
    return True


# Plain loops instead of slice assignment (``dst[:] = src``), which numba compiles to its
# general broadcasting copy: slower for these 3 to 81 values.
@jitable(force_inline=True)
def copy1(dst, src):
    """dst[:] = src for 1-D arrays of equal length."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@jitable(force_inline=True)
def copy2(dst, src):
    """dst[:, :] = src for 2-D arrays of equal shape."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


@jitable(force_inline=True)
def nearest_turns(q, toward, lo, hi):
    """Whole turns (a float) that bring angle ``q`` nearest ``toward`` with ``q + TURN * turns``
    in [``lo``, ``hi``], ties to the even count (``core.problem.nearest_turns``)."""
    return min(max(np.rint((toward - q) / TURN), np.ceil((lo - q) / TURN)), np.floor((hi - q) / TURN))
