"""The GetPositionIK bridge as MoveIt calls it (issue 29): figures for docs/performance.md.

Requests are shaped as srv_kinematics_plugin (jazzy) sends them -- ``pose_stamped`` +
``ik_link_name`` in the group's base frame, the current state as seed, ``avoid_collisions``
true, timeout 0 (so the group's ``kinematics_solver_timeout`` is the budget) -- and served by
``groups.solve_position_ik``, the node's bridge without ROS transport. Per group of the bundled
``config/*_kinematics.yaml`` (single-tip groups):

* precision: random reachable poses (FK of random states, seeded from other random states), the
  share of answers within MoveGroupInterface's default goal tolerances (1e-4 m, 1e-3 rad; judged
  by an FK model built separately from the solver's), with the spec's precision (1e-3 m /
  1e-2 rad, the front end's default before issue 29) and with the front end's default now;
* reach: random positions uniform in a ball of twice the chain's reach bound, random
  orientations: how many are not solved, how many of those are answered by the bound, and the
  time of both kinds of answer; and how many of the reachable poses above the bound rejected;
* request forms: the same reachable poses as ``pose_stamped`` + ``ik_link_name``, as
  ``pose_stamped_vector`` without ``ik_link_names``, and as ``ik_link_names`` with a stale
  ``ik_link_name``.

    python benchmarks/bench_moveit.py [--poses 300] [--far 300] [--seed 29] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from types import SimpleNamespace

import numpy as np
from scipy.spatial.transform import Rotation

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from direction_up_ik.core import RobotKinematics, warm_up_backend  # noqa: E402
from direction_up_ik.core.kinematics import random_in_limits  # noqa: E402
from direction_up_ik.groups import MoveItErrorCode, load_kinematics_yaml, make_group_solvers, solve_position_ik  # noqa: E402
from direction_up_ik.robots import bundled_robot  # noqa: E402

ROBOTS = ("panda_like", "ur5_like", "dual_arm_torso")
MOVEIT_POSITION_TOL, MOVEIT_ORIENTATION_TOL = 1e-4, 1e-3
SPEC_PRECISION = {"position_tol": 1e-3, "frame_tol_rad": 1e-2}


def _pose(xform):
    x, y, z, w = Rotation.from_matrix(xform[:3, :3]).as_quat()
    return SimpleNamespace(position=SimpleNamespace(x=xform[0, 3], y=xform[1, 3], z=xform[2, 3]),
                           orientation=SimpleNamespace(x=x, y=y, z=z, w=w))


def _stamped(pose, frame):
    return SimpleNamespace(header=SimpleNamespace(frame_id=frame), pose=pose)


def _request(form, group, names, seed, pose, tip, base):
    """One PositionIKRequest-shaped object: "single" (srv_kinematics_plugin), "vector" (no
    ik_link_names) or "stale" (ik_link_names with a stale ik_link_name)."""
    ik = SimpleNamespace(group_name=group, robot_state=SimpleNamespace(joint_state=SimpleNamespace(
        name=list(names), position=list(seed))), avoid_collisions=True, ik_link_name=tip,
        pose_stamped=_stamped(pose, base), ik_link_names=[], pose_stamped_vector=[],
        timeout=SimpleNamespace(sec=0, nanosec=0))
    if form == "vector":
        ik.ik_link_name, ik.pose_stamped_vector = "", [_stamped(pose, base)]
    elif form == "stale":
        ik.ik_link_name, ik.ik_link_names, ik.pose_stamped_vector = "stale_link", [tip], [_stamped(pose, base)]
    return ik


def _with_precision(groups, precision):
    return {name: dataclasses.replace(g, settings=dataclasses.replace(g.settings, **precision))
            for name, g in groups.items()}


def _percentiles(values):
    if not values:
        return None
    v = 1e3 * np.asarray(values)
    return {"median_ms": round(float(np.median(v)), 3), "p95_ms": round(float(np.percentile(v, 95)), 3),
            "max_ms": round(float(v.max()), 3)}


def run_group(robot, name, solvers, spec_solvers, poses, far, rng):
    solver = solvers[name]
    urdf = bundled_robot(robot).urdf_path().read_text()
    tip, base, names = solver.get_link_names()[0], solver.get_base_frame(), solver.get_joint_names()
    model = RobotKinematics.from_urdf(urdf, [tip], root_link=base)  # the judge: no TCP offsets configured
    index = [model.joint_names.index(n) for n in names]
    qs = random_in_limits(model, rng, 2 * poses)
    goals = model.tcp_transforms(qs[:poses])
    out = {"group": f"{robot}/{name}", "budget_s": solver.config.timeout}

    def within(answer, goal):
        q = np.array(model.joint_q, dtype=np.float64)
        q[index] = answer.positions
        got = model.tcp_transforms(q[None])[0, 0]
        angle = Rotation.from_matrix(got[:3, :3].T @ goal[:3, :3]).magnitude()
        return np.linalg.norm(got[:3, 3] - goal[:3, 3]) <= MOVEIT_POSITION_TOL and angle <= MOVEIT_ORIENTATION_TOL

    for label, group_solvers in (("spec_precision", spec_solvers), ("moveit_precision", solvers)):
        for form in (("single", "vector", "stale") if label == "moveit_precision" else ("single",)):
            solved = inside = bounded = 0
            times = []
            for goal, start in zip(goals, qs[poses:]):
                ik = _request(form, name, names, start[index], _pose(goal[0]), tip, base)
                t0 = time.perf_counter()
                answer = solve_position_ik(group_solvers, ik)
                times.append(time.perf_counter() - t0)
                bounded += "beyond the chain's reach" in answer.message
                if answer.error_code == MoveItErrorCode.SUCCESS:
                    solved += 1
                    inside += bool(within(answer, goal[0]))
            out[f"{label}/{form}"] = {"poses": poses, "solved": solved, "within_moveit_tolerances": inside,
                                      "rejected_by_reach_bound": bounded, "time": _percentiles(times)}

    bound = float(solver.reach_bounds()[0])
    directions = rng.normal(size=(far, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    radii = 2 * bound * rng.random(far) ** (1 / 3)  # uniform in the ball of radius 2 x bound
    rotations = Rotation.random(far, random_state=rng.integers(2 ** 31)).as_matrix()
    early, searched = [], []
    solved = 0
    for position, rot, start in zip(directions * radii[:, None], rotations, random_in_limits(model, rng, far)):
        xform = np.eye(4)
        xform[:3, :3], xform[:3, 3] = rot, position
        ik = _request("single", name, names, start[index], _pose(xform), tip, base)
        t0 = time.perf_counter()
        answer = solve_position_ik(solvers, ik)
        elapsed = time.perf_counter() - t0
        if answer.error_code == MoveItErrorCode.SUCCESS:
            solved += 1
        elif "beyond the chain's reach" in answer.message:
            early.append(elapsed)
        else:
            searched.append(elapsed)
    out["random_ball"] = {"targets": far, "reach_bound_m": round(bound, 4), "solved": solved,
                          "unsolved": len(early) + len(searched), "answered_by_bound": len(early),
                          "bound_time": _percentiles(early), "searched_time": _percentiles(searched)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--poses", type=int, default=300, help="reachable poses per group")
    parser.add_argument("--far", type=int, default=300, help="random-ball targets per group")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    warm_up_backend()
    rng = np.random.default_rng(args.seed)
    results = []
    for robot in ROBOTS:
        urdf = bundled_robot(robot).urdf_path().read_text()
        groups = load_kinematics_yaml(ROOT / "config" / f"{robot}_kinematics.yaml")
        solvers = make_group_solvers(urdf, groups)
        spec_solvers = make_group_solvers(urdf, _with_precision(groups, SPEC_PRECISION))
        for name, solver in solvers.items():
            if len(solver.get_link_names()) == 1:
                result = run_group(robot, name, solvers, spec_solvers, args.poses, args.far, rng)
                results.append(result)
                print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
