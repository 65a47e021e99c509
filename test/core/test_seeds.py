"""Seed library of the multi-seed search (direction_up_ik.core.seeds)."""

import numpy as np
import pytest

from direction_up_ik import (DirectionUpTarget, InputValidationError, JointLimitError, RobotKinematics,
                             robo_search_ik_direction_up, robo_solve_ik_direction_up_multi_batch)
from direction_up_ik.core import warm_up_search
from helpers import random_configurations, reachable_candidates
from direction_up_ik.core import search as search_module
from direction_up_ik.core import seeds
from direction_up_ik.core.problem import build_problem, periodic_coordinates
from direction_up_ik.core.settings import SEARCH_SOLVER_DEFAULTS
from direction_up_ik.core.settings import solver_settings
from direction_up_ik.core.backend import solve_problem

from helpers import mid_range, targets_at

MPE = 0.03


def _problem(robot, candidates, active_dof_ids=None, joint_bounds=None):
    settings = solver_settings(max_position_error=MPE, **SEARCH_SOLVER_DEFAULTS)
    return build_problem(robot, candidates, active_dof_ids, "cpu", None, settings, joint_bounds=joint_bounds)


def _mixed_modes(robot, n, rng):
    """n candidates (one slot) at random reachable poses: full, axis and position modes in turn."""
    out = []
    tcp = robot.tcp_transforms(random_configurations(robot, rng, n))
    for i, t in enumerate(tcp[:, 0]):
        rot, pos = t[:3, :3], t[:3, 3]
        if i % 3 == 0:
            out.append((DirectionUpTarget(0, pos, rot[:, 2], rot[:, 1], None, None),))
        elif i % 3 == 1:
            out.append((DirectionUpTarget(0, pos, rot[:, 2], None, None, None),))
        else:
            out.append((DirectionUpTarget(0, pos, None, None, None, None),))
    return out


def test_library_states_are_in_bounds_and_keep_the_inactive_joints(dual_arm):
    q = mid_range(dual_arm)
    q[np.isnan(q)] = 0.0
    dual_arm.joint_q[:] = q
    active = tuple(range(1, dual_arm.num_dofs))  # coordinate 0 (the torso) stays
    problem = _problem(dual_arm, [targets_at(dual_arm, q)], active)
    library = seeds.SeedLibrary(problem, size=512)
    assert library.q.shape == (512, dual_arm.num_dofs) and len(library) == 512
    np.testing.assert_array_equal(library.q[:, 0], problem.q_initial[0])
    lo, hi = seeds.library_bounds(problem)
    a = problem.active
    assert np.all(library.q[:, a] >= lo) and np.all(library.q[:, a] <= hi)
    continuous = ~np.isfinite(dual_arm.upper_limits[a])
    assert continuous.any()  # the wrist rolls: drawn in [-pi, pi]
    np.testing.assert_array_equal(lo[continuous], -np.pi)
    np.testing.assert_array_equal(hi[continuous], np.pi)
    # The stored poses are the FK of the states; a slot's axes are its local axes turned by them.
    rot, pos = dual_arm.tcp_poses(library.q[:5])
    np.testing.assert_allclose(library.tcp_rot[:5], rot, atol=1e-12)
    np.testing.assert_allclose(library.tcp_pos[:5], pos, atol=1e-12)
    position, direction, up = library.slot_axes(problem)
    rot = rot[:, problem.ee_ids]  # (5, E, 3, 3); TCP convention: +Z working axis, +Y up
    np.testing.assert_allclose(position[:5], pos[:, problem.ee_ids], atol=1e-12)
    np.testing.assert_allclose(direction[:5], rot[..., 2], atol=1e-12)
    np.testing.assert_allclose(up[:5], rot[..., 1], atol=1e-12)


