"""Residuals of the Direction-Up targets (spec 5.2) and the success test, in the kernels.

Per target slot 9 weighted components: position, Direction error, Up error after aligning
Direction; the same formulas as the numpy reference (``core.solver.ReferenceSolver.residuals``).
"""

from __future__ import annotations

import types as pytypes

import numpy as np

from .fk import node_frames, tcp_poses
from .numba_support import jitable
from .vector_math import align_vector, axis_error, mat_vec3, norm3, vec3


@jitable(force_inline=True)
def slot_residual(rot, pos, targets, b, e, w_pos, w_rot, r, err):
    """Spec 5.2 residual of slot ``e`` of candidate ``b`` for one TCP pose.

    Args:
        rot: (3, 3) TCP rotation (world); pos: 3-tuple TCP position (m).
        targets: Targets; w_pos, w_rot: weights.
        r: (9E,) out, writes r[9e:9e+9] = [w_p e_pos, w_r e_dir, w_r e_up].
        err: (3, E) out, writes err[:, e] = unweighted |e_pos| (m), |e_dir|,
            |e_up| (rad); unconstrained parts are 0.
    """
    cur_dir = mat_vec3(rot, vec3(targets.local_direction[e]))
    cur_up = mat_vec3(rot, vec3(targets.local_up[e]))
    tp = targets.position[b, e]
    e_pos = (pos[0] - tp[0], pos[1] - tp[1], pos[2] - tp[2])
    t_dir = vec3(targets.direction[b, e])
    e_dir = (0.0, 0.0, 0.0)
    e_up = (0.0, 0.0, 0.0)
    if targets.has_direction[b, e]:
        e_dir = axis_error(cur_dir, t_dir)
    if targets.has_up[b, e]:
        e_up = axis_error(align_vector(cur_up, cur_dir, t_dir), vec3(targets.up[b, e]))
    base = 9 * e
    for i in range(3):
        r[base + i] = w_pos * e_pos[i]
        r[base + 3 + i] = w_rot * e_dir[i]
        r[base + 6 + i] = w_rot * e_up[i]
    err[0, e] = norm3(e_pos)
    err[1, e] = norm3(e_dir)
    err[2, e] = norm3(e_up)


# The hot helpers below take the few arrays they use, not the whole Work / Config tuples:
# passing the named tuples to a call is what costs (docs/performance.md).
@jitable
def evaluate(model, targets, w_pos, w_rot, own_trig, b, q, node_rot, node_pos, tcp_rot, tcp_pos, r, err):
    """Residuals ``r`` (9E,) and unweighted errors ``err`` (3, E) of state ``q`` (D,) of candidate b
    (``own_trig``: FK with :func:`own_sincos`, see :func:`node_frames`).

    Leaves the node frames (``node_rot``, ``node_pos``) and TCP poses (``tcp_rot``,
    ``tcp_pos``) of ``q`` in those arrays (candidate b's rows of Work).
    """
    node_frames(model, q, node_rot, node_pos, own_trig)
    tcp_poses(model, node_rot, node_pos, tcp_rot, tcp_pos)
    for e in range(tcp_rot.shape[0]):
        slot_residual(tcp_rot[e], vec3(tcp_pos[e]), targets, b, e, w_pos, w_rot, r, err)


#: :func:`evaluate` inlined, for the one hot call site (a step's trial states); inlined
#: everywhere it would lengthen the kernel's first compile for no gain (docs/performance.md).
evaluate_inlined = pytypes.FunctionType(evaluate.__code__, evaluate.__globals__, "evaluate_inlined")
evaluate_inlined.__qualname__ = "evaluate_inlined"  # a helper of its own (numba names it so)
evaluate_inlined = jitable(force_inline=True)(evaluate_inlined)


@jitable(force_inline=True)
def evaluate_row(model, targets, config, b, w, q, work, r, err):
    """:func:`evaluate` of candidate b with row w of ``work`` (inlined: unpacks in the caller)."""
    evaluate(model, targets, config.w_pos, config.w_rot, config.fast_math, b, q, work.node_rot[w],
             work.node_pos[w], work.tcp_rot[w], work.tcp_pos[w], r, err)


@jitable(force_inline=True)
def meets_tolerances(targets, config, b, err):
    """True when every slot of candidate b is strictly within the tolerances (err (3, E) unweighted)."""
    return within_tolerances(targets.has_direction[b], targets.has_up[b], config.position_tol,
                             config.frame_tol, err)


@jitable
def within_tolerances(has_direction, has_up, position_tol, frame_tol, err):
    """True when every slot is strictly within the tolerances (err (3, E); has_*: (E,))."""
    for e in range(err.shape[1]):
        if not err[0, e] < position_tol:
            return False
        if has_direction[e] and not err[1, e] < frame_tol:
            return False
        if has_up[e] and not err[2, e] < frame_tol:
            return False
    return True


@jitable
def max_position_error(err):
    """Largest position error over the slots of err (3, E); NaN propagates like ``np.max``."""
    out = err[0, 0]
    for e in range(1, err.shape[1]):
        v = err[0, e]
        if v > out or np.isnan(v):
            out = v
    return out
