"""The core must not pull in ROS: prove it in a fresh interpreter."""

import json
import subprocess
import sys


def test_importing_the_package_loads_no_ros_module():
    code = (
        "import sys, json, direction_up_ik, direction_up_ik.core, direction_up_ik.robots\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('rclpy', 'sensor_msgs', 'geometry_msgs', 'std_msgs', 'trajectory_msgs', "
        "'visualization_msgs', 'builtin_interfaces', 'rosidl_parser')"
        " or m.startswith(('direction_up_ik.ros', 'direction_up_ik.msg', 'direction_up_ik.srv'))]\n"
        "print(json.dumps({'bad': bad, 'api': hasattr(direction_up_ik, "
        "'robo_solve_ik_direction_up_multi_batch')}))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["bad"] == []
    assert report["api"] is True
