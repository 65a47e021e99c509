"""Distances between the parts of a collision scene: the numpy reference and the compiled kernel.

:func:`bound_clearance` (a scene's least distances) and :func:`pairwise_collisions` run on
the compiled kernels (:mod:`.compiled.collision`) once the backend's kernels are ready in this
process; until then :func:`reference_clearance` and the numpy reference here give the same
values (``test/core/test_collision.py``).
"""


from __future__ import annotations

import math
from typing import Tuple

import numpy as np

from . import backend
from .collision_parts import SOLID_CYLINDER, PairArrays, Parts
from .kinematics import RobotKinematics

#: Golden-section steps of a capsule-solid distance: the bracket shrinks to 0.618**N of the
#: segment, and the bound subtracts that length (so the distance stays a lower bound).
GOLDEN_STEPS = 36
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


# --------------------------------------------------------------- distances (numpy reference)
def _node_frames(robot: RobotKinematics, q: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(B, K + 1, 3, 3) rotations and (B, K + 1, 3) positions of every node in the root frame;
    the last entry is the root itself (frame -1)."""
    rot, pos = robot.node_frames(q)
    b = len(q)
    rot = np.concatenate([rot, np.broadcast_to(np.eye(3), (b, 1, 3, 3))], axis=1)
    pos = np.concatenate([pos, np.zeros((b, 1, 3))], axis=1)
    return rot, pos


def segment_distance(p1, q1, p2, q2) -> np.ndarray:
    """(...,) distance between segments p1-q1 and p2-q2 (each (..., 3)), closed form."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a = np.sum(d1 * d1, axis=-1)
    e = np.sum(d2 * d2, axis=-1)
    f = np.sum(d2 * r, axis=-1)
    c = np.sum(d1 * r, axis=-1)
    b = np.sum(d1 * d2, axis=-1)
    eps = 1e-18
    safe_a, safe_e = np.where(a > eps, a, 1.0), np.where(e > eps, e, 1.0)
    denom = a * e - b * b
    s = np.where(denom > eps * np.maximum(a * e, eps), np.clip((b * f - c * e) / np.where(denom > 0, denom, 1.0), 0, 1),
                 0.0)
    t = (b * s + f) / safe_e
    s = np.where(t < 0, np.clip(-c / safe_a, 0, 1), np.where(t > 1, np.clip((b - c) / safe_a, 0, 1), s))
    t = np.clip(t, 0, 1)
    # degenerate segments (points)
    point1, point2 = a <= eps, e <= eps
    s = np.where(point1, 0.0, np.where(point2, np.clip(-c / safe_a, 0, 1), s))
    t = np.where(point2, 0.0, np.where(point1, np.clip(f / safe_e, 0, 1), t))
    gap = (p1 + s[..., None] * d1) - (p2 + t[..., None] * d2)
    return np.sqrt(np.sum(gap * gap, axis=-1))


def point_segment_distance(point, a, b) -> np.ndarray:
    """(...,) distance of ``point`` from segment a-b (each (..., 3))."""
    d, r = b - a, point - a
    length2 = np.sum(d * d, axis=-1)
    t = np.clip(np.sum(r * d, axis=-1) / np.where(length2 > 1e-18, length2, 1.0), 0.0, 1.0)
    gap = r - t[..., None] * d
    return np.sqrt(np.sum(gap * gap, axis=-1))


def solid_sdf(points: np.ndarray, kind: np.ndarray, half: np.ndarray) -> np.ndarray:
    """(...,) signed distance of ``points`` (..., 3), in the solid's frame, to a box (half
    edges ``half``) or a cylinder (``half`` = radius, radius, half length), per ``kind``."""
    radial = np.sqrt(points[..., 0] ** 2 + points[..., 1] ** 2)
    cyl = kind == SOLID_CYLINDER
    u = np.where(cyl, radial - half[..., 0], np.abs(points[..., 0]) - half[..., 0])
    v = np.where(cyl, -np.inf, np.abs(points[..., 1]) - half[..., 1])
    w = np.abs(points[..., 2]) - half[..., 2]
    outside = np.sqrt(np.maximum(u, 0) ** 2 + np.maximum(v, 0) ** 2 + np.maximum(w, 0) ** 2)
    return outside + np.minimum(np.maximum(np.maximum(u, v), w), 0.0)


def separating_pushes(a: np.ndarray, b: np.ndarray, total: np.ndarray, half: np.ndarray) -> np.ndarray:
    """(..., 6) how far a capsule (segment a-b (..., 3) in the solid's frame, radius ``total``)
    must move along +x, +y, +z, -x, -y, -z of the solid's frame to leave the solid's box
    inflated by ``total``; the least of them bounds the penetration depth from above."""
    reach = half + total[..., None]
    return np.concatenate([np.maximum(reach - a, reach - b), np.maximum(reach + a, reach + b)], axis=-1)


def capsule_solid_distance(a: np.ndarray, b: np.ndarray, radius: np.ndarray, kind: np.ndarray,
                           half: np.ndarray, pad: np.ndarray) -> np.ndarray:
    """(...,) lower bound of the signed distance between capsules (segment a-b (..., 3) in the
    solid's frame, ``radius``) and solids (``kind``, ``half``, inflated by ``pad``): the
    least signed distance of the segment to the solid (golden-section search of that convex
    function, less the remaining bracket times the segment length) minus the radii; when
    penetrating, at most minus the least of :func:`separating_pushes` (a bound of the
    penetration depth)."""
    d = b - a
    length = np.sqrt(np.sum(d * d, axis=-1))
    lo, hi = np.zeros(length.shape), np.ones(length.shape)

    def f(t):
        return solid_sdf(a + t[..., None] * d, kind, half)
    x1, x2 = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(GOLDEN_STEPS):
        left = f1 < f2
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        new_x = np.where(left, hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo))
        f_new = f(new_x)
        x2, f2, x1, f1 = (np.where(left, x1, new_x), np.where(left, f1, f_new),
                          np.where(left, new_x, x2), np.where(left, f_new, f2))
    ends = np.minimum(f(np.zeros(length.shape)), f(np.ones(length.shape)))
    least = np.minimum(np.minimum(f1, f2) - length * (hi - lo), ends)
    total = radius + pad
    value = least - total
    push = np.min(separating_pushes(a, b, total, half), axis=-1)
    return np.where(value < 0.0, np.minimum(value, -push), value)


