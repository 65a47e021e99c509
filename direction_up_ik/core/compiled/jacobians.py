"""Jacobians of the residuals in the kernels: forward differences (the spec's, 5.3) and the
exact derivative (``jacobian="analytic"``).

Both are stored transposed, (A, 9E): one row per active coordinate.
"""

from __future__ import annotations

from .layout import PRISMATIC
from .numba_support import jitable
from .residuals import evaluate_row, slot_residual
from .vector_math import (align_vector, axis_error_parts, copy1, copy2, cross3, dot3, mat_vec3,
                          orthogonal_unit, vec3)


@jitable(own_code=True)
def jacobian_shortcut(model, targets, w_pos, w_rot, eps, c, s, active, b, r, node_rot, node_pos, tcp_rot,
                      tcp_pos, rot_p, r_p, err, jac):
    """Forward-difference Jacobian (transposed) from the exact rigid-motion shortcut.

    Raising coordinate d by eps rotates every TCP it moves by eps about the
    joint's world axis through the joint origin (prismatic: translates it by eps
    along the axis); same formulas as
    :meth:`RobotKinematics.joint_perturbed_tcp_poses`.

    Args:
        eps, c, s: the perturbation and its cosine and sine; active: (A,) coordinates.
        r: (9E,) residuals at the current state, whose node frames and TCP poses
            :func:`evaluate` left in node_rot, node_pos, tcp_rot, tcp_pos.
        rot_p (3, 3), r_p (9E,), err (3, E): scratch.
        jac: (A, 9E) out, jac[i] = (r(q + eps e_active[i]) - r) / eps.
    """
    omc = 1.0 - c
    for i in range(active.shape[0]):
        d = active[i]
        k = model.dof_node[d]
        for e in range(tcp_rot.shape[0]):
            base = 9 * e
            if k < 0 or not model.moves[d, e]:
                for j in range(9):
                    jac[i, base + j] = 0.0
                continue
            axis = mat_vec3(node_rot[k], vec3(model.axis_local[k]))
            tr, tp = tcp_rot[e], tcp_pos[e]
            if model.jtype[k] == PRISMATIC:
                copy2(rot_p, tr)
                pos_p = (tp[0] + eps * axis[0], tp[1] + eps * axis[1], tp[2] + eps * axis[2])
            else:
                for j in range(3):
                    col = (tr[0, j], tr[1, j], tr[2, j])
                    w_col = cross3(axis, col)
                    along = dot3(axis, col)
                    for i3 in range(3):
                        rot_p[i3, j] = col[i3] * c + w_col[i3] * s + axis[i3] * along * omc
                o = node_pos[k]
                rel = (tp[0] - o[0], tp[1] - o[1], tp[2] - o[2])
                w_rel = cross3(axis, rel)
                along = dot3(axis, rel)
                pos_p = (o[0] + rel[0] * c + w_rel[0] * s + axis[0] * along * omc,
                         o[1] + rel[1] * c + w_rel[1] * s + axis[1] * along * omc,
                         o[2] + rel[2] * c + w_rel[2] * s + axis[2] * along * omc)
            slot_residual(rot_p, pos_p, targets, b, e, w_pos, w_rot, r_p, err)
            for j in range(9):
                jac[i, base + j] = (r_p[base + j] - r[base + j]) / eps


@jitable(own_code=True)
def jacobian_full_fk(model, targets, config, b, w, q, r, work, jac):
    """Forward-difference Jacobian (transposed) by one full FK per perturbed state.

    Used when a mimic joint sits on a TCP chain (the reference does the same).
    Args: b: candidate, w: its row of ``work``; q (D,) current state, r (9E,) its
    residuals; jac (A, 9E) out.
    """
    q_p, r_p, err = work.q_p[w], work.r_p[w], work.err_t[w]
    for i in range(config.active.shape[0]):
        d = config.active[i]
        copy1(q_p, q)
        q_p[d] += config.eps
        evaluate_row(model, targets, config, b, w, q_p, work, r_p, err)
        for j in range(r.shape[0]):
            jac[i, j] = (r_p[j] - r[j]) / config.eps


@jitable
def axis_error_derivative(v, s, c, scale, target, d_current):
    """Derivative of :func:`axis_error` along ``d_current`` from its :func:`axis_error_parts`.

    Same formulas as :func:`direction_up_ik.core.rotations.axis_error_derivative`.
    """
    dv = cross3(target, d_current)
    if s < 1e-12:
        if c < 0.0:
            return (0.0, 0.0, 0.0)
        return dv
    ds = dot3(v, dv) / s
    dc = dot3(target, d_current)
    d_angle = (c * ds - s * dc) / (s * s + c * c)
    d_scale = (d_angle - scale * ds) / s
    return (dv[0] * scale + v[0] * d_scale, dv[1] * scale + v[1] * d_scale, dv[2] * scale + v[2] * d_scale)


