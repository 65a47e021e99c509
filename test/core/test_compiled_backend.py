"""The compiled (numba) backend against the numpy reference (``direction_up_ik.core.compiled``).

Both backends run the same algorithm; they differ only in rounding (numpy's
3x3 products go through BLAS, its systems through LAPACK; with the analytic Jacobian
the kernel also takes its own sin/cos and an L D L^T solve). On every robot below
and >= 200 random candidates (reachable and unreachable; full / axis / position
modes; TCP-convention, default and custom local axes; random active subsets,
bounds, roots and start states; tight and loose parameters) the test requires:

* identical success flags, stop reasons and iteration counts for >= 99% of the
  candidates (a mismatch can only come from a 1e-16 rounding difference
  flipping a comparison that sits on a tie; mismatches are printed);
* where those agree: ``joint_q`` within 1e-5, errors allclose, cost and
  best_index consistent;
* every success re-checked with the numpy FK, every joint within its bounds;
* all of this with the spec's forward-difference Jacobian and with the analytic one.

Skipped only when numba cannot be imported (it is in requirements/core.txt).
"""

from __future__ import annotations

import inspect
import time
from typing import List

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")

from direction_up_ik import (DirectionUpTarget, InputValidationError, NumericalFailure,  # noqa: E402
                             RobotKinematics, robo_solve_ik_direction_up_multi_batch)
from direction_up_ik.core import compiled  # noqa: E402
from direction_up_ik.core.compiled import api as kernel_api, fk as kernel_fk  # noqa: E402
from direction_up_ik.core.compiled import iteration as kernel_iteration, step as dls_step  # noqa: E402
from direction_up_ik.core.compiled import vector_math as kernel_math  # noqa: E402
from direction_up_ik.core import result as res  # noqa: E402
from direction_up_ik.core.problem import build_problem  # noqa: E402
from direction_up_ik.core.rotations import align_vector  # noqa: E402
from direction_up_ik.core.settings import JACOBIANS, SolverSettings  # noqa: E402
from direction_up_ik.core.backend import solve_problem  # noqa: E402
from direction_up_ik.core.targets import full_pose_candidates  # noqa: E402
from direction_up_ik.robots import bundled_robot, load_robot  # noqa: E402

from helpers import mid_range, random_in_limits, relay_never_started, targets_at  # noqa: E402

_LIMIT = "effort='1' velocity='1'"

#: A mimic joint on the TCP chain (perturbed poses by full FK in both backends), a
#: prismatic joint in the middle of the chain and a mimic finger off the chain.
MIMIC_URDF = f"""<robot name='mimic_arm'>
  <link name='base'/><link name='l1'/><link name='l2'/><link name='l3'/><link name='l4'/>
  <link name='l5'/><link name='tool'/><link name='finger'/>
  <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/>
    <origin xyz='0 0 0.2'/><axis xyz='0 0 1'/><limit lower='-2.8' upper='2.8' {_LIMIT}/></joint>
  <joint name='j2' type='revolute'><parent link='l1'/><child link='l2'/>
    <origin xyz='0 0 0.15' rpy='0.1 0 0'/><axis xyz='0 1 0'/><limit lower='-1.7' upper='1.7' {_LIMIT}/></joint>
  <joint name='j3' type='prismatic'><parent link='l2'/><child link='l3'/>
    <origin xyz='0 0 0.3'/><axis xyz='0 0 1'/><limit lower='0' upper='0.25' {_LIMIT}/></joint>
  <joint name='j4' type='revolute'><parent link='l3'/><child link='l4'/>
    <origin xyz='0.05 0 0.1'/><axis xyz='0 1 0'/><mimic joint='j2' multiplier='-0.6' offset='0.2'/>
    <limit lower='-3' upper='3' {_LIMIT}/></joint>
  <joint name='j5' type='revolute'><parent link='l4'/><child link='l5'/>
    <origin xyz='0 0 0.2' rpy='0 0.3 0'/><axis xyz='1 0 0'/><limit lower='-2.5' upper='2.5' {_LIMIT}/></joint>
  <joint name='j6' type='continuous'><parent link='l5'/><child link='tool'/>
    <origin xyz='0 0 0.1'/><axis xyz='0 0 1'/></joint>
  <joint name='jf' type='prismatic'><parent link='l5'/><child link='finger'/>
    <origin xyz='0 0.02 0.1'/><axis xyz='0 1 0'/><mimic joint='j3' multiplier='0.1'/>
    <limit lower='0' upper='0.04' {_LIMIT}/></joint>
</robot>"""

#: A gantry: three prismatic joints, then a three-axis wrist.
PRISMATIC_URDF = f"""<robot name='gantry'>
  <link name='base'/><link name='x'/><link name='y'/><link name='z'/><link name='w1'/>
  <link name='w2'/><link name='tool'/>
  <joint name='px' type='prismatic'><parent link='base'/><child link='x'/>
    <origin xyz='0 0 1'/><axis xyz='1 0 0'/><limit lower='-0.5' upper='0.5' {_LIMIT}/></joint>
  <joint name='py' type='prismatic'><parent link='x'/><child link='y'/>
    <axis xyz='0 1 0'/><limit lower='-0.4' upper='0.4' {_LIMIT}/></joint>
  <joint name='pz' type='prismatic'><parent link='y'/><child link='z'/>
    <origin rpy='3.14159 0 0'/><axis xyz='0 0 1'/><limit lower='0' upper='0.6' {_LIMIT}/></joint>
  <joint name='r1' type='revolute'><parent link='z'/><child link='w1'/>
    <origin xyz='0 0 0.1'/><axis xyz='0 0 1'/><limit lower='-3' upper='3' {_LIMIT}/></joint>
  <joint name='r2' type='revolute'><parent link='w1'/><child link='w2'/>
    <origin xyz='0 0 0.08'/><axis xyz='0 1 0'/><limit lower='-2' upper='2' {_LIMIT}/></joint>
  <joint name='r3' type='revolute'><parent link='w2'/><child link='tool'/>
    <origin xyz='0 0 0.06'/><axis xyz='0 0 1'/><limit lower='-3' upper='3' {_LIMIT}/></joint>
</robot>"""

