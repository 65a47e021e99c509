"""The node's ``solver.*`` / ``search.*`` parameters are generated from the settings schema.

Plain Python (``ros/config.py`` imports no ROS package): a field added to SolverSettings or
SearchSettings must become a parameter with its default and description, and a parameter
must turn back into the same settings.
"""

from __future__ import annotations

import pathlib

import pytest

from direction_up_ik.core.settings import (DEFAULT_MAX_POSITION_ERROR, NODE_SEARCH_DEFAULTS, SEARCH_SOLVER_DEFAULTS,
                                           SearchSettings, SolverSettings, defaults, rules)
from direction_up_ik.ros.config import PARAMETER_BY_NAME, ConfigError, config_from_values
from direction_up_ik.ros.parameter_files import parameter_file_values

TYPES = {"number": "double", "integer": "integer", "seed": "integer", "choice": "string"}


def _prefixed(prefix):
    return {name.split(".", 1)[1]: spec for name, spec in PARAMETER_BY_NAME.items() if name.startswith(prefix)}


def test_solver_parameters_are_the_solver_settings():
    params = _prefixed("solver.")
    assert list(params) == list(rules(SolverSettings))
    wanted = {**defaults(SolverSettings), "max_position_error": DEFAULT_MAX_POSITION_ERROR}
    for name, rule in rules(SolverSettings).items():
        spec = params[name]
        assert spec.default == wanted[name] and spec.type == TYPES[rule.kind], name
        assert spec.description.startswith(rule.description), name
        if rule.kind == "choice":
            assert all(choice in spec.description for choice in rule.choices), name


def test_search_parameters_are_the_search_settings_and_the_search_s_solver_defaults():
    params = _prefixed("search.")
    assert set(params) == set(rules(SearchSettings)) | set(SEARCH_SOLVER_DEFAULTS)
    for name, value in SEARCH_SOLVER_DEFAULTS.items():
        assert params[name].default == value
        assert params[name].description.startswith(rules(SolverSettings)[name].description)
    search_defaults = {**defaults(SearchSettings), **NODE_SEARCH_DEFAULTS}
    for name, rule in rules(SearchSettings).items():
        assert params[name].type == TYPES[rule.kind], name
        assert params[name].description.startswith(rule.description), name
        if search_defaults[name] is not None:
            assert params[name].default == search_defaults[name], name
    # None, which a parameter cannot hold, has a documented stand-in.
    assert (params["time_budget"].default, params["random_seed"].min_value) == (NODE_SEARCH_DEFAULTS["time_budget"], -1)
    assert "0 = none" in params["time_budget"].description
    assert "negative = from the OS" in params["random_seed"].description


def test_parameters_convert_into_the_same_settings():
    config = config_from_values({})
    assert config.solver == SolverSettings(max_position_error=DEFAULT_MAX_POSITION_ERROR)
    assert config.search_solver == config.solver.replace(**SEARCH_SOLVER_DEFAULTS)
    assert config.search == SearchSettings(**NODE_SEARCH_DEFAULTS, max_rounds=1)
    changed = config_from_values({"solver.jacobian": "analytic", "solver.stall_window": 2,
                                  "search.seeding": "random", "search.min_successes": 3,
                                  "search.time_budget": 0.25, "search.random_seed": -1,
                                  "search.damping_mode": "constant"})
    assert changed.solver.jacobian == "analytic" and changed.solver.stall_window == 2
    assert changed.search_solver.jacobian == "analytic"  # not a search.* field: solver.*'s
    assert changed.search_solver.damping_mode == "constant" and changed.solver.damping_mode == "constant"
    assert (changed.search.seeding, changed.search.min_successes) == ("random", 3)
    assert (changed.search.time_budget, changed.search.random_seed) == (0.25, None)


@pytest.mark.parametrize("name, value, words", [
    ("solver.num_step_scales", 9, "must be <= 8"),
    ("solver.damping_mode", "fading", "must be one of ['constant', 'residual']"),
    ("search.seeding", "uniform", "must be one of ['nearest', 'random']"),
    ("search.min_successes", 0, "must be >= 1"),
    ("search.time_budget", float("nan"), "must be None or a finite positive number"),
    ("search.max_step_norm", 0.0, "must be a finite positive number"),
])
def test_bad_values_name_the_parameter(name, value, words):
    with pytest.raises(ConfigError) as info:
        config_from_values({name: value})
    assert info.value.parameter == name and words in str(info.value)


