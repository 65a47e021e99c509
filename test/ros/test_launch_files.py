"""Launch files: always checked for syntax and arguments, and what they compute
(``ros/launch_support.py``) for real; run with launch / launch_ros when installed.

launch_ros is not installable from PyPI, so the tests that run a launch file skip here; they
run against stand-in executables (shell scripts that record how they were started) in a
temporary install prefix, so they need no robot_state_publisher and no ROS graph.
"""

import ast
import importlib.util
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from direction_up_ik.ros.parameter_files import parameter_file_values
from direction_up_ik.ros.launch_support import (NODE_LAUNCH_ARGUMENTS, command_echo_parameters, find_executable,
                                                missing_executables, node_fqn, node_parameters, resolve_topic)

REPO = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = REPO / "launch"
FILES = sorted(LAUNCH.glob("*.launch.py"))
ROBOTS = ("dual_arm_torso", "panda_like", "ur5_like")
needs_launch_ros = pytest.mark.skipif(
    importlib.util.find_spec("launch_ros") is None,
    reason="launch_ros is not installable from PyPI (ROS 2 Jazzy wheels); these launch files are for "
           "ROS 2 installations (../shared/tools/launch-overlay.md builds it for a local check)")


def test_launch_files_exist():
    assert {f.name for f in FILES} == {"direction_up_ik.launch.py", "demo.launch.py"}


def _declared_arguments(tree) -> set:
    """Names of the DeclareLaunchArgument calls with a literal name; NODE_LAUNCH_ARGUMENTS's keys
    when the file declares them from it."""
    declared = set()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "DeclareLaunchArgument":
            first = call.args[0]
            declared |= {first.value} if isinstance(first, ast.Constant) else set(NODE_LAUNCH_ARGUMENTS)
    return declared


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_launch_file_parses_and_declares_its_arguments(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    expected = {"direction_up_ik.launch.py": {"robot", "config", "namespace", "urdf_path", "xacro_args",
                                              "robot_description_topic"},
                "demo.launch.py": {"robot", "config", "namespace"}}[path.name]
    assert _declared_arguments(tree) == expected


@pytest.mark.parametrize("arguments, expected", [
    ({"robot": "ur5_like"}, {"robot": "ur5_like"}),
    ({"robot": "", "urdf_path": "/cell/ur.urdf.xacro", "xacro_args": " ur_type:=ur5e  name:=ur "},
     {"robot": "dual_arm_torso", "urdf_path": "/cell/ur.urdf.xacro", "xacro_args": ["ur_type:=ur5e", "name:=ur"]}),
    ({"robot": "panda_like", "robot_description_topic": "/robot_description", "urdf_path": ""},
     {"robot": "panda_like", "robot_description_topic": "/robot_description"}),
])
def test_node_parameters_from_the_launch_arguments(arguments, expected):
    """What direction_up_ik.launch.py passes the node: the config file, then the robot model's
    parameters of the arguments given (the others stay the file's)."""
    assert node_parameters(arguments, "/cfg.yaml") == ["/cfg.yaml", expected]


def test_node_launch_parameters_are_node_parameters_and_the_demo_uses_the_topic():
    from direction_up_ik.ros.config import PARAMETER_BY_NAME

    passed = node_parameters({"urdf_path": "a.xacro", "xacro_args": "a:=1",
                              "robot_description_topic": "t"}, "c.yaml")[1]
    assert set(passed) <= set(PARAMETER_BY_NAME)
    assert set(NODE_LAUNCH_ARGUMENTS) - {"config", "namespace"} <= set(PARAMETER_BY_NAME)
    # demo.launch.py hands the included launch file robot_description_topic (relative: the node
    # and robot_state_publisher share the demo's namespace).
    tree = ast.parse((LAUNCH / "demo.launch.py").read_text())
    demo = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
            for t in n.targets if getattr(t, "id", "") == "DEMO_NODE_ARGUMENTS"}
    assert demo["DEMO_NODE_ARGUMENTS"] == {"robot_description_topic": "robot_description"}
    assert set(demo["DEMO_NODE_ARGUMENTS"]) <= set(NODE_LAUNCH_ARGUMENTS)


# ----------------------------------------------------------------------------- launch_support
def _install_prefix(root: pathlib.Path, executables, log: pathlib.Path) -> pathlib.Path:
    """A prefix with an ament index entry and a stand-in executable per (package, executable),
    and this package's share folder (launch, config, urdf). A stand-in appends its name and the
    content of its parameter files to ``log``, then exits 0."""
    prefix = root / "prefix"
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True, exist_ok=True)
    for package, executable in executables:
        (index / package).write_text("")
        path = prefix / "lib" / package / executable
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"""#!/bin/sh
echo "started {executable}" >> "{log}"
while [ $# -gt 0 ]; do
  if [ "$1" = "--params-file" ]; then cat "$2" >> "{log}"; fi
  shift
done
""")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    share = prefix / "share" / "direction_up_ik"
    share.mkdir(parents=True, exist_ok=True)
    for folder in ("launch", "config"):
        shutil.copytree(REPO / folder, share / folder, dirs_exist_ok=True)
    shutil.copytree(REPO / "direction_up_ik" / "robots" / "urdf", share / "urdf", dirs_exist_ok=True)
    return prefix


