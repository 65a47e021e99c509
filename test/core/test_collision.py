"""Collision checking (core/collision.py): coal (hpp-fcl) as the independent oracle on the
original primitives, pair selection, meshes, mimic joints, both backends, and every error path."""

from __future__ import annotations

import numpy as np
import pytest

from direction_up_ik import (CollisionGeometryWarning, CollisionScene, InputValidationError, Obstacle,
                             RobotKinematics, RobotModelError)
from direction_up_ik.core import collision_distance, collision_parts
from direction_up_ik.core.kinematics import random_in_limits
from direction_up_ik.robots import bundled_robot, load_robot

coal = pytest.importorskip("coal", reason="coal (requirements/dev.txt) is the oracle of these tests")
from collision_oracle import oracle_pair_distances, pose, random_obstacles, urdf_shapes  # noqa: E402

ROBOTS = ("dual_arm_torso", "panda_like", "ur5_like")


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("padding", [0.0, 0.01])
def test_check_is_conservative_against_coal(name, padding):
    """On random states and obstacle scenes: clearance never exceeds coal's least distance over
    the checked pairs, a state called collision-free has no penetrating pair by coal, and a
    state with a pair coal finds colliding is reported colliding."""
    robot = load_robot(name)
    shapes = urdf_shapes(bundled_robot(name).urdf_path())
    rng = np.random.default_rng(24)
    scene = CollisionScene.from_urdf(robot, bundled_robot(name).urdf_path(), padding=padding)
    free_seen = colliding_seen = 0
    for _ in range(4):
        scene.set_obstacles(random_obstacles(rng, name))
        states = random_in_limits(robot, rng, 40)
        report = scene.check(states)
        for b, q in enumerate(states):
            oracle = oracle_pair_distances(robot, scene, shapes, q)
            assert report.clearance[b] <= oracle.min() + 1e-7, (b, report.closest_pair[b])
            if report.collision_free[b]:
                free_seen += 1
                assert oracle.min() > 0.0
            if oracle.min() < 0.0:
                colliding_seen += 1
                assert not report.collision_free[b]
    assert free_seen > 10 and colliding_seen > 10  # both kinds were exercised


def test_clearance_is_tight_on_exact_parts():
    """Spheres and boxes are kept exactly: a sphere link over a box table and a sphere
    obstacle give coal's distances (to the golden-section search's tolerance)."""
    urdf = """<robot name='slider'><link name='base'/>
      <link name='ball'><collision><geometry><sphere radius='0.1'/></geometry></collision></link>
      <joint name='z' type='prismatic'><parent link='base'/><child link='ball'/><axis xyz='0 0 1'/>
        <limit lower='0' upper='1' effort='1' velocity='1'/></joint></robot>"""
    robot = RobotKinematics.from_urdf(urdf, ["ball"])
    table = Obstacle.box((1.0, 1.0, 0.1), pose((0, 0, -0.05)), name="table")
    ball = Obstacle.sphere(0.05, pose((0.3, 0, 0.5)), name="ball_obstacle")
    scene = CollisionScene.from_urdf(robot, urdf, obstacles=[table, ball])
    q = np.array([[0.5], [0.05], [0.3], [0.12]])
    report = scene.check(q)
    expected_table = q[:, 0] - 0.1
    expected_ball = np.hypot(0.3, q[:, 0] - 0.5) - 0.15
    np.testing.assert_allclose(report.clearance, np.minimum(expected_table, expected_ball), atol=1e-7)
    assert report.closest_pair[1] == ("ball", "table")
    assert report.collision_free.tolist() == [True, False, True, True]
    assert report.clearance[1] == pytest.approx(-0.05, abs=1e-7)  # penetration depth, exact for a sphere


def test_single_state_and_batch_agree(dual_arm):
    scene = CollisionScene.from_urdf(dual_arm, bundled_robot("dual_arm_torso").urdf_path())
    states = random_in_limits(dual_arm, np.random.default_rng(3), 5)
    batch = scene.check(states)
    for b, q in enumerate(states):
        single = scene.check(q)
        assert single.clearance.shape == (1,) and single.collision_free.dtype == bool
        assert single.clearance[0] == pytest.approx(batch.clearance[b], abs=1e-9)
        assert single.closest_pair[0] == batch.closest_pair[b]


