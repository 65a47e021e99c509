"""Demo bringup: robot_state_publisher, a command echo standing in for the robot and its
controller, and the solver, so the robot "moves" in RViz to every published solution.

    ros2 launch direction_up_ik demo.launch.py robot:=dual_arm_torso [config:=FILE] [namespace:=NS]

Needs robot_state_publisher (``ros-jazzy-robot-state-publisher``) besides this package. Every
executable is looked up before anything starts: when one is missing the launch fails with one
message naming it and leaves no process behind. The robot's processes start first, the solver
last. command_echo listens to the command the solver's configuration publishes (message type,
topic, joint order), so every bundled robot moves. The solver takes its robot model as a cell
does: from robot_state_publisher's robot_description topic (robot_description_topic; it waits
for it and logs so), not from a file of its own.

Add RViz with the RobotModel display (topic robot_description) and call
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

from direction_up_ik.ros.parameter_files import parameter_file_values
from direction_up_ik.ros.launch_support import command_echo_parameters, missing_executables, node_fqn

#: (package, executable) of every process the demo starts.
NEEDED = (("robot_state_publisher", "robot_state_publisher"), ("direction_up_ik", "command_echo"),
          ("direction_up_ik", "direction_up_ik_node"))


#: direction_up_ik.launch.py arguments of the demo's solver: the model from robot_state_publisher
#: (both in the demo's namespace, so the relative name meets).
DEMO_NODE_ARGUMENTS = {"robot_description_topic": "robot_description"}


def demo_actions(context):
    """The demo's actions, robot first, solver last; raises before any starts when an
    executable is missing (launch reports the error and exits 1)."""
    missing = missing_executables(NEEDED)
    if missing:
        raise RuntimeError(f"demo.launch.py needs {', '.join(missing)}, not found on AMENT_PREFIX_PATH "
                           "(robot_state_publisher: install ros-jazzy-robot-state-publisher); nothing started")
    robot = LaunchConfiguration("robot").perform(context)
    namespace = LaunchConfiguration("namespace").perform(context)
    share = get_package_share_directory("direction_up_ik")
    config = LaunchConfiguration("config").perform(context) or os.path.join(share, "config", f"{robot}.yaml")
    fqn = node_fqn(namespace)
    echo = command_echo_parameters(parameter_file_values(config, fqn), fqn)
    with open(os.path.join(share, "urdf", f"{robot}.urdf"), encoding="utf-8") as handle:
        urdf = handle.read()
    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher", namespace=namespace,
             parameters=[{"robot_description": urdf}], output="screen"),
        Node(package="direction_up_ik", executable="command_echo", name="command_echo", namespace=namespace,
             parameters=[{"robot": robot, **echo}], output="screen"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(share, "launch", "direction_up_ik.launch.py")),
            launch_arguments={"robot": robot, "config": config, "namespace": namespace,
                              **DEMO_NODE_ARGUMENTS}.items()),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="dual_arm_torso",
                              description="bundled robot name"),
        DeclareLaunchArgument("config", default_value="",
                              description="solver parameter YAML (default: config/<robot>.yaml)"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of all demo nodes"),
        OpaqueFunction(function=demo_actions),
    ])
