"""Pictures of a robot pose for people without RViz (headless matplotlib, PNG).

    from direction_up_ik.plot import plot_pose
    plot_pose(robot, q, "pose.png", targets=candidate, ee_names=["left", "right"])

The picture has two panels, a 3-D view and a side view (x-z plane), both with equal
axis scales in metres:

* the link chain: a grey line from every link origin to its parent's (URDF tree),
  dots at the link origins, a black square at the root;
* every TCP frame of the pose as solid RGB axes (x red, y green, z blue), labelled
  with the end-effector name;
* every target as a star at its position and dashed, lighter RGB axes (full mode:
  the whole target frame; axis mode: the working direction only; position mode:
  the star alone);
* the title: robot name and, per end effector, the remaining position (mm),
  direction and up (deg) errors of the pose against its target;
* with ``collision_scene``: the robot's collision bodies as the check bounds them
  (translucent grey capsules and boxes, padding included; red where a body is in the
  closest pair of a collision) and the scene's obstacles (translucent brown), and the
  clearance in the title.

Needs matplotlib (``requirements/dev.txt``), imported on first use; the figure is
rendered by the Agg canvas directly (no pyplot, no display, no global backend change).
"""

from __future__ import annotations

import math
import pathlib
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .core.errors import InputValidationError
from .core.targets import DirectionUpTarget
from .core.urdf_loader import parse_urdf

AXIS_COLOURS = ("#d62728", "#2ca02c", "#1f77b4")          # x, y, z of a TCP frame
TARGET_COLOURS = ("#ff9896", "#98df8a", "#9ecae1")        # x, y, z of a target frame (lighter)
TargetLike = Union[DirectionUpTarget, Tuple[int, np.ndarray]]


def link_parents(urdf) -> Dict[str, str]:
    """``{child link: parent link}`` of a URDF (path or XML text)."""
    return {j.child: j.parent for j in parse_urdf(urdf).joints}


def _bundled_urdf(robot) -> Optional[pathlib.Path]:
    from .robots import BUNDLED_ROBOTS
    for bundled in BUNDLED_ROBOTS.values():
        if bundled.name == robot.robot_name:
            return bundled.urdf_path()
    return None


def _as_target(item: TargetLike) -> DirectionUpTarget:
    """DirectionUpTarget, or (ee_id, (4, 4) TCP pose) as a full TCP-convention target."""
    if isinstance(item, DirectionUpTarget):
        return item
    ee_id, pose = item
    pose = np.asarray(pose, dtype=np.float64)
    return DirectionUpTarget(int(ee_id), pose[:3, 3], pose[:3, 2], pose[:3, 1], None, None)


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    c = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return math.acos(max(-1.0, min(1.0, c)))


def target_errors(tcp: np.ndarray, target: DirectionUpTarget) -> Tuple[float, float, float]:
    """(position m, direction rad, up rad) of a (4, 4) TCP pose against ``target``; NaN for
    angles its mode leaves free. Up is the raw angle between the up axes."""
    rot = tcp[:3, :3]
    position = float(np.linalg.norm(tcp[:3, 3] - target.position_world))
    direction = (math.nan if target.direction_world is None
                 else _angle(rot @ target.local_direction, target.direction_world))
    up = math.nan if target.up_world is None else _angle(rot @ target.local_up, target.up_world)
    return position, direction, up


def _error_text(name: str, errors: Tuple[float, float, float]) -> str:
    position, direction, up = errors
    parts = [f"{1e3 * position:.1f} mm"]
    if not math.isnan(direction):
        parts.append(f"dir {math.degrees(direction):.2f}°")
    if not math.isnan(up):
        parts.append(f"up {math.degrees(up):.2f}°")
    return f"{name}: " + ", ".join(parts)


BODY_COLOUR = "0.55"          # robot collision bodies
COLLIDING_COLOUR = "#d62728"  # the bodies of a collision's closest pair
OBSTACLE_COLOUR = "#8c564b"   # obstacles


def _revolution(profile: np.ndarray, pose: np.ndarray, steps: int = 18):
    """(X, Y, Z) grids of the surface of revolution of ``profile`` (N, 2) rows (radius, z)
    about the local Z axis of ``pose`` (4, 4)."""
    phi = np.linspace(0.0, 2.0 * np.pi, steps)
    local = np.stack([profile[:, :1] * np.cos(phi), profile[:, :1] * np.sin(phi),
                      np.broadcast_to(profile[:, 1:], (len(profile), steps))], axis=-1)
    world = local @ pose[:3, :3].T + pose[:3, 3]
    return world[..., 0], world[..., 1], world[..., 2]