def test_compiled_check_equals_the_reference(compiled_kernels):
    if collision_distance._kernels() is None:
        pytest.skip("the compiled kernels are not available (numba off or missing)")
    robot = load_robot("dual_arm_torso")
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path(),
                                     obstacles=random_obstacles(np.random.default_rng(5), "dual_arm_torso", 6))
    parts, pairs, body_pairs = scene.arrays()
    states = random_in_limits(robot, np.random.default_rng(6), 300)
    ref_least, ref_pair = collision_distance.reference_clearance(robot, parts, pairs, states)
    least, pair = collision_distance.bound_clearance(robot, parts, pairs)(states, -np.inf, False)
    np.testing.assert_allclose(least, ref_least, atol=1e-7)
    assert np.mean(pair == ref_pair) > 0.95  # (equal distances may name another pair)
    hits = collision_distance._compiled_pairwise()(robot, parts, pairs, states, len(body_pairs))
    dist = collision_distance._pair_distances(robot, parts, pairs, states)
    owner = np.concatenate([pairs.cc_pair, pairs.cs_pair])
    expected = np.array([[dist[b, owner == p].min() <= 0.0 for p in range(len(body_pairs))]
                         for b in range(len(states))])
    assert np.array_equal(hits, expected)
    # numpy's pair sampling skips pairs apart for certain: the same verdicts
    touching = collision_distance._pair_distances(robot, parts, pairs, states, only_touching=True)
    assert np.array_equal(touching <= 0.0, dist <= 0.0)
    # the search's filter stops at the first colliding pair; its verdict is the same
    assert np.array_equal(scene.collision_free(states), ref_least > 0.0)
    # the warm-up compiled the very signature real scenes use: no compile in a request
    from direction_up_ik.core.compiled import collision as kernels
    assert [len(kernel.signatures) for kernel in kernels.ENTRY_POINTS] == [1, 1]


def test_the_scene_binds_the_compiled_check_to_its_current_obstacles(compiled_kernels):
    """``check`` calls the compiled check bound to the scene's arrays once (not the dispatcher):
    the same answers as the unbound call, bound again when the obstacles change."""
    if collision_distance._kernels() is None:
        pytest.skip("the compiled kernels are not available (numba off or missing)")
    robot = load_robot("dual_arm_torso")
    rng = np.random.default_rng(8)
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path(),
                                     obstacles=random_obstacles(rng, "dual_arm_torso", 6))
    states = random_in_limits(robot, rng, 60)
    for _ in range(3):
        parts, pairs, body_pairs = scene.arrays()
        least, pair = collision_distance.bound_clearance(robot, parts, pairs)(states, -np.inf, False)
        report = scene.check(np.asfortranarray(states))  # any layout: the scene copies to C order
        assert scene._bound[0] is parts
        assert np.array_equal(report.clearance, least)
        assert report.closest_pair == tuple(body_pairs[p] if p >= 0 else ("", "") for p in pair.tolist())
        assert np.array_equal(scene.collision_free(states), least > 0.0)
        scene.set_obstacles(random_obstacles(rng, "dual_arm_torso", 6))
    with pytest.raises(TypeError, match="float64 C-contiguous"):
        scene._bound[1](states.astype(np.float32), -np.inf, False)


def test_the_scene_checks_in_numpy_until_the_kernels_are_ready(monkeypatch):
    from direction_up_ik.core import collision as collision_module
    monkeypatch.setattr(collision_module, "bound_clearance", lambda robot, parts, pairs: None)  # not ready
    robot = load_robot("dual_arm_torso")
    scene = CollisionScene.from_urdf(robot, bundled_robot("dual_arm_torso").urdf_path(),
                                     obstacles=random_obstacles(np.random.default_rng(9), "dual_arm_torso", 4))
    states = random_in_limits(robot, np.random.default_rng(10), 20)
    parts, pairs, body_pairs = scene.arrays()
    least, pair = collision_distance.reference_clearance(robot, parts, pairs, states)
    report = scene.check(states)
    assert scene._bound is None  # nothing bound: a later check binds once the kernels are ready
    assert np.array_equal(report.clearance, least)
    assert report.closest_pair == tuple(body_pairs[p] if p >= 0 else ("", "") for p in pair.tolist())
    assert np.array_equal(scene.collision_free(states), least > 0.0)


