"""xacro robot descriptions (core/xacro_files.py): a small multi-file xacro written by the test
(helpers.write_xacro_robot) with macros, arguments, a relative include and a ``$(find pkg)``
include through a test ament index (a prefix in tmp_path on AMENT_PREFIX_PATH)."""

from __future__ import annotations

import numpy as np
import pytest

from direction_up_ik.core import RobotKinematics, xacro_to_urdf
from direction_up_ik.core.errors import InputValidationError, RobotModelError
from direction_up_ik.core.xacro_files import is_xacro_path, parse_xacro_args

from helpers import write_xacro_robot

pytest.importorskip("xacro")

@pytest.fixture
def arm_xacro(tmp_path, monkeypatch):
    """The sample xacro robot (helpers.write_xacro_robot), its package on AMENT_PREFIX_PATH."""
    top, prefix = write_xacro_robot(tmp_path)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    return top


def test_macros_arguments_and_includes_expand(arm_xacro):
    model = RobotKinematics.from_urdf(arm_xacro, ["left_tool"], xacro_args=["dof:=4", "prefix:=left_",
                                                                           "link_length:=0.25"])
    assert model.joint_names == ("left_joint_1", "left_joint_2", "left_joint_3", "left_joint_4")
    np.testing.assert_allclose(model.upper_limits, 2.5)  # the property of the relative include
    # Planar chain: TCP at sum of link vectors; all joints at 0 -> 4 * 0.25 m along +X.
    np.testing.assert_allclose(model.tcp_transforms(np.zeros(4))[0][:3, 3], (1.0, 0.0, 0.0), atol=1e-12)
    q = np.array([0.5, -0.2, 0.3, 0.1])
    angles = np.cumsum(q)
    expected = 0.25 * np.array([np.sum(np.cos(angles)), np.sum(np.sin(angles)), 0.0])
    np.testing.assert_allclose(model.tcp_transforms(q)[0][:3, 3], expected, atol=1e-9)


def test_defaults_mapping_arguments_and_the_text_helper(arm_xacro):
    text = xacro_to_urdf(arm_xacro, {"link_length": "0.5"})
    assert text.lstrip().startswith("<") and "package://test_arm_description/meshes/tool.stl" in text
    model = RobotKinematics.from_urdf(text, ["tool"])
    assert model.num_dofs == 3  # dof's default
    np.testing.assert_allclose(model.tcp_transforms(np.zeros(3))[0][:3, 3], (1.5, 0.0, 0.0), atol=1e-12)
    assert RobotKinematics.from_urdf(str(arm_xacro), ["tool"]).num_dofs == 3  # a str path too


def test_find_of_a_package_outside_the_index_names_file_and_package(arm_xacro, monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(empty))
    with pytest.raises(RobotModelError) as info:
        xacro_to_urdf(arm_xacro)
    message = str(info.value)
    assert message.startswith(f"xacro: '{arm_xacro}'") and "test_arm_description" in message
    assert "\n" not in message


@pytest.mark.parametrize("body, words", [
    ('<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="$(arg missing)"/></robot>',
     ["Undefined substitution argument", "missing"]),
    ('<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><xacro:nope_macro/></robot>', ["nope_macro"]),
    ('<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="a">', ["XML parsing error"]),
    ('<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="${1/0}"/></robot>', ["division"]),
])
def test_xacro_errors_are_one_line_naming_the_file(tmp_path, body, words):
    path = tmp_path / "bad.urdf.xacro"
    path.write_text(body)
    with pytest.raises(RobotModelError) as info:
        RobotKinematics.from_urdf(path, ["a"])
    message = str(info.value)
    assert message.startswith(f"xacro: '{path}': ") and "\n" not in message, message
    assert all(w in message for w in words), message


def test_error_in_an_included_file_names_it(arm_xacro):
    (arm_xacro.parent / "common.xacro").write_text(
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><xacro:property name="x" value="${undefined_name}"/>'
        '<link name="${x}"/></robot>')
    with pytest.raises(RobotModelError) as info:
        xacro_to_urdf(arm_xacro)
    assert "common.xacro" in str(info.value) and "undefined_name" in str(info.value), str(info.value)


def test_missing_file_is_a_model_error(tmp_path):
    with pytest.raises(RobotModelError, match="xacro: '.*nowhere.urdf.xacro'"):
        xacro_to_urdf(tmp_path / "nowhere.urdf.xacro")


@pytest.mark.parametrize("args, field, words", [
    (["dof=4"], "xacro_args[0]", "name:=value"),
    (["dof:=4", ":=1"], "xacro_args[1]", "argument name"),
    (["dof:=4", "dof:=5"], "xacro_args[1]", "twice"),
    ("dof:=4", "xacro_args", "one string"),
])
def test_malformed_arguments_name_the_entry(args, field, words):
    with pytest.raises(InputValidationError) as info:
        parse_xacro_args(args)
    assert info.value.field == field and words in info.value.rule


def test_arguments_parse_and_paths_are_told_apart(arm_xacro):
    assert parse_xacro_args(["a:=1", "b_c:=x:=y", "d:="]) == {"a": "1", "b_c": "x:=y", "d": ""}
    assert is_xacro_path(arm_xacro) and is_xacro_path("robot.xacro")
    assert not is_xacro_path("robot.urdf") and not is_xacro_path("<robot name='a.xacro'/>")
    assert not is_xacro_path(None)


def test_xacro_args_without_a_xacro_file_are_refused():
    from direction_up_ik.robots import bundled_robot

    with pytest.raises(InputValidationError, match="xacro_args: only applies to a .xacro file"):
        RobotKinematics.from_urdf(bundled_robot("ur5_like").urdf_path(), ["tool0"], xacro_args=["a:=1"])