def test_the_library_near_the_limits_puts_most_bounded_joints_in_a_band_at_a_bound(dual_arm):
    q = mid_range(dual_arm)
    q[np.isnan(q)] = 0.0
    dual_arm.joint_q[:] = q
    problem = _problem(dual_arm, [targets_at(dual_arm, q)])
    library = seeds.limit_library_for(problem)
    assert len(library) == seeds.LIMIT_LIBRARY_SIZE
    assert seeds.limit_library_for(problem) is library and seeds.library_for(problem) is not library
    lo, hi = seeds.library_bounds(problem)
    assert np.all(library.q >= lo) and np.all(library.q <= hi)
    band = seeds.LIMIT_BAND * (hi - lo)
    at_lower, at_upper = library.q <= lo + band, library.q >= hi - band
    bounded = np.isfinite(dual_arm.upper_limits)
    assert bounded.any() and not bounded.all()  # the wrist rolls are continuous: uniform draws
    # Per bounded joint: LIMIT_PROBABILITY in a band, plus the uniform draws that fall in one.
    expected = seeds.LIMIT_PROBABILITY + (1.0 - seeds.LIMIT_PROBABILITY) * 2.0 * seeds.LIMIT_BAND
    in_band = (at_lower | at_upper).mean(axis=0)
    np.testing.assert_allclose(in_band[bounded], expected, atol=0.03)
    np.testing.assert_allclose(at_lower.mean(axis=0)[bounded], expected / 2, atol=0.03)
    np.testing.assert_allclose(in_band[~bounded], 2.0 * seeds.LIMIT_BAND, atol=0.03)
    uniform = seeds.library_for(problem)
    np.testing.assert_allclose(((uniform.q <= lo + band) | (uniform.q >= hi - band)).mean(axis=0),
                               2.0 * seeds.LIMIT_BAND, atol=0.03)


def test_nearest_ranks_match_a_brute_force_search_per_constraint_pattern(panda):
    panda.joint_q[:] = mid_range(panda)
    candidates = _mixed_modes(panda, 12, np.random.default_rng(4))
    problem = _problem(panda, candidates)
    library = seeds.SeedLibrary(problem, size=300)
    rows = np.array([5, 0, 7, 1, 2, 9])
    got = library.nearest(problem, rows, first=3, count=4)
    tcp = panda.tcp_transforms(library.q)[:, 0]  # (M, 4, 4), TCP convention: +Z working, +Y up
    for row, ranks in zip(rows, got):
        (target,) = candidates[row]
        d = np.sum((tcp[:, :3, 3] - target.position_world) ** 2, axis=-1)
        mode = row % 3
        if mode in (0, 1):
            z = np.asarray(target.direction_world) / np.linalg.norm(target.direction_world)
            d = d + seeds.AXIS_SCALE ** 2 * np.sum((tcp[:, :3, 2] - z) ** 2, axis=-1)
        if mode == 0:
            d = d + seeds.AXIS_SCALE ** 2 * np.sum((tcp[:, :3, 1] - problem.target_up[row, 0]) ** 2, axis=-1)
        np.testing.assert_array_equal(ranks, np.argsort(d, kind="stable")[3:7])
    assert library.nearest(problem, rows[:0], 0, 2).shape == (0, 2)
    # The panda's joints span less than a turn: its seeds are the library states as they are.
    np.testing.assert_array_equal(library.seeds(problem, rows, 3, 4), library.q[got.reshape(-1)])


def test_the_compiled_scan_ranks_like_the_tree(panda, dual_arm):
    pytest.importorskip("numba", reason="the scan is compiled with numba (requirements/core.txt)")
    for robot, candidates in ((panda, _mixed_modes(panda, 30, np.random.default_rng(21))),
                              (dual_arm, reachable_candidates(dual_arm, random_configurations(
                                  dual_arm, np.random.default_rng(22), 12)))):
        robot.joint_q[:] = np.clip(0.0, robot.lower_limits, robot.upper_limits)
        problem = _problem(robot, candidates)
        library = seeds.library_for(problem)
        rows = np.arange(len(candidates))[::-1]
        for first, count in ((0, 1), (0, 7), (5, 3)):
            scanned = library.nearest(problem, rows, first, count, method="scan")
            np.testing.assert_array_equal(scanned, library.nearest(problem, rows, first, count, method="tree"))
        # "auto" scans few candidates and queries the tree for many: the same ranks.
        np.testing.assert_array_equal(library.nearest(problem, rows[:seeds.SCAN_ROWS], 0, 4),
                                      library.nearest(problem, rows[:seeds.SCAN_ROWS], 0, 4, method="tree"))
    with pytest.raises(InputValidationError, match=r"method: must be one of \['auto', 'scan', 'tree'\], got 'kd'"):
        library.nearest(problem, rows, 0, 1, method="kd")


