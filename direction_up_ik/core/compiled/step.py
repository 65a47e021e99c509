"""The damped least-squares step (spec 5.3) in the kernels: the linear solves, the step kept
inside the joint limits and capped, and the float32 rounding of a state.
"""

from __future__ import annotations

import numpy as np

from .numba_support import jitable
from .vector_math import sum_of_squares


@jitable(force_inline=True)
def lu_sized(a, x, n):
    """Solve ``a @ y = x`` in place: ``a`` (n, n) becomes its LU factors, ``x`` (n,) becomes y.

    Gaussian elimination with partial pivoting (first row of largest |pivot|,
    like LAPACK getrf). Returns False when a pivot is exactly zero (singular;
    ``numpy.linalg.solve`` raises LinAlgError there). Inlined, so that a caller passing a
    constant ``n`` gets it compiled for that size (:data:`FIXED_STEP_SIZES`).
    """
    for col in range(n):
        p = col
        best = abs(a[col, col])
        for i in range(col + 1, n):
            v = abs(a[i, col])
            if v > best:
                best, p = v, i
        if best == 0.0:
            return False
        if p != col:
            for j in range(n):
                a[col, j], a[p, j] = a[p, j], a[col, j]
            x[col], x[p] = x[p], x[col]
        pivot = a[col, col]
        for i in range(col + 1, n):
            f = a[i, col] / pivot
            if f != 0.0:
                for j in range(col + 1, n):
                    a[i, j] -= f * a[col, j]
                x[i] -= f * x[col]
    for i in range(n - 1, -1, -1):
        total = x[i]
        for j in range(i + 1, n):
            total -= a[i, j] * x[j]
        x[i] = total / a[i, i]
    return True


@jitable(force_inline=True)
def ldl_sized(a, x, n):
    """Solve ``a @ y = x`` in place for a symmetric ``a`` (n, n) by a = L D L^T without
    pivoting (L unit lower, below the diagonal of ``a``; D on it), ``x`` (n,) becomes y.
    Returns False when a pivot is not positive (``a`` not numerically positive definite;
    ``a`` and ``x`` are then partly overwritten). Reads only the lower triangle. Inlined
    like :func:`lu_sized`, for the same reason."""
    for j in range(n):
        d = a[j, j]
        for k in range(j):
            d -= a[j, k] * a[j, k] * a[k, k]
        if not d > 0.0:
            return False
        a[j, j] = d
        inv = 1.0 / d
        for i in range(j + 1, n):
            t = a[i, j]
            for k in range(j):
                t -= a[i, k] * a[j, k] * a[k, k]
            a[i, j] = t * inv
    for i in range(n):
        t = x[i]
        for k in range(i):
            t -= a[i, k] * x[k]
        x[i] = t
    for i in range(n - 1, -1, -1):
        t = x[i] / a[i, i]
        for k in range(i + 1, n):
            t -= a[k, i] * x[k]
        x[i] = t
    return True


@jitable(force_inline=True)
def clamped_matrix(h, fixed, matrix, a):
    """``h`` (A, A) with the rows and columns of the ``fixed`` joints (A,) bool replaced by
    those of the identity, into ``matrix``; ``a`` = A."""
    for i in range(a):
        for j in range(a):
            matrix[i, j] = h[i, j] if not fixed[i] and not fixed[j] else 0.0
        if fixed[i]:
            matrix[i, i] = 1.0


@jitable(force_inline=True)
def system_matrix(h, fixed, clamped, matrix, a):
    """``matrix`` = ``h`` (A, A), or its :func:`clamped_matrix` when ``clamped`` (some joint
    fixed); ``a`` = A."""
    if clamped:
        clamped_matrix(h, fixed, matrix, a)
    else:
        for i in range(a):
            for j in range(a):
                matrix[i, j] = h[i, j]


@jitable(force_inline=True)
def clamped_solve(ldl, h, fixed, clamped, rhs, matrix, x, a):
    """x (A,) = M^-1 rhs for M = :func:`system_matrix` (built in ``matrix``, scratch): by
    :func:`ldl_sized` when ``ldl``, by :func:`lu_sized` otherwise or where L D L^T meets a
    non-positive pivot; ``a`` = A. Returns False when LU meets an exactly singular M."""
    system_matrix(h, fixed, clamped, matrix, a)
    for i in range(a):
        x[i] = rhs[i]
    if ldl:
        if ldl_sized(matrix, x, a):
            return True
        system_matrix(h, fixed, clamped, matrix, a)
        for i in range(a):
            x[i] = rhs[i]
    return lu_sized(matrix, x, a)


