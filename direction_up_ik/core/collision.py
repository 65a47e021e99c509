"""Collision checking of joint states: the robot's own collision geometry and world obstacles.

:meth:`CollisionScene.from_urdf` reads the ``<collision>`` elements of a URDF once and turns
every element into *parts* the check can bound conservatively (``docs/design.md``,
"Collision checking"; the parts and pairs are built in :mod:`.collision_parts`):

* a **capsule** (a segment swept by a sphere): URDF ``sphere`` (exact), ``cylinder`` (the
  capsule of the same axis, length and radius: its end caps stick out by the radius) and
  ``mesh`` (the enclosing capsule of the mesh's convex hull about its principal axis);
  an obstacle sphere (exact);
* a **solid** with an exact signed distance: a robot ``box``, an obstacle box or cylinder.
  A solid meets a capsule exactly; against another solid, one of the two (the smaller) is
  replaced by capsules that enclose it (:func:`.collision_parts.box_cover`).

Every part encloses its original shape, so a distance between parts is never larger than
the distance between the originals: ``clearance`` may be too small (the margins above),
never too large. ``padding`` inflates every robot part.

Pairs checked (``CollisionScene.body_pairs``): every robot link with geometry against every
obstacle, and every pair of robot links except adjacent ones (joined by a joint, where links
without geometry and fixed joints are looked through), the SRDF's disabled pairs, and pairs
in collision in every or in none of :data:`SAMPLE_STATES` random states (the sampling of
MoveIt's setup assistant; seed :data:`SAMPLE_SEED`; cached per model in the process).

:meth:`CollisionScene.check` runs on the compiled kernel (:mod:`.compiled.collision`) once
the backend's kernels are ready in this process, else on the numpy reference
(:mod:`.collision_distance`); both give the same values.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .collision_distance import _node_frames, bound_clearance, pairwise_collisions, reference_clearance
from .collision_parts import (SOLID_BOX, CollisionGeometryWarning, PairArrays, Parts, _adjacent_pairs,
                              _build_arrays, _geometry_key, _link_collision_parts, _obstacle_parts, _Part,
                              _parts_of, _read_srdf_disabled, _read_xml, _urdf_error)
from .errors import InputValidationError
from .kinematics import RobotKinematics, random_in_limits
from .rotations import validate_transform
from .urdf_loader import is_xml_text, parse_urdf

__all__ = ["BodyPart", "CollisionGeometryWarning", "CollisionReport", "CollisionScene", "Obstacle"]

#: Random joint states the pair selection samples (MoveIt's setup assistant's default density).
SAMPLE_STATES = 10000
#: Seed of the pair selection's states (``numpy.random.default_rng``).
SAMPLE_SEED = 0

# ----------------------------------------------------------------------------- obstacles
def _sizes(values, count: int, field: str) -> Tuple[float, ...]:
    try:
        sizes = np.array(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputValidationError(field, f"must be {count} numbers (metres)") from None
    if sizes.shape != (count,):
        raise InputValidationError(field, f"must be {count} numbers (metres), got {len(sizes)}")
    if not np.all(np.isfinite(sizes)) or np.any(sizes < 0.0):
        raise InputValidationError(field, f"must be finite and >= 0 (metres), got {sizes.tolist()}")
    return tuple(float(s) for s in sizes)


@dataclass(frozen=True)
class Obstacle:
    """A world obstacle in the robot's root frame.

    Attributes:
        kind: "box", "sphere" or "cylinder".
        size: box (x, y, z) edge lengths; sphere (radius,); cylinder (radius, length), metres.
        pose: (4, 4) read-only root -> obstacle transform; the box's centre, the sphere's
            centre, the cylinder's centre with its axis along local Z (as in URDF).
        name: reported in ``CollisionReport.closest_pair``; default "obstacle_<index>".
    """

    kind: str
    size: Tuple[float, ...]
    pose: np.ndarray
    name: str = ""

    @classmethod
    def box(cls, size_xyz, pose, *, name: str = "") -> "Obstacle":
        """A box of edge lengths ``size_xyz`` (3,) metres centred at ``pose`` (4, 4)."""
        return cls("box", _sizes(size_xyz, 3, "size_xyz"), validate_transform(pose, "pose"), str(name))

    @classmethod
    def sphere(cls, radius, pose, *, name: str = "") -> "Obstacle":
        """A sphere of ``radius`` metres centred at ``pose``'s origin (4, 4)."""
        return cls("sphere", _sizes([radius], 1, "radius"), validate_transform(pose, "pose"), str(name))

    @classmethod
    def cylinder(cls, radius, length, pose, *, name: str = "") -> "Obstacle":
        """A cylinder of ``radius`` and ``length`` metres, centred at ``pose`` (4, 4), axis local Z."""
        radius, = _sizes([radius], 1, "radius")
        length, = _sizes([length], 1, "length")
        return cls("cylinder", (radius, length), validate_transform(pose, "pose"), str(name))