TCP = np.array([[1, 0, 0, 0.0], [0, 1, 0, 0.01], [0, 0, 1, 0.05], [0, 0, 0, 1]], dtype=float)


def make_robot(name: str) -> RobotKinematics:
    if name == "mimic_arm":
        robot = RobotKinematics.from_urdf(MIMIC_URDF, ["tool"], [TCP])
        assert robot.kernel_arrays().mimic_on_tcp_chain
        return robot
    if name == "gantry":
        return RobotKinematics.from_urdf(PRISMATIC_URDF, ["tool"], [TCP])
    return load_robot(name)


ROBOTS = ("panda_like", "ur5_like", "dual_arm_torso", "mimic_arm", "gantry")

#: Parameter sets: spec defaults, tight, loose with the stall stop, 3 step scales and the damping
#: that fades with the residual (keywords of SolverSettings).
PARAMS = (
    dict(max_position_error=0.03),
    dict(max_position_error=0.005, max_iters=12, position_tol=2e-4, frame_tol_rad=2e-3,
         damping=1e-6, max_step_norm=0.05, position_weight=3.0, rotation_weight=0.5),
    dict(max_position_error=0.5, max_iters=64, position_tol=1e-2, frame_tol_rad=5e-2,
         damping=0.1, max_step_norm=1.0, position_weight=0.7, rotation_weight=2.0, stall_window=3,
         num_step_scales=3, damping_mode="residual", periodic_joints="nearest_turn"),
)
LOCAL_AXES = ("tcp", "default", "custom")
CUSTOM_LOCAL = (np.array([0.0, 0.6, 0.8]), np.array([1.0, 0.0, 0.0]))


def random_unit(rng) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def make_target(rng, e: int, tcp: np.ndarray, local_axes: str, mode: str, reachable: bool):
    """A target for EE ``e`` whose pose is ``tcp`` (4, 4) when reachable."""
    pos = tcp[:3, 3].copy()
    if local_axes == "tcp":
        ld, lu, local = np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0]), dict(
            local_direction=None, local_up=None)
    elif local_axes == "default":
        ld, lu, local = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), {}
    else:
        ld, lu = CUSTOM_LOCAL
        local = dict(local_direction=ld, local_up=lu)
    d, u = tcp[:3, :3] @ ld, tcp[:3, :3] @ lu
    if not reachable:
        if rng.random() < 0.5:
            pos = pos + rng.normal(size=3) * 2.0   # far away
        else:
            d, u = random_unit(rng), random_unit(rng)  # an orientation the arm may not reach
            pos = pos + rng.normal(size=3) * 0.05
    if mode == "position":
        return DirectionUpTarget(e, pos, None, None, **local)
    if mode == "axis":
        return DirectionUpTarget(e, pos, d, None, **local)
    return DirectionUpTarget(e, pos, d, u, **local)


def scenarios(robot: RobotKinematics, rng, per_config: int, jacobian: str = "finite_difference"):
    """Yield (kwargs of build_problem, q_start or None) over parameter / axes / active combinations."""
    d = robot.num_dofs
    configs = [(p, a) for p in range(len(PARAMS)) for a in LOCAL_AXES]
    for i, (p, axes) in enumerate(configs):
        start = mid_range(robot) + (rng.uniform(-0.2, 0.2, d) if i % 2 else 0.0)
        start = np.clip(start, robot.lower_limits, robot.upper_limits)
        robot.joint_q[:] = start
        active = None
        if i % 3 == 1:  # random subset
            active = tuple(sorted(rng.choice(d, size=max(1, d - 2), replace=False).tolist()))
        goals = random_in_limits(robot, rng, per_config)
        act = np.arange(d) if active is None else np.array(active)
        frozen = np.setdiff1d(np.arange(d), act)
        goals[:, frozen] = robot.joint_q[frozen]
        root = None
        if i % 4 == 3:
            root = np.eye(4)
            root[:3, 3] = (0.2, -0.1, 0.3)
            c, s = np.cos(0.4), np.sin(0.4)
            root[:2, :2] = [[c, -s], [s, c]]
        tcps = robot.tcp_transforms(goals, root)
        candidates = []
        for k in range(per_config):
            reachable = rng.random() < 0.6
            modes = rng.choice(["full", "full", "axis", "position"], size=robot.num_end_effectors)
            candidates.append(tuple(make_target(rng, e, tcps[k, e], axes, modes[e], reachable)
                                    for e in range(robot.num_end_effectors)))
        bounds = None
        if i % 5 == 4:  # narrowed bounds around the start
            lo = np.maximum(robot.lower_limits, robot.joint_q - 0.8)
            hi = np.minimum(robot.upper_limits, robot.joint_q + 0.8)
            bounds = (lo, hi)
        q_start = None
        if i % 3 == 2 or i == 4:  # random starts in the bounds, as the multi-seed search does
            lo = robot.lower_limits if bounds is None else bounds[0]
            hi = robot.upper_limits if bounds is None else bounds[1]
            lo = np.where(np.isfinite(lo), lo, -np.pi)
            hi = np.where(np.isfinite(hi), hi, np.pi)
            q_start = np.broadcast_to(robot.joint_q.astype(float), (per_config, d)).copy()
            q_start[:, act] = rng.uniform(lo[act], hi[act], size=(per_config, len(act)))
        settings = SolverSettings(**PARAMS[p], jacobian=jacobian)
        yield dict(robot=robot, candidates=candidates, active_dof_ids=active, device="cpu",
                   root_world_xform=root, settings=settings, joint_bounds=bounds), q_start


