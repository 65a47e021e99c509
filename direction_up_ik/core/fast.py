"""Compiled (numba) backend of the batch solver.

Same algorithm, same arithmetic and the same results as the numpy reference
(:class:`direction_up_ik.core.solver._Solver`, spec sections 3 and 5); see
that module for the algorithm. Here one compiled call (:func:`run_serial`,
the whole solve in :func:`solve_rows`) iterates the B candidates in blocks of
:data:`BLOCK_ROWS`, each block "iteration-major" like the reference (every live
candidate takes iteration k before any takes k + 1); candidates are independent,
so the results are those of one pass over all. A numerical failure is reported
for the same candidates, at the same point, with the same message; with a
deadline all candidates form one block, so it stops them all at the same
iteration boundary (per slice, when a big batch is split over threads).

Differences to the reference, all at rounding level (about 1e-16 relative):

* FK and the small matrix products are plain loops here, while numpy hands
  3x3 products to BLAS (which may use fused multiply-adds);
* the damped least-squares systems are solved by Gaussian elimination with
  partial pivoting here, by LAPACK ``gesv`` there;
* with mimic joints on a TCP chain both compute perturbed poses by full FK;
  otherwise both use the exact rigid-motion shortcut with the same formulas.

So ``joint_q`` agree to float32 rounding and errors to ~1e-12; a comparison
that sits exactly on a tie (a step that lowers the residual by 1e-16) can flip,
which can change one candidate's iteration count or stop reason.
``test/core/test_fast_backend.py`` measures how rarely that happens.

Reductions that numpy does pairwise (``np.sum`` over 8 or more values: the
sum of squared residuals, norms of steps over 8+ joints) use numpy's pairwise
order here too (:func:`pairwise_sum`).

The multi-seed search of ``core.search`` (library seeding, no callback) runs here too,
whole: :func:`search` calls :func:`run_search` per chunk of candidates, which solves
round 0 and then the rounds of seeds of each (:func:`search_rounds`: ranking the library
by a scan, the relays of seeds, the selection), with no Python between the rounds; the
results are those of the search's rounds in Python, which ``test/core/test_search.py``
checks field by field.

Compilation: the kernels called from Python, :func:`run_serial` and :func:`run_search`,
are ``@njit(cache=True)`` (:func:`njit_cached`); they allocate the scratch arrays and
call :func:`solve_rows` (via :func:`search_rows`), a second cached kernel compiled
**without numba's runtime** (``_nrt=False``): no reference counting of arrays at all. With it every
array view taken and every array passed to a call cost an ``NRT_incref``/``NRT_decref``
call (atomic before the arrays were borrowed with null memory-info pointers,
still a call and a spilled register after): the run-time-free kernel takes 0.65-0.71 x
the time of a serial 1000-target batch and 0.74-0.77 x per single target (ur5 and
panda, A/B in one process), with bit-identical results. Code below ``solve_rows``
therefore cannot allocate (:func:`stack_array` for scratch). The small functions it calls (FK, residual,
Jacobian, DLS step, line search) are ``@register_jitable`` (:func:`jitable`) and
compiled into it; the tiniest and the hot FK / residual helpers, and ``iterate``
(one call site), are inlined in numba's IR. (Inlining every helper instead was
20 % faster but compiles in about 120 s. Making every helper its own cached
``njit`` function gives the same machine code but doubles the cold compile time:
numba re-optimises each caller together with everything it calls.) The cache
lives in ``__pycache__`` next to this file when that folder is writable
(editable install); otherwise numba falls back
to its per-user cache directory (``$XDG_CACHE_HOME/numba`` or
``~/.cache/numba``), and ``NUMBA_CACHE_DIR`` overrides both (e.g. a read-only
install in a container with a read-only home: point it at a writable folder;
with no writable location at all the kernel is compiled in every process).
:func:`warm_up` compiles or loads it on a tiny problem: about 80 s cold on
the 2-core reference machine (65 s before the compiled search), under half a second
from the cache.

Threads: candidates are independent, so a batch of at least
:data:`PARALLEL_MIN_CANDIDATES` is cut into one contiguous slice per core and
the slices are solved concurrently (the kernel releases the GIL). Every
candidate's arithmetic is the same as in one serial call, so the results do
not depend on the thread count (``NUMBA_NUM_THREADS``). (numba's ``prange``
gives the same speed-up but a second, 40 s cold compile.)
"""

from __future__ import annotations

import math
import threading
import time
import types as pytypes
import weakref
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable
from numba.np.arrayobj import populate_array

from . import result as res
from .errors import NumericalFailure
from .kinematics import RobotKinematics
from .problem import IKProblem
from .result import IKBatchResult
from .settings import FD_EPSILON, MIN_STEP_NORM, RESIDUAL_DAMPING_FLOOR, STALL_RATIO, STEP_SCALES

__all__ = ["PARALLEL_MIN_CANDIDATES", "executor", "nearest_ranks", "solve", "supports", "warm_up",
           "worker_threads"]


def njit_cached(fn=None, **options):
    """``numba.njit(cache=True, error_model="numpy", **options)``; bare or with options.

    numpy's error model: x / 0 gives inf or NaN (caught as a numerical failure,
    like the reference) instead of raising ZeroDivisionError. numba refuses
    ``cache=True`` when it finds no writable cache location (see the module
    docstring); then the kernel is compiled in every process instead of failing
    the import.
    """
    def wrap(function):
        try:
            return njit(cache=True, error_model="numpy", **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return njit(error_model="numpy", **options)(function)
    return wrap(fn) if fn is not None else wrap


def jitable(fn=None, *, inline: str = "never"):
    """``numba.extending.register_jitable`` with numpy's error model: a plain Python
    function that numba compiles into the kernels calling it (``inline="always"``:
    inlined in numba's IR, for the tiniest helpers)."""
    def wrap(function):
        return register_jitable(inline=inline, error_model="numpy")(function)
    return wrap(fn) if fn is not None else wrap


#: Batches of at least this many candidates are solved in slices on worker threads.
PARALLEL_MIN_CANDIDATES = 64
#: Rows per block of :func:`solve_rows`, whose scratch is allocated for one block (about
#: 2.5 kB per ur5 row, 40 kB per block). Scratch for a whole 1000-row batch (fresh pages
#: each call) made a serial batch 1.10-1.16 x slower (ur5, panda; A/B in one process).
BLOCK_ROWS = 16

_REVOLUTE = 0
_PRISMATIC = 1

# Stop reasons as small ints inside the kernel; _REASONS maps them back.
(_CONVERGED, _NO_ACCEPTABLE_STEP, _STEP_TOO_SMALL, _MAX_ITERS, _NO_ACTIVE_JOINTS, _TIME_BUDGET,
 _SUPERSEDED, _STALLED) = range(8)
_REASONS = (res.STOP_CONVERGED, res.STOP_NO_ACCEPTABLE_STEP, res.STOP_STEP_TOO_SMALL,
            res.STOP_MAX_ITERS, res.STOP_NO_ACTIVE_JOINTS, res.STOP_TIME_BUDGET, res.STOP_SUPERSEDED,
            res.STOP_STALLED)

# A numerical failure is recorded per candidate as fail_key = (iteration + 1) * 16 + phase
# (iteration -1 = the start state), -1 when none: the smallest key is where the
# reference raises, and the candidates with that key are the ones it lists.
_PHASE_JACOBIAN = 0
_PHASE_SINGULAR = 1      # exactly singular system: numpy.linalg.LinAlgError in the reference
_PHASE_STEP = 2
_PHASE_RESIDUAL = 3      # + index of the step scale (the start state uses 3)
_PHASES_PER_ITERATION = 16

#: Robot arrays of one problem (K nodes, E target slots, D coordinates); see
#: :class:`~direction_up_ik.core.kinematics.KernelArrays` for the node fields.
#: ``chain``: (C,) nodes needed by the slots' TCPs in tree order; ``ee_node``
#: (E,), ``ee_fixed`` (E, 4, 4): per slot; ``moves`` (D, E): coordinate moves
#: the slot's TCP; ``full_fk``: perturbed poses by full FK (mimic on a chain);
#: ``root_rot`` (3, 3), ``root_pos`` (3,): root -> world.
_Model = namedtuple("_Model", (
    "parent", "dof", "scale", "offset", "jtype", "rot", "pos", "rot_cross", "rot_outer",
    "axis_parent", "axis_local", "chain", "ee_node", "ee_fixed", "dof_node", "moves", "full_fk",
    "root_rot", "root_pos"))

#: Targets of B candidates with E slots: ``position`` (B, E, 3) m, ``direction``
#: and ``up`` (B, E, 3) unit, ``has_direction``/``has_up`` (B, E) bool,
#: ``local_direction``/``local_up`` (E, 3) unit TCP axes.
_Targets = namedtuple("_Targets", (
    "position", "direction", "up", "has_direction", "has_up", "local_direction", "local_up"))

#: Settings and the active set: weights, damping, caps, tolerances (floats);
#: ``eps``, ``cos_eps``, ``sin_eps``: FD perturbation; ``step_scales`` (n,): the first
#: ``num_step_scales`` of ``STEP_SCALES``, tried in order;
#: ``active`` (A,) int64; ``lower``/``upper`` (A,) bounds of the active joints;
#: ``q_initial`` (D,) the state the cost is measured from; ``analytic``: the
#: exact Jacobian (:func:`jacobian_analytic`) instead of forward differences;
#: ``stall_window`` (0 = off) and ``stall_ratio``: see ``SolverSettings.stall_window``;
#: ``residual_damping`` (``damping_mode="residual"``) and ``damping_floor``: see
#: :func:`step_damping`;
#: ``fast_math``: the kernel's own sin/cos (:func:`own_sincos`) in FK and an L D L^T solve
#: of the step (:func:`ldl_solve`) instead of libm's and pivoted LU (whose numbers the numpy
#: reference's follow): set with ``jacobian="analytic"`` (the search's mode, whose answers
#: differ from the spec's anyway); the spec's finite-difference mode keeps libm and LU.
_Config = namedtuple("_Config", (
    "w_pos", "w_rot", "damping", "max_step_norm", "max_position_error", "position_tol",
    "frame_tol", "eps", "cos_eps", "sin_eps", "min_step_norm", "step_scales", "max_iters",
    "active", "lower", "upper", "q_initial", "analytic", "stall_window", "stall_ratio",
    "fast_math", "residual_damping", "damping_floor"))

#: Per-candidate state (B leading): ``q`` (B, D) float64 (float32 values in the
#: active columns), ``r`` (B, 9E), ``ssr`` (B,), ``err`` (B, 3, E) unweighted
#: position/direction/up errors (NaN, once solved, for the parts a target leaves
#: free), ``iterations`` (B,) int32, ``reason``, ``fail_key`` (B,), ``done`` (B,) bool, and
#: once solved ``success`` (B,) int32 0/1 and ``cost`` (B,) (spec 4; +inf on failure).
#: The kernel initialises these fields; the caller may pass np.empty. Inputs:
#: ``q`` (the start states), ``group`` (B,) int64 and ``quota`` (B,) int64: a run of
#: consecutive rows with equal ``group`` is a relay of starts (see :func:`relay_turn`;
#: quota 0 = independent rows).
_State = namedtuple("_State", ("q", "r", "ssr", "err", "iterations", "reason", "fail_key", "done",
                               "success", "cost", "group", "quota"))

#: Per-candidate scratch (B leading) so that no iteration allocates: node frames
#: (K, 3, 3)/(K, 3), TCP poses (E, 3, 3)/(E, 3), a perturbed TCP rotation (3, 3), the Jacobian
#: (A, 9E), perturbed residuals (9E,), DLS arrays (A, A)/(A,), the trial state
#: (D,) with its residuals/errors, a perturbed state (D,), squares (max(9E, A),), and
#: the residual history of the stall test (max(1, stall_window),), and the relay's
#: bookkeeping: the iteration a row started at and whether it still waits for its turn.
_Work = namedtuple("_Work", (
    "node_rot", "node_pos", "tcp_rot", "tcp_pos", "rot_p", "jac", "r_p", "h", "g",
    "step", "matrix", "rhs", "value", "fixed", "trial", "r_t", "err_t", "q_p", "sq", "ssr_history",
    "started_at", "waiting"))

#: A multi-seed search in the kernel (:func:`search_rounds`; ``core.search._search`` is
#: its reference, :func:`search` drives it). Settings: ``round0_done`` (the state holds
#: round 0's outcome already), ``num_seeds`` K, ``max_rounds`` (rounds of seeds at most),
#: ``unlimited`` (``max_rounds`` is only the library's end: rounds that reach it report
#: status 2), ``min_successes``, ``limit_center`` (the selection; else least motion). The
#: seed library: its M states ``lib_q`` (M, D) and their features (``seeds.pose_features``)
#: in leaves, ``leaves`` (:data:`_Leaves`), the candidates' target features ``query``
#: (B, F); periodic joints turned towards ``anchor`` (D,): columns ``periodic`` (P,) int64
#: and their bounds ``periodic_lo``/``periodic_hi`` (P,). Limit centres of the active
#: joints ``center_mid``, ``center_half`` (A,) float, ``center_bounded`` (A,) bool. Outputs
#: per candidate: ``starts``, ``successes`` (B,) int64, ``best_score`` (B,) (inf: none); and
#: ``outcome`` (2,) int64: rounds run (round 0 included), status (0 done, 1 stopped by the
#: deadline with candidates pending, 2 library used up with candidates pending).
_Search = namedtuple("_Search", (
    "round0_done", "num_seeds", "max_rounds", "unlimited", "min_successes", "limit_center", "leaves",
    "query", "lib_q", "periodic", "periodic_lo", "periodic_hi", "anchor", "center_mid", "center_half",
    "center_bounded", "starts", "successes", "best_score", "outcome"))

#: M points (a seed library's features) cut into L leaves for :func:`nearest_into`:
#: ``points_t`` (F, M) in leaf order, one feature per row, ``index`` (M,) int64 their
#: indices in the library, ``start`` (L + 1,) int64 where each leaf's points begin, ``lo_t``/``hi_t`` (F, L) the
#: leaves' bounding boxes, one feature per row (``seeds.leaf_layout`` builds it).
_Leaves = namedtuple("_Leaves", ("points_t", "index", "start", "lo_t", "hi_t"))

#: Points whose distances :func:`nearest_into` computes in one pass (a leaf's, or part of one).
_SCAN_RUN = 64

#: Scratch of the seed ranking (:func:`nearest_into`): the leaves' bounds (L,), the best
#: distances and indices so far (max_rounds * K,).
_Scan = namedtuple("_Scan", ("bound", "best_d", "best_i"))

#: A whole turn (rad): the seeds' periodic joints move by multiples of it.
_TURN = 2.0 * np.pi


# ==================================================================== clock
#: The monotonic clock the kernel reads for deadlines (``time.perf_counter``'s clock
#: on Linux); without clock_gettime this backend is not used (:func:`supports`).
CLOCK = getattr(time, "CLOCK_MONOTONIC", None)


@intrinsic
def clock_ns(typingctx, clock_id):
    """``clock_gettime(clock_id)`` in nanoseconds (int64), callable from nopython code
    without the GIL (the C library symbol is resolved when the kernel is loaded)."""
    def codegen(context, builder, signature, args):
        timespec = ir.LiteralStructType([ir.IntType(64), ir.IntType(64)])  # tv_sec, tv_nsec
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), timespec.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, timespec)
        builder.call(fn, [builder.trunc(args[0], ir.IntType(32)), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(ir.IntType(64), 1_000_000_000)), nsec)
    return types.int64(types.int64), codegen