@dataclass(frozen=True)
class CollisionReport:
    """What :meth:`CollisionScene.check` found for B joint states.

    Attributes:
        collision_free: bool (B,), True when every checked pair is apart (clearance > 0).
        clearance: float64 (B,) metres, the least distance over the checked pairs of the
            bounding parts (padding included): negative when penetrating, never larger than
            the distance of the original geometry; +inf when no pair is checked.
        closest_pair: (B,) tuples (body, body) of the pair with that distance (link names,
            obstacle names); ("", "") when no pair is checked.
    """

    collision_free: np.ndarray
    clearance: np.ndarray
    closest_pair: Tuple[Tuple[str, str], ...]


class BodyPart(NamedTuple):
    """One part of a checked body placed at a joint state, in the root frame (metres): what
    :meth:`CollisionScene.bodies_at` lists for markers and pictures.

    Attributes:
        body: the link or obstacle name.
        kind: "sphere", "capsule" (a segment swept by ``radius``), "box" or "cylinder".
        a, b: (3,) segment ends (sphere and capsule; equal for a sphere), else None.
        radius: sphere or capsule radius; for a box or cylinder the padding around it.
        pose: (4, 4) root -> box / cylinder (axis local Z), else None.
        size: box (x, y, z) edges, cylinder (radius, length), else None.
    """

    body: str
    kind: str
    a: Optional[np.ndarray]
    b: Optional[np.ndarray]
    radius: float
    pose: Optional[np.ndarray]
    size: Optional[Tuple[float, ...]]


# ------------------------------------------------------------------ pair selection cache
_SAMPLED: Dict[str, frozenset] = {}
_SAMPLED_LOCK = threading.Lock()


def _sample_chunks():
    """State counts the pair selection evaluates at a time: a small first chunk decides most
    pairs (seen in and out of collision), later ones bound the temporaries."""
    yield 200
    while True:
        yield 1000


