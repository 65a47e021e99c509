"""kinematics.yaml: MoveIt's keys and this solver's, generated from the settings schema."""

import dataclasses
import pathlib

import pytest

from direction_up_ik.core.settings import DEFAULT_MAX_POSITION_ERROR, SearchSettings, SolverSettings
from direction_up_ik.groups import KinematicsYamlError, load_kinematics_yaml, make_group_solvers as make_plugins
from direction_up_ik.groups.kinematics_yaml import SEARCH_KEYS, SOLVER_KEYS
from direction_up_ik.robots import bundled_robot

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config"


def _urdf(name):
    return bundled_robot(name).urdf_path().read_text()


def test_kinematics_yaml_examples_load_for_every_bundled_robot():
    for robot in ("panda_like", "ur5_like", "dual_arm_torso"):
        groups = load_kinematics_yaml(CONFIG / f"{robot}_kinematics.yaml")
        plugins = make_plugins(_urdf(robot), groups)
        assert plugins and all(p.get_joint_names() for p in plugins.values())
    groups = load_kinematics_yaml(CONFIG / "dual_arm_torso_kinematics.yaml")
    assert groups["both_arms"].tip_frames == ("left_hand_link", "right_hand_link")
    assert groups["left_arm"].timeout == 0.01

@pytest.mark.parametrize("text,pattern", [
    ("arm: {kinematics_solver_timeout: -1}", "arm.kinematics_solver_timeout: must be finite and positive"),
    ("arm: {kinematics_solver_timeout: .nan}", "arm.kinematics_solver_timeout: must be finite"),
    ("arm: {kinematics_solver_search_resolution: abc}", "arm.kinematics_solver_search_resolution: must be a number"),
    ("arm: {foo: 1}", r"arm: unknown keys \['foo'\]"),
    ("arm: {direction_up_ik: {position_tol: 0}}", "arm.direction_up_ik.position_tol: must be a finite positive"),
    ("arm: {direction_up_ik: {max_iters: 2.5}}", "arm.direction_up_ik.max_iters: must be a positive integer"),
    ("arm: {direction_up_ik: {num_seeds: -2}}", "arm.direction_up_ik.num_seeds: must be an integer >= 0"),
    ("arm: {direction_up_ik: {selection: nearest}}", "arm.direction_up_ik.selection: must be one of"),
    ("arm: {direction_up_ik: {jacobian: exact}}", "arm.direction_up_ik.jacobian: must be one of"),
    ("arm: {direction_up_ik: {jacobian: 1}}", "arm.direction_up_ik.jacobian: must be one of"),
    ("arm: {direction_up_ik: {stall_window: -1}}", "arm.direction_up_ik.stall_window: must be an integer >= 0"),
    ("arm: {direction_up_ik: {damping_mode: adaptive}}", "arm.direction_up_ik.damping_mode: must be one of"),
    ("arm: {direction_up_ik: {mode: position}}", "arm.direction_up_ik.mode: must be one of"),
    ("arm: {direction_up_ik: {bogus: 1}}", r"arm.direction_up_ik: unknown keys \['bogus'\]"),
    ("arm: {direction_up_ik: {tcp_offsets: [1]}}", "arm.direction_up_ik.tcp_offsets: expected a mapping"),
    ("arm: {direction_up_ik: {tcp_offsets: {l8: {xyz: [1, 2]}}}}",
     "arm.direction_up_ik.tcp_offsets.l8.xyz: must be 3 finite numbers"),
    ("arm: {direction_up_ik: {tcp_offsets: {l8: {xyz: [0, 0, 1], quat: [0, 0, 0, 1]}}}}",
     r"arm.direction_up_ik.tcp_offsets.l8: expected \{xyz"),
    ("arm: {direction_up_ik: {avoid_collisions: 1}}", "arm.direction_up_ik.avoid_collisions: must be true or false"),
    ("arm: {direction_up_ik: {collision_padding: -0.01}}",
     r"arm.direction_up_ik.collision_padding: must be a finite number >= 0 \(metres\)"),
    ("arm: [1, 2]", "arm: expected a mapping"),
    ("[1, 2", "invalid YAML"),
    ("missing_file.yaml", "file 'missing_file.yaml' not found"),
])
def test_kinematics_yaml_errors_name_group_and_key(text, pattern):
    with pytest.raises(KinematicsYamlError, match=pattern):
        load_kinematics_yaml(text)