@intrinsic
def stack_array(typingctx, length, dtype):
    """An uninitialised (length,) C array of ``dtype`` (a numba number class, e.g.
    ``np.int64``) in the calling function's stack frame; ``length`` must be an integer
    literal. Scratch for code compiled without numba's runtime (:func:`solve_rows`),
    where ``np.empty`` is not available; it must not outlive the function."""
    if not isinstance(length, types.IntegerLiteral) or not isinstance(dtype, types.NumberClass):
        return None
    array_type = types.Array(dtype.instance_type, 1, "C")

    def codegen(context, builder, signature, args):
        item = context.get_data_type(dtype.instance_type)
        data = cgutils.alloca_once(builder, item, size=length.literal_value)
        ary = context.make_array(array_type)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(item))
        populate_array(ary, data=data, shape=[context.get_constant(types.intp, length.literal_value)],
                       strides=[itemsize], itemsize=itemsize, meminfo=None)
        return ary._getvalue()
    return array_type(length, dtype), codegen


# =========================================================== 3-vector helpers
# 3-vectors are tuples of floats (kept in registers); the operation order of each
# expression is the one of the numpy reference.

@jitable(inline="always")
def vec3(a):
    """(3,) array -> 3-tuple."""
    return (a[0], a[1], a[2])


@jitable(inline="always")
def dot3(a, b):
    """Dot product of two 3-vectors, summed left to right like ``np.sum(a * b, -1)``."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jitable(inline="always")
def cross3(a, b):
    """Cross product a x b (numpy's component formulas)."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@jitable(inline="always")
def norm3(a):
    """Euclidean length of a 3-vector."""
    return np.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@jitable(inline="always")
def mat_vec3(m, v):
    """(3, 3) array times 3-vector -> 3-tuple."""
    return (m[0, 0] * v[0] + m[0, 1] * v[1] + m[0, 2] * v[2],
            m[1, 0] * v[0] + m[1, 1] * v[1] + m[1, 2] * v[2],
            m[2, 0] * v[0] + m[2, 1] * v[1] + m[2, 2] * v[2])


@jitable(inline="always")
def mat_mul3(a, b, out):
    """out (3, 3) = a (3, 3) @ b (3, 3); ``out`` must not alias ``a`` or ``b``."""
    for i in range(3):
        for j in range(3):
            out[i, j] = a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j]


# sin and cos of a joint angle without libm: glibc's sincos branches on the argument's
# range (mispredicted for the varied angles of a batch) and took 12 % of a search's
# kernel time. Cody-Waite reduction by pi/2 in three parts (fdlibm's: the first two have
# 33 bits, so their products with the quadrant n are exact for |n| < 2^20, and the
# reduced angle keeps its relative accuracy near the zeros of sin and cos), then Taylor
# polynomials on |r| <= pi/4 whose first omitted terms are below 1e-17 relative.
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


@jitable(inline="always")
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


# ====================================================================== FK
@jitable(inline="always")
def frame_of(m, node, node_rot, node_pos):
    """World rotation (3, 3) and position (3,) of ``node``'s frame; node -1 = the root."""
    if node < 0:
        return m.root_rot, m.root_pos
    return node_rot[node], node_pos[node]


#: Chains of at most this many nodes take all their cos/sin before the products
#: (:func:`node_frames`); longer ones (none of the bundled robots) take them on the way.
_FK_TRIG_NODES = 64


@jitable
def joint_value(m, q, k):
    """Node k's joint value (rad / m) at state ``q``: its coordinate, scaled and offset
    for a mimic joint. (Not inlined in numba's IR: that drew NumbaIRAssumptionWarnings.)"""
    value = q[m.dof[k]]
    if m.scale[k] != 1.0 or m.offset[k] != 0.0:
        return value * m.scale[k] + m.offset[k]
    return value


@jitable(inline="always")
def node_frames(m, q, node_rot, node_pos, own_trig):
    """World frames of the chain nodes ``m.chain`` at joint state ``q``.

    Args:
        m: _Model; q: (D,) float64 joint coordinates (rad / m).
        node_rot: (K, 3, 3) out, node_pos: (K, 3) out (world, metres); only the
            rows of ``m.chain`` are written.
        own_trig: take cos/sin from :func:`own_sincos` instead of libm (``_Config.fast_math``).
    Same formulas as :meth:`RobotKinematics._node_frames`. A revolute joint's local
    rotation and its product with the parent's are spelled out in scalars (the same
    operations in the same order as a (3, 3) scratch and :func:`mat_mul3`, so the same
    values): 0.84-0.87 x the time of FK (ur5, panda). The cos/sin of every revolute
    joint are taken first, then the products: the library calls no longer interrupt
    the chain of dependent products (FK 0.78 x the time, ur5; the same values).
    """
    n = m.chain.shape[0]
    cos_all = stack_array(_FK_TRIG_NODES, np.float64)
    sin_all = stack_array(_FK_TRIG_NODES, np.float64)
    early = n <= _FK_TRIG_NODES
    if early:
        for at in range(n):
            k = m.chain[at]
            if m.jtype[k] == _REVOLUTE:
                value = joint_value(m, q, k)
                if own_trig:
                    sin_all[at], cos_all[at] = own_sincos(value)
                else:
                    cos_all[at], sin_all[at] = np.cos(value), np.sin(value)
    for at in range(n):
        k = m.chain[at]
        r_p, p_p = frame_of(m, m.parent[k], node_rot, node_pos)
        if m.jtype[k] == _REVOLUTE:
            if early:
                c, s = cos_all[at], sin_all[at]
            else:
                value = joint_value(m, q, k)
                if own_trig:
                    s, c = own_sincos(value)
                else:
                    c, s = np.cos(value), np.sin(value)
            o, r_o, r_x = m.rot_outer[k], m.rot[k], m.rot_cross[k]
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
            t = mat_vec3(r_p, m.pos[k])
        else:
            value = joint_value(m, q, k)
            mat_mul3(r_p, m.rot[k], node_rot[k])
            a = m.axis_parent[k]
            o = m.pos[k]
            t = mat_vec3(r_p, (o[0] + value * a[0], o[1] + value * a[1], o[2] + value * a[2]))
        for i in range(3):
            node_pos[k, i] = p_p[i] + t[i]