def _pair_distances(robot: RobotKinematics, parts: Parts, pairs: PairArrays, q: np.ndarray,
                    only_touching: bool = False) -> np.ndarray:
    """(B, P + Q) signed distance bounds of every elementary pair (cc first, then cs);
    ``only_touching``: pairs that are apart for certain (capsule-capsule: bounding spheres
    apart; capsule-solid: segment to the solid's centre beyond its reach) are left at +inf."""
    rot, pos = _node_frames(robot, q)
    cap_a = np.einsum("bcij,cj->bci", rot[:, parts.cap_node], parts.cap_a) + pos[:, parts.cap_node]
    cap_b = np.einsum("bcij,cj->bci", rot[:, parts.cap_node], parts.cap_b) + pos[:, parts.cap_node]
    i, j = pairs.cc[:, 0], pairs.cc[:, 1]
    if only_touching:  # the closed form only where the bounding spheres meet
        centre = 0.5 * (cap_a + cap_b)
        reach = 0.5 * np.linalg.norm(parts.cap_b - parts.cap_a, axis=-1) + parts.cap_radius
        apart = np.linalg.norm(centre[:, i] - centre[:, j], axis=-1) > reach[i] + reach[j]
        cc = np.full(apart.shape, np.inf)
        bi, pi = np.nonzero(~apart)
        ci, cj = i[pi], j[pi]
        cc[bi, pi] = segment_distance(cap_a[bi, ci], cap_b[bi, ci], cap_a[bi, cj], cap_b[bi, cj]) \
            - parts.cap_radius[ci] - parts.cap_radius[cj]
    else:
        cc = segment_distance(cap_a[:, i], cap_b[:, i], cap_a[:, j], cap_b[:, j]) \
            - parts.cap_radius[i] - parts.cap_radius[j]
    c, s = pairs.cs[:, 0], pairs.cs[:, 1]
    solid_rot = np.einsum("bsij,sjk->bsik", rot[:, parts.solid_node], parts.solid_rot)
    solid_pos = np.einsum("bsij,sj->bsi", rot[:, parts.solid_node], parts.solid_pos) + pos[:, parts.solid_node]
    r, p = solid_rot[:, s], solid_pos[:, s]
    radius = np.broadcast_to(parts.cap_radius[c], r.shape[:2])
    kind = np.broadcast_to(parts.solid_kind[s], r.shape[:2])
    half = np.broadcast_to(parts.solid_half[s], r.shape[:2] + (3,))
    pad = np.broadcast_to(parts.solid_pad[s], r.shape[:2])
    if only_touching:
        bound = point_segment_distance(p, cap_a[:, c], cap_b[:, c]) - parts.solid_reach[s] - radius - pad
        near = bound <= 0.0
    else:
        near = np.ones(r.shape[:2], dtype=bool)
    cs = np.full(r.shape[:2], np.inf)
    rn = r[near]
    local_a = np.einsum("nji,nj->ni", rn, cap_a[:, c][near] - p[near])
    local_b = np.einsum("nji,nj->ni", rn, cap_b[:, c][near] - p[near])
    cs[near] = capsule_solid_distance(local_a, local_b, radius[near], kind[near], half[near], pad[near])
    grouped = pairs.cs_group[:, 1] - pairs.cs_group[:, 0] > 1
    if not only_touching and grouped.any():
        # the capsules covering one box move together: the box's push along a direction is
        # the largest of theirs, its bound the least over the directions
        pushes = separating_pushes(local_a.reshape(cs.shape + (3,)), local_b.reshape(cs.shape + (3,)),
                                   radius + pad, half)
        starts = np.unique(pairs.cs_group[:, 0])
        group_push = np.min(np.maximum.reduceat(pushes, starts, axis=1), axis=-1)
        member = np.searchsorted(starts, pairs.cs_group[:, 0])
        cs = np.where(grouped & (cs < 0.0), np.minimum(cs, -group_push[:, member]), cs)
    return np.concatenate([cc, cs], axis=1)


