"""The collision check as kernels: the same distances as the numpy reference
(:mod:`direction_up_ik.core.collision_distance`), state by state, with pruning.

Self-contained on purpose: it uses nothing from the other modules of this package, so numba
caches it against this file alone (``cache=True``; ``numba_support.SEPARATELY_CACHED``) and
an edit here does not recompile the solver's kernels (nor the reverse).

Per state: the frames of every model node (forward kinematics of
``RobotKinematics.kernel_arrays``), then every elementary pair: capsule-capsule in closed
form, capsule-solid by golden-section search of the solid's signed distance along the
segment (a lower bound, as in the reference). A capsule-solid pair whose cheap bound
(segment to the solid's centre, less its half diagonal) cannot beat the least distance so
far is skipped; that changes nothing but the time.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")
#: As ``collision_distance.GOLDEN_STEPS`` and ``GOLDEN`` of the reference (tests compare the two).
GOLDEN_STEPS = 36
#: Metres a capsule pair's bound must exceed the least distance so far by to be skipped: far
#: above the rounding of either (``_state_distances``).
CAPSULE_MARGIN = 1e-9
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
SOLID_CYLINDER = 1


@njit(**_OPTIONS)
def node_frames(q, parent, dof, scale, offset, kind, node_rot, node_pos, rot_cross, rot_outer, axis_parent,
                rot, pos):
    """Fill rot (K + 1, 3, 3), pos (K + 1, 3) with every node's frame in the root frame for one
    state q (D,); entry K is the root (identity)."""
    k_count = len(parent)
    for i in range(3):
        for j in range(3):
            rot[k_count, i, j] = 1.0 if i == j else 0.0
        pos[k_count, i] = 0.0
    for k in range(k_count):
        p = parent[k] if parent[k] >= 0 else k_count
        value = q[dof[k]] * scale[k] + offset[k]
        if kind[k] == 0:
            c, s = math.cos(value), math.sin(value)
            for i in range(3):
                for j in range(3):
                    acc = 0.0
                    for m in range(3):
                        local = rot_outer[k, m, j] + c * (node_rot[k, m, j] - rot_outer[k, m, j]) \
                            + s * rot_cross[k, m, j]
                        acc += rot[p, i, m] * local
                    rot[k, i, j] = acc
                pos[k, i] = pos[p, i] + rot[p, i, 0] * node_pos[k, 0] + rot[p, i, 1] * node_pos[k, 1] \
                    + rot[p, i, 2] * node_pos[k, 2]
        else:
            for i in range(3):
                for j in range(3):
                    rot[k, i, j] = rot[p, i, 0] * node_rot[k, 0, j] + rot[p, i, 1] * node_rot[k, 1, j] \
                        + rot[p, i, 2] * node_rot[k, 2, j]
            for i in range(3):
                acc = 0.0
                for m in range(3):
                    acc += rot[p, i, m] * (node_pos[k, m] + value * axis_parent[k, m])
                pos[k, i] = pos[p, i] + acc


@njit(**_OPTIONS)
def _clip01(x):
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


@njit(**_OPTIONS)
def segment_distance(p1, i, q1, p2, j, q2):
    """Distance between segments p1[i]-q1[i] and p2[j]-q2[j] (rows of (N, 3) arrays), as the
    reference's ``segment_distance``."""
    d1x, d1y, d1z = q1[i, 0] - p1[i, 0], q1[i, 1] - p1[i, 1], q1[i, 2] - p1[i, 2]
    d2x, d2y, d2z = q2[j, 0] - p2[j, 0], q2[j, 1] - p2[j, 1], q2[j, 2] - p2[j, 2]
    rx, ry, rz = p1[i, 0] - p2[j, 0], p1[i, 1] - p2[j, 1], p1[i, 2] - p2[j, 2]
    a = d1x * d1x + d1y * d1y + d1z * d1z
    e = d2x * d2x + d2y * d2y + d2z * d2z
    f = d2x * rx + d2y * ry + d2z * rz
    c = d1x * rx + d1y * ry + d1z * rz
    b = d1x * d2x + d1y * d2y + d1z * d2z
    eps = 1e-18
    safe_a = a if a > eps else 1.0
    safe_e = e if e > eps else 1.0
    denom = a * e - b * b
    if denom > eps * max(a * e, eps):
        s = _clip01((b * f - c * e) / denom)
    else:
        s = 0.0
    t = (b * s + f) / safe_e
    if t < 0.0:
        s = _clip01(-c / safe_a)
    elif t > 1.0:
        s = _clip01((b - c) / safe_a)
    t = _clip01(t)
    if a <= eps:
        s = 0.0
        t = 0.0 if e <= eps else _clip01(f / safe_e)
    elif e <= eps:
        s = _clip01(-c / safe_a)
        t = 0.0
    gx = rx + s * d1x - t * d2x
    gy = ry + s * d1y - t * d2y
    gz = rz + s * d1z - t * d2z
    return math.sqrt(gx * gx + gy * gy + gz * gz)