def test_auto_scans_few_candidates_or_many_features_and_queries_the_tree_otherwise(panda, dual_arm):
    pytest.importorskip("numba", reason="the scan is compiled with numba (requirements/core.txt)")
    # panda full poses: 9 features; dual arm: 18 (> TREE_MAX_FEATURES), where a tree prunes little.
    for robot, n, tree_expected in ((panda, 30, True), (panda, seeds.SCAN_ROWS, False), (dual_arm, 30, False)):
        robot.joint_q[:] = np.clip(0.0, robot.lower_limits, robot.upper_limits)
        candidates = reachable_candidates(robot, random_configurations(robot, np.random.default_rng(n), n))
        problem = _problem(robot, candidates)
        library = seeds.SeedLibrary(problem, size=500)  # its own: no tree built yet
        rows = np.arange(n)
        ranks = library.nearest(problem, rows, 0, 3)
        assert [entry[2] is not None for entry in library._indexes.values()] == [tree_expected]
        np.testing.assert_array_equal(ranks, library.nearest(problem, rows, 0, 3, method="tree"))


def test_a_target_at_a_library_state_is_solved_from_that_state(panda):
    panda.joint_q[:] = mid_range(panda)
    probe = _problem(panda, [targets_at(panda, mid_range(panda))])
    library = seeds.library_for(probe)
    # A library state whose pose round 0 (from mid-range) cannot reach.
    for k in range(len(library)):
        candidates = [targets_at(panda, library.q[k])]
        local = robo_solve_ik_direction_up_multi_batch(panda, candidates, max_position_error=MPE,
                                                       **SEARCH_SOLVER_DEFAULTS)
        if local.success[0] == 0:
            break
    found = robo_search_ik_direction_up(panda, candidates, num_seeds=1, max_rounds=1, max_position_error=MPE)
    assert found.result.success[0] == 1 and found.rounds == 2
    assert found.result.iterations[0] == 0 and found.result.stop_reason[0] == "converged"
    np.testing.assert_array_equal(found.result.joint_q[0], library.q[k].astype(np.float32))


def test_continuous_joints_are_shifted_to_the_current_turn(dual_arm):
    q = mid_range(dual_arm)
    q[np.isnan(q)] = 0.0
    continuous = np.flatnonzero(~np.isfinite(dual_arm.upper_limits))
    q[continuous] = [5.0, -9.0][:len(continuous)]
    dual_arm.joint_q[:] = q
    problem = _problem(dual_arm, [targets_at(dual_arm, mid_range(dual_arm) * 0.5)])
    library = seeds.library_for(problem)
    states = library.seeds(problem, np.array([0]), 0, 6)
    index = library.nearest(problem, np.array([0]), 0, 6)[0]
    assert np.all(np.abs(states[:, continuous] - q[continuous]) <= np.pi + 1e-12)
    turns = (states[:, continuous] - library.q[index][:, continuous]) / (2 * np.pi)
    np.testing.assert_allclose(turns, np.round(turns), atol=1e-9)
    assert np.any(np.round(turns) != 0)
    np.testing.assert_allclose(dual_arm.tcp_transforms(states), dual_arm.tcp_transforms(library.q[index]),
                               atol=1e-9)


