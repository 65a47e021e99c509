"""Start states of the multi-seed search: uniform random draws and a seed library.

A local solve from the library state whose TCP pose lies nearest the target succeeds
far more often, in fewer iterations, than one from a uniform random state
(docs/performance.md). The library samples ``LIBRARY_SIZE`` joint states uniformly in
the bounds once, keeps their TCP poses and answers "the k-th nearest states to each
target" over :func:`pose_features`: a compiled scan of the library for a few targets, a
k-d tree for many (:meth:`SeedLibrary.nearest`); the compiled search
(``compiled.search``) scans in its kernel (:meth:`SeedLibrary.kernel_arrays`).

A second library of ``LIMIT_LIBRARY_SIZE`` states with most joints near a bound
(:func:`near_limit_starts`, :func:`limit_library_for`) serves the search's later rounds
(``search_plan.seed_source``). A target reached only near the limits has few uniform states near it
in pose that lie in its in-limit branch: its pose-nearest uniform states sit in other branches,
and their solves end pinned at a limit (docs/performance.md, "Later rounds from a library near
the limits").

A library depends only on what its FK depends on: the model, the active joints,
their bounds, the values of the inactive coordinates and the root transform. It
does not depend on the targets' end effectors or local axes (a tree per slot
layout), nor on the current values of the active joints (continuous joints are
drawn in [-pi, pi], and a seed's periodic joints are shifted by whole turns
towards the current value, :meth:`SeedLibrary.seeds`). It is built on first use
(milliseconds, plus the first ``scipy.spatial`` import; ``search_api.warm_up_search`` does
it ahead) and cached per model (:func:`library_for`). It is drawn from its own fixed generator: its
seeds are the same whatever the search's ``random_seed``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Optional, Tuple

import numpy as np

from .errors import InputValidationError
from .problem import TURN, IKProblem, nearest_turns
from .backend import KERNELS_READY, compiled_module, kernel_state

#: Joint states per library (cheap to build; smaller and larger libraries solved the
#: benchmark's batches in about the same iterations).
LIBRARY_SIZE = 4096
#: Metres per unit of TCP axis difference in the feature distance (a 0.3 m
#: position offset weighs like axes about 1 rad apart).
AXIS_SCALE = 0.3
#: Metres: target positions farther from the root are ranked as if this far (no robot reaches
#: it; a target at 1e308 m would overflow the squared distances, and no seed would rank).
FEATURE_REACH = 1e6
#: Uniform libraries kept per model (different active joints, bounds or inactive values).
CACHE_PER_MODEL = 4
#: Libraries near the limits kept per model: one set-up's (its later rounds serve few targets,
#: and a dual arm's takes 2.5 MB plus up to 1.2 MB per slot layout; docs/performance.md).
LIMIT_CACHE_PER_MODEL = 1
#: Slot layouts and constraint patterns whose leaves a library near the limits keeps (the
#: named conventions' a warm-up builds: up to 15 for two end effectors).
LIMIT_INDEXES = 16
_LIBRARY_SEED = 0x5EED
#: Joint states of the library near the limits (:func:`limit_library_for`): the later rounds
#: only reach it, and a larger one left fewer near-limit targets unsolved (docs/performance.md).
LIMIT_LIBRARY_SIZE = 8192
#: Its draws: each joint with finite bounds, independently with this probability, lies within
#: ``LIMIT_BAND`` of its range from one of its bounds (:func:`near_limit_starts`).
LIMIT_PROBABILITY = 0.7
LIMIT_BAND = 0.05
_LIMIT_LIBRARY_SEED = 0x1137
#: Points per k-d tree leaf (faster queries than scipy's default 16).
_LEAF_SIZE = 32


def start_bounds(problem: IKProblem, around: Optional[np.ndarray] = None):
    """(lo, hi) (A,) where :func:`random_starts` draws the active joints: the problem's
    bounds, ``around`` +- pi for an unbounded (continuous) joint (default: its current value)."""
    a = problem.active
    lo, hi = problem.lower[a], problem.upper[a]
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        center = problem.q_initial[a] if around is None else around
        lo = np.where(np.isfinite(lo), lo, center - np.pi)
        hi = np.where(np.isfinite(hi), hi, center + np.pi)
    return lo, hi


def random_starts(problem: IKProblem, count: int, rng: np.random.Generator, bounds=None) -> np.ndarray:
    """(count, D) starts: active joints uniform in ``bounds`` (default :func:`start_bounds`), others q0."""
    q0, a = problem.q_initial, problem.active
    lo, hi = start_bounds(problem) if bounds is None else bounds
    draw = lo + (hi - lo) * rng.random((count, len(a)))  # rng.uniform's values, cheaper
    if len(a) == len(q0):  # every joint active (active is sorted and unique)
        return draw
    out = np.empty((count, len(q0)))
    out[:] = q0
    out[:, a] = draw
    return out


def near_limit_starts(problem: IKProblem, count: int, rng: np.random.Generator, bounds) -> np.ndarray:
    """(count, D) starts near the limits: :func:`random_starts` in ``bounds`` (lo, hi) (A,), then
    each active joint with finite problem bounds, independently with probability
    ``LIMIT_PROBABILITY``, drawn again uniformly within ``LIMIT_BAND`` of its range (hi - lo) from
    its lower or its upper bound (either with probability 1/2)."""
    out = random_starts(problem, count, rng, bounds)
    a = problem.active
    lo, hi = bounds
    finite = np.isfinite(problem.lower[a]) & np.isfinite(problem.upper[a])
    near = (rng.random((count, len(a))) < LIMIT_PROBABILITY) & finite
    depth = LIMIT_BAND * (hi - lo) * rng.random((count, len(a)))
    banded = np.where(rng.random((count, len(a))) < 0.5, lo + depth, hi - depth)
    out[:, a] = np.where(near, banded, out[:, a])
    return out


def library_bounds(problem: IKProblem):
    """(lo, hi) (A,) of a library's draws: the problem's bounds, [-pi, pi] for a continuous joint
    (not around the current value, so that a library serves every current state)."""
    return start_bounds(problem, around=0.0)


def pose_features(position: np.ndarray, direction: np.ndarray, up: np.ndarray,
                  has_direction: np.ndarray, has_up: np.ndarray) -> np.ndarray:
    """(n, F) points whose Euclidean distance compares TCP poses with targets.

    Args:
        position, direction, up: (n, E, 3) TCP positions (m) and world working /
            up axes (unit); has_direction, has_up: (E,) bool, the parts one
            constraint pattern fixes (the others are left out).
    Returns:
        per slot its position (clipped to +-``FEATURE_REACH`` m, so that squared distances
        stay finite for any finite target) and, where constrained, ``AXIS_SCALE`` times its axes.
    """
    parts = []
    for e in range(position.shape[1]):
        parts.append(np.clip(position[:, e], -FEATURE_REACH, FEATURE_REACH))
        if has_direction[e]:
            parts.append(AXIS_SCALE * direction[:, e])
        if has_up[e]:
            parts.append(AXIS_SCALE * up[:, e])
    return np.concatenate(parts, axis=1)


#: Points per leaf of :func:`leaf_layout` (at most): 64 leaves for a 4096-state library.
LEAF_POINTS = 64


def leaf_layout(features: np.ndarray, leaf_points: int = LEAF_POINTS):
    """The points ``features`` (M, F) cut into leaves of at most ``leaf_points`` for the
    compiled scan (``compiled.seed_scan.nearest_into``): each part of more than
    ``leaf_points`` points is halved (at (lo + hi) // 2 of its rows) after a stable sort by its
    widest feature (by range, the first of equal ranges), until every part is small enough.
    All parts of one depth are cut together (a few numpy calls per depth: about a millisecond
    for a library, so a layout first used inside a time budget costs little).
    Returns ``compiled.layout.Leaves`` fields: (points_t (F, M) in leaf order, one feature per row,
    index (M,) int64 their rows in ``features``, start (L + 1,) int64, lo_t and hi_t (F, L)
    each leaf's bounding box, one feature per row)."""
    m = len(features)
    order = np.arange(m, dtype=np.int64)
    cuts = np.array([0, m], dtype=np.int64)  # part i holds positions cuts[i] .. cuts[i + 1] - 1
    while True:
        sizes = np.diff(cuts)
        split = sizes > leaf_points
        if not split.any():
            break
        points = features[order]
        ranges = np.maximum.reduceat(points, cuts[:-1], axis=0) - np.minimum.reduceat(points, cuts[:-1], axis=0)
        widest = np.argmax(ranges, axis=1)
        part = np.repeat(np.arange(len(sizes)), sizes)  # each position's part
        key = points[np.arange(m), widest[part]]
        # Within a part: by its widest feature, equal values in their current order.
        if split.all() and (sizes == sizes[0]).all():  # equal parts (a library's 4096 states)
            within = np.argsort(key.reshape(len(sizes), -1), axis=1, kind="stable")
            order = order.reshape(len(sizes), -1)[np.arange(len(sizes))[:, None], within].reshape(-1)
        else:
            key = np.where(split[part], key, 0.0)
            order = order[np.lexsort((np.arange(m), key, part))]
        halves = cuts[:-1][split] + sizes[split] // 2
        cuts = np.sort(np.concatenate((cuts, halves)))
    points = np.ascontiguousarray(features[order])
    box_lo = np.minimum.reduceat(points, cuts[:-1], axis=0)
    box_hi = np.maximum.reduceat(points, cuts[:-1], axis=0)
    return (np.ascontiguousarray(points.T), order, cuts, np.ascontiguousarray(box_lo.T),
            np.ascontiguousarray(box_hi.T))


class SeedLibrary:
    """``LIBRARY_SIZE`` joint states of one set-up and their TCP poses (read-only).

    Attributes:
        q: (M, D) float64 joint states; active coordinates uniform in
            :func:`library_bounds` (with ``near_limits``: ``LIMIT_LIBRARY_SIZE`` states of
            :func:`near_limit_starts` in them), the others at the problem's values.
        tcp_rot: (M, E_robot, 3, 3), tcp_pos: (M, E_robot, 3) world TCP poses of
            every end effector of the model (m).
        scan_only: with the compiled backend, every query scans (the library near the limits:
            its later rounds rank few candidates, and a k-d tree of its states would hold
            megabytes per slot layout).
    A library state's distance to a target is the Euclidean distance of their
    :func:`pose_features`; the features (and k-d trees) are built per slot layout (end
    effectors, local axes) and constraint pattern on first use.
    """

    def __init__(self, problem: IKProblem, size: Optional[int] = None, near_limits: bool = False) -> None:
        if near_limits:
            size = LIMIT_LIBRARY_SIZE if size is None else size
            self.q = near_limit_starts(problem, size, np.random.default_rng(_LIMIT_LIBRARY_SEED),
                                       library_bounds(problem))
        else:
            size = LIBRARY_SIZE if size is None else size
            self.q = random_starts(problem, size, np.random.default_rng(_LIBRARY_SEED), library_bounds(problem))
        self.scan_only = near_limits
        self.tcp_rot, self.tcp_pos = problem.robot.tcp_poses(self.q, problem.root_world_xform)
        # Periodic joints whose bounds hold more than one copy of an angle (continuous ones,
        # the ur5's +-2 pi); for the others no whole turn stays inside the bounds.
        self._periodic = problem.active[problem.turn_joints]
        for array in (self.q, self.tcp_rot, self.tcp_pos):
            array.setflags(write=False)
        # key -> [features (M, F) (None in a scan-only library), their leaf layout, tree]
        self._indexes: "OrderedDict[bytes, list]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.q)

    def slot_axes(self, problem: IKProblem):
        """(position, direction, up), each (M, E, 3): the library's TCP positions and world
        working / up axes for the problem's target slots (its end effectors and local axes)."""
        rot = self.tcp_rot[:, problem.ee_ids]
        return (self.tcp_pos[:, problem.ee_ids], np.einsum("meij,ej->mei", rot, problem.local_direction),
                np.einsum("meij,ej->mei", rot, problem.local_up))

    def _index(self, problem: IKProblem, has_direction: np.ndarray, has_up: np.ndarray, tree: bool):
        """(features (M, F) or None, their :func:`leaf_layout` for the compiled scan or None,
        k-d tree or None) of the problem's slot layout and this constraint pattern; the tree is
        built when ``tree`` asks for it, the leaves when it does not. A ``scan_only`` library keeps
        the last ``LIMIT_INDEXES`` layouts' leaves alone (requests with their own local axes each
        add a layout)."""
        # The local axes of a part the pattern leaves free do not enter the features.
        key = b"|".join(x.tobytes() for x in (problem.ee_ids, np.where(has_direction[:, None], problem.local_direction, 0.0),
                                              np.where(has_up[:, None], problem.local_up, 0.0), has_direction, has_up))
        with self._lock:
            entry = self._indexes.get(key)
            if entry is None:
                entry = self._indexes[key] = [None, None, None]
                if self.scan_only and len(self._indexes) > LIMIT_INDEXES:
                    self._indexes.popitem(last=False)  # least recently used out
            elif self.scan_only:
                self._indexes.move_to_end(key)
            features = entry[0]
            if features is None and entry[2 if tree else 1] is None:
                features = np.ascontiguousarray(pose_features(*self.slot_axes(problem), has_direction, has_up))
            if not tree and entry[1] is None:
                entry[1] = tuple(leaf_layout(features))
            if tree and entry[2] is None:
                from scipy.spatial import cKDTree
                entry[2] = cKDTree(features, leafsize=_LEAF_SIZE)
            if not self.scan_only:
                entry[0] = features  # a scan-only library keeps its leaves (the features, reordered)
            return features, entry[1], entry[2]

    def prepare(self, problem: IKProblem) -> None:
        """Build the features, the compiled scan's leaves and the k-d tree of the problem's
        slot layout and its first candidate's constraint pattern ahead of a search
        (``search_api.warm_up_search``), so that no search builds them inside its time budget."""
        has_direction, has_up = problem.has_direction[0], problem.has_up[0]
        self._index(problem, has_direction, has_up, tree=False)
        if not self.scan_only:
            self._index(problem, has_direction, has_up, tree=True)

    def kernel_arrays(self, problem: IKProblem, has_direction: np.ndarray, has_up: np.ndarray):
        """What the compiled search (``compiled.search``) reads of this library for the problem's
        slot layout and one constraint pattern: (its features' :func:`leaf_layout` as a tuple,
        the states ``q`` (M, D) read-only, the periodic columns its seeds turn (P,) int64)."""
        _, leaves, _ = self._index(problem, np.asarray(has_direction), np.asarray(has_up), tree=False)
        return leaves, self.q, self._periodic

    def nearest(self, problem: IKProblem, rows: np.ndarray, first: int, count: int,
                method: str = "auto") -> np.ndarray:
        """(len(rows), count) library indices: for each candidate row of ``problem``, its
        library states of distance rank ``first`` .. ``first + count - 1`` (0 = nearest).

        Requires ``first + count <= len(self)``. Candidates with different
        constraint patterns (modes per slot) are compared on their own parts.
        ``method``: "scan" (compiled brute force, ``compiled.nearest_ranks``;
        needs numba), "tree" (the k-d tree) or "auto": with numba, a scan for at most
        ``SCAN_ROWS`` candidates of a constraint pattern, for more than ``TREE_MAX_FEATURES``
        feature dimensions or in a ``scan_only`` library, else the tree. Both rank exactly.
        """
        if method not in NEAREST_METHODS:
            raise InputValidationError("method", f"must be one of {list(NEAREST_METHODS)}, got {method!r}")
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), count), dtype=np.int64)
        if len(rows) == 0 or count == 0:
            return out
        scan = _scanner() if method == "auto" else None
        if method == "scan":  # asked for: compiled (or loaded) now if need be
            module = compiled_module()
            if isinstance(module, Exception):
                raise InputValidationError("method", f"'scan' needs the compiled backend (numba): {module}")
            scan = module.nearest_ranks
        has_direction, has_up = problem.has_direction[rows], problem.has_up[rows]
        if len(rows) == 1 or ((has_direction == has_direction[0]).all() and (has_up == has_up[0]).all()):
            groups = [(slice(None), has_direction[0], has_up[0])]  # the usual request: one pattern
        else:
            e = problem.num_targets
            kinds, which = np.unique(np.concatenate([has_direction, has_up], axis=1), axis=0,
                                     return_inverse=True)
            groups = [(np.flatnonzero(which.reshape(-1) == k), kind[:e], kind[e:])
                      for k, kind in enumerate(kinds)]
        for mine, has_dir, has_u in groups:
            r = rows[mine]
            points = pose_features(problem.target_position[r], problem.target_direction[r],
                                   problem.target_up[r], has_dir, has_u)
            scanned = scan is not None and (method == "scan" or self.scan_only or len(r) <= SCAN_ROWS
                                            or points.shape[1] > TREE_MAX_FEATURES)
            _, leaves, tree = self._index(problem, has_dir, has_u, tree=not scanned)
            if scanned:
                out[mine] = scan(leaves, points, first, count)
            else:
                _, idx = tree.query(points, k=first + count)
                out[mine] = np.reshape(idx, (len(r), first + count))[:, first:]
        return out

    def seeds(self, problem: IKProblem, rows: np.ndarray, first: int, count: int,
              anchor: Optional[np.ndarray] = None) -> np.ndarray:
        """(len(rows) * count, D) starts: per candidate row (in order) its library states of
        distance rank ``first`` .. ``first + count - 1`` (:meth:`nearest`).

        Each :func:`periodic_coordinates` joint is shifted by the whole turns that bring
        it nearest ``anchor`` (default the current state ``q_initial``) within its
        bounds: the same TCP pose, less joint motion.
        """
        out = self.q[self.nearest(problem, rows, first, count).reshape(-1)]
        c = self._periodic
        if len(c):
            target = (problem.q_initial if anchor is None else anchor)[c]
            lo, hi, q = problem.lower[c], problem.upper[c], out[:, c]
            out[:, c] = np.clip(q + TURN * nearest_turns(q, target, lo, hi), lo, hi)
        return out


