"""Demo bringup: the solver, a command echo standing in for the robot, and
robot_state_publisher, so the robot "moves" in RViz to every published solution.

    ros2 launch direction_up_ik demo.launch.py robot:=dual_arm_torso

Add RViz with the RobotModel display (topic /robot_description) and call
/direction_up_ik_node/solve with publish: true, or publish candidates on
/direction_up_ik_node/target.

With config/dual_arm_torso.yaml (markers.enabled: true) the node also serves
interactive markers: add an InteractiveMarkers display with the namespace
/direction_up_ik_markers and drag an end effector's target (the
robot follows; the right-click menu resets the target, switches full / axis / position
constraint and pauses publishing), plus a MarkerArray display on
/direction_up_ik_node/markers for target-vs-current frames and errors. Fixed frame:
base_link.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _robot_nodes(context):
    robot = LaunchConfiguration("robot").perform(context)
    share = get_package_share_directory("direction_up_ik")
    with open(os.path.join(share, "urdf", f"{robot}.urdf"), encoding="utf-8") as handle:
        urdf = handle.read()
    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf}], output="screen"),
        Node(package="direction_up_ik", executable="command_echo", name="command_echo",
             parameters=[{"robot": robot,
                          "command_topic": "/direction_up_ik_node/joint_command"}],
             output="screen"),
    ]


def generate_launch_description():
    share = get_package_share_directory("direction_up_ik")
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="dual_arm_torso",
                              description="bundled robot name"),
        DeclareLaunchArgument("config", default_value="", description="solver parameter YAML"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(share, "launch", "direction_up_ik.launch.py")),
            launch_arguments={"robot": LaunchConfiguration("robot"),
                              "config": LaunchConfiguration("config")}.items()),
        OpaqueFunction(function=_robot_nodes),
    ])