def test_robot_description_with_a_byte_order_mark_loads_and_bad_text_is_not_echoed():
    """Issue 23 item 7 at the node's parameter: a robot_description read with a BOM is XML, and
    the error for text that is neither XML nor a file quotes only its beginning."""
    from direction_up_ik.robots import bundled_robot
    from direction_up_ik.ros.robot_model import load_robot_model

    text = bundled_robot("panda_like").urdf_path().read_text(encoding="utf-8")
    values = {"end_effectors": ["tool"], "end_effector.tool.link": "panda_hand"}
    model = load_robot_model(config_from_values({**values, "robot_description": "\ufeff" + text}))
    assert model.num_dofs == 7 and model.root_link == "panda_link0"
    with pytest.raises(ConfigError) as info:
        load_robot_model(config_from_values({**values, "robot_description": "urdf: " + text}))
    assert info.value.parameter == "robot_description"
    assert "cannot read file" in str(info.value) and len(str(info.value)) < 500, str(info.value)[:1000]


def test_service_queue_depth_is_a_read_only_parameter_with_a_range():
    """Issue 23 item 1: how many ~/solve requests may wait at once; rclpy's default (10) lost
    requests of a few planner threads."""
    spec = PARAMETER_BY_NAME["service_queue_depth"]
    assert spec.type == "integer" and spec.read_only and spec.default >= 100
    assert spec.min_value == 1 and spec.max_value >= spec.default
    assert "never answered" in spec.description and "Read-only" in spec.description
    assert config_from_values({}).service_queue_depth == spec.default
    assert config_from_values({"service_queue_depth": 250}).service_queue_depth == 250
    for bad, words in ((0, "must be >= 1"), (spec.max_value + 1, "must be <="), (2.5, "must be an integer")):
        with pytest.raises(ConfigError) as info:
            config_from_values({"service_queue_depth": bad})
        assert info.value.parameter == "service_queue_depth" and words in str(info.value)


CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config"
ROBOT_FILES = ("dual_arm_torso", "panda_like", "ur5_like")


@pytest.mark.parametrize("robot", ROBOT_FILES)
def test_shipped_parameter_files_apply_in_any_namespace(robot):
    """Issue 23 item 8: ``ros2 launch ... namespace:=left_cell`` must not drop the file."""
    path = CONFIG / f"{robot}.yaml"
    plain = parameter_file_values(path)
    assert plain["robot"] == robot and len(plain) > 10
    for fqn in ("/left_cell/direction_up_ik_node", "/plant/cell_2/direction_up_ik_node"):
        assert parameter_file_values(path, fqn) == plain, fqn
    config = config_from_values(plain)  # and they are valid
    assert config.robot == robot


@pytest.mark.parametrize("key, matches", [
    ("direction_up_ik_node", {"/direction_up_ik_node"}),
    ("/direction_up_ik_node", {"/direction_up_ik_node"}),
    ("/**/direction_up_ik_node", {"/direction_up_ik_node", "/left_cell/direction_up_ik_node",
                                  "/plant/cell_2/direction_up_ik_node"}),
    ("/*/direction_up_ik_node", {"/left_cell/direction_up_ik_node"}),
    ("/left_cell/direction_up_ik_node", {"/left_cell/direction_up_ik_node"}),
    ("/**", {"/direction_up_ik_node", "/left_cell/direction_up_ik_node", "/plant/cell_2/direction_up_ik_node",
             "/command_echo"}),
    ("/**/command_echo", {"/command_echo"}),
])
def test_parameter_file_keys_name_nodes_as_rcl_does(tmp_path, key, matches):
    path = tmp_path / "params.yaml"
    path.write_text(f"'{key}':\n  ros__parameters:\n    solver:\n      max_iters: 7\n")
    for fqn in ("/direction_up_ik_node", "/left_cell/direction_up_ik_node", "/plant/cell_2/direction_up_ik_node",
                "/command_echo"):
        expected = {"solver.max_iters": 7} if fqn in matches else {}
        assert parameter_file_values(path, fqn) == expected, fqn


def test_a_file_that_is_no_parameter_file_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("direction_up_ik_node:\n  robot: panda_like\n")
    with pytest.raises(ConfigError, match="entry 'direction_up_ik_node' has no ros__parameters"):
        parameter_file_values(path)
    with pytest.raises(ConfigError, match="cannot read"):
        parameter_file_values(tmp_path / "missing.yaml")



