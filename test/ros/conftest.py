"""Fixtures shared by the tests that start real rclpy nodes."""

import os

import pytest

rclpy = pytest.importorskip("rclpy")

from node_harness import Harness  # noqa: E402


@pytest.fixture(scope="module")
def ros_context():
    """One rclpy context per test module, on this machine only."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID", "77")))
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@pytest.fixture
def ros(ros_context):
    """Harness for nodes a test may change (joint states, parameters)."""
    harness = Harness(ros_context)
    yield harness
    harness.close()