@jitable(inline="always")
def tcp_poses(m, node_rot, node_pos, tcp_rot, tcp_pos):
    """TCP world poses of the E slots from node frames.

    Args:
        node_rot (K, 3, 3), node_pos (K, 3): from :func:`node_frames`.
        tcp_rot (E, 3, 3) out, tcp_pos (E, 3) out: world, metres.
    """
    for e in range(m.ee_node.shape[0]):
        r_n, p_n = frame_of(m, m.ee_node[e], node_rot, node_pos)
        fixed = m.ee_fixed[e]
        mat_mul3(r_n, fixed[:3, :3], tcp_rot[e])
        t = mat_vec3(r_n, (fixed[0, 3], fixed[1, 3], fixed[2, 3]))
        for i in range(3):
            tcp_pos[e, i] = p_n[i] + t[i]


# ================================================================ residuals
@jitable(inline="always")
def slot_residual(rot, pos, tg, b, e, w_pos, w_rot, r, err):
    """Spec 5.2 residual of slot ``e`` of candidate ``b`` for one TCP pose.

    Args:
        rot: (3, 3) TCP rotation (world); pos: 3-tuple TCP position (m).
        tg: _Targets; w_pos, w_rot: weights.
        r: (9E,) out, writes r[9e:9e+9] = [w_p e_pos, w_r e_dir, w_r e_up].
        err: (3, E) out, writes err[:, e] = unweighted |e_pos| (m), |e_dir|,
            |e_up| (rad); unconstrained parts are 0.
    """
    cur_dir = mat_vec3(rot, vec3(tg.local_direction[e]))
    cur_up = mat_vec3(rot, vec3(tg.local_up[e]))
    tp = tg.position[b, e]
    e_pos = (pos[0] - tp[0], pos[1] - tp[1], pos[2] - tp[2])
    t_dir = vec3(tg.direction[b, e])
    e_dir = (0.0, 0.0, 0.0)
    e_up = (0.0, 0.0, 0.0)
    if tg.has_direction[b, e]:
        e_dir = axis_error(cur_dir, t_dir)
    if tg.has_up[b, e]:
        e_up = axis_error(align_vector(cur_up, cur_dir, t_dir), vec3(tg.up[b, e]))
    base = 9 * e
    for i in range(3):
        r[base + i] = w_pos * e_pos[i]
        r[base + 3 + i] = w_rot * e_dir[i]
        r[base + 6 + i] = w_rot * e_up[i]
    err[0, e] = norm3(e_pos)
    err[1, e] = norm3(e_dir)
    err[2, e] = norm3(e_up)


# The hot helpers below take the few arrays they use, not the whole _Work / _Config
# tuples: passing the namedtuples to a call is what costs (with reference counting about
# 0.3 us per call; without it, making ``iterate``, which takes all five, a call instead
# of inlining it still took 1.14-1.24 x the time of a 1000-target batch).
@jitable
def evaluate(m, tg, w_pos, w_rot, own_trig, b, q, node_rot, node_pos, tcp_rot, tcp_pos, r, err):
    """Residuals ``r`` (9E,) and unweighted errors ``err`` (3, E) of state ``q`` (D,) of candidate b
    (``own_trig``: FK with :func:`own_sincos`, see :func:`node_frames`).

    Leaves the node frames (``node_rot``, ``node_pos``) and TCP poses (``tcp_rot``,
    ``tcp_pos``) of ``q`` in those arrays (candidate b's rows of _Work).
    """
    node_frames(m, q, node_rot, node_pos, own_trig)
    tcp_poses(m, node_rot, node_pos, tcp_rot, tcp_pos)
    for e in range(tcp_rot.shape[0]):
        slot_residual(tcp_rot[e], vec3(tcp_pos[e]), tg, b, e, w_pos, w_rot, r, err)


#: :func:`evaluate` inlined, for the hot call site (a step's trial states): the solves from
#: the start state of a 1000-target batch took 0.92-0.95 x the CPU time (ur5, panda; inlining
#: the Jacobian or the DLS step as well gained nothing more or lost, A/B in one process).
#: Inlining it at every call site tripled the kernel's first compile (32 -> 92 s).
evaluate_inlined = jitable(inline="always")(pytypes.FunctionType(
    evaluate.__code__, evaluate.__globals__, "evaluate_inlined"))


@jitable(inline="always")
def evaluate_row(m, tg, cfg, b, w, q, wk, r, err):
    """:func:`evaluate` of candidate b with row w of ``wk`` (inlined: unpacks in the caller)."""
    evaluate(m, tg, cfg.w_pos, cfg.w_rot, cfg.fast_math, b, q, wk.node_rot[w], wk.node_pos[w], wk.tcp_rot[w],
             wk.tcp_pos[w], r, err)


@jitable(inline="always")
def meets_tolerances(tg, cfg, b, err):
    """True when every slot of candidate b is strictly within the tolerances (err (3, E) unweighted)."""
    return within_tolerances(tg.has_direction[b], tg.has_up[b], cfg.position_tol, cfg.frame_tol, err)


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


# Plain loops instead of slice assignment (``dst[:] = src``), which numba compiles
# to its general broadcasting copy: measurably slower for these 3 to 81 values.
@jitable(inline="always")
def copy1(dst, src):
    """dst[:] = src for 1-D arrays of equal length."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@jitable(inline="always")
def copy2(dst, src):
    """dst[:, :] = src for 2-D arrays of equal shape."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


@jitable
def max_position_error(err):
    """Largest position error over the slots of err (3, E); NaN propagates like ``np.max``."""
    out = err[0, 0]
    for e in range(1, err.shape[1]):
        v = err[0, e]
        if v > out or np.isnan(v):
            out = v
    return out