# ------------------------------------------------------------------------ pair selection
def test_pairs_leave_out_adjacent_links_across_fixed_joints(dual_arm):
    scene = CollisionScene.from_urdf(dual_arm, bundled_robot("dual_arm_torso").urdf_path())
    checked = {frozenset(p) for p in scene.body_pairs}
    for pair in (("left_hand_link", "left_finger_a_link"), ("left_finger_a_link", "left_finger_b_link"),
                 ("left_wrist_link", "left_hand_link"), ("left_wrist_link", "left_finger_a_link"),
                 ("chest_link", "head_link"), ("left_shoulder_link", "left_upper_arm_link"),
                 ("torso_link", "chest_link")):
        assert frozenset(pair) in scene.adjacent_pairs and frozenset(pair) not in checked
    for pair in (("left_hand_link", "right_hand_link"), ("chest_link", "left_hand_link"),
                 ("left_forearm_roll_link", "right_forearm_roll_link")):
        assert frozenset(pair) in checked


def test_sampled_pairs_are_never_or_always_in_collision(panda):
    """The pairs the sampling leaves out: none of them collides in fresh random states
    (unless it always does), and the selection is the same for the same model (cached)."""
    urdf = bundled_robot("panda_like").urdf_path()
    scene = CollisionScene.from_urdf(panda, urdf)
    again = CollisionScene.from_urdf(load_robot("panda_like"), urdf)
    assert scene.sampled_pairs == again.sampled_pairs and scene.body_pairs == again.body_pairs
    assert frozenset(("panda_link0", "panda_hand")) in {frozenset(p) for p in scene.body_pairs}
    # link0 and link2 overlap around joint 2 in every state: left out as "always"
    assert frozenset(("panda_link0", "panda_link2")) in scene.sampled_pairs


def test_srdf_disabled_pairs_are_not_checked(dual_arm):
    urdf = bundled_robot("dual_arm_torso").urdf_path()
    srdf = """<robot name='dual_arm_torso'>
      <disable_collisions link1='left_hand_link' link2='right_hand_link' reason='Never'/></robot>"""
    scene = CollisionScene.from_urdf(dual_arm, urdf, srdf=srdf)
    checked = {frozenset(p) for p in scene.body_pairs}
    assert frozenset(("left_hand_link", "right_hand_link")) not in checked
    assert frozenset(("left_hand_link", "right_finger_a_link")) in checked


def test_every_link_meets_every_obstacle(panda):
    scene = CollisionScene.from_urdf(panda, bundled_robot("panda_like").urdf_path(),
                                     obstacles=[Obstacle.sphere(0.1, pose((1, 1, 1)), name="ball")])
    with_ball = {a for a, b in scene.body_pairs if b == "ball"}
    assert with_ball == set(scene.link_bodies)


# ------------------------------------------------------------------------ geometry kinds
MIMIC_URDF = """<robot name='gripper'><link name='base'/>
  <link name='a'><collision><origin xyz='0 0 0'/><geometry><sphere radius='0.02'/></geometry></collision></link>
  <link name='b'><collision><origin xyz='0 0 0'/><geometry><sphere radius='0.02'/></geometry></collision></link>
  <joint name='ja' type='prismatic'><parent link='base'/><child link='a'/><origin xyz='0 0.1 0'/>
    <axis xyz='0 -1 0'/><limit lower='0' upper='0.1' effort='1' velocity='1'/></joint>
  <joint name='jb' type='prismatic'><parent link='base'/><child link='b'/><origin xyz='0 -0.1 0'/>
    <axis xyz='0 1 0'/><mimic joint='ja' multiplier='1' offset='0'/>
    <limit lower='0' upper='0.1' effort='1' velocity='1'/></joint></robot>"""


def test_mimic_links_move_with_their_master():
    robot = RobotKinematics.from_urdf(MIMIC_URDF, ["a"])
    scene = CollisionScene.from_urdf(robot, MIMIC_URDF, obstacles=[])
    scene.set_obstacles([Obstacle.sphere(0.001, pose((0.5, 0, 0)), name="far")])
    # a and b close symmetrically: their gap is 0.2 - 2 q - 0.04
    assert ("a", "b") in scene.body_pairs or ("b", "a") in scene.body_pairs
    report = scene.check(np.array([[0.0], [0.05], [0.09]]))
    np.testing.assert_allclose(report.clearance, [0.16, 0.06, -0.02], atol=1e-9)
    assert report.collision_free.tolist() == [True, True, False]