def check_success_with_numpy_fk(problem, q_start, result) -> None:
    """Successes meet the tolerances by an FK evaluated here with numpy; active joints stay in
    their bounds, inactive ones where they started."""
    robot, s = problem.robot, problem.settings
    a = problem.active
    q = result.joint_q.astype(np.float64)
    assert np.all(q[:, a] >= problem.lower[a]) and np.all(q[:, a] <= problem.upper[a])
    frozen = np.setdiff1d(np.arange(robot.num_dofs), a)
    start = problem.q_initial[None] if q_start is None else q_start
    assert np.array_equal(result.joint_q[:, frozen],
                          np.broadcast_to(start, q.shape)[:, frozen].astype(np.float32))
    tcp = robot.tcp_transforms(q, problem.root_world_xform)[:, problem.ee_ids]
    for b in np.flatnonzero(result.success):
        for e in range(problem.num_targets):
            rot, pos = tcp[b, e, :3, :3], tcp[b, e, :3, 3]
            assert np.linalg.norm(pos - problem.target_position[b, e]) < s.position_tol + 1e-12
            cur_d = rot @ problem.local_direction[e]
            t_d = problem.target_direction[b, e]
            if problem.has_direction[b, e]:
                angle = np.arctan2(np.linalg.norm(np.cross(cur_d, t_d)), cur_d @ t_d)
                assert angle < s.frame_tol_rad + 1e-12
            if problem.has_up[b, e]:
                up = align_vector(rot @ problem.local_up[e], cur_d, t_d)
                t_u = problem.target_up[b, e]
                angle = np.arctan2(np.linalg.norm(np.cross(up, t_u)), up @ t_u)
                assert angle < s.frame_tol_rad + 1e-12


def compare(problem, q_start, ref, out, mismatches: List[str]) -> int:
    """Compare two results of one problem; returns the candidates compared."""
    same = ((ref.success == out.success) & (np.array(ref.stop_reason) == np.array(out.stop_reason))
            & (ref.iterations == out.iterations))
    for b in np.flatnonzero(~same):
        mismatches.append(
            f"{problem.robot.robot_name} b={b}: numpy {ref.stop_reason[b]}/{ref.iterations[b]} it/"
            f"success {ref.success[b]} vs numba {out.stop_reason[b]}/{out.iterations[b]} it/success "
            f"{out.success[b]}; |dq| {np.abs(ref.joint_q[b] - out.joint_q[b]).max():.2e}, "
            f"pos err {ref.position_error[b].max():.3e} vs {out.position_error[b].max():.3e}")
    s = same
    assert out.joint_q.dtype == np.float32 and out.success.dtype == np.int32
    assert out.iterations.dtype == ref.iterations.dtype
    np.testing.assert_allclose(out.joint_q[s], ref.joint_q[s], rtol=0, atol=1e-5)
    for field in ("position_error", "direction_error", "up_error"):
        np.testing.assert_allclose(getattr(out, field)[s], getattr(ref, field)[s],
                                   rtol=1e-6, atol=1e-9, equal_nan=True, err_msg=field)
    np.testing.assert_allclose(out.cost[s], ref.cost[s], rtol=1e-6, atol=1e-9)
    assert np.isnan(out.direction_error).tolist() == np.isnan(ref.direction_error).tolist()
    if np.all(same):
        assert out.best_index == ref.best_index or \
            np.isclose(out.cost[out.best_index], ref.cost[ref.best_index], rtol=1e-6, atol=1e-12)
    assert out.active_dof_ids == ref.active_dof_ids
    check_success_with_numpy_fk(problem, q_start, out)
    check_success_with_numpy_fk(problem, q_start, ref)
    return len(same)


@pytest.fixture(scope="module", autouse=True)
def kernels_ready():
    """Compile (or load) the kernels once; later timings are the solver's."""
    compiled.warm_up()


