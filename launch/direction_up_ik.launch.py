"""Bring up direction_up_ik_node.

    ros2 launch direction_up_ik direction_up_ik.launch.py robot:=dual_arm_torso \
        config:=/path/to/params.yaml namespace:=left_cell

Arguments:
    robot      bundled robot name (dual_arm_torso, panda_like, ur5_like)
    config     parameter YAML; default: share/direction_up_ik/config/<robot>.yaml
    namespace  ROS namespace of the node (default: none)
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _node(context):
    robot = LaunchConfiguration("robot").perform(context)
    config = LaunchConfiguration("config").perform(context) or os.path.join(
        get_package_share_directory("direction_up_ik"), "config", f"{robot}.yaml")
    return [Node(
        package="direction_up_ik", executable="direction_up_ik_node", name="direction_up_ik_node",
        namespace=LaunchConfiguration("namespace"), output="screen",
        parameters=[config, {"robot": robot}])]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="dual_arm_torso",
                              description="bundled robot name"),
        DeclareLaunchArgument("config", default_value="",
                              description="parameter YAML (default: config/<robot>.yaml)"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
        OpaqueFunction(function=_node),
    ])
