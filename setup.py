"""Setuptools entry for pip / editable installs (metadata lives in setup.cfg).

The ROS 2 build (colcon, ament_cmake) uses CMakeLists.txt instead; both
install the same Python package, launch and config files.
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
    ],
)
