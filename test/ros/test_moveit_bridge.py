"""The node's GetPositionIK bridge as MoveIt calls it (issue 29): groups from the SRDF parameter,
the timeout cap (moveit.max_timeout) and SIGINT while a long request runs. moveit_msgs is not
installable here, so requests go to the bridge's callback as message-shaped objects."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("geometry_msgs.msg")

from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from direction_up_ik.groups import MoveItErrorCode  # noqa: E402
from direction_up_ik.ros.config import PARAMETER_BY_NAME, ConfigError, config_from_values  # noqa: E402
from direction_up_ik.ros.node import DirectionUpIKNode  # noqa: E402

from node_harness import REPO, PROCESS_TIMEOUT, private_domain_id, subprocess_env, wait_until  # noqa: E402

SRDF = """<robot name="panda_like">
  <group name="panda_arm"><chain base_link="panda_link0" tip_link="panda_link8"/></group>
</robot>"""
ARM = [f"panda_joint{i}" for i in range(1, 8)]
MID = [0.0, 0.0, 0.0, -1.5708, 0.0, 1.8675, 0.0]


def _response():
    return SimpleNamespace(solution=SimpleNamespace(joint_state=SimpleNamespace(name=[], position=[])),
                           error_code=SimpleNamespace(val=0, message=""))


def _request(link, x, timeout_sec=0):
    stamped = PoseStamped()
    stamped.header.frame_id = "panda_link0"
    stamped.pose.position.x, stamped.pose.position.z, stamped.pose.orientation.w = x, 0.3, 1.0
    ik = SimpleNamespace(group_name="panda_arm", robot_state=SimpleNamespace(
        joint_state=SimpleNamespace(name=ARM, position=MID)), constraints=SimpleNamespace(), avoid_collisions=True,
        ik_link_name=link, pose_stamped=stamped, ik_link_names=[], pose_stamped_vector=[],
        timeout=SimpleNamespace(sec=timeout_sec, nanosec=0))
    return SimpleNamespace(ik_request=ik)


def test_bridge_groups_from_robot_description_semantic_or_a_file(ros, tmp_path):
    """A kinematics.yaml without base_frame/tip_frames: the chain comes from the SRDF parameter
    (or the file parameter), and the chain's tip panda_link8 is served."""
    kinematics = tmp_path / "kinematics.yaml"
    kinematics.write_text("panda_arm: {kinematics_solver_timeout: 0.5}\n")
    srdf_file = tmp_path / "panda.srdf"
    srdf_file.write_text(SRDF)
    for params in ({"robot_description_semantic": SRDF}, {"moveit.srdf_path": str(srdf_file)}):
        node = ros.start_node("panda_like", params={"moveit.kinematics_yaml": str(kinematics), **params}).node
        solver = node._group_solvers["panda_arm"]
        assert (solver.get_base_frame(), solver.get_link_names()) == ("panda_link0", ["panda_link8"])
        response = node._on_get_position_ik(_request("panda_link8", 0.5), _response())
        assert response.error_code.val == MoveItErrorCode.SUCCESS, response.error_code.message
        assert response.solution.joint_state.name == ARM and len(response.solution.joint_state.position) == 7
        response = node._on_get_position_ik(_request("panda_link8", 5.0), _response())  # out of reach
        assert response.error_code.val == MoveItErrorCode.NO_IK_SOLUTION
        assert response.solution.joint_state.name == [] and response.solution.joint_state.position == []
        assert "reach" in response.error_code.message


def test_srdf_and_timeout_cap_parameters_are_checked(ros_context, tmp_path):
    spec = PARAMETER_BY_NAME["moveit.max_timeout"]
    assert (spec.min_value, spec.max_value, spec.read_only) == (0.001, 60.0, False)
    assert config_from_values({"moveit.max_timeout": 2.0}).moveit_max_timeout == 2.0
    with pytest.raises(ConfigError, match="moveit.max_timeout"):
        config_from_values({"moveit.max_timeout": 3600.0})
    with pytest.raises(ConfigError, match="moveit.max_timeout.*must be finite"):
        config_from_values({"moveit.max_timeout": float("nan")})
    kinematics = tmp_path / "kinematics.yaml"
    kinematics.write_text("panda_arm: {}\n")
    for params, parameter in (([], "moveit.kinematics_yaml"),  # no SRDF, no base/tips
                              ([Parameter("moveit.srdf_path", value="/nope.srdf")], "moveit.srdf_path"),
                              ([Parameter("robot_description_semantic", value="<robot")],
                               "robot_description_semantic")):
        with pytest.raises(ConfigError, match=parameter.replace(".", r"\.")):
            DirectionUpIKNode(context=ros_context, parameter_overrides=[
                Parameter("robot", value="panda_like"), Parameter("moveit.kinematics_yaml", value=str(kinematics)),
                *params])


# A node process whose bridge gets one 3600 s request for an unreachable pose within the reach
# bound (so that it searches), from a timer, i.e. from the executor like a service call.
DRIVER = textwrap.dedent("""
    import sys, time
    from types import SimpleNamespace
    sys.path[:0] = {test_dirs!r}
    from test_moveit_bridge import _request, _response
    from direction_up_ik.ros import node as node_module

    class Driven(node_module.DirectionUpIKNode):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._timer = self.create_timer(0.5, self._long_request)

        def _long_request(self):
            self._timer.cancel()
            far = 0.97 * float(self._group_solvers["panda_arm"].reach_bounds()[0])
            print("long request started", flush=True)
            t0 = time.monotonic()
            response = self._on_get_position_ik(_request("panda_hand", far, timeout_sec=3600), _response())
            print(f"long request answered {{response.error_code.val}} after {{time.monotonic() - t0:.2f}} s",
                  flush=True)

    node_module.DirectionUpIKNode = Driven
    sys.exit(node_module.main(sys.argv))
""")


def test_sigint_stops_the_node_while_a_long_request_runs():
    """moveit.max_timeout (here 3 s) caps the 3600 s request; SIGINT sent while it runs stops the
    node with exit code 0 once it is answered. The 120 s deadline only catches a hang: uncapped,
    the request would hold the node for an hour."""
    script = DRIVER.format(test_dirs=[str(REPO / "test" / "ros"), str(REPO / "test")])
    cmd = [sys.executable, "-c", script, "--ros-args", "-p", "robot:=panda_like",
           "-p", f"moveit.kinematics_yaml:={REPO / 'config' / 'panda_like_kinematics.yaml'}",
           "-p", "moveit.max_timeout:=3.0"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=subprocess_env(private_domain_id()), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        import threading
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        reader.start()
        wait_until(lambda: "long request started" in "".join(lines) or proc.poll() is not None,
                   PROCESS_TIMEOUT, "the long request to start", period=0.05)
        assert "long request started" in "".join(lines), "".join(lines)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
        reader.join(timeout=5.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5.0)
    output = "".join(lines)
    assert code == 0, output
    assert f"long request answered {MoveItErrorCode.NO_IK_SOLUTION}" in output, output
    assert "shutting down" in output and "Traceback" not in output, output