def test_revolute_joints_spanning_more_than_a_turn_are_shifted_towards_the_anchor(ur5):
    assert np.all(ur5.upper_limits - ur5.lower_limits > 2 * np.pi)  # the ur5's +-2 pi joints
    np.testing.assert_array_equal(periodic_coordinates(ur5), True)
    start = random_configurations(ur5, np.random.default_rng(3), 1)[0]
    ur5.joint_q[:] = start
    problem = _problem(ur5, [targets_at(ur5, random_configurations(ur5, np.random.default_rng(4), 1)[0])])
    library = seeds.library_for(problem)
    index = library.nearest(problem, np.array([0]), 0, 8)[0]
    for anchor in (None, np.zeros(ur5.num_dofs)):
        states = library.seeds(problem, np.array([0]), 0, 8, anchor)
        toward = problem.q_initial if anchor is None else anchor
        turns = (states - library.q[index]) / (2 * np.pi)
        np.testing.assert_allclose(turns, np.round(turns), atol=1e-9)  # whole turns: the same poses
        assert np.all(states >= ur5.lower_limits) and np.all(states <= ur5.upper_limits)
        # Nearest the anchor among the in-limit copies (a turn either way is no nearer or leaves the limits).
        for step in (-2 * np.pi, 2 * np.pi):
            other = states + step
            inside = (other >= ur5.lower_limits) & (other <= ur5.upper_limits)
            assert np.all(np.abs(other - toward)[inside] >= np.abs(states - toward)[inside] - 1e-9)
    # A prismatic joint, or a revolute one another drives with a scale other than 1, is not periodic.
    np.testing.assert_array_equal(periodic_coordinates(RobotKinematics.from_urdf(_SLIDE_AND_MIMIC, ["l3"])),
                                  [False, False, True])


_SLIDE_AND_MIMIC = """<robot name='slide_and_mimic'>
  <link name='base'/><link name='l1'/><link name='l2'/><link name='l3'/><link name='l4'/>
  <joint name='slide' type='prismatic'><parent link='base'/><child link='l1'/>
    <axis xyz='1 0 0'/><limit lower='0' upper='1' effort='1' velocity='1'/></joint>
  <joint name='turn' type='revolute'><parent link='l1'/><child link='l2'/>
    <axis xyz='0 0 1'/><limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
  <joint name='half' type='revolute'><parent link='l2'/><child link='l3'/><origin xyz='0.2 0 0'/>
    <axis xyz='0 0 1'/><mimic joint='turn' multiplier='0.5'/><limit lower='-3' upper='3' effort='1' velocity='1'/></joint>
  <joint name='wrist' type='continuous'><parent link='l3'/><child link='l4'/><axis xyz='0 1 0'/></joint>
</robot>"""


def test_libraries_are_cached_per_setup_not_per_current_active_values(dual_arm):
    q = mid_range(dual_arm)
    q[np.isnan(q)] = 0.0
    active = tuple(range(1, dual_arm.num_dofs))
    dual_arm.joint_q[:] = q
    candidates = [targets_at(dual_arm, q)]
    first = seeds.library_for(_problem(dual_arm, candidates, active))
    dual_arm.joint_q[5] += 0.1  # an active joint
    assert seeds.library_for(_problem(dual_arm, candidates, active)) is first
    other_axes = [targets_at(dual_arm, q, tcp_convention=False)]  # local +X / +Y: another tree
    assert seeds.library_for(_problem(dual_arm, other_axes, active)) is first
    dual_arm.joint_q[0] += 0.05  # the inactive torso: other TCP poses
    second = seeds.library_for(_problem(dual_arm, candidates, active))
    assert second is not first
    assert not np.allclose(second.tcp_pos, first.tcp_pos)
    center = dual_arm.joint_q.astype(np.float64)
    narrow = seeds.library_for(_problem(dual_arm, candidates, active, joint_bounds=(center - 0.2, center + 0.2)))
    assert narrow is not second and np.all(np.abs(narrow.q[:, 1:] - center[1:]) <= 0.2 + 1e-12)
    for _ in range(seeds.CACHE_PER_MODEL):  # least recently used out
        dual_arm.joint_q[0] += 0.01
        seeds.library_for(_problem(dual_arm, candidates, active))
    dual_arm.joint_q[:] = q
    assert seeds.library_for(_problem(dual_arm, candidates, active)) is not first


