"""Shared fixtures: bundled robot models (fresh per test: tests may move their joints) and helpers.

``make test`` runs the suite on several pytest-xdist workers, each in a ROS domain of its own
(``workers.py``).
"""

from __future__ import annotations

import pytest

import workers


# Before any test module reads ROS_DOMAIN_ID (node_harness.domain_id, the rclpy contexts).
workers.set_worker_domain()

from direction_up_ik.core.backend import KERNELS_READY, kernel_state, warm_up_backend  # noqa: E402
from direction_up_ik.robots import load_robot  # noqa: E402


def pytest_collection_modifyitems(items):
    """Tests marked slow (a colcon build, the driver smoke runs) first: on several workers they
    then overlap the rest of the suite instead of running alone at its end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: otherwise as collected


@pytest.fixture(autouse=True)
def compiled_kernels(request):
    """The compiled kernels, ready before each test: "auto" solves with them in the test
    process (a cold cache compiles them here, once; core/backend.py). Tests marked
    without_kernels (a colcon build) start at once, so on a fresh clone they run while the
    kernels compile instead of waiting for them."""
    if request.node.get_closest_marker("without_kernels") is None and kernel_state() != KERNELS_READY:
        warm_up_backend()


@pytest.fixture
def panda():
    return load_robot("panda_like")


@pytest.fixture
def ur5():
    return load_robot("ur5_like")


@pytest.fixture
def dual_arm():
    return load_robot("dual_arm_torso")