@pytest.mark.parametrize("jacobian", JACOBIANS)
@pytest.mark.parametrize("name", ROBOTS)
def test_numba_matches_numpy(name, jacobian):
    robot = make_robot(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    mismatches: List[str] = []
    compared, successes = 0, 0
    for kwargs, q_start in scenarios(robot, rng, per_config=24, jacobian=jacobian):
        problem = build_problem(**kwargs)
        ref = solve_problem(problem, q_start, backend="numpy")
        out = solve_problem(problem, q_start, backend="numba")
        compared += compare(problem, q_start, ref, out, mismatches)
        successes += int(ref.success.sum())
    for line in mismatches[:10]:
        print("mismatch:", line)
    print(f"{name}: {compared} candidates, {successes} numpy successes, {len(mismatches)} mismatches")
    assert compared >= 200
    assert 0.1 * compared < successes < 0.9 * compared  # reachable and unreachable ones
    assert len(mismatches) <= 0.01 * compared, mismatches


def _snake(joints: int) -> RobotKinematics:
    """A chain of ``joints`` short revolute links, axes alternating z / y, one prismatic
    joint in the middle."""
    links = "".join(f"<link name='l{i}'/>" for i in range(joints + 1))
    parts = []
    for i in range(joints):
        kind, axis = ("prismatic", "1 0 0") if i == joints // 2 else ("revolute", "0 0 1" if i % 2 else "0 1 0")
        parts.append(f"""<joint name='j{i}' type='{kind}'><parent link='l{i}'/><child link='l{i + 1}'/>
          <origin xyz='0.02 0 0' rpy='0.1 0 0'/><axis xyz='{axis}'/>
          <limit lower='-0.5' upper='0.5' {_LIMIT}/></joint>""")
    return RobotKinematics.from_urdf(f"<robot name='snake'>{links}{''.join(parts)}</robot>", [f"l{joints}"])


def test_numba_matches_numpy_on_a_chain_longer_than_the_fk_trig_buffer():
    """FK takes every joint's cos/sin first for chains of up to kernel_fk.FK_TRIG_NODES nodes and
    on the way for longer ones; a longer chain still solves as the reference does."""
    robot = _snake(kernel_fk.FK_TRIG_NODES + 6)
    assert len(kernel_api.model_arrays(build_problem(robot, [(DirectionUpTarget(0, (0.5, 0, 0), None, None),)],
                                         settings=SolverSettings(max_position_error=0.03))).chain) \
        > kernel_fk.FK_TRIG_NODES
    rng = np.random.default_rng(70)
    mismatches: List[str] = []
    compared, successes = 0, 0
    for kwargs, q_start in scenarios(robot, rng, per_config=4, jacobian="analytic"):
        problem = build_problem(**kwargs)
        ref = solve_problem(problem, q_start, backend="numpy")
        out = solve_problem(problem, q_start, backend="numba")
        compared += compare(problem, q_start, ref, out, mismatches)
        successes += int(ref.success.sum())
    print(f"snake: {compared} candidates, {successes} numpy successes, {len(mismatches)} mismatches")
    assert compared >= 30 and successes > 0
    assert len(mismatches) <= 0.01 * compared, mismatches


def test_parallel_sweep_equals_serial_and_loop(dual_arm):
    """Threads change nothing; a batch equals one-candidate calls."""
    rng = np.random.default_rng(3)
    dual_arm.joint_q[:] = mid_range(dual_arm)
    tcps = dual_arm.tcp_transforms(random_in_limits(dual_arm, rng, 80))
    cands = full_pose_candidates(tcps)
    problem = build_problem(dual_arm, cands, None, "cpu", None, SolverSettings(max_position_error=0.03))
    serial = compiled.solve(problem, parallel=False)
    threaded = compiled.solve(problem, parallel=True)
    assert np.array_equal(serial.joint_q, threaded.joint_q)
    assert serial.stop_reason == threaded.stop_reason
    assert np.array_equal(serial.iterations, threaded.iterations)
    for b in range(0, 80, 9):
        single = compiled.solve(problem.select([b]))
        assert np.array_equal(single.joint_q[0], serial.joint_q[b])
        assert single.stop_reason[0] == serial.stop_reason[b]


def test_public_api_backend_switch(panda):
    panda.joint_q[:] = mid_range(panda)
    goal = panda.tcp_transforms(mid_range(panda) + 0.3)[0]
    cand = ((DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None),),)
    results = {b: robo_solve_ik_direction_up_multi_batch(panda, cand, max_position_error=0.03,
                                                         backend=b)
               for b in ("numpy", "numba", "auto")}
    assert results["numba"].success[0] == 1
    for r in results.values():
        np.testing.assert_allclose(r.joint_q, results["numpy"].joint_q, atol=1e-5)
        assert r.stop_reason == results["numpy"].stop_reason
    with pytest.raises(InputValidationError, match="backend"):
        robo_solve_ik_direction_up_multi_batch(panda, cand, max_position_error=0.03, backend="gpu")


def test_auto_falls_back_to_numpy_for_models_it_cannot_reproduce(panda, monkeypatch):
    class Custom(RobotKinematics):
        def tcp_poses(self, q, root_world_xform=None):
            return super().tcp_poses(q, root_world_xform)

    robot = Custom.from_urdf(str(bundled_robot("panda_like").urdf_path()), ["panda_hand"])
    goal = robot.tcp_transforms(mid_range(robot))[0]
    problem = build_problem(robot, ((DirectionUpTarget(0, goal[:3, 3], None, None),),),
                            settings=SolverSettings(max_position_error=0.03))
    assert not compiled.supports(problem)
    called = []
    monkeypatch.setattr(compiled, "solve", lambda *a, **k: called.append(1))
    solve_problem(problem)  # auto -> numpy
    assert called == []
    with pytest.raises(InputValidationError, match="does not support"):
        solve_problem(problem, backend="numba")
    monkeypatch.setenv("DIRECTION_UP_IK_BACKEND", "numpy")
    panda_problem = build_problem(panda, ((DirectionUpTarget(0, goal[:3, 3], None, None),),),
                                  settings=SolverSettings(max_position_error=0.03))
    solve_problem(panda_problem)  # the environment variable keeps auto on numpy
    assert called == []


def test_deadline_stops_both_backends_alike(panda):
    panda.joint_q[:] = mid_range(panda)
    tcps = panda.tcp_transforms(random_in_limits(panda, np.random.default_rng(1), 6))
    cands = full_pose_candidates(tcps)
    problem = build_problem(panda, cands, settings=SolverSettings(max_position_error=0.03))
    past = time.perf_counter() - 1.0
    for backend in ("numpy", "numba"):
        r = solve_problem(problem, deadline=past, backend=backend)
        assert all(s in (res.STOP_TIME_BUDGET, res.STOP_CONVERGED) for s in r.stop_reason)
        assert np.all(r.iterations == 0)
        later = solve_problem(problem, deadline=time.perf_counter() + 60.0, backend=backend)
        plain = solve_problem(problem, backend=backend)
        assert later.stop_reason == plain.stop_reason
        assert np.array_equal(later.joint_q, plain.joint_q)
    threaded = compiled.solve(problem, deadline=past, parallel=True)
    assert threaded.stop_reason == solve_problem(problem, deadline=past, backend="numpy").stop_reason


def test_deadline_reached_while_iterating():
    """A budget that runs out part-way stops the compiled solve between iterations."""
    robot = load_robot("dual_arm_torso")
    robot.joint_q[:] = mid_range(robot)
    tcps = robot.tcp_transforms(random_in_limits(robot, np.random.default_rng(2), 64))
    cands = [tuple(DirectionUpTarget(e, t[e, :3, 3] + 3.0, t[e, :3, 2], t[e, :3, 1], None, None)
                   for e in range(2)) for t in tcps]  # unreachable: they would run long
    problem = build_problem(robot, cands, settings=SolverSettings(max_position_error=0.03,
                                                                   max_iters=10_000))
    t0 = time.perf_counter()
    r = compiled.solve(problem, deadline=t0 + 0.05, parallel=False)
    elapsed = time.perf_counter() - t0
    # Unbounded work (10^4 iterations of 64 candidates) stops at the first check after the
    # deadline; the 0.95 s beyond it only absorb a loaded machine's scheduling.
    assert elapsed < 0.05 + 0.95
    running = [s for s in r.stop_reason if s == res.STOP_TIME_BUDGET]
    if running:  # some candidate was still iterating: it has done some work
        assert np.max(r.iterations) > 0