# ------------------------------------------------------------------ collision.* (issue 24)
def _table(**changes):
    values = {"collision.obstacles": ["table"], "collision.obstacle.table.shape": "box",
              "collision.obstacle.table.dimensions": [1.2, 0.8, 0.05],
              "collision.obstacle.table.xyz": [0.6, 0.0, 0.7], "collision.obstacle.table.rpy": [0.0, 0.0, 0.3]}
    values.update(changes)
    return values


def test_collision_parameters_defaults_and_rules():
    config = config_from_values({})
    assert (config.collision_enabled, config.collision_padding, config.obstacles) == (True, 0.0, ())
    assert config.collision_srdf_source() == ("", "")
    assert not config.markers_collision_bodies
    padding = PARAMETER_BY_NAME["collision.padding"]
    assert padding.read_only and padding.min_value == 0.0 and "metres" in padding.description
    assert not PARAMETER_BY_NAME["collision.enabled"].read_only  # live: whether solutions are checked
    assert PARAMETER_BY_NAME["collision.srdf"].read_only and PARAMETER_BY_NAME["collision.obstacles"].read_only
    assert config_from_values({"collision.padding": 0.02}).collision_padding == 0.02
    for bad, words in ((-0.01, "must be >= 0.0"), (float("nan"), "must be finite"), (5.0, "must be <= 0.5"),
                       ("1cm", "must be a number")):
        with pytest.raises(ConfigError) as info:
            config_from_values({"collision.padding": bad})
        assert info.value.parameter == "collision.padding" and words in str(info.value), str(info.value)


def test_collision_srdf_falls_back_on_moveit_s_srdf_parameters():
    srdf = "<robot name='r'/>"
    assert config_from_values({"moveit.srdf_path": "/a.srdf"}).collision_srdf_source() == (
        "/a.srdf", "moveit.srdf_path")
    assert config_from_values({"moveit.srdf_path": "/a.srdf", "robot_description_semantic": srdf}
                              ).collision_srdf_source() == (srdf, "robot_description_semantic")
    assert config_from_values({"collision.srdf": "/c.srdf", "robot_description_semantic": srdf}
                              ).collision_srdf_source() == ("/c.srdf", "collision.srdf")


def test_obstacle_parameters_become_obstacles():
    (table,) = config_from_values(_table()).obstacles
    assert (table.id, table.shape, table.dimensions) == ("table", "box", (1.2, 0.8, 0.05))
    assert (table.xyz, table.rpy) == ((0.6, 0.0, 0.7), (0.0, 0.0, 0.3))
    values = {"collision.obstacles": ["post", "ball"], "collision.obstacle.post.shape": "cylinder",
              "collision.obstacle.post.dimensions": [1.5, 0.05], "collision.obstacle.ball.shape": "sphere",
              "collision.obstacle.ball.dimensions": [0.1]}
    post, ball = config_from_values(values).obstacles
    assert (post.dimensions, ball.dimensions, ball.xyz) == ((1.5, 0.05), (0.1,), (0.0, 0.0, 0.0))


@pytest.mark.parametrize("changes, parameter, words", [
    ({"collision.obstacles": ["table", "table"]}, "collision.obstacles", "ids must be unique"),
    ({"collision.obstacles": ["my table"]}, "collision.obstacles", "invalid id 'my table'"),
    ({"collision.obstacle.table.shape": "cone"}, "collision.obstacle.table.shape",
     "must be one of ['box', 'sphere', 'cylinder']"),
    ({"collision.obstacle.table.dimensions": [1.2, 0.8]}, "collision.obstacle.table.dimensions",
     "a box needs 3 value(s) [x, y, z], got 2"),
    ({"collision.obstacle.table.dimensions": [1.2, 0.0, 0.05]}, "collision.obstacle.table.dimensions",
     "finite and positive, got y 0.0"),
    ({"collision.obstacle.table.dimensions": [1.2, float("inf"), 0.05]}, "collision.obstacle.table.dimensions",
     "got y inf"),
    ({"collision.obstacle.table.xyz": [0.6, 0.0]}, "collision.obstacle.table.xyz", "must be 3 finite numbers"),
    ({"collision.obstacle.table.rpy": [0.0, float("nan"), 0.0]}, "collision.obstacle.table.rpy",
     "must be 3 finite numbers"),
])
def test_bad_obstacle_parameters_name_the_parameter(changes, parameter, words):
    with pytest.raises(ConfigError) as info:
        config_from_values(_table(**changes))
    assert info.value.parameter == parameter and words in str(info.value), str(info.value)