@jitable
def up_error_derivative(w, cur_dir, cur_up, t_dir, t_up, aligned_parts):
    """Derivative of the Up error (spec 5.2) when the TCP turns with angular velocity ``w``.

    ``aligned_parts``: :func:`axis_error_parts` of (aligned Up, ``t_up``). Same
    formulas as :func:`direction_up_ik.core.rotations.align_vector_derivative`
    followed by ``axis_error_derivative``.
    """
    d_dir = cross3(w, cur_dir)
    d_up = cross3(w, cur_up)
    a = (cur_dir[0] + t_dir[0], cur_dir[1] + t_dir[1], cur_dir[2] + t_dir[2])
    one_plus_cos = 0.5 * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
    if one_plus_cos < 1e-12:  # opposite: a rotation by pi about a fixed axis n
        n = orthogonal_unit(t_dir)
        f = 2.0 * dot3(n, d_up)
        d_aligned = (f * n[0] - d_up[0], f * n[1] - d_up[1], f * n[2] - d_up[2])
    else:
        k = cross3(cur_dir, t_dir)
        dk = cross3(d_dir, t_dir)
        kxv = cross3(k, cur_up)
        d_kxv = cross3(dk, cur_up)
        k_dup = cross3(k, d_up)
        d_kxv = (d_kxv[0] + k_dup[0], d_kxv[1] + k_dup[1], d_kxv[2] + k_dup[2])
        d_kkxv = cross3(dk, kxv)
        k_dkxv = cross3(k, d_kxv)
        d_kkxv = (d_kkxv[0] + k_dkxv[0], d_kkxv[1] + k_dkxv[1], d_kkxv[2] + k_dkxv[2])
        kkxv = cross3(k, kxv)
        f = dot3(a, d_dir) / (one_plus_cos * one_plus_cos)
        d_aligned = (d_up[0] + d_kxv[0] + d_kkxv[0] / one_plus_cos - kkxv[0] * f,
                     d_up[1] + d_kxv[1] + d_kkxv[1] / one_plus_cos - kkxv[1] * f,
                     d_up[2] + d_kxv[2] + d_kkxv[2] / one_plus_cos - kkxv[2] * f)
    v, s, c, scale = aligned_parts
    return axis_error_derivative(v, s, c, scale, t_up, d_aligned)


@jitable(own_code=True)
def jacobian_analytic(model, targets, w_pos, w_rot, active, b, node_rot, node_pos, tcp_rot, tcp_pos, jac):
    """Exact Jacobian (transposed) of the residuals; same as ``_Solver.analytic_jacobian``.

    A revolute joint turns the TCP with angular velocity z (its world axis) and moves
    it by z x (TCP - origin); a prismatic one moves it along z. The Direction and
    Up errors are linear in the angular velocity: per slot the derivatives for
    w = e_x, e_y, e_z (``md*``, ``mu*``) are computed once, each joint's rows are
    their combination with its axis.

    Args:
        node_rot, node_pos, tcp_rot, tcp_pos: the frames :func:`evaluate` left for
            the current state; active: (A,) coordinates.
        jac: (A, 9E) out.
    Used when not ``model.full_fk`` (no mimic joint on a TCP chain).
    """
    zero = (0.0, 0.0, 0.0)
    ex, ey, ez = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    for e in range(tcp_rot.shape[0]):
        base = 9 * e
        cur_dir = mat_vec3(tcp_rot[e], vec3(targets.local_direction[e]))
        cur_up = mat_vec3(tcp_rot[e], vec3(targets.local_up[e]))
        t_dir = vec3(targets.direction[b, e])
        md0 = md1 = md2 = mu0 = mu1 = mu2 = zero
        if targets.has_direction[b, e]:
            v, s, c, scale = axis_error_parts(cur_dir, t_dir)
            md0 = axis_error_derivative(v, s, c, scale, t_dir, cross3(ex, cur_dir))
            md1 = axis_error_derivative(v, s, c, scale, t_dir, cross3(ey, cur_dir))
            md2 = axis_error_derivative(v, s, c, scale, t_dir, cross3(ez, cur_dir))
        if targets.has_up[b, e]:
            t_up = vec3(targets.up[b, e])
            parts = axis_error_parts(align_vector(cur_up, cur_dir, t_dir), t_up)
            mu0 = up_error_derivative(ex, cur_dir, cur_up, t_dir, t_up, parts)
            mu1 = up_error_derivative(ey, cur_dir, cur_up, t_dir, t_up, parts)
            mu2 = up_error_derivative(ez, cur_dir, cur_up, t_dir, t_up, parts)
        p = tcp_pos[e]
        for i in range(active.shape[0]):
            d = active[i]
            k = model.dof_node[d]
            if k < 0 or not model.moves[d, e]:
                for j in range(9):
                    jac[i, base + j] = 0.0
                continue
            z = mat_vec3(node_rot[k], vec3(model.axis_local[k]))
            if model.jtype[k] == PRISMATIC:
                for j in range(3):
                    jac[i, base + j] = w_pos * z[j]
                    jac[i, base + 3 + j] = 0.0
                    jac[i, base + 6 + j] = 0.0
                continue
            o = node_pos[k]
            lin = cross3(z, (p[0] - o[0], p[1] - o[1], p[2] - o[2]))
            for j in range(3):
                jac[i, base + j] = w_pos * lin[j]
                jac[i, base + 3 + j] = w_rot * (z[0] * md0[j] + z[1] * md1[j] + z[2] * md2[j])
                jac[i, base + 6 + j] = w_rot * (z[0] * mu0[j] + z[1] * mu1[j] + z[2] * mu2[j])
