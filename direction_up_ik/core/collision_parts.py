"""Collision geometry as the check sees it: parts read from a URDF, and the pairs between them.

Every ``<collision>`` element becomes *parts* (:class:`Parts`): capsules (spheres, cylinders,
enclosing capsules of meshes) and solids with an exact signed distance (boxes, obstacle boxes
and cylinders); see :mod:`.collision` for the bounds this keeps. :func:`_build_arrays` flattens
parts and expands body pairs into the elementary pairs the distance code runs over
(:mod:`.collision_distance`). :func:`_adjacent_pairs` gives the link pairs never checked.
"""


from __future__ import annotations

import hashlib
import math
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .errors import DirectionUpIKError, InputValidationError, RobotModelError
from .kinematics import RobotKinematics
from .rotations import make_transform, rpy_to_matrix
from .urdf_loader import excerpt, is_xml_text

#: Solid kinds (``Parts.solid_kind``).
SOLID_BOX, SOLID_CYLINDER = 0, 1
#: Frame of parts fixed to the root link (obstacles, links without a movable joint above).
ROOT_FRAME = -1


class CollisionGeometryWarning(DirectionUpIKError, UserWarning):
    """A link's collision element cannot be used (a mesh file not found or unreadable); the
    message names the link, the file and how the link is checked instead."""


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


def _obstacle_parts(body: int, obstacle) -> List[_Part]:
    """The parts of ``obstacle`` (a ``collision.Obstacle``) as body ``body``, in the root frame."""
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