class CollisionScene:
    """Collision geometry of one robot model with its obstacles; built once, obstacles replaceable.

    Build with :meth:`from_urdf`. Attributes (read-only): ``robot``, ``padding`` (m),
    ``link_bodies`` (names of the robot links with geometry), ``obstacles``,
    ``body_pairs`` ((body, body) names of every checked pair), ``adjacent_pairs``,
    ``srdf_pairs``, ``sampled_pairs`` (link pairs left out, with the reason in the name).
    """

    def __init__(self, robot: RobotKinematics, link_parts: Dict[str, list], adjacent: set,
                 srdf_disabled: set, padding: float, geometry_key: str) -> None:
        self.robot = robot
        self.padding = padding
        self._lock = threading.Lock()
        self._bound = None  # (Parts, the compiled check bound to them), see _clearance
        self.link_bodies = tuple(name for name in robot.link_names if name in link_parts)
        self._robot_parts: List[_Part] = []
        static_links = set(robot.static_link_xforms())
        for body, name in enumerate(self.link_bodies):
            node, link_from_node = robot.link_attachment(name)
            for xform, shape in link_parts[name]:
                self._robot_parts += _parts_of(body, node, link_from_node, xform, shape, padding)
        self._static = {i for i, name in enumerate(self.link_bodies) if name in static_links}
        self.adjacent_pairs = frozenset(adjacent)
        self.srdf_pairs = frozenset(srdf_disabled)
        candidates = []
        n = len(self.link_bodies)
        for i in range(n):
            for j in range(i + 1, n):
                key = frozenset((self.link_bodies[i], self.link_bodies[j]))
                if key in self.adjacent_pairs or key in self.srdf_pairs or (i in self._static and j in self._static):
                    continue
                candidates.append((i, j))
        self._geometry_key = geometry_key
        self._link_pair_candidates = candidates
        self.sampled_pairs = self._sample_pairs()
        self._link_pairs = [(i, j) for i, j in candidates
                            if frozenset((self.link_bodies[i], self.link_bodies[j])) not in self.sampled_pairs]
        self.set_obstacles(())

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_urdf(cls, robot: RobotKinematics, urdf, *, srdf=None, padding: float = 0.0,
                  obstacles: Sequence[Obstacle] = (), mesh_paths: Sequence[str] = ()) -> "CollisionScene":
        """Read the collision geometry of ``robot`` from its URDF.

        Args:
            robot: the model (``RobotKinematics``) of this URDF; its links below its root link
                are checked (links above it are not part of the model).
            urdf: path or XML text of the robot's URDF with its ``<collision>`` elements
                (box, cylinder, sphere, mesh; several per link).
            srdf: optional path or XML text; its ``<disable_collisions link1= link2=>``
                pairs are not checked.
            padding: metres added around every robot body (finite, >= 0).
            obstacles: :class:`Obstacle` s in the robot's root frame.
            mesh_paths: folders that ``package://`` and relative mesh file names are
                looked up in (``package://pkg/x.stl``: ``folder/pkg/x.stl``, then ``folder/x.stl``).
        Raises:
            InputValidationError: bad padding, an unreadable SRDF or one naming an unknown link.
            RobotModelError: a malformed URDF or collision element.
        Warns:
            CollisionGeometryWarning: a mesh file that cannot be found or read (the link is
                then checked by its other elements, or not at all).
        """
        if not isinstance(robot, RobotKinematics):
            raise InputValidationError("robot", f"must be a RobotKinematics, got {type(robot).__name__}")
        try:
            padding = float(padding)
        except (TypeError, ValueError):
            raise InputValidationError("padding", f"must be a number of metres, got {padding!r}") from None
        if not (math.isfinite(padding) and padding >= 0.0):
            raise InputValidationError("padding", f"must be finite and >= 0 (metres), got {padding}")
        if isinstance(mesh_paths, (str, os.PathLike)):
            mesh_paths = [mesh_paths]
        mesh_paths = [os.fspath(p) for p in mesh_paths]
        description = parse_urdf(urdf)  # the robot's tree (and the URDF's own checks)
        root = _read_xml(urdf, "urdf", _urdf_error)
        urdf_dir = None if is_xml_text(os.fspath(urdf)) else os.path.dirname(os.path.abspath(os.fspath(urdf)))
        link_parts = _link_collision_parts(robot, root, urdf_dir, mesh_paths)
        srdf_pairs = set()
        if srdf is not None:
            srdf_pairs = {frozenset(pair) for pair in _read_srdf_disabled(srdf, description.links)}
        adjacent = _adjacent_pairs(description, set(link_parts), set(robot.link_names))
        key = _geometry_key(robot, link_parts)
        scene = cls(robot, link_parts, adjacent, srdf_pairs, padding, key)
        if obstacles:
            scene.set_obstacles(obstacles)
        return scene

    def set_obstacles(self, obstacles: Sequence[Obstacle]) -> None:
        """Replace the obstacles (root frame). Raises InputValidationError for a non-Obstacle."""
        obstacles = tuple(obstacles)
        for i, obstacle in enumerate(obstacles):
            if not isinstance(obstacle, Obstacle):
                raise InputValidationError(f"obstacles[{i}]", f"must be an Obstacle (Obstacle.box, .sphere, "
                                                              f".cylinder), got {type(obstacle).__name__}")
        names = [o.name or f"obstacle_{i}" for i, o in enumerate(obstacles)]
        clash = set(names) & set(self.link_bodies)
        if clash:
            raise InputValidationError("obstacles", f"names {sorted(clash)} are robot links; choose others")
        n_links = len(self.link_bodies)
        obstacle_parts = []
        for i, obstacle in enumerate(obstacles):
            obstacle_parts += _obstacle_parts(n_links + i, obstacle)
        body_pairs = list(self._link_pairs)
        for i in range(n_links):
            body_pairs += [(i, n_links + k) for k in range(len(obstacles))]
        bodies = self.link_bodies + tuple(names)
        parts, pairs = _build_arrays(self._robot_parts + obstacle_parts, body_pairs)
        with self._lock:
            self.obstacles = obstacles
            self.body_names = bodies
            self.body_pairs = tuple((bodies[i], bodies[j]) for i, j in body_pairs)
            self._parts, self._pairs = parts, pairs

    def arrays(self) -> Tuple[Parts, PairArrays, tuple]:
        """(parts, pairs, body_pairs) of the current obstacles, one consistent snapshot."""
        with self._lock:
            return self._parts, self._pairs, self.body_pairs

    # ------------------------------------------------------------------ checking
    def check(self, joint_q) -> CollisionReport:
        """Check joint states against the scene.

        Args:
            joint_q: (D,) or (B, D) joint coordinates (rad / m) of ``robot``.
        Returns:
            a :class:`CollisionReport` of B (1 for a (D,) input) states.
        Raises:
            InputValidationError: wrong shape or non-finite values.
        """
        clearance, pair, body_pairs = self._clearance(self._states(joint_q), -np.inf, False)
        names = tuple(body_pairs[p] if p >= 0 else ("", "") for p in pair.tolist())
        return CollisionReport(collision_free=clearance > 0.0, clearance=clearance, closest_pair=names)

    def collision_free(self, joint_q) -> np.ndarray:
        """bool (B,) of (B, D) states: whether every checked pair is apart (stops at the first
        colliding pair of a state; the search's filter)."""
        clearance, _, _ = self._clearance(self._states(joint_q), 0.0, True)
        return clearance > 0.0

    def _clearance(self, q: np.ndarray, stop_below: float, verdict_only: bool):
        """(least, pair, body_pairs) of (B, D) float64 C-contiguous ``q`` on the current
        obstacles (``collision_distance.bound_clearance``): through the compiled check bound to
        them once the kernels are ready (rebound when the obstacles change), else in numpy."""
        parts, pairs, body_pairs = self.arrays()
        bound = self._bound
        if bound is None or bound[0] is not parts:
            run = bound_clearance(self.robot, parts, pairs)
            if run is None:
                least, pair = reference_clearance(self.robot, parts, pairs, q)
                return least, pair, body_pairs
            bound = self._bound = (parts, run)
        least, pair = bound[1](q, stop_below, verdict_only)
        return least, pair, body_pairs

    def bodies_at(self, joint_q) -> List[BodyPart]:
        """The parts the check uses, placed at one joint state: robot parts (padding included)
        first, then the obstacles' (for markers and pictures).

        Args:
            joint_q: (D,) joint coordinates (rad / m).
        Returns:
            :class:`BodyPart` s in the root frame. A robot cylinder is its capsule, a mesh its
            enclosing capsule; the capsules covering a box for solid-solid pairs are not
            listed (the box is).
        """
        q = self._states(joint_q)
        if len(q) != 1:
            raise InputValidationError("joint_q", f"must be one state (D,), got shape {np.shape(joint_q)}")
        parts, _, _ = self.arrays()
        rot, pos = _node_frames(self.robot, q)
        rot, pos = rot[0], pos[0]
        out = []
        for i, node in enumerate(parts.cap_node.tolist()):
            if parts.cap_cover[i]:
                continue
            a, b = rot[node] @ parts.cap_a[i] + pos[node], rot[node] @ parts.cap_b[i] + pos[node]
            kind = "sphere" if np.array_equal(parts.cap_a[i], parts.cap_b[i]) else "capsule"
            out.append(BodyPart(self.body_names[parts.cap_body[i]], kind, a, b, float(parts.cap_radius[i]),
                                None, None))
        for i, node in enumerate(parts.solid_node.tolist()):
            pose = np.eye(4)
            pose[:3, :3] = rot[node] @ parts.solid_rot[i]
            pose[:3, 3] = rot[node] @ parts.solid_pos[i] + pos[node]
            half = parts.solid_half[i]
            if parts.solid_kind[i] == SOLID_BOX:
                kind, size = "box", tuple(float(h) for h in 2.0 * half)
            else:
                kind, size = "cylinder", (float(half[0]), float(2.0 * half[2]))
            out.append(BodyPart(self.body_names[parts.solid_body[i]], kind, None, None, float(parts.solid_pad[i]),
                                pose, size))
        robot_first = {name: i for i, name in enumerate(self.body_names)}
        return sorted(out, key=lambda part: robot_first[part.body])

    def _states(self, joint_q) -> np.ndarray:
        """(B, D) float64 C-contiguous copy of (D,) or (B, D) ``joint_q``, checked."""
        try:
            q = np.array(joint_q, dtype=np.float64, order="C")
        except (TypeError, ValueError):
            raise InputValidationError("joint_q", "must be numbers, shape (D,) or (B, D)") from None
        d = self.robot.num_dofs
        if q.ndim == 1:
            q = q[None]
        if q.ndim != 2 or q.shape[1] != d:
            raise InputValidationError("joint_q", f"must have shape (D,) or (B, D) with D={d}, got "
                                                  f"{np.shape(joint_q)}")
        if not np.isfinite(q).all():
            raise InputValidationError("joint_q", "must contain only finite values")
        return q

    # ------------------------------------------------------------------ pair selection
    def _sample_pairs(self) -> frozenset:
        """Link pairs in collision in all or none of the sampled states (no padding), cached
        per model (its kinematics and collision geometry)."""
        with _SAMPLED_LOCK:
            cached = _SAMPLED.get(self._geometry_key)
        if cached is not None:
            return cached
        if not self._link_pair_candidates:
            return frozenset()
        unpadded = [_Part(p.body, p.node, p.a, p.b, p.radius - self.padding, p.xform, p.kind, p.half)
                    for p in self._robot_parts]
        candidates = self._link_pair_candidates
        rng = np.random.default_rng(SAMPLE_SEED)
        states = random_in_limits(self.robot, rng, SAMPLE_STATES)
        ever = np.zeros(len(candidates), dtype=bool)
        always = np.ones(len(candidates), dtype=bool)
        open_pairs = np.arange(len(candidates))
        lo = 0
        for size in _sample_chunks():
            if lo >= SAMPLE_STATES or not len(open_pairs):
                break
            # a pair seen both in and out of collision is kept whatever the other states say
            parts, pairs = _build_arrays(unpadded, [candidates[k] for k in open_pairs])
            hit = pairwise_collisions(self.robot, parts, pairs, states[lo:lo + size], len(open_pairs))
            ever[open_pairs] |= hit.any(axis=0)
            always[open_pairs] &= hit.all(axis=0)
            open_pairs = open_pairs[always[open_pairs] | ~ever[open_pairs]]
            lo += size
        left_out = frozenset(frozenset((self.link_bodies[i], self.link_bodies[j]))
                             for (i, j), e, a in zip(candidates, ever, always) if a or not e)
        with _SAMPLED_LOCK:
            _SAMPLED[self._geometry_key] = left_out
        return left_out
