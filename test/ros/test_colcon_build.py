"""`colcon build` of this package in a temporary workspace, with the venv as underlay, and
`pip install --prefix` of the same sources.

Checks what a ROS 2 user gets from the ament_cmake build: the generated
interfaces, the Python package merged with them in one folder, the node
executable for `ros2 run`, and the share/ data; and that the pip install (setup.py) puts
the same data and executables in the same places (issue 23, item 8). Takes a minute or two.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

# Slow, and independent of the test process's kernels: on a fresh clone it runs while they compile.
pytestmark = [pytest.mark.slow, pytest.mark.without_kernels]

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "direction_up_ik"
VENV = Path(sys.prefix)
# What a source checkout of the package consists of for colcon; build trees,
# the venv and caches stay behind.
SOURCE_ITEMS = (
    "CMakeLists.txt",
    "package.xml",
    "setup.py",
    "setup.cfg",
    "msg",
    "srv",
    "scripts",
    "resource",
    "launch",
    "config",
    PACKAGE,
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def _copy_sources(destination: Path) -> None:
    destination.mkdir(parents=True)
    for item in SOURCE_ITEMS:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, destination / item, ignore=IGNORED)
        elif source.is_file():
            shutil.copy2(source, destination / item)


def _underlay_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLCON_", "AMENT_", "CMAKE_PREFIX"))}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV)
    env["AMENT_PREFIX_PATH"] = str(VENV)
    env["CMAKE_PREFIX_PATH"] = str(VENV)
    # The ROS wheels' start-up hook re-executes Python once with LD_LIBRARY_PATH
    # set and marks that in this variable, which children inherit; drop it so
    # the commands below start like they would from a fresh shell.
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    return env


@pytest.fixture(scope="module")
def colcon_install(tmp_path_factory) -> Path:
    colcon = VENV / "bin" / "colcon"
    if not colcon.exists():
        pytest.fail(f"{colcon} missing: run scripts/bootstrap.sh (requirements/dev.txt)")
    workspace = tmp_path_factory.mktemp("colcon_ws")
    _copy_sources(workspace / "src" / PACKAGE)
    env = _underlay_env()
    env["COLCON_HOME"] = str(workspace / ".colcon")  # no user-level colcon defaults
    # colcon runs make with -j<cores> -l<cores>: with the other test workers busy, the load
    # limit keeps make at one job, and this build is the suite's longest test (docs/performance.md).
    env["MAKEFLAGS"] = f"-j{os.cpu_count() or 1}"
    command = [
        str(colcon),
        "--log-base",
        str(workspace / "log"),
        "build",
        "--base-paths",
        str(workspace / "src"),
        "--build-base",
        str(workspace / "build"),
        "--install-base",
        str(workspace / "install"),
        "--event-handlers",
        "console_direct-",
        "console_stderr-",
        "--cmake-args",
        f"-DPython3_EXECUTABLE={VENV / 'bin' / 'python'}",
        "-DBUILD_TESTING=OFF",
    ]
    completed = subprocess.run(
        command, cwd=workspace, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    if completed.returncode != 0:
        logs = sorted((workspace / "log").glob("latest_build/*/stdout_stderr.log"))
        detail = "\n".join(log.read_text(errors="replace")[-4000:] for log in logs)
        pytest.fail(f"colcon build failed ({completed.returncode}):\n{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}\n{detail}")
    return workspace / "install"


def test_installs_interfaces_node_and_data(colcon_install: Path):
    # Compare with the copy that was built (the repo may change meanwhile).
    source = colcon_install.parent / "src" / PACKAGE
    prefix = colcon_install / PACKAGE
    share = prefix / "share" / PACKAGE
    site = prefix / Path(sysconfig.get_path("purelib", vars={"base": ".", "platbase": "."}))

    # ament index: package marker and interface list
    index = prefix / "share" / "ament_index" / "resource_index"
    assert (index / "packages" / PACKAGE).is_file()
    interfaces = (index / "rosidl_interfaces" / PACKAGE).read_text().split()
    for name in ("msg/DirectionUpTarget.msg", "msg/CandidateResult.msg", "srv/SolveDirectionUpIK.srv"):
        assert name in interfaces

    # metadata and data
    assert (share / "package.xml").read_text() == (source / "package.xml").read_text()
    assert (share / "launch").is_dir()
    assert (share / "config").is_dir()
    assert not list(share.rglob(".gitkeep"))
    for urdf in sorted((source / PACKAGE / "robots" / "urdf").glob("*.urdf")):
        assert (share / "urdf" / urdf.name).read_bytes() == urdf.read_bytes()
    for data in ("launch", "config"):
        for path in (source / data).rglob("*"):
            if path.is_file() and path.name != ".gitkeep":
                assert (share / path.relative_to(source)).is_file(), path

    for name in ("direction_up_ik.launch.py", "demo.launch.py"):
        assert (share / "launch" / name).is_file(), name
    for robot in ("dual_arm_torso", "panda_like", "ur5_like"):
        assert (share / "config" / f"{robot}.yaml").is_file(), robot

    # executables for `ros2 run direction_up_ik direction_up_ik_node` / `command_echo`
    for exe, module in (("direction_up_ik_node", "direction_up_ik.ros.node"),
                        ("command_echo", "direction_up_ik.ros.command_echo")):
        path = prefix / "lib" / PACKAGE / exe
        assert path.is_file() and os.access(path, os.X_OK), exe
        first_line, *rest = path.read_text().splitlines()
        assert first_line == f"#!{VENV / 'bin' / 'python'}"
        assert f"from {module} import main" in rest

    # generated C libraries and the Python package in one folder, with the
    # source tree's __init__.py (not rosidl's empty one)
    assert (prefix / "lib" / f"lib{PACKAGE}__rosidl_typesupport_c.so").is_file()
    assert (site / PACKAGE / "__init__.py").read_text() == (source / PACKAGE / "__init__.py").read_text()
    assert (site / PACKAGE / "msg" / "__init__.py").is_file()
    assert (site / PACKAGE / "srv" / "__init__.py").is_file()
    for module in (source / PACKAGE).rglob("*.py"):
        if "__pycache__" not in module.parts:
            assert (site / module.relative_to(source)).is_file(), module


@pytest.fixture(scope="module")
def pip_install(tmp_path_factory) -> Path:
    """Prefix of ``pip install --prefix`` of a copy of the sources (setup.py / setup.cfg)."""
    root = tmp_path_factory.mktemp("pip_install")
    _copy_sources(root / "src")
    prefix = root / "prefix"
    completed = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--ignore-installed", "--no-warn-script-location", "--prefix", str(prefix), str(root / "src")],
        cwd=root, env=_underlay_env(), capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if completed.returncode != 0:
        pytest.fail(f"pip install failed ({completed.returncode}):\n{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}")
    return prefix


def _ros_files(prefix: Path) -> dict:
    """{path relative to ``prefix``: (bytes, executable)} of what `ros2 run`, `ros2 launch` and
    the ament index read: share/<package>/{package.xml, launch, config, urdf}, the package
    marker and lib/<package>/. (The CMake build's interface and environment files are its own.)"""
    share = prefix / "share" / PACKAGE
    paths = [prefix / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE, share / "package.xml"]
    for folder in (share / "launch", share / "config", share / "urdf", prefix / "lib" / PACKAGE):
        paths += [p for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    return {str(p.relative_to(prefix)): (p.read_bytes(), os.access(p, os.X_OK)) for p in paths if p.exists()}


def test_pip_installs_what_the_cmake_build_installs(colcon_install: Path, pip_install: Path):
    """setup.py's docstring says both builds install the same; the URDFs and the
    lib/direction_up_ik executables were missing from the pip install."""
    cmake, pip = _ros_files(colcon_install / PACKAGE), _ros_files(pip_install)
    assert sorted(pip) == sorted(cmake)
    for path, (data, executable) in cmake.items():
        if path.startswith("lib/"):  # launchers: each build's own kind, both executable
            assert executable and pip[path][1], path
        else:
            assert pip[path] == (data, False) and not executable, path
    assert {p for p in cmake if p.startswith("lib/")} == {f"lib/{PACKAGE}/direction_up_ik_node",
                                                          f"lib/{PACKAGE}/command_echo"}
    assert any(p.startswith(f"share/{PACKAGE}/urdf/") for p in cmake)


@pytest.mark.parametrize("build", ["cmake", "pip"])
@pytest.mark.parametrize("exe, logger", [("direction_up_ik_node", "direction_up_ik_node"), ("command_echo", "command_echo")])
def test_installed_executables_run_their_entry_points(colcon_install: Path, pip_install: Path, build, exe, logger):
    """`ros2 run direction_up_ik <exe>` as a user runs it from each install (the workspace's
    setup.bash sourced, or the pip prefix on PYTHONPATH): the executable reaches the entry
    point, which rejects an unknown robot with exit code 1 and one line."""
    if build == "cmake":
        path = colcon_install / PACKAGE / "lib" / PACKAGE / exe
        setup = f'source "{colcon_install}/setup.bash" && '
        env = _underlay_env()
        env.pop("PYTHONPATH", None)
    else:
        path = pip_install / "lib" / PACKAGE / exe
        setup = ""
        env = _underlay_env()
        env["PYTHONPATH"] = str(pip_install / Path(sysconfig.get_path("purelib", vars={"base": ".", "platbase": "."})))
    env.setdefault("ROS_DOMAIN_ID", "77")
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    command = f'{setup}exec "{path}" --ros-args -p robot:=no_such_robot'
    completed = subprocess.run(["bash", "-c", command], cwd=path.parent, env=env, capture_output=True, text=True,
                               timeout=300, stdin=subprocess.DEVNULL)  # a hang catcher
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    lines = [line for line in output.splitlines() if "invalid configuration" in line]
    assert len(lines) == 1 and "parameter 'robot'" in lines[0] and f"[{logger}]" in lines[0], output
    assert "Traceback" not in output, output


def test_installed_package_imports_with_setup_environment(colcon_install: Path):
    probe = (
        "import json, direction_up_ik, direction_up_ik.srv, direction_up_ik.msg\n"
        "from direction_up_ik.srv import SolveDirectionUpIK\n"
        "from direction_up_ik.msg import DirectionUpTarget\n"
        "request = SolveDirectionUpIK.Request(candidates=[])\n"
        "request.active_joints = ['j1']\n"
        "print(json.dumps({'init': direction_up_ik.__file__, 'srv': direction_up_ik.srv.__file__,"
        " 'msg': direction_up_ik.msg.__file__, 'joints': list(request.active_joints),"
        " 'axis': DirectionUpTarget.MODE_AXIS}))\n"
    )
    script = f'source "{colcon_install}/setup.bash" && exec python -c "$PROBE"'
    env = _underlay_env()
    env["PROBE"] = probe
    env.pop("PYTHONPATH", None)
    # cwd outside the repo: `python -c` puts the working directory first on sys.path.
    completed = subprocess.run(
        ["bash", "-c", script],
        cwd=colcon_install,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    installed = str(colcon_install / PACKAGE)
    assert found["init"].startswith(installed), found
    assert found["srv"].startswith(installed), found
    assert found["msg"].startswith(installed), found
    assert found["joints"] == ["j1"] and found["axis"] == 1
