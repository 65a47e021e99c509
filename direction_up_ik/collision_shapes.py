"""What a collision scene checks, as shapes to draw (RViz markers, matplotlib pictures).

:func:`robot_shapes` poses the robot parts of a :class:`~direction_up_ik.core.CollisionScene`
(the capsules and solids its check bounds every link with, padding included) at a joint
state; :func:`obstacle_shapes` turns obstacles into the same :class:`Shape`. No ROS, no
matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np


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
    """The robot's collision parts of ``scene`` at ``joint_q`` (D,) (rad / m), root frame, as
    :meth:`~direction_up_ik.core.CollisionScene.bodies_at` places them, padding included
    (the capsules that cover a box for box-box pairs are left out: the box is drawn)."""
    links = set(scene.body_names[:len(scene.link_bodies)])
    out: List[Shape] = []
    for part in scene.bodies_at(joint_q):
        if part.body not in links:
            continue
        if part.kind == "sphere":
            out.append(Shape(part.body, "sphere", _axis_pose(part.a, part.b), (part.radius,)))
        elif part.kind == "capsule":
            out.append(Shape(part.body, "capsule", _axis_pose(part.a, part.b),
                             (part.radius, float(np.linalg.norm(part.b - part.a)))))
        elif part.kind == "box":
            out.append(Shape(part.body, "box", part.pose, tuple(v + 2.0 * part.radius for v in part.size)))
        else:
            radius, length = part.size
            out.append(Shape(part.body, "cylinder", part.pose, (radius + part.radius, length + 2.0 * part.radius)))
    return out


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