def box_mesh_urdf(mesh_file: str, extra: str = "") -> str:
    return f"""<robot name='meshy'><link name='base'/>
      <link name='tool'><collision><origin xyz='0.1 0 0' rpy='0 0.3 0'/>
        <geometry><mesh filename='{mesh_file}' scale='1 2 1'/></geometry></collision>{extra}</link>
      <joint name='j' type='revolute'><parent link='base'/><child link='tool'/><axis xyz='0 0 1'/>
        <limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>"""


def test_mesh_is_enclosed_by_its_capsule(tmp_path):
    trimesh = pytest.importorskip("trimesh", reason="trimesh (requirements/core.txt) reads meshes")
    mesh = trimesh.creation.box(extents=(0.3, 0.05, 0.08))
    mesh.export(tmp_path / "part.stl")
    urdf = box_mesh_urdf("package://meshy_description/part.stl")
    (tmp_path / "meshy_description").mkdir()
    mesh.export(tmp_path / "meshy_description" / "part.stl")
    robot = RobotKinematics.from_urdf(urdf, ["tool"])
    scene = CollisionScene.from_urdf(robot, urdf, mesh_paths=[str(tmp_path)])
    parts, _, _ = scene.arrays()
    assert len(parts.cap_radius) == 1
    # every vertex (scaled, placed) lies within the capsule
    vertices = mesh.vertices * (1, 2, 1)
    placed = (pose((0.1, 0, 0), (0, 0.3, 0)) @ np.c_[vertices, np.ones(len(vertices))].T).T[:, :3]
    d = collision_distance.segment_distance(placed, placed, np.broadcast_to(parts.cap_a[0], placed.shape),
                                   np.broadcast_to(parts.cap_b[0], placed.shape))
    assert np.all(d <= parts.cap_radius[0] + 1e-9)
    assert parts.cap_radius[0] < 0.1  # about the box's cross-section, not its length


@pytest.mark.parametrize("other_element, how", [("", "not checked for collisions at all"),
                                                ("<collision><geometry><sphere radius='0.05'/></geometry>"
                                                 "</collision>", "checked by its other collision elements only")])
def test_a_missing_mesh_warns_once_naming_link_and_file(other_element, how):
    urdf = box_mesh_urdf("package://nowhere/missing.stl", other_element)
    robot = RobotKinematics.from_urdf(urdf, ["tool"])
    with pytest.warns(CollisionGeometryWarning) as caught:
        scene = CollisionScene.from_urdf(robot, urdf, mesh_paths=["/nonexistent"])
    messages = [str(w.message) for w in caught if issubclass(w.category, CollisionGeometryWarning)]
    assert len(messages) == 1
    assert "link 'tool'" in messages[0] and "package://nowhere/missing.stl" in messages[0] and how in messages[0]
    assert ("tool" in scene.link_bodies) == bool(other_element)


def test_box_cover_encloses_the_box():
    half = np.array([0.11, 0.15, 0.2])
    rng = np.random.default_rng(0)
    corners = rng.uniform(-1, 1, (2000, 3)) * half
    corners[:8] = np.array(np.meshgrid(*[[-1, 1]] * 3)).reshape(3, -1).T * half
    covered = np.zeros(len(corners), dtype=bool)
    for a, b, radius in collision_parts.box_cover(half):
        d = collision_distance.segment_distance(corners, corners, np.broadcast_to(a, corners.shape),
                                       np.broadcast_to(b, corners.shape))
        covered |= d <= radius + 1e-12
    assert covered.all()


