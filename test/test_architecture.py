"""The package's layout rules (docs/design.md), checked on its sources and in fresh interpreters:

* the core imports no adapter; ``groups/`` (shared by both adapters) imports neither adapter
  nor ROS; ``ros/`` never imports ``moveit/``; ``moveit/`` never imports ``ros/`` or rclpy;
* no module imports another that (directly or through others) imports it back;
* every exception class the project defines derives from ``DirectionUpIKError``;
* nothing in the package imports a benchmark;
* no two test modules share a basename (pytest would refuse to collect the suite).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import pathlib
import pkgutil
import subprocess
import sys
from typing import Dict, Set

import pytest

import direction_up_ik
from direction_up_ik.core.errors import DirectionUpIKError

PACKAGE_DIR = pathlib.Path(direction_up_ik.__file__).resolve().parent
NAME = "direction_up_ik"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> Dict[str, pathlib.Path]:
    """{module name: file} of every module of the package's source tree."""
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _imports(name: str, path: pathlib.Path) -> Set[str]:
    """Every name imported anywhere in a module (also inside functions), absolute; for
    ``from x import y``, ``x.y`` when that is a module, else ``x``."""
    modules = _sources()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in modules else base)
    return out


def _graph() -> Dict[str, Set[str]]:
    modules = _sources()
    return {name: {m for m in _imports(name, path) if m in modules and m != name}
            for name, path in modules.items()}


@pytest.mark.parametrize("importer, forbidden", [
    ("direction_up_ik.core", ("direction_up_ik.ros", "direction_up_ik.moveit", "direction_up_ik.groups", "rclpy")),
    ("direction_up_ik.groups", ("direction_up_ik.ros", "direction_up_ik.moveit", "rclpy")),
    ("direction_up_ik.ros", ("direction_up_ik.moveit",)),
    ("direction_up_ik.moveit", ("direction_up_ik.ros", "rclpy")),
    ("direction_up_ik", ("benchmarks", "bench", "bench_peers")),
])
def test_modules_import_only_what_their_layer_allows(importer, forbidden):
    offences = [(name, imported) for name, path in _sources().items()
                if name == importer or name.startswith(importer + ".")
                for imported in sorted(_imports(name, path))
                if any(imported == f or imported.startswith(f + ".") for f in forbidden)]
    assert offences == []


def test_there_are_no_import_cycles():
    graph = _graph()
    state: Dict[str, int] = {}  # 1 on the current path, 2 done
    cycles = []

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; its last stdout line is JSON."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_ros_adapter_runs_without_the_moveit_one():
    pytest.importorskip("rclpy", reason="the ROS adapter needs rclpy (requirements/ros.txt)")
    report = _fresh(
        "import sys, json\n"
        "import direction_up_ik.ros.node, direction_up_ik.ros.config, direction_up_ik.ros.conversions\n"
        "import direction_up_ik.ros.drag, direction_up_ik.ros.command_echo\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('direction_up_ik.moveit'))))\n")
    assert report == []


def test_the_moveit_adapter_solves_without_rclpy():
    config_file = PACKAGE_DIR.parent / "config" / "panda_like_kinematics.yaml"
    report = _fresh(
        "import sys, json\n"
        "from types import SimpleNamespace as N\n"
        "from scipy.spatial.transform import Rotation\n"
        "from direction_up_ik import RobotKinematics\n"
        "from direction_up_ik.moveit import DirectionUpKinematicsPlugin, load_kinematics_yaml\n"
        "from direction_up_ik.robots import bundled_robot\n"
        "urdf = bundled_robot('panda_like').urdf_path().read_text()\n"
        f"(name, config), = load_kinematics_yaml({str(config_file)!r}).items()\n"
        "plugin = DirectionUpKinematicsPlugin(config)\n"
        "assert plugin.initialize(urdf, name, config.base_frame, config.tip_frames)\n"
        "goal = [0.3, -0.4, 0.2, -2.2, 0.1, 1.9, 0.6]\n"
        "arm = RobotKinematics.from_urdf(urdf, list(config.tip_frames), root_link=config.base_frame)\n"
        "tip = arm.link_transforms(goal, list(config.tip_frames))[0]\n"
        "x, y, z, w = Rotation.from_matrix(tip[:3, :3]).as_quat()\n"
        "pose = N(position=N(x=tip[0, 3], y=tip[1, 3], z=tip[2, 3]), orientation=N(x=x, y=y, z=z, w=w))\n"
        "result = plugin.search_position_ik([pose], [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8], timeout=1.0)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy' or m.startswith('direction_up_ik.ros'))\n"
        "print(json.dumps({'bad': bad, 'code': result.error_code}))\n")
    assert report["bad"] == []
    assert report["code"] == 1  # MoveItErrorCode.SUCCESS: it did solve


def _project_modules():
    """Every importable module of the package (the ROS adapter's only with rclpy)."""
    names = [NAME] + [m.name for m in pkgutil.walk_packages(direction_up_ik.__path__, NAME + ".")]
    for name in names:
        if name.startswith(NAME + ".ros.") or name in (NAME + ".msg", NAME + ".srv") \
                or name.startswith((NAME + ".msg.", NAME + ".srv.")):
            if importlib.util.find_spec("rclpy") is None:
                continue
        yield importlib.import_module(name)


def test_every_project_exception_derives_from_the_base_class():
    defined = {(cls.__module__, cls.__qualname__): cls for module in _project_modules()
               for _, cls in inspect.getmembers(module, inspect.isclass)
               if issubclass(cls, BaseException) and cls.__module__ == module.__name__
               and cls.__module__.startswith(NAME + ".")}
    assert len(defined) >= 10  # the core's errors, ConfigError, RequestError, ... were found
    outside = sorted(f"{m}.{q}" for (m, q), cls in defined.items() if not issubclass(cls, DirectionUpIKError))
    assert outside == []


def test_test_modules_have_unique_basenames():
    """pytest imports test folders without ``__init__.py`` by basename ("rootdir" mode): two
    ``test_x.py`` in different folders break collection of the whole suite on a clean clone."""
    seen: Dict[str, pathlib.Path] = {}
    clashes = []
    for path in sorted(pathlib.Path(__file__).resolve().parent.rglob("*.py")):
        if path.name in ("conftest.py", "__init__.py"):
            continue
        if path.name in seen:
            clashes.append(f"{seen[path.name]} and {path}")
        seen.setdefault(path.name, path)
    assert not clashes, "test modules sharing a basename: " + "; ".join(clashes)
