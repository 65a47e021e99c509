"""Setuptools entry for pip / editable installs (metadata lives in setup.cfg).

The ROS 2 build (colcon, ament_cmake) uses CMakeLists.txt instead. Both install the same
Python package and the same files under the prefix: the ament index marker,
share/direction_up_ik/{package.xml, launch/, config/, urdf/} and the executables
lib/direction_up_ik/{direction_up_ik_node, command_echo} for ``ros2 run`` (here shell
launchers of the console scripts, scripts/pip/; the CMake build writes Python launchers that
name its interpreter). Only the CMake build generates the msg/srv interfaces.
test/ros/test_colcon_build.py compares the two install trees.
"""
from glob import glob

from setuptools import setup

PACKAGE = "direction_up_ik"


def _files(pattern):
    return [path for path in sorted(glob(pattern)) if not path.endswith(".gitkeep")]


setup(
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", _files("launch/*")),
        (f"share/{PACKAGE}/config", _files("config/*")),
        (f"share/{PACKAGE}/urdf", _files(f"{PACKAGE}/robots/urdf/*.urdf")),
        (f"lib/{PACKAGE}", _files("scripts/pip/*")),
    ],
)