@njit(**_OPTIONS)
def solid_sdf(x, y, z, kind, hx, hy, hz):
    """Signed distance of (x, y, z), in the solid's frame, to a box (half edges hx, hy, hz) or a
    cylinder (radius hx, half length hz)."""
    if kind == SOLID_CYLINDER:
        u = math.sqrt(x * x + y * y) - hx
        v = -np.inf
    else:
        u = abs(x) - hx
        v = abs(y) - hy
    w = abs(z) - hz
    outside = math.sqrt(max(u, 0.0) ** 2 + max(v, 0.0) ** 2 + max(w, 0.0) ** 2)
    return outside + min(max(max(u, v), w), 0.0)


@njit(**_OPTIONS)
def capsule_solid_distance(ax, ay, az, bx, by, bz, radius, kind, hx, hy, hz, pad):
    """Lower bound of the signed distance of a capsule (a-b in the solid's frame, radius) and a
    solid inflated by ``pad``: the reference's ``capsule_solid_distance``."""
    dx, dy, dz = bx - ax, by - ay, bz - az
    length = math.sqrt(dx * dx + dy * dy + dz * dz)
    lo, hi = 0.0, 1.0
    x1, x2 = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    f1 = solid_sdf(ax + x1 * dx, ay + x1 * dy, az + x1 * dz, kind, hx, hy, hz)
    f2 = solid_sdf(ax + x2 * dx, ay + x2 * dy, az + x2 * dz, kind, hx, hy, hz)
    for _ in range(GOLDEN_STEPS):
        if f1 < f2:
            hi = x2
            x2, f2 = x1, f1
            x1 = hi - GOLDEN * (hi - lo)
            f1 = solid_sdf(ax + x1 * dx, ay + x1 * dy, az + x1 * dz, kind, hx, hy, hz)
        else:
            lo = x1
            x1, f1 = x2, f2
            x2 = lo + GOLDEN * (hi - lo)
            f2 = solid_sdf(ax + x2 * dx, ay + x2 * dy, az + x2 * dz, kind, hx, hy, hz)
    ends = min(solid_sdf(ax, ay, az, kind, hx, hy, hz), solid_sdf(bx, by, bz, kind, hx, hy, hz))
    least = min(min(f1, f2) - length * (hi - lo), ends)
    total = radius + pad
    value = least - total
    if value < 0.0:
        value = min(value, -separating_push(ax, ay, az, bx, by, bz, total, hx, hy, hz))
    return value


@njit(**_OPTIONS)
def separating_push(ax, ay, az, bx, by, bz, total, hx, hy, hz):
    """The least of the reference's ``separating_pushes`` (a bound of the penetration depth)."""
    p0, p1, p2, p3, p4, p5 = _push6(ax, ay, az, bx, by, bz, total, hx, hy, hz)
    return min(min(min(p0, p1), min(p2, p3)), min(p4, p5))


@njit(**_OPTIONS)
def _push6(ax, ay, az, bx, by, bz, total, hx, hy, hz):
    rx, ry, rz = hx + total, hy + total, hz + total
    return (max(rx - ax, rx - bx), max(ry - ay, ry - by), max(rz - az, rz - bz),
            max(rx + ax, rx + bx), max(ry + ay, ry + by), max(rz + az, rz + bz))


