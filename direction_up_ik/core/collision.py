"""Collision checking of joint states: the robot's own collision geometry and world obstacles.

:meth:`CollisionScene.from_urdf` reads the ``<collision>`` elements of a URDF once and turns
every element into *parts* the check can bound conservatively (``docs/design.md``,
"Collision checking"):

* a **capsule** (a segment swept by a sphere): URDF ``sphere`` (exact), ``cylinder`` (the
  capsule of the same axis, length and radius: its end caps stick out by the radius) and
  ``mesh`` (the enclosing capsule of the mesh's convex hull about its principal axis);
  an obstacle sphere (exact);
* a **solid** with an exact signed distance: a robot ``box``, an obstacle box or cylinder.
  A solid meets a capsule exactly; against another solid, one of the two (the smaller) is
  replaced by capsules that enclose it (:func:`box_cover`).

Every part encloses its original shape, so a distance between parts is never larger than
the distance between the originals: ``clearance`` may be too small (the margins above),
never too large. ``padding`` inflates every robot part.

Pairs checked (:func:`CollisionScene.pairs`): every robot link with geometry against every
obstacle, and every pair of robot links except adjacent ones (joined by a joint, where links
without geometry and fixed joints are looked through), the SRDF's disabled pairs, and pairs
in collision in every or in none of :data:`SAMPLE_STATES` random states (the sampling of
MoveIt's setup assistant; seed :data:`SAMPLE_SEED`; cached per model).

:meth:`CollisionScene.check` runs on the compiled kernel
(:mod:`.compiled.collision`) once the backend's kernels are ready in this process, else on
the numpy reference of this module; both give the same values.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import backend
from .errors import DirectionUpIKError, InputValidationError, RobotModelError
from .kinematics import RobotKinematics, random_in_limits, validate_transform
from .rotations import make_transform, rpy_to_matrix
from .urdf_loader import excerpt, is_xml_text, parse_urdf

#: Random joint states the pair selection samples (MoveIt's setup assistant's default density).
SAMPLE_STATES = 10000
#: Seed of the pair selection's states (``numpy.random.default_rng``).
SAMPLE_SEED = 0
#: Golden-section steps of a capsule-solid distance: the bracket shrinks to 0.618**N of the
#: segment, and the bound subtracts that length (so the distance stays a lower bound).
GOLDEN_STEPS = 36
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
#: Solid kinds (``Parts.solid_kind``).
SOLID_BOX, SOLID_CYLINDER = 0, 1
#: Frame of parts fixed to the root link (obstacles, links without a movable joint above).
ROOT_FRAME = -1


class CollisionGeometryWarning(DirectionUpIKError, UserWarning):
    """A link's collision element cannot be used (a mesh file not found or unreadable); the
    message names the link, the file and how the link is checked instead."""


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


# ------------------------------------------------------------------------------ parts
class Parts(NamedTuple):
    """Capsules and solids of a scene, each fixed in a frame (a model node, or -1: the root).

    C capsules, S solids; metres. Arrays are read-only.

    Attributes:
        cap_node: (C,) int64 frame; cap_a, cap_b: (C, 3) segment ends in that frame;
            cap_radius: (C,) radius, padding included; cap_body: (C,) int64 body;
            cap_cover: (C,) bool, part of a box's cover (:func:`box_cover`), not a shape of its own.
        solid_node: (S,) int64 frame; solid_rot: (S, 3, 3), solid_pos: (S, 3) frame -> solid;
            solid_kind: (S,) int64 ``SOLID_*``; solid_half: (S, 3) box half edges or
            (radius, radius, half length); solid_pad: (S,) padding; solid_body: (S,) int64;
            solid_reach: (S,) the distance from its centre to its farthest point (pruning).
    """

    cap_node: np.ndarray
    cap_a: np.ndarray
    cap_b: np.ndarray
    cap_radius: np.ndarray
    cap_body: np.ndarray
    cap_cover: np.ndarray
    solid_node: np.ndarray
    solid_rot: np.ndarray
    solid_pos: np.ndarray
    solid_kind: np.ndarray
    solid_half: np.ndarray
    solid_pad: np.ndarray
    solid_body: np.ndarray
    solid_reach: np.ndarray

    def kernel_tuple(self) -> tuple:
        """The arrays the compiled check reads, in its order."""
        return (self.cap_node, self.cap_a, self.cap_b, self.cap_radius, self.solid_node, self.solid_rot,
                self.solid_pos, self.solid_kind, self.solid_half, self.solid_pad, self.solid_reach)


class PairArrays(NamedTuple):
    """The elementary pairs of a scene: capsule-capsule ``cc`` (P, 2) and capsule-solid ``cs``
    (Q, 2) indices into :class:`Parts`; ``cc_pair`` (P,), ``cs_pair`` (Q,) the body pair
    (index into ``CollisionScene.body_pairs``) each belongs to; ``cs_group`` (Q, 2) the range
    [start, end) of consecutive ``cs`` rows whose capsules cover one box (a solid-solid pair;
    a row alone otherwise): a penetration is bounded for the whole box, not per capsule."""

    cc: np.ndarray
    cs: np.ndarray
    cc_pair: np.ndarray
    cs_pair: np.ndarray
    cs_group: np.ndarray


@dataclass
class _Part:
    """One part while a scene is built: a capsule (a, b, radius) or a solid (xform, kind, half)."""

    body: int
    node: int
    a: Optional[np.ndarray] = None
    b: Optional[np.ndarray] = None
    radius: float = 0.0
    xform: Optional[np.ndarray] = None
    kind: int = SOLID_BOX
    half: Optional[np.ndarray] = None

    @property
    def is_solid(self) -> bool:
        return self.xform is not None


def box_cover(half) -> List[Tuple[np.ndarray, np.ndarray, float]]:
    """Capsules (a, b, radius), in the box's frame, whose union encloses a box of half edges
    ``half`` (3,): segments along the longest edge, through the centres of a grid over the
    cross-section whose cells are at most as wide as the shortest edge. Each capsule sticks
    out of the box by less than its radius (the margin of a solid-solid pair)."""
    half = np.asarray(half, dtype=np.float64)
    order = np.argsort(-half, kind="stable")
    long_axis, mid_axis, short_axis = order
    cells = max(1, int(math.ceil(half[mid_axis] / max(half[short_axis], 1e-9) - 1e-9)))
    cell_half = half[mid_axis] / cells
    radius = float(math.hypot(cell_half, half[short_axis]))
    out = []
    for i in range(cells):
        centre = np.zeros(3)
        centre[mid_axis] = -half[mid_axis] + (2 * i + 1) * cell_half
        a, b = centre.copy(), centre.copy()
        a[long_axis], b[long_axis] = -half[long_axis], half[long_axis]
        out.append((a, b, radius))
    return out


def mesh_capsule(vertices: np.ndarray) -> Tuple[np.ndarray, np.ndarray, float]:
    """The capsule (a, b, radius) about the principal axis of ``vertices`` (N, 3) that encloses
    them (hence their convex hull): radius the largest distance from the axis through their
    centroid, the segment just long enough that every vertex lies within the radius."""
    centre = vertices.mean(axis=0)
    rel = vertices - centre
    _, _, vt = np.linalg.svd(rel, full_matrices=False)
    axis = vt[0]
    along = rel @ axis
    radial = np.linalg.norm(rel - along[:, None] * axis, axis=1)
    radius = float(radial.max())
    reach = np.sqrt(np.maximum(radius * radius - radial * radial, 0.0))
    # vertex i is covered by any segment point t with |along_i - t| <= reach_i
    lo, hi = float(np.min(along + reach)), float(np.max(along - reach))
    if lo > hi:  # one point lies in every vertex's interval: a sphere does
        lo = hi = 0.5 * (lo + hi)
    return centre + lo * axis, centre + hi * axis, radius


# ------------------------------------------------------------------------------ URDF
def _read_xml(source, field: str, error) -> ET.Element:
    """The root element of ``source`` (XML text or a file path); ``error(field, rule)`` else."""
    if not isinstance(source, (str, os.PathLike)):
        raise error(field, f"expected a file path or XML text, got {type(source).__name__}")
    text = os.fspath(source)
    if not is_xml_text(text):
        try:
            with open(text, "rb") as handle:
                text = handle.read()
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise error(field, f"neither XML text (which starts with '<') nor a readable file: "
                               f"cannot read {excerpt(os.fspath(source))}: {reason}") from None
    else:
        text = text.lstrip("\ufeff \t\r\n")
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise error(field, f"not well-formed XML: {exc}") from None


def _urdf_error(field: str, rule: str) -> RobotModelError:
    return RobotModelError(f"{field}: {rule}")


def _floats(text: Optional[str], count: int, default, what: str) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=np.float64)
    try:
        values = np.array([float(v) for v in text.split()], dtype=np.float64)
    except ValueError:
        raise RobotModelError(f"urdf: {what} must be {count} numbers, got {text!r}") from None
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise RobotModelError(f"urdf: {what} must be {count} finite numbers, got {text!r}")
    return values


def _positive(element: ET.Element, attribute: str, what: str) -> float:
    try:
        value = float(element.get(attribute, "nan"))
    except ValueError:
        value = np.nan
    if not (math.isfinite(value) and value >= 0.0):
        raise RobotModelError(f"urdf: {what} needs a finite {attribute} >= 0, got {element.get(attribute)!r}")
    return float(value)


def _resolve_mesh(filename: str, urdf_dir: Optional[str], mesh_paths: Sequence[str]) -> Tuple[Optional[str], list]:
    """(existing file or None, the paths tried) for a mesh ``filename`` (package://, file:// or
    relative to the URDF's folder and each of ``mesh_paths``)."""
    tried = []
    if filename.startswith("file://"):
        tried.append(filename[len("file://"):])
    elif filename.startswith("package://"):
        rest = filename[len("package://"):]
        package, _, inside = rest.partition("/")
        for folder in mesh_paths:
            tried += [os.path.join(folder, package, inside), os.path.join(folder, inside)]
    elif os.path.isabs(filename):
        tried.append(filename)
    else:
        for folder in ([urdf_dir] if urdf_dir else []) + list(mesh_paths):
            tried.append(os.path.join(folder, filename))
    for path in tried:
        if os.path.isfile(path):
            return path, tried
    return None, tried


def _load_mesh_vertices(path: str) -> np.ndarray:
    """(N, 3) vertices of the convex hull of the mesh file ``path`` (trimesh)."""
    import trimesh
    mesh = trimesh.load(path, force="mesh")
    vertices = np.asarray(mesh.convex_hull.vertices, dtype=np.float64)
    if vertices.ndim != 2 or len(vertices) == 0 or not np.all(np.isfinite(vertices)):
        raise ValueError("no finite vertices")
    return vertices


def _link_collision_parts(robot: RobotKinematics, root: ET.Element, urdf_dir: Optional[str],
                          mesh_paths: Sequence[str]) -> Dict[str, list]:
    """{link: [(link -> element (4, 4), geometry element)]} of the links of ``robot`` that have
    usable collision elements; warns (once per element) about meshes it cannot use."""
    known = set(robot.link_names)
    out: Dict[str, list] = {}
    for link in root.findall("link"):
        name = link.get("name", "")
        if name not in known:
            continue  # above the model's root link: not part of this model
        elements = link.findall("collision")
        usable, missing = [], []
        for element in elements:
            origin = element.find("origin")
            xyz = _floats(origin.get("xyz") if origin is not None else None, 3, (0, 0, 0),
                          f"link '{name}' collision origin xyz")
            rpy = _floats(origin.get("rpy") if origin is not None else None, 3, (0, 0, 0),
                          f"link '{name}' collision origin rpy")
            geometry = element.find("geometry")
            shape = None if geometry is None else next(iter(geometry), None)
            if shape is None:
                raise RobotModelError(f"urdf: link '{name}' has a <collision> without a geometry")
            xform = make_transform(rpy_to_matrix(rpy), xyz)
            if shape.tag == "mesh":
                filename = shape.get("filename", "")
                path, tried = _resolve_mesh(filename, urdf_dir, mesh_paths)
                vertices, reason = None, "not found (tried: " + ", ".join(tried or ["no folder"]) + ")"
                if path is not None:
                    try:
                        vertices = _load_mesh_vertices(path)
                    except Exception as exc:  # noqa: BLE001 - any unreadable mesh is reported
                        reason = f"unreadable ({type(exc).__name__}: {exc})"
                if vertices is None:
                    missing.append((filename, reason))
                    continue
                scale = _floats(shape.get("scale"), 3, (1, 1, 1), f"link '{name}' mesh scale")
                usable.append((xform, ("mesh", vertices * scale)))
            elif shape.tag == "box":
                size = _floats(shape.get("size"), 3, [np.nan] * 3, f"link '{name}' box size")
                if np.any(size < 0):
                    raise RobotModelError(f"urdf: link '{name}' box size must be >= 0, got {shape.get('size')!r}")
                usable.append((xform, ("box", size)))
            elif shape.tag == "sphere":
                usable.append((xform, ("sphere", _positive(shape, "radius", f"link '{name}' sphere"))))
            elif shape.tag in ("cylinder", "capsule"):
                what = f"link '{name}' {shape.tag}"
                usable.append((xform, (shape.tag, (_positive(shape, "radius", what),
                                                   _positive(shape, "length", what)))))
            else:
                raise RobotModelError(f"urdf: link '{name}' has collision geometry <{shape.tag}>; "
                                      "supported: box, cylinder, sphere, capsule, mesh")
        for filename, reason in missing:
            then = ("checked by its other collision elements only" if usable
                    else "not checked for collisions at all")
            warnings.warn(CollisionGeometryWarning(
                f"collision mesh of link '{name}': file '{filename}' {reason}; the link is {then}"),
                stacklevel=4)
        if usable:
            out[name] = usable
    return out


def _parts_of(body: int, node: int, link_from_node: np.ndarray, xform: np.ndarray, shape, padding: float):
    """The :class:`_Part` list of one collision element (in its node's frame)."""
    node_from_element = link_from_node @ xform
    r, p = node_from_element[:3, :3], node_from_element[:3, 3]
    kind, size = shape
    if kind == "box":
        return [_Part(body, node, xform=node_from_element, kind=SOLID_BOX, half=0.5 * np.asarray(size),
                      radius=padding)]
    if kind == "sphere":
        return [_Part(body, node, a=p.copy(), b=p.copy(), radius=size + padding)]
    if kind in ("cylinder", "capsule"):
        radius, length = size
        return [_Part(body, node, a=p - 0.5 * length * r[:, 2], b=p + 0.5 * length * r[:, 2],
                      radius=radius + padding)]
    a, b, radius = mesh_capsule(size)
    return [_Part(body, node, a=r @ a + p, b=r @ b + p, radius=radius + padding)]


def _obstacle_parts(body: int, obstacle: Obstacle) -> List[_Part]:
    pose = obstacle.pose
    if obstacle.kind == "sphere":
        return [_Part(body, ROOT_FRAME, a=pose[:3, 3].copy(), b=pose[:3, 3].copy(), radius=obstacle.size[0])]
    if obstacle.kind == "box":
        return [_Part(body, ROOT_FRAME, xform=np.array(pose), kind=SOLID_BOX, half=0.5 * np.array(obstacle.size))]
    radius, length = obstacle.size
    return [_Part(body, ROOT_FRAME, xform=np.array(pose), kind=SOLID_CYLINDER,
                  half=np.array([radius, radius, 0.5 * length]))]


def _read_srdf_disabled(srdf, links: Sequence[str]) -> List[Tuple[str, str]]:
    """The (link1, link2) pairs of the SRDF's ``<disable_collisions>`` entries."""
    root = _read_xml(srdf, "srdf", InputValidationError)
    known = set(links)
    pairs = []
    for i, entry in enumerate(root.iter("disable_collisions")):
        pair = (entry.get("link1"), entry.get("link2"))
        for role, link in zip(("link1", "link2"), pair):
            if link is None:
                raise InputValidationError("srdf", f"<disable_collisions> #{i} has no {role}")
            if link not in known:
                shown = ", ".join(sorted(known)[:30])
                raise InputValidationError(
                    "srdf", f"<disable_collisions> #{i} names unknown link '{link}' as {role}; "
                            f"links of the robot: {shown}")
        pairs.append(pair)
    return pairs


# ------------------------------------------------------------------ pair selection cache
_SAMPLED: Dict[str, frozenset] = {}
_SAMPLED_LOCK = threading.Lock()


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
        q = self._states(joint_q)
        parts, pairs, body_pairs = self.arrays()
        clearance, pair = pair_clearance(self.robot, parts, pairs, q, stop_below=-np.inf)
        names = tuple(body_pairs[p] if p >= 0 else ("", "") for p in pair.tolist())
        return CollisionReport(collision_free=clearance > 0.0, clearance=clearance, closest_pair=names)

    def collision_free(self, joint_q) -> np.ndarray:
        """bool (B,) of (B, D) states: whether every checked pair is apart (stops at the first
        colliding pair of a state; the search's filter)."""
        q = self._states(joint_q)
        parts, pairs, _ = self.arrays()
        clearance, _ = pair_clearance(self.robot, parts, pairs, q, stop_below=0.0, verdict_only=True)
        return clearance > 0.0

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
        try:
            q = np.array(joint_q, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputValidationError("joint_q", "must be numbers, shape (D,) or (B, D)") from None
        d = self.robot.num_dofs
        if q.ndim == 1:
            q = q[None]
        if q.ndim != 2 or q.shape[1] != d:
            raise InputValidationError("joint_q", f"must have shape (D,) or (B, D) with D={d}, got "
                                                  f"{np.shape(joint_q)}")
        if not np.all(np.isfinite(q)):
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
        parts, pairs = _build_arrays(unpadded, self._link_pair_candidates)
        rng = np.random.default_rng(SAMPLE_SEED)
        states = random_in_limits(self.robot, rng, SAMPLE_STATES)
        ever = np.zeros(len(self._link_pair_candidates), dtype=bool)
        always = np.ones(len(self._link_pair_candidates), dtype=bool)
        for lo in range(0, SAMPLE_STATES, 500):
            hit = pairwise_collisions(self.robot, parts, pairs, states[lo:lo + 500],
                                      len(self._link_pair_candidates))
            ever |= hit.any(axis=0)
            always &= hit.all(axis=0)
        left_out = frozenset(frozenset((self.link_bodies[i], self.link_bodies[j]))
                             for (i, j), e, a in zip(self._link_pair_candidates, ever, always) if a or not e)
        with _SAMPLED_LOCK:
            _SAMPLED[self._geometry_key] = left_out
        return left_out


def _geometry_key(robot: RobotKinematics, link_parts: Dict[str, list]) -> str:
    """A digest of what the pair selection depends on: the tree, limits and collision geometry."""
    digest = hashlib.sha256()
    arrays = robot.kernel_arrays()
    for array in (arrays.node_parent, arrays.node_dof, arrays.node_scale, arrays.node_offset,
                  arrays.node_type, arrays.node_rot, arrays.node_pos, robot.lower_limits, robot.upper_limits):
        digest.update(np.ascontiguousarray(array).tobytes())
    for name in sorted(link_parts):
        digest.update(name.encode())
        for xform, (kind, size) in link_parts[name]:
            digest.update(kind.encode() + np.asarray(xform).tobytes() + np.asarray(size, dtype=np.float64).tobytes())
        digest.update(repr(robot.link_attachment(name)[0]).encode())
    return digest.hexdigest()


def _adjacent_pairs(description, with_geometry: set, in_model: set) -> set:
    """Link pairs (frozensets) joined by a joint, looking through links without collision
    geometry and through fixed joints: each link with geometry is adjacent to its nearest
    ancestor with geometry and to every link rigidly attached to the same moving link or to
    that ancestor's rigid group (MoveIt's setup assistant's adjacency, extended across fixed
    joints)."""
    parent_of = {j.child: (j.parent, j.type) for j in description.joints}
    out = set()

    def geometry_ancestor(link):
        """Nearest ancestor with geometry, and whether a movable joint lies between."""
        moved = False
        while link in parent_of:
            parent, jtype = parent_of[link]
            moved = moved or jtype != "fixed"
            if parent in with_geometry and parent in in_model:
                return parent, moved
            link = parent
        return None, moved

    def rigid_root(link):
        """The link a chain of fixed joints hangs ``link`` from."""
        while link in parent_of and parent_of[link][1] == "fixed":
            link = parent_of[link][0]
        return link

    links = [link for link in description.links if link in with_geometry and link in in_model]
    for link in links:
        ancestor, _ = geometry_ancestor(link)
        if ancestor is not None:
            out.add(frozenset((link, ancestor)))
    groups: Dict[str, list] = {}
    for link in links:
        groups.setdefault(rigid_root(link), []).append(link)
    for members in groups.values():
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                out.add(frozenset((members[i], members[j])))
    # a rigid group's links are adjacent to what its members are adjacent to across one joint
    for members in groups.values():
        neighbours = set()
        for link in members:
            for pair in list(out):
                if link in pair:
                    neighbours |= pair
        for link in members:
            for other in neighbours - {link}:
                out.add(frozenset((link, other)))
    return out


def _build_arrays(parts: List[_Part], body_pairs: List[Tuple[int, int]]) -> Tuple[Parts, PairArrays]:
    """Flatten ``parts`` into :class:`Parts` and expand ``body_pairs`` into elementary pairs
    (a solid against a solid: the smaller one's :func:`box_cover` against the other)."""
    caps: List[tuple] = []
    solids: List[tuple] = []
    by_body: Dict[int, list] = {}
    for part in parts:
        by_body.setdefault(part.body, []).append(part)
    cap_index: Dict[int, int] = {}
    solid_index: Dict[int, int] = {}
    cover_index: Dict[int, list] = {}

    def add_cap(node, a, b, radius, body, is_cover=False):
        caps.append((node, a, b, radius, body, is_cover))
        return len(caps) - 1

    for part in parts:
        key = id(part)
        if part.is_solid:
            solids.append((part.node, part.xform[:3, :3], part.xform[:3, 3], part.kind, part.half,
                           part.radius, part.body))
            solid_index[key] = len(solids) - 1
        else:
            cap_index[key] = add_cap(part.node, part.a, part.b, part.radius, part.body)
    cc, cs, cc_pair, cs_pair, cs_group = [], [], [], [], []

    def cover(part):
        if id(part) not in cover_index:
            r, p = part.xform[:3, :3], part.xform[:3, 3]
            # a cylinder's half is (r, r, h/2): the cover of its enclosing box
            cover_index[id(part)] = [add_cap(part.node, r @ a + p, r @ b + p, radius + part.radius, part.body, True)
                                     for a, b, radius in box_cover(part.half)]
        return cover_index[id(part)]

    for index, (i, j) in enumerate(body_pairs):
        for first in by_body.get(i, []):
            for second in by_body.get(j, []):
                if not first.is_solid and not second.is_solid:
                    cc.append((cap_index[id(first)], cap_index[id(second)]))
                    cc_pair.append(index)
                    continue
                if first.is_solid and second.is_solid:
                    small, big = sorted((first, second), key=lambda s: float(np.prod(s.half)))
                    start = len(cs)
                    for c in cover(small):
                        cs.append((c, solid_index[id(big)]))
                        cs_pair.append(index)
                    cs_group.extend([(start, len(cs))] * (len(cs) - start))
                    continue
                cap, solid = (second, first) if first.is_solid else (first, second)
                cs.append((cap_index[id(cap)], solid_index[id(solid)]))
                cs_pair.append(index)
                cs_group.append((len(cs) - 1, len(cs)))

    def frozen(values, dtype, shape):
        out = np.ascontiguousarray(np.array(values, dtype=dtype).reshape(shape))
        out.setflags(write=False)
        return out
    c, s = len(caps), len(solids)
    parts_out = Parts(
        cap_node=frozen([x[0] for x in caps], np.int64, (c,)), cap_a=frozen([x[1] for x in caps], np.float64, (c, 3)),
        cap_b=frozen([x[2] for x in caps], np.float64, (c, 3)),
        cap_radius=frozen([x[3] for x in caps], np.float64, (c,)), cap_body=frozen([x[4] for x in caps], np.int64, (c,)),
        cap_cover=frozen([x[5] for x in caps], bool, (c,)),
        solid_node=frozen([x[0] for x in solids], np.int64, (s,)),
        solid_rot=frozen([x[1] for x in solids], np.float64, (s, 3, 3)),
        solid_pos=frozen([x[2] for x in solids], np.float64, (s, 3)),
        solid_kind=frozen([x[3] for x in solids], np.int64, (s,)),
        solid_half=frozen([x[4] for x in solids], np.float64, (s, 3)),
        solid_pad=frozen([x[5] for x in solids], np.float64, (s,)),
        solid_body=frozen([x[6] for x in solids], np.int64, (s,)),
        solid_reach=frozen([np.linalg.norm(x[4]) for x in solids], np.float64, (s,)))
    pairs_out = PairArrays(cc=frozen(cc, np.int64, (len(cc), 2)), cs=frozen(cs, np.int64, (len(cs), 2)),
                           cc_pair=frozen(cc_pair, np.int64, (len(cc_pair),)),
                           cs_pair=frozen(cs_pair, np.int64, (len(cs_pair),)),
                           cs_group=frozen(cs_group, np.int64, (len(cs_group), 2)))
    return parts_out, pairs_out


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


def pair_clearance(robot: RobotKinematics, parts: Parts, pairs: PairArrays, q: np.ndarray,
                   stop_below: float, verdict_only: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """((B,) least distance, (B,) body pair of it (-1: no pair)) of (B, D) states ``q``; on the
    compiled kernel when it is ready, else with numpy. ``stop_below``: a state's pairs may stop
    once one is below it (its distance is then that pair's, not necessarily the least);
    ``verdict_only``: only the sign of the distance matters (the kernel skips more)."""
    kernel = _compiled_check()
    if kernel is not None:
        return kernel(robot, parts, pairs, q, stop_below, verdict_only)
    return reference_clearance(robot, parts, pairs, q)


def reference_clearance(robot: RobotKinematics, parts: Parts, pairs: PairArrays,
                        q: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`pair_clearance` in numpy: ((B,) least distance, (B,) its body pair)."""
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


def _compiled_check():
    """The compiled form of :func:`pair_clearance` when ready, else None."""
    kernels = _kernels()
    if kernels is None:
        return None

    def run(robot, parts, pairs, q, stop_below, verdict_only=False):
        b = len(q)
        least, pair = np.empty(b), np.empty(b, dtype=np.int64)
        kernels.clearance_rows(np.ascontiguousarray(q, dtype=np.float64), _model_tuple(robot), parts.kernel_tuple(),
                               pairs.cc, pairs.cs, pairs.cc_pair, pairs.cs_pair, pairs.cs_group, float(stop_below),
                               bool(verdict_only), least, pair)
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