def test_bodies_at_places_every_part(dual_arm):
    """bodies_at: every checked body with its parts in the root frame (markers, pictures); a
    sphere link sits at its link's origin, the table where it was put."""
    table = Obstacle.box((0.7, 1.2, 0.05), pose((0.75, 0, 0.9)), name="table")
    scene = CollisionScene.from_urdf(dual_arm, bundled_robot("dual_arm_torso").urdf_path(), padding=0.01,
                                     obstacles=[table, Obstacle.sphere(0.1, pose((1, 1, 1)), name="ball")])
    q = random_in_limits(dual_arm, np.random.default_rng(4), 1)[0]
    parts = scene.bodies_at(q)
    assert {p.body for p in parts} == set(scene.link_bodies) | {"table", "ball"}
    assert [p.body for p in parts][-2:] == ["table", "ball"]
    wrist = [p for p in parts if p.body == "left_wrist_link" and p.kind == "sphere"]
    frame = dual_arm.link_transforms(q[None], ["left_wrist_link"])[0, 0]
    assert len(wrist) == 1 and np.allclose(wrist[0].a, frame[:3, 3]) and wrist[0].radius == pytest.approx(0.05)
    (box,) = [p for p in parts if p.body == "table"]
    assert box.kind == "box" and box.size == pytest.approx((0.7, 1.2, 0.05)) and np.allclose(box.pose, table.pose)
    chest = [p for p in parts if p.body == "chest_link"]
    assert [p.kind for p in chest] == ["box"] and chest[0].radius == pytest.approx(0.01)  # no cover capsules
    with pytest.raises(InputValidationError, match=r"joint_q: must be one state \(D,\)"):
        scene.bodies_at(np.zeros((2, dual_arm.num_dofs)))


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("make, field, rule", [
    (lambda: Obstacle.box((0.1, -0.2, 0.1), np.eye(4)), "size_xyz", ">= 0"),
    (lambda: Obstacle.box((0.1, np.nan, 0.1), np.eye(4)), "size_xyz", "finite"),
    (lambda: Obstacle.box((0.1, 0.1), np.eye(4)), "size_xyz", "3 numbers"),
    (lambda: Obstacle.sphere(-1.0, np.eye(4)), "radius", ">= 0"),
    (lambda: Obstacle.cylinder(0.1, np.inf, np.eye(4)), "length", "finite"),
    (lambda: Obstacle.sphere(0.1, np.diag([2.0, 1.0, 1.0, 1.0])), "pose", "orthonormal"),
    (lambda: Obstacle.box((1, 1, 1), np.eye(3)), "pose", r"shape \(4, 4\)"),
    (lambda: Obstacle.cylinder(0.1, 0.2, np.full((4, 4), np.nan)), "pose", "finite"),
])
def test_bad_obstacles_name_the_field_and_rule(make, field, rule):
    with pytest.raises(InputValidationError, match=rule) as caught:
        make()
    assert caught.value.field == field


def test_bad_scene_arguments(panda):
    urdf = bundled_robot("panda_like").urdf_path()
    with pytest.raises(InputValidationError, match="padding: must be finite and >= 0"):
        CollisionScene.from_urdf(panda, urdf, padding=-0.01)
    with pytest.raises(InputValidationError, match="srdf: .*unknown link 'no_such_link'"):
        CollisionScene.from_urdf(panda, urdf, srdf="<robot><disable_collisions link1='panda_link0' "
                                                   "link2='no_such_link'/></robot>")
    with pytest.raises(InputValidationError, match="srdf: .*cannot read '/no/such.srdf'"):
        CollisionScene.from_urdf(panda, urdf, srdf="/no/such.srdf")
    with pytest.raises(InputValidationError, match="srdf: not well-formed XML"):
        CollisionScene.from_urdf(panda, urdf, srdf="<robot><disable_collisions")
    with pytest.raises(InputValidationError, match="robot: must be a RobotKinematics"):
        CollisionScene.from_urdf("panda", urdf)
    scene = CollisionScene.from_urdf(panda, urdf)
    with pytest.raises(InputValidationError, match=r"joint_q: must have shape \(D,\) or \(B, D\) with D=7"):
        scene.check(np.zeros(6))
    with pytest.raises(InputValidationError, match="joint_q: must contain only finite values"):
        scene.check(np.full(7, np.nan))
    with pytest.raises(InputValidationError, match=r"obstacles\[1\]: must be an Obstacle"):
        scene.set_obstacles([Obstacle.sphere(0.1, np.eye(4)), "table"])
    with pytest.raises(InputValidationError, match="obstacles: names .*panda_hand.* are robot links"):
        scene.set_obstacles([Obstacle.sphere(0.1, np.eye(4), name="panda_hand")])


def test_bad_collision_geometry_in_the_urdf():
    bad = """<robot name='r'><link name='base'/><link name='tip'>
      <collision><geometry><box size='0.1 -0.1 0.1'/></geometry></collision></link>
      <joint name='j' type='revolute'><parent link='base'/><child link='tip'/><axis xyz='0 0 1'/>
        <limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>"""
    robot = RobotKinematics.from_urdf(bad, ["tip"])
    with pytest.raises(RobotModelError, match="link 'tip' box size must be >= 0"):
        CollisionScene.from_urdf(robot, bad)
    with pytest.raises(RobotModelError, match="link 'tip' sphere needs a finite radius >= 0"):
        CollisionScene.from_urdf(robot, bad.replace("<box size='0.1 -0.1 0.1'/>", "<sphere radius='nan'/>"))
