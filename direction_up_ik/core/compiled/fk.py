"""Forward kinematics in the kernels: node frames and TCP poses of one joint state.

The same formulas as :meth:`~direction_up_ik.core.kinematics.RobotKinematics.tcp_poses`
(the numpy reference), in scalars.
"""

from __future__ import annotations

import numpy as np

from .layout import REVOLUTE
from .numba_support import jitable, stack_array
from .vector_math import mat_mul3, mat_vec3, own_sincos


@jitable(force_inline=True)
def frame_of(model, node, node_rot, node_pos):
    """World rotation (3, 3) and position (3,) of ``node``'s frame; node -1 = the root."""
    if node < 0:
        return model.root_rot, model.root_pos
    return node_rot[node], node_pos[node]


#: Chains of at most this many nodes take all their cos/sin before the products
#: (:func:`node_frames`); longer ones (none of the bundled robots) take them on the way.
FK_TRIG_NODES = 64


@jitable
def joint_value(model, q, k):
    """Node k's joint value (rad / m) at state ``q``: its coordinate, scaled and offset
    for a mimic joint. (Not inlined in numba's IR: that drew NumbaIRAssumptionWarnings.)"""
    value = q[model.dof[k]]
    if model.scale[k] != 1.0 or model.offset[k] != 0.0:
        return value * model.scale[k] + model.offset[k]
    return value


@jitable(force_inline=True)
def node_frames(model, q, node_rot, node_pos, own_trig):
    """World frames of the chain nodes ``model.chain`` at joint state ``q``.

    Args:
        model: Model; q: (D,) float64 joint coordinates (rad / m).
        node_rot: (K, 3, 3) out, node_pos: (K, 3) out (world, metres); only the
            rows of ``model.chain`` are written.
        own_trig: take cos/sin from :func:`own_sincos` instead of libm (``Config.fast_math``).
    Same formulas as :meth:`RobotKinematics._node_frames`. A revolute joint's local
    rotation and its product with the parent's are spelled out in scalars (the same
    operations in the same order as a (3, 3) scratch and :func:`mat_mul3`, so the same
    values), and the cos/sin of every revolute joint are taken before the products, so
    that library calls do not interrupt the chain of dependent products (both faster:
    docs/performance.md).
    """
    n = model.chain.shape[0]
    cos_all = stack_array(FK_TRIG_NODES, np.float64)
    sin_all = stack_array(FK_TRIG_NODES, np.float64)
    early = n <= FK_TRIG_NODES
    if early:
        for at in range(n):
            k = model.chain[at]
            if model.jtype[k] == REVOLUTE:
                value = joint_value(model, q, k)
                if own_trig:
                    sin_all[at], cos_all[at] = own_sincos(value)
                else:
                    cos_all[at], sin_all[at] = np.cos(value), np.sin(value)
    for at in range(n):
        k = model.chain[at]
        r_p, p_p = frame_of(model, model.parent[k], node_rot, node_pos)
        if model.jtype[k] == REVOLUTE:
            if early:
                c, s = cos_all[at], sin_all[at]
            else:
                value = joint_value(model, q, k)
                if own_trig:
                    s, c = own_sincos(value)
                else:
                    c, s = np.cos(value), np.sin(value)
            o, r_o, r_x = model.rot_outer[k], model.rot[k], model.rot_cross[k]
            l00 = o[0, 0] + c * (r_o[0, 0] - o[0, 0]) + s * r_x[0, 0]
            l01 = o[0, 1] + c * (r_o[0, 1] - o[0, 1]) + s * r_x[0, 1]
            l02 = o[0, 2] + c * (r_o[0, 2] - o[0, 2]) + s * r_x[0, 2]
            l10 = o[1, 0] + c * (r_o[1, 0] - o[1, 0]) + s * r_x[1, 0]
            l11 = o[1, 1] + c * (r_o[1, 1] - o[1, 1]) + s * r_x[1, 1]
            l12 = o[1, 2] + c * (r_o[1, 2] - o[1, 2]) + s * r_x[1, 2]
            l20 = o[2, 0] + c * (r_o[2, 0] - o[2, 0]) + s * r_x[2, 0]
            l21 = o[2, 1] + c * (r_o[2, 1] - o[2, 1]) + s * r_x[2, 1]
            l22 = o[2, 2] + c * (r_o[2, 2] - o[2, 2]) + s * r_x[2, 2]
            out = node_rot[k]
            for i in range(3):
                a0, a1, a2 = r_p[i, 0], r_p[i, 1], r_p[i, 2]
                out[i, 0] = a0 * l00 + a1 * l10 + a2 * l20
                out[i, 1] = a0 * l01 + a1 * l11 + a2 * l21
                out[i, 2] = a0 * l02 + a1 * l12 + a2 * l22
            t = mat_vec3(r_p, model.pos[k])
        else:
            value = joint_value(model, q, k)
            mat_mul3(r_p, model.rot[k], node_rot[k])
            a = model.axis_parent[k]
            o = model.pos[k]
            t = mat_vec3(r_p, (o[0] + value * a[0], o[1] + value * a[1], o[2] + value * a[2]))
        for i in range(3):
            node_pos[k, i] = p_p[i] + t[i]


@jitable(force_inline=True)
def tcp_poses(model, node_rot, node_pos, tcp_rot, tcp_pos):
    """TCP world poses of the E slots from node frames.

    Args:
        node_rot (K, 3, 3), node_pos (K, 3): from :func:`node_frames`.
        tcp_rot (E, 3, 3) out, tcp_pos (E, 3) out: world, metres.
    """
    for e in range(model.ee_node.shape[0]):
        r_n, p_n = frame_of(model, model.ee_node[e], node_rot, node_pos)
        fixed = model.ee_fixed[e]
        mat_mul3(r_n, fixed[:3, :3], tcp_rot[e])
        t = mat_vec3(r_n, (fixed[0, 3], fixed[1, 3], fixed[2, 3]))
        for i in range(3):
            tcp_pos[e, i] = p_n[i] + t[i]