def reference_clearance(robot: RobotKinematics, parts: Parts, pairs: PairArrays,
                        q: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """((B,) least distance, (B,) body pair of it (-1: no pair)) of (B, D) states ``q``, in numpy
    (the distances :func:`bound_clearance` computes)."""
    b = len(q)
    if len(pairs.cc) + len(pairs.cs) == 0:
        return np.full(b, np.inf), np.full(b, -1, dtype=np.int64)
    out_d = np.empty(b)
    out_p = np.empty(b, dtype=np.int64)
    owner = np.concatenate([pairs.cc_pair, pairs.cs_pair])
    for lo in range(0, b, 256):  # bounded temporaries
        dist = _pair_distances(robot, parts, pairs, q[lo:lo + 256])
        best = np.argmin(dist, axis=1)
        out_d[lo:lo + 256] = dist[np.arange(len(best)), best]
        out_p[lo:lo + 256] = owner[best]
    return out_d, out_p


def pairwise_collisions(robot: RobotKinematics, parts: Parts, pairs: PairArrays, q: np.ndarray,
                        num_pairs: int) -> np.ndarray:
    """bool (B, num_pairs): whether each body pair is in collision (distance <= 0) in each state."""
    kernel = _compiled_pairwise()
    if kernel is not None:
        return kernel(robot, parts, pairs, q, num_pairs)
    dist = _pair_distances(robot, parts, pairs, q, only_touching=True)
    owner = np.concatenate([pairs.cc_pair, pairs.cs_pair])
    least = np.full((len(q), num_pairs), np.inf)
    for column in range(dist.shape[1]):
        np.minimum(least[:, owner[column]], dist[:, column], out=least[:, owner[column]])
    return least <= 0.0


_READY_KERNELS = []  # the kernel module once it was found ready (it stays so)


def _kernels():
    """:mod:`.compiled.collision` when the backend's kernels are ready in this process and it
    is loaded (``compiled.api.warm_up`` loads it with them: ``compiled.collision.warm_up``), else None."""
    if _READY_KERNELS:
        return _READY_KERNELS[0]
    if backend.kernel_state() != backend.KERNELS_READY:
        return None
    from .compiled import collision as kernels
    if not kernels.loaded():
        return None
    _READY_KERNELS.append(kernels)
    return kernels


def _model_tuple(robot: RobotKinematics) -> tuple:
    arrays = robot.kernel_arrays()
    return (arrays.node_parent, arrays.node_dof, arrays.node_scale, arrays.node_offset, arrays.node_type,
            arrays.node_rot, arrays.node_pos, arrays.node_rot_cross, arrays.node_rot_outer,
            arrays.node_axis_parent)


def bound_clearance(robot: RobotKinematics, parts: Parts, pairs: PairArrays):
    """The compiled clearance check bound to one robot and one scene's arrays, or None while
    the kernels are not ready: ``run(q, stop_below, verdict_only)`` of (B, D) float64
    C-contiguous states ``q`` gives ((B,) least distance, (B,) body pair of it, -1: no pair).
    ``stop_below``: a state's pairs may stop once one is below it (its distance is then that
    pair's, not necessarily the least); ``verdict_only``: only the sign of the distance
    matters (the kernel skips more). Its compiled function is found here, once: the
    dispatcher would type some thirty arrays on every call."""
    kernels = _kernels()
    if kernels is None:
        return None
    fixed = (_model_tuple(robot), parts.kernel_tuple(), pairs.cc, pairs.cs, pairs.cc_pair, pairs.cs_pair,
             pairs.cs_group)
    from .compiled.api import compiled_overload  # loaded with the kernels
    compiled = compiled_overload(kernels.clearance_rows, np.empty((1, robot.num_dofs)), *fixed, 0.0, False,
                                 np.empty(1), np.empty(1, dtype=np.int64))  # warm_up's signature

    def run(q: np.ndarray, stop_below: float, verdict_only: bool) -> Tuple[np.ndarray, np.ndarray]:
        if q.dtype != np.float64 or q.ndim != 2 or not q.flags.c_contiguous:
            raise TypeError("bound_clearance: q must be a (B, D) float64 C-contiguous array")
        b = len(q)
        least, pair = np.empty(b), np.empty(b, dtype=np.int64)
        compiled(q, *fixed, float(stop_below), bool(verdict_only), least, pair)
        return least, pair
    return run


def _compiled_pairwise():
    """The compiled form of :func:`pairwise_collisions` when ready, else None."""
    kernels = _kernels()
    if kernels is None:
        return None

    def run(robot, parts, pairs, q, num_pairs):
        out = np.empty((len(q), num_pairs), dtype=np.bool_)
        kernels.pairwise_rows(np.ascontiguousarray(q, dtype=np.float64), _model_tuple(robot), parts.kernel_tuple(),
                              pairs.cc, pairs.cs, pairs.cc_pair, pairs.cs_pair, pairs.cs_group, out)
        return out
    return run