#: (active joints, residual rows) of the systems whose step :func:`limited_dls_step` runs
#: compiled for those sizes (the 7- and 6-joint arms with one TCP, the bundled dual-arm
#: torso): constant loop bounds let the compiler unroll the small products and the
#: factorisation, the same operations in the same order, so the same bits
#: (docs/performance.md). Each size is also a branch of :func:`limited_dls_step`.
FIXED_STEP_SIZES = ((7, 9), (6, 9), (16, 18))


@jitable(own_code=True)
def limited_dls_step(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                     value, fixed, scratch, ldl):
    """:func:`dls_step_sized` of the Jacobian's shape, compiled for the sizes of
    :data:`FIXED_STEP_SIZES` (spelled out: the sizes must be constants where it is inlined)."""
    a, n = jac.shape
    if a == 7 and n == 9:
        return dls_step_sized(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                              value, fixed, scratch, ldl, 7, 9)
    if a == 6 and n == 9:
        return dls_step_sized(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                              value, fixed, scratch, ldl, 6, 9)
    if a == 16 and n == 18:
        return dls_step_sized(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                              value, fixed, scratch, ldl, 16, 18)
    return dls_step_sized(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                          value, fixed, scratch, ldl, a, n)


@jitable(force_inline=True)
def dls_step_sized(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                   value, fixed, scratch, ldl, a, n):
    """Damped least-squares step inside the joint bounds, norm-capped (spec 5.3).

    Solves (J^T J + damping I) dq = -J^T r; joints whose step leaves
    [lower - q, upper - q] are fixed at that bound and the others re-solved, up
    to A passes; then dq is scaled to norm <= max_step_norm. Same as
    :meth:`_Solver.limited_dls_step`.

    Args:
        damping, max_step_norm: settings; active (A,), lower (A,), upper (A,): the
            active coordinates and their bounds.
        jac: (A, 9E) transposed Jacobian; r: (9E,); q: (D,) current state.
        h (A, A), g (A,), matrix (A, A), rhs (A,), value (A,), fixed (A,) bool,
        scratch (>= A,): work arrays. step: (A,) out, rad / m.
        ldl: solve each system by :func:`ldl_sized` (``Config.fast_math``; cheaper than
            LU), by LU where that meets a non-positive pivot.
        a, n: A and 9E, the Jacobian's shape (constants where the caller knows them).
    Returns:
        False when a system is exactly singular (step undefined).
    """
    for i in range(a):
        for j in range(i + 1):  # J^T J is symmetric: the same products in the same order
            total = 0.0
            for k in range(n):
                total += jac[i, k] * jac[j, k]
            if i == j:
                h[i, i] = total + damping
            else:
                h[i, j] = total
                h[j, i] = total
        total = 0.0
        for k in range(n):
            total += jac[i, k] * r[k]
        g[i] = -total
    for i in range(a):
        fixed[i] = False
        value[i] = 0.0
    if not clamped_solve(ldl, h, fixed, False, g, matrix, step, a):
        return False
    for _ in range(a):
        hit = False
        for i in range(a):
            if fixed[i]:
                continue
            qi = q[active[i]]
            lo = lower[i] - qi
            hi = upper[i] - qi
            if step[i] < lo:
                value[i], fixed[i], hit = lo, True, True
            elif step[i] > hi:
                value[i], fixed[i], hit = hi, True, True
        if not hit:
            break
        for i in range(a):
            if fixed[i]:
                rhs[i] = value[i]
            else:
                total = 0.0
                for j in range(a):
                    total += h[i, j] * value[j]
                rhs[i] = g[i] - total
        if not clamped_solve(ldl, h, fixed, True, rhs, matrix, step, a):
            return False
    norm = np.sqrt(sum_of_squares(step, scratch))
    limit = max_step_norm / (norm if norm > 0.0 else 1.0)
    scale = 1.0 if limit >= 1.0 else limit  # np.minimum(1, limit), NaN propagates
    for i in range(a):
        step[i] = step[i] * scale
    return True


@jitable
def to_float32_in_limits(q, active, lower, upper):
    """Clip the active coordinates of ``q`` (D,) to their bounds and round them to float32
    without leaving the bounds (nextafter back inside), in place."""
    for i in range(active.shape[0]):
        d = active[i]
        lo, hi = lower[i], upper[i]
        x = q[d]
        if x < lo:
            x = lo
        if x > hi:
            x = hi
        v = np.float32(x)
        if v > hi:
            v = np.nextafter(v, np.float32(-np.inf))
        if v < lo:
            v = np.nextafter(v, np.float32(np.inf))
        q[d] = v


@jitable
def step_damping(residual, damping, floor, ssr):
    """The damping of a step from a state of weighted sum of squared residuals ``ssr``:
    ``damping``, or when ``residual`` (``SolverSettings.damping_mode="residual"``)
    min(damping, max(ssr, floor)); the reference's ``_Solver.damping``."""
    if residual:
        return min(damping, max(ssr, floor))
    return damping
