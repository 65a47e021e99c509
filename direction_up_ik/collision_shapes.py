"""What a collision scene checks, as shapes to draw (RViz markers, matplotlib pictures).

:func:`robot_shapes` poses the robot parts of a :class:`~direction_up_ik.core.CollisionScene`
(the capsules and solids its check bounds every link with, padding included) at a joint
state; :func:`obstacle_shapes` turns obstacles into the same :class:`Shape`. No ROS, no
matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from .core.collision import SOLID_BOX

#: m: a capsule end this far inside a solid of its own body still counts as inside.
_INSIDE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Shape:
    """One shape in the robot's root frame.

    Attributes:
        body: the link or obstacle it belongs to.
        kind: "capsule", "sphere", "box" or "cylinder".
        pose: (4, 4) root -> shape centre; capsule and cylinder axes along local Z.
        size: metres: capsule (radius, segment length), sphere (radius,), box (x, y, z) full
            edges, cylinder (radius, length).
    """

    body: str
    kind: str
    pose: np.ndarray
    size: Tuple[float, ...]


def _axis_pose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(4, 4) pose at the middle of a-b with local Z along it (any Z for a point)."""
    pose = np.eye(4)
    pose[:3, 3] = 0.5 * (a + b)
    axis = b - a
    length = float(np.linalg.norm(axis))
    if length > 0.0:
        z = axis / length
        helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        x = np.cross(helper, z)
        x /= np.linalg.norm(x)
        pose[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    return pose


def robot_shapes(scene, joint_q) -> List[Shape]:
    """The robot's collision parts of ``scene`` at ``joint_q`` (D,) (rad / m), root frame.

    Capsules that a scene adds around a box of the same body to check it against another box
    (they lie inside that box) are left out: the box is drawn.
    """
    parts, _, _ = scene.arrays()
    names = scene.body_names
    links = len(scene.link_bodies)
    rot, pos = scene.robot.node_frames(np.asarray(joint_q, dtype=np.float64)[None])
    rot = np.concatenate([rot[0], np.eye(3)[None]])  # index -1: the root
    pos = np.concatenate([pos[0], np.zeros((1, 3))])
    out: List[Shape] = []
    solids = [s for s in range(len(parts.solid_body)) if parts.solid_body[s] < links]
    for s in solids:
        r = rot[parts.solid_node[s]] @ parts.solid_rot[s]
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = r, rot[parts.solid_node[s]] @ parts.solid_pos[s] + pos[parts.solid_node[s]]
        half, pad = parts.solid_half[s], float(parts.solid_pad[s])
        if parts.solid_kind[s] == SOLID_BOX:
            out.append(Shape(names[parts.solid_body[s]], "box", pose, tuple(float(v) for v in 2.0 * (half + pad))))
        else:
            out.append(Shape(names[parts.solid_body[s]], "cylinder", pose,
                             (float(half[0]) + pad, 2.0 * (float(half[2]) + pad))))
    for c in range(len(parts.cap_body)):
        body = int(parts.cap_body[c])
        if body >= links or _inside_own_solid(parts, c, solids):
            continue
        node = parts.cap_node[c]
        a = rot[node] @ parts.cap_a[c] + pos[node]
        b = rot[node] @ parts.cap_b[c] + pos[node]
        length = float(np.linalg.norm(b - a))
        radius = float(parts.cap_radius[c])
        if length == 0.0:
            out.append(Shape(names[body], "sphere", _axis_pose(a, b), (radius,)))
        else:
            out.append(Shape(names[body], "capsule", _axis_pose(a, b), (radius, length)))
    return out


def _inside_own_solid(parts, c: int, solids: Sequence[int]) -> bool:
    """Whether capsule ``c``'s segment lies in a solid of its body on its node (a box's cover)."""
    for s in solids:
        if parts.solid_body[s] != parts.cap_body[c] or parts.solid_node[s] != parts.cap_node[c]:
            continue
        r, p, half = parts.solid_rot[s], parts.solid_pos[s], parts.solid_half[s]
        ends = np.stack([parts.cap_a[c], parts.cap_b[c]]) - p
        local = ends @ r  # node frame -> solid frame
        if np.all(np.abs(local) <= half + _INSIDE_TOLERANCE):
            return True
    return False


def obstacle_shapes(obstacles) -> List[Shape]:
    """Shapes of core ``Obstacle`` s (root frame), named as the scene names them."""
    out = []
    for i, o in enumerate(obstacles):
        name = o.name or f"obstacle_{i}"
        pose = np.array(o.pose, dtype=np.float64)
        if o.kind == "sphere":
            out.append(Shape(name, "sphere", pose, (float(o.size[0]),)))
        else:
            out.append(Shape(name, o.kind, pose, tuple(float(v) for v in o.size)))
    return out