def test_removed_attempts_key_is_accepted_with_a_warning(caplog):
    groups = load_kinematics_yaml("arm: {kinematics_solver_attempts: 3, kinematics_solver_timeout: 0.01}")
    assert groups["arm"].timeout == 0.01
    assert "kinematics_solver_attempts is ignored" in caplog.text


def test_ros_parameter_wrapping_is_unwrapped():
    text = ("move_group:\n  ros__parameters:\n    robot_description_kinematics:\n"
            "      arm: {kinematics_solver_timeout: 0.02}\n")
    assert load_kinematics_yaml(text)["arm"].timeout == 0.02




def test_kinematics_yaml_step_cap_and_jacobian_defaults_follow_the_search():
    """Groups that search default to the search's step cap, Jacobian, stall stop, step scales and
    damping; num_seeds 0 keeps the spec's 0.25, finite differences, no stall stop, 8 scales and
    constant damping; explicit keys win."""
    groups = load_kinematics_yaml("searching: {}\n"
                                  "spec: {direction_up_ik: {num_seeds: 0}}\n"
                                  "explicit: {direction_up_ik: {max_step_norm: 0.5, jacobian: finite_difference, "
                                  "stall_window: 0, num_step_scales: 2, damping_mode: constant}}\n")
    assert groups["searching"].search.num_seeds > 0 and groups["searching"].settings.max_step_norm == 1.5
    assert groups["searching"].settings.jacobian == "analytic"
    assert groups["searching"].settings.stall_window == 3
    assert groups["searching"].settings.num_step_scales == 3
    assert groups["searching"].settings.damping_mode == "residual"
    assert groups["spec"].settings.max_step_norm == 0.25
    assert groups["spec"].settings.jacobian == "finite_difference"
    assert groups["spec"].settings.stall_window == 0
    assert groups["spec"].settings.num_step_scales == 8
    assert groups["spec"].settings.damping_mode == "constant"
    assert groups["explicit"].settings.max_step_norm == 0.5
    assert groups["explicit"].settings.jacobian == "finite_difference"
    assert groups["explicit"].settings.stall_window == 0
    assert groups["explicit"].settings.num_step_scales == 2
    assert groups["explicit"].settings.damping_mode == "constant"


def test_own_keys_are_the_settings_fields():
    assert SOLVER_KEYS == tuple(f.name for f in dataclasses.fields(SolverSettings))
    assert set(SEARCH_KEYS) == {f.name for f in dataclasses.fields(SearchSettings)} - {"time_budget", "max_rounds"}
    text = ("arm: {direction_up_ik: {max_iters: 7, position_tol: 2.0e-4, frame_tol_rad: 0.002, "
            "max_position_error: 0.05, position_weight: 2.0, rotation_weight: 0.5, damping: 0.01, "
            "max_step_norm: 0.7, jacobian: finite_difference, stall_window: 2, num_step_scales: 5, "
            "damping_mode: constant, num_seeds: 3, min_successes: 2, selection: limit_center, "
            "random_seed: -1, seeding: random}}")
    group = load_kinematics_yaml(text)["arm"]
    assert group.settings == SolverSettings(
        max_iters=7, position_tol=2e-4, frame_tol_rad=0.002, max_position_error=0.05, position_weight=2.0,
        rotation_weight=0.5, damping=0.01, max_step_norm=0.7, jacobian="finite_difference", stall_window=2,
        num_step_scales=5, damping_mode="constant", periodic_joints="nearest_turn")  # the search's default
    assert group.search == SearchSettings(num_seeds=3, min_successes=2, selection="limit_center", random_seed=None,
                                          seeding="random")
    assert load_kinematics_yaml("arm: {}")["arm"].settings.max_position_error == DEFAULT_MAX_POSITION_ERROR
    with pytest.raises(KinematicsYamlError, match=r"unknown keys \['time_budget'\]"):
        load_kinematics_yaml("arm: {direction_up_ik: {time_budget: 0.1}}")  # kinematics_solver_timeout is it


def test_collision_keys():
    """Issue 24: the plugin class checks its answers for self-collision with avoid_collisions."""
    plain = load_kinematics_yaml("arm: {}")["arm"]
    assert (plain.avoid_collisions, plain.collision_padding) == (False, 0.0)  # MoveIt checks itself
    group = load_kinematics_yaml("arm: {direction_up_ik: {avoid_collisions: true, collision_padding: 0.01}}")["arm"]
    assert (group.avoid_collisions, group.collision_padding) == (True, 0.01)