def test_a_nearest_state_is_a_better_start_than_a_uniform_draw(panda):
    # What the library is for: a local solve from the state nearest the target succeeds
    # far more often than one from a uniform random state (about 78 % vs 36 % on the
    # panda in the benchmark); a library that ranked badly would lose that.
    panda.joint_q[:] = mid_range(panda)
    candidates = reachable_candidates(panda, random_configurations(panda, np.random.default_rng(6), 60))
    problem = _problem(panda, candidates)
    rows = np.arange(len(candidates))
    nearest = solve_problem(problem, seeds.library_for(problem).seeds(problem, rows, 0, 1))
    uniform = solve_problem(problem, seeds.random_starts(problem, len(rows), np.random.default_rng(0)))
    assert nearest.success.mean() >= 0.6
    assert nearest.success.mean() >= 1.5 * uniform.success.mean()
    ok = nearest.success == 1
    assert np.median(nearest.iterations[ok]) < np.median(uniform.iterations[uniform.success == 1])


def test_a_library_is_used_up_before_random_draws_take_over(panda, monkeypatch):
    # The Python rounds (the compiled search ranks in the kernel, not through SeedLibrary.seeds;
    # test_search.py checks that it finds the same).
    monkeypatch.setattr(search_module, "COMPILED_SEARCH", False)
    panda.joint_q[:] = mid_range(panda)
    unreachable = [(DirectionUpTarget(0, (2.0, 0, 0), (1, 0, 0), (0, 0, 1)),)]
    monkeypatch.setattr(seeds, "LIBRARY_SIZE", 6)  # this (fresh) robot's libraries: 6 states
    monkeypatch.setattr(seeds, "LIMIT_LIBRARY_SIZE", 2)  # and 2 near the limits
    calls = []
    real = seeds.SeedLibrary.seeds

    def spy(self, problem, rows, first, count, anchor):
        calls.append((len(self), first, count))
        anchors.append(anchor)
        return real(self, problem, rows, first, count, anchor)
    anchors = []
    monkeypatch.setattr(seeds.SeedLibrary, "seeds", spy)
    found = robo_search_ik_direction_up(panda, unreachable, num_seeds=2, max_rounds=6, max_position_error=MPE)
    assert found.result.success[0] == 0 and found.rounds == 7
    # Three rounds of the uniform library, one of the library near the limits; then the uniform
    # library's turn finds it used up (random draws), and so does the other's.
    assert calls == [(6, 0, 2), (6, 2, 2), (6, 4, 2), (2, 0, 2)]
    np.testing.assert_array_equal(found.starts, [13])
    # The seeds rank nearest the current state, or the limit centres for that selection.
    np.testing.assert_array_equal(anchors[0], panda.joint_q.astype(np.float64))
    anchors.clear()
    robo_search_ik_direction_up(panda, unreachable, num_seeds=2, max_rounds=1, max_position_error=MPE,
                                selection="limit_center")
    np.testing.assert_allclose(anchors[0], (panda.lower_limits + panda.upper_limits) / 2)


@pytest.mark.parametrize("mode", ["full", "axis", "position"])
def test_search_with_nearest_seeds_solves_every_mode(panda, mode):
    panda.joint_q[:] = random_configurations(panda, np.random.default_rng(8), 1)[0]
    candidates = [c for i, c in enumerate(_mixed_modes(panda, 30, np.random.default_rng(9)))
                  if ("full", "axis", "position")[i % 3] == mode]
    found = robo_search_ik_direction_up(panda, candidates, num_seeds=2, max_rounds=10, max_position_error=MPE)
    assert found.result.success.all()
    tcp = panda.tcp_transforms(found.result.joint_q.astype(np.float64))[:, 0]
    goal = np.array([c[0].position_world for c in candidates])
    assert np.all(np.linalg.norm(tcp[:, :3, 3] - goal, axis=-1) < 1e-3)


