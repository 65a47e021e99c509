"""Bring up direction_up_ik_node.

    ros2 launch direction_up_ik direction_up_ik.launch.py robot:=dual_arm_torso \
        config:=/path/to/params.yaml namespace:=left_cell

The robot model, in a cell: the bundled ``robot``, a file, or the running
robot_state_publisher's topic (the config's end effectors must name links of it)::

    ros2 launch direction_up_ik direction_up_ik.launch.py config:=cell.yaml \
        urdf_path:=/path/ur.urdf.xacro xacro_args:="ur_type:=ur5e name:=ur"
    ros2 launch direction_up_ik direction_up_ik.launch.py config:=cell.yaml \
        robot_description_topic:=/robot_description

Arguments (direction_up_ik/ros/launch_support.py NODE_LAUNCH_ARGUMENTS):
    robot                    bundled robot name (dual_arm_torso, panda_like, ur5_like)
    config                   parameter YAML; default: share/direction_up_ik/config/<robot>.yaml
    namespace                ROS namespace of the node (default: none)
    urdf_path                URDF or .xacro file (instead of the bundled robot)
    xacro_args               arguments of a .xacro urdf_path, space-separated name:=value
    robot_description_topic  std_msgs/String topic of the URDF, e.g. /robot_description
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from direction_up_ik.ros.launch_support import NODE_LAUNCH_ARGUMENTS, node_parameters


def _node(context):
    arguments = {name: LaunchConfiguration(name).perform(context) for name in NODE_LAUNCH_ARGUMENTS}
    config = arguments["config"] or os.path.join(
        get_package_share_directory("direction_up_ik"), "config", f"{arguments['robot']}.yaml")
    return [Node(
        package="direction_up_ik", executable="direction_up_ik_node", name="direction_up_ik_node",
        namespace=LaunchConfiguration("namespace"), output="screen",
        parameters=node_parameters(arguments, config))]


def generate_launch_description():
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in NODE_LAUNCH_ARGUMENTS.items()),
        OpaqueFunction(function=_node),
    ])