def test_find_executable_looks_where_ros2_run_does(tmp_path):
    prefix = _install_prefix(tmp_path, [("direction_up_ik", "command_echo")], tmp_path / "log")
    other = tmp_path / "empty"
    other.mkdir()
    assert find_executable("direction_up_ik", "command_echo", [str(other), str(prefix)]) == \
        prefix / "lib" / "direction_up_ik" / "command_echo"
    assert find_executable("direction_up_ik", "direction_up_ik_node", [str(prefix)]) is None
    assert find_executable("robot_state_publisher", "robot_state_publisher", [str(prefix)]) is None
    needed = [("robot_state_publisher", "robot_state_publisher"), ("direction_up_ik", "command_echo")]
    assert missing_executables(needed, [str(prefix)]) == ["robot_state_publisher/robot_state_publisher"]
    (prefix / "lib" / "direction_up_ik" / "command_echo").chmod(0o644)  # not executable: not found
    assert find_executable("direction_up_ik", "command_echo", [str(prefix)]) is None


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("namespace", ["", "left_cell"])
def test_command_echo_listens_where_the_node_publishes(robot, namespace):
    fqn = node_fqn(namespace)
    values = parameter_file_values(REPO / "config" / f"{robot}.yaml", fqn)
    echo = command_echo_parameters(values, fqn)
    expected = {"dual_arm_torso": ("joint_state", f"{fqn}/joint_command"),
                "panda_like": ("joint_trajectory", "/panda_arm_controller/joint_trajectory"),
                "ur5_like": ("float64_multi_array", "/forward_position_controller/commands")}[robot]
    assert (echo["command_type"], echo["command_topic"]) == expected
    assert echo.get("joint_order", []) == list(values.get("command.joint_order") or [])


def test_topics_resolve_as_the_node_resolves_them():
    assert node_fqn("") == node_fqn("/") == "/direction_up_ik_node"
    assert node_fqn("/a/b/") == "/a/b/direction_up_ik_node"
    fqn = "/cell/direction_up_ik_node"
    assert resolve_topic("~/joint_command", fqn) == "/cell/direction_up_ik_node/joint_command"
    assert resolve_topic("commands", fqn) == "/cell/commands"
    assert resolve_topic("/commands", fqn) == "/commands"


# ----------------------------------------------------------------------------- with launch_ros
@needs_launch_ros
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_launch_description_builds(path):  # pragma: no cover - needs a ROS installation
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    names = {a.name for a in description.get_launch_arguments()}
    assert {"robot", "config"} <= names


def _run_demo(prefix: pathlib.Path, *arguments: str) -> subprocess.CompletedProcess:
    """The installed demo.launch.py run as ``ros2 launch`` runs it, with only ``prefix`` on
    AMENT_PREFIX_PATH."""
    script = ("import sys, launch\n"
              "from launch.launch_description_sources import AnyLaunchDescriptionSource\n"
              "args = sys.argv[2:]\n"
              "service = launch.LaunchService(argv=args, noninteractive=True)\n"
              "service.include_launch_description(launch.LaunchDescription([launch.actions.IncludeLaunchDescription("
              "AnyLaunchDescriptionSource(sys.argv[1]), launch_arguments=[tuple(a.split(':=', 1)) for a in args])]))\n"
              "sys.exit(service.run())\n")
    env = dict(os.environ, AMENT_PREFIX_PATH=str(prefix))
    return subprocess.run([sys.executable, "-c", script, str(prefix / "share" / "direction_up_ik" / "launch" /
                                                              "demo.launch.py"), *arguments],
                          env=env, capture_output=True, text=True, timeout=300)  # a hang catcher


@needs_launch_ros
def test_demo_without_robot_state_publisher_starts_nothing(tmp_path):  # pragma: no cover
    """Issue 23 item 8: the demo used to start the solver and then fail on the missing
    robot_state_publisher, leaving the solver running. Now it checks first: exit code not 0,
    one message naming what is missing, no process started."""
    log = tmp_path / "started.log"
    prefix = _install_prefix(tmp_path, [("direction_up_ik", "command_echo"),
                                        ("direction_up_ik", "direction_up_ik_node")], log)
    result = _run_demo(prefix, "robot:=panda_like")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "robot_state_publisher/robot_state_publisher" in output and "nothing started" in output, output
    assert not log.exists(), log.read_text()


@needs_launch_ros
@pytest.mark.parametrize("robot", ROBOTS)
def test_demo_starts_the_robot_first_and_points_command_echo_at_the_command(tmp_path, robot):  # pragma: no cover
    log = tmp_path / "started.log"
    prefix = _install_prefix(tmp_path, [("robot_state_publisher", "robot_state_publisher"),
                                        ("direction_up_ik", "command_echo"),
                                        ("direction_up_ik", "direction_up_ik_node")], log)
    result = _run_demo(prefix, f"robot:={robot}", "namespace:=left_cell")
    assert result.returncode == 0, result.stdout + result.stderr
    text = log.read_text()
    started = [line.split()[1] for line in text.splitlines() if line.startswith("started ")]
    assert started == ["robot_state_publisher", "command_echo", "direction_up_ik_node"], text
    echo = command_echo_parameters(parameter_file_values(REPO / "config" / f"{robot}.yaml",
                                                         "/left_cell/direction_up_ik_node"),
                                   "/left_cell/direction_up_ik_node")
    for name, value in echo.items():
        assert f"{name}: {value}" in text or name == "joint_order", (name, value, text)