def _box_faces(pose: np.ndarray, size) -> list:
    """The six faces (4, 3) of a box of full edges ``size`` centred at ``pose``."""
    half = 0.5 * np.asarray(size, dtype=np.float64)
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
    corners = corners @ pose[:3, :3].T + pose[:3, 3]
    quads = ((0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5))
    return [corners[list(q)] for q in quads]


def draw_shape(ax, shape, colour, alpha: float) -> None:
    """Draw one :class:`~direction_up_ik.collision_shapes.Shape` on a 3-D axes."""
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    if shape.kind == "box":
        ax.add_collection3d(Poly3DCollection(_box_faces(shape.pose, shape.size), facecolor=colour,
                                             edgecolor="0.3", linewidths=0.3, alpha=alpha, axlim_clip=True))
        return
    if shape.kind == "cylinder":
        radius, length = shape.size
        profile = np.array([[0.0, -0.5 * length], [radius, -0.5 * length], [radius, 0.5 * length],
                            [0.0, 0.5 * length]])
    else:  # capsule or sphere: two hemispheres joined by a cylinder
        radius, length = shape.size[0], (shape.size[1] if shape.kind == "capsule" else 0.0)
        angle = np.linspace(-0.5 * np.pi, 0.5 * np.pi, 9)
        ends = [(radius * np.cos(a), radius * np.sin(a) + (0.5 if a > 0 else -0.5) * length) for a in angle]
        profile = np.array(ends[:5] + [(radius, 0.5 * length)] + ends[4:])
    ax.plot_surface(*_revolution(profile, shape.pose), color=colour, alpha=alpha, linewidth=0, shade=True,
                    axlim_clip=True)