def test_warm_up_search_builds_the_library_a_search_then_uses(panda, monkeypatch):
    panda.joint_q[:] = mid_range(panda)
    far = reachable_candidates(panda, random_configurations(panda, np.random.default_rng(11), 8))
    assert warm_up_search(panda, far[:1]) > 0.0
    built = []
    monkeypatch.setattr(seeds, "SeedLibrary", lambda *a, **k: built.append(1))
    warm_up_search(panda, far[:1])  # cached: nothing left to build (no library made, below)
    found = robo_search_ik_direction_up(panda, far, num_seeds=2, max_rounds=3, max_position_error=MPE)
    assert np.any(found.starts > 1) and built == []  # seeded rounds ran on the warm library
    # Default candidates: full poses at the current TCPs; a state outside the limits is an error.
    panda.joint_q[3] = 0.0  # panda joint 4 must stay below -0.0698 rad
    with pytest.raises(JointLimitError):
        warm_up_search(panda)


def test_the_leaf_scan_ranks_exactly_like_a_full_scan_with_ties_by_index():
    """The compiled scan visits leaves by a lower bound of their distances and skips the rest:
    its ranks must be a full scan's, equal distances ordered by index (here many exact ties:
    points on a coarse grid, duplicated, and queries on grid points)."""
    pytest.importorskip("numba", reason="the scan is compiled with numba (requirements/core.txt)")
    from direction_up_ik.core import compiled
    rng = np.random.default_rng(3)
    grid = rng.integers(0, 4, size=(700, 5)).astype(np.float64) * 0.25
    points = np.concatenate([grid, grid[:300]])  # duplicates: equal distances at two indices
    queries = np.concatenate([grid[:20], rng.random((20, 5))])
    leaves = tuple(seeds.leaf_layout(points, leaf_points=16))
    assert len(leaves[2]) - 1 >= 60  # many leaves, so that pruning happens
    for first, count in ((0, 1), (0, 9), (7, 5), (40, 10)):
        got = compiled.nearest_ranks(leaves, queries, first, count)
        for q, ranks in zip(queries, got):
            d = np.zeros(len(points))
            for c in range(points.shape[1]):  # summed feature by feature, as the kernel does
                d += (points[:, c] - q[c]) ** 2
            expected = np.lexsort((np.arange(len(points)), d))[first:first + count]
            np.testing.assert_array_equal(ranks, expected)


def _leaf_layout_by_recursion(features, leaf_points):
    """The layout :func:`seeds.leaf_layout` documents, part by part: (order, leaf starts)."""
    order = np.arange(len(features))

    def cut(lo, hi):
        if hi - lo <= leaf_points:
            return [lo]
        part = features[order[lo:hi]]
        widest = int(np.argmax(part.max(axis=0) - part.min(axis=0)))
        order[lo:hi] = order[lo:hi][np.argsort(part[:, widest], kind="stable")]
        mid = (lo + hi) // 2
        return cut(lo, mid) + cut(mid, hi)
    starts = cut(0, len(features))
    return order, np.array(starts + [len(features)])


@pytest.mark.parametrize("m, leaf_points", [(1000, 16), (4096, 64), (65, 64), (64, 64), (300, 7)])
def test_leaf_layout_halves_each_part_by_its_widest_feature(m, leaf_points):
    rng = np.random.default_rng(m)
    features = rng.integers(0, 6, size=(m, 7)).astype(np.float64) * rng.random(7)  # many ties
    points_t, index, start, lo_t, hi_t = seeds.leaf_layout(features, leaf_points)
    order, expected_start = _leaf_layout_by_recursion(features, leaf_points)
    np.testing.assert_array_equal(index, order)
    np.testing.assert_array_equal(start, expected_start)
    np.testing.assert_array_equal(points_t, features[order].T)
    for leaf in range(len(start) - 1):
        inside = features[order[start[leaf]:start[leaf + 1]]]
        assert 0 < len(inside) <= leaf_points
        np.testing.assert_array_equal(lo_t[:, leaf], inside.min(axis=0))
        np.testing.assert_array_equal(hi_t[:, leaf], inside.max(axis=0))