@njit(**_OPTIONS)
def _local_ends(rot, node, solid_rot, s, cap_a, cap_b, c, centre, world_rot, loc_a, loc_b):
    """Capsule c's ends in solid s's frame (whose world centre is ``centre[0]``) into loc_a, loc_b."""
    for i in range(3):
        for j in range(3):
            world_rot[i, j] = rot[node, i, 0] * solid_rot[s, 0, j] + rot[node, i, 1] * solid_rot[s, 1, j] \
                + rot[node, i, 2] * solid_rot[s, 2, j]
    for j in range(3):
        acc_a, acc_b = 0.0, 0.0
        for i in range(3):
            acc_a += world_rot[i, j] * (cap_a[c, i] - centre[0, i])
            acc_b += world_rot[i, j] * (cap_b[c, i] - centre[0, i])
        loc_a[j], loc_b[j] = acc_a, acc_b


@njit(**_OPTIONS)
def _place(rot, pos, node, local, out):
    for i in range(3):
        out[i] = pos[node, i] + rot[node, i, 0] * local[0] + rot[node, i, 1] * local[1] + rot[node, i, 2] * local[2]


@njit(**_OPTIONS)
def _distance_sq(p, i, q, j):
    """Squared distance between the points p[i] and q[j] (rows of (N, 3) arrays)."""
    total = 0.0
    for k in range(3):
        d = p[i, k] - q[j, k]
        total += d * d
    return total


@njit(**_OPTIONS)
def _state_distances(q, model, parts, cc, cs, rot, pos, cap_a, cap_b, loc_a, loc_b, centre, world_rot,
                     mode, stop_below, cc_pair, cs_pair, cs_group, pair_least, cap_mid, cap_reach):
    """One state's pairs. mode 0: returns (least distance, its elementary pair), pruning and
    stopping below ``stop_below``; mode 1: fills ``pair_least`` (body pairs) with each body
    pair's distance where it may be <= 0 (pruned pairs keep +inf); mode 2 (the verdict only):
    as 0, but skips every pair that is apart for certain and stops at the first distance <= 0
    (the least it returns is then only right in its sign). Scratch: ``cap_mid`` (C, 3), each
    capsule's centre, ``cap_reach`` (C,), its half length plus radius: two capsules are at
    least their centres' distance less both reaches apart, so a pair that cannot come
    nearer than the least so far (or than 0, in modes 1 and 2) is skipped."""
    (parent, dof, scale, offset, kind, node_rot, node_pos, rot_cross, rot_outer, axis_parent) = model
    (cap_node, cap_a_local, cap_b_local, cap_radius, solid_node, solid_rot, solid_pos, solid_kind,
     solid_half, solid_pad, solid_reach) = parts
    k_root = len(parent)
    node_frames(q, parent, dof, scale, offset, kind, node_rot, node_pos, rot_cross, rot_outer, axis_parent,
                rot, pos)
    for c in range(len(cap_node)):
        node = cap_node[c] if cap_node[c] >= 0 else k_root
        _place(rot, pos, node, cap_a_local[c], cap_a[c])
        _place(rot, pos, node, cap_b_local[c], cap_b[c])
        half_sq = 0.0
        for i in range(3):
            cap_mid[c, i] = 0.5 * (cap_a[c, i] + cap_b[c, i])
            half_sq += (cap_b[c, i] - cap_a[c, i]) * (cap_b[c, i] - cap_a[c, i])
        cap_reach[c] = 0.5 * math.sqrt(half_sq) + cap_radius[c]
    best = np.inf
    best_pair = -1
    for p in range(len(cc)):
        i, j = cc[p, 0], cc[p, 1]
        # Skipped only when its bound is above the least so far by far more than rounding: the
        # pairs left hold the least and its first pair, as a scan of all.
        limit = (best if mode == 0 else 0.0) + CAPSULE_MARGIN + cap_reach[i] + cap_reach[j]
        if limit < 0.0:
            continue
        if _distance_sq(cap_mid, i, cap_mid, j) > limit * limit:
            continue
        value = segment_distance(cap_a, i, cap_b, cap_a, j, cap_b) - cap_radius[i] - cap_radius[j]
        if mode == 1:
            if value < pair_least[cc_pair[p]]:
                pair_least[cc_pair[p]] = value
        elif value < best:
            best, best_pair = value, p
            if best < stop_below or (mode == 2 and best <= 0.0):
                return best, best_pair
    for p in range(len(cs)):
        c, s = cs[p, 0], cs[p, 1]
        node = solid_node[s] if solid_node[s] >= 0 else k_root
        _place(rot, pos, node, solid_pos[s], centre[0])
        # First the capsule's centre and reach, as for two capsules (cheaper than the bound
        # below, and like it only for pairs apart for certain: a depth need not exceed it)
        limit = (max(best, 0.0) if mode == 0 else 0.0) + CAPSULE_MARGIN + cap_reach[c] + solid_reach[s] \
            + solid_pad[s]
        if _distance_sq(cap_mid, c, centre, 0) > limit * limit:
            continue
        bound = segment_distance(cap_a, c, cap_b, centre, 0, centre) - solid_reach[s] - cap_radius[c] \
            - solid_pad[s]
        # apart for certain (bound > 0: the value is the distance, at least the bound) and no
        # nearer than the least so far
        if bound > 0.0 and (mode != 0 or bound > best):
            continue
        _local_ends(rot, node, solid_rot, s, cap_a, cap_b, c, centre, world_rot, loc_a, loc_b)
        value = capsule_solid_distance(loc_a[0], loc_a[1], loc_a[2], loc_b[0], loc_b[1], loc_b[2], cap_radius[c],
                                       solid_kind[s], solid_half[s, 0], solid_half[s, 1], solid_half[s, 2],
                                       solid_pad[s])
        start, end = cs_group[p, 0], cs_group[p, 1]
        if value < 0.0 and mode == 0 and end - start > 1:
            # capsules covering one box move together: per direction the largest push
            px = np.full(6, -np.inf)
            for g in range(start, end):
                cg = cs[g, 0]
                _local_ends(rot, node, solid_rot, s, cap_a, cap_b, cg, centre, world_rot, loc_a, loc_b)
                pushes = _push6(loc_a[0], loc_a[1], loc_a[2], loc_b[0], loc_b[1], loc_b[2],
                                cap_radius[cg] + solid_pad[s], solid_half[s, 0], solid_half[s, 1], solid_half[s, 2])
                for i in range(6):
                    px[i] = max(px[i], pushes[i])
            value = min(value, -px.min())
        if mode == 1:
            if value < pair_least[cs_pair[p]]:
                pair_least[cs_pair[p]] = value
        elif value < best:
            best, best_pair = value, len(cc) + p
            if best < stop_below or (mode == 2 and best <= 0.0):
                return best, best_pair
    return best, best_pair