#: Queries of at most this many candidates scan the library (compiled) instead of querying
#: the k-d tree, which is faster only for many queries (docs/performance.md).
SCAN_ROWS = 8
#: Queries with more feature dimensions than this scan the library whatever their number: a
#: k-d tree prunes little there.
TREE_MAX_FEATURES = 12
#: Values of ``SeedLibrary.nearest``'s ``method``.
NEAREST_METHODS = ("auto", "scan", "tree")


def _scanner():
    """The compiled scan (``compiled.nearest_ranks``) once the kernels are ready in this process
    (``backend.kernel_state``), else None: then the tree does all."""
    if kernel_state() != KERNELS_READY:
        return None
    return compiled_module().nearest_ranks


#: Per kind (uniform, near the limits) {model: OrderedDict(set-up key: SeedLibrary)}.
_libraries: Tuple["weakref.WeakKeyDictionary[object, OrderedDict]", ...] = (weakref.WeakKeyDictionary(),
                                                                             weakref.WeakKeyDictionary())
_libraries_lock = threading.Lock()


def _key(problem: IKProblem) -> Tuple[bytes, ...]:
    """What a library's states and poses depend on, besides the model (the bounds of
    inactive joints are part of it, unused)."""
    inactive = np.ones(len(problem.q_initial), dtype=bool)
    inactive[problem.active] = False
    return (problem.active.tobytes(), problem.lower.tobytes(), problem.upper.tobytes(),
            problem.q_initial[inactive].tobytes(), problem.root_world_xform.tobytes())