@pytest.mark.parametrize("robot_name", ["ur5", "dual_arm"])
def test_after_warm_up_no_search_builds_a_seed_index_for_a_named_convention(request, robot_name, monkeypatch):
    """warm_up_search(robot) builds every slot layout a request names without explicit axes
    (each end effector alone and all together; +X/+Y and +Z/+Y; full, axis, position), so
    that no first search builds one inside its time budget; explicit axes still build theirs."""
    import scipy.spatial
    robot = request.getfixturevalue(robot_name)
    robot.joint_q[:] = mid_range(robot)
    warm_up_search(robot)

    def refuse(*args, **kwargs):
        raise AssertionError("a search built a seed index")
    monkeypatch.setattr(seeds, "leaf_layout", refuse)
    monkeypatch.setattr(scipy.spatial, "cKDTree", refuse)
    rng = np.random.default_rng(8)
    tcps = robot.tcp_transforms(random_configurations(robot, rng, 20))
    groups = [(e,) for e in range(robot.num_end_effectors)] + [tuple(range(robot.num_end_effectors))]
    searched = 0
    for ees in groups:
        for mode in ("full", "axis", "position"):
            for tcp_axes in (True, False):
                cands = []
                for t in tcps:
                    d = t[:, :3, 2 if tcp_axes else 0] if mode != "position" else [None] * len(t)
                    u = t[:, :3, 1] if mode == "full" else [None] * len(t)
                    local = (None, None) if tcp_axes else ()
                    cands.append(tuple(DirectionUpTarget(e, t[e, :3, 3], d[e], u[e], *local) for e in ees))
                for batch in (cands[:1], cands):  # one target (the compiled scan) and a batch (the tree)
                    # round 4 seeds from the library near the limits (search_plan.seed_source)
                    found = robo_search_ik_direction_up(robot, batch, max_position_error=0.03, num_seeds=4,
                                                        max_rounds=4, seeding="nearest")
                    searched += int(found.rounds > 1)
    assert searched > 0  # rounds of seeds ran, so the indexes were used
    t = tcps[0]
    explicit = [tuple(DirectionUpTarget(e, t[e, :3, 3] + 2.0, t[e, :3, 1], t[e, :3, 0], (0, 1, 0), (1, 0, 0))
                      for e in range(robot.num_end_effectors))]
    with pytest.raises(AssertionError, match="built a seed index"):
        robo_search_ik_direction_up(robot, explicit, max_position_error=0.03, num_seeds=4, max_rounds=1)


def test_the_kernels_target_features_are_those_of_pose_features_bit_for_bit():
    """The one-target search's query features (``compiled.search_rounds.target_features``, run
    here as the plain Python it also is; compiled, the one-target answers' tests cover it) equal
    ``pose_features`` of that candidate in every value, for every constraint pattern of two
    slots, with positions beyond the clipping reach, negative zeros and tiny and huge axis
    components."""
    from direction_up_ik.core.compiled.layout import Targets
    from direction_up_ik.core.compiled.search_rounds import target_features
    rng = np.random.default_rng(7)
    patterns = [(d, u) for d in (True, False) for u in (True, False) if d or not u]
    for pattern_0 in patterns:
        for pattern_1 in patterns:
            has_direction = np.array([pattern_0[0], pattern_1[0]])
            has_up = np.array([pattern_0[1], pattern_1[1]])
            for scale in (1.0, 1e-300, 3e6, 1e300):
                position = rng.normal(size=(1, 2, 3)) * scale
                position[0, 0, 1] = -0.0
                direction, up = rng.normal(size=(1, 2, 3)) * scale, rng.normal(size=(1, 2, 3))
                expected = seeds.pose_features(position, direction, up, has_direction, has_up)[0]
                targets = Targets(position, direction, up, has_direction[None], has_up[None], None, None)
                got = np.full(expected.size + 1, np.nan)  # one more: nothing is written past F
                target_features(targets, 0, seeds.FEATURE_REACH, seeds.AXIS_SCALE, got)
                np.testing.assert_array_equal(got[:-1], expected)
                assert np.array_equal(np.signbit(got[:-1]), np.signbit(expected))
                assert np.isnan(got[-1])