def test_no_active_joints(panda):
    goal = panda.tcp_transforms(mid_range(panda))[0]
    problem = build_problem(panda, ((DirectionUpTarget(0, goal[:3, 3] + 0.1, None, None),),),
                            active_dof_ids=(), settings=SolverSettings(max_position_error=0.03))
    ref = solve_problem(problem, backend="numpy")
    out = solve_problem(problem, backend="numba")
    assert out.stop_reason == ref.stop_reason == (res.STOP_NO_ACTIVE_JOINTS,)
    assert np.array_equal(out.joint_q, ref.joint_q)


def _huge_robot(origin: float) -> RobotKinematics:
    urdf = f"""<robot name='huge'><link name='base'/><link name='l1'/><link name='l2'/>
      <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/>
        <origin xyz='{origin} 0 0'/><axis xyz='0 0 1'/><limit lower='-3' upper='3' {_LIMIT}/></joint>
      <joint name='j2' type='revolute'><parent link='l1'/><child link='l2'/>
        <origin xyz='{origin} 0 0'/><axis xyz='0 1 0'/><limit lower='-3' upper='3' {_LIMIT}/></joint>
    </robot>"""
    return RobotKinematics.from_urdf(urdf, ["l2"])


@pytest.mark.parametrize("origin", [1e308, 1e200])
def test_numerical_failure_raised_by_both(origin):
    robot = _huge_robot(origin)
    cands = [(DirectionUpTarget(0, (0.5, 0.1 * k, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)),)
             for k in range(3)]
    problem = build_problem(robot, cands, settings=SolverSettings(max_position_error=0.03))
    errors = {}
    for backend in ("numpy", "numba"):
        with pytest.raises(NumericalFailure) as info:
            solve_problem(problem, backend=backend)
        errors[backend] = info.value
        assert isinstance(info.value, FloatingPointError)
    assert errors["numba"].candidates == errors["numpy"].candidates == (0, 1, 2)
    assert str(errors["numba"]) == str(errors["numpy"])
    with pytest.raises(NumericalFailure):
        compiled.solve(problem, parallel=True)


def test_numerical_failure_lists_only_the_offending_candidates(panda):
    """A target at 1.7e308 m makes only its own candidates' weighted residual overflow."""
    panda.joint_q[:] = mid_range(panda)
    goal = panda.tcp_transforms(mid_range(panda))[0]
    ok = (DirectionUpTarget(0, goal[:3, 3], goal[:3, 2], goal[:3, 1], None, None),)
    bad = (DirectionUpTarget(0, (1.7e308, 0.0, 0.0), goal[:3, 2], goal[:3, 1], None, None),)
    problem = build_problem(panda, [ok, bad, ok, bad],
                            settings=SolverSettings(max_position_error=0.03, position_weight=4.0))
    messages = set()
    for backend in ("numpy", "numba"):
        with pytest.raises(NumericalFailure) as info:
            solve_problem(problem, backend=backend)
        assert info.value.candidates == (1, 3)
        messages.add(str(info.value))
    assert len(messages) == 1


#: Two links of 1.3e154 m: unfolding the elbow (j2 towards 0) makes J^T J overflow (a
#: non-finite joint step), from elbow 2.25 in iteration 4, from 1.75 in iteration 1.
FOLDING_LINK = 1.3e154
FOLDING_URDF = f"""<robot name='folding'><link name='base'/><link name='l1'/><link name='l2'/>
  <link name='tip'/>
  <joint name='j1' type='revolute'><parent link='base'/><child link='l1'/><axis xyz='0 0 1'/>
    <limit lower='-3' upper='3' {_LIMIT}/></joint>
  <joint name='j2' type='revolute'><parent link='l1'/><child link='l2'/>
    <origin xyz='{FOLDING_LINK} 0 0'/><axis xyz='0 0 1'/><limit lower='-3' upper='3' {_LIMIT}/></joint>
  <joint name='tip' type='fixed'><parent link='l2'/><child link='tip'/>
    <origin xyz='{FOLDING_LINK} 0 0'/></joint>
</robot>"""


def _folding_batch(failing: dict, rows: int = 40, position_weight: float = 1.0):
    """(problem, starts) on the folding robot: ``rows`` candidates folded at elbow 3.0 with
    their target at that pose (they stop without overflowing), except ``failing`` {row:
    elbow start}, which reach for the elbow at 1.0 rad and overflow on the way; {row:
    None}: a target at 1.7e308 m (a non-finite start residual with ``position_weight``
    4; every reaching row then overflows in iteration 0). Starts are float32 values."""
    robot = RobotKinematics.from_urdf(FOLDING_URDF, ["tip"])

    def tip(elbow):
        return robot.tcp_transforms(np.array([[0.0, elbow]]))[0, 0, :3, 3]
    starts = np.tile([0.0, 3.0], (rows, 1))
    cands = [(DirectionUpTarget(0, tip(3.0), None, None),)] * rows
    for row, elbow in failing.items():
        if elbow is None:
            cands[row] = (DirectionUpTarget(0, (1.7e308, 0.0, 0.0), None, None),)
        else:
            starts[row, 1] = elbow
            cands[row] = (DirectionUpTarget(0, tip(1.0), None, None),)
    problem = build_problem(robot, cands, settings=SolverSettings(max_position_error=0.03,
                                                                  position_weight=position_weight))
    return problem, starts