def plot_pose(robot, q, path, targets: Sequence[TargetLike] = (), *, urdf=None,
              ee_names: Optional[Sequence[str]] = None, title: Optional[str] = None,
              axis_length: float = 0.1, dpi: int = 110, collision_scene=None) -> pathlib.Path:
    """Draw ``robot`` at joint state ``q`` (D,) with its TCP frames and ``targets``; write a PNG.

    Args:
        robot: a RobotKinematics (poses in its world frame, metres).
        q: (D,) joint positions (rad / m).
        path: output file (PNG).
        targets: DirectionUpTarget objects, or ``(ee_id, (4, 4) TCP pose)`` pairs (full
            targets, TCP convention +Z/+Y), e.g. one candidate.
        urdf: the robot's URDF (path or XML) for the link tree; default: the bundled
            robot of the same name.
        ee_names: names per ee_id for labels and the title (default "ee0", "ee1", ...).
        title: first title line (default: the robot name).
        axis_length: metres, length of the drawn frame axes.
        collision_scene: a CollisionScene of ``robot``: its collision bodies at ``q`` and its
            obstacles are drawn, and the clearance at ``q`` is named in the title.
    Returns:
        the path written.
    Raises:
        ValueError: no URDF given and the robot is not a bundled one.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    if urdf is None:
        urdf = _bundled_urdf(robot)
        if urdf is None:
            raise InputValidationError("urdf", f"robot '{robot.robot_name}' is not a bundled robot; pass its URDF")
    q = np.asarray(q, dtype=np.float64)
    names = list(robot.link_names)
    origins = robot.link_transforms(q, names)[:, :3, 3]
    index = {n: i for i, n in enumerate(names)}
    edges = [(index[c], index[p]) for c, p in link_parents(urdf).items() if c in index and p in index]
    tcp = robot.tcp_transforms(q)
    ee_names = list(ee_names) if ee_names is not None else [f"ee{e}" for e in range(robot.num_end_effectors)]
    targets = [_as_target(t) for t in targets]

    def box(cloud: np.ndarray, margin: float, minimum: float):
        """Centre and half-width of a cube around ``cloud`` (equal scale on every axis)."""
        centre = 0.5 * (cloud.min(axis=0) + cloud.max(axis=0))
        return centre, max(0.5 * float(np.max(cloud.max(axis=0) - cloud.min(axis=0))) + margin, minimum)

    tool_points = [tcp[:, :3, 3]] + [tcp[e, :3, 3] + axis_length * tcp[e, :3, :3].T
                                     for e in range(robot.num_end_effectors)]
    tool_points += [t.position_world[None] for t in targets]
    tool_points = np.vstack(tool_points)
    shapes, report = [], None
    if collision_scene is not None:
        from .collision_shapes import obstacle_shapes, robot_shapes

        report = collision_scene.check(q)
        hit = set() if report.collision_free[0] else set(report.closest_pair[0])
        shapes = [(s, COLLIDING_COLOUR, 0.5) if s.body in hit else (s, BODY_COLOUR, 0.18)
                  for s in robot_shapes(collision_scene, q)]
        shapes += [(s, OBSTACLE_COLOUR, 0.35) for s in obstacle_shapes(collision_scene.obstacles)]
    whole = box(np.vstack([origins, tool_points] + [s.pose[:3, 3][None] for s, _, _ in shapes]), 0.05, 0.2)
    close = box(tool_points, 1.5 * axis_length, 2.0 * axis_length)

    fig = Figure(figsize=(14, 7.2))
    FigureCanvasAgg(fig)  # headless: no pyplot, no global backend
    height = 0.72 if shapes else 0.76  # room for the title's clearance line
    ax_whole = fig.add_axes((0.0, 0.13, 0.5, height), projection="3d")
    ax_close = fig.add_axes((0.5, 0.13, 0.5, height), projection="3d")

    def draw_line(ax, a, b, **style):
        ax.plot([a[0], b[0]], [a[1], b[1]], [a[2], b[2]], axlim_clip=True, **style)

    for ax, (centre, half), subtitle in (
            (ax_whole, whole, "whole robot"),
            (ax_close, close, "close-up of the end effectors")):
        for shape, colour, alpha in shapes:
            draw_shape(ax, shape, colour, alpha)
        for c, p in edges:
            draw_line(ax, origins[c], origins[p], color="0.45", lw=2.5, solid_capstyle="round")
        ax.scatter(*origins.T, s=10, color="0.25", depthshade=False, axlim_clip=True)
        ax.scatter(*origins[:1].T, s=60, marker="s", color="black", depthshade=False, axlim_clip=True)
        for e in range(robot.num_end_effectors):
            o = tcp[e, :3, 3]
            draw_line(ax, origins[index[robot.end_effector_links[e]]], o, color="0.45", lw=1.2, ls=":")
            for k in range(3):
                draw_line(ax, o, o + axis_length * tcp[e, :3, k], color=AXIS_COLOURS[k], lw=2.5)
            ax.text(*(o + np.array([0.0, 0.0, 0.4 * axis_length])), f"  {ee_names[e]}", fontsize=10,
                    weight="bold")
        for t in targets:
            p = t.position_world
            ax.scatter(*p[:, None], s=140, marker="*", color="#ff7f0e", edgecolor="black", linewidth=0.6,
                       depthshade=False)
            name = ee_names[t.ee_id] if t.ee_id < len(ee_names) else f"ee{t.ee_id}"
            if ax is ax_close:
                    ax.text(*(p - np.array([0.0, 0.0, 0.6 * axis_length])), f"  {name} target", fontsize=8,
                        color="#c85a00")
            rotation = t.rotation_world
            if rotation is not None:
                axes = [(rotation[:, k], TARGET_COLOURS[k]) for k in range(3)]
            elif t.direction_world is not None:
                axes = [(t.direction_world, "#ff7f0e")]
            else:
                axes = []
            for vector, colour in axes:
                draw_line(ax, p, p + 1.3 * axis_length * vector, color=colour, lw=2.0, ls="--")
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_zlim(centre[2] - half, centre[2] + half)
        ax.set_box_aspect((1, 1, 1), zoom=1.05)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.set_zlabel("z [m]")
        ax.view_init(elev=20, azim=-55)
        ax.set_title(subtitle, fontsize=10)

    handles = [Line2D([], [], color="0.45", lw=2.5, marker="o", markersize=3, markerfacecolor="0.25",
                      label="links (origins, URDF tree)"),
               Line2D([], [], color="black", marker="s", ls="", label=f"root '{robot.root_link}'")]
    handles += [Line2D([], [], color=AXIS_COLOURS[k], lw=2.5, label=f"TCP {'xyz'[k]} axis") for k in range(3)]
    if targets:
        handles.append(Line2D([], [], color="#ff7f0e", marker="*", markersize=12, markeredgecolor="black",
                              ls="", label="target position"))
        handles += [Line2D([], [], color=TARGET_COLOURS[k], lw=2.0, ls="--", label=f"target {'xyz'[k]} axis")
                    for k in range(3)]
        if any(t.mode == "axis" for t in targets):
            handles.append(Line2D([], [], color="#ff7f0e", lw=2.0, ls="--", label="target direction (axis)"))
    if shapes:
        from matplotlib.patches import Patch
        handles += [Patch(color=BODY_COLOUR, alpha=0.4, label="collision bodies"),
                    Patch(color=OBSTACLE_COLOUR, alpha=0.5, label="obstacles")]
        if not report.collision_free[0]:
            handles.append(Patch(color=COLLIDING_COLOUR, alpha=0.5, label="in collision"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=9, frameon=False)

    lines = [title or f"{robot.robot_name}: pose, TCP frames and targets"]
    if report is not None:
        pair = " – ".join(report.closest_pair[0])
        lines.append(("collision-free" if report.collision_free[0] else "IN COLLISION")
                     + f": clearance {1e3 * report.clearance[0]:.1f} mm ({pair})")
    if targets:
        lines.append("remaining error of the pose vs target — " + ";   ".join(
            _error_text(ee_names[t.ee_id] if t.ee_id < len(ee_names) else f"ee{t.ee_id}",
                        target_errors(tcp[t.ee_id], t)) for t in targets))
    fig.suptitle("\n".join(lines), fontsize=11)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def plot_solved_example(robot_name: str, path, seed: int = 2026,
                        max_position_error: float = 0.03) -> pathlib.Path:
    """Solve one random reachable full-pose candidate of bundled robot ``robot_name`` (as the
    benchmark draws them: FK of a random in-limit configuration, solved from the middle of the
    limits) and draw the solution with its targets. Returns the path written."""
    from .core import robo_solve_ik_direction_up_multi_batch
    from .core.kinematics import mid_range, random_in_limits
    from .core.targets import full_pose_candidates
    from .robots import bundled_robot, load_robot

    robot = load_robot(robot_name)
    robot.joint_q[:] = mid_range(robot)
    reachable = random_in_limits(robot, np.random.default_rng(seed), 8)
    candidates = full_pose_candidates(robot.tcp_transforms(reachable))
    result = robo_solve_ik_direction_up_multi_batch(robot, candidates, max_position_error=max_position_error)
    solved = np.flatnonzero(result.success)
    b = int(solved[0]) if len(solved) else 0  # the first solved one; else show the failure
    outcome = (f"solved in {int(result.iterations[b])} iterations" if result.success[b]
               else f"NOT solved ({result.stop_reason[b]})")
    names = [e.name for e in bundled_robot(robot_name).end_effectors]
    return plot_pose(robot, result.joint_q[b], path, candidates[b], ee_names=names,
                     title=f"{robot_name}: benchmark target {b} (seed {seed}) from mid-range, {outcome}")


def plot_collision_example(path, seed: int = 1, max_position_error: float = 0.03) -> pathlib.Path:
    """The dual-arm torso at a table (as in ``config/dual_arm_torso.yaml``) with a post where the
    least-motion solution of a target pair puts the left forearm: the collision-aware search's
    answer, drawn with the robot's collision bodies and the obstacles. The target pair is the
    TCP poses of a state near mid-range (``seed``). Returns the path written."""
    from .core import CollisionScene, Obstacle, robo_search_ik_direction_up
    from .core.kinematics import mid_range
    from .core.rotations import make_transform
    from .core.targets import full_pose_candidates
    from .robots import bundled_robot, load_robot

    robot = load_robot("dual_arm_torso")
    start = mid_range(robot)
    goal = np.clip(start + np.random.default_rng(seed).uniform(-0.4, 0.4, robot.num_dofs),
                   robot.lower_limits, robot.upper_limits)
    candidates = full_pose_candidates(robot.tcp_transforms(goal[None]))
    table = Obstacle.box((0.8, 1.2, 0.04), make_transform(None, (0.85, 0.0, 0.68)), name="table")
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path(), obstacles=[table])
    options = dict(max_position_error=max_position_error, num_seeds=4, max_rounds=20)
    robot.joint_q[:] = start
    least = robo_search_ik_direction_up(robot, candidates, **options).result.joint_q[0]
    elbow = robot.link_transforms(least.astype(np.float64), ["left_forearm_roll_link"])[0, :3, 3]
    scene.set_obstacles([table, Obstacle.sphere(0.06, make_transform(None, elbow), name="post")])
    blocked = scene.check(least)
    robot.joint_q[:] = start
    found = robo_search_ik_direction_up(robot, candidates, collision_scene=scene, **options)
    b = found.result.best_index
    outcome = (f"the collision-aware search's answer ({int(found.starts[0])} starts)" if b is not None
               else "no collision-free solution found")
    title = (f"dual_arm_torso: a post where the least-motion solution has the left forearm "
             f"(clearance {1e3 * blocked.clearance[0]:.0f} mm); {outcome}")
    return plot_pose(robot, found.result.joint_q[0], path, candidates[0], ee_names=["left", "right"],
                     title=title, collision_scene=scene)


if __name__ == "__main__":  # python -m direction_up_ik.plot docs/collision.png
    import sys

    print(plot_collision_example(sys.argv[1] if len(sys.argv) > 1 else "collision.png"))