# ================================================================= Jacobian
@jitable
def jacobian_shortcut(m, tg, w_pos, w_rot, eps, c, s, active, b, r, node_rot, node_pos, tcp_rot,
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
        k = m.dof_node[d]
        for e in range(tcp_rot.shape[0]):
            base = 9 * e
            if k < 0 or not m.moves[d, e]:
                for j in range(9):
                    jac[i, base + j] = 0.0
                continue
            axis = mat_vec3(node_rot[k], vec3(m.axis_local[k]))
            tr, tp = tcp_rot[e], tcp_pos[e]
            if m.jtype[k] == _PRISMATIC:
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
            slot_residual(rot_p, pos_p, tg, b, e, w_pos, w_rot, r_p, err)
            for j in range(9):
                jac[i, base + j] = (r_p[base + j] - r[base + j]) / eps


@jitable
def jacobian_full_fk(m, tg, cfg, b, w, q, r, wk, jac):
    """Forward-difference Jacobian (transposed) by one full FK per perturbed state.

    Used when a mimic joint sits on a TCP chain (the reference does the same).
    Args: b: candidate, w: its row of ``wk``; q (D,) current state, r (9E,) its
    residuals; jac (A, 9E) out.
    """
    q_p, r_p, err = wk.q_p[w], wk.r_p[w], wk.err_t[w]
    for i in range(cfg.active.shape[0]):
        d = cfg.active[i]
        copy1(q_p, q)
        q_p[d] += cfg.eps
        evaluate_row(m, tg, cfg, b, w, q_p, wk, r_p, err)
        for j in range(r.shape[0]):
            jac[i, j] = (r_p[j] - r[j]) / cfg.eps


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


@jitable
def jacobian_analytic(m, tg, w_pos, w_rot, active, b, node_rot, node_pos, tcp_rot, tcp_pos, jac):
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
    Used when not ``m.full_fk`` (no mimic joint on a TCP chain).
    """
    zero = (0.0, 0.0, 0.0)
    ex, ey, ez = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    for e in range(tcp_rot.shape[0]):
        base = 9 * e
        cur_dir = mat_vec3(tcp_rot[e], vec3(tg.local_direction[e]))
        cur_up = mat_vec3(tcp_rot[e], vec3(tg.local_up[e]))
        t_dir = vec3(tg.direction[b, e])
        md0 = md1 = md2 = mu0 = mu1 = mu2 = zero
        if tg.has_direction[b, e]:
            v, s, c, scale = axis_error_parts(cur_dir, t_dir)
            md0 = axis_error_derivative(v, s, c, scale, t_dir, cross3(ex, cur_dir))
            md1 = axis_error_derivative(v, s, c, scale, t_dir, cross3(ey, cur_dir))
            md2 = axis_error_derivative(v, s, c, scale, t_dir, cross3(ez, cur_dir))
        if tg.has_up[b, e]:
            t_up = vec3(tg.up[b, e])
            parts = axis_error_parts(align_vector(cur_up, cur_dir, t_dir), t_up)
            mu0 = up_error_derivative(ex, cur_dir, cur_up, t_dir, t_up, parts)
            mu1 = up_error_derivative(ey, cur_dir, cur_up, t_dir, t_up, parts)
            mu2 = up_error_derivative(ez, cur_dir, cur_up, t_dir, t_up, parts)
        p = tcp_pos[e]
        for i in range(active.shape[0]):
            d = active[i]
            k = m.dof_node[d]
            if k < 0 or not m.moves[d, e]:
                for j in range(9):
                    jac[i, base + j] = 0.0
                continue
            z = mat_vec3(node_rot[k], vec3(m.axis_local[k]))
            if m.jtype[k] == _PRISMATIC:
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


# ==================================================================== step
@jitable
def lu_solve(a, x):
    """Solve ``a @ y = x`` in place: ``a`` (n, n) becomes its LU factors, ``x`` (n,) becomes y.

    Gaussian elimination with partial pivoting (first row of largest |pivot|,
    like LAPACK getrf). Returns False when a pivot is exactly zero (singular;
    ``numpy.linalg.solve`` raises LinAlgError there).
    """
    n = a.shape[0]
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


@jitable
def ldl_solve(a, x):
    """Solve ``a @ y = x`` in place for a symmetric ``a`` (n, n) by a = L D L^T without
    pivoting (L unit lower, below the diagonal of ``a``; D on it), ``x`` (n,) becomes y.
    Returns False when a pivot is not positive (``a`` not numerically positive definite;
    ``a`` and ``x`` are then partly overwritten). Reads only the lower triangle."""
    n = a.shape[0]
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


@jitable
def clamped_matrix(h, fixed, matrix):
    """``h`` (A, A) with the rows and columns of the ``fixed`` joints (A,) bool replaced by
    those of the identity, into ``matrix``."""
    a = h.shape[0]
    for i in range(a):
        for j in range(a):
            matrix[i, j] = h[i, j] if not fixed[i] and not fixed[j] else 0.0
        if fixed[i]:
            matrix[i, i] = 1.0


@jitable(inline="always")
def system_matrix(h, fixed, clamped, matrix):
    """``matrix`` = ``h``, or its :func:`clamped_matrix` when ``clamped`` (some joint fixed)."""
    if clamped:
        clamped_matrix(h, fixed, matrix)
    else:
        copy2(matrix, h)


@jitable(inline="always")
def clamped_solve(ldl, h, fixed, clamped, rhs, matrix, x):
    """x (A,) = M^-1 rhs for M = :func:`system_matrix` (built in ``matrix``, scratch): by
    :func:`ldl_solve` when ``ldl``, by :func:`lu_solve` otherwise or where L D L^T meets a
    non-positive pivot. Returns False when LU meets an exactly singular M."""
    system_matrix(h, fixed, clamped, matrix)
    copy1(x, rhs)
    if ldl:
        if ldl_solve(matrix, x):
            return True
        system_matrix(h, fixed, clamped, matrix)
        copy1(x, rhs)
    return lu_solve(matrix, x)


@jitable
def limited_dls_step(damping, max_step_norm, active, lower, upper, jac, r, q, h, g, step, matrix, rhs,
                     value, fixed, scratch, ldl):
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
        ldl: solve each system by :func:`ldl_solve` (``_Config.fast_math``; 0.7 x the
            time of LU for 6 joints), by LU where that meets a non-positive pivot.
    Returns:
        False when a system is exactly singular (step undefined).
    """
    a, n = jac.shape
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
    if not clamped_solve(ldl, h, fixed, False, g, matrix, step):
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
        if not clamped_solve(ldl, h, fixed, True, rhs, matrix, step):
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


# ================================================================ iteration
@jitable(inline="always")
def fail(st, b, it, phase):
    """Record a numerical failure of candidate b at iteration ``it``, ``phase``."""
    st.fail_key[b] = (it + 1) * _PHASES_PER_ITERATION + phase
    st.done[b] = True


@jitable(inline="always")
def iterate(b, w, it, m, tg, cfg, st, wk):
    """One solver iteration (spec 5.3, 5.4) of live candidate b (row w of ``wk``): Jacobian,
    limited DLS step, step scales 1 .. 1/128 with the position guard; updates ``st`` row b."""
    q, r = st.q[b], st.r[b]
    # wk's row w holds the node frames and TCP poses of q: the last evaluate() of
    # this candidate was of q (its start state, or the trial just accepted).
    jac = wk.jac[w]
    node_rot, node_pos, tcp_rot, tcp_pos = wk.node_rot[w], wk.node_pos[w], wk.tcp_rot[w], wk.tcp_pos[w]
    if cfg.analytic:
        jacobian_analytic(m, tg, cfg.w_pos, cfg.w_rot, cfg.active, b, node_rot, node_pos, tcp_rot, tcp_pos,
                          jac)
    elif m.full_fk:
        jacobian_full_fk(m, tg, cfg, b, w, q, r, wk, jac)
    else:
        jacobian_shortcut(m, tg, cfg.w_pos, cfg.w_rot, cfg.eps, cfg.cos_eps, cfg.sin_eps, cfg.active, b, r,
                          node_rot, node_pos, tcp_rot, tcp_pos, wk.rot_p[w], wk.r_p[w], wk.err_t[w], jac)
    if not all_finite2(jac):
        fail(st, b, it, _PHASE_JACOBIAN)
        return
    step, scratch = wk.step[w], wk.sq[w]
    damping = step_damping(cfg.residual_damping, cfg.damping, cfg.damping_floor, st.ssr[b])
    if not limited_dls_step(damping, cfg.max_step_norm, cfg.active, cfg.lower, cfg.upper, jac, r, q,
                            wk.h[w], wk.g[w], step, wk.matrix[w], wk.rhs[w],
                            wk.value[w], wk.fixed[w], scratch, cfg.fast_math):
        fail(st, b, it, _PHASE_SINGULAR)
        return
    if not all_finite(step):
        fail(st, b, it, _PHASE_STEP)
        return
    if np.sqrt(sum_of_squares(step, scratch)) < cfg.min_step_norm:
        st.reason[b] = _STEP_TOO_SMALL
        st.done[b] = True
    else:
        old_max = max_position_error(st.err[b])
        trial, r_t, err_t = wk.trial[w], wk.r_t[w], wk.err_t[w]
        accepted = False
        for si in range(cfg.step_scales.shape[0]):
            scale = cfg.step_scales[si]
            copy1(trial, q)
            for i in range(cfg.active.shape[0]):
                d = cfg.active[i]
                trial[d] = trial[d] + scale * step[i]
            to_float32_in_limits(trial, cfg.active, cfg.lower, cfg.upper)
            evaluate_inlined(m, tg, cfg.w_pos, cfg.w_rot, cfg.fast_math, b, trial, node_rot, node_pos, tcp_rot, tcp_pos,
                             r_t, err_t)
            if not all_finite(r_t):
                fail(st, b, it, _PHASE_RESIDUAL + si)
                return
            ssr_t = sum_of_squares(r_t, scratch)
            new_max = max_position_error(err_t)
            if old_max <= cfg.max_position_error:
                guard = new_max <= cfg.max_position_error
            else:
                guard = new_max < old_max
            if ssr_t < st.ssr[b] and guard:
                copy1(q, trial)
                copy1(r, r_t)
                st.ssr[b] = ssr_t
                copy2(st.err[b], err_t)
                st.iterations[b] += 1
                accepted = True
                break
        if not accepted:
            st.reason[b] = _NO_ACCEPTABLE_STEP
            st.done[b] = True
    if meets_tolerances(tg, cfg, b, st.err[b]):
        st.reason[b] = _CONVERGED
        st.done[b] = True
    elif cfg.stall_window > 0 and not st.done[b]:
        stall_test(b, cfg, st, wk.ssr_history[w])


@jitable
def step_damping(residual, damping, floor, ssr):
    """The damping of a step from a state of weighted sum of squared residuals ``ssr``:
    ``damping``, or when ``residual`` (``SolverSettings.damping_mode="residual"``)
    min(damping, max(ssr, floor)); the reference's ``_Solver.damping``."""
    if residual:
        return min(damping, max(ssr, floor))
    return damping


@jitable(inline="always")
def stall_test(b, cfg, st, history):
    """After an accepted step of candidate b: stop it as stalled when its residual is above
    ``stall_ratio`` times the one ``stall_window`` steps before; record the residual.
    history[k % w] holds the residual after k accepted steps (slot 0: the start state)."""
    k = st.iterations[b]
    slot = k % cfg.stall_window
    if k >= cfg.stall_window and st.ssr[b] > cfg.stall_ratio * history[slot]:
        st.reason[b] = _STALLED
        st.done[b] = True
    history[slot] = st.ssr[b]


@jitable
def start_candidate(b, w, m, tg, cfg, st, wk):
    """Round candidate b's start state into the bounds and evaluate it (row w of ``wk``);
    converged or nothing-to-move candidates are done at once. Returns False on a
    non-finite residual."""
    to_float32_in_limits(st.q[b], cfg.active, cfg.lower, cfg.upper)
    evaluate_row(m, tg, cfg, b, w, st.q[b], wk, st.r[b], st.err[b])
    if not all_finite(st.r[b]):
        fail(st, b, -1, _PHASE_RESIDUAL)
        return False
    st.ssr[b] = sum_of_squares(st.r[b], wk.sq[w])
    wk.ssr_history[w, 0] = st.ssr[b]
    st.reason[b] = _MAX_ITERS
    if meets_tolerances(tg, cfg, b, st.err[b]):
        st.reason[b] = _CONVERGED
        st.done[b] = True
    elif cfg.active.shape[0] == 0:
        st.reason[b] = _NO_ACTIVE_JOINTS
        st.done[b] = True
    return True


@jitable
def relay_turn(st, wk, lo, hi, it, max_iters):
    """Before iteration ``it`` of rows lo:hi (whole runs; ``wk`` rows 0..): rows that have
    run ``max_iters`` iterations stop (reason max_iters); in a relay (a run of consecutive
    rows with equal ``group`` and ``quota`` > 0) the rest stop as superseded once ``quota``
    rows have converged, else, when none of its rows is running, the next waiting row
    starts. Same as the relay in ``_Solver.run``."""
    for b in range(lo, hi):
        w = b - lo
        if not st.done[b] and not wk.waiting[w] and it - wk.started_at[w] >= max_iters:
            st.done[b] = True
    start = lo
    while start < hi:
        end, count, running = start, 0, 0
        while end < hi and st.group[end] == st.group[start]:
            if st.done[end]:
                count += st.reason[end] == _CONVERGED
            elif not wk.waiting[end - lo]:
                running += 1
            end += 1
        if st.quota[start] > 0:
            if count >= st.quota[start]:
                for k in range(start, end):
                    if not st.done[k]:
                        st.reason[k] = _SUPERSEDED
                        st.done[k] = True
                        wk.waiting[k - lo] = False
            elif running == 0:
                for k in range(start, end):
                    if wk.waiting[k - lo]:
                        wk.waiting[k - lo] = False
                        wk.started_at[k - lo] = it
                        break
        start = end


@jitable
def finish_candidate(b, w, tg, cfg, st, wk):
    """Spec 4 outcome of candidate b: ``success``, ``cost`` (sum of squared active-joint
    changes from ``cfg.q_initial``, pairwise like ``np.sum``; +inf on failure), then NaN
    in ``err`` for the parts its targets leave free."""
    err = st.err[b]
    st.success[b] = meets_tolerances(tg, cfg, b, err)
    if st.success[b]:
        q, scratch = st.q[b], wk.sq[w]
        for i in range(cfg.active.shape[0]):
            d = cfg.active[i]
            delta = q[d] - cfg.q_initial[d]
            scratch[i] = delta * delta
        st.cost[b] = pairwise_sum(scratch, 0, cfg.active.shape[0])
    else:
        st.cost[b] = np.inf
    for e in range(err.shape[1]):
        if not tg.has_direction[b, e]:
            err[1, e] = np.nan
        if not tg.has_up[b, e]:
            err[2, e] = np.nan


@jitable
def alloc_work(b, k, e, a, d, w):
    """Scratch arrays for b rows, k nodes, e slots, a active joints, d coordinates,
    stall window w."""
    n = 9 * e
    return _Work(
        np.zeros((b, k, 3, 3)), np.zeros((b, k, 3)), np.zeros((b, e, 3, 3)), np.zeros((b, e, 3)),
        np.zeros((b, 3, 3)), np.zeros((b, a, n)), np.zeros((b, n)),
        np.zeros((b, a, a)), np.zeros((b, a)), np.zeros((b, a)), np.zeros((b, a, a)),
        np.zeros((b, a)), np.zeros((b, a)), np.zeros((b, a), dtype=np.bool_), np.zeros((b, d)),
        np.zeros((b, n)), np.zeros((b, 3, e)), np.zeros((b, d)), np.zeros((b, max(n, a))),
        np.zeros((b, max(1, w))), np.zeros(b, dtype=np.int64), np.zeros(b, dtype=np.bool_))


@jitable
def block_end(st, lo, size):
    """End of the block of rows that starts at row lo: lo + ``size`` rows (at most all),
    extended to the end of a relay (its rows interact) cut by that point."""
    n = st.err.shape[0]
    hi = min(lo + size, n)
    while hi < n and st.quota[hi] > 0 and st.group[hi] == st.group[hi - 1]:
        hi += 1
    return hi


@jitable
def block_size(st, has_deadline):
    """Rows per block (:func:`solve_rows`): all rows with a deadline, else :data:`BLOCK_ROWS`."""
    n = st.err.shape[0]
    return n if has_deadline else min(n, BLOCK_ROWS)


@njit_cached(nogil=True)
def run_serial(m, tg, cfg, st, has_deadline, deadline_ns):
    """The compiled entry point of a solve: allocates the scratch of the largest block
    (:func:`alloc_work`) and runs :func:`solve_rows`. Its four namedtuples come as
    plain tuples (``tuple(m)``, ...), rebuilt here: numba's dispatcher types plain
    tuples in C but namedtuples in Python, which saves about 6 us per call.
    Returns True when a candidate hit a numerical failure (``st.fail_key``)."""
    model, targets, config, state = _Model(*m), _Targets(*tg), _Config(*cfg), _State(*st)
    size, rows, lo = block_size(state, has_deadline), 1, 0
    while lo < state.err.shape[0]:
        hi = block_end(state, lo, size)
        rows = max(rows, hi - lo)
        lo = hi
    work = alloc_work(rows, model.parent.shape[0], state.err.shape[2], config.active.shape[0],
                      state.q.shape[1], config.stall_window)
    return solve_rows(model, targets, config, state, work, has_deadline, deadline_ns)


@njit_cached(nogil=True)
def run_search(m, tg, cfg, st, has_deadline, deadline_ns, sr):
    """The compiled entry point of a search (:func:`search_rows`): allocates the scratch of
    the largest block, the rows of its rounds of seeds and the seed ranking's scratch.
    Arguments as for :func:`run_serial` (``has_deadline`` and ``deadline_ns`` come from
    Python even without a deadline, so that :func:`solve_rows` is compiled for one signature,
    not a second one for the literal constants ``False, 0``); ``sr``: a :data:`_Search` as a
    plain tuple (its ``leaves`` one too).
    Returns True when a candidate hit a numerical failure (then the search stopped)."""
    model, targets, config, state = _Model(*m), _Targets(*tg), _Config(*cfg), _State(*st)
    search = _Search(*(sr[:6] + (_Leaves(*sr[6]),) + sr[7:]))
    b, d, e, k = state.q.shape[0], state.q.shape[1], state.err.shape[2], search.num_seeds
    # Blocks of round 0 hold BLOCK_ROWS rows, blocks of seeds up to a relay more; with a
    # deadline a round is one block.
    if has_deadline:
        rows = max(1, b, b * k)
    else:
        rows = max(1, min(b, BLOCK_ROWS), min(b * k, BLOCK_ROWS + k - 1))
    seeds = _State(np.empty((b * k, d)), np.empty((b * k, 9 * e)), np.empty(b * k), np.empty((b * k, 3, e)),
                   np.empty(b * k, dtype=np.int32), np.empty(b * k, dtype=np.int64),
                   np.empty(b * k, dtype=np.int64), np.empty(b * k, dtype=np.bool_),
                   np.empty(b * k, dtype=np.int32), np.empty(b * k), np.empty(b * k, dtype=np.int64),
                   np.empty(b * k, dtype=np.int64))
    seed_targets = _Targets(np.empty((b * k, e, 3)), np.empty((b * k, e, 3)), np.empty((b * k, e, 3)),
                            np.empty((b * k, e), dtype=np.bool_), np.empty((b * k, e), dtype=np.bool_),
                            targets.local_direction, targets.local_up)
    ranks = search.max_rounds * k
    scan = _Scan(np.empty(search.leaves.lo_t.shape[1]), np.empty(ranks), np.empty(ranks, dtype=np.int64))
    work = alloc_work(rows, model.parent.shape[0], e, config.active.shape[0], d, config.stall_window)
    return search_rows(model, targets, config, state, work, has_deadline, deadline_ns, search, seeds,
                       seed_targets, scan)


@jitable
def solve_block(m, tg, cfg, st, wk, lo, hi, iterations, has_deadline, deadline_ns):
    """Start rows lo:hi (scratch rows 0 .. hi - lo - 1 of ``wk``), then up to ``iterations``
    iterations of them, iteration-major (every running row takes iteration k before any
    takes k + 1; a relay's waiting rows start later, :func:`relay_turn`). Returns -2 when
    a start state's residual is not finite (no iteration then runs), the iteration at
    which a row failed numerically (that iteration finished for the others), or -1."""
    ok = True
    for b in range(lo, hi):
        ok &= start_candidate(b, b - lo, m, tg, cfg, st, wk)
        first = b == lo or st.group[b] != st.group[b - 1]
        wk.waiting[b - lo] = st.quota[b] > 0 and not first and not st.done[b]
        wk.started_at[b - lo] = 0
    if not ok:
        return -2
    for it in range(iterations):
        relay_turn(st, wk, lo, hi, it, cfg.max_iters)
        live = 0
        for b in range(lo, hi):
            live += not st.done[b] and not wk.waiting[b - lo]
        if live == 0:
            break
        if has_deadline:
            if clock_ns(CLOCK) > deadline_ns:
                for b in range(lo, hi):
                    if not st.done[b]:  # the waiting rows too
                        st.reason[b] = _TIME_BUDGET
                        st.done[b] = True
                break
        failed = False
        for b in range(lo, hi):
            if not st.done[b] and not wk.waiting[b - lo]:
                iterate(b, b - lo, it, m, tg, cfg, st, wk)
                failed |= st.fail_key[b] >= 0
        if failed:
            return it
    return -1


@njit_cached(nogil=True, _nrt=False)
def solve_rows(m, tg, cfg, st, wk, has_deadline, deadline_ns):
    """The whole solve of the candidates in ``tg``/``st`` in one compiled call; releases
    the GIL (threaded batches run one call per chunk of candidates). Compiled without
    numba's runtime (no reference counting, no allocation; see the module docstring).
    Returns True when a candidate failed numerically (``st.fail_key``).

    The rows are solved in blocks (:func:`block_size`, :func:`block_end`): each block's
    rows are started, then iterated iteration-major, with ``wk`` rows 0.. as their
    scratch. Rows are independent, so their results are those of one iteration-major
    pass over all rows, as in the reference; small blocks keep the scratch small
    (allocated once per call: fresh pages for a whole 1000-row batch cost 10 % of its
    time) and in the L1 cache. Numerical failures are reported as by one pass: every
    block's start states are evaluated (a failing one stops all iterations of the
    blocks after it), and after a failure at iteration k the later blocks run only
    up to k (an earlier failure there lowers k), so the smallest ``fail_key`` and the
    rows holding it are the same (iterations are counted from the call's start, also
    for a relay's later rows). With a deadline (``deadline_ns``, a :data:`CLOCK`
    reading in ns checked before every iteration when ``has_deadline``) all rows form
    one block: the deadline stops every live row at the same iteration boundary, with
    reason time_budget.
    """
    n = st.err.shape[0]
    for b in range(n):
        st.iterations[b] = 0
        st.reason[b] = _MAX_ITERS
        st.fail_key[b] = -1
        st.done[b] = False
    size = block_size(st, has_deadline)
    cap = -1  # iterations the blocks after a failure may run (-1: no failure yet)
    lo = 0
    while lo < n:
        hi = block_end(st, lo, size)
        # Every row runs at most max_iters iterations, a relay's rows one after another.
        iterations = cfg.max_iters * (hi - lo)
        if cap >= 0:
            iterations = min(iterations, cap)
        at = solve_block(m, tg, cfg, st, wk, lo, hi, iterations, has_deadline, deadline_ns)
        if at != -1:
            cap = 0 if at == -2 else (at + 1 if cap < 0 else min(cap, at + 1))
        lo = hi
    if cap >= 0:
        return True
    for b in range(n):
        finish_candidate(b, 0, tg, cfg, st, wk)
    return False


@njit_cached(nogil=True, _nrt=False)
def search_rows(m, tg, cfg, st, wk, has_deadline, deadline_ns, sr, ss, ts, scan):
    """The multi-seed search of the candidates in ``tg``/``st`` in one compiled call:
    round 0 (:func:`solve_rows` from the start states in ``st``, unless ``sr.round0_done``), then the rounds of seeds
    (:func:`search_rounds`, rows ``ss``/``ts``). Compiled without numba's runtime, releases
    the GIL. Returns True on a numerical failure (the search stops there)."""
    if not sr.round0_done and solve_rows(m, tg, cfg, st, wk, has_deadline, deadline_ns):
        return True
    return search_rounds(m, tg, cfg, st, wk, has_deadline, deadline_ns, sr, ss, ts, scan)


# ================================================================== search
@jitable
def selection_score(cfg, sr, st, b, scratch):
    """The search's score of solved row b of ``st`` (lower is better, a success assumed):
    its cost (least motion), or with ``sr.limit_center`` the squared normalised distance
    of its active joints to the limit centres, summed like ``np.sum`` (the reference's
    ``core.search.selection_score``)."""
    if not sr.limit_center:
        return st.cost[b]
    q = st.q[b]
    for i in range(cfg.active.shape[0]):
        z = (q[cfg.active[i]] - sr.center_mid[i]) / sr.center_half[i] if sr.center_bounded[i] else 0.0
        scratch[i] = z * z
    return pairwise_sum(scratch, 0, cfg.active.shape[0])


@jitable
def seed_rows(tg, sr, ss, ts, c, base, first, need, scan):
    """Rows base .. base + K - 1 of ``ss``/``ts``: candidate c's library states of distance
    ranks first .. first + K - 1 (nearest first), their periodic joints turned by whole
    turns towards ``sr.anchor`` within the bounds (``SeedLibrary.seeds``), as one relay
    (group c, quota ``need``) towards c's targets."""
    k = sr.num_seeds
    nearest_into(sr.leaves, sr.query[c], first, k, scan.bound, scan.best_d, scan.best_i)
    for s in range(k):
        row, state = base + s, sr.lib_q[scan.best_i[first + s]]
        for j in range(state.shape[0]):
            ss.q[row, j] = state[j]
        for p in range(sr.periodic.shape[0]):
            col, lo, hi = sr.periodic[p], sr.periodic_lo[p], sr.periodic_hi[p]
            q = ss.q[row, col]
            turns = min(max(np.rint((sr.anchor[col] - q) / _TURN), np.ceil((lo - q) / _TURN)),
                        np.floor((hi - q) / _TURN))
            ss.q[row, col] = min(max(q + _TURN * turns, lo), hi)
        for e in range(tg.position.shape[1]):
            for j in range(3):
                ts.position[row, e, j] = tg.position[c, e, j]
                ts.direction[row, e, j] = tg.direction[c, e, j]
                ts.up[row, e, j] = tg.up[c, e, j]
            ts.has_direction[row, e] = tg.has_direction[c, e]
            ts.has_up[row, e] = tg.has_up[c, e]
        ss.group[row] = c
        ss.quota[row] = need


@jitable
def take_row(dst, c, src, row):
    """Row ``row`` of state ``src`` becomes candidate c's outcome in ``dst``."""
    copy1(dst.q[c], src.q[row])
    copy2(dst.err[c], src.err[row])
    dst.iterations[c] = src.iterations[row]
    dst.reason[c] = src.reason[row]
    dst.success[c] = src.success[row]
    dst.cost[c] = src.cost[row]


@jitable
def search_rounds(m, tg, cfg, st, wk, has_deadline, deadline_ns, sr, ss, ts, scan):
    """The multi-seed search of every candidate of ``st``, whose round 0 (the solve from the
    current state) is done: the rounds of seeds of ``core.search._search`` (with
    ``seeding="nearest"`` and no callback). Each round gives every candidate with fewer than
    ``sr.min_successes`` successes its next ``sr.num_seeds`` library states, tried as a relay
    (:func:`seed_rows`, :func:`relay_turn`); a success whose score (:func:`selection_score`)
    is strictly below the candidate's best so far replaces its row of ``st`` (earlier rounds
    and nearer seeds win ties). No round starts once the deadline (if any) has passed, and
    a round's rows stop at it. Fills ``sr.starts``, ``sr.successes``, ``sr.best_score``
    (inf: no success) and ``sr.outcome``. Returns True on a numerical failure."""
    b, k = st.q.shape[0], sr.num_seeds
    scratch = wk.sq[0]
    for c in range(b):
        sr.starts[c] = 1
        sr.successes[c] = 0
        sr.best_score[c] = np.inf
        if st.success[c]:
            sr.successes[c] = 1
            sr.best_score[c] = selection_score(cfg, sr, st, c, scratch)
    rounds, status = 1, 0
    while True:
        pending = 0
        for c in range(b):
            pending += sr.successes[c] < sr.min_successes
        if pending > 0 and has_deadline and clock_ns(CLOCK) >= deadline_ns:
            status = 1
            break
        if pending == 0 or k == 0:
            break
        if rounds > sr.max_rounds:
            status = 2 if sr.unlimited else 0
            break
        first, n = (rounds - 1) * k, 0
        for c in range(b):
            if sr.successes[c] < sr.min_successes:
                seed_rows(tg, sr, ss, ts, c, n * k, first, sr.min_successes - sr.successes[c], scan)
                n += 1
        rows = n * k
        part = _State(ss.q[:rows], ss.r[:rows], ss.ssr[:rows], ss.err[:rows], ss.iterations[:rows],
                      ss.reason[:rows], ss.fail_key[:rows], ss.done[:rows], ss.success[:rows],
                      ss.cost[:rows], ss.group[:rows], ss.quota[:rows])
        targets = _Targets(ts.position[:rows], ts.direction[:rows], ts.up[:rows], ts.has_direction[:rows],
                           ts.has_up[:rows], ts.local_direction, ts.local_up)
        if solve_rows(m, targets, cfg, part, wk, has_deadline, deadline_ns):
            return True
        for row in range(rows):
            c = part.group[row]
            if part.reason[row] != _SUPERSEDED:
                sr.starts[c] += 1
            if part.success[row]:
                sr.successes[c] += 1
                score = selection_score(cfg, sr, part, row, scratch)
                if score < sr.best_score[c]:
                    sr.best_score[c] = score
                    take_row(st, c, part, row)
        rounds += 1
    sr.outcome[0] = rounds
    sr.outcome[1] = status
    return False


# ============================================================ seed ranking
@jitable
def nearest_into(lib, query, first, count, bound, best_d, best_i):
    """Nearest neighbours of one query (F,) among the M points of a leaf layout ``lib``
    (:data:`_Leaves`): afterwards ``best_i[first:first + count]`` holds the indices of the
    points at Euclidean distance ranks ``first`` .. ``first + count - 1`` (equal distances:
    lower index first), exactly those of a scan of all points. Scratch: ``bound`` (L,),
    ``best_d``, ``best_i`` (>= first + count,).

    The leaves are visited in the order of a lower bound of their points' distances (the
    distance to the leaf's bounding box, summed feature by feature like a point's: every
    term and partial sum is a rounded monotone function of the exact one, so the bound
    never exceeds a point's computed distance); once the next bound is above the k-th
    best distance so far, no point left can enter. A point's squared distance is summed
    feature by feature, in order, as by a full scan."""
    f, nl = lib.lo_t.shape
    k = first + count
    for leaf in range(nl):
        bound[leaf] = 0.0
    for c in range(f):  # along the leaves, one feature at a time (vectorised)
        q, lo, hi = query[c], lib.lo_t[c], lib.hi_t[c]
        for leaf in range(nl):
            gap = max(lo[leaf] - q, 0.0) + max(q - hi[leaf], 0.0)  # lo <= hi: one term at most
            bound[leaf] += gap * gap
    # A run of up to _SCAN_RUN points' distances at a time, in the stack (no aliasing with
    # the points: the compiler vectorises the pass along the points, one feature per row).
    dist = stack_array(_SCAN_RUN, np.float64)
    size = 0
    for _ in range(nl):
        leaf, low = 0, bound[0]
        for l in range(1, nl):
            if bound[l] < low:
                leaf, low = l, bound[l]
        if low == np.inf or (size == k and low > best_d[k - 1]):
            break
        bound[leaf] = np.inf  # visited
        for j0 in range(lib.start[leaf], lib.start[leaf + 1], _SCAN_RUN):
            n = min(_SCAN_RUN, lib.start[leaf + 1] - j0)
            for j in range(n):
                dist[j] = 0.0
            for c in range(f):
                # A slice of the row: its unit stride is known, which vectorises the loop
                # (2.2 x faster than indexing the row at j0 + j).
                row, qc = lib.points_t[c, j0:j0 + n], query[c]
                for j in range(n):
                    t = row[j] - qc
                    dist[j] += t * t
            if size == k:  # skip a run with no point at or below the k-th best distance
                worst, hits = best_d[k - 1], 0
                for j in range(n):
                    hits += dist[j] <= worst
                if hits == 0:
                    continue
            for j in range(n):
                d, i = dist[j], lib.index[j0 + j]
                if size == k and not (d < best_d[k - 1] or (d == best_d[k - 1] and i < best_i[k - 1])):
                    continue
                # best_d[:size] is sorted by (distance, index); when full, the last one drops out.
                pos = size if size < k else k - 1
                while pos > 0 and (d < best_d[pos - 1] or (d == best_d[pos - 1] and i < best_i[pos - 1])):
                    best_d[pos] = best_d[pos - 1]
                    best_i[pos] = best_i[pos - 1]
                    pos -= 1
                best_d[pos] = d
                best_i[pos] = i
                if size < k:
                    size += 1


@njit_cached(nogil=True)
def nearest_ranks(lib, queries, first, count):
    """(n, count) int64: for each row of ``queries`` (n, F) the indices of the points of the
    leaf layout ``lib`` (:data:`_Leaves`, a plain tuple) at distance ranks ``first`` ..
    ``first + count - 1`` (:func:`nearest_into`). For a few queries (the search's
    single-target seeding outside the compiled search) this beats a k-d tree query;
    :class:`direction_up_ik.core.seeds.SeedLibrary` picks between the two."""
    leaves = _Leaves(*lib)
    n, nl, k = queries.shape[0], leaves.lo_t.shape[1], first + count
    out = np.empty((n, count), dtype=np.int64)
    bound, best_d, best_i = np.empty(nl), np.empty(k), np.empty(k, dtype=np.int64)
    for r in range(n):
        nearest_into(leaves, queries[r], first, count, bound, best_d, best_i)
        for c in range(count):
            out[r, c] = best_i[first + c]
    return out


# ================================================================== driver
_models: "weakref.WeakKeyDictionary[RobotKinematics, dict]" = weakref.WeakKeyDictionary()
_models_lock = threading.Lock()


def supports(problem: IKProblem) -> bool:
    """True when this backend reproduces the problem's robot model.

    The kernels recompute FK from :meth:`RobotKinematics.kernel_arrays`, so a
    subclass that overrides the FK methods is left to the numpy backend.
    """
    cls = type(problem.robot)
    verdict = _supported.get(cls)
    if verdict is None:
        verdict = _supported[cls] = CLOCK is not None and issubclass(cls, RobotKinematics) and all(
            getattr(cls, name) is getattr(RobotKinematics, name)
            for name in ("tcp_poses", "joint_perturbed_tcp_poses", "tcp_joint_motions", "_node_frames",
                         "_tcp_from_nodes", "kernel_arrays"))
    return verdict


_supported: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()


def _model(problem: IKProblem) -> _Model:
    """The problem's :data:`_Model`, cached per robot, target EEs and root transform."""
    robot = problem.robot
    key = (problem.ee_ids.tobytes(), problem.root_world_xform.tobytes())
    with _models_lock:
        per_robot = _models.setdefault(robot, {})
        model = per_robot.get(key)
    if model is not None:
        return model
    ka = robot.kernel_arrays()
    ee_ids = np.asarray(problem.ee_ids, dtype=np.int64)
    ee_node = ka.ee_node[ee_ids]
    needed = set()
    for node in ee_node:
        node = int(node)
        while node >= 0 and node not in needed:
            needed.add(node)
            node = int(ka.node_parent[node])
    root = np.asarray(problem.root_world_xform, dtype=np.float64)
    f8 = np.float64
    model = _Model(
        parent=np.array(ka.node_parent, dtype=np.int64), dof=np.array(ka.node_dof, dtype=np.int64),
        scale=np.array(ka.node_scale, dtype=f8), offset=np.array(ka.node_offset, dtype=f8),
        jtype=np.array(ka.node_type, dtype=np.int64), rot=np.array(ka.node_rot, dtype=f8),
        pos=np.array(ka.node_pos, dtype=f8), rot_cross=np.array(ka.node_rot_cross, dtype=f8),
        rot_outer=np.array(ka.node_rot_outer, dtype=f8),
        axis_parent=np.array(ka.node_axis_parent, dtype=f8),
        axis_local=np.array(ka.node_axis_local, dtype=f8),
        chain=np.array(sorted(needed), dtype=np.int64), ee_node=np.array(ee_node, dtype=np.int64),
        ee_fixed=np.array(ka.ee_fixed[ee_ids], dtype=f8), dof_node=np.array(ka.dof_node, dtype=np.int64),
        moves=np.ascontiguousarray(ka.dof_moves_tcp[:, ee_ids], dtype=np.bool_),
        full_fk=bool(ka.mimic_on_tcp_chain),
        root_rot=np.ascontiguousarray(root[:3, :3]), root_pos=np.ascontiguousarray(root[:3, 3]))
    with _models_lock:
        per_robot[key] = model
    return model


#: The constant part of every _Config.
_CONSTANTS = dict(eps=float(FD_EPSILON), cos_eps=float(np.cos(FD_EPSILON)),
                  sin_eps=float(np.sin(FD_EPSILON)), min_step_norm=float(MIN_STEP_NORM),
                  stall_ratio=float(STALL_RATIO))


def _config(problem: IKProblem) -> tuple:
    """``tuple(_Config)`` of the problem, built once: kept in the problem's ``__dict__``
    (a frozen dataclass allows that), which :meth:`IKProblem.select` copies, so the
    search's rounds of seeds reuse it. The kernel only reads these arrays."""
    cached = problem.__dict__.get("_kernel_config")
    if cached is None:
        cached = problem.__dict__["_kernel_config"] = tuple(_build_config(problem))
    return cached


def _build_config(problem: IKProblem) -> _Config:
    # SolverSettings holds validated Python floats and ints already.
    s = problem.settings
    active = problem.active
    return _Config(
        w_pos=s.position_weight, w_rot=s.rotation_weight, damping=s.damping,
        max_step_norm=s.max_step_norm, max_position_error=s.max_position_error,
        position_tol=s.position_tol, frame_tol=s.frame_tol_rad, max_iters=s.max_iters,
        active=active.astype(np.int64, order="C"), lower=problem.lower[active].astype(np.float64, order="C"),
        upper=problem.upper[active].astype(np.float64, order="C"),
        q_initial=problem.q_initial.astype(np.float64, order="C"),
        analytic=problem.analytic_jacobian, stall_window=s.stall_window,
        fast_math=s.jacobian == "analytic", residual_damping=s.damping_mode == "residual",
        damping_floor=RESIDUAL_DAMPING_FLOOR * s.damping,
        step_scales=np.array(STEP_SCALES[:s.num_step_scales], dtype=np.float64), **_CONSTANTS)


def _targets(problem: IKProblem) -> _Targets:
    # astype copies (C order): writable arrays of the kernel's types from the read-only problem.
    f8, b1, p = np.float64, np.bool_, problem
    return _Targets(
        position=p.target_position.astype(f8, order="C"), direction=p.target_direction.astype(f8, order="C"),
        up=p.target_up.astype(f8, order="C"), has_direction=p.has_direction.astype(b1, order="C"),
        has_up=p.has_up.astype(b1, order="C"), local_direction=p.local_direction.astype(f8, order="C"),
        local_up=p.local_up.astype(f8, order="C"))


def solve(problem: IKProblem, q_start: Optional[np.ndarray] = None,
          deadline: Optional[float] = None, parallel: Optional[bool] = None,
          relay: Optional[tuple] = None) -> IKBatchResult:
    """Compiled equivalent of :func:`direction_up_ik.core.solver.solve_problem` (numpy backend).

    Args:
        problem, q_start, deadline, relay: as for ``solve_problem``.
        parallel: cut the batch into slices solved on worker threads (the
            kernel releases the GIL); None = when B >= :data:`PARALLEL_MIN_CANDIDATES`
            and there are several cores. Results do not depend on it.
    Raises:
        NumericalFailure: non-finite residual, Jacobian or step (same candidates
            and message as the reference); numpy.linalg.LinAlgError: an exactly
            singular system (as ``numpy.linalg.solve`` in the reference).
    """
    b, d = problem.num_candidates, len(problem.q_initial)
    e = problem.num_targets
    q = np.empty((b, d))
    q[:] = problem.q_initial if q_start is None else np.reshape(q_start, (b, d))
    m, tg, cfg = _model(problem), _targets(problem), _config(problem)  # cfg: a plain tuple
    empty, i4, i8 = np.empty, np.int32, np.int64
    if relay is None:
        group = quota = np.zeros(b, dtype=i8)  # one array: the kernel only reads both
    else:
        group, quota = (np.ascontiguousarray(x, dtype=i8).reshape(b) for x in relay)
    st = _State(q=q, r=empty((b, 9 * e)), ssr=empty(b), err=empty((b, 3, e)), iterations=empty(b, i4),
                reason=empty(b, i8), fail_key=empty(b, i8), done=empty(b, np.bool_),
                success=empty(b, i4), cost=empty(b), group=group, quota=quota)
    has_deadline, deadline_ns = _deadline_ns(deadline)
    if parallel is None:
        chunks = _chunks(b)
    else:
        chunks = min(worker_threads(), b) if parallel else 1
    if chunks == 1:
        failed = run_serial(tuple(m), tuple(tg), cfg, tuple(st), has_deadline, deadline_ns)
    else:
        # Candidates are independent: each thread runs run_serial on a contiguous slice
        # (views, so the results land in st). A slice stops at its own first numerical
        # failure, after finishing that iteration, so the smallest fail_key over all
        # slices and the candidates holding it are exactly those of a single call.
        bounds = np.linspace(0, b, chunks + 1).astype(int)
        if relay is not None:  # a relay stays in one slice (its rows interact)
            bounds = np.unique([_group_start(group, int(x)) for x in bounds] + [b])
        jobs = [executor().submit(run_serial, tuple(m), tuple(_rows(tg, lo, hi)), cfg,
                                   tuple(_rows(st, lo, hi)),
                                   has_deadline, deadline_ns)
                for lo, hi in zip(bounds[:-1], bounds[1:])]
        failed = any([job.result() for job in jobs])
    if failed:
        _raise_failure(st.fail_key)
    return _result(problem, st)


#: Candidates per call of a compiled search's chunks (:func:`search`): the chunks of a big
#: batch queue for the worker threads, so a thread that finishes early takes the next one.
#: 1000-target batches (ur5, panda, both starts, 21 alternations in one process): chunks of
#: 16 / 32 took 1.11-1.14 / 1.04-1.08 x the time of 64, 128 to 500 0.95-1.05 x (each call
#: costs its dispatch and scratch, about 25 us).
SEARCH_CHUNK_ROWS = 128

#: What :func:`search` returns: the candidates' picks as an IKBatchResult (``best_index``
#: by ``best_score``), ``starts``, ``successes`` (B,) int64, ``best_score`` (B,) (inf: no
#: success; None when round 0 settled every candidate: then the caller scores them),
#: ``rounds`` run (round 0 included) and ``status`` (:data:`_Search`'s ``outcome``).
SearchOutcome = namedtuple("SearchOutcome", ("result", "starts", "successes", "best_score", "rounds",
                                             "status"))


def search(problem: IKProblem, *, num_seeds: int, max_rounds: int, unlimited: bool, min_successes: int,
           limit_center: bool, seed_arrays, deadline: Optional[float] = None,
           parallel: Optional[bool] = None) -> Optional[SearchOutcome]:
    """The multi-seed search of ``core.search._search`` (nearest seeding, no callback) in
    compiled code: round 0 and every round of seeds of a candidate in one kernel call
    (:func:`run_search`), no Python between the rounds.

    Args:
        problem: built with the search's settings; num_seeds, max_rounds (>= 0, with
            ``max_rounds * num_seeds`` at most the library's size), unlimited (see
            :data:`_Search`), min_successes: as for the search; limit_center: the
            "limit_center" selection (else least motion).
        seed_arrays: called (once, only when rounds of seeds may run) for a dict of the
            library and selection arrays of :data:`_Search` (``leaves`` ...
            ``center_bounded``; writable and C-contiguous but ``lib_q``, read-only; at
            least ``max_rounds * num_seeds`` library states), or None: then this returns None.
        deadline: ``time.perf_counter()`` value: no round starts after it, running solves
            stop at it (reason time_budget).
        parallel: None = a batch of at least :data:`SEARCH_CHUNK_ROWS` candidates is cut
            into chunks of at most that many, at least one per worker thread, queued for
            the worker threads (each with round 0 in the kernel call); False = on the calling thread: round 0 first
            (:func:`run_serial`), which settles most single targets, then the rounds. Results
            do not depend on it.
    Returns:
        a :data:`SearchOutcome`, or None after a numerical failure (the caller then runs the
        reference search, which raises it) or without seed arrays.
    """
    b, d, e = problem.num_candidates, len(problem.q_initial), problem.num_targets
    q = np.empty((b, d))
    q[:] = problem.q_initial
    m, tg, cfg = _model(problem), _targets(problem), _config(problem)
    empty, i4, i8 = np.empty, np.int32, np.int64
    zeros = np.zeros(b, dtype=i8)
    st = _State(q=q, r=empty((b, 9 * e)), ssr=empty(b), err=empty((b, 3, e)), iterations=empty(b, i4),
                reason=empty(b, i8), fail_key=empty(b, i8), done=empty(b, np.bool_),
                success=empty(b, i4), cost=empty(b), group=zeros, quota=zeros)
    has_deadline, deadline_ns = _deadline_ns(deadline)
    m_t, tg_t, st_t = tuple(m), tuple(tg), tuple(st)
    chunks = 1
    if parallel is None and worker_threads() > 1 and b >= SEARCH_CHUNK_ROWS:
        chunks = max(worker_threads(), -(-b // SEARCH_CHUNK_ROWS))
    if chunks == 1:
        if run_serial(m_t, tg_t, cfg, st_t, has_deadline, deadline_ns):
            return None
        successes = st.success.astype(i8)
        if num_seeds == 0 or max_rounds == 0 or np.all(successes >= min_successes):
            return SearchOutcome(_result(problem, st), np.ones(b, dtype=i8), successes, None, 1, 0)
    arrays = seed_arrays()
    if arrays is None:
        return None
    arrays["leaves"] = tuple(arrays["leaves"])
    sr = _Search(round0_done=chunks == 1, num_seeds=int(num_seeds), max_rounds=int(max_rounds),
                 unlimited=bool(unlimited), min_successes=int(min_successes), limit_center=bool(limit_center),
                 starts=empty(b, i8), successes=empty(b, i8), best_score=empty(b),
                 outcome=np.zeros((chunks, 2), dtype=i8), **arrays)
    if chunks == 1:
        failed = run_search(m_t, tg_t, cfg, st_t, has_deadline, deadline_ns,
                            tuple(sr._replace(outcome=sr.outcome[0])))
    else:
        bounds = np.linspace(0, b, chunks + 1).astype(int).tolist()
        jobs = [executor().submit(run_search, m_t, tuple(_rows(tg, lo, hi)), cfg,
                                  tuple(_rows(st, lo, hi)), has_deadline, deadline_ns, tuple(sr._replace(
                                      query=sr.query[lo:hi], starts=sr.starts[lo:hi], successes=sr.successes[lo:hi],
                                      best_score=sr.best_score[lo:hi], outcome=sr.outcome[i])))
                for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
        failed = any([job.result() for job in jobs])
    if failed:
        return None
    return SearchOutcome(_result(problem, st, sr.best_score), sr.starts, sr.successes, sr.best_score,
                         int(sr.outcome[:, 0].max()), int(sr.outcome[:, 1].max()))


def _group_start(group: np.ndarray, i: int) -> int:
    """The first row of the run of equal ``group`` values that holds row i (i <= len)."""
    while 0 < i < len(group) and group[i] == group[i - 1]:
        i -= 1
    return i


def _deadline_ns(deadline: Optional[float]):
    """(has_deadline, the same instant on the kernel's :data:`CLOCK` in ns).

    Like the reference's ``time.perf_counter() > deadline``: NaN or +inf never
    stops, -inf stops at once (remaining time clamped to +-1e9 s).
    """
    if deadline is None:
        return False, 0
    remaining = float(deadline) - time.perf_counter()
    if not remaining < 1e9:  # NaN, +inf, or far away
        return False, 0
    return True, time.clock_gettime_ns(CLOCK) + round(max(remaining, -1e9) * 1e9)


def worker_threads() -> int:
    """Worker threads for big batches: numba's thread count (NUMBA_NUM_THREADS, default all cores)."""
    return max(1, int(numba.config.NUMBA_NUM_THREADS))


def _chunks(b: int) -> int:
    """How many slices a batch of b candidates is cut into (1 = one serial call)."""
    if b < PARALLEL_MIN_CANDIDATES:
        return 1
    return max(1, min(worker_threads(), b // (PARALLEL_MIN_CANDIDATES // 2)))


_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """The worker threads (:func:`worker_threads` of them) of big batches' slices and of a
    split search's slices (``core.search``). A job on it must not wait for another job on
    it: the slices of a split search solve on their own thread (``parallel=False``)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=worker_threads(), thread_name_prefix="direction_up_ik_fast")
        return _pool


def _rows(tup, lo: int, hi: int):
    """The same namedtuple with every candidate-leading array cut to rows lo:hi (views)."""
    if isinstance(tup, _Targets):
        return tup._replace(position=tup.position[lo:hi], direction=tup.direction[lo:hi],
                            up=tup.up[lo:hi], has_direction=tup.has_direction[lo:hi],
                            has_up=tup.has_up[lo:hi])
    return type(tup)(*(x[lo:hi] for x in tup))


def _raise_failure(fail_key: np.ndarray) -> None:
    failed = fail_key >= 0
    first = int(np.min(fail_key[failed]))
    phase = first % _PHASES_PER_ITERATION
    if phase == _PHASE_SINGULAR:
        raise np.linalg.LinAlgError("Singular matrix")
    what = {_PHASE_JACOBIAN: "Jacobian", _PHASE_STEP: "joint step"}.get(phase, "residual")
    raise NumericalFailure(sorted(int(c) for c in np.flatnonzero(fail_key == first)),
                           f"non-finite {what}")


def _result(problem: IKProblem, st: _State, score: Optional[np.ndarray] = None) -> IKBatchResult:
    """Assemble the result exactly as the reference does; ``best_index`` is the lowest
    ``score`` (default: ``cost``) when a candidate succeeded."""
    # The kernel computed success, cost and the NaN of free parts (finish_candidate),
    # so this is a handful of numpy calls even for one candidate.
    err = st.err.transpose(1, 0, 2).copy()  # (3, B, E): position, direction, up
    success = st.success
    best = int((st.cost if score is None else score).argmin()) if success.any() else None
    return IKBatchResult(
        joint_q=st.q.astype(np.float32), success=success, cost=st.cost,
        best_index=best, position_error=err[0], direction_error=err[1], up_error=err[2],
        iterations=st.iterations,
        stop_reason=tuple(map(_REASONS.__getitem__, st.reason.tolist())),
        active_dof_ids=tuple(problem.active.tolist()))


def _warm_up_search(problem: IKProblem) -> None:
    """Searches of ``problem`` with a two-state library and arrays of the types the search
    module passes (``core.search._compiled_search``), to compile :func:`run_search`."""
    d, a = len(problem.q_initial), problem.active
    lib_q = np.tile(problem.q_initial, (2, 1))
    lib_q.setflags(write=False)
    leaves = _Leaves(points_t=np.zeros((3, 2)), index=np.arange(2, dtype=np.int64),
                     start=np.array([0, 2], dtype=np.int64), lo_t=np.zeros((3, 1)), hi_t=np.zeros((3, 1)))
    arrays = dict(leaves=leaves, query=np.zeros((problem.num_candidates, 3)), lib_q=lib_q,
                  periodic=np.array([a[0]], dtype=np.int64), periodic_lo=np.array([-3.0]),
                  periodic_hi=np.array([3.0]), anchor=np.zeros(d), center_mid=np.zeros(len(a)),
                  center_half=np.ones(len(a)), center_bounded=np.ones(len(a), dtype=np.bool_))
    for deadline in (None, time.perf_counter() + 60.0):
        search(problem, num_seeds=1, max_rounds=2, unlimited=False, min_successes=2, limit_center=True,
               seed_arrays=lambda: arrays, deadline=deadline)


def warm_up() -> float:
    """Compile (or load from the cache) the kernel on a tiny problem; returns seconds taken.

    Runs the shortcut and full-FK Jacobians, a deadline and the threaded path.
    """
    from .problem import build_problem
    from .settings import SolverSettings
    from .targets import DirectionUpTarget
    t0 = time.perf_counter()
    urdf = """<robot name='warm_up'><link name='base'/><link name='l1'/><link name='l2'/>
      <link name='tip'/>
      <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/><axis xyz='0 0 1'/>
        <limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
      <joint name='j2' type='prismatic'><parent link='l1'/><child link='l2'/>
        <origin xyz='0.3 0 0'/><axis xyz='1 0 0'/><limit lower='0' upper='0.2' effort='1' velocity='1'/></joint>
      <joint name='j3' type='revolute'><parent link='l2'/><child link='tip'/><origin xyz='0.2 0 0'/>
        <axis xyz='0 1 0'/><mimic joint='j1' multiplier='0.5'/>
        <limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
    </robot>"""
    settings = SolverSettings(max_position_error=0.03, max_iters=3)
    targets = [(DirectionUpTarget(0, (0.3, y, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)),)
               for y in (0.2, -0.2)]
    for mimic in (False, True):
        text = urdf if mimic else urdf.replace("<mimic joint='j1' multiplier='0.5'/>", "")
        robot = RobotKinematics.from_urdf(text, ["tip"])
        problem = build_problem(robot, targets, None, "cpu", None, settings)
        solve(problem, parallel=False)
        solve(problem, deadline=time.perf_counter() + 60.0, parallel=True)
        _warm_up_search(problem)
    nearest_ranks(tuple(_Leaves(np.zeros((3, 4)), np.arange(4, dtype=np.int64), np.array([0, 2, 4], dtype=np.int64),
                                np.zeros((3, 2)), np.zeros((3, 2)))), np.zeros((1, 3)), 1, 2)
    return time.perf_counter() - t0