@pytest.mark.parametrize("failing, weight, expected", [
    ({3: 2.25}, 1.0, (3,)),                     # alone: reported at its iteration 4
    ({3: 2.25, 37: 1.75}, 1.0, (37,)),          # a later block fails earlier: only it is reported
    ({3: 1.75, 37: 2.25}, 1.0, (3,)),           # the later block stops at the earlier failure
    ({3: 1.75, 21: 1.75, 37: 1.75}, 1.0, (3, 21, 37)),  # the same iteration in three blocks
    ({3: 1.75, 21: None, 37: None}, 4.0, (21, 37)),     # non-finite start residuals come first
])
def test_numerical_failures_across_blocks_are_those_of_one_pass(failing, weight, expected):
    """Without a deadline the kernel solves blocks of rows one after the other
    (``kernel_iteration.BLOCK_ROWS``); a numerical failure still names the candidates of the
    reference's single iteration-major pass: the earliest failing iteration over all
    rows, start states first."""
    assert kernel_iteration.BLOCK_ROWS < 20  # rows 3, 21 and 37 lie in three different blocks
    problem, starts = _folding_batch(failing, position_weight=weight)
    with pytest.raises(NumericalFailure) as ref:
        solve_problem(problem, starts, backend="numpy")
    assert ref.value.candidates == expected
    for parallel in (False, True):
        with pytest.raises(NumericalFailure) as out:
            compiled.solve(problem, starts, parallel=parallel)
        assert out.value.candidates == expected, parallel
        assert str(out.value) == str(ref.value)
    unharmed = np.setdiff1d(np.arange(40), list(failing))
    fine = compiled.solve(problem.select(unharmed), starts[unharmed])  # the others do not fail
    assert fine.iterations.max() < problem.settings.max_iters


def test_kernel_arrays_is_a_cached_read_only_view_of_the_model(panda):
    ka = panda.kernel_arrays()
    assert ka is panda.kernel_arrays()
    assert ka.node_rot.shape == (len(ka.node_parent), 3, 3) and not ka.node_rot.flags.writeable
    assert ka.dof_moves_tcp.shape == (panda.num_dofs, panda.num_end_effectors)
    assert not ka.mimic_on_tcp_chain


def test_warm_up_returns_seconds():
    assert compiled.warm_up() >= 0.0


def _relay_problem(robot, groups: int, seeds: int, seed: int):
    """groups targets x seeds random starts each (consecutive rows per target)."""
    rng = np.random.default_rng(seed)
    robot.joint_q[:] = mid_range(robot)
    goals = random_in_limits(robot, rng, groups)
    tcp = robot.tcp_transforms(goals)
    cands = full_pose_candidates(tcp)
    settings = SolverSettings(max_position_error=0.03, max_step_norm=1.0)
    problem = build_problem(robot, cands, None, "cpu", None, settings)
    cand = np.repeat(np.arange(groups), seeds)
    return problem.select(cand), random_in_limits(robot, rng, len(cand)), cand


@pytest.mark.parametrize("quota", [1, 2])
def test_relay_tries_a_groups_starts_in_turn_until_its_quota_converged(panda, quota):
    """The search's relay of seeds: a group's rows run one after another, each exactly its
    own solve (with its own max_iters), until quota of them converged; the rest never run.
    Identical on both backends and any thread count."""
    # 13 x 5 rows: the two-thread split (row 32) falls inside group 6, which must stay whole
    problem, starts, group = _relay_problem(panda, groups=13, seeds=5, seed=3)
    need = np.full(len(group), quota)
    alone = solve_problem(problem, starts, backend="numpy")  # every row on its own
    assert not np.any((alone.iterations == 0) & (alone.success == 1))  # no start is converged as given
    runs = {"numpy": solve_problem(problem, starts, backend="numpy", relay=(group, need)),
            "numba": compiled.solve(problem, starts, relay=(group, need), parallel=False),
            "numba threads": compiled.solve(problem, starts, relay=(group, need), parallel=True)}
    relayed = runs["numpy"]
    never = relay_never_started(alone, group, need)
    for i in range(len(group)):
        if never[i]:
            assert relayed.stop_reason[i] == res.STOP_SUPERSEDED
            assert relayed.iterations[i] == 0 and relayed.success[i] == 0
        else:
            assert relayed.stop_reason[i] == alone.stop_reason[i]
            assert relayed.iterations[i] == alone.iterations[i]
            np.testing.assert_array_equal(relayed.joint_q[i], alone.joint_q[i])
    cut_groups = len(np.unique(group[never]))
    handed_over = int(np.sum(~never & np.r_[False, group[1:] == group[:-1]]))
    assert cut_groups >= 3 and handed_over >= 3  # the relay did cut work, and seeds took over
    for name, other in runs.items():
        np.testing.assert_array_equal(other.success, relayed.success, err_msg=name)
        assert other.stop_reason == relayed.stop_reason, name
        np.testing.assert_array_equal(other.iterations, relayed.iterations, err_msg=name)
        np.testing.assert_allclose(other.joint_q, relayed.joint_q, atol=1e-5, err_msg=name)


def test_relay_start_that_is_already_converged_wins_at_once(panda):
    """A start meeting the tolerances as given counts from the outset: the row before it,
    running, stops as superseded before its first iteration (both backends)."""
    problem, starts, group = _relay_problem(panda, groups=6, seeds=3, seed=3)
    solved = solve_problem(problem, starts, backend="numpy")
    donor = int(np.flatnonzero(solved.success == 1)[0])
    row = 3 * group[donor] + 1  # the second start of the donor's target: its solution
    starts = starts.copy()
    starts[row] = solved.joint_q[donor]
    need = np.ones(len(group), dtype=np.int64)
    for out in (solve_problem(problem, starts, backend="numpy", relay=(group, need)),
                compiled.solve(problem, starts, relay=(group, need), parallel=False)):
        first = row - 1
        assert out.stop_reason[row] == res.STOP_CONVERGED and out.iterations[row] == 0
        assert out.stop_reason[first] == res.STOP_SUPERSEDED and out.iterations[first] == 0
        assert out.stop_reason[row + 1] == res.STOP_SUPERSEDED