def library_for(problem: IKProblem) -> SeedLibrary:
    """The cached :class:`SeedLibrary` of the problem's set-up, built on first use.

    Up to ``CACHE_PER_MODEL`` set-ups per model are kept (least recently used out).
    """
    return _cached(problem, False)


def limit_library_for(problem: IKProblem) -> SeedLibrary:
    """The cached library near the limits (``SeedLibrary(problem, near_limits=True)``) of the
    problem's set-up, built on first use; the last ``LIMIT_CACHE_PER_MODEL`` set-ups' kept."""
    return _cached(problem, True)


def _cached(problem: IKProblem, near_limits: bool) -> SeedLibrary:
    key = _key(problem)
    store = _libraries[near_limits]
    with _libraries_lock:
        per_model = store.get(problem.robot)
        if per_model is None:
            per_model = store[problem.robot] = OrderedDict()
        library = per_model.get(key)
        if library is not None:
            per_model.move_to_end(key)
            return library
    library = SeedLibrary(problem, near_limits=near_limits)  # outside the lock: milliseconds
    with _libraries_lock:
        per_model[key] = library
        per_model.move_to_end(key)
        while len(per_model) > (LIMIT_CACHE_PER_MODEL if near_limits else CACHE_PER_MODEL):
            per_model.popitem(last=False)
    return library