@njit(**_OPTIONS)
def clearance_rows(q, model, parts, cc, cs, cc_pair, cs_pair, cs_group, stop_below, verdict_only, out_least,
                   out_pair):
    """For each state q[b] (B, D): out_least[b] its least pair distance (or the first below
    ``stop_below``), out_pair[b] that pair's body pair (-1: no pair). ``verdict_only``: only
    the sign of out_least is right (whether the state collides), found sooner."""
    k = len(model[0]) + 1
    c_count = len(parts[0])
    rot, pos = np.empty((k, 3, 3)), np.empty((k, 3))
    cap_a, cap_b = np.empty((c_count, 3)), np.empty((c_count, 3))
    loc_a, loc_b, centre, world_rot = np.empty(3), np.empty(3), np.empty((1, 3)), np.empty((3, 3))
    cap_mid, cap_reach = np.empty((c_count, 3)), np.empty(c_count)
    unused = np.empty(0)
    for b in range(q.shape[0]):
        best, p = _state_distances(q[b], model, parts, cc, cs, rot, pos, cap_a, cap_b, loc_a, loc_b, centre,
                                   world_rot, 2 if verdict_only else 0, stop_below, cc_pair, cs_pair, cs_group,
                                   unused, cap_mid, cap_reach)
        out_least[b] = best
        if p < 0:
            out_pair[b] = -1
        elif p < len(cc):
            out_pair[b] = cc_pair[p]
        else:
            out_pair[b] = cs_pair[p - len(cc)]