def test_relay_at_a_passed_deadline_stops_the_waiting_starts_too(panda):
    problem, starts, group = _relay_problem(panda, groups=3, seeds=3, seed=3)
    need = np.ones(len(group), dtype=np.int64)
    past = time.perf_counter() - 1.0
    for out in (solve_problem(problem, starts, past, backend="numpy", relay=(group, need)),
                compiled.solve(problem, starts, past, relay=(group, need), parallel=False)):
        assert out.stop_reason == (res.STOP_TIME_BUDGET,) * len(group)
        np.testing.assert_array_equal(out.iterations, 0)


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    """The kernel's sums (squared residuals, step norms, costs) in numpy's pairwise order,
    also past 128 values, where the tree walk keeps its stack in the frame
    (``stack_array``: the kernel runs without numba's runtime, so it cannot allocate)."""
    @numba.njit(_nrt=False)
    def kernel_sum(x, start, n):
        return kernel_math.pairwise_sum(x, start, n)

    rng = np.random.default_rng(11)
    sizes = [*range(0, 140), 255, 256, 257, 1000, 1031, 4096, 65537]
    for n in sizes:
        x = rng.standard_normal(n + 3) * 10.0 ** rng.uniform(-8, 8, n + 3)  # order matters
        for start in (0, 3):
            assert kernel_sum(x, start, n) == np.sum(x[start:start + n]), (n, start)
    # a left-to-right sum differs from numpy's for such values: the test can tell
    x = rng.standard_normal(1000) * 10.0 ** rng.uniform(-8, 8, 1000)
    assert sum(x.tolist()) != np.sum(x)


def test_the_solve_loop_is_compiled_without_numbas_runtime():
    """``solve_rows`` runs with no reference counting (``_nrt=False``) and without the GIL: with
    numba's runtime every array view and call in the loop paid an ``NRT_incref``/``decref``
    call (1.3-1.5 x the time, ``scripts/profile_kernel.py``). A configuration guard: the
    speed itself is measured by the benchmarks, not here."""
    options = kernel_iteration.solve_rows.targetoptions
    assert options.get("_nrt") is False and options.get("nogil") is True
    assert kernel_iteration.run_serial.targetoptions.get("nogil") is True


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18,
                    reason="the reference sin/cos need an extended long double (x86-64)")
def test_own_sincos_is_within_one_and_a_half_ulp():
    """The kernel's sin/cos (``Config.fast_math``) against extended-precision ones: within
    1.5 ulp of the exact value on |x| < 100 rad, also next to the zeros of sin and cos
    (multiples of pi/4), where a two-part reduction by pi/2 was off by 6e5 ulp; libm's
    values beyond that range and for non-finite angles."""
    @numba.njit
    def kernel_sincos(x, s, c):
        for i in range(x.shape[0]):
            s[i], c[i] = kernel_math.own_sincos(x[i])

    rng = np.random.default_rng(3)
    quarter = np.arange(-127, 128) * (np.pi / 4)
    x = np.concatenate([rng.uniform(-2 * np.pi, 2 * np.pi, 200_000), rng.uniform(-100, 100, 100_000),
                        quarter, np.nextafter(quarter, np.inf), [0.0, -0.0, 1e-300, -5e-324]])
    s, c = np.empty_like(x), np.empty_like(x)
    kernel_sincos(x, s, c)
    exact = x.astype(np.longdouble)
    for mine, ref in ((s, np.sin(exact)), (c, np.cos(exact))):
        ulps = np.abs(mine.astype(np.longdouble) - ref) / np.spacing(np.abs(ref.astype(np.float64)))
        assert float(ulps.max()) <= 1.5, x[np.argmax(ulps)]
    far = np.array([100.0, -1234.5, 1e7, np.inf, -np.inf, np.nan])
    s, c = np.empty_like(far), np.empty_like(far)
    kernel_sincos(far, s, c)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(s, np.sin(far))
        np.testing.assert_array_equal(c, np.cos(far))


