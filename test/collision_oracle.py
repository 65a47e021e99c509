"""coal (the maintained hpp-fcl) as the independent oracle of the collision tests: exact signed
distances on the original URDF primitives and obstacles (importable as ``collision_oracle``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import coal
import numpy as np

from direction_up_ik import CollisionScene, Obstacle
from direction_up_ik.core.rotations import make_transform, rpy_to_matrix


def pose(xyz=(0, 0, 0), rpy=(0, 0, 0)) -> np.ndarray:
    """(4, 4) transform of a translation and URDF roll/pitch/yaw."""
    return make_transform(rpy_to_matrix(rpy), xyz)


def coal_geometry(tag: str, element: ET.Element):
    """A coal shape of a URDF geometry element (box sizes and cylinder lengths are full ones in both)."""
    if tag == "box":
        return coal.Box(*[float(v) for v in element.get("size").split()])
    if tag == "sphere":
        return coal.Sphere(float(element.get("radius")))
    return coal.Cylinder(float(element.get("radius")), float(element.get("length")))


def urdf_shapes(urdf_path) -> dict:
    """{link: [(link -> shape (4, 4), coal shape)]} of a URDF's primitive collision elements."""
    shapes = {}
    for link in ET.parse(urdf_path).getroot().findall("link"):
        for element in link.findall("collision"):
            origin = element.find("origin")
            xyz = [float(v) for v in origin.get("xyz").split()] if origin is not None else [0, 0, 0]
            rpy = [float(v) for v in origin.get("rpy").split()] if origin is not None else [0, 0, 0]
            shape = next(iter(element.find("geometry")))
            shapes.setdefault(link.get("name"), []).append((pose(xyz, rpy), coal_geometry(shape.tag, shape)))
    return shapes


def obstacle_shape(obstacle: Obstacle):
    if obstacle.kind == "box":
        return coal.Box(*obstacle.size)
    if obstacle.kind == "sphere":
        return coal.Sphere(obstacle.size[0])
    return coal.Cylinder(*obstacle.size)


def coal_distance(shape_a, xform_a, shape_b, xform_b) -> float:
    a = coal.CollisionObject(shape_a, coal.Transform3s(xform_a[:3, :3], xform_a[:3, 3]))
    b = coal.CollisionObject(shape_b, coal.Transform3s(xform_b[:3, :3], xform_b[:3, 3]))
    result = coal.DistanceResult()
    return coal.distance(a, b, coal.DistanceRequest(), result)


def oracle_pair_distances(robot, scene: CollisionScene, shapes: dict, q: np.ndarray) -> np.ndarray:
    """(len(body_pairs),) coal's signed distance of each checked pair at state q (D,)."""
    links = list(scene.link_bodies)
    frames = dict(zip(links, robot.link_transforms(q[None], links)[0]))
    obstacles = {o.name or f"obstacle_{i}": o for i, o in enumerate(scene.obstacles)}

    def parts(body):
        if body in obstacles:
            return [(obstacles[body].pose, obstacle_shape(obstacles[body]))]
        return [(frames[body] @ local, shape) for local, shape in shapes[body]]
    out = []
    for first, second in scene.body_pairs:
        out.append(min(coal_distance(sa, xa, sb, xb) for xa, sa in parts(first) for xb, sb in parts(second)))
    return np.array(out)


def random_obstacles(rng, robot_name: str, count: int = 4):
    """Boxes, spheres and cylinders around where the robot's arms reach."""
    centre = np.array([0.4, 0.0, 1.1]) if robot_name == "dual_arm_torso" else np.array([0.3, 0.0, 0.4])
    out = []
    for i in range(count):
        where = pose(centre + rng.uniform(-0.4, 0.4, 3), rng.uniform(-np.pi, np.pi, 3))
        kind = i % 3
        if kind == 0:
            out.append(Obstacle.box(rng.uniform(0.02, 0.4, 3), where, name=f"box{i}"))
        elif kind == 1:
            out.append(Obstacle.sphere(rng.uniform(0.02, 0.15), where, name=f"sphere{i}"))
        else:
            out.append(Obstacle.cylinder(rng.uniform(0.02, 0.15), rng.uniform(0.05, 0.5), where, name=f"cyl{i}"))
    return out