@njit(**_OPTIONS)
def pairwise_rows(q, model, parts, cc, cs, cc_pair, cs_pair, cs_group, out):
    """out[b, pair] (B, P) bool: body pair ``pair`` in collision (distance <= 0) in state q[b]."""
    k = len(model[0]) + 1
    c_count = len(parts[0])
    rot, pos = np.empty((k, 3, 3)), np.empty((k, 3))
    cap_a, cap_b = np.empty((c_count, 3)), np.empty((c_count, 3))
    loc_a, loc_b, centre, world_rot = np.empty(3), np.empty(3), np.empty((1, 3)), np.empty((3, 3))
    least = np.empty(out.shape[1])
    cap_mid, cap_reach = np.empty((c_count, 3)), np.empty(c_count)
    for b in range(q.shape[0]):
        least[:] = np.inf
        _state_distances(q[b], model, parts, cc, cs, rot, pos, cap_a, cap_b, loc_a, loc_b, centre,
                         world_rot, 1, -np.inf, cc_pair, cs_pair, cs_group, least, cap_mid, cap_reach)
        for p in range(out.shape[1]):
            out[b, p] = least[p] <= 0.0


ENTRY_POINTS = (clearance_rows, pairwise_rows)


def _frozen(values, dtype, shape=None):
    out = np.ascontiguousarray(np.array(values, dtype=dtype))
    if shape is not None:
        out = np.ascontiguousarray(out.reshape(shape))
    out.setflags(write=False)
    return out


def warm_up() -> None:
    """Compile (or load from numba's cache) both kernels with arguments of exactly the types
    the core passes (read-only C arrays of ``RobotKinematics.kernel_arrays`` and
    ``collision_parts.Parts``; a tiny two-joint model, capsules and a box), so that no real call
    compiles another signature (tested)."""
    f8, i8 = np.float64, np.int64
    eye = np.tile(np.eye(3), (2, 1, 1))
    model = (_frozen([-1, 0], i8), _frozen([0, 1], i8), _frozen([1.0, 1.0], f8), _frozen([0.0, 0.0], f8),
             _frozen([0, 1], i8), _frozen(eye, f8), _frozen([[0, 0, 0.1], [0.2, 0, 0]], f8),
             _frozen(np.zeros((2, 3, 3)), f8), _frozen(np.zeros((2, 3, 3)), f8), _frozen([[0, 0, 1], [1, 0, 0]], f8))
    parts = (_frozen([0, 1, -1], i8), _frozen([[0, 0, 0], [0, 0, 0], [0.5, 0.5, 0.5]], f8),
             _frozen([[0.1, 0, 0], [0, 0, 0.1], [0.5, 0.5, 0.5]], f8), _frozen([0.05, 0.05, 0.1], f8),
             _frozen([-1], i8), _frozen(np.eye(3)[None], f8), _frozen([[0, 0, -0.2]], f8), _frozen([0], i8),
             _frozen([[0.5, 0.5, 0.05]], f8), _frozen([0.0], f8), _frozen([0.71], f8))
    cc, cc_pair = _frozen([[0, 2]], i8, (1, 2)), _frozen([0], i8)
    cs, cs_pair = _frozen([[0, 0], [1, 0]], i8, (2, 2)), _frozen([1, 1], i8)
    cs_group = _frozen([[0, 2], [0, 2]], i8, (2, 2))
    q = np.zeros((2, 2))
    least, pair = np.empty(2), np.empty(2, dtype=np.int64)
    for verdict_only in (False, True):
        clearance_rows(q, model, parts, cc, cs, cc_pair, cs_pair, cs_group, 0.0, verdict_only, least, pair)
    pairwise_rows(q, model, parts, cc, cs, cc_pair, cs_pair, cs_group, np.empty((2, 2), dtype=np.bool_))


def loaded() -> bool:
    """True once both kernels are compiled or loaded in this process."""
    return all(kernel.signatures for kernel in ENTRY_POINTS)


def cache_is_warm() -> bool:
    """True when numba's disk cache holds both kernels for this file."""
    for kernel in ENTRY_POINTS:
        cache = getattr(kernel, "_cache", None)
        index = getattr(cache, "_cache_file", None)
        if index is None or not index._load_index():
            return False
    return True