def test_ldl_solve_agrees_with_lu_and_declines_a_matrix_that_is_not_positive_definite():
    """The step's L D L^T solve (``Config.fast_math``) gives numpy's solution of damped
    normal equations to rounding; an indefinite matrix makes it return False, and the
    limited DLS step then still solves by LU, with the same step as the LU-only step.

    Runs the helpers' source as plain Python (it is what numba compiles; two test kernels
    compiled here were this module's slowest part, docs/performance.md). The compiled L D L^T path is
    checked against numpy by test_numba_matches_numpy's analytic cases, whose kernels solve
    by it."""
    def kernel_ldl(a, x):
        return dls_step.ldl_sized(a, x, a.shape[0])

    def kernel_step(jac, r, q, lower, upper, ldl, step, fixed, damping):
        a = jac.shape[0]
        return dls_step.limited_dls_step(damping, 1.5, np.arange(a), lower, upper, jac, r, q, np.empty((a, a)),
                                     np.empty(a), step, np.empty((a, a)), np.empty(a), np.empty(a), fixed,
                                     np.empty(max(a, r.shape[0])), ldl)

    rng = np.random.default_rng(8)
    clamped = 0
    for trial in range(300):
        a = (6, 7, 14)[trial % 3]
        jac = rng.standard_normal((a, 9 * (1 + a // 14))) * rng.uniform(0.01, 3.0)
        r = rng.standard_normal(jac.shape[1]) * rng.uniform(1e-3, 1.0)
        h = jac @ jac.T + 1e-3 * np.eye(a)
        g = -(jac @ r)
        # every 4th system made indefinite (a negative "damping" between two eigenvalues):
        # L D L^T declines it and the step falls back to LU
        damping = 1e-3 if trial % 4 else -float(np.median(np.linalg.eigvalsh(jac @ jac.T)))
        x = g.copy()
        assert kernel_ldl(h.copy(), x)
        np.testing.assert_allclose(x, np.linalg.solve(h, g), rtol=1e-9, atol=1e-9 * np.abs(x).max())
        q = rng.uniform(-1.0, 1.0, a)
        lower, upper = q - rng.uniform(0.05, 2.0, a), q + rng.uniform(0.05, 2.0, a)
        steps, fixes = [], []
        if damping < 0.0:
            assert not kernel_ldl(jac @ jac.T + damping * np.eye(a), g.copy())
        for ldl in (True, False):
            step, fixed = np.empty(a), np.zeros(a, dtype=np.bool_)
            assert kernel_step(jac, r, q, lower, upper, ldl, step, fixed, damping)
            steps.append(step)
            fixes.append(fixed.copy())
        np.testing.assert_array_equal(fixes[0], fixes[1])
        np.testing.assert_allclose(steps[0], steps[1], rtol=1e-8, atol=1e-12)
        clamped += bool(fixes[0].any())
    assert 30 < clamped < 270  # both the plain solve and the clamped re-solves ran
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert not kernel_ldl(indefinite.copy(), np.ones(2))
    assert kernel_ldl(np.array([[4.0, 2.0], [2.0, 3.0]]), np.ones(2))


def _sized_solver(size: int):
    """A small compiled function solving with the step's L D L^T and LU at ``size`` known when
    compiled (a constant, as ``limited_dls_step`` passes for ``FIXED_STEP_SIZES``) and at the
    size read at run time, into two outputs each."""
    from numba import njit

    ldl, lu = dls_step.ldl_sized, dls_step.lu_sized

    @njit
    def solve_both(mats, rhs, known, runtime, n):
        for m in range(mats.shape[0]):
            for out in range(4):
                a, x = mats[m].copy(), rhs[m].copy()
                if out == 0:
                    ldl(a, x, size)
                    known[m, 0] = x
                elif out == 1:
                    ldl(a, x, n)
                    runtime[m, 0] = x
                elif out == 2:
                    lu(a, x, size)
                    known[m, 1] = x
                else:
                    lu(a, x, n)
                    runtime[m, 1] = x
    return solve_both


def test_the_step_compiled_for_known_sizes_keeps_the_bits_of_runtime_sizes():
    """``limited_dls_step`` solves the systems of ``FIXED_STEP_SIZES`` by code compiled with their
    size as a constant, which the compiler unrolls; it must not reorder the arithmetic: L D L^T
    and LU give the same bits as the same helpers with the size read at run time."""
    branches = inspect.getsource(dls_step.limited_dls_step)
    for a, n in dls_step.FIXED_STEP_SIZES:  # the list names the branches that exist
        assert f"if a == {a} and n == {n}:" in branches and f"ldl, {a}, {n})" in branches, (a, n)
    rng = np.random.default_rng(3)
    for size in sorted({a for a, _ in dls_step.FIXED_STEP_SIZES}):
        jac = rng.standard_normal((64, size, 9)) * rng.uniform(0.01, 3.0, (64, 1, 1))
        mats = np.einsum("mik,mjk->mij", jac, jac) + 1e-3 * np.eye(size)
        rhs = rng.standard_normal((64, size))
        known, runtime = np.empty((64, 2, size)), np.empty((64, 2, size))
        _sized_solver(size)(mats, rhs, known, runtime, size)
        np.testing.assert_array_equal(known, runtime)
        np.testing.assert_allclose(known[:, 0], np.linalg.solve(mats, rhs[..., None])[..., 0], rtol=1e-6,
                                   atol=1e-9)


def test_step_damping_of_both_backends_is_min_of_damping_and_the_residual_with_a_floor():
    """damping_mode="residual": the damping of a step is min(damping, max(E, 1e-6 damping)) in
    the kernel (``dls_step.step_damping``) and the reference (``ReferenceSolver.damping``), the floor
    included (it keeps J^T J + damping I positive definite where E is next to zero at a
    singular pose); "constant" is the damping itself."""
    from direction_up_ik.core.settings import RESIDUAL_DAMPING_FLOOR
    from direction_up_ik.core.solver import ReferenceSolver

    @numba.njit
    def kernel(residual, damping, floor, ssr):
        return dls_step.step_damping(residual, damping, floor, ssr)

    robot = load_robot("panda_like")
    ssr = np.array([0.0, 1e-30, 1e-12, 1e-9, 2.5e-7, 1e-5, 1e-3, 0.5, 40.0])
    for damping in (1e-3, 0.1):
        floor = RESIDUAL_DAMPING_FLOOR * damping
        expected = np.minimum(damping, np.maximum(ssr, floor))
        assert expected[0] == expected[2] == floor and expected[5] == 1e-5 and expected[-1] == damping
        assert [kernel(True, damping, floor, e) for e in ssr] == expected.tolist()
        assert [kernel(False, damping, floor, e) for e in ssr] == [damping] * len(ssr)
        for mode, want in (("residual", expected), ("constant", np.full(len(ssr), damping))):
            settings = SolverSettings(max_position_error=0.03, damping=damping, damping_mode=mode)
            problem = build_problem(robot, [targets_at(robot, mid_range(robot))], None, "cpu", None, settings)
            got = np.broadcast_to(ReferenceSolver(problem).damping(ssr), (len(ssr), 1, 1)).reshape(-1)
            np.testing.assert_array_equal(got, want)


def test_every_solve_and_search_calls_the_kernels_with_one_signature(ur5, panda):
    """A second signature of an entry point is a second compile (or cache load) at run time:
    solves and searches with and without whole-turn joints, spec and search settings, one
    target and a batch, must all pass the same argument types."""
    from direction_up_ik import robo_search_ik_direction_up, robo_solve_ik_direction_up_multi_batch
    from direction_up_ik.core.compiled import iteration, search_rounds
    for robot in (ur5, panda):
        robot.joint_q[:] = mid_range(robot)
        cands = [targets_at(robot, q) for q in random_in_limits(robot, np.random.default_rng(1), 40)]
        for batch in (cands[:1], cands):
            robo_solve_ik_direction_up_multi_batch(robot, batch, max_position_error=0.03, backend="numba")
            robo_search_ik_direction_up(robot, batch, max_position_error=0.03, num_seeds=2, max_rounds=2)
            robo_search_ik_direction_up(robot, batch, max_position_error=0.03, num_seeds=2, time_budget=1.0)
    assert len(iteration.run_serial.signatures) == 1, iteration.run_serial.signatures
    assert len(search_rounds.run_search.signatures) == 1, search_rounds.run_search.signatures
