"""The generated msg/srv import next to the source package and round-trip through rclpy.

A node serves ``SolveDirectionUpIK`` and a client in the same process calls
it; the handler answers from the request's fields, so every nested message
type crosses the middleware in both directions.
"""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")

import direction_up_ik  # noqa: E402
from direction_up_ik.msg import (  # noqa: E402
    CandidateResult,
    DirectionUpCandidate,
    DirectionUpTarget,
    EndEffectorError,
    SolverOverrides,
)
from direction_up_ik.srv import SolveDirectionUpIK  # noqa: E402


@pytest.fixture
def ros_context(monkeypatch):
    """A private rclpy context limited to this machine (unless the caller chose otherwise)."""
    if "ROS_AUTOMATIC_DISCOVERY_RANGE" not in os.environ:
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    domain_id = int(os.environ.get("ROS_DOMAIN_ID", "77"))
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


def test_generated_code_merges_into_source_package():
    # A real __init__.py ran (not a namespace package) and the generated
    # modules were found through the package's merged __path__.
    assert direction_up_ik.__file__ is not None
    assert Path(direction_up_ik.__file__).name == "__init__.py"
    import direction_up_ik.srv as srv_module

    srv_dir = str(Path(srv_module.__file__).parent.parent)
    assert srv_dir in [str(Path(p)) for p in direction_up_ik.__path__]


def test_constants_and_defaults():
    assert (DirectionUpTarget.MODE_FULL, DirectionUpTarget.MODE_AXIS, DirectionUpTarget.MODE_POSITION) == (0, 1, 2)
    assert (
        DirectionUpTarget.LOCAL_AXES_DEFAULT,
        DirectionUpTarget.LOCAL_AXES_TCP,
        DirectionUpTarget.LOCAL_AXES_EXPLICIT,
    ) == (0, 1, 2)
    codes = SolveDirectionUpIK.Response
    assert [
        codes.SUCCESS,
        codes.NO_SOLUTION,
        codes.INVALID_REQUEST,
        codes.UNKNOWN_END_EFFECTOR,
        codes.UNKNOWN_JOINT,
        codes.INVALID_FRAME,
        codes.NO_JOINT_STATE,
        codes.JOINT_STATE_OUT_OF_LIMITS,
        codes.REQUEST_TOO_LARGE,
        codes.NUMERICAL_FAILURE,
        codes.INTERNAL_ERROR,
        codes.IN_COLLISION,
        codes.NO_ROBOT_MODEL,
    ] == list(range(13))
    # A default-constructed overrides message leaves every setting unset.
    overrides = SolverOverrides()
    assert overrides.max_iters == 0 and overrides.num_seeds == 0
    assert overrides.position_tol == 0.0 and overrides.time_budget == 0.0
    assert SolveDirectionUpIK.Request().overrides == overrides


def _make_request() -> SolveDirectionUpIK.Request:
    left = DirectionUpTarget(end_effector="left_tcp", mode=DirectionUpTarget.MODE_FULL)
    left.position.x, left.position.y, left.position.z = 0.4, 0.2, 0.9
    left.direction.x = 1.0
    left.up.z = 1.0
    right = DirectionUpTarget(
        end_effector="right_tcp",
        frame_id="base_link",
        mode=DirectionUpTarget.MODE_AXIS,
        local_axes=DirectionUpTarget.LOCAL_AXES_EXPLICIT,
    )
    right.position.x, right.position.y, right.position.z = 0.4, -0.2, 0.9
    right.direction.y = -2.0
    right.local_direction.z = 1.0
    right.local_up.x = 1.0

    request = SolveDirectionUpIK.Request()
    request.candidates = [
        DirectionUpCandidate(targets=[left, right]),
        DirectionUpCandidate(targets=[right, left]),
    ]
    request.active_joints = ["torso", "l1", "r1"]
    request.initial_state.name = ["torso", "l1", "r1"]
    request.initial_state.position = [0.0, 0.5, -0.5]
    request.overrides = SolverOverrides(max_iters=64, position_tol=2e-3, num_seeds=4, time_budget=0.5, random_seed=-1)
    request.publish = True
    return request


def _answer(request: SolveDirectionUpIK.Request, response: SolveDirectionUpIK.Response):
    """Echo the request's structure back, so the client can check what arrived."""
    response.joint_names = list(request.initial_state.name)
    for index, candidate in enumerate(request.candidates):
        result = CandidateResult(
            joint_positions=[p + index for p in request.initial_state.position],
            success=index == 1,
            cost=0.25 if index == 1 else math.inf,
            iterations=request.overrides.max_iters,
            stop_reason="converged" if index == 1 else "max_iters",
        )
        result.errors = [
            EndEffectorError(
                end_effector=target.end_effector,
                position_error=target.position.x,
                direction_error=target.direction.y,
                up_error=math.nan if target.mode != DirectionUpTarget.MODE_FULL else 0.0,
            )
            for target in candidate.targets
        ]
        response.results.append(result)
    response.success = True
    response.best_index = 1
    response.error_code = SolveDirectionUpIK.Response.SUCCESS
    response.message = f"publish={request.publish} seeds={request.overrides.num_seeds}"
    return response


def test_service_round_trip(ros_context):
    from rclpy.executors import SingleThreadedExecutor

    name = f"/test_direction_up_ik_{uuid.uuid4().hex[:8]}/solve"
    server_node = rclpy.create_node("direction_up_ik_test_server", context=ros_context)
    client_node = rclpy.create_node("direction_up_ik_test_client", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    try:
        server_node.create_service(SolveDirectionUpIK, name, _answer)
        client = client_node.create_client(SolveDirectionUpIK, name)
        executor.add_node(server_node)
        executor.add_node(client_node)
        # Both waits only catch a hang (milliseconds on a quiet machine, issue 28).
        assert client.wait_for_service(timeout_sec=120.0), "service did not appear"

        future = client.call_async(_make_request())
        executor.spin_until_future_complete(future, timeout_sec=120.0)
        assert future.done(), "no response within 120 s"
        response = future.result()
    finally:
        executor.shutdown()
        client_node.destroy_node()
        server_node.destroy_node()

    assert response.success is True
    assert response.error_code == SolveDirectionUpIK.Response.SUCCESS
    assert response.best_index == 1
    assert list(response.joint_names) == ["torso", "l1", "r1"]
    assert response.message == "publish=True seeds=4"
    assert len(response.results) == 2

    failed, best = response.results
    assert list(failed.joint_positions) == pytest.approx([0.0, 0.5, -0.5])
    assert list(best.joint_positions) == pytest.approx([1.0, 1.5, 0.5])
    assert (failed.success, best.success) == (False, True)
    assert math.isinf(failed.cost) and best.cost == 0.25
    assert (failed.stop_reason, best.stop_reason) == ("max_iters", "converged")
    assert best.iterations == 64

    assert [e.end_effector for e in failed.errors] == ["left_tcp", "right_tcp"]
    assert [e.end_effector for e in best.errors] == ["right_tcp", "left_tcp"]
    left_error, right_error = failed.errors
    assert left_error.position_error == 0.4 and left_error.direction_error == 0.0
    assert left_error.up_error == 0.0
    assert right_error.direction_error == -2.0
    assert math.isnan(right_error.up_error)
